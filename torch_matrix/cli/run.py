"""``torch-matrix run [--spec FILE] [--results DIR] [nox options] [-- posargs]``.

Runs the matrix for the spec found from the current directory (``--spec``,
``$TORCH_MATRIX_SPEC``, ``./matrix.toml``, ``[tool.torch-matrix]`` in ``./pyproject.toml``,
or, with ``--default``, the built-in default) with the noxfile that ships with the package (torch_matrix/noxfile.py),
so a downstream repository needs no noxfile. nox's selection and parallel options
(``-s``, ``-t``, ``-k``, ``-j``, ``-l``, ``-x``, ...) and ``--`` pass through unchanged.
Results go to ``./.torch-matrix/results`` (or ``$TORCH_MATRIX_RESULTS`` / ``--results``), venvs to
``./.nox/<spec name>`` (or ``--envdir``): under the current directory, never inside the package.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from torch_matrix.edges import proc
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import RESULTS_ENV, SPEC_ENV
from torch_matrix.world.specfile import load_spec, require_spec

NOXFILE = Path(__file__).resolve().parent.parent / "noxfile.py"
OWN_NOXFILE_OPTIONS = ("-f", "--noxfile", "--noxfile=")


def nox_command(
    nox_args: Sequence[str], posargs: Sequence[str], cwd: Path, spec_name: str = ""
) -> list[str]:
    """The nox command line (pure): the shipped noxfile, venvs under ``cwd/.nox/<spec name>`` unless
    asked otherwise: two specs of one project (``matrix.toml``, ``gpu.toml``) never share a venv."""
    for arg in nox_args:
        if arg in OWN_NOXFILE_OPTIONS[:2] or arg.startswith(OWN_NOXFILE_OPTIONS[2]):
            raise UserError(
                "torch-matrix run uses the noxfile that ships with it",
                where=arg,
                hint="run `nox -f FILE` yourself to use another one",
            )
    command = proc.python_module("nox", "--noxfile", str(NOXFILE))
    if not any(arg == "--envdir" or arg.startswith("--envdir=") for arg in nox_args):
        folder = re.sub(r"[^A-Za-z0-9._-]+", "_", spec_name).strip("._") if spec_name else ""
        command += ["--envdir", str(cwd / ".nox" / folder if folder else cwd / ".nox")]
    command += list(nox_args)
    if posargs:
        command += ["--", *posargs]
    return command


def run_environment(
    spec: str | None,
    results: str | None,
    cwd: Path,
    environ: Mapping[str, str] = os.environ,
    default: bool = False,
) -> dict[str, str]:
    """nox runs from the noxfile's directory, so the spec and results are made absolute here."""
    env = dict(environ)
    source = require_spec(spec, default, environ, str(cwd))
    path = source.path if source.path.is_absolute() else cwd / source.path
    if not path.is_file():
        raise UserError(
            "no such spec file",
            where=str(path),
            hint="pass an existing file with --spec (or $TORCH_MATRIX_SPEC)",
        )
    env[SPEC_ENV] = str(path)
    root = Path(results or settings.read(environ, RESULTS_ENV) or settings.DEFAULT_RESULTS)
    env[RESULTS_ENV] = str(root if root.is_absolute() else cwd / root)
    return env


def main(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    env = run_environment(args.spec, args.results, cwd, default=getattr(args, "default", False))
    spec_file, results_root = settings.read(env, SPEC_ENV), settings.read(env, RESULTS_ENV)
    command = nox_command(args.nox_args, args.posargs, cwd, load_spec(spec_file, env).name)
    print(f"torch-matrix run: spec {spec_file}, results under {results_root}", file=sys.stderr)
    return proc.call(command, env=env, cwd=cwd)  # an interrupt: 130 (SIGTERM 143), cli.main


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix run``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.allow_abbrev = False
    parser.description = (
        "Run the matrix for the spec found from the current directory (--spec, "
        "$TORCH_MATRIX_SPEC, ./matrix.toml, [tool.torch-matrix] in ./pyproject.toml; with "
        "--default the built-in one) with the noxfile that ships with torch-matrix. Any other option "
        "goes to nox unchanged: -s/-t/-k to select cells or sessions, -j N for parallel "
        "cells, -l to list, and `-- --redo` after a `--`. Results go to ./.torch-matrix/results, venvs to "
        "./.nox."
    )
    parser.usage = (
        "torch-matrix run [--spec FILE | --default] [--results DIR] [nox options] [-- posargs]"
    )
    parser.add_argument(
        "--spec",
        help="spec file (default: $TORCH_MATRIX_SPEC, ./matrix.toml, "
        "[tool.torch-matrix] in ./pyproject.toml; none found: an error, unless --default)",
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        help="results root (default: $TORCH_MATRIX_RESULTS or ./.torch-matrix/results)",
    )
    parser.add_argument(
        "--default",
        action="store_true",
        help="run the built-in default matrix when no spec is found here (three CUDA torch "
        "installs: several GB)",
    )
    parser.set_defaults(passes_through=True)
