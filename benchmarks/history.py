"""Figure 7: the history database at nightly scale.

A generated history of 100 nights x 200 cells (20,000 cell results, 17 probes each: 340,000
probe rows), built with the tool's own import. Then, each as a fresh process the way a
maintainer or the nightly workflow runs it:

(a) ``torch-matrix diff`` (the newest night against the one before, with the first failing
    run of each new failure looked up across all 100 nights). Target: under 1 s.
(b) ``torch-matrix history`` (the runs and flaky pass rates over the default 30-night window,
    and over all 100 nights). Target: under 1 s.
(c) ``torch-matrix import`` of one night of 200 cells (result files on disk) into that history.
    Target: under 1 s.

Side by side: a bare ``python -c pass`` (interpreter start, the floor of any fresh process).
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import sys
import time
from typing import Any

from torch_matrix.vocab.records import FAIL, PASS, CellResult, ProbeResult

from .common import REPO_ROOT, BenchError, Context, run_command
from .scale import synthetic_results
from .stats import ratio, summarize, targets_for

FIGURE = "7_history"
NIGHTS = 100
CELLS = 200
GOALS = {
    "diff, 100 nights x 200 cells": ("<", 1.0, " s"),
    "history, 100 nights x 200 cells": ("<", 1.0, " s"),
    "import one night of 200 cells": ("<", 1.0, " s"),
}


def night_results(base: list[CellResult], night: int, rng: random.Random) -> list[CellResult]:
    """One night: the base cells, finished that night, with a few probes flipping (flaky or new breaks)."""
    stamp = f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T03:{night % 60:02d}:00+00:00"
    out = []
    for result in base:
        probes = result.probes
        if probes and rng.random() < 0.03:
            flip = rng.randrange(len(probes))
            probe = probes[flip]
            status = FAIL if probe.status == PASS else PASS
            probes = (
                probes[:flip]
                + (
                    ProbeResult(
                        probe.name,
                        status,
                        "flipped tonight" if status == FAIL else "",
                        probe.duration_s,
                    ),
                )
                + probes[flip + 1 :]
            )
        out.append(dataclasses.replace(result, probes=probes, finished_at=stamp))
    return out


def build_history(ctx: Context) -> tuple[Any, Any, float]:
    from torch_matrix.world.history import open_history, run_ref_for
    from torch_matrix.world.results import write_result

    root = ctx.dir("history")
    db = root / "history.sqlite"
    rng = random.Random(7)
    base = synthetic_results(CELLS)
    start = time.perf_counter()
    with open_history(db) as history:
        for night in range(NIGHTS):
            results = night_results(base, night, rng)
            history.import_run(
                results, run_ref_for(results, root / "bench", spec="bench", commit=f"{night:040x}")
            )
        runs = len(history.runs())
        rows = history.db.execute("SELECT count(*) FROM cells").fetchone()[0]
    built = time.perf_counter() - start
    if runs != NIGHTS or rows != NIGHTS * CELLS:
        raise BenchError(f"generated history has {runs} runs and {rows} cell rows")
    tonight = night_results(base, NIGHTS, rng)
    cells_dir = root / "tonight" / "bench" / "cells"
    for result in tonight:
        write_result(result, cells_dir)
    return db, cells_dir.parent, built


def measure(ctx: Context) -> dict[str, Any]:
    repeats = 3 if ctx.quick else 5
    db, tonight, built = build_history(ctx)
    ctx.log(
        f"  built {NIGHTS} nights x {CELLS} cells in {built:.1f} s ({db.stat().st_size / 2**20:.1f} MiB)"
    )
    cli = [sys.executable, "-m", "torch_matrix.cli"]
    commands = {
        "diff": cli + ["diff", "--db", str(db)],
        "history": cli + ["history", "--db", str(db)],
        "history --last 100": cli + ["history", "--db", str(db), "--last", "100"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    for command in commands.values():  # warm-up: page cache, .pyc files
        run_command(command, cwd=REPO_ROOT)
    runs: dict[str, list[float]] = {name: [] for name in commands}
    runs["import"] = []
    scratch = db.parent / "import-copy.sqlite"
    for _ in range(repeats):
        for name, command in commands.items():
            start = time.perf_counter()
            run_command(command, cwd=REPO_ROOT)
            runs[name].append(time.perf_counter() - start)
        shutil.copyfile(db, scratch)  # a fresh copy each time, so the night is really added
        start = time.perf_counter()
        done = run_command(
            cli + ["import", str(tonight), "--db", str(scratch), "--commit", "bench"], cwd=REPO_ROOT
        )
        runs["import"].append(time.perf_counter() - start)
        if "imported run" not in done.stdout:
            raise BenchError(f"import did not add the night: {done.stdout[-300:]}")
    summaries = {name: summarize(values) for name, values in runs.items()}
    floor = summaries["python -c pass"]["median"]
    for name, summary in summaries.items():
        ctx.log(
            f"  {name}: median {summary['median']:.3f} s over {repeats} fresh processes "
            f"({ratio(summary['median'], floor):.1f}x bare interpreter start)"
        )
    values = {
        "diff, 100 nights x 200 cells": summaries["diff"]["median"],
        "history, 100 nights x 200 cells": summaries["history"]["median"],
        "import one night of 200 cells": summaries["import"]["median"],
    }
    return {
        "nights": NIGHTS,
        "cells": CELLS,
        "db_bytes": db.stat().st_size,
        "build_s": built,
        "seconds": summaries,
        "ratio_to_bare_python": {name: ratio(s["median"], floor) for name, s in summaries.items()},
        "targets": targets_for(
            FIGURE,
            GOALS,
            values,
            {
                "diff, 100 nights x 200 cells": f"fresh process, median of {repeats}",
                "history, 100 nights x 200 cells": f"fresh process, default 30-night window, median of {repeats}; "
                f"--last 100: {summaries['history --last 100']['median']:.2f} s",
                "import one night of 200 cells": f"fresh process into a copy of the 100-night history, "
                f"median of {repeats}",
            },
        ),
    }
