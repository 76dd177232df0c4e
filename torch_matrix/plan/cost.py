"""What a run costs before it starts: bytes to download, the disk it fills at its peak, the follow-up
budget; and whether a cell fits the disk budget left. Pure: functions of the wheel sets the edge
(``torch_matrix.world.wheelset``) resolved from the index, and of what uv's cache already holds.

The model (uv's, measured): a wheel is downloaded once into uv's cache and unpacked there (the zip
is not kept); a venv on the cache's filesystem hardlinks the unpacked files, so it adds almost
nothing. A run's disk is therefore the cache growth (every wheel it fetches, unpacked) plus, where
uv must copy (another filesystem, ``UV_LINK_MODE=copy``), one unpacked copy per live venv. A
wheel's unpacked size is read from its zip's central directory (exact) or, where that cannot be
read, bounded by ``UNPACK_BOUND`` times its size (said as an upper bound).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_matrix.vocab.sizes import format_size

# The largest unpacked/compressed ratio among real torch-stack wheels is triton's 2.61 (torch 2.05,
# cudnn 1.62, cublas 1.52, nccl 1.32): a wheel whose directory cannot be read is counted at 3x.
UNPACK_BOUND = 3.0
# Left free when the budget is the disk's free space: other programs, logs, result files.
DEFAULT_MARGIN = 5 * 1000**3
# A venv's own files besides the hardlinked wheels (pyvenv.cfg, the interpreter link, scripts,
# our probe files): small, but counted.
VENV_OVERHEAD = 50 * 1000**2
UNKNOWN_SHOWN = 4  # items of unknown size named in the plan's summary


@dataclass(frozen=True)
class Wheel:
    """One file a cell installs, as the index lists it."""

    project: str
    version: str
    filename: str
    size: int | None  # bytes to download; None: the index does not say
    unpacked: int | None = None  # bytes on disk once unpacked; None: not read (bounded)

    @property
    def disk(self) -> int:
        """Bytes on disk unpacked: exact where read, else the bound."""
        if self.unpacked is not None:
            return self.unpacked
        return int((self.size or 0) * UNPACK_BOUND)

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "version": self.version,
            "filename": self.filename,
            "size": self.size,
            "unpacked": self.unpacked,
        }


@dataclass(frozen=True)
class WheelSet:
    """What one cell installs (its pins and their dependencies, resolved as uv would), or why not."""

    wheels: tuple[Wheel, ...] = ()
    unknown: tuple[str, ...] = ()  # requirements that could not be resolved to a file, with why


@dataclass(frozen=True)
class CellCost:
    cell_id: str
    variant: str
    wheels: tuple[Wheel, ...]
    cached: frozenset[str]  # filenames uv's cache holds already
    unknown: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """All the cell's wheel bytes (what a cold cache downloads for it alone)."""
        return sum(w.size or 0 for w in self.wheels)

    @property
    def download(self) -> int:
        """What this cell alone downloads: its wheels not in uv's cache."""
        return sum(w.size or 0 for w in self.wheels if w.filename not in self.cached)

    @property
    def disk(self) -> int:
        """The disk the cell needs on its own, from an empty cache: every wheel unpacked, + a venv."""
        return sum(w.disk for w in self.wheels) + VENV_OVERHEAD

    @property
    def new_disk(self) -> int:
        """The disk the cell adds to the cache as it is now (its uncached wheels unpacked) + a venv."""
        return sum(w.disk for w in self.wheels if w.filename not in self.cached) + VENV_OVERHEAD

    @property
    def exact(self) -> bool:
        return not self.unknown and all(
            w.size is not None and w.unpacked is not None for w in self.wheels
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "download_bytes": self.download,
            "wheel_bytes": self.size,
            "disk_bytes": self.disk,
            "cached_wheels": sorted(self.cached & {w.filename for w in self.wheels}),
            "wheels": [w.to_json() for w in self.wheels],
            "unknown": list(self.unknown),
            "exact": self.exact,
        }


@dataclass(frozen=True)
class PlanCost:
    """The run's cost: per cell, in total, at its peak, and the follow-up budget."""

    cells: tuple[CellCost, ...]
    followup_cap: int
    budget: int  # bytes the run may fill
    budget_origin: (
        str  # "the spec's disk_budget", "$TORCH_MATRIX_DISK_BUDGET", "free disk less 5 GB"
    )
    copies: bool = False  # uv copies into each venv (no hardlinks)
    # Where uv copies: the free disk on the venvs' filesystem (None: not read, or uv hardlinks)
    venvs_free: int | None = None
    venvs_dir: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def _unique(self) -> dict[str, Wheel]:
        return {w.filename: w for c in self.cells for w in c.wheels}

    def cell(self, cell_id: str) -> CellCost | None:
        return next((c for c in self.cells if c.cell_id == cell_id), None)

    def wheels_of(self, cell_ids: Iterable[str]) -> set[str]:
        """The wheel files these cells install."""
        wanted = set(cell_ids)
        return {w.filename for c in self.cells if c.cell_id in wanted for w in c.wheels}

    @property
    def download(self) -> int:
        """Bytes the run downloads: each wheel not in uv's cache once, however many cells share it."""
        cached = frozenset().union(*(c.cached for c in self.cells)) if self.cells else frozenset()
        return sum(w.size or 0 for name, w in self._unique().items() if name not in cached)

    @property
    def cache_growth(self) -> int:
        """What the run adds to uv's cache, unpacked, when nothing is evicted."""
        cached = frozenset().union(*(c.cached for c in self.cells)) if self.cells else frozenset()
        return sum(w.disk for name, w in self._unique().items() if name not in cached)

    @property
    def largest(self) -> CellCost | None:
        return max(self.cells, key=lambda c: c.new_disk, default=None)

    @property
    def peak(self) -> int:
        """The disk the run needs at its peak without a budget: the cache growth, plus the
        largest venv (a copy of its wheels where uv cannot hardlink, else its overhead)."""
        if not self.cells:
            return 0
        venv = max((c.disk if self.copies else VENV_OVERHEAD) for c in self.cells)
        return self.cache_growth + venv

    @property
    def peak_in_budget(self) -> int:
        """The peak when the budget is kept: the largest cell's need (the run evicts what it
        fetched for cells already done), or the unbounded peak where that is smaller."""
        largest = self.largest
        if largest is None:
            return 0
        need = largest.new_disk + (largest.disk if self.copies else 0)
        return min(self.peak, max(need, 0))

    @property
    def followup_bytes(self) -> int:
        """An upper bound on the follow-up cells' downloads: the cap times the largest cell's
        wheels (a follow-up installs a release between the grid's, with a wheel set like theirs)."""
        return self.followup_cap * max((c.size for c in self.cells), default=0)

    @property
    def exact(self) -> bool:
        return all(c.exact for c in self.cells)

    def venvs_fit(self) -> str:
        """Where uv copies every wheel into each venv: why the venvs' filesystem cannot hold the
        largest cell's copy (the budget counts uv's cache, on another disk), or ""."""
        if not self.copies or self.venvs_free is None or not self.cells:
            return ""
        largest = max(self.cells, key=lambda c: c.disk)
        need = largest.disk  # its wheels unpacked, and the venv itself
        if need <= self.venvs_free:
            return ""
        return (
            f"uv copies every wheel into each venv, and the largest cell, {largest.cell_id}, "
            f"needs {format_size(need)} of disk there; {format_size(self.venvs_free)} is free"
        )

    def fits(self) -> str:
        """Why the budget cannot hold the run's largest cell (with the fix), or ""."""
        largest = self.largest
        if largest is None or largest.new_disk <= self.budget:
            return ""
        return (
            f"the largest cell, {largest.cell_id}, needs {format_size(largest.new_disk)} of disk; "
            f"the budget is {format_size(self.budget)} ({self.budget_origin})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "download_bytes": self.download,
            "cache_growth_bytes": self.cache_growth,
            "peak_disk_bytes": self.peak,
            "peak_disk_in_budget_bytes": self.peak_in_budget,
            "disk_budget_bytes": self.budget,
            "disk_budget_from": self.budget_origin,
            "followups": {"cap": self.followup_cap, "download_bytes_at_most": self.followup_bytes},
            "exact": self.exact,
            "notes": list(self.notes),
        }


def cell_cost(cell_id: str, variant: str, wheels: WheelSet, cached: Iterable[str]) -> CellCost:
    names = {w.filename for w in wheels.wheels}
    return CellCost(cell_id, variant, wheels.wheels, frozenset(cached) & names, wheels.unknown)


def summary_lines(cost: PlanCost) -> list[str]:
    """The plan's cost, for the terminal (one fact a line)."""
    estimated = any(w.unpacked is None for c in cost.cells for w in c.wheels)
    bound = " (an upper bound: some unpacked sizes are estimated)" if estimated else ""
    unknown = list(dict.fromkeys(u for c in cost.cells for u in c.unknown))
    plus = f" + {len(unknown)} item(s) of unknown size" if unknown else ""
    lines = [
        f"download: {format_size(cost.download)}{plus} for {len(cost.cells)} cell(s), each wheel "
        f"once, less what uv's cache holds{bound}",
        f"disk at the peak: {format_size(cost.peak)} without a budget (uv's cache grows by "
        f"{format_size(cost.cache_growth)} unpacked"
        + ("; uv copies into each venv" if cost.copies else "; venvs hardlink from it")
        + f"); {format_size(cost.peak_in_budget)} when the run keeps its budget",
        f"disk budget: {format_size(cost.budget)} ({cost.budget_origin})",
    ]
    if cost.followup_cap:
        lines.append(
            f"follow-up cells: at most {cost.followup_cap} (counterfactual and edge cells the "
            f"results call for, each a full install), at most {format_size(cost.followup_bytes)} "
            f"more to download; `followups = N` in the spec or $TORCH_MATRIX_FOLLOWUPS bounds them "
            f"(0: none)"
        )
    else:
        lines.append("follow-up cells: off (followups = 0): nothing more is downloaded")
    if unknown:
        shown = "; ".join(unknown[:UNKNOWN_SHOWN])
        more = (
            f" (+{len(unknown) - UNKNOWN_SHOWN} more: plan --json)"
            if len(unknown) > UNKNOWN_SHOWN
            else ""
        )
        lines.append(f"not sized (unknown, not counted as 0): {shown}{more}")
    lines.extend(cost.notes)
    return lines


def cell_note(cost: CellCost) -> str:
    """``2.5 GB (1.1 GB cached)`` for the plan's table."""
    cached = cost.size - cost.download
    text = format_size(cost.download)
    if cached:
        text += f" ({format_size(cached)} cached)"
    if cost.unknown:
        text += " +?"
    return text


def does_not_fit(cell_id: str, need: int, left: int, short: str = "budget") -> str:
    """The reason a cell is not run: ``needs 4.1 GB, budget 2.3 GB left`` (``short``: what is
    short, the budget or ``the disk has``: a disk keeps a tenth of its free space, at most 1 GB)."""
    return (
        f"{cell_id}: not run: needs {format_size(need)} of disk, {short} "
        f"{format_size(max(left, 0))} left (no evidence; raise disk_budget or free disk, then "
        f"rerun: finished cells are kept)"
    )


def run_order(cells: Sequence[Any]) -> list[Any]:
    """The order a run takes its cells in, so that cells sharing a CUDA line run one after another:
    a variant's cells together (a CUDA variant's index serves one line; the default builds' line
    follows the release), and inside a variant the cells of one torch release together (an
    ``include`` cell joins its release's cells), both in first appearance order. The prefetch
    and the disk budget then fetch each line's wheels once and evict them once its last cell is
    done, instead of fetching them again for a cell of that line that comes back later."""
    by_release = order_by_line(cells, lambda c: f"{c.variant} {c.torch}")
    return order_by_line(by_release, lambda c: str(c.variant))


def order_by_line(cells: Sequence[Any], line_of: Callable[[Any], str]) -> list[Any]:
    """Cells sharing a line (``line_of(cell)``) next to each other, first appearance order
    otherwise (a stable sort: cells of one line keep their order)."""
    first: dict[str, int] = {}
    for position, cell in enumerate(cells):
        first.setdefault(line_of(cell), position)
    return sorted(cells, key=lambda c: first[line_of(c)])
