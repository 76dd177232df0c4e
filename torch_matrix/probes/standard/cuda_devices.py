"""CUDA devices: count, kernels for each card's architecture, a small kernel, driver/runtime/cuDNN/NCCL versions."""

import collections
import ctypes

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import first_line

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


ArchVerdict = collections.namedtuple("ArchVerdict", "kernels reason")


def _arch_number(arch):
    """``sm_90a`` -> (90, "a"), ``compute_120`` -> (120, ""); None for anything else."""
    digits = arch.split("_", 1)[1] if "_" in arch else ""
    suffix = digits[len(digits.rstrip("af")) :]
    digits = digits[: len(digits) - len(suffix)]
    return (int(digits), suffix) if digits.isdigit() else None


_OWN_CODE_ONLY = (53, 62, 72, 87)  # integrated (Jetson) parts: torch's DEVICE_REQUIREMENT


def _cubin_fits(number, suffix, card):
    """A same-major cubin that runs on ``card`` (PyTorch's DEVICE_REQUIREMENT in torch/cuda/__init__.py):
    not an arch-specific ``a`` one, not across an integrated part, sm_101 code on 10.1 and 11.0 only.
    tests/test_hardware.py holds this to torch_matrix.judge.hardware's rule."""
    if suffix == "a" or number in _OWN_CODE_ONLY:
        return number == card
    if number == 101:
        return card in (101, 110)
    if card in _OWN_CODE_ONLY or card == 101:
        return False
    return number // 10 == card // 10 and number <= card


def arch_verdict(capability, arch_list):
    """Whether a build whose ``torch.cuda.get_arch_list()`` is ``arch_list`` has kernels for a
    card of compute capability ``capability`` (major, minor). Pure: a function of the two.

    In order of preference:

    - ``sm_XY`` for the card itself (``sm_90a``, arch-specific, counts only for exactly 9.0);
    - ``sm_XZ`` of the same major with Z <= Y: cubins are binary compatible within a major
      (``sm_86`` runs ``sm_80`` code; PyTorch's own check says the same, pytorch#45130);
    - ``compute_XZ`` PTX of the same major with Z <= Y, which the driver JIT-compiles.

    Last, PTX of an *older* major (a cu102 build's ``compute_37`` on an sm_90 card): NVIDIA's PTX is
    forward compatible, so the driver can JIT it, and the small kernel is tried (the device decides),
    although PyTorch itself warns that such a card "is not compatible with the current PyTorch
    installation" (``torch.cuda._check_cubins`` looks for an ``sm_`` of the card's major only) and
    every kernel is JIT-compiled at first use. The same rule as ``torch_matrix.judge.hardware`` (ptx-jit),
    so the static verdict and this probe can be compared on a device. Returns
    ``ArchVerdict(kernels, reason)``; ``kernels`` is None when the build has nothing for the card.
    """
    major, minor = int(capability[0]), int(capability[1])
    card = major * 10 + minor
    cubins, ptx = [], []
    for arch in arch_list:
        number = _arch_number(arch)
        if number is None:
            continue
        if arch.startswith("sm_"):
            cubins.append((number, arch))
        elif arch.startswith("compute_"):
            ptx.append((number, arch))
    for (number, suffix), arch in cubins:
        if number == card:
            return ArchVerdict(arch, "%s is in the build" % arch)
    same_major = sorted(
        (number, arch) for (number, suffix), arch in cubins if _cubin_fits(number, suffix, card)
    )
    if same_major:
        arch = same_major[-1][1]
        return ArchVerdict(
            arch + " (binary compatible)",
            "no sm_%d; %s cubins run on compute capability %d.%d" % (card, arch, major, minor),
        )
    jit = sorted(
        (number, arch)
        for (number, suffix), arch in ptx
        if number // 10 == major and number <= card and (suffix != "a" or number == card)
    )
    if jit:
        arch = jit[-1][1]
        return ArchVerdict(
            arch + " (PTX JIT)", "no sm_%d cubin; the driver JIT-compiles %s PTX" % (card, arch)
        )
    older = sorted(
        (number, arch)
        for (number, suffix), arch in ptx
        if number < card and suffix != "a" and (suffix != "f" or number // 10 == major)
    )
    if older:
        # PTX is forward compatible (NVIDIA): the driver can JIT older-generation PTX for this card, so
        # the kernel is tried and the device decides. PyTorch's own check still warns "not compatible"
        # (it counts a card's own major only); torch_matrix.judge.hardware says ptx-jit here too.
        arch = older[-1][1]
        return ArchVerdict(
            arch + " (PTX JIT, older generation)",
            "no sm_%dx cubin; the driver JIT-compiles %s PTX of an older generation, which PyTorch "
            "itself calls not compatible with this card" % (major, arch),
        )
    reason = "no sm_%d (or other sm_%dx cubin) in the build's arch list [%s]" % (
        card,
        major,
        ", ".join(arch_list),
    )
    return ArchVerdict(None, reason)


def arch_supported(capability, arch_list):
    """The kernels a card gets from this build (``sm_90``, ``sm_80 (binary compatible)``,
    ``compute_90 (PTX JIT)``), or None when it has none: ``arch_verdict(...).kernels``."""
    return arch_verdict(capability, arch_list).kernels


def _check_device(torch, index, arch_list, facts):
    """One device: its arch has kernels in this build and a small kernel computes the right sum."""
    capability = tuple(torch.cuda.get_device_capability(index))
    name = torch.cuda.get_device_name(index)
    verdict = arch_verdict(capability, arch_list)
    facts["devices"].append(
        {
            "index": index,
            "name": name,
            "capability": "%d.%d" % capability,
            "kernels": verdict.kernels,
            "arch_reason": verdict.reason,
        }
    )
    if verdict.kernels is None:
        raise Fail(
            "%s (sm_%d%d) has no kernels in this build; is_available() says True anyway: %s"
            % ((name,) + capability + (verdict.reason,)),
            observed=arch_list,
            expected="sm_%d%d" % capability,
            repro=REPRO,
            evidence=facts,
        )
    try:
        total = (
            (torch.arange(1024, device="cuda:%d" % index, dtype=torch.float32) ** 2).sum().item()
        )
        torch.cuda.synchronize(index)
    except Exception as exc:  # "no kernel image is available for execution on the device"
        raise Fail(
            "a small kernel failed on %s: %s" % (name, first_line(exc)),
            observed=first_line(exc),
            expected="357389824.0",
            repro=REPRO,
            evidence=facts,
        )
    if total != 357389824.0:
        raise Fail(
            "a small kernel computed the wrong sum on %s" % name,
            observed=total,
            expected=357389824.0,
            repro=REPRO,
            evidence=facts,
        )


@probe(
    "cuda_devices",
    doc="CUDA device count, the card's arch in get_arch_list(), a small kernel, driver vs "
    "runtime, cuDNN and NCCL versions (skip without CUDA)",
)
def cuda_devices(ctx):
    import torch

    ctx.require_cuda()
    arch_list = list(torch.cuda.get_arch_list())
    facts = {
        "count": torch.cuda.device_count(),
        "runtime": torch.version.cuda,
        "driver": driver_version(),
        "arch_list": arch_list,
        "devices": [],
    }
    runtime, driver = facts["runtime"], facts["driver"]
    if runtime and driver and int(driver.split(".")[0]) < int(runtime.split(".")[0]):
        raise Fail(
            "CUDA driver %s is older than the runtime %s torch was built with" % (driver, runtime),
            observed=driver,
            expected=">= %s" % runtime,
            repro=REPRO,
            evidence=facts,
        )
    for index in range(facts["count"]):
        _check_device(torch, index, arch_list, facts)
    try:
        facts["cudnn"] = (
            torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        )
    except Exception as exc:
        facts["cudnn"] = first_line(exc)
    try:
        nccl = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception as exc:
        facts["nccl"] = first_line(exc)
    return facts
