"""torch-matrix: one nox session per cell (`nox -l` lists them), then `report`. See matrix/nox_support.py."""

from __future__ import annotations

import os
import sys

import nox

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the checkout's matrix package

from matrix import layout, nox_support
from matrix.errors import UserError

nox.options.sessions = ["matrix"]

# Plan only when matrix cells may be selected: `nox -s tests` must not need a valid spec,
# and `nox -s report` (a CI merge job) reads only the spec's name, not the indexes.
PLAN = nox_support.MatrixPlan()
if nox_support.wants_matrix(sys.argv[1:]):
    try:
        PLAN = nox_support.load_plan()
    except UserError as error:
        nox_support.fail_cleanly(error)
    nox_support.announce_missing(PLAN)


@nox.session(venv_backend="uv", allow_parallel=True)
@nox.parametrize(["python", "cell"], [
    nox.param(python, cell_id, id=cell_id, tags=tags)
    for python, cell_id, tags in nox_support.params(PLAN)
])
def matrix(session: nox.Session, cell: str) -> None:
    """One cell: own uv venv, install, verify, probes, result file."""
    nox_support.run_matrix_cell(session, PLAN, PLAN.cell(cell))


@nox.session(python=False, allow_parallel=False)
def report(session: nox.Session) -> None:
    """Merge the run's cell results: table, summary.md, results.json, report.html, pins/."""
    run_dir = nox_support.run_dir_for_session()
    session.run(sys.executable, "-m", "matrix.cli", "report", str(run_dir),
                "--html", str(run_dir / layout.HTML_NAME), "--pins", *session.posargs, external=True)


@nox.session(python=False, allow_parallel=False)
def pins(session: nox.Session) -> None:
    """Suggested requirement pins from the run's results."""
    session.run(sys.executable, "-m", "matrix.cli", "pins",
                str(nox_support.run_dir_for_session()), *session.posargs, external=True)


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    """The test suite, in the environment torch-matrix is installed in."""
    session.run(sys.executable, "-m", "pytest", *session.posargs, external=True)


@nox.session(venv_backend="uv")
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.5")  # pinned: new ruff releases must not turn main red
    session.run("ruff", "check", "matrix", "probes", "tests", "noxfile.py", *session.posargs)


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Benchmarks against the alternatives (benchmarks/README.md); `-- --quick` for a smoke run."""
    session.run(sys.executable, "-m", "benchmarks.run", *session.posargs, external=True)
