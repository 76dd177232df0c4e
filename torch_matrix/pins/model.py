"""The answer model: exclusions with their reasons, pins, answers, and their PEP 508 requirement lines."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .vocabulary import Condition, _marker_applies
from .evidence import _axis_rank
from .specifiers import _contains, _public, merge_specifiers, specifier_set
from .vocabulary import PYTHON, Observation
from torch_matrix.vocab.versions import version_key
from .windows import Window


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
    # The counterfactual: a failing cell, and a passing cell that differs from it only on this
    # package's axis (and its paired companion), with that cell's version. Empty: unconfirmed.
    failing_cell: str = ""
    passing_cell: str = ""
    passing_version: str = ""

    @property
    def confirmed(self) -> bool:
        return bool(self.passing_cell)

    def counterfactual(self) -> str:
        """``1.12.0 fails lazy_cuda_init [t1.12.0-py3.10]; 1.12.1, all else equal, passes [t1.12.1-py3.10]``."""
        probes = "+".join(self.probes) or "its probes"
        if not self.confirmed:
            return (
                f"unconfirmed: no passing cell differs from {self.failing_cell or 'the failing cells'} "
                f"only in {self.package}"
            )
        return (
            f"{self.version} fails {probes} [{self.failing_cell}]; {self.passing_version}, all else "
            f"equal, passes [{self.passing_cell}]"
        )

    def describe(self, max_cells: int = 4) -> str:
        if self.paired_with:
            return (
                f"{self.package} {self.version}: only ever installed with {self.paired_with}, "
                f"which is excluded"
            )
        cells = ", ".join(self.cells[:max_cells])
        if len(self.cells) > max_cells:
            cells += f", +{len(self.cells) - max_cells} more"
        return f"{self.package} {self.version}: {self.summary} [{cells}]; {self.counterfactual()}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "package": self.package,
            "version": self.version,
            "probes": list(self.probes),
            "summary": self.summary,
            "cells": list(self.cells),
            "paired_with": self.paired_with,
        }
        if not self.paired_with:
            data["confirmed"] = self.confirmed
            data["counterfactual"] = {
                "failing_cell": self.failing_cell,
                "passing_cell": self.passing_cell,
                "passing_version": self.passing_version,
                "text": self.counterfactual(),
            }
        return data


@dataclass(frozen=True)
class Pin:
    """Specifiers for one package (or python), optionally scoped by a condition."""

    package: str
    specifiers: tuple[str, ...]
    condition: Condition | None = None
    exclusions: tuple[Exclusion, ...] = ()
    windows: tuple[Window, ...] = ()  # the breaks the specifiers exclude whole, with their proof
    # A trade-off pin (``Tradeoff``): the working pairs it gives up, ``torch 2.4.1 x numpy 2.0.2 [cell]``.
    gives_up: tuple[str, ...] = ()

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
        return {
            "package": self.package,
            "specifiers": list(self.specifiers),
            "specifier": ",".join(self.specifiers),
            "condition": self.condition.to_json() if self.condition else None,
            "exclusions": [e.to_json() for e in self.exclusions],
            # only when there are some: pins.json files without windows stay as they were
            **({"windows": [w.to_json() for w in self.windows]} if self.windows else {}),
            **({"gives_up": list(self.gives_up)} if self.gives_up else {}),
        }


@dataclass(frozen=True)
class RequirementLine:
    """One rendered PEP 508 line: ``torch>=2.5.1,!=2.6.0; python_version >= "3.12"``."""

    package: str
    specifiers: tuple[str, ...]
    marker: str = ""
    exclusions: tuple[Exclusion, ...] = ()
    windows: tuple[Window, ...] = ()
    gives_up: tuple[str, ...] = ()  # a trade-off line: the working pairs it gives up

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
    """A pin set: the bad cells it excludes, and what it costs in good cells.

    A suggested answer never loses a good cell (``lost`` is empty); the bad cells it cannot
    exclude without losing one stay admitted and are listed in ``unresolved``.
    """

    label: str
    pins: tuple[Pin, ...]
    lost: tuple[str, ...]  # good cells it excludes
    good_total: int
    unresolved: tuple[str, ...] = ()  # bad cells it admits (no safe pin excludes them)

    @property
    def kept(self) -> int:
        return self.good_total - len(self.lost)

    @property
    def expressible(self) -> bool:
        return all(pin.expressible for pin in self.pins)

    def admits(self, observation: Observation) -> bool:
        return self._admission.admits(observation)

    @cached_property
    def _admission(
        self,
    ) -> _Admission:  # kept in the instance __dict__: not a field, frozen is fine
        return _Admission(self)

    def pins_for(self, package: str) -> list[Pin]:
        return [pin for pin in self.pins if pin.package == package]

    def describe(self) -> str:
        return "; ".join(pin.describe() for pin in self.pins) or "(no pins)"

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "expressible": self.expressible,
            "kept_good": self.kept,
            "good_total": self.good_total,
            "lost_good": list(self.lost),
            "unresolved": list(self.unresolved),
            "pins": [pin.to_json() for pin in self.pins],
            "requirements": [line.text() for line in requirement_lines(self)]
            if self.expressible
            else [],
        }


@dataclass(frozen=True)
class Tradeoff:
    """One way to close an interaction no pin closes without giving up a working pair.

    ``numpy`` breaks only older ``torch``: PEP 508 cannot say "numpy<2 where torch<2.3", so a
    maintainer writes either ``numpy<2`` (giving up numpy 2 with the newer torch) or ``torch>=2.3``
    (giving up the older torch with numpy 1). Each is one ``Tradeoff``: the pin it adds, with its
    windows and their proof, the working pairs it gives up, and how many releases it excludes.
    Ranked within its interaction by working pairs given up, then releases given up (rank 1 is
    pinned; the others are shown as comments)."""

    interaction: str  # the diagnosis it closes: "torch!=2.2.2 (only where numpy==2.0.2)"
    rank: int
    pin: Pin  # the unconditional pin it adds (``pin.gives_up`` lists the working pairs)
    against: str  # the other axis of the interaction
    releases: tuple[
        str, ...
    ]  # the releases of ``pin.package`` it excludes (tested or proven windows)
    answer: Answer  # the safe answer plus this pin, with its lost (given-up) and unresolved cells

    @property
    def pairs(self) -> int:
        return len(self.pin.gives_up)

    def line(self) -> str:
        return f"{self.pin.package}{','.join(self.pin.specifiers)}"

    def describe(self) -> str:
        """``numpy<2: gives up 1 working pair (torch 2.4.1 x numpy 2.0.2 [cell]), 23 numpy releases``."""
        pairs = f"{self.pairs} working pair{'s' if self.pairs != 1 else ''}"
        listed = "; ".join(self.pin.gives_up[:4]) + (
            f"; +{self.pairs - 4} more" if self.pairs > 4 else ""
        )
        count = len(self.releases)
        return (
            f"{self.line()}: gives up {pairs} ({listed}) and {count} {self.pin.package} "
            f"release{'s' if count != 1 else ''}"
            + (
                f" ({self.releases[0]}..{self.releases[-1]})"
                if count > 1
                else f" ({self.releases[0]})"
                if count
                else ""
            )
        )

    def to_json(self, *, pinned: bool) -> dict[str, Any]:
        return {
            "interaction": self.interaction,
            "rank": self.rank,
            "pinned": pinned,
            "requirement": self.line(),
            "package": self.pin.package,
            "against": self.against,
            "gives_up": list(self.pin.gives_up),
            "releases_given_up": list(self.releases),
            "windows": [w.to_json() for w in self.pin.windows],
            "exclusions": [e.to_json() for e in self.pin.exclusions],
            "unresolved": list(self.answer.unresolved),
            "describe": self.describe(),
        }


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
        self._seen: dict[tuple[Any, ...], bool] = {}

    def admits(self, observation: Observation) -> bool:
        key = tuple(observation.value(axis) for axis in self.axes)
        verdict = self._seen.get(key)
        if verdict is None:
            verdict = self._seen[key] = all(check.admits(observation) for check in self.checks)
        return verdict


def _exclusion_key(exclusion: Exclusion) -> tuple[Any, ...]:
    return (version_key(_public(exclusion.version)), exclusion.paired_with)


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
        scoped = [(pin, pin.condition) for pin in pins if pin.condition is not None]
        if any(not pin.expressible for pin, _ in scoped):
            raise ValueError(f"{package}: pin scoped by a non-Python condition has no PEP 508 form")
        base_specs = base[0].specifiers if base else ()
        base_exclusions = base[0].exclusions if base else ()
        windows = base[0].windows if base else ()
        gives_up = base[0].gives_up if base else ()
        if not scoped:
            lines.append(
                RequirementLine(package, base_specs, "", base_exclusions, windows, gives_up)
            )
            continue
        tested = scoped[0][1].tested
        covered = {value for _, condition in scoped for value in condition.values}
        rest = Condition(PYTHON, tuple(v for v in tested if v not in covered), tested)
        groups = [
            (
                condition,
                merge_specifiers(base_specs, pin.specifiers),
                tuple(sorted(base_exclusions + pin.exclusions, key=_exclusion_key)),
                windows + pin.windows,
            )
            for pin, condition in scoped
        ]
        if rest.values:
            groups.append((rest, base_specs, base_exclusions, windows))
        for condition, specs, exclusions, scoped_windows in sorted(
            groups, key=lambda g: sorted(g[0].values)
        ):
            lines.append(
                RequirementLine(
                    package, specs, condition.marker(), exclusions, scoped_windows, gives_up
                )
            )
    return tuple(lines)
