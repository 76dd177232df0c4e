"""``torch-matrix bisect --good X --bad Y [--probe NAME | --test NODEID]``: the edge of a bisect.

Parses, calls ``torch_matrix.run.bisection.run_bisect`` (the versions, the held spec, the cells,
one at a time), prints its progress to stderr and its answer to stdout (``--json``: for a machine).
Exits 0 when an edge is found, 1 when the bisect is inconclusive.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping

from torch_matrix.vocab import settings as env_settings

NIGHTLY_ENV = env_settings.NIGHTLY_ENV
DEFAULT_NIGHTLY_INDEX = env_settings.DEFAULT_NIGHTLY_INDEX
EXIT_INCONCLUSIVE = 1


def main(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> int:
    from torch_matrix.run.bisection import BisectRequest, run_bisect

    request = BisectRequest(
        good=args.good,
        bad=args.bad,
        probe=args.probe,
        test=args.test,
        spec=args.spec,
        python=args.python,
        variant=args.variant,
        set_axes=tuple(args.set or ()),
        nightly=bool(args.nightly),
        nightly_index=args.nightly_index,
        max_cells=args.max_cells,
        envdir=args.envdir,
        redo=bool(args.redo),
    )
    answer = run_bisect(request, environ, say=lambda line: print(line, file=sys.stderr))
    if args.json:
        sys.stdout.write(json.dumps(answer.as_json(), indent=2) + "\n")
    else:
        sys.stdout.write(answer.text())
    return 0 if answer.url else EXIT_INCONCLUSIVE


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix bisect``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.add_argument(
        "--good", required=True, help="a torch version that works (with --nightly: a date)"
    )
    parser.add_argument(
        "--bad", required=True, help="a later torch version that is broken (with --nightly: a date)"
    )
    judge = parser.add_mutually_exclusive_group()
    judge.add_argument(
        "--probe", help="judge each cell by this probe (default: the cell's verdict)"
    )
    judge.add_argument(
        "--test",
        metavar="NODEID",
        help="judge by a pytest node id, run in each cell from the project (the spec's "
        "directory); the spec's install key must bring pytest, e.g. install = ['.[test]']",
    )
    parser.add_argument(
        "--spec", help="spec file (default: $TORCH_MATRIX_SPEC, ./matrix.toml, built-in)"
    )
    parser.add_argument(
        "--python", help="the Python held for every cell (default: the spec's first)"
    )
    parser.add_argument("--variant", help="the variant held (default: the spec's first)")
    parser.add_argument(
        "--set",
        action="append",
        metavar="AXIS=VALUE",
        help="the value held for an extra axis (default: its first value); repeatable",
    )
    parser.add_argument(
        "--nightly", action="store_true", help="bisect nightlies by date (--good/--bad are dates)"
    )
    parser.add_argument(
        "--nightly-index",
        metavar="URL",
        help=f"nightly index (default: ${NIGHTLY_ENV}, else {DEFAULT_NIGHTLY_INDEX})",
    )
    parser.add_argument("--max-cells", type=int, help="cell limit (default: ceil(log2 N) + 2)")
    parser.add_argument("--envdir", help="where the cells' venvs go (default: ./.nox)")
    parser.add_argument(
        "--redo", action="store_true", help="rerun cells that already have a complete result"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable answer")
