"""The search for answers over the evidence masks (``pins.masks``): the pure failures, the blame
candidates (one axis alone, scoped by another), the greedy and free covers; ``find_pins`` ranks the
answers (``pins.answers``) and adds the trade-offs (``pins.tradeoffs``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.version import Version

from .model import Answer, Tradeoff
from .specifiers import PinPolicy
from torch_matrix.vocab.versions import version_key
from .vocabulary import PYTHON, VARIANT, Observation
from .masks import Atom, _Grid, _indices
from .answers import _answer, _rank_key
from .tradeoffs import CORE_PACKAGES, find_tradeoffs


# ----------------------------------------------------------------------------- search


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
    """Values that only ever appear in bad cells: excluding them costs no good cell.

    A failure holds only where it was seen: a value whose cells ran on some of the run's Pythons
    only (an edge cell that ran torch 2.2.0 on 3.12 alone) is excluded on those Pythons, scoped by
    a marker, never on a Python where no cell ran it. The same for the run's variants (cpu,
    cu124, ...): a value whose cells ran on some of them only is excluded on those variants, a
    condition no requirement can say, so it is a diagnosis (the files' interaction note), never a
    line that would exclude it for the users of a variant where no cell ran it."""
    free: list[Atom] = []
    pythons = set(grid.values(PYTHON)) if PYTHON in grid.axes else set()
    variants = set(grid.values(VARIANT)) if VARIANT in grid.axes else set()
    for axis in grid.pinnable:
        for value, cells in grid.where(axis).items():
            if value is None or not cells & grid.bad_mask or cells & grid.good_mask:
                continue
            on_variants = grid.values(VARIANT, cells) if variants else set()
            seen_on = grid.values(PYTHON, cells) if axis != PYTHON and pythons else set()
            if on_variants and on_variants != variants:
                free.extend(Atom(axis, value, VARIANT, w) for w in sorted(on_variants, key=str))
            elif seen_on and seen_on != pythons:
                free.extend(Atom(axis, value, PYTHON, q) for q in sorted(seen_on, key=version_key))
            else:
                free.append(Atom(axis, value))
    uncovered = 0
    for atom in free:
        uncovered |= grid.mask(atom)
    return _greedy(grid, uncovered, free, 0) or []


def _held_on_variants(grid: _Grid, atoms: Sequence[Atom]) -> tuple[list[Atom], list[Atom]]:
    """``atoms`` split: those that hold on every variant of the run, and, for each value whose cells
    ran on some variants only, one atom per such variant (``_pure_failures``' rule)."""
    variants = set(grid.values(VARIANT)) if VARIANT in grid.axes else set()
    plain: list[Atom] = []
    held: list[Atom] = []
    for atom in atoms:
        on = grid.values(VARIANT, grid.mask(atom)) if variants and not atom.cond_axis else set()
        if on and on != variants:
            held.extend(Atom(atom.axis, atom.value, VARIANT, w) for w in sorted(on, key=str))
        else:
            plain.append(atom)
    return plain, held


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
                plain, held = _held_on_variants(grid, atoms)
                label = f"blame {axis} alone"
                found = [_answer(grid, label, sorted(plain, key=Atom.sort_key), pairs, policy)[0]]
                if held:
                    with_held = sorted([*plain, *held], key=Atom.sort_key)
                    found.insert(0, _answer(grid, label, with_held, pairs, policy)[0])
                return found, [], None
    # A failure seen on some variants only is held there: a diagnosis, never a requirement line.
    pure_all = _pure_failures(grid)
    held = [atom for atom in pure_all if atom.cond_axis == VARIANT]
    pure = [atom for atom in pure_all if atom.cond_axis != VARIANT]
    remaining = grid.bad_mask
    for atom in pure_all:
        remaining &= ~grid.mask(atom)
    if not remaining:
        label = "exclude failing versions" if pure_all else "no failures"
        found = [_answer(grid, label, pure, pairs, policy)[0]]
        if held:
            found.insert(0, _answer(grid, label, pure_all, pairs, policy)[0])
        return found, [], None
    candidates = _candidates(grid, remaining, pinnable, conditions, pure)
    answers, atoms_of = _offered(grid, candidates, pure, pairs, policy, held)
    ranked = sorted(answers.values(), key=_rank_key)
    safe = next(answer for answer in ranked if answer.expressible)
    diagnosis = None if ranked[0].expressible else ranked[0]
    tradeoffs, traded = find_tradeoffs(grid, safe, diagnosis, packages, policy)
    kept = _unexplained(grid, atoms_of.get(id(safe), ()), tradeoffs, traded)
    if kept is not None:
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


def _unexplained(
    grid: _Grid, atoms: Sequence[Atom], tradeoffs: Sequence[Tradeoff], traded: Answer | None
) -> list[Atom] | None:
    """``atoms`` less those the pinned trade-off explains, or None when it explains none. A release
    of the axis under test seen only in failing pairs that the pinned trade-off on the incidental
    dependency already excludes (torch 1.13.0 tested only with numpy 2, next to numpy<2): the
    dependency explains its failure, so it is not excluded again."""
    redundant = _explained_by_tradeoff(grid, atoms, tradeoffs, traded)
    if not redundant:
        return None
    return [atom for atom in atoms if atom not in redundant]


def _candidates(
    grid: _Grid,
    remaining: int,
    pinnable: Sequence[str],
    conditions: Sequence[str],
    pure: list[Atom],
) -> list[tuple[str, list[Atom] | None]]:
    """Each way to exclude the ``remaining`` bad cells, labelled: blame one axis (alone or scoped by
    another), the greedy covers (PEP 508 only, or any condition), the cover that loses no good cell.
    ``None``: that way finds no cover."""
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
    return candidates


def _offered(
    grid: _Grid,
    candidates: Sequence[tuple[str, list[Atom] | None]],
    pure: list[Atom],
    pairs: Mapping[Version, set[Version]],
    policy: PinPolicy,
    held: Sequence[Atom] = (),
) -> tuple[dict[tuple[Any, ...], Answer], dict[int, tuple[Atom, ...]]]:
    """The answers worth offering, the best per (unresolved, expressible), each with its atoms (by
    ``id`` of the answer): never one that excludes a version seen working, nor one whose rounding
    admitted a bad cell; always one expressible (the pure failures alone). ``held``: the pure
    failures seen on some variants only, in each answer beside it without them (their cells
    unresolved), never widened to every variant."""
    # Candidates with the same atoms give the same pins: build each once, under its best label.
    distinct: dict[tuple[Atom, ...], str] = {}
    held_mask = 0
    for atom in held:
        held_mask |= grid.mask(atom)
    for label, atoms in candidates:
        if atoms is not None:
            for base in ([*pure, *held], pure) if held else (pure,):
                chosen = tuple(base + sorted(set(atoms), key=Atom.sort_key))
                distinct[chosen] = min(label, distinct.get(chosen, label))
    answers: dict[tuple[Any, ...], Answer] = {}
    atoms_of: dict[int, tuple[Atom, ...]] = {}  # id(answer) -> its atoms
    for chosen, label in distinct.items():
        answer, admitted = _answer(grid, label, list(chosen), pairs, policy)
        atoms_of[id(answer)] = chosen
        if answer.lost:
            continue  # it would exclude a version seen working there: never offer it
        if admitted & grid.bad_mask & ~held_mask and not label.startswith("exclude only"):
            continue  # a rounding or grouping admitted a bad cell: never offer it
        key = (answer.unresolved, answer.expressible)
        if key not in answers or _rank_key(answer) < _rank_key(answers[key]):
            answers[key] = answer
    if not any(a.expressible for a in answers.values()):  # always one: the pure failures alone
        fallback = _answer(grid, "exclude failing versions", pure, pairs, policy)[0]
        answers[((), True)] = fallback
        atoms_of[id(fallback)] = tuple(pure)
    return answers, atoms_of


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
