"""Where a run lives and how to name it again: the one place for paths, variables and repro text.

``results/<run>/cells/<cell-id>.json``: one file per cell under the results root
(``$TORCH_MATRIX_RESULTS``, default ``./results``); ``<run>`` is the spec's ``name``.
The environment variables of a run and the nox session that runs a cell are named
here too, so the report's "rerun this cell" line and the noxfile cannot drift apart.
Pure: builds paths and strings, touches nothing.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from torch_matrix.vocab import settings
from torch_matrix.vocab.settings import (  # the run's variables (vocab/settings.py declares them)
    BACKOFF_ENV as BACKOFF_ENV,
    GPUS_ENV as GPUS_ENV,
    GRACE_ENV as GRACE_ENV,
    REDO_ENV as REDO_ENV,
    RESULTS_ENV as RESULTS_ENV,
    SHARD_ENV as SHARD_ENV,
    SPEC_ENV as SPEC_ENV,
)

LOCK_NAME = (
    ".torch-matrix.lock"  # in the run directory and the nox env dir (torch_matrix/edges/locks.py)
)

DEFAULT_RESULTS = settings.DEFAULT_RESULTS
LEGACY_RESULTS = settings.LEGACY_RESULTS  # the default before #42: still read, never written
DEFAULT_RUN = "default"
CELLS_DIR = "cells"
MERGED_NAME = "results.json"
SUMMARY_NAME = "summary.md"
PINS_DIR = "pins"  # what `torch-matrix pins RESULTS_DIR` writes by default, under the run dir
HTML_NAME = "report.html"  # nox -s report writes it; torch-matrix report --html FILE anywhere
GPU_LOCKS_DIR = ".gpu-locks"

CHECK_RUN = "check"  # torch-matrix check: results/check/ unless --results says otherwise

MATRIX_SESSION = "matrix"  # noxfile.py: one ``matrix(<cell-id>)`` session per cell
REPORT_SESSION = "report"
FOLLOWUPS_SESSION = (
    "followups"  # the follow-up cells planned from the run's results (plan/followups.py)
)


def results_root(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(settings.read(environ, RESULTS_ENV) or DEFAULT_RESULTS).absolute()


def run_dir(root: str | os.PathLike[str], run_name: str | None = None) -> Path:
    """``<root>/<run>``: everything one spec's runs write."""
    return Path(root) / (run_name or DEFAULT_RUN)


def cells_dir(run: str | os.PathLike[str]) -> Path:
    """``<run>/cells``: the cell result files of a run directory."""
    return Path(run) / CELLS_DIR


# A cell id is a file name and a nox session argument: letters, digits, '.', '_', '-'.
ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def is_cell_id(text: str) -> bool:
    """Whether ``text`` can be a cell's id (never a path: no '/', not starting with '.' or '-')."""
    return bool(text) and text[0] not in ".-" and not ID_UNSAFE.search(text)


def cell_file(cells: str | os.PathLike[str], cell_id: str) -> Path:
    """``<run>/cells/<cell-id>.json``, given the cells directory."""
    return Path(cells) / f"{cell_id}.json"


def cell_session(cell_id: str) -> str:
    return f"{MATRIX_SESSION}({cell_id})"


# The "spec" of a rerun line for a run of the built-in default matrix (it had no spec file):
# ``torch-matrix run`` takes that matrix only when asked.
DEFAULT_SPEC_OPTION = "--default"


# How a pyproject spec names itself in messages (``spec.parse``: ``<file> [tool.torch-matrix]``);
# ``--spec`` takes the file alone.
PYPROJECT_SHOWN = " [tool.torch-matrix]"


def spec_file(shown: str) -> str:
    """The file of a spec as a message or a plan names it: ``x/pyproject.toml [tool.torch-matrix]``
    -> ``x/pyproject.toml``; anything else unchanged."""
    return shown[: -len(PYPROJECT_SHOWN)] if shown.endswith(PYPROJECT_SHOWN) else shown


def _spec_option(spec_path: str | os.PathLike[str] | None) -> str:
    if not spec_path:
        return ""
    if str(spec_path) == DEFAULT_SPEC_OPTION:
        return f" {DEFAULT_SPEC_OPTION}"
    return f" --spec {shlex.quote(spec_file(str(spec_path)))}"


def repro_command(cell_id: str, spec_path: str | os.PathLike[str] | None = None) -> str:
    """The shell line that reruns one cell, already complete or not: ``torch-matrix run`` (the shipped
    noxfile), so it works where it is printed, in a project with no noxfile of its own too.
    ``spec_path`` ``DEFAULT_SPEC_OPTION``: a cell of the built-in default matrix."""
    spec = _spec_option(spec_path)
    return f"torch-matrix run{spec} -s {shlex.quote(cell_session(cell_id))} -- --redo"


def followup_repro_command(cell_id: str, spec_path: str | os.PathLike[str] | None = None) -> str:
    """The shell line that reruns one follow-up cell: it has no session of its own; the follow-up
    session drops its result (``cells/<id>.json`` of the run directory, wherever that is) and plans
    it again. Through ``torch-matrix run`` (the shipped noxfile), like every rerun line, so it works
    where it is printed, in a project with no noxfile of its own too."""
    spec = _spec_option(spec_path)
    return f"torch-matrix run{spec} -s {FOLLOWUPS_SESSION} -- --redo {shlex.quote(cell_id)}"


def check_command(python: str | os.PathLike[str]) -> str:
    """The shell line that checks an existing environment again (on the machine that has it)."""
    return f"torch-matrix check --python {shlex.quote(str(python))}"
