"""The matrix of the spec found here: one `matrix(...)` session per cell. After the cells,
`followups` (the cells that prove each pin) and `report` (table, report.html, pins) run too,
also when you select cells with -s/-k/-t (the cells queue them). `pins` prints the pins again.
`-- --redo` reruns cells that have a result.
"""

# For contributors: this file ships inside the package; ``torch-matrix run`` runs it for the spec
# found from the current directory (a downstream repository needs no noxfile of its own), and this
# repository's ``noxfile.py`` imports it. The logic lives in torch_matrix/run/sessions.py.

from __future__ import annotations

import os
import sys

import nox

from torch_matrix.vocab import layout
from torch_matrix.run import matrixplan, sessions
from torch_matrix.run.selection import wants_matrix
from torch_matrix.edges.proc import python_module
from torch_matrix.vocab.errors import UserError

# What runs (and what `nox -l` marks `*`): the cells, then the two sessions they queue anyway.
nox.options.sessions = [layout.MATRIX_SESSION, layout.FOLLOWUPS_SESSION, layout.REPORT_SESSION]

# Plan only when matrix cells may be selected: `nox -s tests` must not need a valid spec,
# and `nox -s report` (a CI merge job) reads only the spec's name, not the indexes.
sessions.check_settings()  # every TORCH_MATRIX_* variable, for every session (nox -l included)
PLAN = matrixplan.MatrixPlan()
if wants_matrix(sys.argv[1:]):
    try:
        PLAN = matrixplan.load_plan(listing=matrixplan.is_listing(sys.argv[1:]))
        matrixplan.lock_run(PLAN, sys.argv[1:])  # one run per results dir and env dir
        matrixplan.prepare_cells(PLAN, sys.argv[1:])  # half-made venvs cleared; planned-cells.json
    except UserError as error:
        matrixplan.fail_cleanly(error)
    matrixplan.announce_missing(PLAN)
    sessions.stop_on_sigterm()  # docker stop / a cancelled CI job: clean up like Ctrl-C


@nox.session(venv_backend="uv", allow_parallel=True)
@nox.parametrize(
    ["python", "cell"],
    [
        nox.param(python, cell_id, id=cell_id, tags=tags)
        for python, cell_id, tags in matrixplan.params(PLAN)
    ],
)
def matrix(session: nox.Session, cell: str) -> None:
    """One cell: own uv venv, install, verify, probes, result file."""
    sessions.run_matrix_cell(session, PLAN, PLAN.cell(cell))


@nox.session(python=False, allow_parallel=False)
def followups(session: nox.Session) -> None:
    """Follow-up cells planned from the results: counterfactuals, and the edges of each break
    (bisected over the index's releases) that prove the pins; capped by $TORCH_MATRIX_FOLLOWUPS."""
    sessions.run_followups_session(session)


@nox.session(python=False, allow_parallel=False)
def report(session: nox.Session) -> None:
    """Merge the run's cell results: table, summary.md, results.json, report.html, pins/."""
    run_dir = matrixplan.run_dir_for_session()
    if not os.environ.get("CI"):
        # A local run feeds the local history (<results root>/history.sqlite; idempotent), so
        # `torch-matrix history` and `diff` answer after two runs. CI imports where its history
        # lives (the nightly workflow's branch), not into a runner's workspace. First, so the
        # run still ends with the report and where its files are.
        # Exit 2 (no results to import yet) is said in one line and does not stop the report.
        session.run(
            *python_module("torch_matrix.cli", "import", str(run_dir)),
            external=True,
            success_codes=[0, 2],
        )
    session.run(
        *python_module(
            "torch_matrix.cli",
            "report",
            str(run_dir),
            "--html",
            str(run_dir / layout.HTML_NAME),
            "--pins",
            *matrixplan.report_posargs(session.posargs),
        ),
        external=True,
    )


@nox.session(python=False, allow_parallel=False)
def pins(session: nox.Session) -> None:
    """Suggested requirement pins from the run's results."""
    session.run(
        *python_module(
            "torch_matrix.cli",
            "pins",
            str(matrixplan.run_dir_for_session()),
            *matrixplan.report_posargs(session.posargs),
        ),
        external=True,
    )
