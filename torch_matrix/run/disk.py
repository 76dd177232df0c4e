"""The run's cost and its disk budget, wired: the spec + the index + uv's cache -> ``plan.cost``.

- ``budget_of``: ``$TORCH_MATRIX_DISK_BUDGET``, else the spec's ``disk_budget``, else the free space
  of the disk that holds uv's cache and the venvs less a margin (``plan.cost.DEFAULT_MARGIN``, or a
  tenth of the free space where that is less).
- ``plan_cost``: each cell's wheels (``world.wheelset``), what uv's cache holds, the follow-up cap.
- ``refuse_unless_fits``: the plan-time check, one error line with the figure and the fix.
- ``room_for``: before a cell installs, whether it fits what is left of the budget.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_matrix.plan.cost import (
    DEFAULT_MARGIN,
    VENV_OVERHEAD,
    CellCost,
    PlanCost,
    Wheel,
    WheelSet,
    cell_cost,
)
from torch_matrix.plan.followups import cap_from
from torch_matrix.spec.model import DEFAULT_VARIANT, Spec
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


def named_requirements(items: Sequence[str]) -> list[str]:
    """The install items that name a package on the index (``pytest>=8``), not a path or a file
    (``.[test]``, ``-r requirements.txt``: see ``install_items_cost``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for item in items:
        text = item.strip()
        if text.startswith(("-", ".", "/", "~")) or "@" in text:
            continue
        try:
            Requirement(text)
        except InvalidRequirement:
            continue
        found.append(text)
    return found


@dataclass(frozen=True)
class ItemsCost:
    """What a cell's ``install`` items add to its cost: requirements to resolve on the index (the
    named ones, those of a requirements file, a local project's declared dependencies), local wheel
    files (sized by ``stat`` and their zip directory), and what cannot be sized, each with why."""

    requirements: tuple[str, ...] = ()
    wheels: tuple[Wheel, ...] = ()
    unknown: tuple[str, ...] = ()


def install_items_cost(items: Sequence[str], base_dir: str) -> ItemsCost:
    """The cost side of the spec's ``install`` items (paths relative to ``base_dir``, the project)."""
    from torch_matrix.spec import install_items as kinds

    requirements: list[str] = []
    wheels: list[Wheel] = []
    unknown: list[str] = []
    for text in items:
        try:
            item = kinds.parse_item(text)
        except kinds.InstallItemError:
            unknown.append(f"{text}: not an install item this tool can size")
            continue
        if item.kind == kinds.REQUIREMENT:
            requirements.append(item.text)
        elif item.kind == kinds.REQUIREMENTS_FILE:
            more, why = _requirements_file(Path(item.absolute(base_dir)))
            requirements += more
            unknown += [f"{text}: {reason}" for reason in why]
        elif item.kind == kinds.PATH:
            path = item.absolute(base_dir)
            if kinds.is_project_dir(path):
                declared, complete = _declared_dependencies(Path(path), item.extras)
                requirements += declared
                unknown.append(f"{text}: the project itself, built from {path}: size unknown")
                if not complete:
                    unknown.append(
                        f"{text}: its dependencies are not declared in pyproject.toml "
                        "(setup.py or dynamic): their size is unknown"
                    )
            elif path.endswith(".whl") and os.path.isfile(path):
                wheels.append(_local_wheel(Path(path)))
            else:
                unknown.append(f"{text}: built from {path}: size unknown")
        # a constraints file installs nothing by itself
    return ItemsCost(tuple(requirements), tuple(wheels), tuple(unknown))


def _requirements_file(path: Path, depth: int = 0) -> tuple[list[str], list[str]]:
    """(the requirements a requirements file names, what in it cannot be sized)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return [], [f"cannot read {path}: {error}"]
    found: list[str] = []
    unknown: list[str] = []
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _sep, rest = line.partition(" ")
        if option in ("-r", "--requirement") and rest.strip() and depth < 5:
            more, why = _requirements_file(path.parent / rest.strip(), depth + 1)
            found += more
            unknown += why
            continue
        if option in ("-c", "--constraint") or line.startswith("--"):
            continue  # constraints and index options install nothing by themselves
        try:
            Requirement(line)
        except InvalidRequirement:
            unknown.append(f"{line} (in {path.name}): size unknown")
            continue
        if "@" in line:
            unknown.append(f"{line} (in {path.name}): a direct reference, size unknown")
            continue
        found.append(line)
    return found, unknown


def _declared_dependencies(project: Path, extras: str) -> tuple[list[str], bool]:
    """(a local project's dependencies, with those of ``extras``, from its pyproject.toml; whether
    that is all of them: False where they come from setup.py or are dynamic)."""
    from torch_matrix.spec.parse import TOML_ERRORS, tomllib

    try:
        data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, *TOML_ERRORS):
        return [], False
    table = data.get("project")
    if not isinstance(table, dict):
        return [], False
    dynamic = table.get("dynamic") or []
    found = [str(d) for d in table.get("dependencies") or [] if isinstance(d, str)]
    optional = table.get("optional-dependencies") or {}
    for extra in (e.strip() for e in extras.strip("[]").split(",") if e.strip()):
        found += [str(d) for d in optional.get(extra) or [] if isinstance(d, str)]
    self_name = str(table.get("name", ""))
    # ``.[test]`` whose extra names the project again (``toyproj[dev]``) resolves through it.
    found = [d for d in found if not _names(d, self_name)]
    complete = "dependencies" not in dynamic and "optional-dependencies" not in dynamic
    return found, complete


def _names(requirement: str, project: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name) == canonicalize_name(project)
    except InvalidRequirement:
        return False


def _local_wheel(path: Path) -> Wheel:
    """A wheel file given by path: its size from ``stat``, unpacked from its zip directory."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    from torch_matrix.edges.ranges import LocalZip, RangeReadError, unpacked_size

    size = path.stat().st_size
    try:
        unpacked: int | None = unpacked_size(LocalZip(path))
    except RangeReadError:
        unpacked = None
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
        project, release = str(name), str(version)
    except InvalidWheelFilename:
        project, release = path.name, ""
    return Wheel(project, release, path.name, size, unpacked)


def cell_wheel_sets(
    spec: Spec, cells: Sequence[Cell], environ: Mapping[str, str], workers: int = 8
) -> dict[str, WheelSet]:
    """Each cell's wheels, resolved from the index (cells with a plan note install nothing)."""
    from torch_matrix.world.index import open_index
    from torch_matrix.world.specfile import project_dir
    from torch_matrix.world.wheelset import cell_wheels

    indexes = {}
    for variant in dict.fromkeys(c.variant for c in cells):
        indexes[variant] = open_index(
            spec.index, variant=variant or DEFAULT_VARIANT, environ=environ
        )

    base_dir = project_dir(spec)
    items = {c.install: install_items_cost(c.install, base_dir) for c in cells if not c.plan_note}

    def one(cell: Cell) -> WheelSet:
        if cell.plan_note:
            return WheelSet()
        index = indexes[cell.variant]
        extra = items[cell.install]
        try:
            found = cell_wheels(
                [*cell.requirements, *extra.requirements], lambda _name: index, cell.python
            )
        except (UserError, OSError, ValueError) as error:
            return WheelSet(unknown=(f"cannot size the cell: {error}", *extra.unknown))
        return WheelSet((*found.wheels, *extra.wheels), (*found.unknown, *extra.unknown))

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
