"""Figure 11: a matrix that fits the machine (issue #32) -- a real 6-release matrix with its
follow-ups, cold, under ``disk_budget = "15GB"`` against no budget, and on a filesystem smaller
than the matrix.

The matrix: torch 2.3.1, 2.5.1, 2.7.1, 2.9.1, 2.13.0, 2.15.0 on Python 3.11 from PyPI (each with
its CUDA wheels), no torchvision, and a small downstream suite (one pytest test that saves an
object in a checkpoint and loads it back: torch 2.6 made ``weights_only=True`` the default, so the
suite breaks between 2.5.1 and 2.7.1 and the run's follow-up cells look for the edge;
``followups = 3``). Only the suite runs in each cell (``[probes] run = ["tests"]``).

Each run starts from an empty uv cache of its own (``UV_CACHE_DIR``), so everything in it is what
the run caused. Measured, side by side in one bench run:

- ``budget`` (``disk_budget = "15GB"``) and ``unbounded`` (no budget): wall time; the peak of
  uv's cache + the venvs (``du`` of both together every few seconds); every cell's verdict and the
  pins (``torch-matrix pins``), which must be the same; the peak must be <= 15 GB;
- ``plan`` against the cold run: the bytes ``torch-matrix plan --json`` says the run downloads,
  against the bytes of the wheels the unbounded run's cache holds at its end (each wheel file's
  size from the index), and the receive counters of the machine's interfaces (machine-wide: other
  traffic inflates them);
- ``small_fs``: the same matrix with uv's cache and the venvs on a 12 GB ext4 loop device (no
  budget given: the default, the free space less a margin): every cell judged or named as not
  fitting, and "No space left on device" nowhere in the results or the run's output.

Needs root (the loop device), network access to PyPI and ~30 GB of free disk. ``--quick``: not
measured (it is the real wheels or nothing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .common import REPO_ROOT, BenchError, Context, du_bytes, net_rx_bytes, remove_tree, run_command
from .stats import human_bytes, ratio, targets_for

FIGURE = "11_budget"
RELEASES = ("2.3.1", "2.5.1", "2.7.1", "2.9.1", "2.13.0", "2.15.0")
BUDGET = "15GB"
BUDGET_BYTES = 15 * 1000**3
SMALL_FS_BYTES = 12 * 1000**3
# Plan bytes against downloaded bytes: a small cold plan of its own (no follow-ups, no prefetch),
# two releases sharing their CUDA line (the nvidia-* wheels must be counted once).
COLD_RELEASES = ("2.7.0", "2.7.1")
# uv names each wheel it downloads that is over 1 MiB: ``Downloading torch (743.1MiB)``.
UV_DOWNLOADING = re.compile(r"^Downloading (\S+) \(([0-9.]+)(KiB|MiB|GiB)\)", re.MULTILINE)
UV_UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
GOALS = {
    "budget run peak / budget": ("<=", 1.0, "x"),
    "same verdicts and pins (1 = yes)": (">=", 1.0, ""),
    "plan bytes / downloaded bytes": ("<=", 1.1, "x"),
    "downloaded bytes / plan bytes": ("<=", 1.1, "x"),
    "small fs: cells neither judged nor named as not fitting": ("<=", 0.0, ""),
    "small fs: 'No space left on device' anywhere": ("<=", 0.0, ""),
}
TEST = """\
import io

import torch


class Box:
    def __init__(self):
        self.x = 1


def test_a_checkpoint_holding_an_object_loads_back():
    buffer = io.BytesIO()
    torch.save({"box": Box(), "w": torch.zeros(2)}, buffer)
    buffer.seek(0)
    assert torch.load(buffer)["box"].x == 1
"""


def _project(
    root: Path,
    budget: str | None,
    releases: tuple[str, ...] = RELEASES,
    followups: int = 3,
) -> Path:
    project = root / "toyproj"
    (project / "tests").mkdir(parents=True, exist_ok=True)
    (project / "tests" / "test_checkpoint.py").write_text(TEST)
    lines = [
        'name = "toyproj"',
        'python = ["3.11"]',
        f"torch = {json.dumps(list(releases))}",
        'torchvision = "none"',
        'install = ["pytest"]',
        f"followups = {followups}",
    ]
    if budget:
        lines.append(f'disk_budget = "{budget}"')
    lines += ["[probes]", 'run = ["tests"]', 'commands = { tests = "pytest -q tests" }']
    (project / "matrix.toml").write_text("\n".join(lines) + "\n")
    return project


class Sampler:
    """``du`` of uv's cache and the venvs together, every ``every`` seconds, in a thread."""

    def __init__(self, paths: list[Path], every: float = 5.0) -> None:
        self.paths = paths
        self.every = every
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            present = [p for p in self.paths if p.exists()]
            if present:
                try:
                    self.peak = max(self.peak, du_bytes(present))
                    self.samples += 1
                except BenchError:
                    pass
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _torch_matrix(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_command([sys.executable, "-m", "torch_matrix", *args], env=env, cwd=cwd, check=False)


def _env(
    project: Path, cache: Path, results: Path, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {
        "TORCH_MATRIX_SPEC": str(project / "matrix.toml"),
        "TORCH_MATRIX_RESULTS": str(results),
        "UV_CACHE_DIR": str(cache),
        "UV_NO_PROGRESS": "1",
        "TORCH_MATRIX_DISK_BUDGET": "",
    }
    env.update(extra or {})
    return env


def _run(
    ctx: Context, label: str, project: Path, where: Path, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    cache, envdir, results = where / "uv-cache", where / "venvs", ctx.work / f"{label}-results"
    for path in (cache, envdir, results):
        remove_tree(path)
    env = _env(project, cache, results, extra)
    planned = _torch_matrix("plan", "--json", env=env, cwd=project)
    plan: list[dict[str, Any]] = json.loads(planned.stdout) if planned.returncode == 0 else []
    plan_wheels = {
        w["filename"]: w["size"] or 0 for c in plan for w in c.get("cost", {}).get("wheels", [])
    }
    rx = net_rx_bytes()
    with Sampler([cache, envdir]) as sampler:
        started = time.perf_counter()
        done = run_command(
            [sys.executable, "-m", "torch_matrix", "run", "--envdir", str(envdir), "-s", "matrix"],
            env=env,
            cwd=project,
            check=False,
        )
        wall = time.perf_counter() - started
    rx = net_rx_bytes() - rx
    held, entries = _cached_filenames(cache, list(plan_wheels))
    verdicts = _verdicts(results / "toyproj" / "cells")
    pins = _torch_matrix("pins", str(results / "toyproj"), env=env, cwd=project)
    output = done.stdout
    (ctx.work / f"{label}-output.txt").write_text(output)  # the whole run's output, kept
    enospc = output.count("No space left on device") + sum(
        path.read_text(errors="replace").count("No space left on device")
        for path in (results / "toyproj").rglob("*")
        if path.is_file() and path.suffix in (".json", ".md", ".html", ".txt")
    )
    result = {
        "wall_s": round(wall, 1),
        "exit": done.returncode,
        "peak_bytes": sampler.peak,
        "du_samples": sampler.samples,
        "plan_download_bytes": sum(plan_wheels.values()),
        "plan_exit": planned.returncode,
        "planned_cells": [c["id"] for c in plan],
        "cache_wheels_at_end": sorted(held),
        "cache_wheel_bytes_at_end": sum(plan_wheels.get(name, 0) for name in held),
        "wheel_entries_in_cache": entries,  # more than cache_wheels_at_end: uv took unplanned files
        "rx_bytes": rx,
        "verdicts": verdicts,
        "pins": _pins_lines(pins.stdout),
        "no_space_mentions": enospc,
        "output_tail": output[-3000:],
    }
    ctx.log(
        f"  {label}: {wall:.0f} s, exit {done.returncode}, peak {human_bytes(sampler.peak)} "
        f"({sampler.samples} samples), plan says {human_bytes(result['plan_download_bytes'])}, "
        f"received {human_bytes(rx)}; {len(verdicts)} cells: "
        + ", ".join(f"{k}={v}" for k, v in sorted(verdicts.items()))
    )
    for path in (cache, envdir):
        remove_tree(path)
    # Each run is kept as soon as it ends: a later run that times out loses nothing of this one.
    (ctx.work / f"{label}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def _cached_filenames(cache: Path, planned: list[str]) -> tuple[set[str], int]:
    """The planned wheel files uv's cache holds, and how many wheel entries it holds in all."""
    from torch_matrix.world.wheelset import cached_wheels

    entries = sum(
        1
        for bucket in cache.glob("wheels-v*")
        for entry in bucket.glob("**/*")
        if entry.is_symlink()
    )
    return cached_wheels(cache, planned), entries


NOT_FITTING = "not run: does not fit"  # a cell the run named as not fitting (no evidence)


def _verdicts(cells: Path) -> dict[str, str]:
    """Each cell's verdict, or ``NOT_FITTING`` where the run said it does not fit."""
    from torch_matrix.judge.verdict import verdict_of
    from torch_matrix.world.results import read_result

    found = {}
    for path in sorted(cells.glob("*.json")):
        result = read_result(path)
        if result is not None:
            not_run = ": not run: needs " in (result.install.message or "")
            found[result.cell.id] = NOT_FITTING if not_run else str(verdict_of(result).kind)
    return found


def _pins_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip() and "results/" not in line]


def uv_downloads(text: str) -> list[tuple[str, int]]:
    """The wheels uv says it downloads (those over 1 MiB), with their bytes (uv rounds to 0.1 MiB)."""
    return [
        (m.group(1), int(float(m.group(2)) * UV_UNITS[m.group(3)]))
        for m in UV_DOWNLOADING.finditer(text)
    ]


def cold_plan(ctx: Context) -> dict[str, Any]:
    """``plan --json``'s download bytes against what a cold run of that plan downloads: 2 cells, an
    empty uv cache of their own, no prefetch (every download is in a cell's install output), the
    venvs kept. Downloaded, three ways: uv's own ``Downloading`` lines in the cells' install
    output; the wheel files the venvs hold, sized by PyPI's JSON API (found from each
    ``.dist-info/WHEEL``, not from our resolver); the receive counters of the machine's interfaces
    (machine-wide: other traffic inflates them)."""
    from .wheelsizes import unique_installed, wheel_sizes

    project = _project(ctx.dir("cold-project"), None, COLD_RELEASES, followups=0)
    where = ctx.dir("cold-disk")
    cache, envdir, results = where / "uv-cache", where / "venvs", ctx.work / "cold-results"
    remove_tree(results)
    env = _env(
        project, cache, results, {"TORCH_MATRIX_PREFETCH": "0", "TORCH_MATRIX_KEEP_VENVS": "1"}
    )
    planned = _torch_matrix("plan", "--json", env=env, cwd=project)
    if planned.returncode != 0:
        raise BenchError(f"plan failed: {planned.stdout[-2000:]}")
    plan: list[dict[str, Any]] = json.loads(planned.stdout)
    plan_wheels = {
        w["filename"]: w["size"] for c in plan for w in c.get("cost", {}).get("wheels", [])
    }
    unsized = sorted(name for name, size in plan_wheels.items() if size is None)
    rx = net_rx_bytes()
    started = time.perf_counter()
    done = run_command(
        [sys.executable, "-m", "torch_matrix", "run", "--envdir", str(envdir), "-s", "matrix"],
        env=env,
        cwd=project,
        check=False,
    )
    wall = time.perf_counter() - started
    rx = net_rx_bytes() - rx
    (ctx.work / "cold-output.txt").write_text(done.stdout)  # the whole run's output, kept
    messages = [
        json.loads(path.read_text()).get("install", {}).get("message", "")
        for path in sorted((results / "toyproj" / "cells").glob("*.json"))
    ]
    said = [item for message in messages for item in uv_downloads(message)]
    venvs = sorted(path.parent for path in envdir.glob("*/pyvenv.cfg"))
    held = wheel_sizes(unique_installed(venvs)) if venvs else {}
    planned_bytes = sum(size or 0 for size in plan_wheels.values())
    result = {
        "releases": list(COLD_RELEASES),
        "wall_s": round(wall, 1),
        "exit": done.returncode,
        "cells": len(messages),
        "plan_download_bytes": planned_bytes,
        "plan_wheels": len(plan_wheels),
        "plan_wheels_without_size": unsized,
        "uv_download_lines": len(said),
        "uv_downloaded_bytes": sum(size for _, size in said),
        "venv_wheel_files": len(held),
        "venv_wheel_bytes": sum(held.values()),
        "in_venvs_not_planned": sorted(set(held) - set(plan_wheels)),
        "planned_not_in_venvs": sorted(set(plan_wheels) - set(held)),
        "rx_bytes": rx,
        "output_tail": done.stdout[-2000:],
    }
    ctx.log(
        f"  cold plan ({', '.join(COLD_RELEASES)}): plan says {human_bytes(planned_bytes)} in "
        f"{len(plan_wheels)} files; uv's Downloading lines {human_bytes(result['uv_downloaded_bytes'])} "
        f"({len(said)} lines, files over 1 MiB); the venvs' wheel files on PyPI "
        f"{human_bytes(result['venv_wheel_bytes'])} in {len(held)} files; received {human_bytes(rx)} "
        f"(machine-wide); {wall:.0f} s, exit {done.returncode}"
    )
    remove_tree(where)
    (ctx.work / "cold.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def _loop_device(ctx: Context, size: int) -> tuple[Path, Any]:
    image = ctx.work / "small-fs.img"
    mount = ctx.dir("small-fs")
    with open(image, "wb") as handle:
        handle.truncate(size)
    run_command(["mkfs.ext4", "-q", "-F", str(image)])
    run_command(["mount", "-o", "loop", str(image), str(mount)])

    def undo() -> None:
        subprocess.run(["umount", str(mount)], check=False)
        image.unlink(missing_ok=True)

    return mount, undo


SMALL_FS_RELEASES = RELEASES[:4]  # 22.7 GB unpacked without a budget, on a 12 GB filesystem
RUNS = ("budget", "unbounded", "cold", "small_fs")
STORED_ENV = (
    "TORCH_MATRIX_BENCH_BUDGET_RUNS"  # a WORK dir whose LABEL.json runs are taken as they are
)


def one_run(ctx: Context, label: str) -> dict[str, Any]:
    """One of the figure's runs; its result is also kept in WORK/LABEL.json."""
    if label == "budget":
        project = _project(ctx.dir("budget-project"), BUDGET)
        return _run(ctx, "budget", project, ctx.dir("budget-disk"))
    if label == "unbounded":
        project = _project(ctx.dir("plain-project"), None)
        return _run(ctx, "unbounded", project, ctx.dir("plain-disk"))
    if label == "cold":
        return cold_plan(ctx)
    if label == "small_fs":
        project = _project(ctx.dir("small-project"), None, SMALL_FS_RELEASES)
        try:
            mount, undo = _loop_device(ctx, SMALL_FS_BYTES)
        except (BenchError, OSError) as error:
            result: dict[str, Any] = {"error": f"no loop device: {error}"}
            (ctx.work / "small_fs.json").write_text(json.dumps(result) + "\n")
            return result
        try:
            return _run(ctx, "small_fs", project, mount)
        finally:
            undo()
    raise SystemExit(f"benchmarks.budget: unknown run {label!r}: one of {', '.join(RUNS)}")


def measure(ctx: Context) -> dict[str, Any]:
    """Every run, one after another (about 2 hours), or those stored by separate jobs
    (``python -m benchmarks.budget WORK budget``, ... then ``$TORCH_MATRIX_BENCH_BUDGET_RUNS=WORK``)."""
    stored = os.environ.get(STORED_ENV, "").strip()
    if ctx.quick and not stored:
        raise BenchError("real wheels only: run without --quick (or give the stored runs)")
    runs: dict[str, Any] = {}
    if stored:
        for label in RUNS:
            path = Path(stored) / f"{label}.json"
            runs[label] = json.loads(path.read_text()) if path.is_file() else {"error": "not run"}
            runs[label]["stored_in"] = str(path)
    else:
        if shutil.disk_usage(ctx.work).free < 40 * 1000**3:
            raise BenchError("needs 40 GB free (two cold 6-release matrices, one after the other)")
        for label in RUNS:
            runs[label] = one_run(ctx, label)
    return summarize_runs(ctx, runs)


def _judged(run: dict[str, Any]) -> tuple[int | None, list[str]]:
    """(cells of the run's plan neither judged nor named as not fitting, those named)."""
    if "verdicts" not in run:
        return None, []
    named = [c for c, v in run["verdicts"].items() if v == NOT_FITTING]
    planned = run.get("planned_cells") or []
    unjudged = [c for c in planned if run["verdicts"].get(c) in (None, "error")]
    return len(unjudged), named


def summarize_runs(ctx: Context, runs: dict[str, Any]) -> dict[str, Any]:
    budget, plain = runs.get("budget", {}), runs.get("unbounded", {})
    cold, small = runs.get("cold", {}), runs.get("small_fs", {})
    values: dict[str, float | None] = dict.fromkeys(GOALS)
    if "verdicts" in budget and "verdicts" in plain:
        same = budget["verdicts"] == plain["verdicts"] and budget["pins"] == plain["pins"]
        values["same verdicts and pins (1 = yes)"] = 1.0 if same else 0.0
        runs["wall_ratio_budget_over_unbounded"] = ratio(budget["wall_s"], plain["wall_s"])
        runs["peak_ratio_budget_over_unbounded"] = ratio(budget["peak_bytes"], plain["peak_bytes"])
        ctx.log(
            f"  peak: budget {human_bytes(budget['peak_bytes'])} (limit {BUDGET}), unbounded "
            f"{human_bytes(plain['peak_bytes'])}; wall {budget['wall_s']} s vs "
            f"{plain['wall_s']} s; same verdicts and pins: {same}"
        )
    if "peak_bytes" in budget:
        values["budget run peak / budget"] = ratio(budget["peak_bytes"], BUDGET_BYTES)
    if "uv_downloaded_bytes" in cold:
        values["plan bytes / downloaded bytes"] = ratio(
            cold["plan_download_bytes"], cold["uv_downloaded_bytes"]
        )
        values["downloaded bytes / plan bytes"] = ratio(
            cold["uv_downloaded_bytes"], cold["plan_download_bytes"]
        )
    unjudged, named = _judged(small)
    values["small fs: cells neither judged nor named as not fitting"] = unjudged
    values["small fs: 'No space left on device' anywhere"] = small.get("no_space_mentions")
    if named:
        ctx.log(f"  small fs: named as not fitting: {', '.join(named)}")
    return {
        "releases": list(RELEASES),
        "small_fs_releases": list(SMALL_FS_RELEASES),
        "cold_releases": list(COLD_RELEASES),
        "runs": runs,
        "targets": targets_for(
            FIGURE,
            GOALS,
            values,
            {
                "plan bytes / downloaded bytes": "downloaded = the sizes uv's own Downloading lines "
                "give for a cold 2-cell run (files over 1 MiB; the venvs' wheel files on PyPI and "
                "the receive counters in the JSON)",
            },
        ),
    }


def _one_run(work: Path, label: str) -> None:
    """One of the figure's runs alone, its result in WORK/LABEL.json (real-wheel jobs time-limited apart)."""
    one_run(Context(work=work, quick=False, log=lambda line: print(line, flush=True)), label)


if __name__ == "__main__":  # by hand: python -m benchmarks.budget WORK [budget|unbounded ...]
    work = Path(sys.argv[1] if len(sys.argv) > 1 else REPO_ROOT / ".bench-budget").resolve()
    work.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) > 2:
        for label in sys.argv[2:]:
            _one_run(work, label)
    else:
        print(json.dumps(measure(Context(work=work, quick=False)), indent=1, default=str))
    os._exit(0)
