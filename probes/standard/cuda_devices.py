"""CUDA devices: count, kernels for each card's architecture, a small kernel, driver/runtime/cuDNN/NCCL versions."""

import ctypes

from probes.api import Fail, probe
from probes.standard._util import first_line

REPRO = """import torch
print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_arch_list())
for i in range(torch.cuda.device_count()):
    print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
    print((torch.arange(1024, device=i, dtype=torch.float32) ** 2).sum().item())   # 357389824.0
"""


def driver_version():
    """The CUDA driver's version as "major.minor", from libcuda itself (None without a driver)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        value = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value:
            return "%d.%d" % (value.value // 1000, (value.value % 1000) // 10)
    return None


def arch_supported(capability, arch_list):
    """sm_XY for the card, or a compute_XY PTX at or below it that the driver can JIT."""
    major, minor = capability
    if "sm_%d%d" % (major, minor) in arch_list:
        return "sm_%d%d" % (major, minor)
    ptx = [a for a in arch_list if a.startswith("compute_")]
    for arch in sorted(ptx, key=lambda a: int(a.split("_")[1].rstrip("af")), reverse=True):
        digits = int(arch.split("_")[1].rstrip("af"))
        if digits // 10 == major and digits <= major * 10 + minor or digits // 10 < major:
            return arch + " (PTX JIT)"
    # Same major, lower minor: binary compatible within a major version (e.g. sm_86 runs sm_80 cubins).
    same_major = [a for a in arch_list if a.startswith("sm_") and a[3:].rstrip("af").isdigit()
                  and int(a[3:].rstrip("af")) // 10 == major and int(a[3:].rstrip("af")) % 10 <= minor]
    return (sorted(same_major)[-1] + " (binary compatible)") if same_major else None


@probe("cuda_devices", doc="CUDA device count, the card's arch in get_arch_list(), a small kernel, driver vs "
                           "runtime, cuDNN and NCCL versions (skip without CUDA)")
def cuda_devices(ctx):
    import torch

    ctx.require_cuda()
    arch_list = list(torch.cuda.get_arch_list())
    facts = {"count": torch.cuda.device_count(), "runtime": torch.version.cuda, "driver": driver_version(),
             "arch_list": arch_list, "devices": []}
    runtime, driver = facts["runtime"], facts["driver"]
    if runtime and driver and int(driver.split(".")[0]) < int(runtime.split(".")[0]):
        raise Fail("CUDA driver %s is older than the runtime %s torch was built with" % (driver, runtime),
                   observed=driver, expected=">= %s" % runtime, repro=REPRO, evidence=facts)
    for index in range(facts["count"]):
        capability = tuple(torch.cuda.get_device_capability(index))
        name = torch.cuda.get_device_name(index)
        supported = arch_supported(capability, arch_list)
        facts["devices"].append({"index": index, "name": name, "capability": "%d.%d" % capability,
                                 "kernels": supported})
        if supported is None:
            raise Fail("%s (sm_%d%d) has no kernels in this build; is_available() says True anyway"
                       % ((name,) + capability), observed=arch_list, expected="sm_%d%d" % capability,
                       repro=REPRO, evidence=facts)
        try:
            total = (torch.arange(1024, device="cuda:%d" % index, dtype=torch.float32) ** 2).sum().item()
            torch.cuda.synchronize(index)
        except Exception as exc:  # "no kernel image is available for execution on the device"
            raise Fail("a small kernel failed on %s: %s" % (name, first_line(exc)), observed=first_line(exc),
                       expected="357389824.0", repro=REPRO, evidence=facts)
        if total != 357389824.0:
            raise Fail("a small kernel computed the wrong sum on %s" % name, observed=total, expected=357389824.0,
                       repro=REPRO, evidence=facts)
    try:
        facts["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as exc:
        facts["cudnn"] = first_line(exc)
    try:
        nccl = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception as exc:
        facts["nccl"] = first_line(exc)
    return facts
