"""``torch-matrix import | history | diff``: the history database from the command line.

``import RESULTS_DIR`` adds a merged run (idempotent). ``history`` lists runs with each
cell+probe's pass rate over the last N runs. ``diff [OLD] [NEW]`` compares two runs, each a
results directory or a run id from ``history``; with none, the newest run and the one
before it. Exit status 0 whatever changed: a new failure is a finding, not a fault.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.edges import console
from torch_matrix.vocab.errors import UserError

if TYPE_CHECKING:  # the commands import their modules when run: `torch-matrix plan` pays nothing
    from torch_matrix.judge.snapshot import RunRef, Snapshot
    from torch_matrix.world.history import History, RunRow

DEFAULT_WINDOW = 30


def _load_dir(path: Path, args: argparse.Namespace) -> tuple[list, RunRef]:
    from torch_matrix.world.history import run_ref_for
    from torch_matrix.world.results import load_results, no_results_hint

    loaded = load_results(path)
    for problem in loaded.problems:
        console.warn(str(problem))
    if not loaded.results:
        raise UserError(
            "no cell results found (expected <run>/cells/*.json or a merged results.json)",
            str(path),
            hint=no_results_hint(),
        )
    ref = run_ref_for(
        loaded.results,
        path,
        spec=getattr(args, "name", None),
        commit=getattr(args, "commit", None),
        date=getattr(args, "date", None),
    )
    return loaded.results, ref


def import_main(args: argparse.Namespace) -> int:
    from torch_matrix.run.diff import load_run_dir
    from torch_matrix.world.history import db_path, open_history
    from torch_matrix.world.results import cyclic_gc_paused

    if args.date:
        from datetime import datetime

        try:
            datetime.fromisoformat(args.date)
        except ValueError:  # stored as given, it would sort the history by nonsense
            raise UserError(
                f"{args.date!r} is not an ISO date",
                "--date",
                hint="e.g. --date 2026-11-27 or 2026-11-27T03:00:00+00:00 (default: when the "
                "run's last cell finished)",
            ) from None
    path = db_path(args.db)
    # The whole import: the snapshot of 2,500 loaded results makes ~40,000 more objects, and the
    # cyclic collector rescanning the results kept alive cost as much as building them.
    with cyclic_gc_paused():
        results, ref = load_run_dir(Path(args.results_dir), args)
        with open_history(path) as history:
            added = history.import_run(results, ref)
    what = "imported" if added else "already in the history (nothing added):"
    print(
        f"{what} run {ref.id} ({ref.date}, spec {ref.spec}, {len(results)} cells"
        f"{', commit ' + ref.commit[:12] if ref.commit else ''}) -> {path}"
    )
    return 0


def history_main(args: argparse.Namespace) -> int:
    from torch_matrix.report import diff_render
    from torch_matrix.world.history import db_path, open_history

    if args.last is not None and args.last < 1:  # 0 read as the default, -1 as one run
        raise UserError(
            f"expected a number of runs >= 1, got {args.last}",
            "--last",
            hint=f"e.g. --last 365; leave it out for the last {DEFAULT_WINDOW}",
        )
    path = db_path(args.db)
    window = args.last or DEFAULT_WINDOW
    with open_history(path, create=False) as history:
        specs = [args.spec] if args.spec else history.specs()
        shown: dict[str, tuple[list[RunRow], list[list[str]], int]] = {}
        data: dict[str, Any] = {}
        for spec in specs:
            runs = history.runs(spec=spec, last=window)
            if not runs:
                raise UserError(
                    f"no runs of spec {spec!r} in the history (specs: "
                    f"{', '.join(history.specs()) or 'none'})",
                    str(path),
                    hint="import a run of it first: `torch-matrix import RESULTS_DIR`",
                )
            rates = history.pass_rates(spec, window)
            shown_pairs = [
                (row[0], row[1]) for row in diff_render.flaky_rows(rates, {}, limit=args.limit)
            ]
            last = history.last_statuses(spec, shown_pairs, window)
            flaky = diff_render.flaky_rows(rates, last, limit=args.limit)
            shown[spec] = (runs, flaky, len(runs))
            if args.format != "json":
                continue
            data[spec] = {
                "runs": [
                    diff_render.runref_json(row.run) | {"cells": row.cells, **row.counts}
                    for row in runs
                ],
                "pass_rates": [
                    {"cell": c, "probe": p, "passed": r.passed, "runs": r.runs, "nights": r.nights}
                    for (c, p), r in sorted(rates.items())
                ],
            }
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(diff_render.render_history_markdown(shown))
    else:
        sys.stdout.write(diff_render.render_history_text(shown))
    return 0


def _open_if_present(args: argparse.Namespace) -> History | None:
    from torch_matrix.world.history import db_path, open_history

    path = db_path(args.db)
    if args.db or path.is_file():
        return open_history(path, create=False)
    return None


def _side(
    ref: str, history: History | None, args: argparse.Namespace
) -> tuple[Snapshot, RunRow | None]:
    from torch_matrix.judge.snapshot import snapshot_of

    path = Path(ref)
    if path.exists():
        results, run = _load_dir(path, args)
        row = history.find(run.id) if history is not None else None
        return snapshot_of(results, run), row
    if history is None:
        raise UserError(
            "neither a results directory nor a run id (no history database to look it up in: "
            "--db or $TORCH_MATRIX_HISTORY)",
            ref,
            hint="give a results directory, or point --db at the history that holds the run",
        )
    row = history.find(ref)
    if row is None:
        raise UserError(
            f"neither a results directory nor a run id in {history.path}",
            ref,
            hint="`torch-matrix history` lists the run ids",
        )
    return history.snapshot(row), row


def _filed_as(row: RunRow | None, new: Snapshot) -> str:
    """The spec name a run is filed under: its stored row's (``import --name`` may differ from
    the results layout's), else its own."""
    return row.run.spec if row is not None else new.run.spec


def _previous(history: History, row: RunRow | None, new: Snapshot) -> RunRow | None:
    """The run before ``new`` of the spec it is filed under: before its row, or the newest when
    it is not stored."""
    runs = history.runs(spec=_filed_as(row, new))
    if row is not None:
        seqs = [candidate.seq for candidate in runs]
        position = seqs.index(row.seq) if row.seq in seqs else len(runs)
        return runs[position - 1] if position > 0 else None
    older = [candidate for candidate in runs if candidate.run.id != new.run.id]
    return older[-1] if older else None


def _first_runs(
    history: History | None, new: Snapshot, pairs: list[tuple[str, str]], stored: bool
) -> dict[tuple[str, str], RunRef]:
    from torch_matrix.report.diff import streak_start

    if history is None or not pairs:
        return {}
    series = history.failing_history(new.run.spec, pairs, until=new.run if stored else None)
    found = {}
    for key, runs in series.items():
        if not stored:
            runs = runs + [(new.run, True)]
        start = streak_start(runs)
        if start is not None:
            found[key] = start
    return found


def _compare(args: argparse.Namespace, refs: list[str]) -> Any:
    """The two runs compared (each a results directory or a run of the history; one or none
    given: the run before it, the last two), with the run each new failure first appeared in."""
    from torch_matrix.report.diff import diff_snapshots, failing_pairs
    from torch_matrix.world.history import db_path

    history = _open_if_present(args)
    new_row: RunRow | None
    try:
        if not refs:
            if history is None:
                raise UserError(
                    "no history database: give two results directories, or import runs first "
                    "(`torch-matrix import RESULTS_DIR`)",
                    str(db_path(args.db)),
                    hint="`torch-matrix diff OLD_RESULTS NEW_RESULTS` needs no history",
                )
            runs = history.runs(spec=args.spec) if args.spec else history.runs()
            if not runs:
                raise UserError(
                    "the history holds no runs" + (f" of spec {args.spec!r}" if args.spec else ""),
                    str(history.path),
                    hint="import runs first: `torch-matrix import RESULTS_DIR`",
                )
            new_row = runs[-1]
            new = history.snapshot(new_row)
        else:
            new, new_row = _side(refs[-1], history, args)
        if len(refs) == 2:
            old: Snapshot | None = _side(refs[0], history, args)[0]
        else:
            previous = _previous(history, new_row, new) if history is not None else None
            if previous is None and history is None:
                raise UserError(
                    "one run given and no history database to find the run before it: give OLD "
                    "too, or import runs first",
                    refs[0],
                    hint="`torch-matrix diff OLD_RESULTS NEW_RESULTS`",
                )
            old = (
                history.snapshot(previous) if previous is not None and history is not None else None
            )
            if old is None:
                print(
                    f"torch-matrix: note: no earlier run of spec {_filed_as(new_row, new)!r} in "
                    "the history; "
                    "every cell counts as appeared",
                    file=sys.stderr,
                )
        pairs = sorted(failing_pairs(new) - (failing_pairs(old) if old is not None else set()))
        first = _first_runs(history, new, pairs, stored=new_row is not None)
    finally:
        if history is not None:
            history.close()
    return diff_snapshots(old, new, first)


def diff_main(args: argparse.Namespace) -> int:
    from torch_matrix.report import diff_render
    from torch_matrix.run.diff import compare, write_issues

    refs = list(args.runs)
    if len(refs) > 2:
        raise UserError(
            f"expected at most two runs (OLD NEW), got {len(refs)}",
            " ".join(refs),
            hint="`torch-matrix diff OLD NEW`, `diff NEW` (against the run before it) or "
            "`diff` (the last two runs)",
        )
    result = compare(args, refs)
    if args.format == "markdown":
        sys.stdout.write(diff_render.render_markdown(result))
    elif args.format == "json":
        sys.stdout.write(diff_render.render_json(result))
    else:
        sys.stdout.write(diff_render.render_text(result))
    if args.github_summary:
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(diff_render.render_markdown(result))
        else:
            console.warn("--github-summary: GITHUB_STEP_SUMMARY is not set")
    if args.issues:
        print(write_issues(args, refs, result), file=sys.stderr)
    return 0


def main(args: argparse.Namespace) -> int:
    """``torch-matrix import``, ``history`` and ``diff``: the command's function."""
    commands = {"import": import_main, "history": history_main, "diff": diff_main}
    return commands[args.command](args)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The options of ``torch-matrix import``, ``history`` or ``diff`` (the command registry:
    ``torch_matrix.cli.COMMANDS``)."""
    db_help = (
        "history database (default: $TORCH_MATRIX_HISTORY, else <results root>/history.sqlite)"
    )

    if command == "import":
        parser.add_argument("results_dir")
        parser.add_argument("--db", help=db_help)
        parser.add_argument(
            "--name", help="spec name to file the run under (default: from the layout <name>/cells)"
        )
        parser.add_argument(
            "--commit", help="commit of the run (default: $GITHUB_SHA, else git rev-parse HEAD)"
        )
        parser.add_argument(
            "--date", help="ISO date of the run (default: when its last cell finished)"
        )
        return
    if command == "history":
        parser.add_argument("--db", help=db_help)
        parser.add_argument("--spec", help="only this spec's runs")
        parser.add_argument(
            "--last",
            type=int,
            default=DEFAULT_WINDOW,
            metavar="N",
            help=f"runs shown and pass-rate window (default {DEFAULT_WINDOW})",
        )
        parser.add_argument(
            "--limit", type=int, default=50, help="at most this many flaky rows per spec (0: all)"
        )
        parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
        return
    parser.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="[OLD] NEW: results directories or run ids (default: the newest run and the one before)",
    )
    parser.add_argument("--db", help=db_help)
    parser.add_argument("--spec", help="with no RUN: the newest runs of this spec")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument(
        "--github-summary", action="store_true", help="append the Markdown to $GITHUB_STEP_SUMMARY"
    )
    parser.add_argument(
        "--issues",
        metavar="FILE",
        help="write the issues to open/comment and close (JSON, for the nightly workflow)",
    )
    parser.add_argument("--run-url", help="link to the CI run, quoted in issue bodies")
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--commit", help=argparse.SUPPRESS)
    parser.add_argument("--date", help=argparse.SUPPRESS)
