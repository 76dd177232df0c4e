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
    from torch_matrix.world.history import RunRow

DEFAULT_WINDOW = 30


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
