"""Breaks the edge search does not bisect, and why (pure).

``plan.followups`` bisects a break between a failing and a passing *grid* cell of one context
(the other axes held): a run's edges are fixed by its grid. Where every grid cell of a context
fails, no edge is searched there. That is right when nothing passes (no version finding), but
it was silent: a break that edited or rerun results left without a passing grid cell (edge
cells passing beside failing grid cells) was neither bisected nor mentioned. ``unbisected``
names each such context in one line, said by ``nox -s followups`` and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch_matrix.plan import bisection
from torch_matrix.plan.breaks import Context, moving_axes, outcomes_by_context
from torch_matrix.vocab.records import ORIGIN_MATRIX, CellResult
from torch_matrix.vocab.versions import version_key

_SHOWN = 4


@dataclass(frozen=True)
class Unbisected:
    """A context whose grid cells all fail on ``axis``: ``passing``, releases that pass there in
    follow-up cells (empty: nothing passes, so there is no version finding to bisect)."""

    axis: str
    context: Context
    failing: tuple[str, ...]  # the failing grid releases, oldest first
    passing: tuple[str, ...]  # releases passing there in follow-up cells, oldest first

    def line(self) -> str:
        where = _context_text(self.context)
        bad = f"{self.axis} {_listed(self.failing)} fail{'s' if len(self.failing) == 1 else ''}"
        if self.passing:
            return (
                f"not bisected: {bad} in every grid cell of {where}, while follow-up cells pass "
                f"at {_listed(self.passing)} (results edited or rerun since those were planned): "
                "edges are searched from a passing grid cell; rerun the grid cells (`-- --redo`) "
                "to bisect this break"
            )
        return (
            f"not bisected: {bad} in every cell of {where}: no release passes there, so there "
            "is no version finding to bisect"
        )


def unbisected(
    results: Sequence[CellResult], *, torchvision_axis: bool = False
) -> list[Unbisected]:
    """Each context with failing grid cells and no passing one, on every axis an edge moves."""
    found: list[Unbisected] = []
    axes = list(
        dict.fromkeys(
            axis for result in results for axis in moving_axes(result.cell, torchvision_axis)
        )
    )
    for axis in axes:
        for context, tested in outcomes_by_context(results, axis).items():
            grid = {
                version: str(entry["kind"])
                for version, entry in tested.items()
                if entry["origin"] == ORIGIN_MATRIX and entry["kind"] != bisection.SKIP
            }
            if not grid or set(grid.values()) != {bisection.BAD}:
                continue
            passing = [
                version
                for version, entry in tested.items()
                if entry["origin"] != ORIGIN_MATRIX and entry["kind"] == bisection.GOOD
            ]
            found.append(
                Unbisected(
                    axis,
                    context,
                    tuple(sorted(grid, key=version_key)),
                    tuple(sorted(passing, key=version_key)),
                )
            )
    return found


def _listed(versions: Sequence[str]) -> str:
    shown = ", ".join(versions[:_SHOWN])
    return shown + (f" (+{len(versions) - _SHOWN} more)" if len(versions) > _SHOWN else "")


def _context_text(context: Context) -> str:
    """The held axes that vary between cells (python, extras), not the probe list."""
    held = [f"{name} {value}" for name, value in context if name not in _NOT_SHOWN and value]
    return ", ".join(held) or "the run"


_NOT_SHOWN = frozenset({"probes", "required", "install"})
