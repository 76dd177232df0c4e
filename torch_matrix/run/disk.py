"""The run's disk: its budget, the keeper that holds it while cells run, and eviction.

- ``budget_of``: ``$TORCH_MATRIX_DISK_BUDGET``, else the spec's ``disk_budget``, else the free space
  of the disk that holds uv's cache and the venvs less a margin (``plan.cost.DEFAULT_MARGIN``, or a
  tenth of the free space where that is less).
- ``plan_cost``: each cell's wheels (``run.sizing``), what uv's cache holds, the follow-up cap.
- ``refuse_unless_fits``: the plan-time check, one error line with the figure and the fix.
- ``room_for``: before a cell installs, whether it fits what is left of the budget.
- ``Keeper`` and its ``Ledger``: what the run fetched, evicted from uv's cache when a cell needs
  the room (never what the user had cached); ``remove_venv`` after a cell's result is written.
- Each session's side (``disk_keeper``, ``followup_keeper``, ``budgeted``): the matrix cells and the
  follow-up cells keep one ledger; a cell that does not fit is recorded as not run, never a finding.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_matrix.plan.cost import (
    DEFAULT_MARGIN,
    VENV_OVERHEAD,
    CellCost,
    PlanCost,
    Wheel,
    cell_cost,
)
from torch_matrix.plan.followups import cap_from
from torch_matrix.run.matrixplan import MatrixPlan
from torch_matrix.run.sizing import cell_wheel_sets, followup_cost
from torch_matrix.spec.model import Spec
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell
from torch_matrix.vocab import settings
from torch_matrix.vocab.sizes import format_size

BUDGET_ENV = settings.DISK_BUDGET_ENV
KEEP_ENV = settings.KEEP_VENVS_ENV
FREE_DISK = "the free disk at"  # how a budget read from the free disk starts its origin  # 1: a cell's venv stays after its result is written


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
    margin = min(DEFAULT_MARGIN, left // 10)  # a small disk keeps a tenth free
    return max(0, left - margin), (
        f"{FREE_DISK} {disk_path}, {format_size(left)}, less {format_size(margin)}"
    )


def keep_venvs(environ: Mapping[str, str]) -> bool:
    keep: bool = settings.read(environ, KEEP_ENV)
    return keep


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
    copies = bool(uv_cache) and link_mode_warning(uv_cache, Path(venvs_dir), environ) is not None
    venvs_free = free(venvs_dir) if copies else None  # each venv a full copy: it must fit there
    notes = []
    if not uv_cache:
        notes.append("uv's cache directory is unknown: nothing counted as cached")
    return PlanCost(
        cells=costs,
        followup_cap=cap_from(environ, spec.followups),
        budget=budget,
        budget_origin=origin,
        copies=copies,
        venvs_free=venvs_free,
        venvs_dir=str(venvs_dir),
        notes=tuple(notes),
    )


def refuse_unless_fits(cost: PlanCost) -> None:
    """The plan-time check: a budget that cannot hold the run's largest cell stops the run, and so
    does a venvs' filesystem that cannot hold its copy where uv copies (it cannot hardlink)."""
    copy = cost.venvs_fit()
    if copy:
        raise UserError(
            f"the venvs' disk cannot hold this run: {copy}",
            where=cost.venvs_dir,
            hint="let uv hardlink instead: set UV_CACHE_DIR to a directory on this filesystem "
            "(and unset UV_LINK_MODE=copy), or free disk there",
        )
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


# ---------------------------------------------------------------- keeping the budget while running

LEDGER_NAME = ".torch-matrix-fetched.json"  # in the run's results directory
FREE_FLOOR = 1000**3  # never fill the disk: a cell needs this much free beyond its own need


def free_floor(free_now: int) -> int:
    """What stays free beyond a cell's need: 1 GB, or a tenth of the free space on a small disk."""
    return min(FREE_FLOOR, max(free_now, 0) // 10)


class Ledger:
    """The run's account of uv's cache, in its results directory (every session of the run, matrix
    cells and follow-ups, and a resumed run keep one): ``before``, the wheels the cache held when
    the run first met them (the user's: never evicted); ``fetched``, the wheels it met that the
    cache did not hold (wheel file -> unpacked bytes): once in the cache, the run put them there."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"before": [], "fetched": {}}
        if not isinstance(data, dict):
            return {"before": [], "fetched": {}}
        return {"before": list(data.get("before", [])), "fetched": dict(data.get("fetched", {}))}

    def write(self, data: Mapping[str, Any]) -> None:
        from torch_matrix.edges.fileio import atomic_write

        atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True), durable=False)


def _disk_of(cost: CellCost) -> dict[str, int]:
    return {w.filename: w.disk for w in cost.wheels}


class Keeper:
    """The run's disk budget, kept cell by cell: before a cell installs, what the run fetched and
    the rest of the plan no longer needs is evicted from uv's cache until the cell fits; a cell that
    still cannot fit is not run (``room`` says why); the prefetch fetches a cell ahead only where
    the budget holds it (``ahead``). What the run put in the cache counts, fetched ahead or not."""

    def __init__(
        self,
        budget: int,
        origin: str,
        uv_cache: str,
        ledger: Ledger,
        *,
        log: Callable[[str], None] = lambda line: None,
        free: Callable[[str | os.PathLike[str]], int] = free_bytes,
    ) -> None:
        self.budget = budget
        self.origin = origin
        self.uv_cache = uv_cache
        self.ledger = ledger
        self.log = log
        self.free = free
        if origin.startswith(FREE_DISK):
            # The free disk was measured with this run's own wheels already in uv's cache (a
            # follow-up session, a resumed run): they are part of what the run may fill.
            self.budget += self.used()

    def start(self, every: Mapping[str, int]) -> None:
        """Meet wheels (file -> unpacked bytes): those uv's cache holds now are the user's, the
        others the run's. A wheel met before keeps its side."""
        from torch_matrix.world.wheelset import cached_wheels

        data = self.ledger.read()
        before = set(data["before"])
        unseen = [name for name in every if name not in before and name not in data["fetched"]]
        if not unseen:
            return
        held = cached_wheels(self.uv_cache, unseen)
        data["before"] = sorted(before | held)
        for name in unseen:
            if name not in held:
                data["fetched"][name] = int(every[name])
        self.ledger.write(data)

    def used(self) -> int:
        """Bytes the run's own wheels take in uv's cache now."""
        from torch_matrix.world.wheelset import cache_entries

        fetched = self.ledger.read()["fetched"]
        return sum(
            int(size) for name, size in fetched.items() if cache_entries(self.uv_cache, name)
        )

    def _need(self, cost: CellCost) -> int:
        from torch_matrix.world.wheelset import cached_wheels

        held = cached_wheels(self.uv_cache, [w.filename for w in cost.wheels])
        return sum(w.disk for w in cost.wheels if w.filename not in held) + VENV_OVERHEAD

    def room(self, cost: CellCost, still_needed: Iterable[str]) -> str:
        """Make room for ``cost``'s cell; "" when it fits, else why it is not run."""
        from torch_matrix.plan.cost import does_not_fit

        self.start(_disk_of(cost))
        need = self._need(cost)
        used = self.used()
        free_now = self.free(self.uv_cache or ".")
        if used + need > self.budget or need + free_floor(free_now) > free_now:
            freed = self.evict({w.filename for w in cost.wheels} | set(still_needed))
            used = self.used()
            if freed:
                free_now = self.free(self.uv_cache or ".")
                self.log(
                    f"{cost.cell_id}: evicted {format_size(freed)} of wheels this run fetched and "
                    f"no later cell needs (uv's cache; the user's own entries are never touched)"
                )
        left = self.budget - used
        if need > left:
            return does_not_fit(cost.cell_id, need, left)
        floor = free_floor(free_now)
        if need + floor > free_now:
            return does_not_fit(cost.cell_id, need, free_now - floor, "the disk has")
        return ""

    def ahead(self, cost: CellCost) -> str:
        """Whether the prefetch may fetch ``cost``'s cell now: "" or why not (the budget)."""
        self.start(_disk_of(cost))
        need = self._need(cost)
        left = self.budget - self.used()
        if need > left:
            return (
                f"not ahead of its turn: needs {format_size(need)}, the disk budget has "
                f"{format_size(max(left, 0))} left"
            )
        return ""

    def record(self, cost: CellCost) -> None:
        """After a cell: its wheels are met (a follow-up cell's, first seen now)."""
        self.start(_disk_of(cost))

    def evict(self, keep: set[str]) -> int:
        """Remove from uv's cache the wheels the run fetched that are not in ``keep``; bytes freed."""
        from torch_matrix.world.wheelset import cache_entries, evict

        freed = 0
        for name, size in sorted(self.ledger.read()["fetched"].items()):
            if (
                name not in keep
                and cache_entries(self.uv_cache, name)
                and evict(self.uv_cache, name)
            ):
                freed += int(size)
        return freed


def remove_venv(venv: Path, environ: Mapping[str, str], log: Callable[[str], None]) -> None:
    """A cell's venv once its result is written (unless ``$TORCH_MATRIX_KEEP_VENVS=1``)."""
    if keep_venvs(environ) or not (venv / "pyvenv.cfg").is_file():
        return
    shutil.rmtree(venv, ignore_errors=True)
    log(f"removed its venv {venv} ({KEEP_ENV}=1 keeps it)")


def install_watch(cost: CellCost, uv_cache: str) -> Callable[[], str]:
    """What the install heartbeat adds: ``fetched 1.2 GB of 2.8 GB (310 MB of it in wheels still
    arriving); fetching torch, nvidia-cudnn-cu12 (+3 more)``. A wheel counts whole once uv's cache
    holds it unpacked; one still arriving counts by what uv has unpacked of it so far, turned into
    download bytes by the compression of the wheels still to come."""
    from torch_matrix.world.wheelset import cached_wheels, unpacking_bytes

    pending = [w for w in cost.wheels if w.filename not in cost.cached]
    total = sum(w.size or 0 for w in pending)

    def detail() -> str:
        if not pending or not uv_cache:
            return ""
        held = cached_wheels(uv_cache, [w.filename for w in pending])
        done = sum(w.size or 0 for w in pending if w.filename in held)
        left = sorted((w for w in pending if w.filename not in held), key=lambda w: -(w.size or 0))
        arriving = arriving_bytes(left, unpacking_bytes(uv_cache)) if left else 0
        text = f"fetched {format_size(done + arriving)} of {format_size(total)}"
        if arriving:
            text += f" ({format_size(arriving)} of it in wheels still arriving)"
        if left:
            names = ", ".join(w.project for w in left[:2])
            more = f" (+{len(left) - 2} more)" if len(left) > 2 else ""
            text += f"; fetching {names}{more}"
        else:
            text += "; linking into the venv"
        return text

    return detail


def arriving_bytes(left: Sequence[Wheel], unpacked_so_far: int) -> int:
    """The download bytes of the wheels still arriving, from what uv has unpacked of them so far:
    scaled by their compression (download bytes over unpacked bytes), never more than they are."""
    size = sum(w.size or 0 for w in left)
    disk = sum(w.disk for w in left)
    if not size or not disk or unpacked_so_far <= 0:
        return 0
    return min(size, unpacked_so_far * size // disk)


# ---------------------------------------------------------------- each session's side of the budget
#
# The first matrix cell sets the run's ``Keeper`` up (the plan's cost printed, a budget that cannot
# hold the largest cell refused) and tells the prefetcher what fits ahead; each cell's install is
# watched (bytes fetched) or refused (``not_run``: no evidence, never a finding); the follow-up
# session keeps the same ledger and prints each follow-up cell's cost first (``cost_line``).

KEEPER: list[Any] = []  # (Keeper, plan.cost.PlanCost): one per nox process


def disk_keeper(
    session: Any,
    plan: MatrixPlan,
    venvs_dir: Path,
    environ: Mapping[str, str] = os.environ,
    prefetcher: Any = None,
) -> tuple[Keeper, PlanCost]:
    """The run's disk budget, set up by its first cell: the plan's cost printed, a budget that cannot
    hold the largest cell refused (``UserError``), what uv's cache holds of the plan's wheels now
    recorded as the user's (never evicted). ``prefetcher`` (``run.prefetch``) is then told what fits
    ahead."""
    from torch_matrix.plan.cost import summary_lines
    from torch_matrix.world.environment import uv_cache_dir

    if not KEEPER:
        assert plan.spec is not None  # a matrix cell's plan always has its spec
        uv_cache = uv_cache_dir(environ)
        cost = plan_cost(plan.spec, plan.cells, environ, uv_cache=uv_cache, venvs_dir=venvs_dir)
        for line in summary_lines(cost):
            session.log(f"cost: {line}")
        refuse_unless_fits(cost)
        keeper = Keeper(
            cost.budget,
            cost.budget_origin,
            uv_cache,
            Ledger(plan.run_dir / LEDGER_NAME),
            log=session.log,
        )
        keeper.start({w.filename: w.disk for c in cost.cells for w in c.wheels})
        KEEPER.append((keeper, cost))
        if (
            prefetcher is not None
        ):  # the prefetch fetches a cell ahead only where the budget holds it
            prefetcher.fits = lambda cell: keeper_ahead(keeper, cost, plan, cell, environ)
    return KEEPER[0]


def keeper_ahead(keeper: Any, cost: Any, plan: MatrixPlan, cell: Cell, environ: Any) -> str:
    own = cost.cell(cell.id)
    if own is None and plan.spec is not None:
        own = followup_cost(plan.spec, cell, environ)
    return keeper.ahead(own) if own is not None else ""


def not_run(steps: Any, why: str) -> Any:
    """``steps`` whose install does not run: the cell is recorded as not run, with ``why`` (an
    install error, no evidence: never a finding)."""
    import dataclasses

    from torch_matrix.run.cellrun import CellSteps
    from torch_matrix.vocab.records import INSTALL_ERROR, InstallOutcome

    def refuse(*_args: Any, **_kwargs: Any) -> InstallOutcome:
        return InstallOutcome(INSTALL_ERROR, (), why, 0)

    return dataclasses.replace(steps or CellSteps(), install=refuse)


def watched(steps: Any, cost: Any, uv_cache: str) -> Any:
    """``steps`` whose install heartbeat says the bytes fetched and what is being fetched."""
    import dataclasses

    from torch_matrix.run.cellrun import CellSteps

    return dataclasses.replace(steps or CellSteps(), install_progress=install_watch(cost, uv_cache))


def followup_keeper(
    session: Any, plan: MatrixPlan, envdir: Path, environ: Mapping[str, str] = os.environ
) -> Any:
    """The follow-up session's side of the run's disk budget (the same ledger as its matrix cells)."""
    from torch_matrix.world.environment import uv_cache_dir

    assert plan.spec is not None  # load_plan always sets it
    uv_cache = uv_cache_dir(environ)
    budget, origin = budget_of(plan.spec, environ, uv_cache or envdir)
    return Keeper(budget, origin, uv_cache, Ledger(plan.run_dir / LEDGER_NAME), log=session.log)


def budgeted(
    session: Any, keeper: Keeper, own: CellCost | None, later: Iterable[str], steps: Any
) -> tuple[Any, str]:
    """A cell's ``steps`` held to the budget: refused (``not_run``, the reason warned) when ``own``
    does not fit beside the wheels of the cells ``later`` (their filenames, kept for them), else
    its install watched. Returns (the steps, why it was refused or "")."""
    if own is None:
        return steps, ""
    why = keeper.room(own, later)
    if why:
        session.warn(why)
        return not_run(steps, why), why
    return watched(steps, own, keeper.uv_cache), ""
