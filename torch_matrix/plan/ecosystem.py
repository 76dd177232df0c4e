"""An ecosystem run's plan (issue 34): which projects a shard runs, and what the run will cost before
it starts. Pure.

Shards cut by project, round robin over the file's order (shard K of N takes projects K, K+N,
...): every project lands in exactly one shard, and shards of one file agree without talking to
each other. A GitHub Actions matrix holds at most 256 jobs, so N <= 256.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from torch_matrix.spec.projects import Project
from torch_matrix.vocab.errors import UserError

MAX_SHARDS = 256  # a GitHub Actions matrix's job limit


def shard_projects(projects: Sequence[Project], k: int, n: int) -> list[Project]:
    if not 1 <= n <= MAX_SHARDS:
        raise UserError(
            f"{n} shards", where="--shard", hint=f"at most {MAX_SHARDS} (one CI matrix's jobs)"
        )
    return [p for i, p in enumerate(projects) if i % n == k - 1]


@dataclass(frozen=True)
class Estimate:
    """The cost of a run: downloads (each torch once: uv's cache shares it between projects and
    sides), venvs, and the wall time at worst (every budget used, every project retried)."""

    projects: int
    skipped: int
    torch_bytes: Mapping[str, int | None]  # torch version -> its wheel and CUDA wheels, bytes
    worst_seconds: float
    venvs: int

    def lines(self) -> list[str]:
        known = [b for b in self.torch_bytes.values() if b is not None]
        sizes = ", ".join(
            f"torch {v}: {_gb(b)}" if b is not None else f"torch {v}: size unknown"
            for v, b in self.torch_bytes.items()
        )
        total = sum(known)
        return [
            f"estimate: {self.projects} project(s) to run ({self.skipped} skipped), "
            f"{self.venvs} venvs (one per project per side, each deleted when its result is written)",
            f"estimate: downloads once into uv's cache: {sizes}"
            + (f" = {_gb(total)}" if len(known) > 1 else "")
            + "; each project's own dependencies come on top",
            f"estimate: at most {_duration(self.worst_seconds)} of tests (every budget used on "
            "both sides, every project's regressed tests retried)",
        ]

    def to_json(self) -> dict[str, object]:
        return {
            "projects": self.projects,
            "skipped": self.skipped,
            "torch_bytes": dict(self.torch_bytes),
            "worst_seconds": self.worst_seconds,
            "venvs": self.venvs,
        }


def estimate(projects: Sequence[Project], torch_bytes: Mapping[str, int | None]) -> Estimate:
    running = [p for p in projects if not p.skip]
    return Estimate(
        projects=len(running),
        skipped=len(projects) - len(running),
        torch_bytes=dict(torch_bytes),
        worst_seconds=sum(p.budget_s for p in running) * 4,  # 2 sides, then 2 retries
        venvs=2 * len(running),
    )


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
