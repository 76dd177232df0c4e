"""Tiny pure-Python fake ``torch``/``torchvision`` packages for the probe runner's tests.

They import in milliseconds and expose just what ``install_sanity`` and
``lazy_cuda_init`` read. ``query_cuda_at_import=True`` reproduces the torch 1.12.0
bug: ``import torch`` calls ``torch.cuda.device_count()`` -> ``torch._C._cuda_getDeviceCount()``.
"""

import os
import textwrap

TORCH_INIT = """
__version__ = {version!r}
from torch import _C
from torch import version
from torch import cuda


class Tensor(object):
    def __init__(self, data):
        self.data = data

    def tolist(self):
        return list(self.data)


def tensor(data):
    return Tensor(data)

{extra}
"""

TORCH_C = """
def _cuda_getDeviceCount():
    return 0


def _cuda_init():
    raise RuntimeError("Found no NVIDIA driver on your system.")
"""

TORCH_CUDA = """
import torch


def device_count():
    return torch._C._cuda_getDeviceCount()


def is_available():
    return device_count() > 0


def _lazy_init():
    torch._C._cuda_init()
"""

TORCHVISION_INIT = """
__version__ = {version!r}
from torchvision import ops
"""

TORCHVISION_OPS = """
import torch


def nms(boxes, scores, iou_threshold):
    return torch.tensor([0, 2])
"""


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(text))


def make_fake_torch(
    root,
    version="2.5.1+cpu",
    cuda=None,
    query_cuda_at_import=False,
    torchvision=None,
    torchvision_import_error=None,
    torchvision_segfaults=False,
):
    """Write fake packages under ``root`` (a PYTHONPATH entry) and return ``root``.

    ``torchvision``: its version, or None for no torchvision. ``torchvision_import_error``:
    a message that ``import torchvision`` raises as RuntimeError (a mismatched pair).
    ``torchvision_segfaults``: ``import torchvision`` kills the interpreter with SIGSEGV.
    """
    root = str(root)
    extra = "cuda.device_count()  # the 1.12.0 bug\n" if query_cuda_at_import else ""
    _write(
        os.path.join(root, "torch", "__init__.py"), TORCH_INIT.format(version=version, extra=extra)
    )
    _write(os.path.join(root, "torch", "_C.py"), TORCH_C)
    _write(os.path.join(root, "torch", "version.py"), "cuda = %r\nhip = None\n" % (cuda,))
    _write(os.path.join(root, "torch", "cuda", "__init__.py"), TORCH_CUDA)
    _dist_info(root, "torch", version)
    if torchvision is not None:
        init = TORCHVISION_INIT.format(version=torchvision)
        if torchvision_import_error:
            init += "raise RuntimeError(%r)\n" % torchvision_import_error
        if torchvision_segfaults:
            init += "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
        _write(os.path.join(root, "torchvision", "__init__.py"), init)
        _write(os.path.join(root, "torchvision", "ops.py"), TORCHVISION_OPS)
        _dist_info(root, "torchvision", torchvision)
    return root


def _dist_info(root, name, version):
    """Metadata so that importlib.metadata.version(name) finds the fake package."""
    path = os.path.join(root, "%s-%s.dist-info" % (name, version.replace("-", "_")), "METADATA")
    _write(path, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
