"""Figure 6: parallel cells -- ``nox -j N -s matrix`` against ``nox -s matrix``, same results.

Real cells (torch from PyPI with its paired torchvision, numpy as a second axis, the
install_sanity probe: a fresh ``import torch, torchvision`` and one compiled op per cell),
run through the project's noxfile exactly as a user runs them, warm uv cache, a fresh
results directory per run. N = the number of CPUs (capped at the number of cells). The
sequential run also runs the ``report`` session the cells notify (nox does not notify
under ``--parallel``); it is part of what a user waits for. Results must be identical:
per cell, the install status, the resolved versions, each probe's status and the verdict.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .common import BenchError, Context, run_nox_matrix
from .stats import ratio, summarize, targets_for

FIGURE = "6_parallel"
# The issue asks for the speed-up with no number to meet; identical results are a must.
GOALS = {"parallel results identical to sequential (1 = yes)": (">=", 1.0, "")}


def spec_text(quick: bool) -> str:
    torch = '["2.4.1"]' if quick else '["2.4.1", "2.5.1"]'
    return (
        f'name = "benchpar"\npython = ["3.11"]\ntorch = {torch}\ntorchvision = "paired"\n\n'
        '[extras]\nnumpy = ["<2", ">=2"]\n\n[probes]\nrun = ["install_sanity"]\n'
        'required = ["install_sanity"]\n'
    )


def outcome_fingerprint(results_root: Path) -> dict[str, Any]:
    """What must not depend on scheduling: per cell, install, versions, probe statuses, verdict."""
    from torch_matrix.world.results import load_results
    from torch_matrix.judge.verdict import verdict_of

    loaded = load_results(results_root)
    return {
        r.cell.id: {
            "install": r.install.status,
            "resolved": dict(sorted(r.install.resolved.items())),
            "probes": {p.name: p.status for p in r.probes},
            "verdict": verdict_of(r).kind,
        }
        for r in loaded.results
    }


def run_matrix(
    ctx: Context, spec: Path, label: str, jobs: int | None
) -> tuple[float, dict[str, Any]]:
    results = ctx.dir(f"parallel-results-{label}")
    env = {
        "TORCH_MATRIX_SPEC": str(spec),
        "TORCH_MATRIX_RESULTS": str(results),
        "TORCH_MATRIX_REDO": "1",
    }
    seconds, proc = run_nox_matrix(
        ctx.work / "parallel-envs", env, *(["-j", str(jobs)] if jobs else [])
    )
    outcome = outcome_fingerprint(results)
    if not outcome:
        raise BenchError(
            f"{label}: no cell results (nox exited {proc.returncode}): {proc.stdout[-1500:]}"
        )
    return seconds, outcome


def measure(ctx: Context) -> dict[str, Any]:
    repeats = 1 if ctx.quick else 3
    spec = ctx.dir("parallel") / "matrix.toml"
    spec.write_text(spec_text(ctx.quick))
    cells = 2 if ctx.quick else 4
    jobs = max(1, min(os.cpu_count() or 1, cells))
    ctx.log("  warm-up run (fills uv's cache for these cells; not counted)")
    _, reference = run_matrix(ctx, spec, "warmup", None)
    sequential, parallel, identical = [], [], []
    for i in range(repeats):
        seconds, outcome = run_matrix(ctx, spec, f"seq{i}", None)
        sequential.append(seconds)
        identical.append(outcome == reference)
        seconds, outcome = run_matrix(ctx, spec, f"par{i}", jobs)
        parallel.append(seconds)
        identical.append(outcome == reference)
        ctx.log(
            f"  run {i + 1}/{repeats}: sequential {sequential[-1]:.1f} s, -j {jobs} {parallel[-1]:.1f} s, "
            f"identical results: {identical[-2] and identical[-1]}"
        )
    seq, par = summarize(sequential), summarize(parallel)
    speedup = ratio(seq["median"], par["median"])
    ctx.log(
        f"  speed-up {speedup:.2f}x with {jobs} jobs on {os.cpu_count()} CPUs; "
        f"all results identical: {all(identical)}"
    )
    return {
        "cells": sorted(reference),
        "verdicts": {k: v["verdict"] for k, v in reference.items()},
        "jobs": jobs,
        "cpu_count": os.cpu_count(),
        "repeats": repeats,
        "sequential_s": seq,
        "parallel_s": par,
        "speedup": speedup,
        "results_identical": all(identical),
        "targets": targets_for(
            FIGURE,
            GOALS,
            {"parallel results identical to sequential (1 = yes)": 1.0 if all(identical) else 0.0},
            {
                "parallel results identical to sequential (1 = yes)": f"speed-up {speedup:.2f}x with -j {jobs} (no target)"
            },
        ),
    }
