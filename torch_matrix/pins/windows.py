"""Windows: each break as the run of releases [first bad, last bad], with the proof of its edges.

Pure. A window is a maximal run of the index's releases that holds a tested bad release the pin
excludes and no tested release the pin admits (a good cell inside a window splits it). Its two
edges are *proven* when the release just outside each one was tested and passed, or when the
window reaches an end of the index (the oldest or the newest release). A proven window becomes:

- an upper bound when it reaches the newest release (``torch<2.6``);
- a floor when it starts at the oldest *admitted* release (``torch>=2.4``);
- ``!=`` of each release in it when closed on both sides, ``!=X.Y.*`` for a minor it covers whole.

A window with an edge not found (untested releases next to it: the follow-up cap, a release that
could not be installed) falls back to ``!=`` of its tested bad releases, and says why. The
untested releases inside a proven window are *assumed* bad: the proof says how many.

*Admitted* releases are those a tested cell could install: a release with no wheel for any of the
tested Pythons (torch 1.13 for Python 3.11 has none before 1.13.0) is no gap in the evidence, so a
window that starts at the oldest release with a wheel is a floor (``admitted_releases``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

from torch_matrix.plan.bisection import final_releases
from torch_matrix.plan.counterfactual import counterfactual_of
from torch_matrix.plan.breaks import EDGE_SEPARATOR
from torch_matrix.vocab.records import ORIGIN_COUNTERFACTUAL, ORIGIN_EDGE
from torch_matrix.vocab.versions import version_key
from .specifiers import _prefix_bound, _text
from .vocabulary import PYTHON, Observation, Value

UPPER, FLOOR, CLOSED, FALLBACK = "upper-bound", "floor", "closed", "not-proven"
LINE = (
    "major-line"  # an incidental dependency's breaking major line, bounded whole (``line_bound``)
)
START, END = "start", "end"
BISECT, GRID = "bisect", "the grid"
COMPANIONS = {
    "torch": {"torchvision", "torchaudio"},
    "torchvision": {"torch"},
    "torchaudio": {"torch"},
}


@dataclass(frozen=True)
class EdgeProof:
    """One edge: the bad release at the window's end and the release just outside it."""

    side: str  # START | END
    bad: str  # the first bad (START) or the last bad (END) release
    bad_cell: str
    good: str = ""  # the passing release just outside ("" at an end of the index)
    good_cell: str = ""
    found_by: str = GRID  # BISECT when a follow-up cell found either side
    index_end: str = ""  # "oldest" / "newest" when the window reaches that end of the index
    missing: tuple[str, ...] = ()  # releases between the window and the next passing one, untested
    beyond: int = 0  # at an end of the index: releases past it with no wheel for the tested Pythons
    pythons: tuple[str, ...] = ()  # the tested Pythons (the words of ``beyond``)
    # Releases between the bad one and the next release outside that no cell could give evidence
    # for (unsatisfiable, excluded by the project's requirements, install error), each with why:
    # stepped over, not admitted.
    skipped: tuple[str, ...] = ()
    flaky: str = ""  # the bad cell failed only in some runs (its probes' k of n): no proof

    @property
    def proven(self) -> bool:
        return not self.missing and not self.flaky and bool(self.good or self.index_end)

    def sentence(self) -> str:
        text = self._sentence()
        if self.skipped:
            text += f" (stepped over {_few(self.skipped, 3)}: no evidence, not admitted)"
        return text

    def _sentence(self) -> str:
        word = "first bad" if self.side == START else "last bad"
        if self.flaky:
            return (
                f"{word} {self.bad} not proven: [{self.bad_cell}] {self.flaky}; a failure that "
                "passes on a rerun does not mark where a break starts"
            )
        if self.index_end:
            text = f"{self.index_end} {self.bad} fails [{self.bad_cell}]"
            if self.beyond:
                word = "older" if self.side == START else "newer"
                text += (
                    f" (the {self.beyond} {word} release{'s' if self.beyond != 1 else ''} have no wheel "
                    f"for Python {', '.join(self.pythons)}: not admitted)"
                )
            return text
        if not self.proven:
            where = (
                f"between {self.good} (passes) and {self.bad}"
                if self.good and self.side == START
                else (
                    f"between {self.bad} and {self.good} (passes)"
                    if self.good
                    else f"before {self.bad}"
                    if self.side == START
                    else f"after {self.bad}"
                )
            )
            return (
                f"{word} not found: {_few(self.missing)} {where} not tested "
                f"(no follow-up cell reached {'it' if len(self.missing) == 1 else 'them'}: "
                "see the run's follow-up line for its cap)"
            )
        pair = (
            f"{self.good} (passes) [{self.good_cell}] and {self.bad} (fails) [{self.bad_cell}]"
            if self.side == START
            else f"{self.bad} (fails) [{self.bad_cell}] and {self.good} (passes) [{self.good_cell}]"
        )
        return f"{word} {self.bad}, found by {self.found_by} between {pair}"

    def to_json(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "bad": self.bad,
            "bad_cell": self.bad_cell,
            "good": self.good,
            "good_cell": self.good_cell,
            "found_by": self.found_by,
            "index_end": self.index_end,
            "missing": list(self.missing),
            "proven": self.proven,
            **({"not_admitted_beyond": self.beyond} if self.beyond else {}),
            **({"skipped": list(self.skipped)} if self.skipped else {}),
            **({"flaky": self.flaky} if self.flaky else {}),
        }


@dataclass(frozen=True)
class Window:
    """A break on one package's axis: the releases from its first to its last bad one."""

    package: str
    releases: tuple[str, ...]  # every release of the index inside the window, oldest first
    tested: tuple[str, ...]  # the releases inside it that were tested (all bad)
    start: EdgeProof
    end: EdgeProof
    kind: str  # UPPER | FLOOR | CLOSED | FALLBACK | LINE
    specifiers: tuple[str, ...]
    scope: str = ""  # LINE: where the line was seen failing ("with torch 2.2.2")

    @property
    def first_bad(self) -> str:
        return self.releases[0]

    @property
    def last_bad(self) -> str:
        return self.releases[-1]

    @property
    def proven(self) -> bool:
        return self.kind != FALLBACK

    def proof(self) -> str:
        """``first bad 2.6.0, found by bisect between 2.5.1 (passes) and 2.6.0 (fails); newest
        2.15.0 fails; 5 of 12 releases in the window tested``."""
        if self.kind == LINE:
            return self._line_proof()
        parts = [self.start.sentence(), self.end.sentence()]
        if self.start.index_end:
            parts.reverse()
        tested = f"{len(self.tested)} of {len(self.releases)} release{'s' if len(self.releases) != 1 else ''}"
        assumed = [v for v in self.releases if v not in self.tested]
        text = "; ".join(parts) + f"; {tested} in the window tested"
        if assumed and self.proven:
            text += f" (assumed bad: {_few(assumed)})"
        if not self.proven:
            text += f"; so only the tested ones are excluded ({', '.join('!=' + v for v in self.tested)})"
        return text

    def line_label(self) -> str:
        """The major lines a ``LINE`` window bounds: ``2.x``, or ``82.x..84.x``."""
        majors = sorted({_version(v).major for v in self.releases or self.tested})
        return f"{majors[0]}.x" if len(majors) == 1 else f"{majors[0]}.x..{majors[-1]}.x"

    def _line_proof(self) -> str:
        major = self.line_label()
        lines = "line" if major.count(".x") == 1 else "lines"
        cells = self.start.bad_cell or self.end.bad_cell
        passing = (
            f"; {self.start.good} passes [{self.start.good_cell}]"
            if self.start.good and self.start.good_cell
            else ""
        )
        assumed = [v for v in self.releases if v not in self.tested]
        return (
            f"the {self.package} {major} {lines} bounded whole: every {self.package} {major} tested "
            f"{self.scope or 'where it applies'} fails ({len(self.tested)} of {len(self.releases)} releases of the {lines} "
            f"tested: {_few(self.tested)}{f' [{cells}]' if cells else ''}){passing}; no follow-up "
            f"cell tested the others, so they are assumed bad ({_few(assumed) if assumed else 'none'}), "
            f"rather than admitting an untested {major} that the tested ones say breaks"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "first_bad": self.first_bad,
            "last_bad": self.last_bad,
            "kind": self.kind,
            "proven": self.proven,
            "specifiers": list(self.specifiers),
            "releases": list(self.releases),
            "tested": list(self.tested),
            "assumed": [v for v in self.releases if v not in self.tested],
            "start": self.start.to_json(),
            "end": self.end.to_json(),
            "proof": self.proof(),
        }


def _few(items: Sequence[str], limit: int = 4) -> str:
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{len(items)} releases, {items[0]} to {items[-1]}"


def python_of(value: Value) -> str:
    """A Python axis value as X.Y (``Version("3.11")`` -> ``"3.11"``)."""
    version = _version(str(value))
    return f"{version.major}.{version.minor}"


@lru_cache(
    maxsize=4096
)  # a few dozen values, asked for once per observation of every window search
def _version(text: str) -> Version:
    return Version(text)


def admitted_releases(
    released: Iterable[Any], wheel_pythons: Mapping[str, Any] | None, pythons: Iterable[str]
) -> tuple[list[str], list[str]]:
    """(admitted, not admitted): the final releases with a wheel for one of ``pythons`` (X.Y), and
    the others. ``wheel_pythons`` maps a release to the X.Y values its wheels serve; a release it
    does not list is admitted, and so is one listed as None (no wheel: an sdist only) unless the
    package ships wheels for those Pythons elsewhere (numpy 1.3.0's sdist does not build on 3.11;
    a project that only ever ships sdists is installed from them)."""
    finals = final_releases(released)
    wanted = set(pythons)
    if not wheel_pythons or not wanted:
        return finals, []
    wheels_elsewhere = any(
        served is not None and wanted & set(served) for served in wheel_pythons.values()
    )
    admitted: list[str] = []
    left: list[str] = []
    for version in finals:
        served = wheel_pythons.get(version, ())
        if served == ():  # not listed: nothing known
            keep = True
        elif served is None:
            keep = not wheels_elsewhere
        else:
            keep = bool(wanted & set(served))
        (admitted if keep else left).append(version)
    return admitted, left


def find_windows(
    package: str,
    excluded: Iterable[Value],
    admitted: Iterable[Value],
    observations: Sequence[Observation],
    released: Iterable[Any],
    origins: Mapping[str, str] | None = None,
    wheel_pythons: Mapping[str, Any] | None = None,
    holes: Mapping[str, str] | None = None,
) -> list[Window]:
    """The windows of ``package``: ``excluded`` are the tested values the pin excludes,
    ``admitted`` the tested values it admits (the window never covers one), ``released`` the
    index's releases of the package, ``origins`` cell id -> origin (which cells were follow-ups),
    ``wheel_pythons`` release -> the Pythons its wheels serve (``admitted_releases``: only the
    releases the observations' Pythons could install count), ``holes`` release -> why for the
    releases whose every cell gave no evidence (unsatisfiable, install error): an edge steps over
    them to the next release, and its proof names them."""
    excluded = {Version(str(v)) for v in excluded}
    admitted = {Version(str(v)) for v in admitted} - excluded
    why_hole = {Version(v): why for v, why in (holes or {}).items() if _is_release(v)}
    for version in excluded | admitted:
        why_hole.pop(version, None)
    # Each distinct Python value once (a few), not once per observation (thousands, 20 searches)
    seen = {o.values.get(PYTHON) for o in observations}
    seen.discard(None)
    pythons = sorted({python_of(value) for value in seen}, key=Version)
    installable, left_out = admitted_releases(released, wheel_pythons, pythons)
    releases = sorted(({Version(v) for v in installable} - set(why_hole)) | excluded | admitted)
    if not excluded or not releases:
        return []
    origins = origins or {}
    cells = _cells_by_value(package, observations)
    runs: list[list[Version]] = []
    current: list[Version] = []
    for version in releases:
        if version in admitted:
            if any(v in excluded for v in current):
                runs.append(current)
            current = []
        else:
            current.append(version)
    if any(v in excluded for v in current):
        runs.append(current)
    windows = []
    for run in runs:
        bad = [v for v in run if v in excluded]
        first_index, last_index = releases.index(bad[0]), releases.index(bad[-1])
        start = _edge(START, package, releases, first_index, -1, admitted, cells, origins)
        end = _edge(END, package, releases, last_index, +1, admitted, cells, origins)
        start = _stepped(start, why_hole, releases, first_index, -1)
        end = _stepped(end, why_hole, releases, last_index, +1)
        if start.index_end or end.index_end:
            outside = [Version(v) for v in left_out]
            start = _beyond(start, sum(1 for v in outside if v < releases[0]), pythons)
            end = _beyond(end, sum(1 for v in outside if v > releases[-1]), pythons)
        inside = releases[first_index : last_index + 1]
        windows.append(_window(package, inside, bad, start, end, releases))
    return windows


def line_bound(
    window: Window,
    admitted: Iterable[Value],
    released: Iterable[Any],
    failing: Iterable[Value] = (),
    scope: str = "",
    installable: Iterable[str] | None = None,
) -> Window:
    """``window`` (an incidental dependency's pin in a trade-off: numpy, setuptools) widened to its
    major line when no follow-up proved its edges and the tested releases say the line breaks:
    every tested release in it is of one major line M, none of M tested passes where the pin
    applies, and a release before the line passes. Then the pin is the line whole (``numpy<2``
    when no newer major passes there, ``numpy!=2.*`` otherwise), not ``!=`` of the tested ones,
    which would admit the line's untested releases (numpy 2.4.5 next to ``numpy!=2.4.6``). The
    line reaches back to the major after the newest one seen passing: with setuptools 81.0.0
    passing and 84.2.1 failing, the untested 82.x and 83.x are in it too (``setuptools<82``).
    ``failing``: every release seen failing where the pin applies (another pin may exclude some
    already); the proof counts those of the line as tested. ``scope``: where (``with torch 2.2.2``);
    ``installable``: the releases a tested cell could install (``admitted_releases``), which the
    line's count keeps to (numpy 2.5 has no wheel for Python 3.11: not counted as given up)."""
    if window.kind != FALLBACK or not window.tested:
        return window
    majors = {_version(v).major for v in window.tested}
    if len(majors) != 1:
        return window
    (major,) = majors
    goods = [_version(str(v)) for v in admitted]
    if any(v.major == major for v in goods) or not any(v.major < major for v in goods):
        return window
    newer_passes = any(v.major > major for v in goods)
    # The line starts after the newest major seen passing: setuptools 81.0.0 passes, 84.2.1 fails,
    # so 82.x and 83.x (which no pin should admit untested either) are in it: `setuptools<82`.
    low = max(v.major for v in goods if v.major < major) + 1
    candidates = final_releases(released) if installable is None else list(installable)
    line = tuple(str(v) for v in candidates if low <= _version(str(v)).major <= major)
    passing = {str(v) for v in goods}
    seen = {str(v) for v in failing if low <= _version(str(v)).major <= major} - passing
    tested = tuple(sorted(seen | set(window.tested), key=_version))
    releases = tuple(sorted(set(line) | set(tested), key=_version))
    specifiers = (
        tuple(f"!={m}.*" for m in sorted({_version(v).major for v in releases}))
        if newer_passes
        else (f"<{low}",)
    )
    return Window(
        window.package, releases, tested, window.start, window.end, LINE, specifiers, scope
    )


def _is_release(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _stepped(
    edge: EdgeProof,
    why_hole: Mapping[Version, str],
    releases: Sequence[Version],
    index: int,
    step: int,
) -> EdgeProof:
    """``edge`` naming the holes between its bad release and the next release on its side."""
    bad = releases[index]
    other = index + step
    neighbour = releases[other] if 0 <= other < len(releases) else None
    if step < 0:  # older than the first bad release, newer than the release before it
        between = [v for v in why_hole if v < bad and (neighbour is None or v > neighbour)]
    else:  # newer than the last bad release, older than the release after it
        between = [v for v in why_hole if v > bad and (neighbour is None or v < neighbour)]
    found = sorted(between)  # oldest first, on either side
    if not found:
        return edge
    return replace(edge, skipped=tuple(f"{v} ({why_hole[v]})" for v in found))


def _beyond(edge: EdgeProof, count: int, pythons: Sequence[str]) -> EdgeProof:
    if not edge.index_end or not count:
        return edge
    return replace(edge, beyond=count, pythons=tuple(pythons))


def _cells_by_value(
    package: str, observations: Sequence[Observation]
) -> dict[Version, list[Observation]]:
    # Grouped by the value as it is first (hashable, a few dozen), then each group's key made once:
    # str() and Version() per observation were most of a search's time at 2,000 cells.
    grouped: dict[Value, list[Observation]] = {}
    for observation in observations:
        value = observation.values.get(package)
        if value is not None:
            grouped.setdefault(value, []).append(observation)
    found: dict[Version, list[Observation]] = {}
    for value, members in grouped.items():
        key = _version(str(value))
        if key in found:  # two values with one Version (e.g. "2.5" and Version("2.5.0"))
            found[key].extend(members)
        else:
            found[key] = members
    return found


def _held(observation: Observation, package: str) -> tuple[Any, ...]:
    free = {package} | COMPANIONS.get(package, set())
    return tuple(
        sorted((axis, str(value)) for axis, value in observation.values.items() if axis not in free)
    )


def _edge(
    side: str,
    package: str,
    releases: Sequence[Version],
    index: int,
    step: int,
    admitted: set[Version],
    cells: Mapping[Version, list[Observation]],
    origins: Mapping[str, str],
) -> EdgeProof:
    bad = releases[index]
    # A bad cell whose failures all passed on a rerun (k of n) proves no edge: the others first.
    bad_cells = sorted(
        (o for o in cells.get(bad, ()) if not o.good),
        key=lambda o: (_only_flaky(o), o.cell_id),
    )
    bad_cell = bad_cells[0] if bad_cells else None
    edge = _edge_of(side, package, releases, index, step, admitted, cells, origins, bad_cells)
    if bad_cell is not None and edge.bad_cell:
        chosen = next((o for o in bad_cells if o.cell_id == edge.bad_cell), bad_cell)
        if _only_flaky(chosen):
            summary = "; ".join(chosen.summaries.get(name, name) for name in chosen.failing)
            return replace(edge, flaky=summary or "its failures passed on a rerun")
    return edge


def _only_flaky(observation: Observation) -> bool:
    return bool(observation.failing) and set(observation.failing) <= set(observation.flaky)


def _edge_of(
    side: str,
    package: str,
    releases: Sequence[Version],
    index: int,
    step: int,
    admitted: set[Version],
    cells: Mapping[Version, list[Observation]],
    origins: Mapping[str, str],
    bad_cells: list[Observation],
) -> EdgeProof:
    bad = releases[index]
    bad_cell = bad_cells[0] if bad_cells else None
    missing: list[str] = []
    position = index + step
    while 0 <= position < len(releases) and releases[position] not in admitted:
        missing.append(str(releases[position]))
        position += step
    if not 0 <= position < len(releases):
        if missing:
            return EdgeProof(
                side, str(bad), bad_cell.cell_id if bad_cell else "", missing=_oldest_first(missing)
            )
        return EdgeProof(
            side,
            str(bad),
            bad_cell.cell_id if bad_cell else "",
            index_end="oldest" if side == START else "newest",
        )
    good = releases[position]
    good_cells = sorted((o for o in cells.get(good, ()) if o.good), key=lambda o: o.cell_id)
    held = [(o, _held(o, package)) for o in good_cells]  # each cell's other axes, computed once
    for (
        candidate
    ) in bad_cells:  # the first bad cell with a passing cell equal to it on every other axis
        key = _held(candidate, package)
        equal = [o for o, other in held if other == key]
        if equal:
            bad_cell, good_cells = candidate, equal
            break
    good_cell = good_cells[0] if good_cells else None
    if good_cell is None:  # admitted by this pin but never seen passing: no proof
        missing.append(str(good))
    found_by = (
        BISECT if any(_by_edge(o.cell_id, origins) for o in (bad_cell, good_cell) if o) else GRID
    )
    return EdgeProof(
        side,
        str(bad),
        bad_cell.cell_id if bad_cell else "",
        str(good),
        good_cell.cell_id if good_cell else "",
        found_by,
        missing=_oldest_first(missing),
    )


def _oldest_first(releases: Iterable[str]) -> tuple[str, ...]:
    """Releases as every list of the proofs names them: oldest first, whichever way the edge
    walked (a start edge walks to older releases, an end edge to newer ones)."""
    return tuple(sorted(releases, key=version_key))


def _by_edge(cell_id: str, origins: Mapping[str, str]) -> bool:
    """An edge cell, or the counterfactual of one (the edge release with its environment fixed)."""
    origin = origins.get(cell_id)
    return origin == ORIGIN_EDGE or (
        origin == ORIGIN_COUNTERFACTUAL and counterfactual_of(cell_id).endswith(EDGE_SEPARATOR)
    )


def _window(
    package: str,
    inside: Sequence[Version],
    bad: Sequence[Version],
    start: EdgeProof,
    end: EdgeProof,
    releases: Sequence[Version],
) -> Window:
    names = tuple(str(v) for v in inside)
    tested = tuple(str(v) for v in bad)
    fallback = tuple(f"!={v}" for v in tested)
    if not (start.proven and end.proven) or (start.index_end and end.index_end):
        return Window(package, names, tested, start, end, FALLBACK, fallback)
    if end.index_end:
        bound = _prefix_bound(Version(start.good), inside[0], strict_low=True)
        return Window(package, names, tested, start, end, UPPER, ("<" + _text(bound, False),))
    if start.index_end:
        bound = _prefix_bound(inside[-1], Version(end.good), strict_low=True)
        return Window(package, names, tested, start, end, FLOOR, (">=" + _text(bound, False),))
    specifiers = []
    minors: dict[tuple[int, ...], list[Version]] = {}
    for version in inside:
        minors.setdefault(version.release[:2], []).append(version)
    for minor, members in minors.items():
        everyone = [v for v in releases if v.release[:2] == minor]
        if len(members) >= 2 and members == everyone:
            specifiers.append("!=" + ".".join(map(str, minor)) + ".*")
        else:
            specifiers.extend(f"!={v}" for v in members)
    return Window(package, names, tested, start, end, CLOSED, tuple(specifiers))
