"""Commands: `torch-matrix COMMAND`, one registry (``COMMANDS``: name -> module, summary), one dispatch.

May import every package above; the console script is `torch_matrix.cli:main`, `python -m torch_matrix.cli`
runs it too. pip's ``commands/__init__.py`` is the model: the top-level ``--help`` and ``torch-matrix
help`` list the registry's summaries without importing a command; the chosen command's module is
imported alone, adds its options (``add_arguments(parser, command)``) and does the work
(``main(args)``). A new command is one line in ``COMMANDS`` and a module with those two functions.
This file only parses arguments and turns ``UserError`` into its error and hint lines on stderr
with exit code 2.

One module per command: `plan`, `run`, `check`, `report`, `repro`, `pins`, `history`, `bisection`,
`ecosystem` and `ecosystem_report`, `reference` (``help``); `rundir` is the run an argument-less
``report`` or ``pins`` means.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import importlib
from dataclasses import dataclass
from typing import Any, Sequence

from torch_matrix.edges import console, proc
from torch_matrix.edges.fileio import WriteFailed
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import EXIT_BAD_INPUT, UserError


@dataclass(frozen=True)
class CommandInfo:
    """One command: the module that holds its ``add_arguments`` and ``main``, and its one-line summary."""

    module: str
    summary: str


COMMANDS: dict[str, CommandInfo] = {
    "help": CommandInfo(
        "torch_matrix.cli.reference",
        "the spec reference that ships with torch-matrix: every key, every environment variable "
        "(`torch-matrix help spec [TOPIC]`)",
    ),
    "plan": CommandInfo(
        "torch_matrix.cli.plan", "print the cells a spec expands to, without installing"
    ),
    "report": CommandInfo(
        "torch_matrix.cli.report", "merge cell results and print the compatibility table"
    ),
    "pins": CommandInfo(
        "torch_matrix.cli.pins", "derive suggested requirement pins from cell results"
    ),
    "repro": CommandInfo(
        "torch_matrix.cli.repro", "an issue-ready Markdown bundle for one cell (and probe)"
    ),
    "check": CommandInfo(
        "torch_matrix.cli.check",
        "probe an existing environment as it is (installs nothing) and record it as a cell",
    ),
    "import": CommandInfo(
        "torch_matrix.cli.history", "add a merged run's results to the history database"
    ),
    "history": CommandInfo(
        "torch_matrix.cli.history",
        "list the runs in the history, with flaky cell+probe pass rates",
    ),
    "diff": CommandInfo(
        "torch_matrix.cli.history", "what changed between two runs (results dirs or run ids)"
    ),
    "bisect": CommandInfo(
        "torch_matrix.cli.bisection",
        "find the first torch release (or nightly) that breaks a probe",
    ),
    "ecosystem": CommandInfo(
        "torch_matrix.cli.ecosystem",
        "a torch release against many downstream projects' own tests (like Rust's crater)",
    ),
    "run": CommandInfo(
        "torch_matrix.cli.run",
        "run the matrix for the spec found here, with the noxfile that ships with torch-matrix",
    ),
}


def command_module(name: str) -> Any:
    """The module of command ``name`` (imported now, and only it)."""
    return importlib.import_module(COMMANDS[name].module)


def command_list() -> str:
    """Every command with its summary, in the registry's order (``torch-matrix help``)."""
    width = max(len(name) for name in COMMANDS)
    return "".join(f"  {name:<{width}}  {info.summary}\n" for name, info in COMMANDS.items())


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


def _build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser: every command of the registry listed with its summary; the options of
    ``only`` (the command chosen), or of every command when ``only`` is None."""
    from torch_matrix import __version__

    parser = argparse.ArgumentParser(prog="torch-matrix", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"torch-matrix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, info in COMMANDS.items():
        command = sub.add_parser(name, help=info.summary)
        if only is None or name == only:
            command_module(name).add_arguments(command, name)
    return parser


def _chosen(argv: Sequence[str]) -> str | None:
    """The command an argument list names: its first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """argparse's answer; ``run`` keeps what it does not know for nox (and ``--`` posargs)."""
    argv = list(argv)
    own, posargs = argv, []
    parser = _build_parser(only=_chosen(argv) or "")
    if argv[:1] == ["run"] and "--" in argv:  # everything after `--` is nox's posargs
        own, posargs = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args, unknown = parser.parse_known_args(own)
    if getattr(args, "passes_through", False):
        args.nox_args, args.posargs = unknown, posargs
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


# Commands that read their inputs once, write and exit: their objects live until the end.
ONE_PASS = frozenset({"report", "pins", "import", "history", "diff"})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the tool's own process (not a test calling main): SIGTERM stops it as ^C
        proc.stop_on_sigterm()
        if args.command in ONE_PASS:
            # No cyclic collector in a one-pass process: it would only rescan the results that
            # live until the exit (``cyclic_gc_paused`` pauses it for the load; turned back on,
            # its first pass over the 2,500 results of an import cost 0.06 s of CPU)
            gc.disable()
    try:
        if args.command != "help":  # the table of variables must print whatever their values
            settings.parse(os.environ)  # every TORCH_MATRIX_* variable, before any work
        return int(command_module(args.command).main(args) or 0)
    except UserError as error:
        console.error(error)
        return EXIT_BAD_INPUT
    except WriteFailed as error:  # a file it writes (--out, --apply, the report's files): one line
        console.error(error.user_error())
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as interrupt:
        console.note("torch-matrix: interrupted")
        return 128 + (interrupt.signum if isinstance(interrupt, proc.Terminated) else 2)
    except BrokenPipeError:
        # The reader went away (`torch-matrix report ... | head`): files are written before the
        # table is printed, so nothing is lost; no traceback, and no second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell tool cut off by its reader


if __name__ == "__main__":
    sys.exit(main())
