"""Figure 1: warm environment creation per cell.

From "cell starts" to "the cell's venv holds its verified versions", cache warm, three ways
measured in the same run: our cell (nox's uv backend + ``torch_matrix.world.environment.install`` +
``verify``), nox's default backend (virtualenv + pip, pip's own cache warm), and the floor
(bare ``uv venv`` + ``uv pip install`` of the same pins and index options). Ours and the floor
alternate run by run so drift in machine load hits both alike.
"""

from __future__ import annotations

from typing import Any

from . import cells
from .common import Context, remove_tree
from .stats import ratio, summarize, targets_for

FIGURE = "1_warm_env"
GOALS = {"ours / floor": ("<=", 1.5, "x"), "virtualenv+pip / ours": (">=", 50.0, "x")}


def measure(ctx: Context) -> dict[str, Any]:
    cell = cells.warm_cell(ctx.quick)
    index = cells.index_config()
    uv_repeats = 3 if ctx.quick else 7
    pip_repeats = 1 if ctx.quick else 3
    work = ctx.dir("warm_env")
    ours_dir, floor_dir, pip_dir = (
        work / "venvs" / "ours",
        work / "floor",
        work / "venvs-pip" / "pip",
    )
    pip_env = {
        "PIP_CACHE_DIR": str(work / "pip-cache")
    }  # pip's own cache, warmed below, deleted after

    ctx.log(f"  cell {cell.id}: {' '.join(cell.requirements)}")
    ctx.log("  warm-up (fills uv's and pip's caches; not counted)")
    cells.run_our_cell(cell, ours_dir, index)
    cells.run_virtualenv_pip(cell, pip_dir, pip_env)

    ours_runs: list[dict[str, Any]] = []
    floor_runs: list[float] = []
    for i in range(uv_repeats):
        ours_runs.append(cells.run_our_cell(cell, ours_dir, index))
        floor_runs.append(cells.run_floor(cell, floor_dir, index)["total_s"])
        last = ours_runs[-1]
        phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in last["phases"].items())
        ctx.log(
            f"  run {i + 1}/{uv_repeats}: ours {last['total_s']:.2f} s (nox uv venv {last['venv_s']:.2f}, "
            f"run_cell {last['cellrun_s']:.2f}: {phases}), "
            f"floor {floor_runs[-1]:.2f} s"
        )
    pip_runs: list[float] = []
    for i in range(pip_repeats):
        pip_runs.append(cells.run_virtualenv_pip(cell, pip_dir, pip_env)["total_s"])
        ctx.log(f"  virtualenv+pip run {i + 1}/{pip_repeats}: {pip_runs[-1]:.1f} s")

    ours = summarize(r["total_s"] for r in ours_runs)
    floor = summarize(floor_runs)
    pip = summarize(pip_runs)
    ours_over_floor = ratio(ours["median"], floor["median"])
    pip_over_ours = ratio(pip["median"], ours["median"])
    ctx.facts["warm_venv_python"] = ours_runs[-1]["python"]
    ctx.facts["warm_cell"] = cell
    remove_tree(work / "pip-cache")
    remove_tree(work / "venvs-pip")
    remove_tree(floor_dir)
    return {
        "cell": cell.id,
        "pins": list(cell.requirements),
        "install_command": ours_runs[-1]["command"],
        "ours_s": ours,
        "floor_s": floor,
        "virtualenv_pip_s": pip,
        "ours_breakdown_median_s": {
            "venv_s": summarize(r["venv_s"] for r in ours_runs)["median"],
            "cellrun_s": summarize(r["cellrun_s"] for r in ours_runs)["median"],
            **{
                name: summarize(r["phases"].get(name, 0.0) for r in ours_runs)["median"]
                for name in ours_runs[-1]["phases"]
            },
        },
        "ours_over_floor": ours_over_floor,
        "virtualenv_pip_over_ours": pip_over_ours,
        "repeats": {"ours": uv_repeats, "floor": uv_repeats, "virtualenv_pip": pip_repeats},
        "targets": targets_for(
            FIGURE,
            GOALS,
            {"ours / floor": ours_over_floor, "virtualenv+pip / ours": pip_over_ours},
            {
                "virtualenv+pip / ours": f"virtualenv+pip: median of {pip_repeats} runs"
                + (" (quick: light cell)" if ctx.quick else "")
            },
        ),
    }
