"""Figure 3: disk -- N cells' venvs plus uv's cache against the cache alone.

uv links each venv's files to the single unpacked copy in its cache (hardlinks on ext4),
so N venvs should cost about one copy. ``du`` counts a hardlinked file once when all
paths are given together, which is how "venvs + cache" is measured; "N full copies"
(what pip's per-venv installs take) is the sum of each venv measured alone.

Second part: the cache on a filesystem that cannot hardlink to the venvs (tmpfs at
``/dev/shm``, venvs on the work disk). uv then copies every file into every venv, with
only a warning in its output; ``link_mode_warning`` is the check the tool should run
before a matrix (proposed for ``torch_matrix.world.environment``), and is measured here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from torch_matrix.world.environment import link_mode_warning

from . import cells
from .common import BenchError, Context, du_bytes, filesystem_type, remove_tree, run_command
from .stats import human_bytes, ratio, summarize, targets_for

FIGURE = "3_disk"
GOALS = {"(5 venvs + cache) / cache": ("<=", 1.1, "x")}
N_VENVS = 5
TMPFS = Path("/dev/shm")
LINK_WORDS = re.compile(r"hardlink|link mode|link-mode|full copy", re.IGNORECASE)


def _linked_fraction(venv: Path) -> float:
    total = linked = 0
    for root, _, files in os.walk(venv):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            total += 1
            linked += os.stat(path).st_nlink > 1
    return linked / total if total else 0.0


def measure_same_filesystem(ctx: Context) -> dict[str, Any]:
    cache, venvs = ctx.facts.get("matrix_cache"), ctx.facts.get("matrix_venvs")
    if not cache or not venvs:  # figure 2 did not run: build the matrix into a fresh cache here
        from .cold_matrix import install_matrix

        cache = ctx.work / "disk-cache"
        remove_tree(cache)
        venvs, _ = install_matrix(ctx, cache, ctx.dir("disk-venvs"))
    venvs = venvs[:N_VENVS]
    samples = [(du_bytes([cache]), du_bytes([cache, *venvs])) for _ in range(3)]
    cache_bytes = summarize(s[0] for s in samples)["median"]
    together = summarize(s[1] for s in samples)["median"]
    each = [du_bytes([v]) for v in venvs]
    linked = ratio(together, cache_bytes)
    copies = ratio(cache_bytes + sum(each), cache_bytes)
    ctx.log(
        f"  cache {human_bytes(cache_bytes)}; cache + {len(venvs)} venvs {human_bytes(together)} "
        f"-> {linked:.3f}x; as {len(venvs)} full copies {copies:.2f}x"
    )
    return {
        "n_venvs": len(venvs),
        "cache_bytes": cache_bytes,
        "cache_plus_venvs_bytes": together,
        "venv_bytes_each_alone": each,
        "linked_ratio": linked,
        "full_copies_ratio": copies,
        "hardlinked_file_fraction": [round(_linked_fraction(v), 4) for v in venvs],
        "filesystem": filesystem_type(cache),
        "du_repeats": len(samples),
    }


def default_uv_cache() -> Path:
    return Path(run_command(["uv", "cache", "dir"]).stdout.strip())


def measure_cross_filesystem(ctx: Context) -> dict[str, Any]:
    """Figure 1's cell installed twice with uv's cache on tmpfs, and twice with the usual cache.

    The tmpfs cache starts empty (it downloads the cell once, not counted); the usual cache
    (same filesystem as the venvs) is already warm from figure 1. Measured: time to a verified venv and
    the bytes the three venvs add beside their cache.
    """
    if not TMPFS.is_dir():
        raise BenchError(f"{TMPFS} not available")
    cell = cells.warm_cell(ctx.quick)
    index = cells.index_config()
    tmp_cache = TMPFS / f"torch-matrix-bench-cache-{os.getpid()}"
    venv_root = ctx.dir("xfs-venvs")
    warning = link_mode_warning(tmp_cache, venv_root)
    same_fs_cache = default_uv_cache()
    result: dict[str, Any] = {
        "cell": cell.id,
        "tmpfs_cache_fs": filesystem_type(TMPFS),
        "venv_fs": filesystem_type(venv_root),
        "usual_cache": str(same_fs_cache),
        "usual_cache_fs": filesystem_type(same_fs_cache),
        "tool_warning": warning,
        "tool_warning_for_usual_cache": link_mode_warning(same_fs_cache, venv_root),
    }
    try:
        for label, cache in (("tmpfs_cache", tmp_cache), ("usual_cache", same_fs_cache)):
            env = {"UV_CACHE_DIR": str(cache)}
            cells.run_our_cell(cell, venv_root / f"{label}-fill", index, env=env)  # cache warm
            installs, messages, venvs = [], [], []
            for i in range(3):
                venv = venv_root / f"{label}-{i}"
                run = cells.run_our_cell(cell, venv, index, env=env)
                installs.append(run["total_s"])  # cell start to verified venv
                messages.append(run["message"])
                venvs.append(venv)
            cache_bytes = du_bytes([cache])
            added = du_bytes([cache, *venvs]) - cache_bytes  # 0 for a file linked to the cache
            uv_said = sorted(
                {
                    line.strip()
                    for m in messages
                    for line in m.splitlines()
                    if LINK_WORDS.search(line)
                },
                key=lambda line: not line.lower().startswith("warning"),
            )
            result[label] = {
                "ready_venv_s": summarize(installs),
                "n_venvs": len(venvs),
                "bytes_added_by_venvs": added,
                "cache_bytes": cache_bytes,
                "uv_output_about_linking": uv_said[:2],
            }
            ctx.log(
                f"  {label}: cell start to verified venv {result[label]['ready_venv_s']['median']:.2f} s (median of 3); "
                f"3 venvs add {human_bytes(added)} beside the cache; uv said: "
                f"{uv_said[:1] or 'nothing about linking'}"
            )
            for venv in venvs + [venv_root / f"{label}-fill"]:
                remove_tree(venv)
        result["ready_venv_slowdown"] = ratio(
            result["tmpfs_cache"]["ready_venv_s"]["median"],
            result["usual_cache"]["ready_venv_s"]["median"],
        )
        ctx.log(f"  tool warning: {warning}")
        return result
    finally:
        remove_tree(tmp_cache)
        remove_tree(venv_root)


def measure(ctx: Context) -> dict[str, Any]:
    same = measure_same_filesystem(ctx)
    for key in ("matrix_cache", "matrix_venvs"):
        ctx.facts.pop(key, None)
    remove_tree(ctx.work / "cold-cache")
    remove_tree(ctx.work / "cold-venvs")
    remove_tree(ctx.work / "disk-cache")
    remove_tree(ctx.work / "disk-venvs")
    try:
        cross = measure_cross_filesystem(ctx)
    except (BenchError, OSError) as error:
        cross = {"error": str(error)}
    return {
        "same_filesystem": same,
        "cache_on_other_filesystem": cross,
        "targets": targets_for(
            FIGURE,
            GOALS,
            {
                "(5 venvs + cache) / cache": same["linked_ratio"]
                if same["n_venvs"] >= N_VENVS
                else None
            },
            {
                "(5 venvs + cache) / cache": f"du of all paths together, "
                f"median of {same['du_repeats']}; {same['n_venvs']} venvs"
            },
        ),
    }
