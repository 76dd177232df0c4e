"""Which results belong to the run's plan: evidence belongs to its spec (pure).

A run directory keeps every result file its runs wrote. When the spec changes (other probes, another
install, a new index or probe suite: new fingerprints), the grid's cells are planned and run again,
but a result whose definition is planned no more stays on disk: a grid cell the spec dropped, a
follow-up cell (counterfactual, edge) planned from a grid cell of the earlier spec. Such a result is
*stale*: listed as such, never counted by the table, the pins or the report (``world.results``
sets it apart when it loads a run directory that has a plan).

A result is current when:

- a grid cell: its cell is planned with the same definition (and, where the plan names its index
  and probe suite, the fingerprint those give);
- a follow-up cell: the plan's index and probe suite give its fingerprint (where the plan names
  them), and the grid cell it follows up is planned as it was (a counterfactual's named base; an
  edge cell's base: a planned cell of the same Python, variant, install, probes and policy).

Anything else (an existing environment, a bisection) is not the plan's to judge: kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch_matrix.vocab.records import (
    FOLLOWUP_ORIGINS,
    ORIGIN_BISECT,
    ORIGIN_COUNTERFACTUAL,
    ORIGIN_MATRIX,
    Cell,
    CellResult,
)

COUNTERFACTUAL_OF = "counterfactual-of-"  # plan.counterfactual's tag naming the cell it follows up


def stale_results(
    results: Sequence[CellResult],
    planned: Sequence[Cell | str],
    index: Mapping[str, Any] | None = None,
    suite: str = "",
) -> dict[str, str]:
    """cell id -> why its result is stale, for each of ``results`` the plan no longer plans.
    ``planned``: the plan's cells (an id alone: a cell the plan file could not describe, taken as
    planned); ``index``/``suite``: what the plan's fingerprints were made with ("": unknown)."""
    cells = {c.id: c for c in planned if isinstance(c, Cell)}
    ids_only = {c for c in planned if isinstance(c, str)}
    known = index is not None and bool(suite)
    stale: dict[str, str] = {}
    for result in results:
        cell = result.cell
        if cell.id in ids_only or cell.is_existing_env or cell.origin == ORIGIN_BISECT:
            continue
        if cell.origin == ORIGIN_MATRIX:
            mine = cells.get(cell.id)
            if mine is None:
                stale[cell.id] = "the spec plans this cell no more"
            elif mine.to_json() != cell.to_json() or (
                known and result.fingerprint != mine.fingerprint(index, suite)
            ):
                stale[cell.id] = "the spec plans this cell with another definition now: rerun it"
            continue
        if cell.origin not in FOLLOWUP_ORIGINS:
            continue
        if known and result.fingerprint != cell.fingerprint(index, suite):
            stale[cell.id] = (
                "a follow-up made with another index or probe suite than the spec's now"
            )
        elif not _base_planned(cell, cells):
            stale[cell.id] = (
                "a follow-up of a cell the spec plans no more, or plans with another definition"
            )
    return stale


def _same_context(cell: Cell, base: Cell) -> bool:
    return (
        cell.python == base.python
        and cell.variant == base.variant
        and tuple(cell.install) == tuple(base.install)
        and cell.install_digest == base.install_digest
        and dict(cell.policy) == dict(base.policy)
        and tuple(cell.probes) == tuple(base.probes)
        and tuple(cell.required_probes) == tuple(base.required_probes)
    )


def _base_planned(cell: Cell, planned: Mapping[str, Cell]) -> bool:
    """Whether the grid cell ``cell`` follows up is planned as it was: a counterfactual's named base
    (its requirements all kept), else (an edge cell, a counterfactual of one) a planned cell of the
    same context."""
    if cell.origin == ORIGIN_COUNTERFACTUAL:
        named = [t[len(COUNTERFACTUAL_OF) :] for t in cell.tags if t.startswith(COUNTERFACTUAL_OF)]
        base = planned.get(named[0]) if named else None
        if base is not None:
            return _same_context(cell, base) and set(base.requirements) <= set(cell.requirements)
    return any(_same_context(cell, base) for base in planned.values())
