"""Figure 9: the cost of proven pins (follow-up edge cells, plan/followups.py).

(a) Follow-up cells spent per break against the bound ceil(log2 N) + 2 per edge. Random break
    patterns (one window, several, isolated passes or fails such as a flaky release, uninstallable
    holes) over synthetic indexes of 8, 16, 32 and 52 releases, a grid of 2-4 tested releases each;
    the planner runs until it asks for nothing (each cell judged by the pattern). Pure planning: no
    install. Reported: the most cells any edge spent over its bound (target <= 1), cells per break
    on average, and how often both edges of a break were found.
(a') The same for interactions: breaks that hold in one configuration only (setuptools>=82 fails
    where setuptools<82 passes, for some releases), where each release an edge finds bad is tested
    once more in the passing configuration (plan.followups.other_configuration). Reported: the most
    cells an edge spent in its own configuration, and in the other, each over its bound, and the
    cells per interaction break in each.
(b) Wall time of a run with proof against the same run without: ``nox -s matrix`` (which queues
    the follow-up session and the report) on a synthetic index of ten tiny torch wheels (2.0.0 ..
    2.9.0, a break at 2.3.0 .. 2.5.0, the spec testing 2.0.0, 2.4.0 and 2.9.0), once with the
    default cap and once with ``TORCH_MATRIX_FOLLOWUPS=0``. Synthetic wheels install in a second,
    so this ratio is an upper bound of the overhead of planning and of a venv per cell, not the
    cost of real torch downloads (each follow-up cell there costs one more install of a release).
"""

from __future__ import annotations

import math
import random
import sys
import time
from typing import Any

from .common import REPO_ROOT, BenchError, Context, run_command
from .stats import ratio, summarize, targets_for

FIGURE = "9_proof"
# The bound; the wall-time ratio is a figure without a target (reported beside it).
GOALS = {
    "most follow-up cells of an edge / (ceil(log2 N) + 2)": ("<=", 1.0, ""),
    "most other-configuration cells of an interaction's edge / (ceil(log2 N) + 2)": ("<=", 1.0, ""),
}
SIZES = (8, 16, 32, 52)


def _releases(count: int) -> tuple[str, ...]:
    return tuple(f"{1 + i // 10}.{i % 10}.0" for i in range(count))


def edge_costs(ctx: Context) -> dict[str, Any]:
    from torch_matrix.plan import bisection
    from torch_matrix.plan import breaks as plan_breaks
    from tests.test_followups import FAIL, PASS, UNSAT, run

    rng = random.Random(22)
    patterns = 40 if ctx.quick else 200
    worst, spent_per_break, edges_found, edges_total, breaks = 0.0, [], 0, 0, 0
    by_size: dict[int, dict[str, float]] = {}
    for size in SIZES:
        releases = _releases(size)
        cells_here, bound = [], bisection.max_cells(size)
        for _ in range(patterns):
            truth: dict[str, str] = {}
            state = PASS
            for version in releases:  # breaks as runs: switch state now and then, a rare hole
                if rng.random() < 3 / size:
                    state = FAIL if state == PASS else PASS
                truth[version] = UNSAT if rng.random() < 0.03 else state
            grid = sorted(rng.sample(range(size), rng.randint(2, 4)))
            results = run(truth, [releases[i] for i in grid], releases)
            edges = plan_breaks.edges(results, lambda cell, axis="torch": releases)
            for edge in edges:
                worst = max(worst, edge.spent / edge.budget)
                edges_total += 1
                edges_found += edge.next is None
            count = len(edges) // 2
            if count:
                breaks += count
                spent = sum(edge.spent for edge in edges) / count
                spent_per_break.append(spent)
                cells_here.append(spent)
        mean = sum(cells_here) / len(cells_here) if cells_here else 0.0
        by_size[size] = {
            "mean_cells_per_break": round(mean, 2),
            "bound_per_edge": bound,
            "bound_per_break": 2 * bound,
            "breaks": len(cells_here),
        }
        ctx.log(
            f"  N={size}: {mean:.1f} follow-up cells per break on average over {len(cells_here)} breaks "
            f"(bound: {bound} per edge, ceil(log2 {size}) + 2)"
        )
    return {
        "worst_ratio": worst,
        "by_size": by_size,
        "breaks": breaks,
        "mean_cells_per_break": sum(spent_per_break) / max(1, len(spent_per_break)),
        "edges_settled": edges_found,
        "edges": edges_total,
        "log2_bound": {size: math.ceil(math.log2(size)) + 2 for size in SIZES},
    }


def interaction_costs(ctx: Context) -> dict[str, Any]:
    from torch_matrix.plan import breaks as plan_breaks
    from tests.test_followups import FAIL, PASS, UNSAT, run_configurations

    rng = random.Random(2282)
    patterns = 20 if ctx.quick else 100
    worst_own, worst_other, own_cells, other_cells, breaks = 0.0, 0.0, [], [], 0
    for size in SIZES[:3]:
        releases = _releases(size)
        for _ in range(patterns):
            with_82: dict[str, str] = {}
            state = PASS
            for version in releases:
                if rng.random() < 3 / size:
                    state = FAIL if state == PASS else PASS
                with_82[version] = UNSAT if rng.random() < 0.03 else state
            without = {v: FAIL if rng.random() < 0.05 else PASS for v in releases}

            def truth(torch: str, setuptools: str, with_82=with_82, without=without) -> str:
                if with_82[torch] == UNSAT:
                    return UNSAT
                return with_82[torch] if setuptools == "84.2.1" else without[torch]

            grid = [
                (releases[i], spec)
                for i in sorted(rng.sample(range(size), rng.randint(2, 4)))
                for spec in ("<82", ">=82")
            ]
            results = run_configurations(truth, grid, releases, st_releases=("81.0.0", "84.2.1"))
            others = [r for r in results if plan_breaks.OTHER_CONFIGURATION in r.cell.tags]
            edges = [
                e
                for e in plan_breaks.edges(
                    results,
                    lambda cell, axis="torch": (
                        ("81.0.0", "84.2.1") if axis == "setuptools" else releases
                    ),
                )
                if e.axis == "torch"
            ]
            interaction = False
            for edge in edges:
                held = dict(edge.context).get("setuptools")
                mine = [
                    r
                    for r in others
                    if r.cell.torch in edge.span and r.cell.axes["setuptools"] != held
                ]
                worst_own = max(worst_own, edge.spent / edge.budget)
                worst_other = max(worst_other, len(mine) / edge.budget)
                interaction = interaction or bool(mine)
            if interaction and edges:
                count = len(edges) // 2
                breaks += count
                own_cells.append(sum(edge.spent for edge in edges) / count)
                other_cells.append(len(others) / count)
    mean_own = sum(own_cells) / max(1, len(own_cells))
    mean_other = sum(other_cells) / max(1, len(other_cells))
    ctx.log(
        f"  interactions: {mean_own:.1f} cells per break in its own configuration, {mean_other:.1f} in the "
        f"passing one, over {breaks} breaks; worst edge {worst_own:.2f} (own) and {worst_other:.2f} (other) "
        f"of ceil(log2 N) + 2"
    )
    return {
        "worst_own_ratio": worst_own,
        "worst_other_ratio": worst_other,
        "breaks": breaks,
        "mean_own_cells_per_break": round(mean_own, 2),
        "mean_other_cells_per_break": round(mean_other, 2),
    }


def run_wall(ctx: Context) -> dict[str, Any]:
    from tests.test_e2e import nox_env, write_window_world

    repeats = 1 if ctx.quick else 3
    seconds: dict[str, list[float]] = {"with proof": [], "without": []}
    for attempt in range(repeats):
        for label, extra in (("with proof", {}), ("without", {"TORCH_MATRIX_FOLLOWUPS": "0"})):
            root = ctx.dir(f"proof-{attempt}-{label.replace(' ', '-')}")
            spec, run_dir = write_window_world(root)
            env = nox_env(root, spec, **extra)
            command = [
                sys.executable,
                "-m",
                "nox",
                "-f",
                str(REPO_ROOT / "noxfile.py"),
                "--envdir",
                str(root / "nox"),
                "--no-color",
                "-s",
                "matrix",
            ]
            start = time.perf_counter()
            done = run_command(command, env=env, cwd=root, check=False, timeout=900)
            seconds[label].append(time.perf_counter() - start)
            if done.returncode != 0 or "follow-up cells:" not in done.stdout:
                raise BenchError(
                    f"nox -s matrix ({label}) exited {done.returncode}: {done.stdout[-800:]}"
                )
            if label == "with proof":
                ctx.log(
                    "  "
                    + next(
                        line for line in done.stdout.splitlines() if "follow-up cells:" in line
                    ).strip()
                )
    summaries = {label: summarize(values) for label, values in seconds.items()}
    wall_ratio = ratio(summaries["with proof"]["median"], summaries["without"]["median"])
    ctx.log(
        f"  nox -s matrix, synthetic index: {summaries['with proof']['median']:.1f} s with proof, "
        f"{summaries['without']['median']:.1f} s without ({wall_ratio:.2f}x)"
    )
    return {"seconds": summaries, "ratio": wall_ratio, "repeats": repeats}


def measure(ctx: Context) -> dict[str, Any]:
    costs = edge_costs(ctx)
    ctx.log(
        f"  worst edge: {costs['worst_ratio']:.2f} of its ceil(log2 N) + 2 bound; "
        f"{costs['mean_cells_per_break']:.1f} cells per break on average over {costs['breaks']} breaks"
    )
    interactions = interaction_costs(ctx)
    wall = run_wall(ctx)
    values = {
        "most follow-up cells of an edge / (ceil(log2 N) + 2)": max(
            costs["worst_ratio"], interactions["worst_own_ratio"]
        ),
        "most other-configuration cells of an interaction's edge / (ceil(log2 N) + 2)": interactions[
            "worst_other_ratio"
        ],
    }
    return {
        "edges": costs,
        "interactions": interactions,
        "wall": wall,
        "targets": targets_for(
            FIGURE,
            GOALS,
            values,
            {
                "most follow-up cells of an edge / (ceil(log2 N) + 2)": f"random break patterns over indexes of {', '.join(map(str, SIZES))} releases; "
                f"wall time of nox -s matrix with proof / without: {wall['ratio']:.2f}x (synthetic "
                "index of ten tiny torch wheels: planning and a venv per follow-up cell, not downloads)",
                "most other-configuration cells of an interaction's edge / (ceil(log2 N) + 2)": f"{interactions['breaks']} interaction breaks over indexes of {', '.join(map(str, SIZES[:3]))} "
                f"releases: {interactions['mean_own_cells_per_break']} cells per break in its own "
                f"configuration, {interactions['mean_other_cells_per_break']} in the passing one",
            },
        ),
    }
