"""Figure 7: the history database at a year of a nightly's scale.

A generated year: 365 nights x 2,500 cells (912,500 cell results, 17 probes each), built with
the tool's own import into one SQLite file. Then, each as a fresh process the way a maintainer or
the nightly workflow runs it:

(a) ``torch-matrix diff`` (the newest night against the one before, with the first failing
    run of each new failure looked up across the whole year). Target: under 1 s.
(b) ``torch-matrix history`` (the runs and flaky pass rates over the default 30-night window;
    over all 365 nights reported beside it). Target: under 1 s.
(c) ``torch-matrix import`` of one night of 2,500 cells (result files on disk) into a copy of
    that year. Target: under 0.25 s (issue 46; it was 1 s).
(d) The file's size. Target: under 1 GB.

Side by side: a bare ``python -c pass`` (interpreter start, the floor of any fresh process), and
the import's own floor (benchmarks/floor.py): a fresh ``python -c`` that imports the modules the
import imports (traced with ``-X importtime``) and reads and decodes the night's files once.

Generating the year takes minutes (365 imports), so the file is built once per scale, generator
and schema version and reused from ``~/.cache/torch-matrix/bench-history/``
(``$TORCH_MATRIX_BENCH_CACHE`` moves it). ``--history-scale NIGHTSxCELLS`` runs another scale;
the test suite (CI) runs this figure at ``30x100`` (tests/test_bench_history.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import random
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from torch_matrix.vocab.records import FAIL, PASS, CellResult, ProbeResult

from .common import REPO_ROOT, BenchError, Context, run_command, traced_imports
from .floor import floor_phrase, floor_record, floor_script
from .scale import synthetic_results
from .stats import ratio, summarize, targets_for

FIGURE = "7_history"
NIGHTS = 365
CELLS = 2500
GENERATOR = 2  # bump when night_results changes: a cached year of another generator is rebuilt
SIZE_LIMIT = 10**9  # bytes


def goals_for(nights: int, cells: int) -> dict[str, tuple[str, float, str]]:
    scale = f"{nights} nights x {cells} cells"
    return {
        f"diff, {scale}": ("<", 1.0, " s"),
        f"history, {scale}": ("<", 1.0, " s"),
        f"import one night of {cells} cells": ("<", 0.25, " s"),  # issue 46 (it was 1 s)
        f"file size, {scale}": ("<", SIZE_LIMIT / 2**20, " MiB"),
    }


GOALS = goals_for(NIGHTS, CELLS)


def parse_scale(text: str) -> tuple[int, int]:
    """``"365x2500"`` -> (365, 2500)."""
    nights, sep, cells = text.lower().partition("x")
    if not sep or not nights.isdigit() or not cells.isdigit() or not int(nights) or not int(cells):
        raise BenchError(f"--history-scale {text!r}: expected NIGHTSxCELLS, e.g. 365x2500")
    return int(nights), int(cells)


def night_results(base: list[CellResult], night: int, rng: random.Random) -> list[CellResult]:
    """One night: the base cells, finished that night, with a few probes flipping (flaky or new breaks)."""
    moment = dt.datetime(2026, 1, 1, 3, tzinfo=dt.timezone.utc) + dt.timedelta(days=night)
    stamp = moment.isoformat()
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


def _cache_dir() -> Path:
    explicit = os.environ.get("TORCH_MATRIX_BENCH_CACHE")
    return Path(explicit) if explicit else Path.home() / ".cache" / "torch-matrix" / "bench-history"


def year_db(nights: int, cells: int, log: Any) -> tuple[Path, float | None]:
    """The generated history (built now, or reused) and the seconds building it took (None: reused)."""
    from torch_matrix.world.history import open_history, run_ref_for
    from torch_matrix.world.history_schema import SCHEMA_VERSION

    cache = _cache_dir()
    db = cache / f"year-g{GENERATOR}-s{SCHEMA_VERSION}-{nights}x{cells}.sqlite"
    if db.is_file():
        log(f"  reusing the generated history {db}")
        return db, None
    cache.mkdir(parents=True, exist_ok=True)
    partial = db.with_suffix(f".{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    rng = random.Random(7)
    base = synthetic_results(cells)
    start = time.perf_counter()
    with open_history(partial) as history:
        for night in range(nights):
            results = night_results(base, night, rng)
            history.import_run(
                results, run_ref_for(results, cache / "bench", spec="bench", commit=f"{night:040x}")
            )
            if night % 50 == 49:
                log(
                    f"  generated {night + 1} of {nights} nights ({time.perf_counter() - start:.0f} s)"
                )
        runs = len(history.runs())
        rows = history.db.execute("SELECT count(*) FROM cells").fetchone()[0]
    built = time.perf_counter() - start
    if runs != nights or rows != nights * cells:
        partial.unlink(missing_ok=True)
        raise BenchError(f"generated history has {runs} runs and {rows} cell rows")
    partial.replace(db)  # only a whole year is ever reused
    return db, built


def tonight_dir(work: Path, cells: int, nights: int) -> Path:
    """The night after the year, as result files on disk (what ``import`` reads)."""
    from torch_matrix.world.results import write_result

    base = synthetic_results(cells)
    tonight = night_results(base, nights, random.Random(nights))
    cells_dir = work / "tonight" / "bench" / "cells"
    for result in tonight:
        write_result(result, cells_dir)
    return cells_dir.parent


def _children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(ctx: Context) -> dict[str, Any]:
    nights, cells = parse_scale(str(ctx.facts.get("history_scale") or f"{NIGHTS}x{CELLS}"))
    repeats = 3 if ctx.quick else 5
    db, built = year_db(nights, cells, ctx.log)
    size = db.stat().st_size
    ctx.log(
        f"  {nights} nights x {cells} cells ({nights * cells:,} cell results): {size / 2**20:.1f} MiB"
        + (f", built in {built:.0f} s" if built is not None else "")
    )
    work = ctx.dir("history")
    tonight = tonight_dir(work, cells, nights)
    cli = [sys.executable, "-m", "torch_matrix.cli"]
    commands = {
        "diff": cli + ["diff", "--db", str(db)],
        "history": cli + ["history", "--db", str(db)],
        f"history --last {nights}": cli + ["history", "--db", str(db), "--last", str(nights)],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    # .pyc files written by the warm-up, as an installed tool has them (a shell may set
    # PYTHONDONTWRITEBYTECODE, and then every fresh process would compile the tool's sources)
    env = {"PYTHONDONTWRITEBYTECODE": ""}
    for command in commands.values():  # warm-up: page cache, .pyc files
        run_command(command, cwd=REPO_ROOT, env=env)
    scratch = work / "import-copy.sqlite"
    importing = cli + ["import", str(tonight), "--db", str(scratch), "--commit", "bench"]
    shutil.copyfile(db, scratch)
    _, modules = traced_imports(importing, env=env)  # warm-up too; the modules for its floor
    # The import's floor, timed in the same rounds: a fresh interpreter, the import's modules and
    # one read of the night's result files (context for the target, never part of it).
    floor = [sys.executable, "-c", floor_script(modules, tonight, cells)]
    floor_error = None
    try:  # warm-up, and the check that it reads every file
        run_command(floor, cwd=REPO_ROOT, env=env)
        commands["floor of import"] = floor
    except BenchError as error:
        floor_error = str(error)[-300:]
    runs: dict[str, list[float]] = {name: [] for name in commands}
    runs["import"] = []
    # The CPU each process used (user + system), beside its wall time: on a machine shared with
    # other jobs the wall time follows the load; the CPU time much less.
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    load_before = os.getloadavg()[0]

    def timed(name: str, command: list[str]) -> str:
        used = _children_cpu()
        start = time.perf_counter()
        done = run_command(command, cwd=REPO_ROOT, env=env)
        runs[name].append(time.perf_counter() - start)
        cpu[name].append(_children_cpu() - used)
        return done.stdout

    for _ in range(repeats):
        for name, command in commands.items():
            timed(name, command)
        shutil.copyfile(db, scratch)  # a fresh copy each time, so the night is really added
        # Written back now, untimed: else the import's commit (fsync) writes back the whole fresh
        # copy (tens of MB), which is the benchmark's doing, not the import's.
        os.sync()
        out = timed("import", importing)
        if "imported run" not in out:
            raise BenchError(f"import did not add the night: {out[-300:]}")
    scratch.unlink(missing_ok=True)
    load = (load_before, os.getloadavg()[0])
    summaries = {name: summarize(values) for name, values in runs.items()}
    cpu_summaries = {name: summarize(values) for name, values in cpu.items()}
    bare = summaries["python -c pass"]["median"]
    import_floor = (
        {"error": floor_error}
        if floor_error is not None
        else floor_record(
            cells,
            modules,
            runs["floor of import"],
            cpu["floor of import"],
            runs["python -c pass"],
            cpu["python -c pass"],
        )
    )
    ctx.log(f"  load average (1 min): {load[0]:.2f} before, {load[1]:.2f} after")
    for name, summary in summaries.items():
        ctx.log(
            f"  {name}: median {summary['median']:.3f} s over {repeats} fresh processes "
            f"({ratio(summary['median'], bare):.1f}x bare interpreter start); "
            f"CPU median {cpu_summaries[name]['median']:.3f} s"
        )
    ctx.log(f"  import: {floor_phrase(import_floor)}")
    scale = f"{nights} nights x {cells} cells"
    goals = goals_for(nights, cells)
    values = {
        f"diff, {scale}": summaries["diff"]["median"],
        f"history, {scale}": summaries["history"]["median"],
        f"import one night of {cells} cells": summaries["import"]["median"],
        f"file size, {scale}": size / 2**20,
    }
    return {
        "nights": nights,
        "cells": cells,
        "cell_results": nights * cells,
        "db_bytes": size,
        "build_s": built,
        "seconds": summaries,
        "cpu_seconds": cpu_summaries,
        "load_average": {"before": load[0], "after": load[1]},
        "ratio_to_bare_python": {name: ratio(s["median"], bare) for name, s in summaries.items()},
        "floors": {"import": import_floor},
        "targets": targets_for(
            FIGURE,
            goals,
            values,
            {
                f"diff, {scale}": f"fresh process, median of {repeats}",
                f"history, {scale}": f"fresh process, default 30-night window, median of "
                f"{repeats}; --last {nights}: "
                f"{summaries[f'history --last {nights}']['median']:.2f} s",
                f"import one night of {cells} cells": f"fresh process into a copy of the "
                f"{nights}-night history, median of {repeats}; CPU "
                f"{cpu_summaries['import']['median']:.2f} s; "
                f"{ratio(summaries['import']['median'], bare):.1f}x python -c pass; load "
                f"{load[0]:.1f}; {floor_phrase(import_floor)}",
                f"file size, {scale}": f"{size:,} bytes, one SQLite file",
            },
        ),
    }
