"""The run's cost and its disk budget, wired: the spec + the index + uv's cache -> ``plan.cost``.

- ``budget_of``: ``$TORCH_MATRIX_DISK_BUDGET``, else the spec's ``disk_budget``, else the free space
  of the disk that holds uv's cache and the venvs less a margin (``plan.cost.DEFAULT_MARGIN``).
- ``plan_cost``: each cell's wheels (``world.wheelset``), what uv's cache holds, the follow-up cap.
- ``refuse_unless_fits``: the plan-time check, one error line with the figure and the fix.
- ``room_for``: before a cell installs, whether it fits what is left of the budget.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from torch_matrix.plan.cost import DEFAULT_MARGIN, CellCost, PlanCost, WheelSet, cell_cost
from torch_matrix.plan.followups import cap_from
from torch_matrix.spec.model import DEFAULT_VARIANT, Spec
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell
from torch_matrix.vocab import settings
from torch_matrix.vocab.sizes import format_size

BUDGET_ENV = settings.DISK_BUDGET_ENV
KEEP_ENV = settings.KEEP_VENVS_ENV  # 1: a cell's venv stays after its result is written


def free_bytes(path: str | os.PathLike[str]) -> int:
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free


def budget_of(
    spec: Spec,
    environ: Mapping[str, str],
    disk_path: str | os.PathLike[str],
    free: Callable[[str | os.PathLike[str]], int] = free_bytes,
) -> tuple[int, str]:
    """(bytes the run may fill, where that figure comes from)."""
    given: int | None = settings.read(environ, BUDGET_ENV)  # a bad value: one error line
    if given is not None:
        return given, f"${BUDGET_ENV}"
    if spec.disk_budget is not None:
        return spec.disk_budget, "the spec's disk_budget"
    left = free(disk_path)
    return max(0, left - DEFAULT_MARGIN), (
        f"the free disk at {disk_path}, {format_size(left)}, less {format_size(DEFAULT_MARGIN)}"
    )


def keep_venvs(environ: Mapping[str, str]) -> bool:
    keep: bool = settings.read(environ, KEEP_ENV)
    return keep


def cell_wheel_sets(
    spec: Spec, cells: Sequence[Cell], environ: Mapping[str, str], workers: int = 8
) -> dict[str, WheelSet]:
    """Each cell's wheels, resolved from the index (cells with a plan note install nothing)."""
    from torch_matrix.world.index import open_index
    from torch_matrix.world.wheelset import cell_wheels

    indexes = {}
    for variant in dict.fromkeys(c.variant for c in cells):
        indexes[variant] = open_index(
            spec.index, variant=variant or DEFAULT_VARIANT, environ=environ
        )

    def one(cell: Cell) -> WheelSet:
        if cell.plan_note:
            return WheelSet()
        index = indexes[cell.variant]
        try:
            return cell_wheels(cell.requirements, lambda _name: index, cell.python)
        except (UserError, OSError, ValueError) as error:
            return WheelSet(unknown=(f"cannot size the cell: {error}",))

    todo = [c for c in cells if not c.plan_note]
    found: dict[str, WheelSet] = {c.id: WheelSet() for c in cells if c.plan_note}
    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            found.update(zip([c.id for c in todo], pool.map(one, todo)))
    return found


def plan_cost(
    spec: Spec,
    cells: Sequence[Cell],
    environ: Mapping[str, str],
    *,
    uv_cache: str = "",
    venvs_dir: str | os.PathLike[str] = ".nox",
    free: Callable[[str | os.PathLike[str]], int] = free_bytes,
) -> PlanCost:
    from torch_matrix.world.environment import link_mode_warning, uv_cache_dir
    from torch_matrix.world.wheelset import cached_wheels

    uv_cache = uv_cache or uv_cache_dir(environ)
    sets = cell_wheel_sets(spec, cells, environ)
    every = {w.filename for s in sets.values() for w in s.wheels}
    held = cached_wheels(uv_cache, every)
    costs = tuple(cell_cost(c.id, c.variant, sets[c.id], held) for c in cells)
    budget, origin = budget_of(spec, environ, uv_cache or venvs_dir, free)
    copies = bool(uv_cache) and link_mode_warning(uv_cache, venvs_dir, environ) is not None
    notes = []
    if not uv_cache:
        notes.append("uv's cache directory is unknown: nothing counted as cached")
    return PlanCost(
        cells=costs,
        followup_cap=cap_from(environ, spec.followups),
        budget=budget,
        budget_origin=origin,
        copies=copies,
        notes=tuple(notes),
    )


def refuse_unless_fits(cost: PlanCost) -> None:
    """The plan-time check: a budget that cannot hold the run's largest cell stops the run."""
    why = cost.fits()
    if why:
        raise UserError(
            f"the disk budget cannot hold this run: {why}",
            where=cost.budget_origin,
            hint=f'raise it (`disk_budget = "{format_size(_round_up(cost))}"` in the spec or '
            f"${BUDGET_ENV}), free disk, or drop the largest cells from the spec",
        )


def _round_up(cost: PlanCost) -> int:
    largest = cost.largest
    need = largest.new_disk if largest is not None else 0
    return int(-(-need // 10**9) * 10**9)


def room_for(cell_cost: CellCost, budget_left: int) -> str:
    """Why ``cell_cost`` cannot run in what is left of the budget, or ""."""
    from torch_matrix.plan.cost import does_not_fit

    if cell_cost.new_disk <= budget_left:
        return ""
    return does_not_fit(cell_cost.cell_id, cell_cost.new_disk, budget_left)
