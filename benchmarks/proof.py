"""Figure 9: the cost of proven pins (follow-up edge cells, plan/followups.py).

(a) Follow-up cells spent per break against the bound ceil(log2 N) + 2 per edge. Random break
    patterns (one window, several, isolated passes or fails such as a flaky release, uninstallable
    holes) over synthetic indexes of 8, 16, 32 and 52 releases, a grid of 2-4 tested releases each;
    the planner runs until it asks for nothing (each cell judged by the pattern). Pure planning: no
    install. Reported: the most cells any edge spent over its bound (target <= 1), cells per break
    on average, and how often both edges of a break were found.
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
GOALS = {"most follow-up cells of an edge / (ceil(log2 N) + 2)": ("<=", 1.0, "")}
SIZES = (8, 16, 32, 52)


def _releases(count: int) -> tuple[str, ...]:
    return tuple(f"{1 + i // 10}.{i % 10}.0" for i in range(count))


def edge_costs(ctx: Context) -> dict[str, Any]:
    from matrix.plan import bisection, followups
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
            edges = followups.edges(results, lambda cell, axis="torch": releases)
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
        by_size[size] = {"mean_cells_per_break": round(mean, 2), "bound_per_edge": bound,
                         "bound_per_break": 2 * bound, "breaks": len(cells_here)}
        ctx.log(f"  N={size}: {mean:.1f} follow-up cells per break on average over {len(cells_here)} breaks "
                f"(bound: {bound} per edge, ceil(log2 {size}) + 2)")
    return {"worst_ratio": worst, "by_size": by_size, "breaks": breaks,
            "mean_cells_per_break": sum(spent_per_break) / max(1, len(spent_per_break)),
            "edges_settled": edges_found, "edges": edges_total,
            "log2_bound": {size: math.ceil(math.log2(size)) + 2 for size in SIZES}}


def run_wall(ctx: Context) -> dict[str, Any]:
    from tests.test_e2e import nox_env, write_window_world

    repeats = 1 if ctx.quick else 3
    seconds: dict[str, list[float]] = {"with proof": [], "without": []}
    for attempt in range(repeats):
        for label, extra in (("with proof", {}), ("without", {"TORCH_MATRIX_FOLLOWUPS": "0"})):
            root = ctx.dir(f"proof-{attempt}-{label.replace(' ', '-')}")
            spec, run_dir = write_window_world(root)
            env = nox_env(root, spec, **extra)
            command = [sys.executable, "-m", "nox", "-f", str(REPO_ROOT / "noxfile.py"), "--envdir",
                       str(root / "nox"), "--no-color", "-s", "matrix"]
            start = time.perf_counter()
            done = run_command(command, env=env, cwd=root, check=False, timeout=900)
            seconds[label].append(time.perf_counter() - start)
            if done.returncode != 0 or "follow-up cells:" not in done.stdout:
                raise BenchError(f"nox -s matrix ({label}) exited {done.returncode}: {done.stdout[-800:]}")
            if label == "with proof":
                ctx.log("  " + next(line for line in done.stdout.splitlines() if "follow-up cells:" in line).strip())
    summaries = {label: summarize(values) for label, values in seconds.items()}
    wall_ratio = ratio(summaries["with proof"]["median"], summaries["without"]["median"])
    ctx.log(f"  nox -s matrix, synthetic index: {summaries['with proof']['median']:.1f} s with proof, "
            f"{summaries['without']['median']:.1f} s without ({wall_ratio:.2f}x)")
    return {"seconds": summaries, "ratio": wall_ratio, "repeats": repeats}


def measure(ctx: Context) -> dict[str, Any]:
    costs = edge_costs(ctx)
    ctx.log(f"  worst edge: {costs['worst_ratio']:.2f} of its ceil(log2 N) + 2 bound; "
            f"{costs['mean_cells_per_break']:.1f} cells per break on average over {costs['breaks']} breaks")
    wall = run_wall(ctx)
    values = {"most follow-up cells of an edge / (ceil(log2 N) + 2)": costs["worst_ratio"]}
    return {"edges": costs, "wall": wall,
            "targets": targets_for(FIGURE, GOALS, values, {
                "most follow-up cells of an edge / (ceil(log2 N) + 2)":
                    f"random break patterns over indexes of {', '.join(map(str, SIZES))} releases; "
                    f"wall time of nox -s matrix with proof / without: {wall['ratio']:.2f}x (synthetic "
                    "index of ten tiny torch wheels: planning and a venv per follow-up cell, not downloads)"})}
