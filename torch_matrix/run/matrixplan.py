"""The matrix one nox process offers (``MatrixPlan``): the spec planned into cells (this shard's),
the interpreters found, where results go; and what the command line says about it: which run
directory it locks, which cells are redone (``--redo``), which results are complete already.

The noxfile (``torch_matrix/noxfile.py``) loads it once at import; the session bodies
(``torch_matrix.run.sessions``) run its cells.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.edges import console
from torch_matrix.vocab import layout
from torch_matrix.vocab import settings as env_settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.layout import (
    DEFAULT_RESULTS,
    REDO_ENV,
    SHARD_ENV,
    results_root,
)
from torch_matrix.vocab.records import Cell

if TYPE_CHECKING:
    from torch_matrix.spec.model import Spec


@dataclass
class MatrixPlan:
    """The cells this nox invocation offers, and what running them needs."""

    spec: Spec | None = None  # None when planning was not needed
    cells: list[Cell] = field(default_factory=list)  # after the shard filter
    interpreters: dict[str, str] = field(default_factory=dict)  # "3.11" -> absolute path
    missing_pythons: list[str] = field(default_factory=list)
    results_root: Path = Path(DEFAULT_RESULTS)
    suite: str = ""  # probesuite.suite_digest(spec): the probes' code is part of each fingerprint

    @property
    def run_dir(self) -> Path:
        return layout.run_dir(self.results_root, self.spec.name if self.spec is not None else None)

    @property
    def cells_dir(self) -> Path:
        return layout.cells_dir(self.run_dir)

    @property
    def planned_spec(self) -> Spec:
        """The spec, where a session runs cells (``load_plan`` read one for it)."""
        if self.spec is None:
            raise RuntimeError("this nox invocation planned no matrix: it read no spec")
        return self.spec

    def fingerprint(self, cell: Cell) -> str:
        """Same as ``torch-matrix plan --json`` prints, so CI shards and resume agree."""
        return cell.fingerprint(self.planned_spec.index.to_json(), self.suite)

    def interpreter_for(self, cell: Cell) -> str:
        """An absolute interpreter path; ours when the cell's Python is missing (see module doc)."""
        return self.interpreters.get(cell.python) or sys.executable

    def cell(self, cell_id: str) -> Cell:
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    def has_interpreter(self, cell: Cell) -> bool:
        return cell.python in self.interpreters


LISTING_FLAGS = ("-l", "--list", "--list-sessions", "--usage", "-h", "--help", "--version")


def is_listing(argv: Sequence[str]) -> bool:
    """Whether nox only lists the sessions (``nox -l``): nothing runs, nothing is locked."""
    args = list(argv[: argv.index("--")] if "--" in argv else argv)
    return any(arg in LISTING_FLAGS for arg in args)


def lock_run(
    plan: MatrixPlan, argv: Sequence[str], environ: MutableMapping[str, str] = os.environ
) -> None:
    """Hold this run's results directory and nox env dir (``torch_matrix.edges.locks``); listing locks nothing."""
    from torch_matrix.edges import locks

    if is_listing(argv):
        return
    locks.hold(plan.run_dir, "results directory", environ)
    locks.hold(envdir_of(argv), "nox env dir (--envdir)", environ)
    from torch_matrix.world.runplan import keep_out_of_vcs

    added = keep_out_of_vcs(plan.results_root)
    if added:
        console.note(f"torch-matrix: {added}")


def nox_venv_of(envdir: Path, cell_id: str) -> Path:
    """Where nox puts the venv of ``matrix(<cell id>)``: nox's rule for a session's env dir
    (nox.sessions: the name made ASCII, anything but letters, digits, ``_`` and ``-`` made ``-``,
    lower case; an 8-digit SHA-1 of it where the full path would pass 100 - len("bin/pythonX.Y")
    characters). tests/test_faults.py checks it against the directory a real nox run makes."""
    import hashlib
    import re
    import unicodedata

    original = f"{layout.MATRIX_SESSION}({cell_id})"
    name = unicodedata.normalize("NFKD", original).encode("ascii", "ignore").decode("ascii")
    name = re.sub(r"[^\w\s-]", "-", name).strip().lower()
    name = re.sub(r"[-\s]+", "-", name).strip("-")
    if not name:
        name = hashlib.sha1(original.encode("utf-8")).hexdigest()[:8]  # noqa: S324 - nox's own
    if len(os.path.join(str(envdir), name)) > 100 - len("bin/pythonX.Y") and len(str(envdir)) < 91:
        name = hashlib.sha1(name.encode("ascii")).hexdigest()[:8]  # noqa: S324 - nox's own
    return envdir / name


def prepare_cells(
    plan: MatrixPlan, argv: Sequence[str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Under the run's locks, before nox creates any cell's venv: a half-made venv left at a planned
    cell's venv path is removed (``world.envdirs``: only one uv and torch-matrix made); one that is
    not ours blocks its cell, said here and in the report. ``results/<run>/planned-cells.json`` records the
    plan (every planned cell appears in the report, with a result or as missing with its reason)
    and the spec. Returns the blocked cells' reasons."""
    from torch_matrix.world.envdirs import clear_leftover
    from torch_matrix.world.runplan import CellEvent, RunPlan, record, write_plan
    from torch_matrix.world.specfile import DEFAULT_SPEC_PATH

    args = list(argv[: argv.index("--")] if "--" in argv else argv)
    if any(arg in LISTING_FLAGS for arg in args) or plan.spec is None:
        return {}
    envdir = envdir_of(argv)
    blocked: dict[str, str] = {}
    for cell in plan.cells:
        problem = clear_leftover(nox_venv_of(envdir, cell.id))
        if problem:
            blocked[cell.id] = f"its venv directory blocks it: {problem}"
            console.warn(
                f"{cell.id}: cannot create its venv: {problem}; move it away (torch-matrix removes "
                "only a half-made venv it made)"
            )
    spec_path = Path(layout.spec_file(plan.spec.path))
    spec = None if spec_path.resolve() == DEFAULT_SPEC_PATH.resolve() else str(spec_path.absolute())
    try:
        write_plan(
            plan.run_dir,
            RunPlan(
                cells=tuple(plan.cells),
                spec=spec,
                blocked=blocked,
                index=plan.planned_spec.index.to_json(),
                suite=plan.suite,
            ),
        )
    except OSError as error:  # the cells still run; the report then knows only their results
        console.warn(f"cannot write the run's plan: {error.strerror or error} ({plan.run_dir})")
    queued = [
        cell.id for cell in selected_cells(plan, args, environ) or () if cell.id not in blocked
    ]
    problem = record(plan.run_dir, CellEvent.QUEUED, queued)
    if problem:
        console.warn(problem)
    keep_index_facts(plan)
    return blocked


def selected_cells(
    plan: MatrixPlan, argv: Sequence[str], environ: Mapping[str, str] = os.environ
) -> list[Cell] | None:
    """The matrix cells nox's command line (``argv``) selects, in its order
    (``torch_matrix.run.selection``); None when that selection is not one this tool follows."""
    import nox

    from torch_matrix.run.selection import Candidate, read_selection, selected

    default = tuple(nox.options.sessions or (layout.MATRIX_SESSION,))  # the noxfile's default
    candidates = [
        Candidate(
            layout.MATRIX_SESSION,
            layout.cell_session(cell.id),
            plan.interpreter_for(cell),
            tuple(cell.tags),
        )
        for cell in plan.cells
    ]
    chosen = selected(read_selection(argv, environ), candidates, default)
    if chosen is None:
        return None
    by_name = {layout.cell_session(cell.id): cell for cell in plan.cells}
    return [by_name[candidate.signature] for candidate in chosen]


def cell_started(plan: MatrixPlan, cell: Cell) -> None:
    """A cell's session began: the run's cell log says so (``world.runplan``), so a session that
    dies before the cell's result is listed by the report. A log that cannot be written is said
    by the cell's own run (``run.cellrun``)."""
    from torch_matrix.world.runplan import CellEvent, record

    record(plan.run_dir, CellEvent.STARTED, [cell.id], cell=cell)


def cell_failed(session: Any, plan: MatrixPlan, cell: Cell, text: str) -> None:
    """A cell's session stops with ``text`` (a ``UserError``'s lines) before its result: logged,
    so the report lists the cell as missing with this reason; then nox ends the session."""
    from torch_matrix.world.runplan import CellEvent, record

    first = text.splitlines()[0] if text else ""
    problem = record(plan.run_dir, CellEvent.FAILED, [cell.id], why=first.removeprefix(_ERROR))
    if problem:
        session.warn(problem)
    session.error(text)  # nox's raises: the session ends here


_ERROR = "torch-matrix: error: "


def keep_index_facts(plan: MatrixPlan) -> None:
    """``results/<run>/index-facts.json``: the released versions and wheel Pythons of the cells'
    packages, read now, once, for the run's pins (``world.runfacts``). Where the index cannot be
    listed nothing is written: the pins read it then, and say so."""
    from torch_matrix.run.pins import spec_index_facts
    from torch_matrix.pins.vocabulary import PYTHON, VARIANT
    from torch_matrix.world.runfacts import write_facts

    assert plan.spec is not None  # prepare_cells returns before this without a spec
    packages = sorted({axis for cell in plan.cells for axis in cell.axes} - {PYTHON, VARIANT})
    try:
        released, pythons = spec_index_facts(plan.spec, packages)
        write_facts(plan.run_dir, released, pythons)
    except Exception:  # noqa: BLE001 - offline, a full disk: the pins read the index later
        return


def envdir_of(argv: Sequence[str]) -> Path:
    """nox's env dir (``--envdir``, default ``.nox``), absolute."""
    args = list(argv[: argv.index("--")] if "--" in argv else argv)
    envdir = ".nox"
    for i, arg in enumerate(args):
        if arg == "--envdir" and i + 1 < len(args):
            envdir = args[i + 1]
        elif arg.startswith("--envdir="):
            envdir = arg.split("=", 1)[1]
    return Path(envdir).absolute()


def load_plan(
    environ: Mapping[str, str] = os.environ, *, plan: bool = True, listing: bool = False
) -> MatrixPlan:
    """Spec -> cells -> this shard. Raises ``UserError`` for bad input (spec, shard). ``listing``
    (``nox -l``): the plan kept from the last planning of the same spec where nothing it was
    planned from changed (``pipeline.plan_spec``); a run plans now."""
    from torch_matrix.world.specfile import load_spec

    env_settings.parse(environ)  # every variable: a bad value stops here, before any cell runs
    spec = load_spec(None, environ)
    root = results_root(environ)
    if not plan:
        return MatrixPlan(spec=spec, results_root=root)
    from torch_matrix.run.pipeline import plan_spec, shard_cells

    planned = plan_spec(spec, environ, reuse=listing)
    for note in planned.notes:
        console.note(note)
    if not planned.cells:
        raise UserError(
            "the spec plans no cells: nothing would be tested",
            where=spec.path,
            hint="its [[exclude]] rules (or version selections) remove every cell; "
            "loosen them, and check with `torch-matrix plan`",
        )
    interpreters: dict[str, str] = {}
    missing: list[str] = []
    for name, interpreter in planned.interpreters.items():
        if interpreter is None:
            missing.append(name)
        else:
            interpreters[interpreter.minor] = os.path.abspath(interpreter.path)
    cells = shard_cells(planned.cells, env_settings.shard_text(environ), SHARD_ENV)
    from torch_matrix.world.probesuite import suite_digest

    return MatrixPlan(
        spec=spec,
        cells=cells,
        interpreters=interpreters,
        missing_pythons=missing,
        results_root=root,
        suite=suite_digest(spec),
    )


def announce_missing(plan: MatrixPlan, environ: Mapping[str, str] = os.environ) -> None:
    """Say once, at load time, which Pythons are missing and what that means here."""
    from torch_matrix.spec.model import INTERPRETER_SEARCH

    for version in plan.missing_pythons:
        consequence = "an error (CI is set)" if environ.get("CI") else "recorded as unsatisfiable"
        console.warn(
            f"no Python {version} interpreter found (looked in: {INTERPRETER_SEARCH});"
            f" its cells are {consequence}"
        )


def params(plan: MatrixPlan) -> list[tuple[str, str, list[str]]]:
    """(interpreter, cell id, tags) for each cell, in plan order.

    The session parameter is the id, not the Cell: nox serialises parameters into
    ``--report`` files, ``nox -l --json`` and its ``--parallel`` workers, as JSON.
    """
    return [(plan.interpreter_for(cell), cell.id, list(cell.tags)) for cell in plan.cells]


def report_posargs(posargs: Sequence[str]) -> list[str]:
    """The posargs the report and pins sessions pass on: nox gives every session the same ones, and
    ``--redo`` is the matrix cells' (``torch-matrix run -s 'matrix(ID)' -- --redo``) or the
    follow-up session's (``-s followups -- --redo ID ...``), with its cell ids, not theirs."""
    return _split_redo(posargs)[0]


def redo_cells(posargs: Sequence[str]) -> list[str]:
    """The cell ids after ``--redo`` (``-s followups -- --redo t2.0.0-py3.11-edge``): follow-up
    cells to run again; each must be a cell id, never a path."""
    ids = _split_redo(posargs)[1]
    for cell_id in ids:
        if not layout.is_cell_id(cell_id):
            raise UserError(
                f"--redo {cell_id!r} is not a cell id",
                "posargs",
                hint="pass the follow-up cell's id as the report prints it "
                "(`-s followups -- --redo t2.0.0-py3.11-edge`)",
            )
    return ids


def _split_redo(posargs: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the posargs without ``--redo`` and the words after it, those words): a word after
    ``--redo`` that is no option belongs to it, until the next option."""
    kept: list[str] = []
    ids: list[str] = []
    in_redo = False
    for arg in posargs:
        in_redo = arg == "--redo" or (in_redo and not arg.startswith("-"))
        if arg == "--redo":
            continue
        (ids if in_redo else kept).append(arg)
    return kept, ids


def redo_requested(posargs: Sequence[str], environ: Mapping[str, str] = os.environ) -> bool:
    return bool(env_settings.read(environ, REDO_ENV)) or "--redo" in posargs


def is_complete(plan: MatrixPlan, cell: Cell) -> bool:
    """Resume check: a complete result for the same fingerprint (``verdict.is_complete``)."""
    from torch_matrix.world.results import has_complete_result

    return has_complete_result(plan.cells_dir, cell, plan.fingerprint(cell))


def refresh_targets(plan: MatrixPlan, cell: Cell) -> bool:
    """A complete cell kept on resume is judged again for the spec's hardware targets (they change no
    fingerprint) from its recorded build facts, and its result rewritten when that changes its verdicts."""
    from torch_matrix.run.cellrun import rejudged
    from torch_matrix.world.results import read_result, write_result

    path = layout.cell_file(plan.cells_dir, cell.id)
    stored = read_result(path)
    again = (
        rejudged(stored, tuple(plan.planned_spec.targets))
        if stored is not None and plan.spec is not None
        else None
    )
    if again is None:
        return False
    write_result(again, plan.cells_dir)
    return True


def fail_cleanly(error: UserError) -> None:
    """The error line (and its hint), exit 2, no nox traceback."""
    console.error(error)
    raise SystemExit(2)


def run_dir_for_session(environ: MutableMapping[str, str] = os.environ) -> Path:
    """``results/<run>`` for the report and pins sessions (needs only the spec's name), held for
    this run (they write there: one run per results directory, ``edges.locks``)."""
    from torch_matrix.edges import locks

    try:
        run_dir = load_plan(environ, plan=False).run_dir
        locks.hold(run_dir, "results directory", environ)
        return run_dir
    except UserError as error:
        fail_cleanly(error)
        raise  # unreachable
