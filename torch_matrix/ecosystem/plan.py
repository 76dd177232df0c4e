"""An ecosystem run's plan (issue 34): which projects a shard runs, and what the run will cost before
it starts. Pure.

Shards cut by project, round robin over the file's order (shard K of N takes projects K, K+N,
...): every project lands in exactly one shard, and shards of one file agree without talking to
each other. A GitHub Actions matrix holds at most 256 jobs, so N <= 256.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

from torch_matrix.ecosystem.projects import Project
from torch_matrix.vocab.errors import UserError

MAX_SHARDS = 256  # a GitHub Actions matrix's job limit


def shard_projects(projects: Sequence[Project], k: int, n: int) -> list[Project]:
    if not 1 <= n <= MAX_SHARDS:
        raise UserError(
            f"{n} shards", where="--shard", hint=f"at most {MAX_SHARDS} (one CI matrix's jobs)"
        )
    return [p for i, p in enumerate(projects) if i % n == k - 1]


Wheels = Sequence[tuple[str, int | None]]  # a side's torch wheel and its pinned wheels: name, bytes


@dataclass(frozen=True)
class Estimate:
    """The cost of a run: downloads (each torch once: uv's cache shares it between projects and
    sides; what the cache holds already is not downloaded), venvs, and the wall time at worst
    (every budget used, every project retried)."""

    projects: int
    skipped: int
    torch_bytes: Mapping[str, int | None]  # torch version -> its wheel and CUDA wheels, bytes
    worst_seconds: float
    venvs: int
    cached_bytes: Mapping[str, int] = field(default_factory=dict)  # of those, in uv's cache
    download_bytes: int | None = None  # what uv's cache lacks, each file once; None: unknown
    download_known: bool = True  # False: some file uv's cache lacks has no size
    uv_cache: str = ""  # "" where uv's cache was not found (all counted as downloads)
    forecast_seconds: float | None = None  # from recorded durations; None: none recorded
    forecast_known: int = 0  # projects whose own recorded duration the forecast uses
    done: int = 0  # a resumed run: projects whose results exist already, not counted above

    def lines(self) -> list[str]:
        sizes = ", ".join(
            f"torch {v}: {_gb(b)}{_held(b, self.cached_bytes.get(v, 0))}"
            if b is not None
            else f"torch {v}: size unknown"
            + (f" ({_gb(self.cached_bytes[v])} in uv's cache)" if self.cached_bytes.get(v) else "")
            for v, b in self.torch_bytes.items()
        )
        where = f"uv's cache ({self.uv_cache})" if self.uv_cache else "uv's cache (not found)"
        if self.download_bytes is None:
            downloads = "downloads: unknown"
        elif self.download_bytes == 0 and self.download_known:
            downloads = f"downloads nothing: all in {where}"
        else:
            downloads = (
                f"downloads {'at least ' if not self.download_known else ''}"
                f"{_gb(self.download_bytes)} once into {where}"
            )
        return [
            f"estimate: {self.projects} project(s) to run ({self.skipped} skipped"
            + (f", {self.done} done before" if self.done else "")
            + "), "
            f"{self.venvs} venvs (one per project per side, each deleted when its result is written)",
            f"estimate: torch with the CUDA wheels it pins: {sizes}; {downloads}; "
            "each project's own dependencies come on top",
            *self.forecast_lines(),
            f"estimate: at most {_duration(self.worst_seconds)} of tests (every budget used on "
            "both sides, every project's regressed tests retried)",
        ]

    def forecast_lines(self) -> list[str]:
        if self.forecast_seconds is None:
            return ["estimate: no recorded durations to forecast from (the ceiling follows)"]
        rest = self.projects - self.forecast_known
        return [
            f"estimate: about {_duration(self.forecast_seconds)} (forecast: {self.forecast_known} "
            f"project(s) at their recorded wall time"
            + (f", {rest} at the mean of those" if rest else "")
            + ")"
        ]

    def to_json(self) -> dict[str, object]:
        return {
            "projects": self.projects,
            "skipped": self.skipped,
            "torch_bytes": dict(self.torch_bytes),
            "cached_bytes": dict(self.cached_bytes),
            "download_bytes": self.download_bytes,
            "download_known": self.download_known,
            "uv_cache": self.uv_cache,
            "worst_seconds": self.worst_seconds,
            "forecast_seconds": self.forecast_seconds,
            "forecast_known": self.forecast_known,
            "venvs": self.venvs,
            "done": self.done,
        }


def estimate(
    projects: Sequence[Project],
    wheels: Mapping[str, Wheels | None],
    cached: Collection[str] = (),
    uv_cache: str = "",
    recorded: Mapping[str, float] | None = None,
    done: Sequence[Project] = (),
    listed: Sequence[Project] = (),
) -> Estimate:
    """``wheels``: each side's torch version -> its wheel files and their bytes (None: the index
    could not say); ``cached``: the file names uv's cache holds (``world.wheelset.cached_wheels``).
    A file both sides pin is downloaded once. ``projects``: those still to run; ``done``: how many
    a resumed run has results for already (said, not counted; their recorded durations still give
    the mean a project without a record is forecast at); ``listed``: the rest of the projects
    file, which ``--only`` or ``--shard`` leave out (their recorded durations give it too)."""
    running = [p for p in projects if not p.skip]
    totals: dict[str, int | None] = {}
    held: dict[str, int] = {}
    missing: dict[str, int | None] = {}
    for version, files in wheels.items():
        if files is None:
            totals[version] = None
            continue
        sizes = [size for _name, size in files]
        totals[version] = sum(s for s in sizes if s is not None) if None not in sizes else None
        held[version] = sum(size or 0 for name, size in files if name in cached)
        missing.update((name, size) for name, size in files if name not in cached)
    unknown_side = any(files is None for files in wheels.values())
    forecast, known = forecast_seconds(running, recorded or {}, also=[*done, *listed])
    return Estimate(
        projects=len(running),
        skipped=len(projects) - len(running),
        torch_bytes=totals,
        worst_seconds=sum(p.budget_s for p in running) * 4,  # 2 sides, then 2 retries
        venvs=2 * len(running),
        cached_bytes=held,
        download_bytes=None
        if unknown_side and not missing
        else sum(size or 0 for size in missing.values()),
        download_known=not unknown_side and None not in missing.values(),
        uv_cache=uv_cache,
        forecast_seconds=forecast,
        forecast_known=known,
        done=len(done),
    )


def forecast_seconds(
    projects: Sequence[Project], recorded: Mapping[str, float], also: Sequence[Project] = ()
) -> tuple[float | None, int]:
    """The wall time the projects will take: each at its recorded wall time (an earlier run's, both
    sides and any retry), one without a record at the mean of the recorded ones (theirs and
    ``also``'s: a resumed run's done projects and the rest of its list, each once), none longer than its ceiling (its budget on both
    sides and the retries). None where nothing is recorded. The mean, not the median: the sum of
    n durations one does not know is n times their mean, and durations are skewed (most projects
    take half a minute, a few ten): the median forecast 1,514 s for 39 projects of a real run
    that took 4,936 s (3.3x under; the mean: 2,839 s, 1.74x)."""
    known = [recorded[p.name] for p in projects if p.name in recorded]
    pool = list(
        {p.name: recorded[p.name] for p in [*projects, *also] if p.name in recorded}.values()
    )
    if not pool:
        return None, 0
    mean = sum(pool) / len(pool)
    total = sum(min(recorded.get(p.name, mean), p.budget_s * 4) for p in projects)
    return total, len(known)


def recorded_durations(sides: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Each project's recorded wall time: from its first side's start to its last side's end
    (``results.load``'s sides: project -> side key -> SideRun); a project without times is left
    out."""
    found: dict[str, float] = {}
    for name, runs in sides.items():
        starts = [r.started for r in runs.values() if getattr(r, "started", None) is not None]
        ends = [r.ended for r in runs.values() if getattr(r, "ended", None) is not None]
        if starts and ends and max(ends) >= min(starts):
            found[name] = max(ends) - min(starts)
    return found


def _held(total: int, cached: int) -> str:
    if cached and cached >= total:
        return " (in uv's cache)"
    return f" ({_gb(cached)} of it in uv's cache)" if cached else ""


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
