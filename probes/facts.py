"""Facts about the interpreter, platform, packages and GPU, for the cell result.

Everything except ``gpu_facts`` works without importing torch. ``gpu_facts`` imports
torch and may initialise CUDA, so the runner calls it in a forked child (the zygote
stays CUDA-clean) or in a throwaway subprocess.
"""

import os
import platform
import socket
import sys

PACKAGES = ("torch", "torchvision", "numpy")


def python_facts():
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "implementation": sys.implementation.name,
    }


def platform_facts():
    libc_name, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "release": platform.release(),
        "libc": ("%s %s" % (libc_name, libc_version)).strip() if libc_name else "",
        "host": socket.gethostname(),
    }


def installed_version(name):
    """The installed distribution's version from its metadata, or None (never imports it)."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


def package_facts(names=PACKAGES):
    return {name: installed_version(name) for name in names}


def driver_version():
    """The NVIDIA kernel driver version from /proc, without touching CUDA; None without a driver."""
    try:
        with open("/proc/driver/nvidia/version") as handle:
            text = handle.read()
    except OSError:
        return None
    for token in text.split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return token
    return None


def physical_gpu_count():
    """GPUs the driver knows about (/proc/driver/nvidia/gpus), without touching CUDA."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def gpu_facts():
    """CUDA facts as torch sees them. Initialises CUDA: call it in a throwaway process."""
    facts = {"cuda_available": False, "torch_cuda": None, "devices": [], "driver": driver_version()}
    if installed_version("torch") is None:
        return facts
    try:
        import torch
    except Exception as exc:
        facts["error"] = "import torch failed: %s: %s" % (type(exc).__name__, str(exc).splitlines()[:1])
        return facts
    version = getattr(torch, "version", None)
    facts["torch_cuda"] = getattr(version, "cuda", None)
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            for index in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(index)
                facts["devices"].append({"index": index, "name": torch.cuda.get_device_name(index),
                                         "capability": "%d.%d" % (major, minor)})
            arch_list = getattr(torch.cuda, "get_arch_list", None)
            if arch_list is not None:
                facts["arch_list"] = list(arch_list())
            cudnn = getattr(torch.backends, "cudnn", None)
            if cudnn is not None and cudnn.is_available():
                facts["cudnn"] = cudnn.version()
    except Exception as exc:
        facts["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[:1])
    return facts
