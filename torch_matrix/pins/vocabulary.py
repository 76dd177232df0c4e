"""The pins' shared vocabulary: the axis names, a value on an axis, an observation (one evidence
cell reduced to the versions that decide pins), a cell that is no evidence, and a condition (where
a pin applies, with the python_version marker it renders as). Every other pins module imports
this one; it imports only ``specifiers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.markers import Marker
from packaging.version import Version

from .specifiers import PinPolicy, build_specifiers

PYTHON = "python"
VARIANT = "variant"
PREFERRED_ORDER = ("torch", "torchvision", "torchaudio")
SUMMARY_WIDTH = 140

Value = Any  # Version for packages and python, str for the variant


# ----------------------------------------------------------------------------- observations


@dataclass(frozen=True)
class Observation:
    """One evidence cell, reduced to the versions that decide pins."""

    cell_id: str
    good: bool
    values: Mapping[str, Value]  # axis -> public Version (packages, python) or str (variant)
    failing: tuple[str, ...] = ()  # required probes that failed (bad cells)
    summaries: Mapping[str, str] = field(default_factory=dict)  # probe -> one-line evidence
    # failing probe -> the package of an axis its error names (``torchvision`` for "No module named
    # 'torchvision.transforms.functional_tensor'"): which axis the failure is about
    named: Mapping[str, str] = field(default_factory=dict)
    # failing probes that failed in only some of their runs ("fails in 1 of 3 runs (flaky)"):
    # evidence of a break, but no proof of where it starts (``pins.windows``)
    flaky: tuple[str, ...] = ()

    def value(self, axis: str) -> Value:
        return self.values.get(axis)


@dataclass(frozen=True)
class CellNote:
    """A cell that is not evidence (unsatisfiable or error), with its reason."""

    cell_id: str
    kind: str
    reason: str


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
        if (
            len(run) == 1
            and first != ordered[0]
            and following is not None
            and following.release[:1] == first.release[:1]
            and following.release[1:2] == (first.release[1] + 1,)
        ):
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
        return Condition(
            self.axis, tuple(v for v in self.tested if v not in self.values), self.tested
        )

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
        specs = build_specifiers(self.values, others, policy=PinPolicy.TESTED_ONLY)
        if specs:
            return f"{self.axis}{','.join(specs)}"
        return f"{self.axis} in " + ", ".join(map(str, sorted(self.values)))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "axis": self.axis,
            "values": sorted(map(str, self.values)),
            "describe": self.describe(),
        }
        if self.axis == PYTHON:
            data["marker"] = self.marker()
        return data


@lru_cache(maxsize=4096)
def _marker_applies(marker: str, python_version: str) -> bool:
    env = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    return Marker(marker).evaluate(env)
