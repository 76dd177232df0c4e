"""Checkpoints the way many training repositories write them: the weights plus the run's
options (an ``argparse.Namespace``), read back with a plain ``torch.load(path)``.

torch 2.6 changed ``torch.load``'s default to ``weights_only=True``, which refuses the
Namespace: resuming breaks. That is what torch-matrix finds in tests/test_checkpoint.py.
"""

import torch


def save_checkpoint(path, model, epoch, opt):
    torch.save({"epoch": epoch, "model": model.state_dict(), "opt": opt}, path)


def resume(path, model):
    """Load a checkpoint into ``model``; returns (next epoch, the saved options)."""
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    return ckpt["epoch"] + 1, ckpt["opt"]
