"""Device selection the way yolov5's ``select_device`` did it: ``import torch`` at the top of
the module, ``CUDA_VISIBLE_DEVICES`` set later, when the user's ``--device`` is known.

torch 1.12.0 initialised CUDA during ``import torch``, so the variable set afterwards was
ignored and multi-GPU users trained on the wrong card; yolov5 pinned ``torch!=1.12.0``.
"""

import os

import torch


def select_device(device=""):
    """``"cpu"``, ``"0"``, ``"0,1"`` or ``""`` (every visible device)."""
    cpu = device.lower() == "cpu"
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # hide every GPU from torch
    elif device:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    return "cuda:0" if not cpu and torch.cuda.is_available() else "cpu"
