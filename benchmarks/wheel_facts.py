"""Figure 12: hardware verdicts read from the wheels at plan time, against installing the builds.

Releases: PyPI's torch 2.7.1, 2.8.0 and 2.13.0 (cp311, manylinux x86_64: CUDA 12.6, 12.8 and 13.0
builds). Targets: 4 GPUs of 4 architecture generations (GTX 1080 sm_61, V100 sm_70, RTX 4090 sm_89,
RTX 5090 sm_120) with 2 drivers (535.104.05, 580.82.07): 8 targets, 24 verdicts.

(a) *Read*: ``torch_matrix.world.wheelfacts.build_of`` for each release, as ``torch-matrix plan``
    reads it (range requests: the zip's end, its central directory, ``torch/version.py`` and
    ``CUDAConfig.h``), with a fresh cache each repeat: the bytes fetched (the reader's own count of
    response bytes) and the wall seconds for the three releases. Then once more with the cache
    warm (expected: 0 bytes).
(b) *Install*: each release into a fresh venv with a fresh uv cache (``uv pip install torch==X``,
    cold, from PyPI), one at a time, deleted after: the wall seconds, and the bytes of the wheel
    files the venv holds (their sizes on PyPI), then ``facts.py build`` in the venv: the build
    facts read from the installed build. Each of the 24 verdicts read from the wheel is compared
    with the verdict from the installed build. Needs about 10 GB of free disk at a time; run the
    bench under ``/work/locks/rw`` where the machine is shared.

``--quick`` skips (b): the wheels' verdicts are then compared with the facts recorded from installed
builds in ``tests/fixtures/wheel-builds`` (same releases, recorded 2026-11-24), and the install
figures are NOT MEASURED.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    REPO_ROOT,
    BenchError,
    Context,
    du_bytes,
    interpreter_path,
    remove_tree,
    run_command,
)
from .stats import ratio, summarize, targets_for

FIGURE = "12_wheel_facts"
RELEASES = ("2.7.1", "2.8.0", "2.13.0")
PYTHON = "3.11"
GPUS = ("GTX 1080", "V100", "RTX 4090", "RTX 5090")
DRIVERS = ("535.104.05", "580.82.07")
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "linux_x86_64",
)
GOALS = {
    "bytes fetched to read the three releases' verdicts": ("<=", 50.0, " MB"),
    "verdicts that differ from the installed build's": ("<=", 0.0, ""),
}  # the targets; the install/read ratios are reported beside them
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "wheel-builds"


def _read_all(cache_dir: Path) -> tuple[float, float, int, int, dict[str, dict[str, Any]]]:
    """(wall seconds, listing seconds, bytes fetched, requests, facts by release): the index
    listed (fresh: TTL 0), then the three releases' wheels read in parallel, as ``plan`` reads them."""
    from concurrent.futures import ThreadPoolExecutor

    from torch_matrix.world.index import open_index
    from torch_matrix.spec.model import IndexConfig
    from torch_matrix.world.wheelfacts import build_of

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    started = time.perf_counter()
    index = open_index(IndexConfig(), cache_dir=cache_dir, environ=environ, ttl=0)
    index.versions("torch")
    listed = time.perf_counter() - started
    with ThreadPoolExecutor(max_workers=len(RELEASES)) as pool:
        results = list(pool.map(lambda r: build_of(index, r, PYTHON, list(PLATFORMS)), RELEASES))
    found, fetched, requests = {}, 0, 0
    for release, (facts, reads, why) in zip(RELEASES, results):
        if why:
            raise BenchError(f"torch {release}: the wheel was not read: {why}")
        found[release] = facts
        fetched += sum(r.bytes_fetched for r in reads)
        requests += sum(r.requests for r in reads)
    return time.perf_counter() - started, listed, fetched, requests, found


def _verdicts(facts: dict[str, Any]) -> dict[str, str]:
    from torch_matrix.judge.hardware import judge_all
    from torch_matrix.judge.gpus import targets_of

    return {v.target: str(v.verdict) for v in judge_all(facts, targets_of(GPUS, DRIVERS))}


def _uv() -> str:
    """uv on PATH, else the one installed beside this interpreter (the project's venv has it)."""
    return shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def _install(ctx: Context, release: str) -> dict[str, Any]:
    """Cold install into a fresh venv and uv cache; the installed build's facts; all deleted after."""
    from .wheelsizes import unique_installed, wheel_sizes

    if shutil.disk_usage(ctx.work).free < 25 * 10**9 + 10 * 10**9:
        raise BenchError(f"less than 35 GB free under {ctx.work}: not installing torch {release}")
    root = ctx.dir(f"wheel-facts-{release}")
    venv, cache = root / "venv", root / "uv-cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update({"UV_CACHE_DIR": str(cache), "UV_NO_PROGRESS": "1"})
    try:
        run_command([_uv(), "venv", "-q", "--python", interpreter_path(PYTHON), str(venv)], env=env)
        started = time.perf_counter()
        run_command(
            [
                _uv(),
                "pip",
                "install",
                "-q",
                "--python",
                str(venv / "bin" / "python"),
                "--index-url",
                "https://pypi.org/simple",
                f"torch=={release}",
            ],
            env=env,
            timeout=3600,
        )
        seconds = time.perf_counter() - started
        sizes: dict[str, int] = {}
        unsized: list[str] = []
        for wheel in unique_installed([venv]):  # one at a time: a wheel PyPI cannot size is named
            try:
                sizes.update(wheel_sizes([wheel]))
            except (LookupError, OSError) as error:
                unsized.append(f"{wheel.name} {wheel.version}: {error}")
        proc = run_command(
            [
                str(venv / "bin" / "python"),
                "-I",
                str(REPO_ROOT / "torch_matrix" / "probes" / "facts.py"),
                "build",
            ],
            env=env,
        )
        facts = json.loads(proc.stdout.strip().splitlines()[-1])
        disk = du_bytes([venv, cache])
    finally:
        remove_tree(root)
    return {
        "seconds": seconds,
        "download_bytes": sum(sizes.values()),
        "unsized_wheels": unsized,
        "disk_bytes": disk,
        "facts": facts,
    }


def measure(ctx: Context) -> dict[str, Any]:
    repeats = 2 if ctx.quick else 3
    cold: list[float] = []
    listing: list[float] = []
    fetched_runs: list[int] = []
    wheel_facts: dict[str, dict[str, Any]] = {}
    for i in range(repeats):
        cache = ctx.dir(f"wheel-facts-cache-{i}")
        seconds, listed, fetched, requests, wheel_facts = _read_all(cache)
        cold.append(seconds)
        listing.append(listed)
        fetched_runs.append(fetched)
        ctx.log(
            f"  read (cold cache) run {i + 1}: {seconds:.2f} s ({listed:.2f} s of it listing torch "
            f"on PyPI, which plan does anyway), {fetched / 1e6:.2f} MB in {requests} requests"
        )
    warm_s, _l, warm_bytes, _r, _f = _read_all(cache)
    ctx.log(f"  read (warm cache): {warm_s:.3f} s, {warm_bytes} bytes")
    remove_tree(ctx.work / f"wheel-facts-cache-{repeats - 1}")
    for i in range(repeats - 1):
        remove_tree(ctx.work / f"wheel-facts-cache-{i}")

    installed: dict[str, dict[str, Any]] = {}
    source = "installed here"
    if ctx.quick:
        source = f"recorded from installed builds ({FIXTURES.relative_to(REPO_ROOT)})"
        for release in RELEASES:
            installed[release] = {
                "facts": json.loads((FIXTURES / f"torch-{release}.json").read_text())
            }
    else:
        for release in RELEASES:
            installed[release] = _install(ctx, release)
            ctx.log(
                f"  install torch {release} (cold, fresh uv cache): {installed[release]['seconds']:.1f} s, "
                f"{installed[release]['download_bytes'] / 1e9:.2f} GB of wheels"
            )

    table, differ = [], 0
    for release in RELEASES:
        from_wheel, from_install = (
            _verdicts(wheel_facts[release]),
            _verdicts(installed[release]["facts"]),
        )
        for target, verdict in from_wheel.items():
            same = from_install.get(target) == verdict
            differ += not same
            table.append(
                {
                    "torch": release,
                    "target": target,
                    "wheel": verdict,
                    "installed": from_install.get(target),
                    "same": same,
                }
            )
        ctx.log(
            f"  torch {release}: wheel {wheel_facts[release].get('torch')} CUDA {wheel_facts[release].get('torch_cuda')} "
            f"[{wheel_facts[release].get('arch_flags')}] vs installed [{installed[release]['facts'].get('arch_flags')}]: "
            f"{sum(1 for row in table if row['torch'] == release and row['same'])}/{len(from_wheel)} verdicts equal"
        )
    read_s = summarize(cold)
    install_s = sum(v["seconds"] for v in installed.values()) if not ctx.quick else None
    install_bytes = sum(v["download_bytes"] for v in installed.values()) if not ctx.quick else None
    fetched_mb = summarize(fetched_runs)["median"] / 1e6
    values = {
        "bytes fetched to read the three releases' verdicts": fetched_mb,
        "verdicts that differ from the installed build's": float(differ) if table else None,
    }
    ctx.log(
        f"  read: {fetched_mb:.2f} MB, {read_s['median']:.2f} s (median of {repeats}) | install: "
        + (
            f"{install_bytes / 1e9:.2f} GB, {install_s:.1f} s"
            if install_s is not None
            else "not measured (--quick)"
        )
        + (
            f" | bytes ratio install/read = {install_bytes / (fetched_mb * 1e6):.0f}x"
            if install_bytes
            else ""
        )
    )
    return {
        "releases": list(RELEASES),
        "hardware_targets": [f"{g} / {d}" for g in GPUS for d in DRIVERS],
        "read_seconds": read_s,
        "listing_seconds": summarize(listing),
        "read_bytes": fetched_runs,
        "warm_read": {"seconds": round(warm_s, 4), "bytes": warm_bytes},
        "install": {r: {k: v for k, v in d.items() if k != "facts"} for r, d in installed.items()},
        "install_seconds": install_s,
        "install_download_bytes": install_bytes,
        "installed_facts_from": source,
        "verdicts": table,
        "install_over_read": {
            "seconds": ratio(install_s, read_s["median"]),
            "bytes": ratio(install_bytes, fetched_mb * 1e6),
        },
        "targets": targets_for(FIGURE, GOALS, values),
    }
