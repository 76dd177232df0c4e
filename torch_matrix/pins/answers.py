"""An answer from a set of atoms (``pins.masks``): the pins that exclude them, grouped into
specifiers under the policy, each with its reason and the good cells it would lose; ranked."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import Version

from .vocabulary import Condition
from .evidence import _axis_rank
from .model import Answer, Exclusion, Pin, _exclusion_key
from .specifiers import PinPolicy, build_specifiers, merge_specifiers
from torch_matrix.vocab.versions import version_key
from .windows import COMPANIONS, Window, find_windows
from .vocabulary import PYTHON, Observation, Value
from .masks import Atom, _Grid, _indices


def _axes_key(
    o: Observation, free: set[str], text: dict[Value, str]
) -> tuple[tuple[str, str], ...]:
    """The cell's values on every axis but ``free``, as a hashable key (each value's text once)."""
    items = []
    for axis, value in o.values.items():
        if axis not in free:
            shown = text.get(value)
            if shown is None:
                shown = text[value] = str(value)
            items.append((axis, shown))
    return tuple(sorted(items))


def _counterfactual(
    grid: _Grid, package: str, version: Value, cells: Sequence[Observation]
) -> tuple[str, str, str]:
    """(failing cell, passing cell, its version): a good cell equal to a failing one on every
    axis but ``package`` (and its companions), the nearest version first; empty when none."""
    index = grid._counterfactuals.get(package)
    free = {package} | COMPANIONS.get(package, set())
    if index is None:
        index = {}
        for i in _indices(grid.good_mask):
            o = grid.observations[i]
            index.setdefault(_axes_key(o, free, grid._value_text), []).append(o)
        grid._counterfactuals[package] = index
    best: tuple[int, int, str, str, Value] | None = None
    positions = {value: i for i, value in enumerate(grid.tested(package))}
    here = positions.get(version)
    # The failing cells that hold the same other axes share their passing candidates: each such
    # group is searched once, with its first cell id (the pair a search of every cell would pick).
    firsts: dict[tuple[tuple[str, str], ...], str] = {}
    for o in cells:
        key = _axes_key(o, free, grid._value_text)
        first = firsts.get(key)
        if first is None or o.cell_id < first:
            firsts[key] = o.cell_id
    for key, first in firsts.items():
        for good in index.get(key, ()):
            value = good.value(package)
            if value is None or value == version:
                continue
            position = positions.get(value, 0)
            distance = abs(position - here) if here is not None else 0
            # nearest first; on a tie the newer one (the release that fixed it)
            candidate = (distance, -position, first, good.cell_id, value)
            if best is None or candidate < best:
                best = candidate
    if best is None:
        return (min((o.cell_id for o in cells), default=""), "", "")
    return best[2], best[3], str(best[4])


def _reason(
    package: str, version: Value, cells: Sequence[Observation], grid: _Grid | None = None
) -> Exclusion:
    # The probes that failed in every one of these cells are the reason; others failed for
    # another pin's reason (torch 1.12.0 + numpy 2 also fails numpy_interop).
    common = set.intersection(*(set(o.failing) for o in cells)) if cells else set()
    probes = sorted(common or {name for o in cells for name in o.failing})
    summaries = Counter(
        o.summaries[name]
        for o in cells
        for name in o.failing
        if name in o.summaries and name in probes
    )
    summary = min(summaries.items(), key=lambda item: (-item[1], item[0]))[0] if summaries else ""
    failing, passing, passing_version = (
        _counterfactual(grid, package, version, cells) if grid is not None else ("", "", "")
    )
    return Exclusion(
        package,
        str(version),
        tuple(probes),
        summary,
        tuple(sorted(o.cell_id for o in cells)),
        failing_cell=failing,
        passing_cell=passing,
        passing_version=passing_version,
    )


def _reason_in(grid: _Grid, package: str, version: Value, mask: int) -> Exclusion:
    """``_reason`` for the cells of ``mask``, once per search: the answers ask again for the
    same exclusions (issue 46)."""
    key = (package, version, mask)
    found = grid._reasons.get(key)
    if found is None:
        found = grid._reasons[key] = _reason(package, version, grid.cells(mask), grid)
    return found


def _scoped_pins(
    grid: _Grid,
    package: str,
    mine: Sequence[Atom],
    excluded: set[Value],
    policy: PinPolicy,
) -> list[Pin]:
    """The pins on ``package`` under a condition (a marker, or another package's values): one per
    group of conditions that exclude the same values, beyond those ``excluded`` unconditionally."""
    scoped = [a for a in mine if a.cond_axis]
    where = grid.where(package)
    pins: list[Pin] = []
    for cond_axis in sorted({a.cond_axis for a in scoped}, key=_axis_rank):
        per_cond: dict[Value, frozenset[Value]] = {}
        for atom in scoped:
            if atom.cond_axis == cond_axis:
                per_cond[atom.cond_value] = per_cond.get(atom.cond_value, frozenset()) | {
                    atom.value
                }
        groups: dict[frozenset[Value], list[Value]] = {}
        for cond_value, values in per_cond.items():
            groups.setdefault(values - excluded, []).append(cond_value)
        for values, cond_values in sorted(
            groups.items(), key=lambda g: sorted(map(version_key, g[1]))
        ):
            if not values:
                continue
            condition = Condition(
                cond_axis, tuple(sorted(cond_values, key=version_key)), grid.tested(cond_axis)
            )
            inside = 0
            for cond_value in condition.values:
                inside |= grid.where(cond_axis).get(cond_value, 0)
            goods_inside = grid.values(package, inside) - excluded - values
            specs = build_specifiers(goods_inside, values, python=package == PYTHON, policy=policy)
            windows: tuple[Window, ...] = ()
            if policy == PinPolicy.PROVEN and package != PYTHON and grid.released.get(package):
                # A window under a condition (a marker, or another package's values that no
                # marker can say): proven over the cells the condition applies to, so the
                # alternatives and the trade-offs give the same evidence the same bound.
                windows = tuple(
                    find_windows(
                        package,
                        values,
                        goods_inside,
                        grid.cells(inside),
                        grid.released[package],
                        grid.origins,
                        grid.wheel_pythons.get(package),
                        grid.holes.get(package),
                    )
                )
                specs = merge_specifiers((), [s for w in windows for s in w.specifiers])
            reasons = tuple(
                _reason_in(grid, package, v, inside & grid.bad_mask & where.get(v, 0))
                for v in sorted(values)
            )
            pins.append(Pin(package, specs, condition, reasons, windows))
    return pins


def _build_pins(
    grid: _Grid,
    atoms: Sequence[Atom],
    pairs: Mapping[Version, set[Version]],
    policy: PinPolicy = PinPolicy.PROVEN,
) -> list[Pin]:
    pins: list[Pin] = []
    packages = sorted(
        {atom.axis for atom in atoms} | ({"torchvision"} if pairs else set()), key=_axis_rank
    )
    for package in packages:
        mine = [a for a in atoms if a.axis == package]
        base_values = {a.value for a in mine if not a.cond_axis}
        paired: dict[Value, str] = {}
        if package == "torchvision" and pairs:
            excluded_torch = {a.value for a in atoms if a.axis == "torch" and not a.cond_axis}
            for tv, torches in pairs.items():
                if tv not in base_values and torches and torches <= excluded_torch:
                    paired[tv] = "torch " + ", ".join(str(t) for t in sorted(torches))
        if not mine and not paired:
            continue
        # The answers share most of their atoms: a package's pins from the same atoms are built
        # once per search (issue 46), not once per answer.
        key = (package, tuple(mine), tuple(paired.items()), policy)
        built = grid._package_pins.get(key)
        if built is None:
            built = grid._package_pins[key] = tuple(
                _package_pins(grid, package, mine, base_values, paired, policy)
            )
        pins += built
    return pins


def _package_pins(
    grid: _Grid,
    package: str,
    mine: Sequence[Atom],
    base_values: set[Value],
    paired: Mapping[Value, str],
    policy: PinPolicy,
) -> list[Pin]:
    """The pins on ``package`` that exclude its atoms ``mine`` (and the torchvision releases
    ``paired`` with excluded torch releases): the unconditional one, then the scoped ones."""
    pins: list[Pin] = []
    excluded = base_values | set(paired)
    where = grid.where(package)
    # Admit every tested value not excluded here, even one whose cells another pin excludes:
    # a bound must not exclude a tested version without a reason of its own.
    goods = grid.values(package)
    exclusions = [
        _reason_in(grid, package, v, grid.bad_mask & where.get(v, 0)) for v in sorted(base_values)
    ]
    exclusions += [Exclusion(package, str(v), paired_with=paired[v]) for v in sorted(paired)]
    if excluded:
        specs = build_specifiers(
            goods - excluded, excluded, python=package == PYTHON, policy=policy
        )
        windows: tuple[Window, ...] = ()
        if (
            policy == PinPolicy.PROVEN
            and base_values
            and package != PYTHON
            and grid.released.get(package)
        ):
            windows = tuple(
                find_windows(
                    package,
                    base_values,
                    goods - excluded,
                    grid.observations,
                    grid.released[package],
                    grid.origins,
                    grid.wheel_pythons.get(package),
                    grid.holes.get(package),
                )
            )
            paired_specs = build_specifiers(goods - excluded, set(paired))
            specs = merge_specifiers(
                (), [s for w in windows for s in w.specifiers] + list(paired_specs)
            )
        pins.append(
            Pin(package, specs, None, tuple(sorted(exclusions, key=_exclusion_key)), windows)
        )
    pins += _scoped_pins(grid, package, mine, excluded, policy)
    return pins


def _answer(
    grid: _Grid,
    label: str,
    atoms: Sequence[Atom],
    pairs: Mapping[Version, set[Version]],
    policy: PinPolicy = PinPolicy.PROVEN,
) -> tuple[Answer, int]:
    """The answer built from ``atoms``, and the mask of the cells it admits."""
    pins = tuple(_build_pins(grid, atoms, pairs, policy))
    draft = Answer(label, pins, (), len(grid.good))
    admitted = grid.admitted(draft)
    lost = tuple(sorted(o.cell_id for o in grid.cells(grid.good_mask & ~admitted)))
    unresolved = tuple(sorted(o.cell_id for o in grid.cells(grid.bad_mask & admitted)))
    return Answer(label, pins, lost, len(grid.good), unresolved), admitted


def _rank_key(answer: Answer) -> tuple[Any, ...]:
    scoped = sum(1 for pin in answer.pins if pin.condition is not None)
    first = min((_axis_rank(pin.package) for pin in answer.pins), default=(0, ""))
    return (
        len(answer.lost),
        len(answer.unresolved),
        not answer.expressible,
        scoped,
        len(answer.pins),
        first,
        answer.label,
    )
