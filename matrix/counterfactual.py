"""Counterfactual cells: before a failure is blamed, run the cell that isolates the blame.

Pure planning: a function of one finished ``CellResult`` and its verdict. The cells it returns
are ordinary ``Cell``s (same axes, same probes, one requirement more), run by the ordinary
cell machinery right after the cell they test (``matrix.nox_support``), with their own result
files. Their results are evidence like any other cell's:

- an environment failure ``No module named 'setuptools'`` (``matrix.causes``) plans the same
  cell with ``setuptools`` added. If it passes, the versions work once the environment is
  fixed, and the advice is confirmed (the pins report names the passing cell);
- a version exclusion is confirmed from the grid itself: the pins name a passing cell that
  differs only on the blamed axis (``matrix.pins.search``), or mark the exclusion unconfirmed.

Bounded: at most ``cap`` counterfactual cells per run (``TORCH_MATRIX_COUNTERFACTUALS``,
default 8; ``0`` switches them off), printed when a run plans one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from .causes import EnvironmentKind
from .records import Cell, CellResult
from .verdict import verdict_of

COUNTERFACTUALS_ENV = "TORCH_MATRIX_COUNTERFACTUALS"
DEFAULT_CAP = 8
TAG = "counterfactual"
_SEPARATOR = "-cf-"


def cap_from(environ: Mapping[str, str] = os.environ) -> int:
    """The most counterfactual cells a run may add (``0``: off). A bad value is the default."""
    raw = environ.get(COUNTERFACTUALS_ENV, "").strip()
    if not raw:
        return DEFAULT_CAP
    try:
        return max(0, int(raw))
    except ValueError:
        return DEFAULT_CAP


def is_counterfactual(cell_id: str) -> bool:
    return _SEPARATOR in cell_id


def counterfactual_of(cell_id: str) -> str:
    """The id of the cell a counterfactual tests (the id itself for an ordinary cell)."""
    return cell_id.split(_SEPARATOR, 1)[0]


def _token(requirement: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", requirement).strip("_")


def plan_counterfactuals(result: CellResult) -> list[Cell]:
    """The cells that would isolate the blame for ``result``'s failure (none when it passed,
    or when the cell is itself a counterfactual)."""
    cell = result.cell
    if is_counterfactual(cell.id):
        return []
    verdict = verdict_of(result)
    added: list[str] = []
    for attribution in verdict.environment.values():
        if attribution.kind == EnvironmentKind.MISSING_DEPENDENCY and attribution.requirement \
                and attribution.requirement not in added:
            added.append(attribution.requirement)
    cells = []
    for requirement in added:
        cells.append(Cell(
            id=f"{cell.id}{_SEPARATOR}with-{_token(requirement)}",
            axes=dict(cell.axes),
            requirements=(*cell.requirements, requirement),
            probes=cell.probes, required_probes=cell.required_probes,
            tags=(*cell.tags, TAG, f"{TAG}-of-{cell.id}"),
            policy=dict(cell.policy)))
    return cells


def within_cap(planned: Sequence[Cell], already: int, cap: int) -> tuple[list[Cell], int]:
    """The planned cells that fit under ``cap`` given ``already`` run, and how many were dropped."""
    room = max(0, cap - already)
    return list(planned[:room]), max(0, len(planned) - room)
