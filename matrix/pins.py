"""Suggested requirement pins from cell results: specifiers, interactions, pairs, reasons, coverage.

Pure: a function of ``CellResult``s (and, for coverage, of the released versions of each
package). Verdicts come from ``matrix.verdict`` so the report and the pins agree on what
"good" means. Only compatible and incompatible cells are evidence; an ``error`` cell yields
no pin, an ``unsatisfiable`` one is listed as such and never called incompatible.

How an answer is found (the search space is a handful of axes, so it is exhaustive enough):

1. Every value that only ever appears in bad cells (a *pure* failure such as torch 1.12.0) is
   excluded for free: no good cell is lost. When several axes could take the blame, the one
   explaining most cells wins, then the axis order torch, torchvision, ..., python.
2. The bad cells left are interactions (the value also has good cells). Candidate answers:
   blame one axis alone (``torch>=2.3``), one axis scoped by another (``torch!=2.4.1`` on
   Python 3.12 only, or "only with numpy>=2"), and a greedy cover over all of them.
3. Answers are ranked by good cells kept. The recommended one is the best that PEP 508 can
   express (conditions on Python become ``python_version`` markers; conditions on another
   package or on the CUDA variant cannot be written in a requirement and are shown as
   diagnoses only).
4. A torchvision release that only ever ran with an excluded torch is excluded with it.

At scale (thousands of cells, a few dozen distinct versions per axis) the search works on
distinct values, not cells: each version string is parsed once, each cell set is a bit mask
per (axis, value), and each specifier or marker is evaluated once per distinct value.
``tests/test_pins_scale.py`` checks the answers against a plain per-cell scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

from packaging.markers import Marker
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .records import INSTALLED, CellResult
from .verdict import COMPATIBLE, INCOMPATIBLE, NO_EVIDENCE, NOT_INSTALLABLE, verdict_of

PYTHON = "python"
VARIANT = "variant"
PREFERRED_ORDER = ("torch", "torchvision", "torchaudio")
SUMMARY_WIDTH = 140

Value = Any  # Version for packages and python, str for the variant


# ----------------------------------------------------------------------------- evidence

@dataclass(frozen=True)
class Observation:
    """One evidence cell, reduced to the versions that decide pins."""

    cell_id: str
    good: bool
    values: Mapping[str, Value]  # axis -> public Version (packages, python) or str (variant)
    failing: tuple[str, ...] = ()  # required probes that failed (bad cells)
    summaries: Mapping[str, str] = field(default_factory=dict)  # probe -> one-line evidence

    def value(self, axis: str) -> Value:
        return self.values.get(axis)


@dataclass(frozen=True)
class CellNote:
    """A cell that is not evidence (unsatisfiable or error), with its reason."""

    cell_id: str
    kind: str
    reason: str


def _one_line(text: Any, width: int = SUMMARY_WIDTH) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


@lru_cache(maxsize=8192)
def _public(raw: str) -> Version | None:
    """Parsed once per distinct string: a 2,000-cell grid repeats a few dozen versions."""
    try:
        return Version(Version(raw).public) if raw else None
    except InvalidVersion:
        return None


def probe_summary(result: CellResult, name: str) -> str:
    """``lazy_cuda_init: fail: CUDA initialised at import (observed True, expected False)``."""
    probe = result.probe(name)
    if probe is None:
        return f"{name}: no result"
    text = f"{probe.name}: {probe.status}"
    if probe.message:
        text += f": {probe.message}"
    if probe.observed is not None or probe.expected is not None:
        text += f" (observed {probe.observed!r}, expected {probe.expected!r})"
    torch_build = result.install.resolved.get("torch", "")
    if effective_variant(result.cell.variant, torch_build) != result.cell.variant:
        text = f"[tested with torch {torch_build}] " + text
    return _one_line(text)


def package_axes(results: Iterable[CellResult]) -> tuple[str, ...]:
    """Every axis that names a package (not python, not variant), torch first."""
    names = {axis for result in results for axis, value in result.cell.axes.items() if value
             or result.install.resolved.get(axis)} - {PYTHON, VARIANT}
    return tuple(sorted(names, key=_axis_rank))


def _axis_rank(axis: str) -> tuple[int, str]:
    if axis in PREFERRED_ORDER:
        return (PREFERRED_ORDER.index(axis), axis)
    if axis == PYTHON:
        return (len(PREFERRED_ORDER) + 2, axis)
    if axis == VARIANT:
        return (len(PREFERRED_ORDER) + 3, axis)
    return (len(PREFERRED_ORDER) + 1, axis)


def cell_values(result: CellResult, packages: Sequence[str]) -> dict[str, Value]:
    """The installed public version of each package axis (axis value when not recorded)."""
    resolved = {_canonical(k): v for k, v in result.install.resolved.items()}
    values: dict[str, Value] = {PYTHON: _public(result.cell.axes.get(PYTHON, "")),
                                VARIANT: effective_variant(result.cell.axes.get(VARIANT, "default"),
                                                           resolved.get("torch", ""))}
    for package in packages:
        raw = resolved.get(_canonical(package)) or result.cell.axes.get(package, "")
        values[package] = _public(raw)
    return values


def effective_variant(variant: str, installed_torch: str) -> str:
    """The build a "default" cell really got: a find-links or mirror wheel such as
    ``2.13.0+cpu`` is a different build from PyPI's, so a break seen only there must
    not be blamed on the torch release as a whole."""
    if variant == "default" and "+" in installed_torch:
        return installed_torch.split("+", 1)[1]
    return variant


@lru_cache(maxsize=1024)
def _canonical(name: str) -> str:
    return canonicalize_name(name)


class _CellValues:
    """``cell_values`` once per result, shared by the evidence and the torchvision pairs."""

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = packages
        self._seen: dict[int, tuple[CellResult, dict[str, Value]]] = {}

    def __call__(self, result: CellResult) -> dict[str, Value]:
        found = self._seen.get(id(result))
        if found is None or found[0] is not result:
            found = self._seen[id(result)] = (result, cell_values(result, self.packages))
        return found[1]


def observe(results: Sequence[CellResult]) -> tuple[list[Observation], list[CellNote], list[CellNote]]:
    """Split results into evidence, unsatisfiable cells and cells without evidence."""
    return _observe(results, _CellValues(package_axes(results)))


def _observe(results: Sequence[CellResult],
             values_of: _CellValues) -> tuple[list[Observation], list[CellNote], list[CellNote]]:
    evidence: list[Observation] = []
    unsatisfiable: list[CellNote] = []
    no_evidence: list[CellNote] = []
    for result in sorted(results, key=lambda r: r.cell.id):
        verdict = verdict_of(result)
        if verdict.kind == NOT_INSTALLABLE:
            unsatisfiable.append(CellNote(result.cell.id, verdict.kind, _one_line(verdict.reason)))
        elif verdict.kind == NO_EVIDENCE or not verdict.is_evidence:
            no_evidence.append(CellNote(result.cell.id, NO_EVIDENCE, _one_line(verdict.reason)))
        else:
            evidence.append(Observation(
                cell_id=result.cell.id, good=verdict.kind == COMPATIBLE,
                values=values_of(result), failing=verdict.failing,
                summaries={name: probe_summary(result, name) for name in verdict.failing}))
    return evidence, unsatisfiable, no_evidence


# ----------------------------------------------------------------------------- specifiers

def _prefix_bound(low: Version | None, high: Version, *, strict_low: bool) -> Version:
    """The shortest prefix B of ``high``'s release with low < B <= high (``<2`` over ``<2.0.2``)."""
    release = high.release
    for length in range(1, len(release) + 1):
        candidate = Version(".".join(str(part) for part in release[:length]))
        if candidate > high:
            break
        if low is None or (candidate > low if strict_low else candidate >= low):
            return candidate
    return Version(high.base_version)


def _text(version: Version, python: bool) -> str:
    text = str(version)
    if python:
        return text
    release = list(version.release)
    while len(release) > 2 and release[-1] == 0:
        release.pop()
    return ".".join(str(part) for part in release) if Version(".".join(map(str, release))) == version else text


def build_specifiers(good: Iterable[Version], bad: Iterable[Version], *,
                     python: bool = False) -> tuple[str, ...]:
    """Readable specifiers that admit every ``good`` version and exclude every ``bad`` one.

    Bad versions below every good one become a lower bound, above every good one an upper
    bound (rounded to the shortest prefix, ``<2`` rather than ``<2.0.2``); the rest are
    ``!=X`` (``!=X.Y.*`` when every tested version of a series is bad). Python versions
    (``3.12``) are excluded as series, as Requires-Python needs.
    """
    good_set = set(good)
    goods = sorted(good_set)
    bads = sorted(set(bad) - good_set)
    if not bads:
        return ()
    lower: list[str] = []
    upper: list[str] = []
    middle = bads
    if goods:
        below = [v for v in bads if v < goods[0]]
        above = [v for v in bads if v > goods[-1]]
        middle = [v for v in bads if goods[0] < v < goods[-1]]
        if below:
            bound = _prefix_bound(below[-1], goods[0], strict_low=True)
            lower.append(">=" + _text(bound, python))
        if above:
            bound = _prefix_bound(goods[-1], above[0], strict_low=True)
            upper.append("<" + _text(bound, python))
    excluded: list[str] = []
    series: dict[tuple[int, ...], list[Version]] = {}
    for version in middle:
        series.setdefault(version.release[:2], []).append(version)
    good_series = {v.release[:2] for v in goods}
    for key in sorted(series):
        members = series[key]
        if python:
            excluded.extend(f"!={v}.*" if len(v.release) == 2 else f"!={v}" for v in members)
        elif len(members) >= 2 and key not in good_series:
            excluded.append("!=" + ".".join(map(str, key)) + ".*")
        else:
            excluded.extend(f"!={v}" for v in members)
    return tuple(lower + excluded + upper)


def _spec_key(spec: Specifier) -> tuple[int, Any, str]:
    order = {">=": 0, ">": 0, "~=": 1, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}
    try:
        version: Any = Version(spec.version.rstrip(".*").rstrip("."))
    except InvalidVersion:
        version = Version("0")
    return (order.get(spec.operator, 1), version, str(spec))


def merge_specifiers(existing: Iterable[str], added: Iterable[str]) -> tuple[str, ...]:
    """Intersect two specifier lists and drop what became redundant (``>=1.7,>=1.8`` -> ``>=1.8``).

    Other operators (``==``, ``~=``, ``===``) are kept as written; ``!=`` outside the bounds go.
    """
    specs: list[Specifier] = []
    for text in list(existing) + list(added):
        spec = Specifier(text.strip())
        if all(str(spec) != str(other) for other in specs):
            specs.append(spec)
    lowers = [s for s in specs if s.operator in (">=", ">")]
    uppers = [s for s in specs if s.operator in ("<", "<=")]
    lower = max(lowers, key=lambda s: (Version(s.version), s.operator == ">"), default=None)
    upper = min(uppers, key=lambda s: (Version(s.version), s.operator == "<="), default=None)
    kept: list[Specifier] = []
    for spec in specs:
        if spec.operator in (">=", ">", "<", "<="):
            if spec is lower or spec is upper:
                kept.append(spec)
            continue
        if spec.operator == "!=" and not spec.version.endswith(".*"):
            version = Version(spec.version)
            if (lower is not None and not lower.contains(version, prereleases=True)) or (
                    upper is not None and not upper.contains(version, prereleases=True)):
                continue
        kept.append(spec)
    return tuple(str(s) for s in sorted(kept, key=_spec_key))


def specifier_set(specifiers: Iterable[str]) -> SpecifierSet:
    return _specifier_set(tuple(specifiers))


@lru_cache(maxsize=4096)
def _specifier_set(specifiers: tuple[str, ...]) -> SpecifierSet:
    return SpecifierSet(",".join(specifiers))


@lru_cache(maxsize=65536)
def _contains(specifiers: tuple[str, ...], version: Version) -> bool:
    """``SpecifierSet.contains`` once per distinct (specifiers, version), not once per cell."""
    return _specifier_set(specifiers).contains(version, prereleases=True)


# ----------------------------------------------------------------------------- conditions

def _python_runs_marker(members: Sequence[Version], tested: Sequence[Version]) -> str:
    """A ``python_version`` marker for ``members`` that also places untested versions.

    Each run of consecutive tested versions owns the interval up to the next tested version,
    so the markers of a set and of its complement partition every Python version.
    """
    ordered = sorted(tested)
    inside = set(members)
    outside = [v for v in ordered if v not in inside]
    if len(outside) == 1 and outside[0] != ordered[0] and outside[0] != ordered[-1]:
        single = _python_runs_marker(outside, tested)
        if single.startswith("python_version == "):
            return single.replace("==", "!=", 1)
    runs: list[list[Version]] = []
    for version in ordered:
        if version in inside:
            if runs and ordered.index(version) - ordered.index(runs[-1][-1]) == 1:
                runs[-1].append(version)
            else:
                runs.append([version])
    clauses: list[str] = []
    for run in runs:
        first, last = run[0], run[-1]
        position = ordered.index(last)
        parts = []
        following = ordered[position + 1] if position + 1 < len(ordered) else None
        if (len(run) == 1 and first != ordered[0] and following is not None
                and following.release[:1] == first.release[:1]
                and following.release[1:2] == (first.release[1] + 1,)):
            clauses.append(f'python_version == "{first}"')  # the interval holds only this minor
            continue
        if first != ordered[0]:
            parts.append(f'python_version >= "{first}"')
        if position + 1 < len(ordered):
            parts.append(f'python_version < "{ordered[position + 1]}"')
        if not parts:
            return ""
        clauses.append(" and ".join(parts))
    if len(clauses) == 1:
        return clauses[0]
    return " or ".join(f"({clause})" if " and " in clause else clause for clause in clauses)


@dataclass(frozen=True)
class Condition:
    """Where a pin applies: the values of one other axis (Python, variant or a package)."""

    axis: str
    values: tuple[Value, ...]  # the tested values of ``axis`` the pin applies to
    tested: tuple[Value, ...]  # every tested value of ``axis``

    @property
    def expressible(self) -> bool:
        return self.axis == PYTHON

    def matches(self, observation: Observation) -> bool:
        return observation.value(self.axis) in self.values

    def complement(self) -> Condition:
        return Condition(self.axis, tuple(v for v in self.tested if v not in self.values), self.tested)

    def marker(self) -> str:
        """PEP 508 marker text; only for Python conditions ("" when it covers every version)."""
        if self.axis != PYTHON:
            raise ValueError(f"no PEP 508 marker for the {self.axis} axis")
        text = _python_runs_marker(self.values, self.tested)
        if text:
            Marker(text)  # validated by packaging
        return text

    def describe(self) -> str:
        if self.axis == PYTHON:
            return self.marker() or "every Python"
        if self.axis == VARIANT:
            return "variant " + ", ".join(sorted(map(str, self.values)))
        others = [v for v in self.tested if v not in self.values]
        specs = build_specifiers(self.values, others)
        if specs:
            return f"{self.axis}{','.join(specs)}"
        return f"{self.axis} in " + ", ".join(map(str, sorted(self.values)))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"axis": self.axis, "values": sorted(map(str, self.values)),
                                "describe": self.describe()}
        if self.axis == PYTHON:
            data["marker"] = self.marker()
        return data


# ----------------------------------------------------------------------------- pins

@dataclass(frozen=True)
class Exclusion:
    """One excluded version with its reason: probes, one-line evidence, cells (or its pair)."""

    package: str
    version: str
    probes: tuple[str, ...] = ()
    summary: str = ""
    cells: tuple[str, ...] = ()
    paired_with: str = ""  # "torch 1.12.0" when excluded because its only torch is

    def describe(self, max_cells: int = 4) -> str:
        if self.paired_with:
            return (f"{self.package} {self.version}: only ever installed with {self.paired_with}, "
                    f"which is excluded")
        cells = ", ".join(self.cells[:max_cells])
        if len(self.cells) > max_cells:
            cells += f", +{len(self.cells) - max_cells} more"
        return f"{self.package} {self.version}: {self.summary} [{cells}]"

    def to_json(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "probes": list(self.probes),
                "summary": self.summary, "cells": list(self.cells), "paired_with": self.paired_with}


@dataclass(frozen=True)
class Pin:
    """Specifiers for one package (or python), optionally scoped by a condition."""

    package: str
    specifiers: tuple[str, ...]
    condition: Condition | None = None
    exclusions: tuple[Exclusion, ...] = ()

    @property
    def expressible(self) -> bool:
        if self.condition is None:
            return True
        return self.package != PYTHON and self.condition.expressible

    @property
    def specifier_set(self) -> SpecifierSet:
        return specifier_set(self.specifiers)

    def applies_to(self, observation: Observation) -> bool:
        return self.condition is None or self.condition.matches(observation)

    def admits(self, observation: Observation) -> bool:
        value = observation.value(self.package)
        if value is None or not self.applies_to(observation):
            return True
        return _contains(tuple(self.specifiers), value)

    def describe(self) -> str:
        text = f"{self.package}{','.join(self.specifiers)}"
        if self.condition is not None:
            text += f" (only where {self.condition.describe()})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"package": self.package, "specifiers": list(self.specifiers),
                "specifier": ",".join(self.specifiers),
                "condition": self.condition.to_json() if self.condition else None,
                "exclusions": [e.to_json() for e in self.exclusions]}


@dataclass(frozen=True)
class RequirementLine:
    """One rendered PEP 508 line: ``torch>=2.5.1,!=2.6.0; python_version >= "3.12"``."""

    package: str
    specifiers: tuple[str, ...]
    marker: str = ""
    exclusions: tuple[Exclusion, ...] = ()

    def text(self) -> str:
        line = self.package + ",".join(self.specifiers)
        return f"{line}; {self.marker}" if self.marker else line

    def applies(self, python_version: Version | None) -> bool:
        if not self.marker or python_version is None:
            return True
        return _marker_applies(self.marker, str(python_version))

    def admits(self, observation: Observation) -> bool:
        value = observation.value(self.package)
        if value is None or not self.applies(observation.value(PYTHON)):
            return True
        return _contains(tuple(self.specifiers), value)


@dataclass(frozen=True)
class Answer:
    """A pin set that excludes every bad cell, with what it costs in good cells."""

    label: str
    pins: tuple[Pin, ...]
    lost: tuple[str, ...]  # good cells it excludes
    good_total: int

    @property
    def kept(self) -> int:
        return self.good_total - len(self.lost)

    @property
    def expressible(self) -> bool:
        return all(pin.expressible for pin in self.pins)

    def admits(self, observation: Observation) -> bool:
        return self._admission.admits(observation)

    @cached_property
    def _admission(self) -> _Admission:  # kept in the instance __dict__: not a field, frozen is fine
        return _Admission(self)

    def pins_for(self, package: str) -> list[Pin]:
        return [pin for pin in self.pins if pin.package == package]

    def describe(self) -> str:
        return "; ".join(pin.describe() for pin in self.pins) or "(no pins)"

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "expressible": self.expressible, "kept_good": self.kept,
                "good_total": self.good_total, "lost_good": list(self.lost),
                "pins": [pin.to_json() for pin in self.pins],
                "requirements": [line.text() for line in requirement_lines(self)]
                if self.expressible else []}


class _Admission:
    """Whether an answer admits a cell, decided once per distinct tuple of the values it reads.

    An expressible answer is judged by its rendered requirement lines (what users install
    with) plus its Python advice; a diagnosis by its pins. Every check reads only a few
    axes, so a 2,000-cell grid has a few dozen distinct questions.
    """

    def __init__(self, answer: Answer) -> None:
        checks: list[RequirementLine | Pin]
        if answer.expressible:
            checks = [*requirement_lines(answer), *(p for p in answer.pins if p.package == PYTHON)]
        else:
            checks = list(answer.pins)
        self.checks = checks
        axes = {check.package for check in checks}
        for check in checks:
            if isinstance(check, RequirementLine):
                axes.add(PYTHON)
            elif check.condition is not None:
                axes.add(check.condition.axis)
        self.axes = tuple(sorted(axes))
        self._seen: dict[tuple, bool] = {}

    def admits(self, observation: Observation) -> bool:
        key = tuple(observation.value(axis) for axis in self.axes)
        verdict = self._seen.get(key)
        if verdict is None:
            verdict = self._seen[key] = all(check.admits(observation) for check in self.checks)
        return verdict


def _exclusion_key(exclusion: Exclusion) -> tuple:
    return (_value_key(_public(exclusion.version)), exclusion.paired_with)


@lru_cache(maxsize=4096)
def _marker_applies(marker: str, python_version: str) -> bool:
    env = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    return Marker(marker).evaluate(env)


def requirement_lines(answer: Answer) -> list[RequirementLine]:
    return list(_requirement_lines(answer))


@lru_cache(maxsize=1024)
def _requirement_lines(answer: Answer) -> tuple[RequirementLine, ...]:
    """PEP 508 lines per package; Python-scoped pins become complementary markers.

    ``torch!=1.12.0`` plus ``torch>=2.5`` on Python 3.12+ renders as two lines whose markers
    never both match, so any pip or uv accepts them as requirements or constraints.
    """
    lines: list[RequirementLine] = []
    packages = sorted({pin.package for pin in answer.pins if pin.package != PYTHON}, key=_axis_rank)
    for package in packages:
        pins = answer.pins_for(package)
        base = [pin for pin in pins if pin.condition is None]
        scoped = [pin for pin in pins if pin.condition is not None]
        if any(not pin.expressible for pin in scoped):
            raise ValueError(f"{package}: pin scoped by a non-Python condition has no PEP 508 form")
        base_specs = base[0].specifiers if base else ()
        base_exclusions = base[0].exclusions if base else ()
        if not scoped:
            lines.append(RequirementLine(package, base_specs, "", base_exclusions))
            continue
        tested = scoped[0].condition.tested
        covered = {value for pin in scoped for value in pin.condition.values}
        rest = Condition(PYTHON, tuple(v for v in tested if v not in covered), tested)
        groups = [(pin.condition, merge_specifiers(base_specs, pin.specifiers),
                   tuple(sorted(base_exclusions + pin.exclusions, key=_exclusion_key))) for pin in scoped]
        if rest.values:
            groups.append((rest, base_specs, base_exclusions))
        for condition, specs, exclusions in sorted(groups, key=lambda g: sorted(g[0].values)):
            lines.append(RequirementLine(package, specs, condition.marker(), exclusions))
    return tuple(lines)


# ----------------------------------------------------------------------------- search

class Atom(NamedTuple):
    """Exclude ``axis == value`` (only where ``cond_axis == cond_value`` when given)."""

    axis: str
    value: Value
    cond_axis: str = ""
    cond_value: Value = None

    def covers(self, observation: Observation) -> bool:
        if observation.value(self.axis) != self.value:
            return False
        return not self.cond_axis or observation.value(self.cond_axis) == self.cond_value

    def sort_key(self) -> tuple:
        return (_axis_rank(self.axis), _value_key(self.value), self.cond_axis,
                _value_key(self.cond_value))


def _value_key(value: Value) -> tuple:
    if isinstance(value, Version):
        return (0, value, "")
    return (1, Version("0"), "" if value is None else str(value))


def _indices(mask: int) -> list[int]:
    """The cell indices set in a bit mask, ascending (the order of the observations)."""
    found = []
    while mask:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found


class _Grid:
    """Evidence indexed for the search: cell sets are bit masks, one per distinct (axis, value).

    Each axis is scanned once; an atom's cells are then the intersection of at most two
    masks, so covering, losing and admitting cost a few integer operations, not a scan.
    """

    def __init__(self, observations: Sequence[Observation], pinnable: Sequence[str],
                 axes: Sequence[str]) -> None:
        self.observations = list(observations)
        self.pinnable = list(pinnable)
        self.axes = list(axes)
        self.good = {i for i, o in enumerate(self.observations) if o.good}
        self.bad = {i for i, o in enumerate(self.observations) if not o.good}
        self.good_mask = sum(1 << i for i in self.good)
        self.bad_mask = sum(1 << i for i in self.bad)
        self.all_mask = (1 << len(self.observations)) - 1
        self._where: dict[str, dict[Value, int]] = {}
        self._masks: dict[Atom, int] = {}
        self._tested: dict[str, tuple[Value, ...]] = {}

    def where(self, axis: str) -> dict[Value, int]:
        """Value -> mask of the cells with that value on ``axis`` (None: the axis is missing)."""
        index = self._where.get(axis)
        if index is None:
            index = {}
            for i, observation in enumerate(self.observations):
                value = observation.value(axis)
                index[value] = index.get(value, 0) | (1 << i)
            self._where[axis] = index
        return index

    def values(self, axis: str, mask: int = -1) -> set[Value]:
        """The distinct non-missing values of ``axis`` among the cells of ``mask``."""
        return {value for value, cells in self.where(axis).items() if value is not None and cells & mask}

    def tested(self, axis: str) -> tuple[Value, ...]:
        if axis not in self._tested:
            self._tested[axis] = tuple(sorted(self.values(axis), key=_value_key))
        return self._tested[axis]

    def cells(self, mask: int) -> list[Observation]:
        return [self.observations[i] for i in _indices(mask)]

    def mask(self, atom: Atom) -> int:
        cells = self._masks.get(atom)
        if cells is None:
            cells = self.where(atom.axis).get(atom.value, 0)
            if atom.cond_axis:
                cells &= self.where(atom.cond_axis).get(atom.cond_value, 0)
            self._masks[atom] = cells
        return cells

    def excluded(self, atom: Atom) -> frozenset[int]:
        return frozenset(_indices(self.mask(atom)))

    def named_by_probes(self, atom: Atom, cells: Iterable[int]) -> bool:
        """True when every failing probe of ``cells`` is about this axis (``torchvision_ops``)."""
        prefix = atom.axis + "_"
        probes = [name for i in cells for name in self.observations[i].failing]
        return bool(probes) and all(name.startswith(prefix) for name in probes)

    def lost_mask(self, atoms: Iterable[Atom]) -> int:
        cells = 0
        for atom in atoms:
            cells |= self.mask(atom)
        return cells & self.good_mask

    def lost(self, atoms: Iterable[Atom]) -> set[int]:
        return set(_indices(self.lost_mask(atoms)))

    def admitted(self, answer: Answer) -> int:
        """Mask of the cells ``answer`` admits: each check is decided once per distinct value."""
        rejected = 0
        for check in answer._admission.checks:
            scope = self._scope(check)
            specifiers = tuple(check.specifiers)
            for value, cells in self.where(check.package).items():
                if value is not None and cells & scope and not _contains(specifiers, value):
                    rejected |= cells & scope
        return self.all_mask & ~rejected

    def _scope(self, check: RequirementLine | Pin) -> int:
        """The cells a requirement line's marker or a pin's condition applies to."""
        if isinstance(check, RequirementLine):
            if not check.marker:
                return self.all_mask
            return self._union(PYTHON, lambda v: v is None or _marker_applies(check.marker, str(v)))
        if check.condition is None:
            return self.all_mask
        return self._union(check.condition.axis, lambda v: v in check.condition.values)

    def _union(self, axis: str, chosen: Any) -> int:
        cells = 0
        for value, value_cells in self.where(axis).items():
            if chosen(value):
                cells |= value_cells
        return cells

    def atoms_of(self, index: int, conditions: Sequence[str]) -> list[Atom]:
        observation = self.observations[index]
        atoms = []
        for axis in self.pinnable:
            value = observation.value(axis)
            if value is None:
                continue
            atoms.append(Atom(axis, value))
            for cond_axis in conditions:
                cond_value = observation.value(cond_axis)
                if cond_axis != axis and cond_value is not None:
                    atoms.append(Atom(axis, value, cond_axis, cond_value))
        return atoms

    def atoms_of_cells(self, mask: int, conditions: Sequence[str]) -> set[Atom]:
        """Every atom that excludes one of the cells, once per distinct tuple of values."""
        axes = list(dict.fromkeys([*self.pinnable, *conditions]))
        atoms: set[Atom] = set()
        seen: set[tuple] = set()
        for i in _indices(mask):
            key = tuple(self.observations[i].value(axis) for axis in axes)
            if key not in seen:
                seen.add(key)
                atoms.update(self.atoms_of(i, conditions))
        return atoms


def _greedy(grid: _Grid, uncovered: int, candidates: Iterable[Atom], lost: int) -> list[Atom] | None:
    """Weighted set cover: fewest newly lost good cells per newly excluded bad cell.

    ``uncovered`` and ``lost`` are cell masks. An atom that hits no uncovered cell never
    will again (uncovered only shrinks), so it leaves the pool; the probe-name tie-break is
    computed only for atoms that tie on the cheaper parts of the key.
    """
    pool = []
    for atom in sorted(set(candidates), key=Atom.sort_key):
        excluded = grid.mask(atom)
        if excluded & uncovered:
            pool.append((atom, excluded, excluded & grid.good_mask, bool(atom.cond_axis), atom.sort_key()))
    chosen: list[Atom] = []
    while uncovered:
        best, best_key = None, None
        survivors = []
        for entry in pool:
            atom, excluded, excluded_good, scoped, sort_key = entry
            hit = excluded & uncovered
            if not hit:
                continue
            survivors.append(entry)
            hits = hit.bit_count()
            head = ((excluded_good & ~lost).bit_count() / hits, -hits, scoped)
            if best_key is not None and head > best_key[:3]:
                continue
            key = (*head, not grid.named_by_probes(atom, _indices(hit)), sort_key)
            if best_key is None or key < best_key:
                best, best_key = entry, key
        if best is None:
            return None
        pool = survivors
        chosen.append(best[0])
        uncovered &= ~best[1]
        lost |= best[2]
    return chosen


def _pure_failures(grid: _Grid) -> list[Atom]:
    """Values that only ever appear in bad cells: excluding them costs no good cell."""
    free = [Atom(axis, value) for axis in grid.pinnable for value, cells in grid.where(axis).items()
            if value is not None and cells & grid.bad_mask and not cells & grid.good_mask]
    uncovered = 0
    for atom in free:
        uncovered |= grid.mask(atom)
    return _greedy(grid, uncovered, free, 0) or []


def _blame_one(grid: _Grid, remaining: int, axis: str) -> list[Atom] | None:
    if grid.where(axis).get(None, 0) & remaining:
        return None
    return [Atom(axis, value) for value in grid.values(axis, remaining)]


def _blame_scoped(grid: _Grid, remaining: int, axis: str, cond_axis: str) -> list[Atom] | None:
    """Per excluded value: everywhere, or only where ``cond_axis`` has a bad cell's value."""
    if grid.where(axis).get(None, 0) & remaining:
        return None
    atoms: list[Atom] = []
    for value, value_cells in grid.where(axis).items():
        cells = value_cells & remaining
        if not cells:
            continue
        everywhere = Atom(axis, value)
        cond_values = [q for q, q_cells in grid.where(cond_axis).items() if q_cells & cells]
        if None in cond_values:
            atoms.append(everywhere)
            continue
        scoped = [Atom(axis, value, cond_axis, q) for q in cond_values]
        cheaper = grid.lost_mask(scoped).bit_count() < grid.lost_mask([everywhere]).bit_count()
        atoms.extend(scoped if cheaper else [everywhere])
    return atoms


# ----------------------------------------------------------------------------- answers

def _reason(package: str, version: Value, cells: Sequence[Observation]) -> Exclusion:
    # The probes that failed in every one of these cells are the reason; others failed for
    # another pin's reason (torch 1.12.0 + numpy 2 also fails numpy_interop).
    common = set.intersection(*(set(o.failing) for o in cells)) if cells else set()
    probes = sorted(common or {name for o in cells for name in o.failing})
    summaries = Counter(o.summaries[name] for o in cells for name in o.failing
                        if name in o.summaries and name in probes)
    summary = min(summaries.items(), key=lambda item: (-item[1], item[0]))[0] if summaries else ""
    return Exclusion(package, str(version), tuple(probes), summary,
                     tuple(sorted(o.cell_id for o in cells)))


def _build_pins(grid: _Grid, atoms: Sequence[Atom], pairs: Mapping[Version, set[Version]]) -> list[Pin]:
    pins: list[Pin] = []
    packages = sorted({atom.axis for atom in atoms} | ({"torchvision"} if pairs else set()),
                      key=_axis_rank)
    for package in packages:
        mine = [a for a in atoms if a.axis == package]
        base_values = {a.value for a in mine if not a.cond_axis}
        paired: dict[Value, str] = {}
        if package == "torchvision" and pairs:
            excluded_torch = {a.value for a in atoms if a.axis == "torch" and not a.cond_axis}
            for tv, torches in pairs.items():
                if tv not in base_values and torches and torches <= excluded_torch:
                    paired[tv] = "torch " + ", ".join(str(t) for t in sorted(torches))
        if not mine and not paired:
            continue
        excluded = base_values | set(paired)
        where = grid.where(package)
        # Admit every tested value not excluded here, even one whose cells another pin excludes:
        # a bound must not exclude a tested version without a reason of its own.
        goods = grid.values(package)
        exclusions = [_reason(package, v, grid.cells(grid.bad_mask & where.get(v, 0)))
                      for v in sorted(base_values)]
        exclusions += [Exclusion(package, str(v), paired_with=paired[v]) for v in sorted(paired)]
        if excluded:
            specs = build_specifiers(goods - excluded, excluded, python=package == PYTHON)
            pins.append(Pin(package, specs, None, tuple(sorted(exclusions, key=_exclusion_key))))
        scoped = [a for a in mine if a.cond_axis]
        for cond_axis in sorted({a.cond_axis for a in scoped}, key=_axis_rank):
            per_cond: dict[Value, frozenset] = {}
            for atom in scoped:
                if atom.cond_axis == cond_axis:
                    per_cond[atom.cond_value] = per_cond.get(atom.cond_value, frozenset()) | {atom.value}
            groups: dict[frozenset, list[Value]] = {}
            for cond_value, values in per_cond.items():
                groups.setdefault(values - excluded, []).append(cond_value)
            for values, cond_values in sorted(groups.items(), key=lambda g: sorted(map(_value_key, g[1]))):
                if not values:
                    continue
                condition = Condition(cond_axis, tuple(sorted(cond_values, key=_value_key)),
                                      grid.tested(cond_axis))
                inside = 0
                for cond_value in condition.values:
                    inside |= grid.where(cond_axis).get(cond_value, 0)
                goods_inside = grid.values(package, inside) - excluded - values
                specs = build_specifiers(goods_inside, values, python=package == PYTHON)
                reasons = tuple(_reason(package, v, grid.cells(inside & grid.bad_mask & where.get(v, 0)))
                                for v in sorted(values))
                pins.append(Pin(package, specs, condition, reasons))
    return pins


def _answer(grid: _Grid, label: str, atoms: Sequence[Atom], pairs: Mapping) -> tuple[Answer, int]:
    """The answer built from ``atoms``, and the mask of the cells it admits."""
    pins = tuple(_build_pins(grid, atoms, pairs))
    draft = Answer(label, pins, (), len(grid.good))
    admitted = grid.admitted(draft)
    lost = tuple(sorted(o.cell_id for o in grid.cells(grid.good_mask & ~admitted)))
    return Answer(label, pins, lost, len(grid.good)), admitted


def _rank_key(answer: Answer) -> tuple:
    scoped = sum(1 for pin in answer.pins if pin.condition is not None)
    first = min((_axis_rank(pin.package) for pin in answer.pins), default=(0, ""))
    return (len(answer.lost), not answer.expressible, scoped, len(answer.pins), first, answer.label)


def pairs_from(results: Iterable[CellResult]) -> dict[Version, set[Version]]:
    """torchvision version -> the torch versions it was installed with (installed cells only)."""
    return _pairs(results, _CellValues(package_axes(results)))


def _pairs(results: Iterable[CellResult], values_of: _CellValues) -> dict[Version, set[Version]]:
    if "torchvision" not in values_of.packages:
        return {}
    pairs: dict[Version, set[Version]] = {}
    for result in results:
        if result.install.status != INSTALLED:
            continue
        values = values_of(result)
        if values.get("torchvision") is not None and values.get("torch") is not None:
            pairs.setdefault(values["torchvision"], set()).add(values["torch"])
    return pairs


def find_answers(observations: Sequence[Observation], packages: Sequence[str],
                 pairs: Mapping[Version, set[Version]] | None = None) -> list[Answer]:
    """Ranked answers (best first) that each exclude every bad cell."""
    pinnable = [p for p in packages] + [PYTHON]
    conditions = pinnable + [VARIANT]
    grid = _Grid(observations, pinnable, conditions)
    pairs = pairs or {}
    if grid.bad and not grid.good:  # nothing works: exclude what failed, blame the first package
        for axis in pinnable:
            atoms = _blame_one(grid, grid.bad_mask, axis)
            if atoms is not None:
                return [_answer(grid, f"blame {axis} alone", sorted(atoms, key=Atom.sort_key), pairs)[0]]
    pure = _pure_failures(grid)
    remaining = grid.bad_mask
    for atom in pure:
        remaining &= ~grid.mask(atom)
    if not remaining:
        return [_answer(grid, "exclude failing versions" if pure else "no failures", pure, pairs)[0]]
    candidates: list[tuple[str, list[Atom] | None]] = []
    for axis in pinnable:
        candidates.append((f"blame {axis} alone", _blame_one(grid, remaining, axis)))
        for cond_axis in conditions:
            if cond_axis != axis and axis != PYTHON:  # python-by-X is X-by-python, which has markers
                candidates.append((f"{axis} scoped by {cond_axis}",
                                   _blame_scoped(grid, remaining, axis, cond_axis)))
    lost_by_pure = grid.lost_mask(pure)
    expressible = [a for a in grid.atoms_of_cells(remaining, [PYTHON])
                   if not (a.axis == PYTHON and a.cond_axis)]
    candidates.append(("fewest good cells lost (PEP 508)",
                       _greedy(grid, remaining, expressible, lost_by_pure)))
    everything = grid.atoms_of_cells(remaining, conditions)
    candidates.append(("fewest good cells lost", _greedy(grid, remaining, everything, lost_by_pure)))
    # Candidates with the same atoms give the same pins: build each once, under its best label.
    distinct: dict[tuple[Atom, ...], str] = {}
    for label, atoms in candidates:
        if atoms is not None:
            chosen = tuple(pure + sorted(set(atoms), key=Atom.sort_key))
            distinct[chosen] = min(label, distinct.get(chosen, label))
    answers: dict[tuple, Answer] = {}
    for chosen, label in distinct.items():
        answer, admitted = _answer(grid, label, list(chosen), pairs)
        if admitted & grid.bad_mask:
            continue  # a rounding or grouping admitted a bad cell: never offer it
        key = (answer.lost, answer.expressible)
        if key not in answers or _rank_key(answer) < _rank_key(answers[key]):
            answers[key] = answer
    ranked = sorted(answers.values(), key=_rank_key)
    useful = [a for a in ranked if a.kept > 0 or not grid.good]
    return useful if any(a.expressible for a in useful) else ranked


# ----------------------------------------------------------------------------- summary

@dataclass(frozen=True)
class VersionEvidence:
    """Per axis: versions seen only in good cells, only in bad cells, and in both."""

    axis: str
    good: tuple[str, ...]
    bad: tuple[str, ...]
    mixed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"good": list(self.good), "bad": list(self.bad), "mixed": list(self.mixed)}


def version_evidence(observations: Sequence[Observation], axes: Sequence[str]) -> dict[str, VersionEvidence]:
    table: dict[str, VersionEvidence] = {}
    for axis in axes:
        seen: dict[Value, set[bool]] = {}
        for o in observations:
            if o.value(axis) is not None:
                seen.setdefault(o.value(axis), set()).add(o.good)
        ordered = sorted(seen, key=_value_key)
        table[axis] = VersionEvidence(axis, tuple(str(v) for v in ordered if seen[v] == {True}),
                                      tuple(str(v) for v in ordered if seen[v] == {False}),
                                      tuple(str(v) for v in ordered if len(seen[v]) == 2))
    return table


def package_pins(observations: Sequence[Observation], axes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each axis on its own: exclude versions seen only in bad cells, admit the rest tested."""
    pins: dict[str, tuple[str, ...]] = {}
    for axis, evidence in version_evidence(observations, axes).items():
        good = [Version(v) for v in evidence.good + evidence.mixed]
        pins[axis] = build_specifiers(good, [Version(v) for v in evidence.bad], python=axis == PYTHON)
    return pins


@dataclass(frozen=True)
class Coverage:
    """Released versions the suggestion admits that no evidence cell tested."""

    package: str
    known: bool
    tested: tuple[str, ...] = ()
    untested: tuple[str, ...] = ()  # admitted, inside the tested span
    newer: tuple[str, ...] = ()  # admitted, newer than anything tested
    older: tuple[str, ...] = ()  # admitted, older than anything tested
    excluded_untested: tuple[str, ...] = ()  # excluded by a bound or series, never tested

    def to_json(self) -> dict[str, Any]:
        return {"known": self.known, "tested": list(self.tested), "untested": list(self.untested),
                "newer_than_tested": list(self.newer), "older_than_tested": list(self.older),
                "excluded_untested": list(self.excluded_untested)}


def coverage(answer: Answer, observations: Sequence[Observation], packages: Sequence[str],
             released: Mapping[str, Sequence[str]] | None) -> dict[str, Coverage]:
    result: dict[str, Coverage] = {}
    lines = requirement_lines(answer) if answer.expressible else []
    for package in packages:
        tested = sorted({o.value(package) for o in observations if o.value(package) is not None})
        names = {canonicalize_name(k): v for k, v in (released or {}).items()}
        versions = names.get(canonicalize_name(package))
        if versions is None:
            result[package] = Coverage(package, False, tuple(map(str, tested)))
            continue
        specs = [specifier_set(line.specifiers) for line in lines if line.package == package]
        admitted, excluded = set(), set()
        for raw in versions:
            version = _public(raw)
            if version is None or version.is_prerelease or version.is_devrelease or version in tested:
                continue
            if not specs or any(s.contains(version) for s in specs):
                admitted.add(version)
            else:
                excluded.add(version)
        admitted = sorted(admitted)
        low, high = (tested[0], tested[-1]) if tested else (None, None)
        result[package] = Coverage(
            package, True, tuple(map(str, tested)),
            untested=tuple(str(v) for v in admitted if low is not None and low < v < high),
            newer=tuple(str(v) for v in admitted if high is None or v > high),
            older=tuple(str(v) for v in admitted if low is not None and v < low),
            excluded_untested=tuple(str(v) for v in sorted(excluded)))
    return result


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

    @property
    def recommended(self) -> Answer:
        """The best answer that PEP 508 can write (there always is one: blame torch alone)."""
        return next(answer for answer in self.answers if answer.expressible)

    @property
    def diagnosis(self) -> Answer | None:
        """The best answer overall when it needs a condition no marker can express."""
        best = self.answers[0]
        return None if best.expressible else best


def suggest_pins(results: Sequence[CellResult],
                 released: Mapping[str, Sequence[str]] | None = None) -> Suggestion:
    """Derive the suggestion from cell results; ``released`` maps package -> released versions."""
    packages = package_axes(results)
    values_of = _CellValues(packages)
    observations, unsatisfiable, no_evidence = _observe(results, values_of)
    counts = Counter({COMPATIBLE: 0, INCOMPATIBLE: 0, NOT_INSTALLABLE: len(unsatisfiable),
                      NO_EVIDENCE: len(no_evidence)})
    counts.update(COMPATIBLE if o.good else INCOMPATIBLE for o in observations)
    answers = find_answers(observations, packages, _pairs(results, values_of))
    return Suggestion(
        counts=dict(counts),
        evidence=version_evidence(observations, list(packages) + [PYTHON]),
        answers=tuple(answers),
        unsatisfiable=tuple(unsatisfiable),
        no_evidence=tuple(no_evidence),
        coverage=coverage(next(a for a in answers if a.expressible), observations, packages, released),
    )

