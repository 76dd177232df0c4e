"""The evidence as bit masks: an ``Atom`` (one axis value, maybe scoped by another axis's
value) and the ``_Grid`` of observed cells, each atom the mask of the cells it covers, good and bad.
What the search (``pins.search``), the answers and the trade-offs compute over."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple


from .evidence import _axis_rank
from .model import Answer, Exclusion, Pin, RequirementLine
from .specifiers import _contains
from torch_matrix.vocab.versions import version_key
from .vocabulary import PYTHON, Observation, Value, _marker_applies


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
        # What the answers share (``pins.answers``), built once per search: (package, version,
        # mask of the failing cells) -> its exclusion; (package, its atoms, the torchvision
        # releases paired with excluded torch, policy) -> that package's pins.
        self._reasons: dict[tuple[str, Value, int], Exclusion] = {}
        self._package_pins: dict[tuple[Any, ...], tuple[Pin, ...]] = {}
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
