"""Commands: `main` dispatches `torch-matrix SUBCOMMAND` to one module per command (`plan`, `report`, `pins`,
`history`, `bisection`, `check`, `repro`, `run`).
May import every package above; the console script is `torch_matrix.cli:main`, `python -m torch_matrix.cli` runs it too.

The ``torch-matrix`` command line: plan, report, pins, check, repro, import, history, diff, bisect, run.

Each subcommand lives in the module that owns its job (imported only when chosen);
this file only parses arguments and turns ``UserError`` into its error and hint lines
on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from torch_matrix.edges import console
from torch_matrix.edges.fileio import WriteFailed
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import EXIT_BAD_INPUT, UserError


def _plan(args: argparse.Namespace) -> int:
    from torch_matrix.cli import plan as plan_cli

    return plan_cli.main(args)


def _report(args: argparse.Namespace) -> int:
    from torch_matrix.cli import report as report_cli

    return report_cli.main(args)


def _pins(args: argparse.Namespace) -> int:
    from torch_matrix.cli import pins as pins_cli

    return pins_cli.main(args)


def _repro(args: argparse.Namespace) -> int:
    from torch_matrix.cli import repro as repro_cli

    return repro_cli.main(args)


def _run(args: argparse.Namespace) -> int:
    from torch_matrix.cli import run as run_cli

    return run_cli.main(args)


def _check(args: argparse.Namespace) -> int:
    from torch_matrix.cli import check as check_cli

    return check_cli.main(args)


def _help(args: argparse.Namespace) -> int:
    from torch_matrix.cli import reference

    return reference.main(args)


DESCRIPTION = (
    "Find PyTorch version breakages before your users do: install torch / torchvision / "
    "Python / variant combinations into fresh venvs, probe each (or run your own tests), "
    "and print a compatibility table with suggested requirement pins."
)
EPILOG = (
    "Start with `torch-matrix plan` (the cells, nothing installed), then `torch-matrix run`. "
    "The spec reference, every key and environment variable: `torch-matrix help spec`. "
    "Each command's options: `torch-matrix COMMAND --help`."
)


# torch_matrix.pins.specifiers.PinPolicy and torch_matrix.run.pins.TRADEOFF_CHOICES (a test holds
# them equal; not imported here, so that parsing a command line loads no pins code).
PIN_POLICIES = ("proven", "admit-untested", "tested-only")
TRADEOFFS = ("pin", "pin-first", "show")


def add_pins_options(parser: argparse.ArgumentParser) -> None:
    """The pins pipeline's options (``torch_matrix.run.pins.PinsOptions``): the same for
    ``pins`` and ``report --pins``."""
    parser.add_argument(
        "--no-coverage",
        action="store_true",
        help="do not ask the index for released versions (coverage unknown)",
    )
    parser.add_argument(
        "--policy",
        choices=PIN_POLICIES,
        default="proven",
        help="proven (default): exclude each break's window of releases whole when follow-up "
        "cells proved both its edges (<2.6, !=2.0.*), else its tested bad versions; "
        "admit-untested: exclude only tested bad versions (!=X); "
        "tested-only: bounds may also exclude untested releases, without proof",
    )
    parser.add_argument(
        "--tradeoffs",
        choices=TRADEOFFS,
        default="pin",
        help="a break no pin closes without excluding a version seen working (numpy 2 with "
        "older torch): pin (default; pin-first is the same): pin one answer by the rule, "
        "keep torch and torchvision whole and constrain the incidental dependency (numpy<2, "
        "setuptools<82); its line names the working pairs it gives up, the others are shown; "
        "show: pin none, leave the break open and the choice to you",
    )


def _build_parser() -> argparse.ArgumentParser:
    from torch_matrix import __version__

    parser = argparse.ArgumentParser(prog="torch-matrix", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"torch-matrix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    helper = sub.add_parser(
        "help",
        help="the spec reference that ships with torch-matrix: every key, "
        "every environment variable (`torch-matrix help spec [TOPIC]`)",
    )
    helper.add_argument(
        "subject",
        nargs="?",
        choices=("spec", "env", "environment"),
        help="spec: the spec reference; env: the environment variables",
    )
    helper.add_argument(
        "topic", nargs="?", help="a key or topic, e.g. index, extras, probes, interpreters"
    )
    helper.set_defaults(handler=_help)

    plan = sub.add_parser("plan", help="print the cells a spec expands to, without installing")
    plan.add_argument(
        "--spec", help="spec file (default: $TORCH_MATRIX_SPEC, ./matrix.toml, built-in)"
    )
    plan.add_argument(
        "--default",
        action="store_true",
        help="plan the built-in default matrix when no spec is found here",
    )
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.add_argument(
        "--no-cost",
        action="store_true",
        help="skip the cost (bytes to download, disk at the peak): no index reads beyond the cells'",
    )
    plan.add_argument("--shard", help="only the cells of shard K/N (1-based)")
    plan.add_argument(
        "--shards", type=int, help="print the N shards (with --json: a list for a CI matrix)"
    )
    plan.set_defaults(handler=_plan)

    report = sub.add_parser("report", help="merge cell results and print the compatibility table")
    report.add_argument(
        "results_dir",
        nargs="?",
        default=None,
        help="a run's results directory (default: the run of the spec found here, "
        "results/<name>; else the only run under results/; else all of results/)",
    )
    report.add_argument("--pivot", action="store_true", help="torch rows x variant/python columns")
    report.add_argument("--spec", help="flag cells this spec plans that have no result")
    report.add_argument("--max-summary-bytes", type=int, default=None)
    report.add_argument(
        "--plan",
        metavar="PLAN_JSON",
        help="flag cells listed in this `torch-matrix plan --json` output that have no result",
    )
    report.add_argument(
        "--out",
        metavar="DIR",
        help="where to write summary.md and results.json (default: RESULTS_DIR)",
    )
    report.add_argument(
        "--format",
        choices=("text", "markdown"),
        default="text",
        help="stdout format (default: text tables)",
    )
    report.add_argument("--grid", action="store_true", help="also print a probe x cell status grid")
    report.add_argument(
        "--github-summary",
        action="store_true",
        help="append the Markdown summary to $GITHUB_STEP_SUMMARY, shortened to fit 1 MiB",
    )
    report.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a cell is an error, a planned cell is missing, or a result file "
        "is unreadable (infrastructure trouble); incompatible cells never fail it",
    )
    report.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML heatmap (opens offline; click a cell for its probes)",
    )
    report.add_argument(
        "--previous",
        metavar="RUN",
        help="with --html: highlight cells that are new or changed verdict since RUN: a results "
        "directory, its results.json, a run id from `torch-matrix history`, or `last` "
        "(the newest other run of this spec in the history)",
    )
    report.add_argument(
        "--junit", metavar="FILE", help="write JUnit XML: one testcase per cell x probe"
    )
    report.add_argument(
        "--pins",
        action="store_true",
        help="also write the suggested pins into OUT/pins (what `torch-matrix pins` writes), "
        "from the same loaded results, with the same options (--policy, --tradeoffs, "
        "--no-coverage; --spec for coverage)",
    )
    add_pins_options(report)
    report.set_defaults(handler=_report)

    pins = sub.add_parser("pins", help="derive suggested requirement pins from cell results")
    pins.add_argument(
        "results_dir",
        nargs="?",
        default=None,
        help="a run's results directory (default: as for report)",
    )
    pins.add_argument(
        "--out", help="directory for constraints.txt, requirements snippet, pins.json"
    )
    pins.add_argument(
        "--apply", metavar="FILE", help="update a requirements.txt or pyproject.toml in place"
    )
    pins.add_argument("--dry-run", action="store_true", help="with --apply: show the diff only")
    pins.add_argument(
        "--pr-body",
        metavar="FILE",
        help="also write a pull request body (Markdown): the code fixes first, then the pins "
        "($TORCH_MATRIX_RUN_URL names the run)",
    )
    pins.add_argument("--spec", help="spec whose [index] lists released versions for coverage")
    add_pins_options(pins)
    pins.add_argument(
        "--history",
        nargs="?",
        const="",
        metavar="DB",
        help="quote each exclusion's pass rate over the last --last nights from the history "
        "database (default DB: $TORCH_MATRIX_HISTORY, else <results root>/history.sqlite)",
    )
    pins.add_argument(
        "--last", type=int, default=30, metavar="N", help="nights for --history (default 30)"
    )
    pins.set_defaults(handler=_pins)

    repro = sub.add_parser("repro", help="an issue-ready Markdown bundle for one cell (and probe)")
    repro.add_argument("cell", help="cell id, e.g. t1.12.0-py3.10-nplt2")
    repro.add_argument(
        "probe", nargs="?", help="probe name (default: the first failing required probe)"
    )
    repro.add_argument(
        "--results",
        default="results",
        metavar="DIR",
        help="results directory or merged results.json (default: results)",
    )
    repro.add_argument(
        "--spec",
        help="the spec that planned the run, for the rerun line (default: $TORCH_MATRIX_SPEC)",
    )
    repro.add_argument("--out", metavar="FILE", help="write the Markdown here instead of stdout")
    repro.add_argument(
        "--target",
        metavar="TARGET",
        help="the hardware target the bundle is about "
        "(a part of its name: 'RTX 5090', 'sm_70', 'driver 535'); default: the first on which the "
        "build does not run, if any",
    )
    repro.set_defaults(handler=_repro)

    check = sub.add_parser(
        "check",
        help="probe an existing environment as it is (installs nothing) and record it as a cell",
    )
    check.add_argument(
        "--python",
        metavar="PATH",
        help="the environment's interpreter (default: the one running torch-matrix)",
    )
    check.add_argument(
        "--results",
        metavar="DIR",
        help="where the cell result goes (default: $TORCH_MATRIX_RESULTS/check, i.e. results/check)",
    )
    check.add_argument(
        "--spec",
        help="spec whose [probes] table (selection, required, custom probes) applies "
        "(default: $TORCH_MATRIX_SPEC, ./matrix.toml, built-in)",
    )
    check.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="GPU",
        help="judge the environment's build for this GPU: a name (V100, RTX 4090, H100) or a "
        "compute capability (sm_89, 8.9); repeatable. Default: the spec's [targets], else "
        "the GPUs and driver found here",
    )
    check.add_argument(
        "--driver",
        action="append",
        default=[],
        metavar="VERSION",
        help="judge it for this NVIDIA driver (535.104, 580.65.06); repeatable, each GPU with each",
    )
    check.add_argument(
        "--json",
        action="store_true",
        help="print the cell's verdict and its hardware verdicts as JSON instead of the tables",
    )
    check.set_defaults(handler=_check)

    from torch_matrix.cli.history import (
        add_parsers as history_parsers,
    )  # argparse only: the work is imported lazily

    history_parsers(sub)

    from torch_matrix.cli.bisection import add_parser as bisect_parser

    bisect_parser(sub)

    from torch_matrix.cli.ecosystem import add_parser as ecosystem_parser

    ecosystem_parser(sub)

    run = sub.add_parser(
        "run",
        allow_abbrev=False,
        help="run the matrix for the spec found here, with the noxfile that ships with torch-matrix",
        description="Run the matrix for the spec found from the current directory (--spec, "
        "$TORCH_MATRIX_SPEC, ./matrix.toml, [tool.torch-matrix] in ./pyproject.toml; with "
        "--default the built-in one) with the noxfile that ships with torch-matrix. Any other option "
        "goes to nox unchanged: -s/-t/-k to select cells or sessions, -j N for parallel "
        "cells, -l to list, and `-- --redo` after a `--`. Results go to ./results, venvs to "
        "./.nox.",
        usage="torch-matrix run [--spec FILE | --default] [--results DIR] [nox options] [-- posargs]",
    )
    run.add_argument(
        "--spec",
        help="spec file (default: $TORCH_MATRIX_SPEC, ./matrix.toml, "
        "[tool.torch-matrix] in ./pyproject.toml; none found: an error, unless --default)",
    )
    run.add_argument(
        "--results",
        metavar="DIR",
        help="results root (default: $TORCH_MATRIX_RESULTS or ./results)",
    )
    run.add_argument(
        "--default",
        action="store_true",
        help="run the built-in default matrix when no spec is found here (three CUDA torch "
        "installs: several GB)",
    )
    run.set_defaults(handler=_run, passes_through=True)
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """argparse's answer; ``run`` keeps what it does not know for nox (and ``--`` posargs)."""
    argv = list(argv)
    parser = _build_parser()
    own, posargs = argv, []
    if argv[:1] == ["run"] and "--" in argv:  # everything after `--` is nox's posargs
        own, posargs = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args, unknown = parser.parse_known_args(own)
    if getattr(args, "passes_through", False):
        args.nox_args, args.posargs = unknown, posargs
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command != "help":  # the table of variables must print whatever their values
            settings.parse(os.environ)  # every TORCH_MATRIX_* variable, before any work
        handler: Callable[[argparse.Namespace], int] = args.handler
        return int(handler(args) or 0)
    except UserError as error:
        console.error(error)
        return EXIT_BAD_INPUT
    except WriteFailed as error:  # a file it writes (--out, --apply, the report's files): one line
        console.error(error.user_error())
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        console.note("torch-matrix: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`torch-matrix report ... | head`): files are written before the
        # table is printed, so nothing is lost; no traceback, and no second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool cut off by its reader


if __name__ == "__main__":
    sys.exit(main())
