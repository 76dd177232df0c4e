"""Follow-up cells: the cells a run plans from its own results (pure).

A follow-up cell is an ordinary ``Cell`` (own result file, resumed by fingerprint, judged by
the same verdict) whose ``origin`` says why it exists:

- ``counterfactual`` (``plan.counterfactual``): the same cell with the environment fixed, so a
  failure the environment explains is proven to be the environment's;
- ``edge``: a cell that moves one break's edge. Every version finding (a torch release whose
  cell fails while a release next to it, all else equal, passes) has two edges on the torch
  axis, the other axes held: where the break starts (between the last good and the first bad
  tested release) and where it ends (between the last bad and the next good tested release,
  or the newest release on the index). Each edge is bisected over the index's releases with
  ``plan.bisection.next_version`` (the same choice ``torch-matrix bisect`` makes) until the
  first and the last bad release are next to a tested good one or to the end of the index;
  an edge spends at most ``bisection.max_cells(N)`` = ceil(log2 N) + 2 cells over its N releases;
- ``bisect`` (``torch-matrix bisect``): cells judged by one probe or test, kept apart from the
  run's cells (``cli.bisection``).

``plan_followups(results, facts)`` is the one planning function: results + index facts -> the
next cells. It returns only cells that have no result yet; the caller runs them, adds their
results and asks again, until it returns nothing or the per-run cap is spent.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from matrix.plan import bisection
from matrix.plan.counterfactual import _SEPARATOR as _CF_SEPARATOR, counterfactual_of, plan_counterfactuals
from matrix.vocab.records import CORE_AXES, ORIGIN_COUNTERFACTUAL, ORIGIN_EDGE, ORIGIN_MATRIX, Cell, CellResult

FOLLOWUPS_ENV = "TORCH_MATRIX_FOLLOWUPS"
LEGACY_ENV = "TORCH_MATRIX_COUNTERFACTUALS"  # the cap's name before edges were follow-ups too
DEFAULT_CAP = 24
EDGE_SEPARATOR = "-edge"
START, END = "start", "end"
TORCH = "torch"
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def is_followup_id(cell_id: str) -> bool:
    """A follow-up cell's id (counting the cap from file names, without reading them)."""
    return _CF_SEPARATOR in cell_id or cell_id.endswith(EDGE_SEPARATOR)


def cap_from(environ: Mapping[str, str] = os.environ) -> int:
    """The most follow-up cells a run may add (``0``: off); a bad value is the default."""
    raw = (environ.get(FOLLOWUPS_ENV) or environ.get(LEGACY_ENV) or "").strip()
    if not raw:
        return DEFAULT_CAP
    try:
        return max(0, int(raw))
    except ValueError:
        return DEFAULT_CAP


# ---------------------------------------------------------------------------- edges

@dataclass(frozen=True)
class Edge:
    """One edge of one break: the releases it is searched over and where the search stands.

    ``span`` runs from the good side to the bad side (for an ``end`` edge: newest first), so
    ``bisection.next_version(span, outcomes)`` picks the next release either way."""

    context: tuple[tuple[str, str], ...]  # the held axes
    side: str  # START | END
    span: tuple[str, ...]
    base: Cell  # a grid cell of the break: the cell the follow-ups copy
    spent: int  # edge cells already run inside the span
    budget: int  # bisection.max_cells(len(span))
    next: str | None  # the release to test next (None: found, or cannot be found)
    axis: str = TORCH  # the axis that moves: torch (its torchvision paired) or an extras package

    @property
    def why(self) -> str:
        good, bad = self.span[0], self.span[-1]
        if self.side == START:
            return f"start of the break at {self.axis} {bad}: bisect {good} .. {bad}"
        return f"end of the break at {self.axis} {bad}: bisect {bad} .. {good}"


def moving_axes(cell: Cell) -> list[str]:
    """The axes whose edges are searched: torch, and each extras axis (numpy, setuptools, ...)."""
    return [TORCH, *(axis for axis in cell.axes if axis not in CORE_AXES)]


def context_of(cell: Cell, axis: str = TORCH) -> tuple[tuple[str, str], ...]:
    """Everything held while ``axis`` moves: every other axis (for torch, its paired torchvision
    moves with it), and what judges the cell (its probes and policy)."""
    free = {TORCH, "torchvision"} if axis == TORCH else {axis}
    held = [(name, value) for name, value in cell.axes.items() if name not in free]
    held.append(("probes", ",".join(cell.probes)))
    held.append(("required", ",".join(cell.required_probes)))
    held.append(("install", ",".join(cell.install)))
    return tuple(sorted(held))


def _release(text: str) -> Version | None:
    found = bisection.final_releases([text])
    return Version(found[0]) if found else None


def _value_on(result: CellResult, axis: str) -> str:
    """The release a cell tested on ``axis``: torch as planned, an extras package as installed."""
    if axis == TORCH:
        return result.cell.torch
    return result.install.resolved.get(axis, "") if result.installed else _exact(result.cell.axes.get(axis, ""))


def _exact(specifier: str) -> str:
    return specifier[2:] if specifier.startswith("==") and "*" not in specifier else ""


def outcomes_by_context(results: Iterable[CellResult], axis: str = TORCH) -> dict[tuple, dict[str, dict[str, object]]]:
    """context -> release on ``axis`` -> {"kind": GOOD|BAD|SKIP, "origin": ..., "cell": Cell}; a
    release both good and bad somewhere in a context counts as good (no pin excludes a version
    seen working)."""
    found: dict[tuple, dict[str, dict[str, object]]] = {}
    for result in results:
        cell = result.cell
        if cell.origin not in (ORIGIN_MATRIX, ORIGIN_EDGE, ORIGIN_COUNTERFACTUAL) or not cell.axes.get(TORCH) \
                or axis not in moving_axes(cell):
            continue
        if cell.origin == ORIGIN_COUNTERFACTUAL:
            # The release with the environment fixed: its verdict is the release's, and the cell
            # counts where the cell it follows up does (the grid, or an edge).
            base = counterfactual_of(cell.id)
            cell = dataclasses.replace(cell, id=base, requirements=cell.requirements[:-1], probe_subset=(),
                                       origin=ORIGIN_EDGE if base.endswith(EDGE_SEPARATOR) else ORIGIN_MATRIX,
                                       tags=tuple(t for t in cell.tags if not t.startswith(ORIGIN_COUNTERFACTUAL)))
        version = _release(_value_on(result, axis))
        if version is None:
            continue
        kind = bisection.outcome_of(result).kind
        entry = found.setdefault(context_of(cell, axis), {}).get(str(version))
        rank = {bisection.GOOD: 2, bisection.BAD: 1, bisection.SKIP: 0}
        if entry is None or rank[kind] > rank[str(entry["kind"])] or (
                rank[kind] == rank[str(entry["kind"])] and entry["origin"] != ORIGIN_MATRIX
                and cell.origin == ORIGIN_MATRIX):
            found[context_of(cell, axis)][str(version)] = {"kind": kind, "origin": cell.origin, "cell": cell}
    return found


def edges(results: Sequence[CellResult], releases_for: Callable[[Cell, str], Sequence[str]]) -> list[Edge]:
    """Both edges of every break the grid found, on every moving axis, with the next release each
    wants tested. A break is a version finding: in one context (the other axes held) the grid has a
    failing and a passing cell on the axis; an axis the grid did not vary there is never moved.

    ``releases_for(cell, axis)``: the index's final releases of ``axis`` (torch, or an extras
    package) a cell of that context can install, oldest first. A break is a run of grid-bad
    releases between grid-good ones (or an end of the index); the edges are searched only between
    those grid cells, so a run's edges are fixed by its grid and its follow-ups only narrow them."""
    found: list[Edge] = []
    axes = list(dict.fromkeys(axis for result in results for axis in moving_axes(result.cell)))
    for axis in axes:
        found += _edges_on(results, axis, releases_for)
    return found


def _edges_on(results: Sequence[CellResult], axis: str,
              releases_for: Callable[[Cell, str], Sequence[str]]) -> list[Edge]:
    found: list[Edge] = []
    for context, tested in outcomes_by_context(results, axis).items():
        any_cell = next(iter(tested.values()))["cell"]
        releases = [str(v) for v in sorted({r for r in map(_release, releases_for(any_cell, axis))
                                            if r is not None})]
        releases = list(dict.fromkeys(releases + [v for v in tested if v not in releases]))
        releases.sort(key=Version)
        position = {v: i for i, v in enumerate(releases)}
        kinds = {v: str(entry["kind"]) for v, entry in tested.items()}
        grid = [v for v in releases if v in tested and tested[v]["origin"] == ORIGIN_MATRIX
                and kinds[v] != bisection.SKIP]
        if {kinds[v] for v in grid} != {bisection.GOOD, bisection.BAD}:
            continue  # a version finding needs a failing and a passing grid cell on this axis
        runs: list[list[str]] = []
        for version in grid:
            if kinds[version] == bisection.BAD:
                if runs and runs[-1][-1] == "open":
                    runs[-1].insert(-1, version)
                else:
                    runs.append([version, "open"])
            elif runs and runs[-1][-1] == "open":
                runs[-1][-1] = version  # the good release that closes the run
        for run in runs:
            closing = run[-1]
            bads = run[:-1]
            first, last = bads[0], bads[-1]
            before = [v for v in grid if position[v] < position[first]]
            good_before = before[-1] if before else None
            good_after = None if closing == "open" else closing
            start_span = releases[position[good_before] if good_before else 0:position[first] + 1]
            end_span = list(reversed(releases[position[last]:position[good_after] + 1 if good_after
                                              else len(releases)]))
            base = tested[first]["cell"]
            for side, span in ((START, start_span), (END, end_span)):
                found.append(_edge(context, side, tuple(span), base, tested, kinds, axis))  # type: ignore[arg-type]
    return found


def _edge(context: tuple, side: str, span: tuple[str, ...], base: Cell,
          tested: Mapping[str, Mapping[str, object]], kinds: Mapping[str, str], axis: str = TORCH) -> Edge:
    outcomes = {v: kinds[v] for v in span if v in kinds}
    spent = sum(1 for v in span if v in tested and tested[v]["origin"] == ORIGIN_EDGE)
    budget = bisection.max_cells(len(span))
    wanted = bisection.next_version(list(span), outcomes) if len(span) > 1 else None
    if spent >= budget:
        wanted = None
    return Edge(context, side, span, base, spent, budget, wanted, axis)


def extras_edge_cell(base: Cell, axis: str, version: str, *, pythons: frozenset[str] | None = None,
                     reason: str = "") -> Cell:
    """``base`` with the extras package ``axis`` at exactly ``version`` (torch held), as an ``edge``
    follow-up: its axis value is ``==version``, its requirement ``axis==version``."""
    old = base.axes.get(axis, "")
    requirements = tuple(f"{axis}=={version}" if requirement == f"{axis}{old}" else requirement
                         for requirement in base.requirements)
    if f"{axis}=={version}" not in requirements:
        requirements = (*requirements, f"{axis}=={version}")
    note = ""
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        note = f"no {axis} {version} wheel for Python {base.python} on the index (wheels for: {served})"
    cell_id = _ID_UNSAFE.sub("_", f"{base.id}-{axis}{version}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if t != "planned-unsatisfiable"]
    return dataclasses.replace(base, id=cell_id, axes={**base.axes, axis: f"=={version}"},
                               requirements=requirements, plan_note=note, tags=(*tags, ORIGIN_EDGE),
                               origin=ORIGIN_EDGE, reason=reason)


def edge_cell(base: Cell, version: str, *, pairing: Mapping[str, str] | None = None,
              pythons: frozenset[str] | None = None, reason: str = "") -> Cell:
    """``base`` with torch ``version`` (and its paired torchvision when ``base`` has one from
    ``pairing``), as an ``edge`` follow-up. Planning already knows when it cannot install."""
    axes = dict(base.axes)
    notes = []
    old_torch, old_vision = base.torch, base.torchvision
    axes["torch"] = version
    vision = old_vision
    if old_vision and pairing is not None:
        vision = pairing.get(version, "")
        if not vision:
            notes.append(f"no torchvision release requires torch=={version}")
    axes["torchvision"] = vision
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(f"no torch {version} wheel for Python {base.python} on the index (wheels for: {served})")
    requirements = []
    for requirement in base.requirements:
        if requirement == f"torch=={old_torch}":
            requirement = f"torch=={version}"
        elif old_vision and requirement == f"torchvision=={old_vision}":
            if not vision:
                continue
            requirement = f"torchvision=={vision}"
        requirements.append(requirement)
    token = f"t{old_torch}"
    rest = base.id[len(token):] if base.id.startswith(token) else "-" + base.id
    cell_id = _ID_UNSAFE.sub("_", f"t{version}{rest}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if not t.startswith("torch") and t != "planned-unsatisfiable"]
    release = Version(version)
    tags = [f"torch{release.major}.{release.minor}", *tags, ORIGIN_EDGE]
    return dataclasses.replace(base, id=cell_id, axes=axes, requirements=tuple(requirements),
                               plan_note="; ".join(notes[:1]), tags=tuple(tags), origin=ORIGIN_EDGE,
                               reason=reason)


def plan_followups(results: Sequence[CellResult], releases_for: Callable[[Cell, str], Sequence[str]], *,
                   pairing: Mapping[str, str] | None = None,
                   pythons_of: Callable[[Cell, str, str], frozenset[str] | None] = lambda cell, version, axis: None,
                   ) -> list[Cell]:
    """The next follow-up cells: counterfactuals of the results that want one, then the next
    release of every edge still open; only cells with no result yet, each once."""
    have = {result.cell.id for result in results}
    planned: dict[str, Cell] = {}
    for result in results:
        if result.cell.origin in (ORIGIN_MATRIX, ORIGIN_EDGE):  # an edge cell's environment is fixed too
            for cell in plan_counterfactuals(result):
                if cell.id not in have:
                    planned.setdefault(cell.id, cell)
    for edge in edges(results, releases_for):
        if edge.next is None:
            continue
        pythons = pythons_of(edge.base, edge.next, edge.axis)
        if edge.axis == TORCH:
            cell = edge_cell(edge.base, edge.next, pairing=pairing, pythons=pythons, reason=edge.why)
        else:
            cell = extras_edge_cell(edge.base, edge.axis, edge.next, pythons=pythons, reason=edge.why)
        if cell.id not in have:
            planned.setdefault(cell.id, cell)
    return list(planned.values())


def edge_versions(results: Sequence[CellResult], releases_for: Callable[[Cell, str], Sequence[str]]) -> list[str]:
    """The torch releases the open edges want next (what the caller must read pairing for)."""
    return sorted({edge.next for edge in edges(results, releases_for) if edge.next and edge.axis == TORCH},
                  key=Version)


def within_cap(planned: Sequence[Cell], spent: int, cap: int) -> tuple[list[Cell], int]:
    """The planned cells that fit under ``cap`` given ``spent`` already run, and how many were dropped."""
    room = max(0, cap - spent)
    return list(planned[:room]), max(0, len(planned) - room)
