"""``torch-matrix repro CELL [PROBE] [--results DIR] [--spec FILE] [--out FILE] [--target T]``: an issue-ready bundle.

Loads the run's results (validated, like the report), picks the cell and the probe (default: the first
failing required probe) and prints the Markdown from ``torch_matrix.report.repro`` (or writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from torch_matrix.edges import console
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.escaping import terminal
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import CELLS_DIR, SPEC_ENV
from torch_matrix.report.repro import chosen_probe, chosen_target, render_bundle
from torch_matrix.world.results import load_results


def project_source(directory: str) -> dict[str, str]:
    """The project's directory and, when it is a git checkout with a remote, its URL and commit."""
    from torch_matrix.edges import proc

    found = {"dir": directory} if directory else {}
    if not directory or not os.path.isdir(directory):
        return found
    code, url, _ = proc.run_text(
        ["git", "-C", directory, "remote", "get-url", "origin"], timeout=20
    )
    code2, commit, _ = proc.run_text(["git", "-C", directory, "rev-parse", "HEAD"], timeout=20)
    if code == 0 and code2 == 0 and url.strip() and not url.strip().startswith(("/", "file:")):
        found.update(url=url.strip(), commit=commit.strip())
    return found


def _run_spec(sources: Mapping[str, str], cell_id: str) -> str | None:
    """The spec the cell's run recorded (its planned-cells.json), for the rerun line: a run of the
    built-in default matrix reruns with --default."""
    from torch_matrix.world.runplan import read_plan, rerun_spec

    source = Path(sources.get(cell_id, ""))
    if source.parent.name != CELLS_DIR:
        return None  # from a merged results.json: no run directory of its own
    return rerun_spec(read_plan(source.parent.parent)[0])


def main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.rundir import default_root

    results_dir = Path(args.results) if args.results else default_root()
    loaded = load_results(results_dir)
    for problem in loaded.problems:
        console.warn(str(problem))
    by_id = {result.cell.id: result for result in loaded.results}
    result = by_id.get(args.cell)
    if result is None:
        close = difflib.get_close_matches(args.cell, list(by_id), n=3, cutoff=0.5)
        hint = (
            ("did you mean " + ", ".join(close) + "?")
            if close
            else (
                f"cells here: {', '.join(sorted(by_id)[:6])}{' ...' if len(by_id) > 6 else ''}"
                if by_id
                else "run the matrix first (nox -s matrix), or pass --results DIR"
            )
        )
        raise UserError(f"no result for cell {args.cell!r}", str(results_dir), hint=hint)
    if args.probe and result.probe(args.probe) is None:
        names = (
            ", ".join(probe.name for probe in result.probes) or "none (the cell was not installed)"
        )
        raise UserError(
            f"cell {args.cell} has no result for probe {args.probe!r}",
            str(results_dir),
            hint=f"its probes: {names}",
        )
    spec = args.spec or settings.read(os.environ, SPEC_ENV) or _run_spec(loaded.sources, args.cell)
    if chosen_probe(result, args.probe) is None and not args.probe:
        print(
            f"torch-matrix: note: every probe of {args.cell} passed; the bundle describes the cell",
            file=sys.stderr,
        )
    wanted = getattr(args, "target", None)
    if wanted and chosen_target(result, wanted) is None:
        names = (
            "; ".join(str(t["target"]) for t in result.targets)
            or "none (the run had no [targets], or its build facts were not read)"
        )
        raise UserError(
            f"cell {args.cell} has no verdict for a target matching {wanted!r}",
            str(results_dir),
            hint=f"its targets: {names}",
        )
    probe = chosen_probe(result, args.probe)
    project = (
        project_source(str(probe.evidence.get("cwd") or ""))
        if probe is not None and probe.isolation == "command"
        else {}
    )
    text = render_bundle(
        result, loaded.results, args.probe, spec_path=spec, target=wanted, project=project
    )
    if args.out:
        atomic_write(Path(args.out), terminal(text))
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(terminal(text))
    return 0


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix repro``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.add_argument("cell", help="cell id, e.g. t1.12.0-py3.10-nplt2")
    parser.add_argument(
        "probe", nargs="?", help="probe name (default: the first failing required probe)"
    )
    parser.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="results directory or merged results.json (default: $TORCH_MATRIX_RESULTS or "
        "./.torch-matrix/results; a run the old default left in ./results is still read)",
    )
    parser.add_argument(
        "--spec",
        help="the spec that planned the run, for the rerun line (default: $TORCH_MATRIX_SPEC)",
    )
    parser.add_argument("--out", metavar="FILE", help="write the Markdown here instead of stdout")
    parser.add_argument(
        "--target",
        metavar="TARGET",
        help="the hardware target the bundle is about "
        "(a part of its name: 'RTX 5090', 'sm_70', 'driver 535'); default: the first on which the "
        "build does not run, if any",
    )
