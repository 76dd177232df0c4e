"""Trade-offs: a break no pin closes without excluding a version seen working (numpy 2 with an
older torch). For each interaction, the one-pin answers ranked by the working pairs each gives up."""

from __future__ import annotations

from collections.abc import Sequence


from .evidence import _axis_rank
from .model import Answer, Pin, Tradeoff, _exclusion_key
from .specifiers import PinPolicy, build_specifiers, merge_specifiers
from torch_matrix.vocab.versions import version_key
from .windows import Window, admitted_releases, find_windows, line_bound, python_of
from .vocabulary import PYTHON, Value
from .masks import Atom, _Grid
from .answers import _reason


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
                    _uncovered(pin.windows + added.windows),
                    pin.gives_up + added.gives_up,
                )
            )
            merged = True
        else:
            out.append(pin)
    if not merged:
        out.append(added)
    return tuple(sorted(out, key=lambda p: (_axis_rank(p.package), p.condition is not None)))


def _uncovered(windows: Sequence[Window]) -> tuple[Window, ...]:
    """The windows whose releases no other window of the line holds too: a tested bad release's
    unproven window (``83.0.0: edge not found``) inside the trade-off's line (``82.x..84.x``) says
    nothing the line does not, and its "edge not found" would contradict the pin printed."""
    kept: list[Window] = []
    for index, window in enumerate(windows):
        mine = set(window.releases)
        covered = any(
            mine < set(other.releases) or (mine == set(other.releases) and other_index < index)
            for other_index, other in enumerate(windows)
            if other_index != index
        )
        if not covered:
            kept.append(window)
    return tuple(kept)


def _proven_windows(
    grid: _Grid,
    package: str,
    other: str,
    cells: int,
    scope: int,
    clean: set[Value],
    guard: set[Value],
    mixed: set[Value],
) -> tuple[tuple[Window, ...], tuple[str, ...]]:
    """Under ``PinPolicy.PROVEN``: the windows that exclude the ``clean`` failing values whole (a
    package other than torch/torchvision bounded by the line it crossed), and the specifiers they
    make with the ``mixed`` values excluded as themselves."""
    windows = tuple(
        find_windows(
            package,
            clean,
            guard,
            grid.cells(scope),
            grid.released[package],
            grid.origins,
            grid.wheel_pythons.get(package),
            grid.holes.get(package),
        )
    )
    if package not in CORE_PACKAGES:
        seen_failing = grid.values(package, scope & grid.bad_mask)
        partners = ", ".join(str(v) for v in sorted(grid.values(other, cells), key=version_key))
        pythons = sorted(
            {python_of(o.value(PYTHON)) for o in grid.cells(scope) if o.value(PYTHON)},
            key=version_key,
        )
        installable, _ = admitted_releases(
            grid.released[package], grid.wheel_pythons.get(package), pythons
        )
        windows = tuple(
            line_bound(
                w,
                guard,
                grid.released[package],
                seen_failing,
                f"with {other} {partners}",
                installable,
            )
            for w in windows
        )
    specs = merge_specifiers(
        (),
        [s for w in windows for s in w.specifiers]
        + [f"!={v}" for v in sorted(mixed, key=version_key)],
    )
    return windows, specs


def _given_up(grid: _Grid, lost: int, package: str, other: str) -> tuple[str, ...]:
    """The working pairs a trade-off gives up, each with up to two of its cells."""
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
    return tuple(given_up)


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
    if not failing:
        return None
    scope = 0
    for value in grid.values(other, cells):
        scope |= grid.where(other).get(value, 0)
    goods = grid.values(package, scope & grid.good_mask)
    # Every failing value is excluded, so the answer closes every failing pair of the interaction.
    # A value that fails with one partner and passes with another (numpy 1.24.4 failing with torch
    # 1.13.0, passing with 1.13.1) is excluded as itself (`!=`), never by a window: a window never
    # covers a release seen passing where it applies.
    # A window also never covers a value seen passing with any partner that fails somewhere: the
    # pin applies there too (torch 1.13.0 failing with numpy 1.25.2, passing with 1.24.4, which
    # fails with torch 1.13.1): such a value is excluded as itself.
    broad = 0
    for value in grid.values(other, grid.bad_mask):
        broad |= grid.where(other).get(value, 0)
    guard = grid.values(package, broad & grid.good_mask) | goods
    mixed = failing & guard
    clean = failing - guard
    specs = build_specifiers(goods - failing, failing, policy=policy)
    windows: tuple[Window, ...] = ()
    if policy == PinPolicy.PROVEN and grid.released.get(package):
        windows, specs = _proven_windows(grid, package, other, cells, scope, clean, guard, mixed)
    where = grid.where(package)
    exclusions = tuple(
        _reason(package, v, grid.cells(grid.bad_mask & scope & where.get(v, 0)), grid)
        for v in sorted(failing, key=version_key)
    )
    pin = Pin(package, specs, None, exclusions, windows)
    draft = Answer("", _with_pin(safe.pins, pin), (), len(grid.good))
    admitted = grid.admitted(draft)
    lost = grid.good_mask & ~admitted
    gives_up = _given_up(grid, lost, package, other)
    pin = Pin(package, specs, None, exclusions, windows, gives_up)
    if windows:
        given = [v for w in windows for v in (w.releases if w.proven else w.tested)]
        given += [str(v) for v in sorted(mixed, key=version_key)]
    else:
        given = [str(v) for v in sorted(failing, key=version_key)]
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
