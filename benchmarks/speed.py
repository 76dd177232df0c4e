"""Figure 8: speed of a real run (issue 24): downloads hidden behind probes, no work done twice.

(a) **Cold matrix, full suite.** The 5 cells of figures 2-3 (torch 2.4.1 / 2.5.1 x numpy,
    paired torchvision, Python 3.11), every standard probe, run through the project's noxfile
    exactly as a user runs ``nox -s matrix``: once from a *fresh* ``UV_CACHE_DIR`` (cold), then
    again with that cache (warm: fresh venvs, fresh results). Each run has its own fresh
    ``TORCHINDUCTOR_CACHE_DIR`` (torch.compile's kernels would otherwise carry over from cold to
    warm through /tmp): the two differ by the downloads alone. Figures: cold / warm (target
    <= 1.25), cold / (unique wheel bytes / bandwidth + warm), and the old figure beside them,
    cold install / (unique bytes / bandwidth), measured as figure 2 does: the same 5 cells'
    installs alone, one after another, from a fresh cache (every download in series: what a cold
    run without prefetch pays on top of its probes; a minute instead of a whole prefetch-off
    matrix). Per run, the phases summed (install, verify, probes) and the load average.
(b) **The README's default matrix, warm.** ``nox -s matrix`` with no spec (the built-in default
    matrix), twice side by side: through ``benchmarks/old_rule_noxfile.py`` (the old rule: every
    failing probe rerun twice; ``benchmarks/old_rerun_rule.py``) and the shipped noxfile (the new
    rule: rerun only what can change the answer). Wall time of each and the seconds each cell's
    probe phase saved.

Real wheels, several GB for (a): run it late, once, on a quiet machine. Both parts need real
torch cells, so ``--quick`` skips them (NOT MEASURED).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import BenchError, Context, remove_tree, run_nox_matrix
from .machine import load_average
from .stats import human_bytes, ratio, targets_for

FIGURE = "8_speed"
GOALS = {"cold / warm wall, 5 cells, full suite": ("<=", 1.25, "x")}
OLD_RULE_NOXFILE = Path(__file__).resolve().parent / "old_rule_noxfile.py"  # the old rerun rule
BUDGET_ENV = (
    "TORCH_MATRIX_PREFETCH_FREE_GB"  # torch_matrix.run.prefetch: free space a fetch must leave
)
# The fresh cache of the 5 cells takes ~9 GiB on disk (figure 3; one fresh cache at a time): the cold
# part needs this much free before it starts, and lets prefetch run down to BENCH_BUDGET_GB free.
NEEDED_FREE_GB = 15.0
BENCH_BUDGET_GB = "4"


def cold_spec() -> str:
    """The 5 cells of ``benchmarks.cells.matrix_cells`` as a spec (the full standard suite)."""
    return (
        'name = "benchcold"\npython = ["3.11"]\ntorch = ["2.4.1", "2.5.1"]\ntorchvision = "paired"\n\n'
        '[extras]\nnumpy = ["1.26.4", "2.0.2", "2.1.3"]\n\n'
        '[[exclude]]\ntorch = "2.4.1"\nnumpy = "==2.1.3"\n'
    )


def run_nox(
    ctx: Context, label: str, env: dict[str, str], noxfile: Path | None = None
) -> dict[str, Any]:
    """``nox -s matrix`` through the project's noxfile (or ``noxfile``), fresh results and venvs;
    wall time and per-cell timings."""
    results = ctx.dir(f"speed-results-{label}")
    envdir = ctx.dir(f"speed-envs-{label}")
    wall, proc = run_nox_matrix(
        envdir,
        {"TORCH_MATRIX_RESULTS": str(results), "TORCH_MATRIX_REDO": "1", **env},
        noxfile=noxfile,
    )
    cells = cell_timings(results)
    if not cells:
        raise BenchError(
            f"{label}: no cell results (nox exited {proc.returncode}): {proc.stdout[-1500:]}"
        )
    venvs = sorted(p for p in envdir.iterdir() if (p / "pyvenv.cfg").is_file())
    return {
        "wall_s": wall,
        "cells": cells,
        "venvs": [str(v) for v in venvs],
        "nox_exit": proc.returncode,
        "prefetch_lines": [line for line in proc.stdout.splitlines() if "prefetch" in line][:20],
    }


def cell_timings(results_root: Path) -> dict[str, dict[str, Any]]:
    """Per cell: verdict, install and probe seconds, and how many probe runs the cell paid for."""
    from torch_matrix.judge.verdict import verdict_of
    from torch_matrix.world.results import load_results

    loaded = load_results(results_root)
    return {
        r.cell.id: {
            "verdict": str(verdict_of(r).kind),
            "probes_s": r.timings.get("probes"),
            "install_s": r.timings.get("resolve+install"),
            "verify_s": r.timings.get("verify"),
            "total_s": r.timings.get("total"),
            "probe_runs": sum(int(p.evidence.get("runs", 1)) for p in r.probes),
        }
        for r in loaded.results
    }


def planned_wheels(spec: Path, env: dict[str, str], cwd: Path) -> dict[str, int | None]:
    """filename -> bytes of every wheel file ``torch-matrix plan --json`` says the spec's cells
    install (None: the index gives no size)."""
    import json
    import sys

    from .common import run_command

    planned = run_command(
        [sys.executable, "-m", "torch_matrix", "plan", "--json"],
        env={**env, "TORCH_MATRIX_SPEC": str(spec)},
        cwd=cwd,
        check=False,
    )
    if planned.returncode != 0:
        raise BenchError(f"plan --json exited {planned.returncode}: {planned.stdout[-1500:]}")
    try:
        cells = json.loads(planned.stdout)
    except ValueError as error:
        raise BenchError(f"plan --json printed no JSON ({error}): {planned.stdout[-1500:]}")
    return {
        w["filename"]: w.get("size") for c in cells for w in c.get("cost", {}).get("wheels", [])
    }


def run_wheels(planned: dict[str, int | None], cache: Path) -> dict[str, Any]:
    """The run's unique wheel files: the plan's, and any other the run's cache holds (sized by
    PyPI's JSON API); read before the cache is deleted. A run deletes each cell's venv, so the
    venvs cannot say (issue 46)."""
    from .wheelsizes import (
        cached_wheel_files,
        file_sizes,
        is_wheel_name,
        not_planned,
        unique_wheel_sizes,
    )

    cached = cached_wheel_files(cache) if cache.is_dir() else set()
    # uv names an entry of a long tag set by a digest: no file name to size it by (the plan's
    # file of that project and version is the same one, counted there).
    fetched = {name for name in cached if is_wheel_name(name)}
    extra = not_planned(planned, fetched)
    try:
        looked_up = file_sizes(extra) if extra else {}
        lookup_error = ""
    except OSError as error:  # the index unreachable: those files stay unsized, said so
        looked_up, lookup_error = {}, f"PyPI JSON API: {error}"
    sizes, unsized = unique_wheel_sizes(planned, fetched, looked_up)
    return {
        "sizes": sizes,
        "unsized": unsized,
        "planned_files": len(planned),
        "cached_files": len(cached),
        "cached_not_planned": extra,
        "cached_by_digest": sorted(cached - fetched),
        "lookup_error": lookup_error,
    }


def cold_figures(
    cold_s: float,
    warm_s: float,
    unique_bytes: int,
    bandwidth: float,
    serial_s: float | None,
    installs: dict[str, float],
) -> dict[str, Any]:
    """The cold figure's ratios from what was measured (pure); a side that is missing (no wheel
    bytes, no serial install) gives None, never a division by zero."""
    download_s = unique_bytes / bandwidth if unique_bytes and bandwidth else None
    return {
        "download_at_link_speed_s": download_s,
        "cold_over_warm": ratio(cold_s, warm_s),
        "cold_over_bytes_and_warm": ratio(cold_s, download_s + warm_s) if download_s else None,
        "old_figure_cold_install_over_bytes": ratio(serial_s, download_s),
        "cold_run_install_over_bytes": ratio(installs.get("cold"), download_s),
        "share_of_serial_downloads_hidden": 1 - (cold_s - warm_s) / serial_s if serial_s else None,
    }


def fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    """A figure for a log line; ``n/a`` where it could not be taken."""
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def cold_lines(
    figures: dict[str, Any],
    wheels: dict[str, Any],
    cold_s: float,
    warm_s: float,
    serial_s: float | None,
    installs: dict[str, float],
) -> list[str]:
    """The cold figure's log lines (pure)."""
    sizes = wheels["sizes"]
    unsized = f"; no size for {', '.join(wheels['unsized'])}" if wheels["unsized"] else ""
    return [
        f"  unique wheel bytes {human_bytes(sum(sizes.values()))} in {len(sizes)} files (the plan's "
        f"{wheels['planned_files']}; uv's cache held {wheels['cached_files']}, "
        f"{len(wheels['cached_not_planned'])} not in the plan{unsized}) = "
        f"{fmt(figures['download_at_link_speed_s'], '.1f', ' s')} at link speed; cold / warm "
        f"{fmt(figures['cold_over_warm'])}x; cold / (bytes / bandwidth + warm) "
        f"{fmt(figures['cold_over_bytes_and_warm'])}x",
        f"  old figure, cold install / (bytes / bandwidth): "
        f"{fmt(figures['old_figure_cold_install_over_bytes'])}x in series (figure 2's path); the "
        f"cold run's install phases {installs.get('cold', 0.0):.1f} s = "
        f"{fmt(figures['cold_run_install_over_bytes'])}x (warm {installs.get('warm', 0.0):.1f} s); "
        f"the cold run paid {cold_s - warm_s:.1f} s more than the warm one for downloads that cost "
        f"{fmt(serial_s, '.1f', ' s')} in series",
    ]


def measure_cold(ctx: Context) -> dict[str, Any]:
    from .cold_matrix import PROBE_FILES, download_once, install_matrix, probe_file_url

    import shutil

    free_gb = shutil.disk_usage(ctx.work).free / 1e9
    if free_gb < NEEDED_FREE_GB:
        raise BenchError(
            f"{free_gb:.1f} GB free on the work disk, the fresh cache needs ~10 GB and this figure "
            f"starts only with {NEEDED_FREE_GB:g} GB free"
        )
    spec = ctx.dir("speed") / "matrix.toml"
    spec.write_text(cold_spec())
    cache = ctx.work / "speed-cold-cache"
    remove_tree(cache)
    # The unique wheel bytes, from the plan (read before the runs: the index's metadata only).
    planned = planned_wheels(spec, {"UV_CACHE_DIR": str(cache)}, spec.parent)
    remove_tree(cache)
    url, size = probe_file_url(*PROBE_FILES[ctx.quick])
    bandwidth = sorted(download_once(url, size)["bandwidth_Bps"] for _ in range(3))[1]
    ctx.log(
        f"  bandwidth {human_bytes(bandwidth)}/s (median of 3 downloads of {human_bytes(size)})"
    )
    runs: dict[str, dict[str, Any]] = {}
    for label in ("cold", "warm"):  # the same cache: fresh for cold, as cold left it for warm
        settle()
        load = load_average()
        # Each run its own torch.compile cache (by default /tmp's, shared): the warm run must not
        # find the kernels the cold run compiled, only the wheels it downloaded.
        env = {
            "TORCH_MATRIX_SPEC": str(spec),
            "UV_CACHE_DIR": str(cache),
            BUDGET_ENV: BENCH_BUDGET_GB,
            "TORCHINDUCTOR_CACHE_DIR": str(ctx.dir(f"speed-inductor-{label}")),
        }
        runs[label] = run_nox(ctx, label, env)
        runs[label]["load_average_before"] = load
        ctx.log(
            f"  {label} ({'fresh UV_CACHE_DIR' if label == 'cold' else 'same cache, fresh venvs'}): "
            f"{len(runs[label]['cells'])} cells in {runs[label]['wall_s']:.1f} s (load {load}); "
            f"{phase_line(runs[label]['cells'])}"
        )
    wheels = run_wheels(planned, cache)
    unique_bytes = sum(wheels["sizes"].values())
    for label in ("cold", "warm"):
        remove_tree(ctx.work / f"speed-envs-{label}")
        remove_tree(ctx.work / f"speed-inductor-{label}")
    remove_tree(cache)
    # The old figure (figure 2's path), after the timed runs so its 9 GB of writes do not load them:
    # the 5 cells' installs alone, one after another, from a fresh cache: every download in series,
    # as a cold run without prefetch pays them on top of its probes.
    settle()
    load = load_average()
    serial_venvs, serial_s = install_matrix(ctx, cache, ctx.dir("speed-serial-venvs"))
    remove_tree(ctx.work / "speed-serial-venvs")
    remove_tree(cache)
    ctx.log(
        f"  downloads in series (figure 2's path: {len(serial_venvs)} cells' installs alone, fresh "
        f"UV_CACHE_DIR): {serial_s:.1f} s (load {load})"
    )
    cold, warm = runs["cold"]["wall_s"], runs["warm"]["wall_s"]
    installs = {
        label: sum(c["install_s"] or 0.0 for c in run["cells"].values())
        for label, run in runs.items()
    }
    figures = cold_figures(cold, warm, unique_bytes, bandwidth, serial_s, installs)
    for line in cold_lines(figures, wheels, cold, warm, serial_s, installs):
        ctx.log(line)
    return {
        "runs": runs,
        "bandwidth_Bps": bandwidth,
        "unique_wheel_bytes": unique_bytes,
        "unique_wheel_files": len(wheels["sizes"]),
        "wheels": wheels,
        "install_phases_s": installs,
        "serial_install_s": serial_s,
        **figures,
    }


def settle() -> None:
    """Before a timed run: what the last one wrote (a 9 GB cache) or deleted goes to disk first,
    so its write-back does not slow the next run down."""
    import os

    os.sync()


def phase_line(cells: dict[str, dict[str, Any]]) -> str:
    """The phases of a run's cells, summed: where its time went."""
    sums = {
        name: sum(c.get(key) or 0.0 for c in cells.values())
        for name, key in (
            ("install", "install_s"),
            ("verify", "verify_s"),
            ("probes", "probes_s"),
            ("cells", "total_s"),
        )
    }
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in sums.items())


def measure_default(ctx: Context, repeats: int) -> dict[str, Any]:
    """The README's default matrix (no spec), warm: the old rerun rule and the new one, interleaved."""
    walls: dict[str, list[float]] = {"old": [], "new": []}
    cells: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for i in range(repeats):
        for label, noxfile in (("old", OLD_RULE_NOXFILE), ("new", None)):
            # No spec: the repository root has no matrix.toml, so nox plans the built-in default matrix.
            # Each run its own torch.compile cache: the second must not find the kernels the first compiled.
            inductor = ctx.dir(f"speed-inductor-default-{label}-{i}")
            env = {"TORCH_MATRIX_SPEC": "", "TORCHINDUCTOR_CACHE_DIR": str(inductor)}
            settle()
            load = load_average()
            run = run_nox(ctx, f"default-{label}-{i}", env, noxfile)
            remove_tree(inductor)
            remove_tree(ctx.work / f"speed-envs-default-{label}-{i}")
            walls[label].append(run["wall_s"])
            cells[label].append(run["cells"])
            ctx.log(
                f"  default matrix, {label} rerun rule, run {i + 1}/{repeats}: {len(run['cells'])} cells "
                f"in {run['wall_s']:.1f} s ({sum(c['probe_runs'] for c in run['cells'].values())} probe runs; "
                f"load {load})"
            )
    saved = {}
    for cell_id in cells["new"][-1]:
        before = [
            c[cell_id]["probes_s"]
            for c in cells["old"]
            if c.get(cell_id, {}).get("probes_s") is not None
        ]
        after = [
            c[cell_id]["probes_s"]
            for c in cells["new"]
            if c.get(cell_id, {}).get("probes_s") is not None
        ]
        if before and after:
            saved[cell_id] = round(
                sorted(before)[len(before) // 2] - sorted(after)[len(after) // 2], 2
            )
    old, new = sorted(walls["old"])[repeats // 2], sorted(walls["new"])[repeats // 2]
    ctx.log(
        f"  default matrix warm: old rule {old:.1f} s, new rule {new:.1f} s ({ratio(new, old):.2f}x); "
        f"probe seconds saved per cell: {saved}"
    )
    return {
        "repeats": repeats,
        "wall_s": walls,
        "cells": cells,
        "old_wall_s": old,
        "new_wall_s": new,
        "new_over_old": ratio(new, old),
        "probe_seconds_saved_per_cell": saved,
    }


def measure(ctx: Context) -> dict[str, Any]:
    result: dict[str, Any] = {}
    values: dict[str, float | None] = {}
    if ctx.quick:
        ctx.log("  --quick: both parts install real torch cells; NOT MEASURED")
        result["skipped"] = "--quick: the cold matrix and the default matrix install real torch"
        result["targets"] = targets_for(FIGURE, GOALS, values, {})
        return result
    try:
        result["cold"] = cold = measure_cold(ctx)
        values["cold / warm wall, 5 cells, full suite"] = cold["cold_over_warm"]
    except BenchError as error:
        result["cold"] = {"error": str(error)}
        ctx.log(f"  cold matrix NOT MEASURED: {error}")
    try:
        result["default"] = measure_default(ctx, 1)
    except BenchError as error:
        result["default"] = {"error": str(error)}
        ctx.log(f"  default matrix NOT MEASURED: {error}")
    cold = result.get("cold", {})
    note = (
        f"cold / (unique bytes / bandwidth + warm) = {fmt(cold['cold_over_bytes_and_warm'])}x; old "
        f"figure, cold install / (bytes / bandwidth) = {fmt(cold['old_figure_cold_install_over_bytes'])}x"
        if "cold_over_warm" in cold
        else ""
    )
    result["targets"] = targets_for(
        FIGURE, GOALS, values, {"cold / warm wall, 5 cells, full suite": note}
    )
    return result
