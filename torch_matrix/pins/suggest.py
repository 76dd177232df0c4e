"""The suggestion: evidence, ranked answers, coverage, from cell results."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

from torch_matrix.vocab.records import INSTALLED, ORIGIN_BISECT, CellResult, public_version
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    INCOMPATIBLE,
    NO_EVIDENCE,
    NOT_INSTALLABLE,
    verdict_of,
)
from .coverage import Coverage, coverage
from .evidence import (
    EnvironmentAdvice,
    environment_advice,
    VersionEvidence,
    _CellValues,
    _observe,
    _pairs,
    package_axes,
    version_evidence,
)
from torch_matrix.judge.causes import MODULE_PROVIDER, EnvironmentKind, requirement_name
from .model import Answer, Pin, Tradeoff, requirement_lines
from .search import find_pins
from .specifiers import PinPolicy
from .untested import untested_beyond
from .variants import held_on_variants
from .vocabulary import PYTHON, CellNote
from .windows import admitted_releases, python_of


@dataclass(frozen=True)
class Suggestion:
    """Everything ``torch-matrix pins`` prints and writes."""

    counts: Mapping[str, int]
    evidence: Mapping[str, VersionEvidence]
    answers: tuple[Answer, ...]  # ranked, best first
    unsatisfiable: tuple[CellNote, ...] = ()
    no_evidence: tuple[CellNote, ...] = ()
    coverage: Mapping[str, Coverage] = field(default_factory=dict)
    python_axis: bool = True
    policy: PinPolicy = PinPolicy.PROVEN
    environment: tuple[EnvironmentAdvice, ...] = ()  # failures the environment explains
    not_pinned: tuple[CellNote, ...] = ()  # incompatible existing environments (evidence._observe)
    tradeoffs: tuple[
        Tradeoff, ...
    ] = ()  # per interaction of an extras axis: ranked one-pin answers
    traded: Answer | None = None  # the safe answer plus the first trade-off of each interaction
    pin_tradeoffs: bool = True  # the files pin ``traded`` (`pins --tradeoffs show`: they do not)
    # torch releases after the newest with evidence, every cell unsatisfiable or errored
    # (``pins.untested``): "no pin needed" holds only up to there.
    untested: tuple[str, ...] = ()
    # Distributions a failing probe needed present (a module it missed: ``pkg_resources`` from
    # setuptools), normalized: a pin on one is a requirement to install, not only a constraint
    # (torch 2.1.2 does not declare setuptools, so ``-c constraints.txt`` installs none).
    needed_present: tuple[str, ...] = ()

    def must_install(self) -> list[str]:
        """The pinned lines a user must install (``-r requirements-pins.txt``), not only allow."""
        return [
            line.text()
            for line in requirement_lines(self.recommended)
            if line.specifiers and canonicalize_name(line.package) in self.needed_present
        ]

    def pinned(self, tradeoff: Tradeoff) -> bool:
        """Whether the files pin this trade-off: its interaction's first by the rule
        (``tradeoffs.TRADEOFF_RULE``), unless ``pins --tradeoffs show``."""
        return self.pin_tradeoffs and self.traded is not None and tradeoff.rank == 1

    @property
    def safe(self) -> Answer:
        """The best answer that PEP 508 can write and that gives up no working cell (there always
        is one: blame torch alone)."""
        return next(answer for answer in self.answers if answer.expressible)

    @property
    def recommended(self) -> Answer:
        """What the files pin: the safe answer (no pin excludes a version seen working) plus, for
        each interaction of an extras axis no pin closes without giving up a working pair, the one
        trade-off the rule ranks first (``tradeoffs.TRADEOFF_RULE``: constrain the incidental
        dependency, keep torch whole), so that applying the files installs no tested failing pair;
        its lines name what they give up, the others are shown. ``pins --tradeoffs show`` pins the
        safe answer alone and leaves the break open."""
        return self.traded if self.pin_tradeoffs and self.traded is not None else self.safe

    @property
    def diagnosis(self) -> Answer | None:
        """The best answer overall when it needs a condition no marker can express."""
        best = self.answers[0]
        return None if best.expressible else best

    def variant_only(self) -> list[Pin]:
        """The exclusions held on some variants only (``pins.variants``): no line, a note."""
        return held_on_variants(self.diagnosis, self.recommended)


def holes(results: Sequence[CellResult], packages: Sequence[str]) -> dict[str, dict[str, str]]:
    """package -> release -> why, for each release whose every cell could not be installed
    (unsatisfiable: no wheel for the cell's Python, excluded by the project's requirements; or an
    install error) and that no evidence cell tested: an edge of a window steps over it."""
    found: dict[str, dict[str, str]] = {}
    tested: dict[str, set[str]] = {}
    for result in results:
        installed = result.install.status == INSTALLED
        for package in packages:
            if package == "torch":
                planned = result.cell.torch
            elif package == "torchvision":
                planned = result.cell.torchvision
            else:
                value = result.cell.axes.get(package, "")
                planned = value[2:] if value.startswith("==") and "*" not in value else ""
            release = public_version(result.install.resolved.get(package, "") or planned or "")
            if not release:
                continue
            if installed:
                tested.setdefault(package, set()).add(release)
                continue
            verdict = verdict_of(result)
            reason = " ".join(f"{verdict.kind}: {verdict.reason}".split())
            found.setdefault(package, {}).setdefault(release, reason[:100])
    return {
        package: {v: why for v, why in releases.items() if v not in tested.get(package, set())}
        for package, releases in found.items()
    }


def needed_present(results: Sequence[CellResult]) -> tuple[str, ...]:
    """The distributions a failing probe needed installed: the provider of a module it missed
    (``judge.runcontext``'s ``module_provider``: setuptools for ``pkg_resources``), or the
    requirement of a missing-dependency finding; normalized, sorted."""
    found: set[str] = set()
    for result in results:
        for probe in result.probes:
            provider = probe.evidence.get(MODULE_PROVIDER)
            # None for nearly every probe: no ABC check for it (28,000 probes, issue 46)
            if (
                provider is not None
                and isinstance(provider, Mapping)
                and provider.get("distribution")
            ):
                found.add(canonicalize_name(requirement_name(str(provider["distribution"]))))
        for attribution in verdict_of(result).environment.values():
            if attribution.kind == EnvironmentKind.MISSING_DEPENDENCY and attribution.requirement:
                found.add(canonicalize_name(requirement_name(attribution.requirement)))
    return tuple(sorted(found))


def suggest_pins(
    results: Sequence[CellResult],
    released: Mapping[str, Sequence[str]] | None = None,
    policy: PinPolicy = PinPolicy.PROVEN,
    wheel_pythons: Mapping[str, Mapping[str, frozenset[str] | None]] | None = None,
    pin_tradeoffs: bool = True,
) -> Suggestion:
    """Derive the suggestion from cell results; ``released`` maps package -> released versions,
    ``wheel_pythons`` package -> release -> the Python X.Y values its wheels serve (a release with
    no wheel for any tested Python was never a candidate: windows and coverage leave it out).

    ``policy`` says whether bounds may reach untested releases (``PinPolicy``); ``pin_tradeoffs``
    whether the files pin each interaction's first-ranked trade-off (else they are only shown). Cells of
    ``torch-matrix bisect`` (judged by one probe or test) are never evidence for the pins."""
    results = [result for result in results if result.cell.origin != ORIGIN_BISECT]
    packages = package_axes(results)
    values_of = _CellValues(packages)
    observations, unsatisfiable, no_evidence, not_pinned = _observe(results, values_of)
    counts = Counter(
        {
            COMPATIBLE: 0,
            INCOMPATIBLE: 0,
            NOT_INSTALLABLE: len(unsatisfiable),
            NO_EVIDENCE: len(no_evidence),
        }
    )
    counts.update(COMPATIBLE if o.good else INCOMPATIBLE for o in observations)
    origins = {
        result.cell.id: str(result.cell.origin) for result in results if result.cell.is_followup
    }
    answers, tradeoffs, traded = find_pins(
        observations,
        packages,
        _pairs(results, values_of),
        policy,
        released,
        origins,
        wheel_pythons,
        holes(results, packages),
    )
    if released and wheel_pythons:
        pythons = {python_of(o.value(PYTHON)) for o in observations if o.value(PYTHON) is not None}
        released = {
            package: admitted_releases(versions, wheel_pythons.get(package), pythons)[0]
            if package in wheel_pythons
            else versions
            for package, versions in released.items()
        }
    suggestion = Suggestion(
        counts={str(kind): n for kind, n in counts.items()},
        evidence=version_evidence(observations, list(packages) + [PYTHON]),
        answers=tuple(answers),
        unsatisfiable=tuple(unsatisfiable),
        no_evidence=tuple(no_evidence),
        policy=policy,
        environment=tuple(environment_advice(results)),
        not_pinned=tuple(not_pinned),
        tradeoffs=tuple(tradeoffs),
        traded=traded,
        pin_tradeoffs=pin_tradeoffs,
        untested=untested_beyond(results),
        needed_present=needed_present(results),
    )
    # Coverage is of what the files pin: the one rule for that is ``Suggestion.recommended``.
    return dataclasses.replace(
        suggestion, coverage=coverage(suggestion.recommended, observations, packages, released)
    )
