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
    Hardware,
    driver_needed,
    judge,
    variant_cuda,
    variant_cuda_for,
)
from torch_matrix.judge.gpus import Gpu, Target, parse_gpu, unique_slugs
from torch_matrix.pins.specifiers import PinPolicy
from torch_matrix.pins.suggest import Suggestion, suggest_pins
from torch_matrix.pins.wheelbounds import ReleaseRead, WheelBound, bound_for
from torch_matrix.vocab.records import FAIL, CellResult, ProbeResult

HARDWARE_PROBE = "hardware"
PYTORCH_WHL = "https://download.pytorch.org/whl"


@dataclass(frozen=True)
class TargetPins:
    target: str  # the label, as the results name it
    slug: str  # its directory under pins/targets/
    suggestion: Suggestion
    advice: tuple[str, ...]  # the builds that do run there, where the default one does not
    # the bounds read from every release's wheel over the spec's range (None: not read)
    wheel_bound: WheelBound | None = None


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


# release -> variant tag ("cu126") -> the build facts read from that build's own wheel
# (``torch_matrix.run.targetplan.sibling_builds``); a build not read is absent.
SiblingBuilds = Mapping[str, Mapping[str, Mapping[str, Any]]]


def _sibling_that_runs(
    release: str, target: Target, builds: SiblingBuilds
) -> tuple[str, Mapping[str, Any]] | None:
    """The newest CUDA build of ``release`` whose own wheel shows it runs on ``target``."""
    if not _judgeable(target):
        return None
    found = []
    for tag, facts in (builds.get(release) or {}).items():
        verdict = judge(BuildFacts.from_facts(facts), target)
        if verdict is not None and verdict.runs and variant_cuda(tag):
            found.append((tuple(int(p) for p in variant_cuda(tag).split(".")), tag, facts))
    if not found:
        return None
    _key, tag, facts = max(found, key=lambda item: item[0])
    return tag, facts


def _table_says(listed: str, release: str, builds: SiblingBuilds) -> str:
    """Why torch's own table's CUDA ``listed`` build is not advised: its wheel says otherwise, or
    no wheel of it was read (none exists on the index, or the index could not be read)."""
    tag = "cu" + listed.replace(".", "")
    facts = (builds.get(release) or {}).get(tag)
    where = (
        f"its {tag} wheel has no code for it (arch list {facts.get('arch_flags') or '-'})"
        if facts
        else f"no {tag} wheel of it was read to show so"
    )
    return f"; torch's own table lists a CUDA {listed} build with code for this card, but {where}: not advised"


def _judgeable(target: Target) -> bool:
    """Whether a target read back from its label names a GPU or a driver (a label from a result
    file that names neither cannot be judged again)."""
    return target.gpu is not None or bool(target.driver)


def _target_of(label: str) -> Target:
    capability = _gpu_of(label)
    gpu = Gpu(f"sm_{capability}", capability) if capability is not None else None
    return Target(gpu, _driver_of(label))


def advice_for(
    results: Sequence[CellResult], target: str, builds: SiblingBuilds | None = None
) -> tuple[str, ...]:
    """The builds that do run on ``target`` where a default build does not: a newer (or older)
    release whose build runs, and another CUDA build of the same release whose own wheel (read
    by ``torch_matrix.run.targetplan.sibling_builds``: ``builds``) shows code for the card. torch's
    table of its release variants (``torch.cuda.PYTORCH_RELEASES_CODE_CC``) only says which
    builds to read: a build it lists is never advised on its word alone (2.11.0's lists a cu128
    build with sm_70 code that has none; 2.15.0's a cu126 build that does not exist)."""
    builds = builds or {}
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
        sibling = _sibling_that_runs(release.public, _target_of(target), builds)
        listed = variant_cuda_for(
            build,
            _gpu_of(target),
            _driver_of(target),
            str(result.platform.get("machine") or "x86_64"),
        )
        if sibling is not None:
            tag, facts = sibling
            line += (
                f"; its {tag} build runs there (read from its wheel: CUDA {facts.get('torch_cuda')}, "
                f"arch list {facts.get('arch_flags')}): "
                f"pip install torch=={release.public} --index-url {PYTORCH_WHL}/{tag}"
            )
        elif listed:
            line += _table_says(listed, release.public, builds)
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
    builds: SiblingBuilds | None = None,
    release_reads: Mapping[str, Sequence[ReleaseRead]] | None = None,
) -> list[TargetPins]:
    """One ``TargetPins`` per declared target the results were judged for; with
    ``release_reads`` (release -> its builds as read from their wheels, every release of the
    spec's range) each also gets the bounds those reads prove (``pins.wheelbounds``)."""
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
                advice=advice_for(results, target, builds),
                wheel_bound=(
                    bound_for(_target_of(target), release_reads, target)
                    if release_reads and _judgeable(_target_of(target))
                    else None
                ),
            )
        )
    return out
