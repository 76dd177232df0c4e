"""Figure 2: the cold matrix -- every wheel fetched once, at the speed of the link.

Method. Each repeat installs the matrix's cells through our cell path (nox uv venv +
``torch_matrix.world.environment.install`` + ``verify``) one after another, into a *fresh* uv cache on
the venvs' filesystem. Bytes downloaded = growth of the receive counters of every
non-loopback interface (``/proc/net/dev``) around the repeat, divided by a calibration
factor measured in the same run: the counter growth for one download of a file of known
size (so a single fetch of N bytes counts as N). The denominator is the unique bytes of
the wheel files the cells hold (``.dist-info`` of every venv -> the exact files on PyPI,
sizes from the PyPI JSON API). The counter is machine-wide, so other traffic during the
run inflates the ratio: the raw numbers and the machine's load are printed too.

Bandwidth = size / time of that single large download (median of several). Wall time
is compared with unique bytes / bandwidth.
"""

from __future__ import annotations

import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from . import cells
from .common import BenchError, Context, net_rx_bytes, remove_tree, run_command
from .stats import human_bytes, ratio, summarize, targets_for
from .wheelsizes import unique_installed, wheel_sizes

FIGURE = "2_cold_matrix"
GOALS = {"downloaded / unique wheel bytes": ("<=", 1.05, "x")}
# One large file for the bandwidth (torch 2.5.1, cp311, ~906 MB), a small one for --quick.
PROBE_FILES = {
    False: ("torch", "2.5.1", "cp311-cp311-manylinux1_x86_64"),
    True: ("numpy", "2.1.3", "cp311-cp311-manylinux_2_17_x86_64"),
}


def probe_file_url(project: str, version: str, tag_fragment: str) -> tuple[str, int]:
    import json

    api = f"https://pypi.org/pypi/{project}/json"
    with urllib.request.urlopen(api, timeout=60) as response:
        files = json.load(response)["releases"][version]
    for item in files:
        if tag_fragment in item["filename"]:
            return urllib.parse.urljoin(api, item["url"]), int(item["size"])
    raise BenchError(f"no {project} {version} file matching {tag_fragment}")


def download_once(url: str, size: int) -> dict[str, float]:
    """One plain download to nowhere: seconds, bytes and the receive-counter growth."""
    curl = shutil.which("curl")
    rx0, start = net_rx_bytes(), time.perf_counter()
    if curl:
        run_command([curl, "-sS", "-L", "-o", "/dev/null", url])
    else:  # pragma: no cover - curl is everywhere we run
        with urllib.request.urlopen(url, timeout=600) as response:
            while response.read(1 << 20):
                pass
    seconds, rx = time.perf_counter() - start, net_rx_bytes() - rx0
    return {
        "seconds": seconds,
        "bytes": size,
        "rx_bytes": rx,
        "bandwidth_Bps": size / seconds,
        "rx_over_size": rx / size,
    }


def install_matrix(ctx: Context, cache: Path, venv_root: Path) -> tuple[list[Path], float]:
    """All cells, sequentially, through our cell path with ``cache`` as uv's cache; (venvs, wall)."""
    index = cells.index_config()
    venvs = []
    start = time.perf_counter()
    for cell in cells.matrix_cells(ctx.quick):
        venv = venv_root / cell.id
        cells.run_our_cell(cell, venv, index, env={"UV_CACHE_DIR": str(cache)})
        venvs.append(venv)
    return venvs, time.perf_counter() - start


def measure(ctx: Context) -> dict[str, Any]:
    repeats = 2 if ctx.quick else 3
    url, size = probe_file_url(*PROBE_FILES[ctx.quick])
    downloads = [download_once(url, size) for _ in range(3)]
    bandwidth = summarize(d["bandwidth_Bps"] for d in downloads)["median"]
    calibration = summarize(d["rx_over_size"] for d in downloads)["median"]
    ctx.log(
        f"  bandwidth {human_bytes(bandwidth)}/s (median of 3 downloads of {human_bytes(size)}), "
        f"counter calibration {calibration:.4f} rx bytes per payload byte"
    )

    rx0 = net_rx_bytes()
    time.sleep(5)
    background = (net_rx_bytes() - rx0) / 5
    ctx.log(f"  background traffic before the runs: {human_bytes(background)}/s (not subtracted)")

    runs = []
    venvs: list[Path] = []
    cache = ctx.work / "cold-cache"
    for i in range(repeats):
        remove_tree(cache)
        venv_root = ctx.dir("cold-venvs")
        rx0 = net_rx_bytes()
        venvs, wall = install_matrix(ctx, cache, venv_root)
        rx = net_rx_bytes() - rx0
        runs.append({"wall_s": wall, "rx_bytes": rx})
        ctx.log(
            f"  repeat {i + 1}/{repeats}: {len(venvs)} cells in {wall:.1f} s, received {human_bytes(rx)}"
        )

    wheels = unique_installed(venvs)
    sizes = wheel_sizes(wheels)
    unique_bytes = sum(sizes.values())
    rx_median = summarize(r["rx_bytes"] for r in runs)["median"]
    wall = summarize(r["wall_s"] for r in runs)
    downloaded = rx_median / calibration
    ideal_s = unique_bytes / bandwidth
    download_ratio = ratio(downloaded, unique_bytes)
    ctx.log(
        f"  unique wheel bytes {human_bytes(unique_bytes)} in {len(sizes)} files; "
        f"downloaded {human_bytes(downloaded)} -> {download_ratio:.3f}x; "
        f"wall {wall['median']:.1f} s vs {ideal_s:.1f} s at link speed"
    )
    # Figure 3 measures disk on what the last repeat left: this cache and these venvs.
    ctx.facts["matrix_cache"] = cache
    ctx.facts["matrix_venvs"] = venvs
    return {
        "cells": cells.cell_ids(cells.matrix_cells(ctx.quick)),
        "repeats": repeats,
        "bandwidth_Bps": bandwidth,
        "bandwidth_downloads": downloads,
        "counter_calibration": calibration,
        "background_rx_Bps": background,
        "unique_wheel_files": len(sizes),
        "unique_wheel_bytes": unique_bytes,
        "largest_wheels": dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:8]),
        "rx_bytes": summarize(r["rx_bytes"] for r in runs),
        "downloaded_bytes": downloaded,
        "downloaded_over_unique": download_ratio,
        "raw_rx_over_unique": ratio(rx_median, unique_bytes),
        "cold_wall_s": wall,
        "ideal_download_s": ideal_s,
        "wall_over_ideal": ratio(wall["median"], ideal_s),
        "targets": targets_for(
            FIGURE,
            GOALS,
            {"downloaded / unique wheel bytes": download_ratio},
            {
                "downloaded / unique wheel bytes": f"median of {repeats} cold runs of "
                f"{len(venvs)} cells; /proc/net/dev, calibrated"
            },
        ),
    }
