"""A break's edges (pure): where a version finding starts and ends on its axis.

A break is a run of failing grid releases on one axis (torch, torchvision or an extras package)
with every other axis held (its context, ``context_of``). ``edges`` finds both edges of every
break the grid shows and the release each wants tested next (``plan.bisection.next_version``);
``other_configuration`` the bad edge releases of an interaction to test once more where the
break's release passes. The cells that test them: ``plan.edgecells``; the planning loop:
``plan.followups``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from packaging.version import Version

from torch_matrix.judge.causes import axis_module_named
from torch_matrix.judge.verdict import verdict_of
from torch_matrix.plan import bisection
from torch_matrix.vocab.versions import version_key
from torch_matrix.plan.counterfactual import (
    counterfactual_of,
    replaced_by,
)
from torch_matrix.vocab.records import (
    CORE_AXES,
    ORIGIN_COUNTERFACTUAL,
    ORIGIN_EDGE,
    ORIGIN_MATRIX,
    Cell,
    CellResult,
)

Context = tuple[tuple[str, str], ...]  # the held axes of a break (``context_of``)


class Outcome(TypedDict):
    """One release's outcome in a context (``outcomes_by_context``)."""

    kind: str  # bisection.GOOD | BAD | SKIP
    origin: str  # the cell's origin (a counterfactual counts as the cell it follows up)
    cell: Cell
    result: CellResult


EDGE_SEPARATOR = "-edge"


START, END = "start", "end"


TORCH, TORCHVISION = "torch", "torchvision"


# The tag of an edge cell that tests an interaction's bad release in the configuration where the
# break's grid release passes (``other_configuration``): evidence for its release, no step of an edge.
OTHER_CONFIGURATION = "other-configuration"


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
    axis: str = (
        TORCH  # the axis that moves: torch / torchvision (the other paired) or an extras package
    )
    breaking: tuple[
        str, ...
    ] = ()  # the break's grid releases that fail (where an interaction shows)
    # The releases at the open end of the span stepped over, each with why: a cell there gave no
    # evidence (unsatisfiable for the cell, excluded by the project's requirements, install error).
    skipped: tuple[tuple[str, str], ...] = ()
    deciding: tuple[str, ...] = ()  # the probes that fail there: an edge cell runs only these

    @property
    def why(self) -> str:
        good, bad = self.span[0], self.span[-1]
        if self.side == START:
            text = f"start of the break at {self.axis} {bad}: bisect {good} .. {bad}"
        else:
            text = f"end of the break at {self.axis} {bad}: bisect {bad} .. {good}"
        if self.skipped:
            where = "older" if self.side == START else "newer"
            text += f" (stepped over the {where} {_listed(self.skipped)})"
        return text


def _listed(skipped: Sequence[tuple[str, str]]) -> str:
    """``1.12.1 (unsatisfiable: ...), 1.13.0 (...)``, the first three, oldest first (as every list)."""
    skipped = sorted(skipped, key=lambda entry: version_key(entry[0]))
    shown = ", ".join(f"{release} ({why})" for release, why in skipped[:3])
    return shown + (f", +{len(skipped) - 3} more" if len(skipped) > 3 else "")


def moving_axes(cell: Cell, torchvision_axis: bool = False) -> list[str]:
    """The axes whose edges are searched: torch, torchvision when the spec lists it explicitly
    (``torchvision_axis``) and the cell has one, and each extras axis (numpy, setuptools, ...)."""
    vision = [TORCHVISION] if torchvision_axis and cell.torchvision else []
    return [TORCH, *vision, *(axis for axis in cell.axes if axis not in CORE_AXES)]


def context_of(cell: Cell, axis: str = TORCH) -> tuple[tuple[str, str], ...]:
    """Everything held while ``axis`` moves: every other axis (torch and torchvision move
    together: each torchvision release requires one torch), and what judges the cell (its probes
    and policy)."""
    free = {TORCH, TORCHVISION} if axis in (TORCH, TORCHVISION) else {axis}
    held = [(name, value) for name, value in cell.axes.items() if name not in free]
    held.append(("probes", ",".join(cell.probes)))
    held.append(("required", ",".join(cell.required_probes)))
    held.append(("install", ",".join(cell.install)))
    return tuple(sorted(held))


@functools.lru_cache(maxsize=4096)
def _release(text: str) -> Version | None:
    """The final release ``text`` names (its public version), or None. Cached: a run's cells name
    a few dozen releases, and every report reads each of its 2,000 cells on every axis (issue 46)."""
    found = bisection.final_releases([text])
    return Version(found[0]) if found else None


def value_on(result: CellResult, axis: str) -> str:
    """The release a cell tested on ``axis``: torch as planned, an extras package as installed."""
    if axis == TORCH:
        return result.cell.torch
    if axis == TORCHVISION:
        return result.cell.torchvision
    return (
        result.install.resolved.get(axis, "")
        if result.installed
        else _exact(result.cell.axes.get(axis, ""))
    )


def _exact(specifier: str) -> str:
    return specifier[2:] if specifier.startswith("==") and "*" not in specifier else ""


_RANK = {bisection.GOOD: 2, bisection.BAD: 1, bisection.SKIP: 0}  # a good release beats a bad one


def outcomes_by_context(
    results: Iterable[CellResult], axis: str = TORCH
) -> dict[Context, dict[str, Outcome]]:
    """context -> release on ``axis`` -> {"kind": GOOD|BAD|SKIP, "origin": ..., "cell": Cell,
    "result": CellResult}; a release both good and bad somewhere in a context counts as good (no
    pin excludes a version seen working)."""
    found: dict[Context, dict[str, Outcome]] = {}
    for result in results:
        cell = result.cell
        if (
            cell.origin not in (ORIGIN_MATRIX, ORIGIN_EDGE, ORIGIN_COUNTERFACTUAL)
            or not cell.axes.get(TORCH)
            or axis not in moving_axes(cell, torchvision_axis=True)
        ):
            continue
        if cell.origin == ORIGIN_COUNTERFACTUAL:
            # The release with the environment fixed: its verdict is the release's, and the cell
            # counts where the cell it follows up does (the grid, or an edge).
            base = counterfactual_of(cell.id)
            replaced = replaced_by(cell)  # the axis requirement its fix replaced, put back
            cell = dataclasses.replace(
                cell,
                id=base,
                requirements=(*cell.requirements[:-1], *([replaced] if replaced else [])),
                probe_subset=(),
                origin=ORIGIN_EDGE if base.endswith(EDGE_SEPARATOR) else ORIGIN_MATRIX,
                tags=tuple(t for t in cell.tags if not t.startswith(ORIGIN_COUNTERFACTUAL)),
            )
        version = _release(value_on(result, axis))
        if version is None:
            continue
        kind = bisection.outcome_of(result).kind
        tested = found.setdefault(context_of(cell, axis), {})
        release = str(version)
        entry = tested.get(release)
        if (
            entry is None
            or _RANK[kind] > _RANK[str(entry["kind"])]
            or (
                _RANK[kind] == _RANK[str(entry["kind"])]
                and entry["origin"] != ORIGIN_MATRIX
                and cell.origin == ORIGIN_MATRIX
            )
        ):
            tested[release] = {
                "kind": kind,
                "origin": cell.origin,
                "cell": cell,
                "result": result,
            }
    return found


def edges(
    results: Sequence[CellResult],
    releases_for: Callable[[Cell, str], Sequence[str]],
    *,
    torchvision_axis: bool = False,
) -> list[Edge]:
    """Both edges of every break the grid found, on every moving axis, with the next release each
    wants tested. A break is a version finding: in one context (the other axes held) the grid has a
    failing and a passing cell on the axis; an axis the grid did not vary there is never moved.

    ``releases_for(cell, axis)``: the index's final releases of ``axis`` (torch, torchvision or an
    extras package) a cell of that context can install, oldest first. A break is a run of grid-bad
    releases between grid-good ones (or an end of the index); the edges are searched only between
    those grid cells, so a run's edges are fixed by its grid and its follow-ups only narrow them.
    ``torchvision_axis`` (the spec lists torchvision explicitly): a break that is torchvision's
    (``on_torchvision``) is bisected over torchvision's releases instead of torch's."""
    found: list[Edge] = []
    axes = list(
        dict.fromkeys(
            axis for result in results for axis in moving_axes(result.cell, torchvision_axis)
        )
    )
    for axis in axes:
        found += _edges_on(results, axis, releases_for, torchvision_axis)
    return found


def names_torchvision(result: CellResult) -> bool:
    """Every failing probe of the cell that names a module of an axis names torchvision's (a
    ``torchvision_*`` probe, ``No module named 'torchvision.transforms.functional_tensor'``), and
    one does. A module the error quotes, not a frame: the pins blame the same axis
    (``pins.evidence``), and a traceback through torchvision may be torch's doing."""
    named = []
    for name in verdict_of(result).failing:
        probe = result.probe(name)
        if probe is None:
            continue
        if name.startswith(TORCHVISION + "_"):
            module = TORCHVISION
        else:
            module = axis_module_named(result.cell, probe, frames=False)
        if module:
            named.append(module.split(".")[0])
    return bool(named) and all(module == TORCHVISION for module in named)


def on_torchvision(
    bad: Sequence[Mapping[str, object]], good: Sequence[Mapping[str, object]]
) -> bool:
    """A break is torchvision's when a failing grid cell's torch also passes in the context (with
    another torchvision: torch cannot be blamed), or when every failing grid cell names torchvision."""
    good_torch = {entry["cell"].torch for entry in good}  # type: ignore[attr-defined]
    if any(entry["cell"].torch in good_torch for entry in bad):  # type: ignore[attr-defined]
        return True
    return bool(bad) and all(names_torchvision(entry["result"]) for entry in bad)  # type: ignore[arg-type]


def _edges_on(
    results: Sequence[CellResult],
    axis: str,
    releases_for: Callable[[Cell, str], Sequence[str]],
    torchvision_axis: bool = False,
) -> list[Edge]:
    found: list[Edge] = []
    for context, tested in outcomes_by_context(results, axis).items():
        any_cell = next(iter(tested.values()))["cell"]
        if axis not in moving_axes(any_cell, torchvision_axis):
            continue
        releases = [
            str(v)
            for v in sorted(
                {r for r in map(_release, releases_for(any_cell, axis)) if r is not None}
            )
        ]
        releases = list(dict.fromkeys(releases + [v for v in tested if v not in releases]))
        releases.sort(key=Version)
        position = {v: i for i, v in enumerate(releases)}
        kinds = {v: str(entry["kind"]) for v, entry in tested.items()}
        grid = [
            v
            for v in releases
            if v in tested and tested[v]["origin"] == ORIGIN_MATRIX and kinds[v] != bisection.SKIP
        ]
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
            if torchvision_axis and axis in (TORCH, TORCHVISION) and any_cell.torchvision:
                goods = [tested[v] for v in grid if kinds[v] == bisection.GOOD]
                if on_torchvision([tested[v] for v in bads], goods) != (axis == TORCHVISION):
                    continue  # the other of the pair's axes carries this break
            first, last = bads[0], bads[-1]
            before = [v for v in grid if position[v] < position[first]]
            good_before = before[-1] if before else None
            good_after = None if closing == "open" else closing
            start_span = releases[position[good_before] if good_before else 0 : position[first] + 1]
            end_span = list(
                reversed(
                    releases[
                        position[last] : position[good_after] + 1 if good_after else len(releases)
                    ]
                )
            )
            base = tested[first]["cell"]
            deciding = deciding_probes([tested[v]["result"] for v in bads])
            for side, span in ((START, start_span), (END, end_span)):
                found.append(
                    _edge(
                        context,
                        side,
                        tuple(span),
                        base,
                        tested,
                        kinds,
                        axis,
                        tuple(bads),
                        deciding,
                    )
                )
    return found


def deciding_probes(bad: Sequence[CellResult]) -> tuple[str, ...]:
    """The probes that decide a break: those that fail in its failing grid cells (in the suite's
    order), the question each of its edge cells asks. Empty when a failing cell names none."""
    found: dict[str, None] = {}
    for result in bad:
        failing = verdict_of(result).failing
        if not failing:
            return ()
        found.update(dict.fromkeys(failing))
    return tuple(found)


def _edge(
    context: Context,
    side: str,
    span: tuple[str, ...],
    base: Cell,
    tested: Mapping[str, Outcome],
    kinds: Mapping[str, str],
    axis: str = TORCH,
    breaking: tuple[str, ...] = (),
    deciding: tuple[str, ...] = (),
) -> Edge:
    # Step over holes at the open end (no edge on that side yet: the oldest or newest release, or
    # the farthest one tried): a release whose cell gave no evidence says nothing of the break, so
    # the search moves to the next one inward, at most as many times as the edge's own budget.
    skipped: list[tuple[str, str]] = []
    limit = bisection.max_cells(len(span))
    while len(span) > 2 and kinds.get(span[0]) == bisection.SKIP and len(skipped) < limit:
        entry = tested[span[0]]
        why = bisection.outcome_of(entry["result"]).evidence
        skipped.append((span[0], " ".join(why.split())[:120]))
        span = span[1:]
    outcomes = {v: kinds[v] for v in span if v in kinds}
    spent = sum(
        1
        for v in span
        if v in tested
        and tested[v]["origin"] == ORIGIN_EDGE
        and OTHER_CONFIGURATION not in tested[v]["cell"].tags
    )
    budget = bisection.max_cells(len(span))
    wanted = bisection.next_version(list(span), outcomes) if len(span) > 1 else None
    if spent >= budget:
        wanted = None
    return Edge(
        context, side, span, base, spent, budget, wanted, axis, breaking, tuple(skipped), deciding
    )


@dataclass(frozen=True)
class OtherConfiguration:
    """An edge release to test once more: ``release`` failed in the edge's context, and the break
    is an interaction: ``good`` (a grid cell of another configuration, same probes and install)
    passes at one of the break's failing releases. The cell is ``good`` with ``axis`` at ``release``."""

    edge: Edge
    release: str
    good: CellResult
    bad: CellResult  # the edge's cell that failed at ``release``


def other_configuration(
    results: Sequence[CellResult], found: Sequence[Edge]
) -> list[OtherConfiguration]:
    """For each edge of an interaction, each release it found bad that the passing configuration
    has not tested. The configuration chosen is the one that differs from the edge's context on the
    fewest axes (then by cell id)."""
    wanted: list[OtherConfiguration] = []
    by_axis: dict[str, dict[Context, dict[str, Outcome]]] = {}
    for edge in found:
        tested = by_axis.setdefault(edge.axis, outcomes_by_context(results, edge.axis))
        here = tested.get(edge.context, {})
        passing = _passing_configuration(tested, edge)
        if passing is None:
            continue
        context, good = passing
        there = tested.get(context, {})
        for release in edge.span:
            entry = here.get(release)
            if (
                entry is not None
                and entry["kind"] == bisection.BAD
                and entry["origin"] == ORIGIN_EDGE
                and release not in there
            ):
                wanted.append(OtherConfiguration(edge, release, good, entry["result"]))
    return wanted


_JUDGING = ("probes", "required", "install")


def _passing_configuration(
    tested: Mapping[Context, Mapping[str, Outcome]], edge: Edge
) -> tuple[Context, CellResult] | None:
    held = dict(edge.context)
    best: tuple[int, str, Context, CellResult] | None = None
    for context, releases in tested.items():
        other = dict(context)
        if context == edge.context or any(other.get(key) != held.get(key) for key in _JUDGING):
            continue
        for release in edge.breaking:
            entry = releases.get(release)
            if entry is None or entry["kind"] != bisection.GOOD or entry["origin"] != ORIGIN_MATRIX:
                continue
            result = entry["result"]
            if result.cell.origin != ORIGIN_MATRIX:
                continue  # a counterfactual's environment is not a configuration of the grid
            differ = sum(1 for key in set(held) | set(other) if held.get(key) != other.get(key))
            candidate = (differ, result.cell.id, context, result)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return None if best is None else (best[2], best[3])
