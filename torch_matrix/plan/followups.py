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
  run's cells (``cli.bisection``).

``plan_followups(results, facts)`` is the one planning function: results + index facts -> the
next cells. It returns only cells that have no result yet; the caller runs them, adds their
results and asks again, until it returns nothing or the per-run cap is spent.
"""

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
from torch_matrix.plan.counterfactual import (
    _SEPARATOR as _CF_SEPARATOR,
    counterfactual_of,
    plan_counterfactuals,
    replaced_by,
    with_requirement,
    probe_subset,
)
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import ID_UNSAFE
from torch_matrix.vocab.settings import FOLLOWUPS_ENV as FOLLOWUPS_ENV
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


DEFAULT_CAP = settings.DEFAULT_FOLLOWUPS
EDGE_SEPARATOR = "-edge"
START, END = "start", "end"
TORCH, TORCHVISION = "torch", "torchvision"
# The tag of an edge cell that tests an interaction's bad release in the configuration where the
# break's grid release passes (``other_configuration``): evidence for its release, no step of an edge.
OTHER_CONFIGURATION = "other-configuration"


def is_followup_id(cell_id: str) -> bool:
    """A follow-up cell's id (counting the cap from file names, without reading them)."""
    return _CF_SEPARATOR in cell_id or cell_id.endswith(EDGE_SEPARATOR)


def cap_from(environ: Mapping[str, str], spec_value: int | None = None) -> int:
    """The most follow-up cells a run may add (``0``: off): ``$TORCH_MATRIX_FOLLOWUPS`` (or its
    older name) in ``environ``, else the spec's ``followups = N``, else the default; a bad value
    is a ``UserError`` naming it (vocab/settings.py)."""
    names = (FOLLOWUPS_ENV, settings.LEGACY_FOLLOWUPS_ENV)
    if spec_value is not None and not any(environ.get(name, "").strip() for name in names):
        return spec_value
    cap: int = settings.read(environ, FOLLOWUPS_ENV)
    return cap


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
    """``1.13.0 (unsatisfiable: ...), 1.12.1 (...)``, the first three."""
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


def _release(text: str) -> Version | None:
    found = bisection.final_releases([text])
    return Version(found[0]) if found else None


def _value_on(result: CellResult, axis: str) -> str:
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
        version = _release(_value_on(result, axis))
        if version is None:
            continue
        kind = bisection.outcome_of(result).kind
        entry = found.setdefault(context_of(cell, axis), {}).get(str(version))
        rank = {bisection.GOOD: 2, bisection.BAD: 1, bisection.SKIP: 0}
        if (
            entry is None
            or rank[kind] > rank[str(entry["kind"])]
            or (
                rank[kind] == rank[str(entry["kind"])]
                and entry["origin"] != ORIGIN_MATRIX
                and cell.origin == ORIGIN_MATRIX
            )
        ):
            found[context_of(cell, axis)][str(version)] = {
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


def asking_only(cell: Cell, deciding: Sequence[str]) -> Cell:
    """An edge cell that runs only the probes ``deciding`` its break (and the install check they
    rest on, ``install_sanity``, where its suite has it): ``probe_subset``. Its probes and required
    probes stay the grid's, so it is judged in the grid's context; its verdict is the subset's and
    its other results are neither run nor claimed (``judge.verdict``, ``run.cellrun``)."""
    if not deciding or cell.probe_subset:
        return cell
    return dataclasses.replace(cell, probe_subset=probe_subset(cell, deciding))


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


# ---------------------------------------------------------------------------- interactions


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


def _difference(cell: CellResult, other: CellResult, axis: str) -> list[tuple[str, str, str]]:
    """(axis, this cell's value, the other's) on every held axis where the two configurations differ."""
    free = {TORCH, TORCHVISION} if axis in (TORCH, TORCHVISION) else {axis}
    names = [name for name in cell.cell.axes if name not in free]
    return [
        (name, cell.cell.axes.get(name, ""), other.cell.axes.get(name, ""))
        for name in names
        if cell.cell.axes.get(name, "") != other.cell.axes.get(name, "")
    ]


def configuration_cell(
    wanted: OtherConfiguration,
    *,
    pairing: Mapping[str, str] | None = None,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
) -> Cell:
    """The edge release in the passing configuration: the passing grid cell with the edge's axis at
    ``release``, every other axis and requirement as that grid cell has them (so it resolves what
    the grid cell resolved, and counts in the grid cell's context)."""
    edge, good = wanted.edge, wanted.good
    differ = _difference(good, wanted.bad, edge.axis)
    shown = ", ".join(f"{name}{_as_requirement(value)}" for name, value, _ in differ)
    failing = ", ".join(f"{name}{_as_requirement(value)}" for name, _, value in differ)
    reason = (
        f"{edge.axis} {wanted.release} in the finding's other configuration ({shown}, where "
        f"{edge.axis} {_value_on(good, edge.axis)} passes [{good.cell.id}]): does it fail only with "
        f"{failing} [{wanted.bad.cell.id}]?"
    )
    cell = _moved(
        good.cell,
        edge.axis,
        wanted.release,
        pairing=pairing,
        torch_of=torch_of,
        pythons=pythons,
        reason=reason,
    )
    return dataclasses.replace(cell, tags=(*cell.tags, OTHER_CONFIGURATION))


def _as_requirement(value: str) -> str:
    return value if value[:1] in "<>=!~" else f"=={value}"


# ---------------------------------------------------------------------------- cells


def _moved(
    base: Cell,
    axis: str,
    version: str,
    *,
    pairing: Mapping[str, str] | None = None,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    if axis == TORCH:
        return edge_cell(base, version, pairing=pairing, pythons=pythons, reason=reason)
    if axis == TORCHVISION:
        return vision_edge_cell(base, version, torch_of=torch_of, pythons=pythons, reason=reason)
    return extras_edge_cell(base, axis, version, pythons=pythons, reason=reason)


def extras_edge_cell(
    base: Cell, axis: str, version: str, *, pythons: frozenset[str] | None = None, reason: str = ""
) -> Cell:
    """``base`` with the extras package ``axis`` at exactly ``version`` (torch held), as an ``edge``
    follow-up: its axis value is ``==version``, its requirement ``axis==version``."""
    old = base.axes.get(axis, "")
    requirements = tuple(
        f"{axis}=={version}" if requirement == f"{axis}{old}" else requirement
        for requirement in base.requirements
    )
    if f"{axis}=={version}" not in requirements:
        requirements = (*requirements, f"{axis}=={version}")
    note = ""
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        note = f"no {axis} {version} wheel for Python {base.python} on the index (wheels for: {served})"
    cell_id = ID_UNSAFE.sub("_", f"{base.id}-{axis}{version}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if t != "planned-unsatisfiable"]
    return dataclasses.replace(
        base,
        id=cell_id,
        axes={**base.axes, axis: f"=={version}"},
        requirements=requirements,
        plan_note=note,
        tags=(*tags, ORIGIN_EDGE),
        origin=ORIGIN_EDGE,
        reason=reason,
    )


def edge_cell(
    base: Cell,
    version: str,
    *,
    pairing: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    """``base`` with torch ``version`` (and its paired torchvision when ``base`` has one from
    ``pairing``), as an ``edge`` follow-up. Planning already knows when it cannot install."""
    notes = []
    vision = base.torchvision
    if vision and pairing is not None:
        vision = pairing.get(version, "")
        if not vision:
            notes.append(f"no torchvision release requires torch=={version}")
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(
            f"no torch {version} wheel for Python {base.python} on the index (wheels for: {served})"
        )
    return _pair_cell(base, version, vision, notes, reason)


def vision_edge_cell(
    base: Cell,
    version: str,
    *,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    """``base`` with torchvision ``version`` and the torch that release requires (``torch_of``:
    torchvision release -> torch, read from its Requires-Dist), as an ``edge`` follow-up on the
    torchvision axis. Without a torch for it, the cell is planned unsatisfiable and says why."""
    notes = []
    torch = (torch_of or {}).get(version, "")
    if not torch:
        notes.append(f"torchvision {version} requires no single torch release on the index")
        torch = base.torch
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(
            f"no torchvision {version} wheel for Python {base.python} on the index (wheels for: {served})"
        )
    return _pair_cell(base, torch, version, notes, reason, vision_token=True)


def _pair_cell(
    base: Cell,
    torch: str,
    vision: str,
    notes: Sequence[str],
    reason: str,
    vision_token: bool = False,
) -> Cell:
    """``base`` with torch ``torch`` and torchvision ``vision`` (dropped when ""), as an edge cell:
    requirements, id (``t<torch>``, ``-tv<vision>`` where the id names torchvision) and tags follow."""
    axes = dict(base.axes)
    old_torch, old_vision = base.torch, base.torchvision
    axes["torch"] = torch
    axes["torchvision"] = vision
    requirements = []
    for requirement in base.requirements:
        if requirement == f"torch=={old_torch}":
            requirement = f"torch=={torch}"
        elif old_vision and requirement == f"torchvision=={old_vision}":
            if not vision:
                continue
            requirement = f"torchvision=={vision}"
        requirements.append(requirement)
    token = f"t{old_torch}"
    rest = base.id[len(token) :] if base.id.startswith(token) else "-" + base.id
    if old_vision and f"-tv{old_vision}" in rest:
        rest = rest.replace(f"-tv{old_vision}", f"-tv{vision}" if vision else "", 1)
    elif vision_token and vision:
        rest = f"-tv{vision}{rest}"
    cell_id = ID_UNSAFE.sub("_", f"t{torch}{rest}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if not t.startswith("torch") and t != "planned-unsatisfiable"]
    release = Version(torch)
    tags = [f"torch{release.major}.{release.minor}", *tags, ORIGIN_EDGE]
    return dataclasses.replace(
        base,
        id=cell_id,
        axes=axes,
        requirements=tuple(requirements),
        plan_note="; ".join(list(notes)[:1]),
        tags=tuple(tags),
        origin=ORIGIN_EDGE,
        reason=reason,
    )


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
        ):  # an edge cell's environment is fixed too
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
        cell = with_fixes(cell, fixes.get((axis, context_of(cell, axis)), ()))
        if cell.id not in have:
            planned.setdefault(cell.id, cell)
    for edge in found:
        if edge.next is None or edge in waiting:
            continue
        cell = _moved(
            edge.base,
            edge.axis,
            edge.next,
            pairing=pairing,
            torch_of=torch_of,
            pythons=pythons(edge.base, edge.axis, edge.next),
            reason=edge.why,
        )
        cell = asking_only(cell, edge.deciding)
        cell = with_fixes(cell, fixes.get((edge.axis, edge.context), ()))
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
        fix = cell.requirements[-1]
        for axis in moving_axes(cell, torchvision_axis=True):
            found.setdefault((axis, context_of(cell, axis)), {}).setdefault(fix, cell.id)
    return {key: tuple(sorted(value.items())) for key, value in found.items()}


def with_fixes(cell: Cell, fixes: Sequence[tuple[str, str]]) -> Cell:
    """``cell`` with each confirmed environment fix of its context (``_confirmed_fixes``) installed
    from the start: a release next to one that needed ``setuptools<82`` would need it too, and its
    plain cell would cost a counterfactual more. The id says so (``...-with-setuptools_82-edge``)."""
    wanted = [(fix, source) for fix, source in fixes if fix not in cell.requirements]
    if not wanted or not cell.id.endswith(EDGE_SEPARATOR):
        return cell
    tokens = "".join(f"-with-{ID_UNSAFE.sub('_', fix).strip('_')}" for fix, _ in wanted)
    told = "; ".join(
        f"{fix}: the environment fix {source} confirmed in this context" for fix, source in wanted
    )
    return dataclasses.replace(
        cell,
        id=cell.id[: -len(EDGE_SEPARATOR)] + tokens + EDGE_SEPARATOR,
        requirements=functools.reduce(
            with_requirement, (fix for fix, _ in wanted), cell.requirements
        ),
        reason=f"{cell.reason} (with {told})" if cell.reason else f"with {told}",
    )


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
