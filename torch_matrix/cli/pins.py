"""``torch-matrix pins RESULTS_DIR [--out DIR] [--apply FILE [--dry-run]] [--no-coverage]``.

Loads cell results, derives the suggestion (``torch_matrix.pins``), prints it, writes
constraints.txt, requirements-pins.txt and pins.json, and optionally updates a
downstream requirements file. Coverage needs the released versions from the package
index; offline or with ``--no-coverage`` the suggestion says coverage is unknown.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch_matrix.edges import console
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.edges.fileio import atomic_write, cyclic_gc_paused
from torch_matrix.vocab.layout import PINS_DIR
from torch_matrix.pins import PYTHON, requirement_lines
from torch_matrix.run.pins import (
    PinsOptions,
    derive_pins,
    missing_of,
    no_evidence_line,
    summary_lines,
    write_outputs,
    write_target_outputs,
)
from torch_matrix.pins.pr_body import render_pr_body
from torch_matrix.pins.render import render_text
from torch_matrix.pins.target_render import render_target_summary
from torch_matrix.world.results import load_results, no_results_hint
from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.settings import RUN_URL_ENV

EXIT_NO_EVIDENCE = 1  # no cell was seen working or failing: no all-clear


def history_confidence(suggestion, args: argparse.Namespace) -> str:
    """The pass rate of each excluded version's failing cells+probes over the last nights (additive:
    the pins themselves do not change; ``torch_matrix.report.diff.exclusion_confidence`` is the pure part)."""
    from torch_matrix.report.diff import exclusion_confidence
    from torch_matrix.world.history import db_path, open_history, run_name_of

    exclusions = [
        exclusion
        for line in requirement_lines(suggestion.recommended)
        for exclusion in line.exclusions
    ]
    window = getattr(args, "last", 30) or 30
    with open_history(db_path(args.history or None), create=False) as history:
        spec = run_name_of(Path(args.results_dir))
        if spec not in history.specs():
            return f"\nHistory: no runs of {spec!r} in {history.path} (specs: {', '.join(history.specs()) or 'none'})\n"
        rates = history.pass_rates(spec, window)
        where = history.path
    lines = exclusion_confidence(exclusions, rates)
    out = ["", f"History over the last {window} night(s) of {spec!r} ({where}):"]
    out += [f"  {label}: {text}" for label, text in lines] or [
        "  no excluded version has history yet"
    ]
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.rundir import resolve

    resolve(args, "pins")
    with cyclic_gc_paused():  # the loaded results live until the end: rescanning them is waste
        return _pins(args)


def _pins(args: argparse.Namespace) -> int:
    loaded = load_results(args.results_dir)
    for problem in loaded.problems:
        console.warn(str(problem))
    if not loaded.results:
        raise UserError("no cell results found", str(args.results_dir), hint=no_results_hint())
    outcome = derive_pins(loaded.results, PinsOptions.from_args(args))
    suggestion, per_target = outcome.suggestion, outcome.per_target
    # Everything is written (pins files, the applied requirements file) before anything is printed:
    # a reader that stops early (`| head`) must not cost a file.
    text = [render_text(suggestion)]
    missing = missing_of(Path(args.results_dir), loaded.results)
    if missing:
        text.append(
            f"\nPlanned but missing ({len(missing)}; no evidence from them in these pins):\n"
            + "".join(
                f"  {cell_id}: {terminal(why, multiline=False)}\n"
                for cell_id, why in sorted(missing.items())
            )
        )
    if per_target:
        text.append("\n" + render_target_summary(per_target))
    if getattr(args, "history", None) is not None:
        text.append(history_confidence(suggestion, args))
    out_dir = Path(args.out) if args.out else Path(args.results_dir) / PINS_DIR
    if not (args.apply and args.dry_run):
        try:
            text += _write(args, outcome, missing, out_dir)
        except OSError as error:
            sys.stdout.write("".join(text))
            sys.stdout.flush()
            raise UserError(
                f"cannot write the pins: {error.strerror or error}",
                where=str(error.filename or out_dir),
                hint="free some space or fix the permissions, or write them elsewhere "
                "with --out DIR",
            ) from None
    if args.apply:
        text += _apply(args, suggestion)
    sys.stdout.write("".join(text))
    # No cell seen working or failing: the pins line says what is missing, and the command fails.
    return EXIT_NO_EVIDENCE if no_evidence_line(suggestion) else 0


def _write(
    args: argparse.Namespace, outcome: Any, missing: Mapping[str, str], out_dir: Path
) -> list[str]:
    """The pins files (and --pr-body's), then the summary ``report --pins`` prints too."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = write_outputs(outcome.suggestion, out_dir, missing)
    per_target = write_target_outputs(outcome.per_target, out_dir)
    text = [line + "\n" for line in summary_lines(outcome.suggestion, paths, per_target, out_dir)]
    if getattr(args, "pr_body", None):  # the nightly's pull request body: fix first
        body = Path(args.pr_body)
        atomic_write(
            body, render_pr_body(outcome.suggestion, settings.read(os.environ, RUN_URL_ENV) or "")
        )
        text.append(f"wrote {body}\n")
    return text


def _apply(args: argparse.Namespace, suggestion: Any) -> list[str]:
    """--apply FILE: the requirements file updated (or, with --dry-run, the diff); what it says."""
    from torch_matrix.world.apply import (  # tomlkit: only --apply edits a file
        EXCLUDED_NOTE,
        apply_pins,
    )

    text: list[str] = []

    result = apply_pins(args.apply, requirement_lines(suggestion.recommended), dry_run=args.dry_run)
    if result.changed:
        text.append(result.diff())
    text.append(
        f"{args.apply}: "
        + (
            "not edited"
            if not result.edited
            else "not changed, but a requirement installs a release the evidence excludes "
            "(see the notes)"
            if not result.changed and any(EXCLUDED_NOTE in note for note in result.notes)
            else "no change needed"
            if not result.changed
            else "would change (dry run, nothing written)"
            if args.dry_run
            else f"updated ({len(result.changes)} requirement(s))"
        )
        + "\n"
    )
    text += [f"note: {note}\n" for note in result.notes]
    advice = ",".join(
        spec
        for pin in suggestion.recommended.pins_for(PYTHON)
        if pin.condition is None
        for spec in pin.specifiers
    )
    if advice:
        text.append(
            f"note: Requires-Python advice {advice} is not applied; update requires-python yourself\n"
        )
    return text


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix pins``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    from torch_matrix.cli import add_pins_options

    parser.add_argument(
        "results_dir",
        nargs="?",
        default=None,
        help="a run's results directory (default: as for report)",
    )
    parser.add_argument(
        "--out", help="directory for constraints.txt, requirements snippet, parser.json"
    )
    parser.add_argument(
        "--apply", metavar="FILE", help="update a requirements.txt or pyproject.toml in place"
    )
    parser.add_argument("--dry-run", action="store_true", help="with --apply: show the diff only")
    parser.add_argument(
        "--pr-body",
        metavar="FILE",
        help="also write a pull request body (Markdown): the code fixes first, then the pins "
        "($TORCH_MATRIX_RUN_URL names the run)",
    )
    parser.add_argument(
        "--spec",
        help="spec whose [index] lists released versions for coverage (default: the spec the "
        "run planned its cells with, as its planned-cells.json names it)",
    )
    add_pins_options(parser)
    parser.add_argument(
        "--history",
        nargs="?",
        const="",
        metavar="DB",
        help="quote each exclusion's pass rate over the last --last nights from the history "
        "database (default DB: $TORCH_MATRIX_HISTORY, else <results root>/history.sqlite)",
    )
    parser.add_argument(
        "--last", type=int, default=30, metavar="N", help="nights for --history (default 30)"
    )
