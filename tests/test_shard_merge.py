"""Sharding is lossless: 3 shards run apart and merged give the same table and pins as one run.

This is the nightly workflow on a laptop: each shard is the real ``nox -s matrix`` with
``TORCH_MATRIX_SHARD=k/3`` and its own results root (its own runner); the merge copies every
shard's ``cells/*.json`` into one directory (what ``download-artifact`` with
``merge-multiple`` does) and runs the report and the pins over it. Per-cell timings differ
between runs, so the table is compared without its time column.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.report import rows
from torch_matrix.world.results import load_results
from tests.test_e2e import build_index, cell_ids, nox_env, run_nox, write_spec

pytestmark = pytest.mark.e2e

SHARDS = 3
RUN = "e2e"  # the spec's name: results/<run>/cells/*.json


def torch_matrix(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def table_without_timings(results_dir: Path) -> dict[str, object]:
    """Everything the report shows about the cells, minus the per-run time column."""
    loaded = load_results(results_dir)
    assert loaded.problems == []
    judged = rows.judge(loaded.results)
    time_column = rows.CELL_HEADERS.index("time")
    return {
        "counts": rows.counts_line(judged),
        "rows": [row[:time_column] + row[time_column + 1 :] for row in rows.cell_rows(judged)],
        "details": rows.detail_rows(judged),
        "repros": rows.repro_lines(judged),
    }


def pins_files(env: dict[str, str], cwd: Path, results_dir: Path, out: Path) -> dict[str, str]:
    done = torch_matrix(env, cwd, "pins", str(results_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return {path.name: path.read_text() for path in sorted(out.iterdir())}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """The synthetic index and spec, plus caches shared by every run so each wheel unpacks once."""
    root = tmp_path_factory.mktemp("shard-merge")
    index = build_index(root / "index")
    return {
        "root": root,
        "spec": write_spec(root / "matrix.toml", index.url),
        "uv_cache": root / "uv-cache",
        "index_cache": root / "index-cache",
    }


def run_matrix(world: dict[str, Path], name: str, shard: str = "") -> Path:
    """One `nox -s matrix` (one runner); returns its results root. Follow-up cells are off: this
    module is about the grid's partition (a shard plans follow-ups from its own cells only, so
    its edge cells may differ from an unsharded run's)."""
    work = world["root"] / name
    work.mkdir()
    extra = {"TORCH_MATRIX_SHARD": shard} if shard else {}
    extra["TORCH_MATRIX_FOLLOWUPS"] = "0"
    env = nox_env(
        work,
        world["spec"],
        UV_CACHE_DIR=str(world["uv_cache"]),
        TORCH_MATRIX_CACHE_DIR=str(world["index_cache"]),
        **extra,
    )
    done = run_nox(work, env, "-s", "matrix")
    assert done.returncode == 0, done.stdout + done.stderr
    return work / "results"


@pytest.fixture(scope="module")
def runs(world) -> dict[str, object]:
    """One unsharded run and 3 shard runs of the same spec, each in its own results root."""
    return {
        "whole": run_matrix(world, "whole"),
        "shards": [run_matrix(world, f"shard{k}", f"{k}/{SHARDS}") for k in range(1, SHARDS + 1)],
    }


def merge(shard_roots: list[Path], merged: Path) -> Path:
    """What the nightly's merge job does: only the cell files, all into one directory."""
    (merged / RUN / "cells").mkdir(parents=True)
    for shard_root in shard_roots:
        for path in (shard_root / RUN / "cells").glob("*.json"):
            shutil.copy2(path, merged / RUN / "cells" / path.name)
    return merged


def write_plan(world: dict[str, Path], env: dict[str, str]) -> Path:
    plan = torch_matrix(env, world["root"], "plan", "--json")
    assert plan.returncode == 0, plan.stderr
    assert {cell["id"] for cell in json.loads(plan.stdout)} == set(cell_ids())
    path = world["root"] / "plan.json"
    path.write_text(plan.stdout)
    return path


def test_three_shards_merged_equal_one_unsharded_run(world, runs):
    root = world["root"]
    env = nox_env(root, world["spec"], TORCH_MATRIX_CACHE_DIR=str(world["index_cache"]))

    # The shards partition the plan: every cell ran in exactly one shard.
    per_shard = [sorted(p.stem for p in (r / RUN / "cells").glob("*.json")) for r in runs["shards"]]
    ran = [cell for cells in per_shard for cell in cells]
    assert sorted(ran) == sorted(cell_ids()) and len(ran) == len(set(ran))
    assert sum(1 for cells in per_shard if cells) >= 2, per_shard  # really split

    merged = merge(runs["shards"], root / "merged")
    # Nothing planned is missing, and no cell is an infrastructure error.
    strict = torch_matrix(
        env,
        root,
        "report",
        str(merged),
        "--plan",
        str(write_plan(world, env)),
        "--strict",
        "--out",
        str(root / "merged-report"),
    )
    assert strict.returncode == 0, strict.stdout + strict.stderr

    whole = runs["whole"] / RUN
    assert table_without_timings(merged) == table_without_timings(whole)
    assert pins_files(env, root, merged, root / "pins-merged") == pins_files(
        env, root, whole, root / "pins-whole"
    )


def test_a_lost_shard_fails_the_merge_and_names_its_cells(world, runs):
    """A runner that crashed before uploading: its planned cells are missing, --strict exits 1."""
    root = world["root"]
    env = nox_env(root, world["spec"], TORCH_MATRIX_CACHE_DIR=str(world["index_cache"]))
    arrived = [r for r in runs["shards"] if any((r / RUN / "cells").glob("*.json"))]
    lost, kept = arrived[0], arrived[1:]
    lost_cells = [p.stem for p in (lost / RUN / "cells").glob("*.json")]

    partial = merge(kept, root / "partial")
    strict = torch_matrix(
        env,
        root,
        "report",
        str(partial),
        "--plan",
        str(write_plan(world, env)),
        "--strict",
        "--out",
        str(root / "partial-report"),
    )
    assert strict.returncode == 1, strict.stdout + strict.stderr
    missing_section = strict.stdout.split("Planned but missing", 1)[1]
    for cell in lost_cells:
        assert cell in missing_section
