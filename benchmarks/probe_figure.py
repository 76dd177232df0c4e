"""Figure 4: the probe suite per cell, against its floor and a naive runner.

The measurement itself is ``benchmarks.probe_suite.measure_probe_suite`` (owned by the
probes' author): floor = one fresh ``import torch, torchvision`` + the probes' own measured
work; suite = ``python -m torch_matrix.probes`` as a cell runs it; naive = one fresh interpreter per
probe. It runs in figure 1's venv (a real torch cell); the naive runner pays the import
once per probe, so in the full run it gets its own single call (1 run), while the target
(suite / floor) is a median of 3 per-run ratios from a call without it.
"""

from __future__ import annotations

from typing import Any

from . import cells
from .common import Context
from .stats import targets_for

FIGURE = "4_probe_suite"
GOALS = {
    "suite / floor": ("<=", 1.25, "x"),
    # Issue 46: the probe phase of a warm cell within 1.1x of its floor (one import + the work).
    "suite / floor, issue 46": ("<=", 1.1, "x"),
}
QUICK_PROBES = ("install_sanity", "numpy_interop", "torchvision_ops")


def torch_venv(ctx: Context) -> str:
    """Figure 1's venv when it holds torch; otherwise make one (warm cache) through our cell path."""
    python = ctx.facts.get("warm_venv_python")
    cell = ctx.facts.get("warm_cell")
    if python and cell is not None and cell.torch:
        return python
    run = cells.run_our_cell(
        cells.make_cell("2.4.1"), ctx.dir("probe-venv") / "venv", cells.index_config()
    )
    return run["python"]


def measure(ctx: Context) -> dict[str, Any]:
    from .probe_suite import measure_probe_suite

    python = torch_venv(ctx)
    select = QUICK_PROBES if ctx.quick else ()
    repeats = 1 if ctx.quick else 3
    main = measure_probe_suite(python, repeats=repeats, select=select, naive=ctx.quick)
    naive = main if ctx.quick else measure_probe_suite(python, repeats=1, select=select, naive=True)
    ratio = main["suite_over_floor"]
    ctx.log(
        f"  {main['probes']} probes: suite {main['suite_s']['median']:.1f} s, floor "
        f"{main['floor_s']['median']:.1f} s (import {main['import_s']['median']:.1f} + work "
        f"{main['probe_work_s']['median']:.1f}) -> {ratio:.2f}x; naive {naive['naive_s']['median']:.1f} s "
        f"= {naive['naive_over_suite']:.2f}x the suite"
    )
    return {
        "venv_python": python,
        "probes": main["probes"],
        "suite_vs_floor": main,
        "naive_run": naive,
        "suite_over_floor": ratio,
        "naive_over_suite": naive["naive_over_suite"],
        "targets": targets_for(
            FIGURE,
            GOALS,
            {"suite / floor": ratio, "suite / floor, issue 46": ratio},
            {
                name: f"median of {repeats} per-run ratios"
                + (f", probes {','.join(select)}" if select else ", all probes")
                for name in GOALS
            },
        ),
    }
