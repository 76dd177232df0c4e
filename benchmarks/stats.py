"""Pure helpers: summaries of repeated measurements, ratios and target checks.

Kept free of I/O so that ``tests/test_benchmarks.py`` can check them without timing anything.
"""

from __future__ import annotations

import operator
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

MET = "MET"
MISSED = "MISSED"
NOT_MEASURED = "NOT MEASURED"

_OPERATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


def summarize(values: Iterable[float]) -> dict[str, Any]:
    """Median (the figure we quote), min, max and every run, so noise is visible."""
    runs = [float(v) for v in values]
    if not runs:
        raise ValueError("no runs to summarize")
    return {
        "median": statistics.median(runs),
        "min": min(runs),
        "max": max(runs),
        "n": len(runs),
        "runs": [round(v, 4) for v in runs],
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None when either side is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Ratios of runs taken side by side (run i of A over run i of B), for a median of ratios."""
    if len(numerators) != len(denominators):
        raise ValueError("paired runs must have the same length")
    return [n / d for n, d in zip(numerators, denominators) if d]


@dataclass(frozen=True)
class Target:
    """One goal from the issue, e.g. ``warm_env: ours / floor <= 1.5``; never edited to pass."""

    figure: str
    name: str
    op: str
    limit: float
    value: float | None = None
    unit: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.op not in _OPERATORS:
            raise ValueError(f"unknown operator {self.op!r}")

    @property
    def status(self) -> str:
        if self.value is None:
            return NOT_MEASURED
        return MET if _OPERATORS[self.op](self.value, self.limit) else MISSED

    def line(self) -> str:
        shown = "-" if self.value is None else f"{self.value:.3g}"
        text = f"[{self.status}] {self.figure}: {self.name} = {shown}{self.unit} (target {self.op} {self.limit:g}{self.unit})"
        return text + (f"  -- {self.note}" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "name": self.name,
            "value": self.value,
            "op": self.op,
            "limit": self.limit,
            "unit": self.unit,
            "status": self.status,
            "note": self.note,
        }


def tally(targets: Iterable[Target]) -> dict[str, int]:
    counts = {MET: 0, MISSED: 0, NOT_MEASURED: 0}
    for target in targets:
        counts[target.status] += 1
    return counts


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1024
    raise AssertionError("unreachable")


def targets_for(
    figure: str,
    goals: dict[str, tuple[str, float, str]],
    values: dict[str, float | None],
    notes: dict[str, str] | None = None,
) -> list[Target]:
    """Targets from a figure's fixed goals (name -> (op, limit, unit)); a missing value is NOT MEASURED."""
    notes = notes or {}
    return [
        Target(figure, name, op, limit, values.get(name), unit, notes.get(name, ""))
        for name, (op, limit, unit) in goals.items()
    ]
