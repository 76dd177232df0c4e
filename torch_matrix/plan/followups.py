"""Follow-up cells: the cells a run plans from its own results (pure).

A follow-up cell is an ordinary ``Cell`` (own result file, resumed by fingerprint, judged by
the same verdict) whose ``origin`` says why it exists:

- ``counterfactual`` (``plan.counterfactual``): the same cell with the environment fixed, so a
  failure the environment explains is proven to be the environment's;
- ``edge``: a cell that moves one break's edge. Every version finding (a torch release whose
  cell fails while a release next to it, all else equal, passes) has two edges on its axis, the
  other axes held: where the break starts (between the last good and the first bad tested
  release) and where it ends (between the last bad and the next good tested release, or the
  newest release on the index). Each edge is bisected over the index's releases with
  ``plan.bisection.next_version`` (the same choice ``torch-matrix bisect`` makes) until the
  first and the last bad release are next to a tested good one or to the end of the index;
  an edge spends at most ``bisection.max_cells(N)`` = ceil(log2 N) + 2 cells over its N releases.
  The axis is torch (its torchvision paired), an extras package (torch held), or, when the spec
  lists torchvision explicitly and the break is torchvision's (``on_torchvision``), torchvision
  (each release with the torch it requires: one torchvision release installs with one torch).
  An *interaction* (the break's release passes in another configuration of the grid: torch 1.13.1
  fails only with setuptools>=82) tests each bad edge release in that passing configuration too
  (``other_configuration``), so the pins can tell "bad" from "bad with setuptools>=82". An edge
  release the environment explains waits for its counterfactual, whose verdict stands for the
  release; once one passed, the edge's next cells install that fix from the start (``with_fixes``);
- ``bisect`` (``torch-matrix bisect``): cells judged by one probe or test, kept apart from the
  run's cells (``run.bisection``).

Where a break's edges are and which release each wants next: ``plan.breaks``; the cell that tests
one edge release: ``plan.edgecells``. ``plan_followups(results, facts)`` is the one planning function: results + index facts -> the
next cells. It returns only cells that have no result yet; the caller runs them, adds their
results and asks again, until it returns nothing or the per-run cap is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from packaging.version import Version

from torch_matrix.plan import bisection
from torch_matrix.plan.counterfactual import (
    _SEPARATOR as _CF_SEPARATOR,
    counterfactual_of,
    fixes_applied,
    plan_counterfactuals,
)
from torch_matrix.vocab import settings
from torch_matrix.vocab.settings import FOLLOWUPS_ENV as FOLLOWUPS_ENV
from torch_matrix.vocab.records import (
    ORIGIN_COUNTERFACTUAL,
    ORIGIN_EDGE,
    ORIGIN_MATRIX,
    Cell,
    CellResult,
)
from torch_matrix.plan.breaks import (
    Context,
    EDGE_SEPARATOR,
    Edge,
    Outcome,
    TORCH,
    TORCHVISION,
    context_of,
    edges,
    moving_axes,
    other_configuration,
    outcomes_by_context,
)
from torch_matrix.plan.edgecells import asking_only
from torch_matrix.plan.edgecells import moved_cell, configuration_cell, with_fixes


DEFAULT_CAP = settings.DEFAULT_FOLLOWUPS


def is_followup_id(cell_id: str) -> bool:
    """A follow-up cell's id (counting the cap from file names, without reading them)."""
    return _CF_SEPARATOR in cell_id or cell_id.endswith(EDGE_SEPARATOR)


def cap_from(environ: Mapping[str, str], spec_value: int | None = None) -> int:
    """The most follow-up cells a run may add (``0``: off): ``$TORCH_MATRIX_FOLLOWUPS`` (or its
    older name) in ``environ``, else the spec's ``followups = N``, else the default; a bad value
    is a ``UserError`` naming it (vocab/settings.py)."""
    if spec_value is not None and not settings.given(environ, FOLLOWUPS_ENV):
        return spec_value
    cap: int = settings.read(environ, FOLLOWUPS_ENV)
    return cap


def _merge_pythons(*sets: frozenset[str] | None) -> frozenset[str] | None:
    known = [found for found in sets if found is not None]
    return frozenset.intersection(*known) if known else None


def plan_followups(
    results: Sequence[CellResult],
    releases_for: Callable[[Cell, str], Sequence[str]],
    *,
    pairing: Mapping[str, str] | None = None,
    pythons_of: Callable[[Cell, str, str], frozenset[str] | None] = lambda cell, version, axis: (
        None
    ),
    torch_of: Mapping[str, str] | None = None,
    torchvision_axis: bool = False,
) -> list[Cell]:
    """The next follow-up cells: counterfactuals of the results that want one, then each bad edge
    release of an interaction in its passing configuration, then the next release of every edge
    still open; only cells with no result yet, each once. ``pairing``: torch -> its torchvision;
    ``torch_of``: torchvision -> the torch it requires; ``torchvision_axis``: the spec lists
    torchvision explicitly (``edges``)."""
    have = {result.cell.id for result in results}
    planned: dict[str, Cell] = {}
    for result in results:
        if result.cell.origin in (
            ORIGIN_MATRIX,
            ORIGIN_EDGE,
            ORIGIN_COUNTERFACTUAL,
        ):  # an edge cell's environment is fixed too, and a counterfactual's next gap
            for cell in plan_counterfactuals(result):
                if cell.id not in have:
                    planned.setdefault(cell.id, cell)

    def pythons(base: Cell, axis: str, version: str) -> frozenset[str] | None:
        found = pythons_of(base, version, axis)
        if axis == TORCHVISION and (torch_of or {}).get(version):
            found = _merge_pythons(found, pythons_of(base, (torch_of or {})[version], TORCH))
        return found

    found = edges(results, releases_for, torchvision_axis=torchvision_axis)
    waiting = _waiting_for_counterfactuals(
        results, found, {counterfactual_of(cell_id) for cell_id in planned}
    )
    fixes = _confirmed_fixes(results)
    for wanted in other_configuration(results, found):
        axis = wanted.edge.axis
        cell = configuration_cell(
            wanted,
            pairing=pairing,
            torch_of=torch_of,
            pythons=pythons(wanted.good.cell, axis, wanted.release),
        )
        cell = with_fixes(cell, fixes.get((axis, context_of(cell, axis)), ()), axis)
        if cell.id not in have:
            planned.setdefault(cell.id, cell)
    for edge in found:
        if edge.next is None or edge in waiting:
            continue
        cell = moved_cell(
            edge.base,
            edge.axis,
            edge.next,
            pairing=pairing,
            torch_of=torch_of,
            pythons=pythons(edge.base, edge.axis, edge.next),
            reason=edge.why,
        )
        cell = asking_only(cell, edge.deciding)
        cell = with_fixes(cell, fixes.get((edge.axis, edge.context), ()), edge.axis)
        if cell.id not in have:
            planned.setdefault(cell.id, cell)
    return list(planned.values())


def _confirmed_fixes(
    results: Sequence[CellResult],
) -> dict[tuple[str, Context], tuple[tuple[str, str], ...]]:
    """(axis, context) -> (requirement, counterfactual id) of each environment fix a counterfactual in
    that context confirmed (it passed): ``setuptools<82`` once a release's edge cell needed it."""
    found: dict[tuple[str, Context], dict[str, str]] = {}
    for result in results:
        cell = result.cell
        if (
            cell.origin != ORIGIN_COUNTERFACTUAL
            or bisection.outcome_of(result).kind != bisection.GOOD
        ):
            continue
        # a chain (numpy, then setuptools) passed with every fix it stacked, the last ones added
        for fix in cell.requirements[-max(1, fixes_applied(cell)) :]:
            for axis in moving_axes(cell, torchvision_axis=True):
                found.setdefault((axis, context_of(cell, axis)), {}).setdefault(fix, cell.id)
    return {key: tuple(sorted(value.items())) for key, value in found.items()}


def _waiting_for_counterfactuals(
    results: Sequence[CellResult], found: Sequence[Edge], pending: set[str]
) -> list[Edge]:
    """The edges with a release whose cell the environment explains and whose counterfactual is
    planned but not run: its verdict stands for that release (2.1.0 passes with setuptools<82: the
    edge is found there), so the edge picks no other release before it is in."""
    if not pending:
        return []
    by_axis: dict[str, dict[Context, dict[str, Outcome]]] = {}
    waiting = []
    for edge in found:
        tested = by_axis.setdefault(edge.axis, outcomes_by_context(results, edge.axis)).get(
            edge.context, {}
        )
        if any(tested[v]["cell"].id in pending for v in edge.span if v in tested):
            waiting.append(edge)
    return waiting


def edge_versions(
    results: Sequence[CellResult],
    releases_for: Callable[[Cell, str], Sequence[str]],
    axis: str = TORCH,
    *,
    torchvision_axis: bool = False,
) -> list[str]:
    """The releases of ``axis`` (torch or torchvision) the open edges and the interactions' other
    configurations want next: what the caller must read the pairing for."""
    found = edges(results, releases_for, torchvision_axis=torchvision_axis)
    wanted = {edge.next for edge in found if edge.next and edge.axis == axis}
    wanted |= {
        item.release for item in other_configuration(results, found) if item.edge.axis == axis
    }
    return sorted(wanted, key=Version)


def within_cap(planned: Sequence[Cell], spent: int, cap: int) -> tuple[list[Cell], int]:
    """The planned cells that fit under ``cap`` given ``spent`` already run, and how many were dropped."""
    room = max(0, cap - spent)
    return list(planned[:room]), max(0, len(planned) - room)
