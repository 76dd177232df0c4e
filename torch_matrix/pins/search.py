"""The search for answers: bit-mask grid of evidence, pure failures, blame candidates, greedy cover."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from packaging.version import Version

from .vocabulary import Condition
from .evidence import _axis_rank
from .model import Answer, Exclusion, Pin, RequirementLine, Tradeoff, _exclusion_key
from .specifiers import PinPolicy, _contains, build_specifiers, merge_specifiers
from torch_matrix.vocab.versions import version_key
from .windows import COMPANIONS, Window, find_windows
from .vocabulary import PYTHON, VARIANT, Observation, Value, _marker_applies


# ----------------------------------------------------------------------------- search


class Atom(NamedTuple):
    """Exclude ``axis == value`` (only where ``cond_axis == cond_value`` when given)."""

    axis: str
    value: Value
    cond_axis: str = ""
    cond_value: Value = None

    def covers(self, observation: Observation) -> bool:
        if observation.value(self.axis) != self.value:
            return False
        return not self.cond_axis or observation.value(self.cond_axis) == self.cond_value

    def sort_key(self) -> tuple[Any, ...]:
        return (
            _axis_rank(self.axis),
            version_key(self.value),
            self.cond_axis,
            version_key(self.cond_value),
        )


def _indices(mask: int) -> list[int]:
    """The cell indices set in a bit mask, ascending (the order of the observations)."""
    found = []
    while mask:
        low = mask & -mask
        found.append(low.bit_length() - 1)
        mask ^= low
    return found


class _Grid:
    """Evidence indexed for the search: cell sets are bit masks, one per distinct (axis, value).

    Each axis is scanned once; an atom's cells are then the intersection of at most two
    masks, so covering, losing and admitting cost a few integer operations, not a scan.
    """

    def __init__(
        self, observations: Sequence[Observation], pinnable: Sequence[str], axes: Sequence[str]
    ) -> None:
        self.observations = list(observations)
        self.pinnable = list(pinnable)
        self.axes = list(axes)
        self.good = {i for i, o in enumerate(self.observations) if o.good}
        self.bad = {i for i, o in enumerate(self.observations) if not o.good}
        self.good_mask = sum(1 << i for i in self.good)
        self.bad_mask = sum(1 << i for i in self.bad)
        self.all_mask = (1 << len(self.observations)) - 1
        self._where: dict[str, dict[Value, int]] = {}
        self._masks: dict[Atom, int] = {}
        self._tested: dict[str, tuple[Value, ...]] = {}
        self._counterfactuals: dict[str, dict[tuple[Any, ...], list[Observation]]] = {}
        self._value_text: dict[
            Value, str
        ] = {}  # str(value), once per distinct value (counterfactual keys)
        # For windows (``PinPolicy.PROVEN``): package -> the index's releases; cell id -> origin.
        self.released: Mapping[str, Sequence[Any]] = {}
        self.origins: Mapping[str, str] = {}
        self.wheel_pythons: Mapping[
            str, Mapping[str, Any]
        ] = {}  # package -> release -> its wheels' Pythons
        # package -> release -> why no cell gave evidence for it (unsatisfiable, install error)
        self.holes: Mapping[str, Mapping[str, str]] = {}

    def where(self, axis: str) -> dict[Value, int]:
        """Value -> mask of the cells with that value on ``axis`` (None: the axis is missing)."""
        index = self._where.get(axis)
        if index is None:
            index = {}
            for i, observation in enumerate(self.observations):
                value = observation.value(axis)
                index[value] = index.get(value, 0) | (1 << i)
            self._where[axis] = index
        return index

    def values(self, axis: str, mask: int = -1) -> set[Value]:
        """The distinct non-missing values of ``axis`` among the cells of ``mask``."""
        return {
            value for value, cells in self.where(axis).items() if value is not None and cells & mask
        }

    def tested(self, axis: str) -> tuple[Value, ...]:
        if axis not in self._tested:
            self._tested[axis] = tuple(sorted(self.values(axis), key=version_key))
        return self._tested[axis]

    def cells(self, mask: int) -> list[Observation]:
        return [self.observations[i] for i in _indices(mask)]

    def mask(self, atom: Atom) -> int:
        cells = self._masks.get(atom)
        if cells is None:
            cells = self.where(atom.axis).get(atom.value, 0)
            if atom.cond_axis:
                cells &= self.where(atom.cond_axis).get(atom.cond_value, 0)
            self._masks[atom] = cells
        return cells

    def excluded(self, atom: Atom) -> frozenset[int]:
        return frozenset(_indices(self.mask(atom)))

    def named_by_probes(self, atom: Atom, cells: Iterable[int]) -> bool:
        """True when every failing probe of ``cells`` is about this axis: named after it
        (``torchvision_ops``), or its error names a module of it (``torchvision.transforms...``)."""
        prefix = atom.axis + "_"
        probes = [
            (name, self.observations[i].named.get(name))
            for i in cells
            for name in self.observations[i].failing
        ]
        return bool(probes) and all(
            name.startswith(prefix) or named == atom.axis for name, named in probes
        )

    def lost_mask(self, atoms: Iterable[Atom]) -> int:
        cells = 0
        for atom in atoms:
            cells |= self.mask(atom)
        return cells & self.good_mask

    def lost(self, atoms: Iterable[Atom]) -> set[int]:
        return set(_indices(self.lost_mask(atoms)))

    def admitted(self, answer: Answer) -> int:
        """Mask of the cells ``answer`` admits: each check is decided once per distinct value."""
        rejected = 0
        for check in answer._admission.checks:
            scope = self._scope(check)
            specifiers = tuple(check.specifiers)
            for value, cells in self.where(check.package).items():
                if value is not None and cells & scope and not _contains(specifiers, value):
                    rejected |= cells & scope
        return self.all_mask & ~rejected

    def _scope(self, check: RequirementLine | Pin) -> int:
        """The cells a requirement line's marker or a pin's condition applies to."""
        if isinstance(check, RequirementLine):
            if not check.marker:
                return self.all_mask
            return self._union(PYTHON, lambda v: v is None or _marker_applies(check.marker, str(v)))
        if check.condition is None:
            return self.all_mask
        return self._union(check.condition.axis, lambda v: v in check.condition.values)

    def _union(self, axis: str, chosen: Any) -> int:
        cells = 0
        for value, value_cells in self.where(axis).items():
            if chosen(value):
                cells |= value_cells
        return cells

    def atoms_of(self, index: int, conditions: Sequence[str]) -> list[Atom]:
        observation = self.observations[index]
        atoms = []
        for axis in self.pinnable:
            value = observation.value(axis)
            if value is None:
                continue
            atoms.append(Atom(axis, value))
            for cond_axis in conditions:
                cond_value = observation.value(cond_axis)
                if cond_axis != axis and cond_value is not None:
                    atoms.append(Atom(axis, value, cond_axis, cond_value))
        return atoms

    def atoms_of_cells(self, mask: int, conditions: Sequence[str]) -> set[Atom]:
        """Every atom that excludes one of the cells, once per distinct tuple of values."""
        axes = list(dict.fromkeys([*self.pinnable, *conditions]))
        atoms: set[Atom] = set()
        seen: set[tuple[Any, ...]] = set()
        for i in _indices(mask):
            key = tuple(self.observations[i].value(axis) for axis in axes)
            if key not in seen:
                seen.add(key)
                atoms.update(self.atoms_of(i, conditions))
        return atoms


def _greedy(
    grid: _Grid, uncovered: int, candidates: Iterable[Atom], lost: int
) -> list[Atom] | None:
    """Weighted set cover: fewest newly lost good cells per newly excluded bad cell.

    ``uncovered`` and ``lost`` are cell masks. An atom that hits no uncovered cell never
    will again (uncovered only shrinks), so it leaves the pool; the probe-name tie-break is
    computed only for atoms that tie on the cheaper parts of the key.
    """
    pool = []
    for atom in sorted(set(candidates), key=Atom.sort_key):
        excluded = grid.mask(atom)
        if excluded & uncovered:
            pool.append(
                (atom, excluded, excluded & grid.good_mask, bool(atom.cond_axis), atom.sort_key())
            )
    chosen: list[Atom] = []
    while uncovered:
        best, best_key = None, None
        survivors = []
        for entry in pool:
            atom, excluded, excluded_good, scoped, sort_key = entry
            hit = excluded & uncovered
            if not hit:
                continue
            survivors.append(entry)
            hits = hit.bit_count()
            head = ((excluded_good & ~lost).bit_count() / hits, -hits, scoped)
            if best_key is not None and head > best_key[:3]:
                continue
            key = (*head, not grid.named_by_probes(atom, _indices(hit)), sort_key)
            if best_key is None or key < best_key:
                best, best_key = entry, key
        if best is None:
            return None
        pool = survivors
        chosen.append(best[0])
        uncovered &= ~best[1]
        lost |= best[2]
    return chosen


def _pure_failures(grid: _Grid) -> list[Atom]:
    """Values that only ever appear in bad cells: excluding them costs no good cell."""
    free = [
        Atom(axis, value)
        for axis in grid.pinnable
        for value, cells in grid.where(axis).items()
        if value is not None and cells & grid.bad_mask and not cells & grid.good_mask
    ]
    uncovered = 0
    for atom in free:
        uncovered |= grid.mask(atom)
    return _greedy(grid, uncovered, free, 0) or []


def _blame_one(grid: _Grid, remaining: int, axis: str) -> list[Atom] | None:
    if grid.where(axis).get(None, 0) & remaining:
        return None
    return [Atom(axis, value) for value in grid.values(axis, remaining)]


def _blame_scoped(grid: _Grid, remaining: int, axis: str, cond_axis: str) -> list[Atom] | None:
    """Per excluded value: everywhere, or only where ``cond_axis`` has a bad cell's value."""
    if grid.where(axis).get(None, 0) & remaining:
        return None
    atoms: list[Atom] = []
    for value, value_cells in grid.where(axis).items():
        cells = value_cells & remaining
        if not cells:
            continue
        everywhere = Atom(axis, value)
        cond_values = [q for q, q_cells in grid.where(cond_axis).items() if q_cells & cells]
        if None in cond_values:
            atoms.append(everywhere)
            continue
        scoped = [Atom(axis, value, cond_axis, q) for q in cond_values]
        cheaper = grid.lost_mask(scoped).bit_count() < grid.lost_mask([everywhere]).bit_count()
        atoms.extend(scoped if cheaper else [everywhere])
    return atoms


# ----------------------------------------------------------------------------- answers


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
    for o in sorted(cells, key=lambda c: c.cell_id):
        for good in index.get(_axes_key(o, free, grid._value_text), ()):
            value = good.value(package)
            if value is None or value == version:
                continue
            position = positions.get(value, 0)
            distance = abs(position - here) if here is not None else 0
            # nearest first; on a tie the newer one (the release that fixed it)
            candidate = (distance, -position, o.cell_id, good.cell_id, value)
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
        excluded = base_values | set(paired)
        where = grid.where(package)
        # Admit every tested value not excluded here, even one whose cells another pin excludes:
        # a bound must not exclude a tested version without a reason of its own.
        goods = grid.values(package)
        exclusions = [
            _reason(package, v, grid.cells(grid.bad_mask & where.get(v, 0)), grid)
            for v in sorted(base_values)
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
        scoped = [a for a in mine if a.cond_axis]
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
                specs = build_specifiers(
                    goods_inside, values, python=package == PYTHON, policy=policy
                )
                windows = ()
                if (
                    policy == PinPolicy.PROVEN
                    and cond_axis == PYTHON
                    and package != PYTHON
                    and grid.released.get(package)
                ):
                    # A window under a marker: proven over the cells the marker applies to.
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
                    _reason(package, v, grid.cells(inside & grid.bad_mask & where.get(v, 0)), grid)
                    for v in sorted(values)
                )
                pins.append(Pin(package, specs, condition, reasons, windows))
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


def _free_cover(grid: _Grid, uncovered: int, candidates: Iterable[Atom]) -> list[Atom]:
    """Atoms that exclude no good cell, chosen greedily to exclude as many bad cells as they can.

    The cover may be partial: a bad cell whose every exclusion would also exclude a good cell
    stays admitted (an unresolved interaction), since no pin may exclude a working version.
    """
    pool = sorted(
        (
            a
            for a in set(candidates)
            if not grid.mask(a) & grid.good_mask and grid.mask(a) & uncovered
        ),
        key=Atom.sort_key,
    )
    chosen: list[Atom] = []
    while uncovered:
        best = min(
            pool,
            default=None,
            key=lambda a: (
                -(grid.mask(a) & uncovered).bit_count(),
                bool(a.cond_axis),
                a.sort_key(),
            ),
        )
        if best is None or not grid.mask(best) & uncovered:
            break
        chosen.append(best)
        uncovered &= ~grid.mask(best)
    return chosen


def varied_axes(observations: Sequence[Observation], axes: Sequence[str]) -> list[str]:
    """The axes with at least two tested values: only they can take the blame for a failure
    (blaming an axis that never varied, ``setuptools!=84.2.1``, explains nothing)."""
    varied = []
    for axis in axes:
        values = {o.value(axis) for o in observations} - {None}
        if len(values) > 1:
            varied.append(axis)
    return varied


# ----------------------------------------------------------------------------- trade-offs

CORE_PACKAGES = ("torch", "torchvision", "torchaudio")


def _interactions(
    grid: _Grid, diagnosis: Answer, unresolved: int, packages: Sequence[str]
) -> list[tuple[str, str, str, int]]:
    """The diagnosis' pins conditioned on another package where one of the two is an extras axis
    (numpy, setuptools), one per pair of axes: (its text, the pinned axis, the condition's axis, the
    mask of the unresolved bad cells it explains)."""
    found: dict[tuple[str, str], int] = {}
    for pin in diagnosis.pins:
        condition = pin.condition
        if condition is None or condition.axis not in packages or pin.package not in packages:
            continue
        if pin.package in CORE_PACKAGES and condition.axis in CORE_PACKAGES:
            continue
        by_text = {str(value): value for value in grid.values(pin.package)}
        cells = 0
        for exclusion in pin.exclusions:
            value = by_text.get(exclusion.version)
            if value is None:
                continue
            for cond_value in condition.values:
                cells |= grid.mask(Atom(pin.package, value, condition.axis, cond_value))
        cells &= unresolved & grid.bad_mask
        if cells:
            found[(pin.package, condition.axis)] = (
                found.get((pin.package, condition.axis), 0) | cells
            )
    out = []
    for (package, other), cells in found.items():
        first, second = sorted((package, other), key=_axis_rank)
        listed = [
            ", ".join(str(v) for v in sorted(grid.values(axis, cells), key=version_key))
            for axis in (first, second)
        ]
        text = f"{first} {listed[0]} with {second} {listed[1]} (each passes in another pair)"
        out.append((text, package, other, cells))
    return out


def _with_pin(pins: Sequence[Pin], added: Pin) -> tuple[Pin, ...]:
    """``pins`` with ``added`` merged into the unconditional pin of its package (or appended)."""
    out, merged = [], False
    for pin in pins:
        if pin.package == added.package and pin.condition is None and not merged:
            out.append(
                Pin(
                    pin.package,
                    merge_specifiers(pin.specifiers, added.specifiers),
                    None,
                    tuple(sorted(set(pin.exclusions + added.exclusions), key=_exclusion_key)),
                    pin.windows + added.windows,
                    pin.gives_up + added.gives_up,
                )
            )
            merged = True
        else:
            out.append(pin)
    if not merged:
        out.append(added)
    return tuple(sorted(out, key=lambda p: (_axis_rank(p.package), p.condition is not None)))


def _alternative(
    grid: _Grid,
    safe: Answer,
    package: str,
    other: str,
    cells: int,
    interaction: str,
    policy: PinPolicy,
) -> tuple[int, Tradeoff] | None:
    """Close the interaction's ``cells`` with one unconditional pin on ``package``: its window over
    the cells where ``other`` has one of the failing values; what it excludes where ``other`` has
    another value is given up. Returns (the interaction's cells it leaves open, the trade-off)."""
    failing = grid.values(package, cells)
    scope = 0
    for value in grid.values(other, cells):
        scope |= grid.where(other).get(value, 0)
    goods = grid.values(package, scope & grid.good_mask)
    excluded = failing - goods
    if not excluded:
        return None
    specs = build_specifiers(goods, excluded, policy=policy)
    windows: tuple[Window, ...] = ()
    if policy == PinPolicy.PROVEN and grid.released.get(package):
        windows = tuple(
            find_windows(
                package,
                excluded,
                goods,
                grid.cells(scope),
                grid.released[package],
                grid.origins,
                grid.wheel_pythons.get(package),
                grid.holes.get(package),
            )
        )
        specs = merge_specifiers((), [s for w in windows for s in w.specifiers])
    where = grid.where(package)
    exclusions = tuple(
        _reason(package, v, grid.cells(grid.bad_mask & scope & where.get(v, 0)), grid)
        for v in sorted(excluded, key=version_key)
    )
    pin = Pin(package, specs, None, exclusions, windows)
    draft = Answer("", _with_pin(safe.pins, pin), (), len(grid.good))
    admitted = grid.admitted(draft)
    lost = grid.good_mask & ~admitted
    pairs: dict[tuple[Value, Value], list[str]] = {}
    for observation in grid.cells(lost):
        key = (observation.value(package), observation.value(other))
        pairs.setdefault(key, []).append(observation.cell_id)
    first, second = sorted((package, other), key=_axis_rank)
    given_up: list[str] = []
    for (p, o), ids in sorted(
        pairs.items(), key=lambda item: (version_key(item[0][0]), version_key(item[0][1]))
    ):
        values = {package: p, other: o}
        given_up.append(
            f"{first} {values[first]} x {second} {values[second]} [{', '.join(sorted(ids)[:2])}"
            + (f", +{len(ids) - 2} more]" if len(ids) > 2 else "]")
        )
    gives_up = tuple(given_up)
    pin = Pin(package, specs, None, exclusions, windows, gives_up)
    if windows:
        given = [v for w in windows for v in (w.releases if w.proven else w.tested)]
    else:
        given = [str(v) for v in sorted(excluded, key=version_key)]
    pins = _with_pin(safe.pins, pin)
    answer = Answer(f"trade-off: {package}{','.join(specs)}", pins, (), len(grid.good))
    admitted = grid.admitted(answer)
    answer = Answer(
        answer.label,
        pins,
        tuple(sorted(o.cell_id for o in grid.cells(grid.good_mask & ~admitted))),
        len(grid.good),
        tuple(sorted(o.cell_id for o in grid.cells(grid.bad_mask & admitted))),
    )
    still_open = (cells & admitted).bit_count()
    if still_open == cells.bit_count():
        return None  # closes nothing
    return still_open, Tradeoff(interaction, 0, pin, other, tuple(given), answer)


TRADEOFF_RULE = (
    "the answer that closes the most tested failing pairs; then keep the axis under test (torch, "
    "torchvision) whole and constrain the incidental dependency (numpy<2, setuptools<82), as "
    "maintainers do; then fewest working pairs, then fewest releases given up"
)


def _tradeoff_rank(option: tuple[int, Tradeoff]) -> tuple[int, bool, int, int, tuple[int, str]]:
    """The rule that picks the one trade-off the files pin (``TRADEOFF_RULE``, docs/pins.md): first
    the one that closes the most of the interaction's tested failing pairs, then the one on the
    incidental dependency (users pick torch for their hardware and project; numpy or setuptools
    follows), then fewest working pairs, then fewest releases given up."""
    still_open, tradeoff = option
    return (
        still_open,
        tradeoff.pin.package in CORE_PACKAGES,
        tradeoff.pairs,
        len(tradeoff.releases),
        _axis_rank(tradeoff.pin.package),
    )


def find_tradeoffs(
    grid: _Grid,
    safe: Answer,
    diagnosis: Answer | None,
    packages: Sequence[str],
    policy: PinPolicy = PinPolicy.PROVEN,
) -> tuple[list[Tradeoff], Answer | None]:
    """Per interaction of an extras axis with another package that the safe answer leaves open:
    the two one-pin answers (pin either axis), ranked by the working pairs they give up, then the
    releases they exclude; and the answer that adds the first of each (None: nothing to trade)."""
    if diagnosis is None or not safe.unresolved:
        return [], None
    unresolved = 0
    ids = set(safe.unresolved)
    for i, observation in enumerate(grid.observations):
        if observation.cell_id in ids:
            unresolved |= 1 << i
    found: list[Tradeoff] = []
    chosen = safe
    for interaction, package, other, cells in _interactions(grid, diagnosis, unresolved, packages):
        scored = [
            option
            for option in (
                _alternative(grid, chosen, package, other, cells, interaction, policy),
                _alternative(grid, chosen, other, package, cells, interaction, policy),
            )
            if option is not None
        ]
        ranked = [t for _, t in sorted(scored, key=_tradeoff_rank)]
        for rank, option in enumerate(ranked, 1):
            found.append(
                Tradeoff(
                    option.interaction,
                    rank,
                    option.pin,
                    option.against,
                    option.releases,
                    option.answer,
                )
            )
        if ranked:
            chosen = ranked[0].answer
    if chosen is safe:
        return found, None
    label = "trade-off: " + "; ".join(t.line() for t in found if t.rank == 1)
    return found, Answer(label, chosen.pins, chosen.lost, chosen.good_total, chosen.unresolved)


def find_answers(
    observations: Sequence[Observation],
    packages: Sequence[str],
    pairs: Mapping[Version, set[Version]] | None = None,
    policy: PinPolicy = PinPolicy.PROVEN,
    released: Mapping[str, Sequence[Any]] | None = None,
    origins: Mapping[str, str] | None = None,
    wheel_pythons: Mapping[str, Mapping[str, Any]] | None = None,
    holes: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Answer]:
    """Ranked answers (best first); ``find_pins`` without the trade-offs."""
    return find_pins(
        observations, packages, pairs, policy, released, origins, wheel_pythons, holes
    )[0]


def find_pins(
    observations: Sequence[Observation],
    packages: Sequence[str],
    pairs: Mapping[Version, set[Version]] | None = None,
    policy: PinPolicy = PinPolicy.PROVEN,
    released: Mapping[str, Sequence[Any]] | None = None,
    origins: Mapping[str, str] | None = None,
    wheel_pythons: Mapping[str, Mapping[str, Any]] | None = None,
    holes: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[Answer], list[Tradeoff], Answer | None]:
    """Ranked answers (best first), the trade-offs (``find_tradeoffs``) and the answer with the first
    trade-off of each interaction (None: none). No answer excludes a good cell: a bad cell that cannot be
    excluded without one stays admitted and is listed in the answer's ``unresolved``.

    ``released`` (package -> the index's releases) and ``origins`` (cell id -> origin) let
    ``PinPolicy.PROVEN`` exclude each break's window whole (``pins.windows``); ``wheel_pythons``
    (package -> release -> the Pythons its wheels serve) tells which releases a cell could install;
    ``holes`` (package -> release -> why) the releases no cell could give evidence for, which an edge
    steps over."""
    every = [*packages, PYTHON]
    pinnable = varied_axes(observations, every) or every
    conditions = varied_axes(observations, every + [VARIANT])
    grid = _Grid(observations, pinnable, conditions)
    grid.released = released or {}
    grid.origins = origins or {}
    grid.wheel_pythons = wheel_pythons or {}
    grid.holes = holes or {}
    pairs = pairs or {}
    if grid.bad and not grid.good:  # nothing works: exclude what failed, blame the first package
        for axis in pinnable:
            atoms = _blame_one(grid, grid.bad_mask, axis)
            if atoms is not None:
                return (
                    [
                        _answer(
                            grid,
                            f"blame {axis} alone",
                            sorted(atoms, key=Atom.sort_key),
                            pairs,
                            policy,
                        )[0]
                    ],
                    [],
                    None,
                )
    pure = _pure_failures(grid)
    remaining = grid.bad_mask
    for atom in pure:
        remaining &= ~grid.mask(atom)
    if not remaining:
        return (
            [
                _answer(
                    grid, "exclude failing versions" if pure else "no failures", pure, pairs, policy
                )[0]
            ],
            [],
            None,
        )
    candidates: list[tuple[str, list[Atom] | None]] = []
    for axis in pinnable:
        candidates.append((f"blame {axis} alone", _blame_one(grid, remaining, axis)))
        for cond_axis in conditions:
            if (
                cond_axis != axis and axis != PYTHON
            ):  # python-by-X is X-by-python, which has markers
                candidates.append(
                    (
                        f"{axis} scoped by {cond_axis}",
                        _blame_scoped(grid, remaining, axis, cond_axis),
                    )
                )
    lost_by_pure = grid.lost_mask(pure)
    python_conditions = [PYTHON] if PYTHON in conditions else []
    expressible = [
        a
        for a in grid.atoms_of_cells(remaining, python_conditions)
        if not (a.axis == PYTHON and a.cond_axis)
    ]
    candidates.append(
        ("fewest good cells lost (PEP 508)", _greedy(grid, remaining, expressible, lost_by_pure))
    )
    everything = grid.atoms_of_cells(remaining, conditions)
    candidates.append(
        ("fewest good cells lost", _greedy(grid, remaining, everything, lost_by_pure))
    )
    candidates.append(
        (
            "exclude only what no working cell needs (PEP 508)",
            _free_cover(grid, remaining, expressible),
        )
    )
    # Candidates with the same atoms give the same pins: build each once, under its best label.
    distinct: dict[tuple[Atom, ...], str] = {}
    for label, atoms in candidates:
        if atoms is not None:
            chosen = tuple(pure + sorted(set(atoms), key=Atom.sort_key))
            distinct[chosen] = min(label, distinct.get(chosen, label))
    answers: dict[tuple[Any, ...], Answer] = {}
    atoms_of: dict[int, tuple[Atom, ...]] = {}  # id(answer) -> its atoms
    for chosen, label in distinct.items():
        answer, admitted = _answer(grid, label, list(chosen), pairs, policy)
        atoms_of[id(answer)] = chosen
        if answer.lost:
            continue  # it would exclude a version seen working there: never offer it
        if admitted & grid.bad_mask and not label.startswith("exclude only"):
            continue  # a rounding or grouping admitted a bad cell: never offer it
        key = (answer.unresolved, answer.expressible)
        if key not in answers or _rank_key(answer) < _rank_key(answers[key]):
            answers[key] = answer
    if not any(a.expressible for a in answers.values()):  # always one: the pure failures alone
        fallback = _answer(grid, "exclude failing versions", pure, pairs, policy)[0]
        answers[((), True)] = fallback
        atoms_of[id(fallback)] = tuple(pure)
    ranked = sorted(answers.values(), key=_rank_key)
    safe = next(answer for answer in ranked if answer.expressible)
    diagnosis = None if ranked[0].expressible else ranked[0]
    tradeoffs, traded = find_tradeoffs(grid, safe, diagnosis, packages, policy)
    redundant = _explained_by_tradeoff(grid, atoms_of.get(id(safe), ()), tradeoffs, traded)
    if redundant:
        # A release of the axis under test seen only in failing pairs that the pinned trade-off on the
        # incidental dependency already excludes (torch 1.13.0 tested only with numpy 2, next to
        # numpy<2): the dependency explains its failure, so it is not excluded again.
        kept = [atom for atom in atoms_of[id(safe)] if atom not in redundant]
        lean = _answer(grid, safe.label, kept, pairs, policy)[0]
        lean_tradeoffs, lean_traded = find_tradeoffs(grid, lean, diagnosis, packages, policy)
        if (
            lean_traded is not None
            and set(lean_traded.unresolved) <= set(traded.unresolved if traded else ())
            and not _explained_by_tradeoff(grid, kept, lean_tradeoffs, lean_traded)
            and {t.line() for t in lean_tradeoffs if t.rank == 1}
            == {t.line() for t in tradeoffs if t.rank == 1}
        ):
            tradeoffs, traded = lean_tradeoffs, lean_traded
    return ranked, tradeoffs, traded


def _explained_by_tradeoff(
    grid: _Grid, atoms: Sequence[Atom], tradeoffs: Sequence[Tradeoff], traded: Answer | None
) -> set[Atom]:
    """The unconditional exclusions on torch or torchvision whose every failing cell the pinned pin
    of an incidental dependency (numpy, setuptools: a first-ranked trade-off's package, as ``traded``
    writes it) already excludes, each for probes that pin's exclusions name: the dependency explains
    them (torch 1.13.0 tested only with numpy 2, next to ``numpy<2``)."""
    if traded is None:
        return set()
    incidental = [
        pin
        for pin in traded.pins
        if pin.condition is None
        and pin.package not in CORE_PACKAGES
        and any(t.rank == 1 and t.pin.package == pin.package for t in tradeoffs)
    ]
    found: set[Atom] = set()
    for atom in atoms:
        if atom.axis not in CORE_PACKAGES or atom.cond_axis:
            continue
        cells = grid.cells(grid.mask(atom) & grid.bad_mask)
        for pin in incidental:
            probes = {probe for e in pin.exclusions for probe in e.probes}
            if cells and all(not pin.admits(o) and set(o.failing) <= probes for o in cells):
                found.add(atom)
                break
    return found
