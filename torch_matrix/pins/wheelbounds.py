"""Per-target bounds proven over every release in the spec's range, from each release's own wheel.

Evidence that is not a cell: for each torch release in the range, the build facts read from the
wheel a cell would install (``torch_matrix.world.wheelfacts``: ``torch/version.py`` and the
``-gencode`` flags in ``torch/include/ATen/cuda/CUDAConfig.h``, by range requests), judged for a
target by ``torch_matrix.judge.hardware`` as an installed build is. Such a verdict says what the
build *is* (whether it carries code for the card, which CUDA runtime it needs), never that a test
ran: every proof line says "read from the wheel", and these releases are not counted as tested.

The rule, over the releases of the range in version order, each ``runs`` / ``does not run`` /
``unknown`` (its wheel could not be read, or the spec's builds disagree among themselves):

- the releases that do not run from the oldest on, up to the first that is not so, become a lower
  bound (``>=`` that release);
- the releases that do not run from some release to the newest become an upper bound (``<`` that
  release): ``torch<2.8.0`` for a GTX 1080, where every release from 2.8.0 on lacks sm_6x code;
- a run of releases that do not run between others becomes one ``!=`` per release.

An unknown release is never excluded and no bound crosses it: a bound stops at the release next to
it, and the unknown release is named with its reason. A release is excluded only when the builds
of every variant the spec installs were read and none runs on the target; where no release of the
range runs, nothing is pinned (no constraint can help) and the file says so.

Pure: a function of the reads and the target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_matrix.judge.hardware import BuildFacts, Hardware, judge
from torch_matrix.judge.gpus import Target
from torch_matrix.judge.wheelbuild import CUDA_CONFIG_FILE, TORCH_VERSION_FILE
from torch_matrix.vocab.versions import version_key

# What each verdict was read from, for the proof.
_READ_FROM = {
    Hardware.NO_KERNEL_IMAGE: CUDA_CONFIG_FILE,
    Hardware.NATIVE: CUDA_CONFIG_FILE,
    Hardware.PTX_JIT: CUDA_CONFIG_FILE,
    Hardware.DRIVER_TOO_OLD: TORCH_VERSION_FILE,
    Hardware.NO_CUDA: TORCH_VERSION_FILE,
}


@dataclass(frozen=True)
class ReleaseRead:
    """One build of one release as its own wheel says (``facts`` in ``build_facts``' shape), or why
    it could not be read (``why_not``; then ``facts`` is empty and the release is unknown)."""

    release: str  # "2.8.0"
    variant: str  # "default", "cu126", ...
    wheel: str = ""  # the wheel's filename ("" when no wheel was found)
    facts: Mapping[str, Any] = field(default_factory=dict)
    why_not: str = ""

    @property
    def read(self) -> bool:
        return not self.why_not and bool(self.facts) and BuildFacts.from_facts(self.facts).judgeable


@dataclass(frozen=True)
class ReleaseVerdict:
    """A release on one target: ``runs`` True / False, or None when unknown (``reason`` says why)."""

    release: str
    runs: bool | None
    verdict: str  # a ``Hardware`` value, or "" when unknown
    reason: str
    evidence: str  # "read from torch-2.8.0-...whl's torch/include/ATen/cuda/CUDAConfig.h"


@dataclass(frozen=True)
class WheelBound:
    """A target's bounds on torch from the wheels, with their proof."""

    target: str
    specifiers: tuple[str, ...]  # ("<2.8.0",), (">=2.7.0", "!=2.9.0"), or () when none
    proof: tuple[str, ...]  # one line per specifier
    unknown: tuple[str, ...]  # "2.10.0: why": releases no bound crosses
    verdicts: tuple[ReleaseVerdict, ...]  # every release of the range, oldest first
    none_runs: bool = False  # no release of the range runs on the target: nothing is pinned

    def excludes(self, release: str) -> bool:
        from packaging.specifiers import SpecifierSet

        return bool(self.specifiers) and not SpecifierSet(",".join(self.specifiers)).contains(
            release, prereleases=True
        )


def _evidence(read: ReleaseRead, verdict: Hardware) -> str:
    member = _READ_FROM.get(verdict, CUDA_CONFIG_FILE)
    return f"read from {read.wheel or 'its wheel'}'s {member}"


def release_verdict(release: str, reads: Sequence[ReleaseRead], target: Target) -> ReleaseVerdict:
    """One release on ``target``: it does not run only when every build the spec installs was read
    and none runs; it runs when one read build runs; otherwise it is unknown."""
    unread = [r for r in reads if not r.read]
    judged = []
    for read in reads:
        if read.read:
            found = judge(BuildFacts.from_facts(read.facts), target)
            if found is None:  # judgeable facts always give a verdict; kept unknown if not
                unread.append(read)
            else:
                judged.append((read, found))
    running = [(read, v) for read, v in judged if v.runs]
    if running:
        read, found = running[0]
        return ReleaseVerdict(
            release, True, str(found.verdict), found.reason, _evidence(read, found.verdict)
        )
    if judged and all(v.verdict == Hardware.NO_CUDA for _, v in judged):
        # CPU (or ROCm) builds only, e.g. variant "auto" on a machine with no GPU: they say nothing
        # about the release's CUDA builds, so the release stays unknown on this target.
        variants = ", ".join(sorted({read.variant for read, _ in judged}))
        return ReleaseVerdict(
            release,
            None,
            "",
            f"only builds without CUDA were read ({variants}): they say nothing about its CUDA "
            "builds on this card; a CUDA variant in the spec bounds it",
            "",
        )
    if judged and not unread:
        read, found = judged[0]
        return ReleaseVerdict(
            release, False, str(found.verdict), found.reason, _evidence(read, found.verdict)
        )
    why = "; ".join(
        f"{r.variant} build: {r.why_not or 'no build facts in the wheel'}" for r in unread
    )
    return ReleaseVerdict(release, None, "", why or "no wheel read", "")


def _arch(verdicts: Sequence[ReleaseVerdict], reads: Mapping[str, Sequence[ReleaseRead]]) -> str:
    """The arch lists of the releases, grouped where they are the same (for a proof line)."""
    groups: dict[str, list[str]] = {}
    for verdict in verdicts:
        flags = next(
            (
                str(r.facts.get("arch_flags") or f"CUDA {r.facts.get('torch_cuda') or 'none'}")
                for r in reads.get(verdict.release, ())
                if r.read
            ),
            "?",
        )
        groups.setdefault(flags, []).append(verdict.release)
    return "; ".join(f"{', '.join(releases)}: {flags}" for flags, releases in groups.items())


def _span(verdicts: Sequence[ReleaseVerdict]) -> str:
    first, last = verdicts[0].release, verdicts[-1].release
    count = f"{len(verdicts)} release{'s' if len(verdicts) != 1 else ''}"
    return f"{first}" if first == last else f"every release from {first} to {last} ({count})"


def bound_for(
    target: Target, reads: Mapping[str, Sequence[ReleaseRead]], label: str = ""
) -> WheelBound:
    """``target``'s bounds over the releases in ``reads`` (release -> its builds as read)."""
    releases = sorted(reads, key=version_key)
    verdicts = [release_verdict(r, reads[r], target) for r in releases]
    label = label or target.label
    unknown = tuple(f"{v.release}: {v.reason}" for v in verdicts if v.runs is None)
    if verdicts and all(v.runs is False for v in verdicts):
        return WheelBound(label, (), (), unknown, tuple(verdicts), none_runs=True)
    specifiers: list[str] = []
    proof: list[str] = []

    def prove(spec: str, run: Sequence[ReleaseVerdict]) -> None:
        kinds = ", ".join(dict.fromkeys(v.verdict for v in run))
        members = ", ".join(dict.fromkeys(v.evidence.split("'s ", 1)[-1] for v in run))
        specifiers.append(spec)
        proof.append(
            f"torch{spec}: {kinds} on {label} for {_span(run)}, read from each wheel's {members} "
            f"(not tested; arch lists {_arch(run, reads)})"
        )

    runs = _runs(verdicts)
    for start, end in runs:
        run = verdicts[start:end]
        if start == 0:
            prove(f">={verdicts[end].release}", run)
        elif end == len(verdicts):
            prove(f"<{run[0].release}", run)
        else:
            for verdict in run:
                prove(f"!={verdict.release}", [verdict])
    return WheelBound(label, tuple(specifiers), tuple(proof), unknown, tuple(verdicts))


def _runs(verdicts: Sequence[ReleaseVerdict]) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of releases that do not run (unknown ones break a run)."""
    found: list[tuple[int, int]] = []
    start = None
    for at, verdict in enumerate([*verdicts, None]):
        bad = verdict is not None and verdict.runs is False
        if bad and start is None:
            start = at
        elif not bad and start is not None:
            found.append((start, at))
            start = None
    return found


def bounds_for(
    targets: Iterable[tuple[str, Target]], reads: Mapping[str, Sequence[ReleaseRead]]
) -> dict[str, WheelBound]:
    """label -> its bound, for each (label, target)."""
    return {label: bound_for(target, reads, label) for label, target in targets}


def merged_specifiers(tested: Sequence[str], bound: WheelBound) -> tuple[str, ...]:
    """A torch line's specifiers from the tested cells (``tested``) with the wheels' bound added:
    a ``!=X`` of a tested cell that the bound already excludes is dropped, nothing else."""
    kept = [
        spec
        for spec in tested
        if not (spec.startswith("!=") and "*" not in spec and bound.excludes(spec[2:]))
    ]
    return tuple(dict.fromkeys([*bound.specifiers, *kept]))


def releases_in_range(listed: Iterable[str], selection: Any) -> list[str]:
    """The torch releases of the spec's range (``selection``: ``spec.model.TorchSelection``) among
    ``listed`` (the index's releases), oldest first: explicit versions span every release from the
    oldest to the newest named; a range is every release it admits (within the ``newest`` minor
    series where the spec keeps only those). Pre-releases are not in a range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    versions = []
    for text in dict.fromkeys(listed):
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.local:
            versions.append(version)
    if selection.explicit:
        named = [Version(v).public for v in selection.explicit]
        low, high = min(Version(v) for v in named), max(Version(v) for v in named)
        kept = [v for v in versions if low <= v <= high]
    else:
        allowed = SpecifierSet(selection.versions)
        kept = [v for v in versions if allowed.contains(v)]
        if selection.newest:
            minors = sorted({(v.major, v.minor) for v in kept}, reverse=True)[: selection.newest]
            kept = [v for v in kept if (v.major, v.minor) in minors]
    return [str(v) for v in sorted(set(kept))]
