"""Will this build run on that GPU with that driver? Judged from the build's own facts, on CPU.

Pure: a function of a build's facts (what ``torch_matrix/probes/facts.py`` reads from the installed torch:
``torch._C._cuda_getArchFlags()``, ``torch.version.cuda``, torchvision's CUDA version) and a
target (a GPU's compute capability, an NVIDIA driver version, or both). No torch, no device.

The architecture rule follows PyTorch's own check, ``torch/cuda/__init__.py`` (read in torch
2.13.0: ``DEVICE_REQUIREMENT``, ``_check_capability``, ``_check_cubins``; written here, not
copied): a cubin (``sm_XY``) runs on a card of the same major whose minor is at least Y, except
that the integrated parts (5.3, 6.2, 7.2, 8.7: Jetson) run only their own code and ``sm_101``
code runs on 10.1 and 11.0 only. Arch-specific cubins (``sm_90a``) run only on exactly that
capability (NVIDIA's CUDA C++ Programming Guide, "Feature availability": ``a`` features are not
forward compatible); family ones (``sm_100f``) on the same major with a minor at least theirs.
PTX (``compute_XY``) is JIT-compiled by the driver for any card of capability X.Y or newer
(NVIDIA's "Application compatibility": PTX is forward compatible); PyTorch's ``_check_cubins``
still warns "not compatible" when no cubin of the card's major exists, and the reason says so.

The driver rule's tables and floors are ``torch_matrix.judge.drivers``' (NVIDIA's release notes);
below the toolkit driver of a runtime it runs with minor version compatibility, which does not
cover JIT-compiling PTX that a newer toolkit produced, so a build that needs PTX JIT there is
judged ``driver-too-old``. A target (a GPU by name or capability, a driver) is
``torch_matrix.judge.gpus``'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torch_matrix.judge.drivers import (
    assumed,
    at_least,
    card_driver_floor,
    driver_minimum,
    driver_numbers,
)
from torch_matrix.judge.gpus import (
    Gpu,
    Target,
    TargetError,
    capability_text,
    parse_driver,
)
from torch_matrix.vocab.records import StrEnum
from torch_matrix.vocab.versions import version_key


class Hardware(StrEnum):
    """What a build does on a target, best first."""

    NATIVE = "native"  # a cubin for the card (or a binary-compatible one of its major)
    PTX_JIT = "ptx-jit"  # no cubin: the driver JIT-compiles PTX at first use
    NO_KERNEL_IMAGE = "no-kernel-image"  # nothing for the card: "no kernel image is available ..."
    DRIVER_TOO_OLD = "driver-too-old"  # the driver cannot run this CUDA runtime (or JIT its PTX)
    NO_CUDA = "no-cuda"  # a CPU-only (or ROCm) build: no CUDA at all


RUNS = (Hardware.NATIVE, Hardware.PTX_JIT)  # the verdicts under which the build runs on the target
NO_KERNEL_MESSAGE = "no kernel image is available for execution on the device"

_OWN_CODE_ONLY = frozenset(
    {53, 62, 72, 87}
)  # integrated (Jetson) parts: no cubin of the major but theirs


def cuda_text(value: Any) -> str:
    """A CUDA version as "X.Y" from ``torch.version.cuda`` ("12.1") or torchvision's int (12010);
    "" for none (None, -1, 0: a CPU build)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return f"{value // 1000}.{(value % 1000) // 10}" if value > 0 else ""
    text = str(value).strip()
    match = re.match(r"^(\d+)\.(\d+)", text)
    return f"{match.group(1)}.{match.group(2)}" if match else ""


@dataclass(frozen=True)
class BuildFacts:
    """What a cell's torch (and torchvision) were built for, as ``torch_matrix/probes/facts.py`` read it."""

    torch: str = ""
    cuda: str = ""  # torch.version.cuda ("" for a CPU build)
    hip: str = ""  # torch.version.hip ("" unless ROCm)
    arch_list: tuple[str, ...] = ()  # torch._C._cuda_getArchFlags().split()
    torchvision: str = ""
    torchvision_cuda: str = ""  # torch.ops.torchvision._cuda_version() as "X.Y"; "" none / CPU
    error: str = ""  # why the facts could not be read (then nothing is judged)

    @classmethod
    def from_facts(cls, data: Mapping[str, Any]) -> "BuildFacts":
        flags = data.get("arch_flags")
        arch = tuple(data.get("arch_list") or (flags.split() if isinstance(flags, str) else ()))
        tv_cuda = data.get("torchvision_ops_cuda", data.get("torchvision_cuda"))
        return cls(
            torch=str(data.get("torch") or ""),
            cuda=cuda_text(data.get("torch_cuda")),
            hip=str(data.get("torch_hip") or ""),
            arch_list=arch,
            torchvision=str(data.get("torchvision") or ""),
            torchvision_cuda=cuda_text(tv_cuda),
            error=str(data.get("error") or ""),
        )

    @property
    def judgeable(self) -> bool:
        return not self.error and bool(self.torch) and (not self.cuda or bool(self.arch_list))


@dataclass(frozen=True)
class TargetVerdict:
    target: str
    verdict: Hardware
    reason: str

    @property
    def runs(self) -> bool:
        return self.verdict in RUNS

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "verdict": str(self.verdict), "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TargetVerdict":
        return cls(
            target=str(data["target"]),
            verdict=Hardware(data["verdict"]),
            reason=str(data["reason"]),
        )


def _parse_arch(entry: str) -> tuple[str, int, str] | None:
    """``sm_90a`` -> ("sm", 90, "a"); ``compute_120`` -> ("compute", 120, ""); None otherwise."""
    match = re.fullmatch(r"(sm|compute)_(\d{2,3})([af]?)", entry.strip())
    return (match.group(1), int(match.group(2)), match.group(3)) if match else None


def cubin_runs(code: int, suffix: str, device: int) -> bool:
    """Whether an ``sm_<code><suffix>`` cubin runs on a card of capability ``device``."""
    if suffix == "a" or code in _OWN_CODE_ONLY:
        return device == code
    if code == 101:  # Thor's code: 10.1, renamed 11.0 from CUDA 13 (torch's DEVICE_REQUIREMENT)
        return device in (101, 110)
    if device in _OWN_CODE_ONLY or device == 101:
        return False
    return device // 10 == code // 10 and device % 10 >= code % 10


def ptx_runs(code: int, suffix: str, device: int) -> bool:
    """Whether the driver can JIT ``compute_<code><suffix>`` PTX for capability ``device``."""
    if suffix == "a":
        return device == code
    if suffix == "f":
        return device // 10 == code // 10 and device >= code
    return device >= code


def arch_judgement(capability: int, arch_list: Iterable[str]) -> tuple[Hardware, str]:
    """native / ptx-jit / no-kernel-image for a card of ``capability`` (89 for 8.9), with the reason."""
    entries = [(e, p) for e in arch_list if (p := _parse_arch(e)) is not None]
    shown = " ".join(arch_list) or "(empty)"
    cubins = [
        (code, e)
        for e, (kind, code, suffix) in entries
        if kind == "sm" and cubin_runs(code, suffix, capability)
    ]
    sm = f"sm_{capability}"
    if any(code == capability for code, _ in cubins):
        exact = next(e for code, e in cubins if code == capability)
        return Hardware.NATIVE, f"{exact} is in the build's arch list ({shown})"
    if cubins:
        best = max(cubins)[1]
        return Hardware.NATIVE, (
            f"no {sm}, but {best} cubins run on compute capability "
            f"{capability_text(capability)} (same major; arch list {shown})"
        )
    ptx = [
        (code, e)
        for e, (kind, code, suffix) in entries
        if kind == "compute" and ptx_runs(code, suffix, capability)
    ]
    if ptx:
        best = max(ptx)[1]
        return Hardware.PTX_JIT, (
            f"no cubin for {sm}; the driver JIT-compiles {best} PTX at first use (slow "
            f"first start; torch warns the card 'is not compatible' as no sm_{capability // 10}x "
            f"cubin is built; arch list {shown})"
        )
    return Hardware.NO_KERNEL_IMAGE, (
        f"no {sm} (nor another sm_{capability // 10}x cubin it can run, nor PTX "
        f"at or below compute_{capability}) in the build's arch list ({shown}): "
        f"'{NO_KERNEL_MESSAGE}', while torch.cuda.is_available() says True"
    )


def _driver_judgement(build: BuildFacts, driver: str, needs_jit: bool) -> tuple[bool, str]:
    """(too old, reason) for the newest CUDA runtime of torch and torchvision's ops; a branch
    alone (``580``) says what it was assumed to be."""
    too_old, reason = _driver_reason(build, driver, needs_jit)
    compat, toolkit = driver_minimum(_newest_runtime(build)[1])
    note = assumed(driver, toolkit) or assumed(driver, compat)
    return too_old, reason + (f" ({note})" if note and not too_old else "")


def _newest_runtime(build: BuildFacts) -> tuple[str, str]:
    runtimes = [("torch", build.cuda)] + (
        [("torchvision", build.torchvision_cuda)] if build.torchvision_cuda else []
    )
    return max(runtimes, key=lambda item: version_key(item[1]))


def _driver_reason(build: BuildFacts, driver: str, needs_jit: bool) -> tuple[bool, str]:
    who, cuda = _newest_runtime(build)
    which = f"CUDA {cuda} (torch)" if who == "torch" else f"CUDA {cuda} (torchvision's ops)"
    compat, toolkit = driver_minimum(cuda)
    floor = compat or toolkit
    if not floor:
        return (
            False,
            f"driver {driver}: no published minimum for {which} is known to this tool; not judged",
        )
    if not at_least(driver, floor):
        kind = (
            f"minor version compatibility for CUDA {cuda.split('.')[0]}.x"
            if compat
            else "its toolkit driver"
        )
        return True, f"driver {driver} is older than {which} needs: >= {floor} ({kind})"
    if toolkit and not at_least(driver, toolkit):
        if needs_jit:
            return True, (
                f"driver {driver} runs {which} only through minor version compatibility (toolkit "
                f"driver >= {toolkit}), which does not JIT-compile the build's newer PTX"
            )
        return False, (
            f"driver {driver} runs {which} through minor version compatibility "
            f"(>= {floor}; its toolkit driver is >= {toolkit})"
        )
    return False, f"driver {driver} meets {which} (>= {toolkit or floor})"


def judge(build: BuildFacts, target: Target) -> TargetVerdict | None:
    """The verdict for one build on one target; None when the build's facts could not be read."""
    if not build.judgeable:
        return None
    label = target.label
    if build.hip:
        return TargetVerdict(
            label, Hardware.NO_CUDA, f"ROCm build (torch.version.hip {build.hip}): no CUDA kernels"
        )
    if not build.cuda:
        return TargetVerdict(
            label,
            Hardware.NO_CUDA,
            f"CPU-only build (torch {build.torch}, torch.version.cuda "
            "is None): torch.cuda.is_available() is False on any GPU",
        )
    arch = arch_judgement(target.gpu.capability, build.arch_list) if target.gpu else None
    if not target.driver:
        assert arch is not None
        return TargetVerdict(label, arch[0], arch[1])
    too_old, driver_reason = _driver_judgement(
        build, target.driver, arch is not None and arch[0] == Hardware.PTX_JIT
    )
    card_floor, since = card_driver_floor(target.gpu.capability) if target.gpu else ("", "")
    if card_floor and target.gpu and not at_least(target.driver, card_floor):
        unknown = (
            f"driver {target.driver} predates the {target.gpu.label}: compute capability "
            f"{capability_text(target.gpu.capability)} came with CUDA {since}, whose toolkit driver is "
            f">= {card_floor}, and an older driver does not know the card"
        )
        driver_reason = unknown + (f"; {driver_reason}" if too_old else "")
        too_old = True
    if too_old:
        both = f"; and {arch[1]}" if arch and arch[0] == Hardware.NO_KERNEL_IMAGE else ""
        return TargetVerdict(label, Hardware.DRIVER_TOO_OLD, driver_reason + both)
    if arch is None:
        return TargetVerdict(
            label, Hardware.NATIVE, driver_reason + "; no GPU named, so no architecture judged"
        )
    return TargetVerdict(label, arch[0], f"{arch[1]}; {driver_reason}")


def judge_all(
    build_facts: Mapping[str, Any] | None, targets: Iterable[Target]
) -> tuple[TargetVerdict, ...]:
    """Verdicts for every target from a cell's recorded build facts (nothing when there are none)."""
    if not build_facts:
        return ()
    build = BuildFacts.from_facts(build_facts)
    return tuple(v for v in (judge(build, t) for t in targets) if v is not None)


DEVICE_PROBE = "cuda_devices"  # the dynamic check on a real device (torch_matrix/probes/standard/cuda_devices.py)


def device_targets(gpu_facts: Mapping[str, Any]) -> tuple[Target, ...]:
    """The GPUs (and driver) a cell actually saw (``torch_matrix/probes/facts.py gpu_facts``): one target each."""
    driver = str(gpu_facts.get("driver") or "")
    try:
        driver = parse_driver(driver) if driver else ""
    except TargetError:
        driver = ""
    found = []
    for device in gpu_facts.get("devices") or ():
        match = re.fullmatch(r"(\d+)\.(\d)", str(device.get("capability", "")))
        if match:
            capability = int(match.group(1)) * 10 + int(match.group(2))
            found.append(
                Target(Gpu(str(device.get("name") or f"sm_{capability}"), capability), driver)
            )
    return tuple(found)


def _observed(probe: Mapping[str, Any] | None) -> bool | None:
    """Whether the device probe saw the build run on the card: True (pass), False (fail), None (no answer)."""
    if not probe:
        return None
    return {"pass": True, "fail": False}.get(str(probe.get("status")))


def cell_verdicts(
    gpu_facts: Mapping[str, Any] | None,
    targets: Iterable[Target],
    device_probe: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], ...]:
    """What a cell's result records: each declared target's verdict, then, for each GPU the cell
    ran on, the static verdict for that device with what the device probe saw (``device``) and
    whether the two agree (``agrees``: False is reported loudly, never smoothed over)."""
    facts = dict(gpu_facts or {})
    build = facts.get("build")
    declared = tuple(targets)
    if not build or not BuildFacts.from_facts(build).judgeable:
        return ()
    out = [v.to_json() for v in judge_all(build, declared)]
    observed = _observed(device_probe)
    for target in device_targets(facts):
        found = judge_all(build, (target,))
        if not found:
            continue
        same = [
            i
            for i, t in enumerate(declared)
            if t.gpu
            and target.gpu
            and t.gpu.capability == target.gpu.capability
            and t.driver == target.driver
        ]  # a declared target that is this device: annotate it
        entry: dict[str, Any] = (
            out[same[0]]
            if same
            else {**found[0].to_json(), "target": f"{target.label} (this machine)"}
        )
        if observed is not None and device_probe is not None:
            entry["device"] = (
                f"{DEVICE_PROBE} {device_probe.get('status')}: {device_probe.get('message', '')}".strip()
            )
            entry["agrees"] = found[0].runs == observed
        if not same:
            out.append(entry)
    return tuple(out)


def disagreements(verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per device where the static verdict and the device probe disagree."""
    return [
        f"{v['target']}: the static verdict is {v['verdict']} ({v['reason']}) but the device says: "
        f"{v.get('device', '?')}"
        for v in verdicts
        if v.get("agrees") is False
    ]


def variant_cuda_for(
    build_facts: Mapping[str, Any],
    capability: int | None,
    driver: str = "",
    machine: str = "x86_64",
) -> str:
    """The CUDA version ("12.6") of a sibling build of the same release that has code for the card
    and that the driver can run, from torch's own table of its release variants
    (``torch.cuda.PYTORCH_RELEASES_CODE_CC``, recorded in ``build_facts["release_variants_code_cc"]``;
    torch 2.13 keys it by host arch): the newest such, or "" when the table is absent or has none."""
    table = build_facts.get("release_variants_code_cc") if build_facts else None
    if not isinstance(table, Mapping) or capability is None:
        return ""
    host = "aarch64" if machine.lower() == "aarch64" else "x86_64"
    fits = []
    for cuda, by_arch in table.items():
        if not isinstance(by_arch, Mapping) or not re.fullmatch(r"\d+\.\d+", str(cuda)):
            continue
        ccs = by_arch.get(host, by_arch.get("any", ()))
        if not any(cubin_runs(int(cc), "", capability) for cc in ccs):
            continue
        if driver and not at_least(
            driver, driver_needed({"torch_cuda": str(cuda)}, capability) or "0"
        ):
            continue
        fits.append(str(cuda))
    return max(fits, key=version_key, default="")


def variant_cuda(variant: str) -> str:
    """``cu126`` -> "12.6", ``cu118`` -> "11.8", ``cu130`` -> "13.0"; "" for anything else."""
    match = re.fullmatch(r"cu(\d{2})(\d)", variant)
    return f"{int(match.group(1))}.{match.group(2)}" if match else ""


def driver_needed(build_facts: Mapping[str, Any], capability: int | None = None) -> str:
    """The oldest driver that runs this build (on a card of ``capability``): the newest of the minor
    version compatibility floor of its CUDA runtime(s) and the oldest driver that knows the card; ""
    when neither is known."""
    build = BuildFacts.from_facts(build_facts)
    floors = []
    for cuda in (build.cuda, build.torchvision_cuda):
        if cuda:
            compat, toolkit = driver_minimum(cuda)
            floors.append(compat or toolkit)
    if capability is not None:
        floors.append(card_driver_floor(capability)[0])
    floors = [f for f in floors if f]
    return max(floors, key=driver_numbers, default="")
