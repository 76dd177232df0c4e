"""Pins per hardware target: PEP 508 cannot name a GPU, so each target gets its own constraints.

For one target, every cell judged for it is read as the target sees it: a build that does not
run there (``torch_matrix.judge.hardware``: no kernel image, driver too old, no CUDA) fails a required
synthetic probe named ``hardware`` with the verdict's reason; a cell with no verdict for the
target (not installed, build facts not read) is left as it is. The same ``suggest_pins`` then
finds the bounds, with the same rules and proofs as the main pins, so a window of releases
whose build does not run on the card becomes a bound in that target's file only. The main pins
never see these probes. Pure: a function of cell results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from torch_matrix.judge.hardware import (
    RUNS,
    BuildFacts,
    Gpu,
    Hardware,
    Target,
    driver_needed,
    judge,
    parse_gpu,
    unique_slugs,
    variant_cuda_for,
)
from torch_matrix.pins.specifiers import PinPolicy
from torch_matrix.pins.suggest import Suggestion, suggest_pins
from torch_matrix.vocab.records import FAIL, CellResult, ProbeResult

HARDWARE_PROBE = "hardware"
PYTORCH_WHL = "https://download.pytorch.org/whl"


@dataclass(frozen=True)
class TargetPins:
    target: str  # the label, as the results name it
    slug: str  # its directory under pins/targets/
    suggestion: Suggestion
    advice: tuple[str, ...]  # the builds that do run there, where the default one does not


def targets_in(results: Sequence[CellResult]) -> list[str]:
    """Declared targets the results were judged for, in the order first met (not "this machine")."""
    seen: dict[str, None] = {}
    for result in results:
        for target in result.targets:
            if not str(target["target"]).endswith("(this machine)"):
                seen.setdefault(str(target["target"]), None)
    return list(seen)


def as_seen_by(result: CellResult, target: str) -> CellResult:
    """``result`` with a failing required ``hardware`` probe when its build does not run on ``target``."""
    verdict = next((t for t in result.targets if t["target"] == target), None)
    if verdict is None or verdict["verdict"] in RUNS:
        return result
    probe = ProbeResult(
        name=HARDWARE_PROBE,
        status=FAIL,
        message=f"{verdict['verdict']} on {target}: {verdict['reason']}",
    )
    cell = result.cell
    if cell.required_probes:
        cell = replace(cell, required_probes=cell.required_probes + (HARDWARE_PROBE,))
    return replace(result, cell=cell, probes=result.probes + (probe,))


def _release(result: CellResult) -> Version | None:
    try:
        return Version(str(result.install.resolved.get("torch") or result.cell.torch))
    except InvalidVersion:
        return None


def advice_for(results: Sequence[CellResult], target: str) -> tuple[str, ...]:
    """The builds that do run on ``target`` where a default build does not: a newer (or older)
    release whose build runs, and, from torch's own table of its release variants
    (``torch.cuda.PYTORCH_RELEASES_CODE_CC`` read from the installed wheel), the variant index of
    the same release that has code for the card."""
    runs: list[tuple[Version, CellResult]] = []
    fails: list[tuple[Version, CellResult, Mapping[str, Any]]] = []
    for result in results:
        verdict = next((t for t in result.targets if t["target"] == target), None)
        release = _release(result)
        if verdict is None or release is None:
            continue
        if verdict["verdict"] in RUNS:
            runs.append((release, result))
        else:
            fails.append((release, result, verdict))
    lines: list[str] = []
    good = sorted({r.public for r, _ in runs}, key=Version)
    for release, result, verdict in sorted(fails, key=lambda item: item[0]):
        build = result.gpu.get("build") or {}
        line = f"torch {release} ({result.cell.id}): {verdict['verdict']}"
        if Hardware(verdict["verdict"]) == Hardware.NO_CUDA:
            line += "; a CUDA build of it is needed (not the CPU one)"
        if Hardware(verdict["verdict"]) == Hardware.DRIVER_TOO_OLD:
            capability = _gpu_of(target)
            needed = driver_needed(build, capability)
            again = (
                judge(
                    BuildFacts.from_facts(build),
                    Target(Gpu(f"sm_{capability}", capability) if capability else None, needed),
                )
                if needed
                else None
            )
            if again is not None and again.runs:  # the driver alone stands in the way
                line += f"; a driver >= {needed} runs this build"
        cuda = variant_cuda_for(
            build,
            _gpu_of(target),
            _driver_of(target),
            str(result.platform.get("machine") or "x86_64"),
        )
        if cuda:
            tag = "cu" + cuda.replace(".", "")
            line += (
                f"; torch's own table of its release builds lists CUDA {cuda} with code for this card: "
                f"pip install torch=={release.public} --index-url {PYTORCH_WHL}/{tag}"
            )
        newer = [v for v in good if Version(v) > release]
        older = [v for v in good if Version(v) < release]
        if newer:
            line += f"; the default build of torch {newer[0]} runs there"
        elif older:
            line += f"; the default build of torch {older[-1]} (older) runs there"
        lines.append(line)
    return tuple(dict.fromkeys(lines))


def _gpu_of(target: str) -> int | None:
    head = target.split(", driver ")[0]
    if head.startswith("driver "):
        return None
    arch = head.rsplit("(", 1)[-1].rstrip(")") if "(" in head else head
    try:
        return parse_gpu(arch).capability
    except ValueError:
        return None


def _driver_of(target: str) -> str:
    return target.rsplit("driver ", 1)[1] if "driver " in target else ""


def target_pins(
    results: Sequence[CellResult],
    released: Mapping[str, Sequence[str]] | None = None,
    policy: PinPolicy = PinPolicy.ADMIT_UNTESTED,
    wheel_pythons: Mapping[str, Mapping[str, frozenset[str] | None]] | None = None,
) -> list[TargetPins]:
    """One ``TargetPins`` per declared target the results were judged for."""
    out = []
    labels = targets_in(results)
    slugs = unique_slugs(labels)  # one folder per target: two spellings never share one
    for target in labels:
        seen = [as_seen_by(result, target) for result in results]
        out.append(
            TargetPins(
                target=target,
                slug=slugs[target],
                suggestion=suggest_pins(seen, released, policy, wheel_pythons),
                advice=advice_for(results, target),
            )
        )
    return out
