"""``torch-matrix report RESULTS_DIR``: merge every cell result found, print the table, write files.

Writes ``summary.md`` (GitHub Markdown) and a merged ``results.json`` into the results
directory (or ``--out``). Exit status: 0, also when cells are incompatible (those are
findings, not failures); 2 when the folder holds no result and no planned cell. With ``--strict``: 1 when any cell is an ``error`` (install or
probe-runner trouble), a planned cell has no result, or a result file could not be read:
infrastructure trouble that a nightly job should fail on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from torch_matrix.edges.fileio import cyclic_gc_paused
from torch_matrix.vocab import settings
from torch_matrix.vocab.settings import SHARD_ENV

EXIT_OK = 0
EXIT_STRICT = 1
EXIT_NO_EVIDENCE = 1  # --pins: no evidence, no all-clear


def terminal_width(environ: Mapping[str, str] = os.environ) -> int | None:
    """The terminal's width when the table goes to one (or $COLUMNS is set); None (no cutting) for files and pipes."""
    if environ.get("COLUMNS") or sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, 40)
    return None


def main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.rundir import resolve
    from torch_matrix.run.report import ReportRequest, make_report

    resolve(args, "report")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    pins = None
    if args.pins:
        from torch_matrix.run.pins import PinsOptions  # the pins code: only when asked for

        pins = PinsOptions.from_args(args)
    request = ReportRequest(
        results_dir=Path(args.results_dir or "results"),
        rejudge=bool(args.rejudge),
        strict=bool(args.strict),
        plan=args.plan,
        spec=args.spec,
        max_summary_bytes=args.max_summary_bytes,
        format=args.format,
        pivot=bool(args.pivot),
        grid=bool(args.grid),
        width=terminal_width(),
        out=args.out,
        github_summary=bool(args.github_summary),
        junit=args.junit,
        html=args.html,
        previous=args.previous,
        pins=pins,
    )
    with cyclic_gc_paused():  # the loaded results live until the end: rescanning them is waste
        report = make_report(request)
    try:
        sys.stdout.write(report.table)
        sys.stdout.flush()
    finally:  # where the files are, also when the reader went away (`| head`)
        sys.stderr.write(report.said)
    if report.unwritten is not None:
        raise report.unwritten
    if report.strict:
        print(report.strict, file=sys.stderr)
        return EXIT_STRICT
    if report.no_evidence and not settings.given(os.environ, SHARD_ENV):
        # --pins: no cell was seen working or failing (said in the pins line). A CI shard's cells
        # are part of a run: the merged report decides.
        return EXIT_NO_EVIDENCE
    return EXIT_OK


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix report``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    from torch_matrix.cli import add_pins_options

    parser.add_argument(
        "results_dir",
        nargs="?",
        default=None,
        help="a run's results directory (default: the run of the spec found here, "
        "results/<name>; else the only run under results/; else all of results/)",
    )
    parser.add_argument("--pivot", action="store_true", help="torch rows x variant/python columns")
    parser.add_argument("--spec", help="flag cells this spec plans that have no result")
    parser.add_argument("--max-summary-bytes", type=int, default=None)
    parser.add_argument(
        "--plan",
        metavar="PLAN_JSON",
        help="flag cells listed in this `torch-matrix plan --json` output that have no result",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where to write summary.md and results.json (default: RESULTS_DIR)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "markdown"),
        default="text",
        help="stdout format (default: text tables)",
    )
    parser.add_argument("--grid", action="store_true", help="also print a probe x cell status grid")
    parser.add_argument(
        "--github-summary",
        action="store_true",
        help="append the Markdown summary to $GITHUB_STEP_SUMMARY, shortened to fit 1 MiB",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a cell is an error, a planned cell is missing, or a result file "
        "is unreadable (infrastructure trouble); incompatible cells never fail it",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML heatmap (opens offline; click a cell for its probes)",
    )
    parser.add_argument(
        "--previous",
        metavar="RUN",
        help="with --html: highlight cells that are new or changed verdict since RUN: a results "
        "directory, its results.json, a run id from `torch-matrix history`, or `last` "
        "(the newest other run of this spec in the history)",
    )
    parser.add_argument(
        "--junit", metavar="FILE", help="write JUnit XML: one testcase per cell x probe"
    )
    parser.add_argument(
        "--pins",
        action="store_true",
        help="also write the suggested pins into OUT/pins (what `torch-matrix pins` writes), "
        "from the same loaded results, with the same options (--policy, --tradeoffs, "
        "--no-coverage; --spec for coverage)",
    )
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="judge every cell again with this version's rules for this report and its "
        "results.json (each result keeps the verdict it was given when it was written)",
    )
    add_pins_options(parser)
