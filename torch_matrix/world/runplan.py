"""What a run planned, and what became of each planned cell.

``results/<run>/planned-cells.json``: the cells a nox process planned, written before its cells
start, with the spec it used (a report made later on its own prints rerun lines with
``--spec``) and the cells a leftover venv directory blocks. A file that cannot be read is no
plan (the report says so and goes on with the results).

``results/<run>/cell-log.jsonl``: one line per event of a cell: ``queued`` (a nox process will
run its session), ``started`` (its session began), ``result`` (its result file was written),
``failed`` (its session stopped with an error before writing one). The report lists every
planned cell, with a result or as missing with its reason; without the log a cell that died
before writing its result (killed, its interpreter crashed, nox could not make its venv)
vanished from the table, summary.md and the pins. The log also tells such a cell from a result
deleted on purpose (by hand; ``--redo`` replaces, never deletes): a cell whose last event is
``result`` and whose file is gone was deleted, and does not come back. A run planned before the
log existed lists only its blocked cells, as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from torch_matrix.edges.fileio import append_line, atomic_write
from torch_matrix.vocab.layout import CELLS_DIR, DEFAULT_RESULTS, DEFAULT_SPEC_OPTION, spec_file
from torch_matrix.vocab.records import Cell, CellResult, StrEnum

PLAN_NAME = "planned-cells.json"
PLAN_SCHEMA = "torch-matrix-run-plan"
PLAN_VERSION = 1
LOG_NAME = "cell-log.jsonl"


@dataclass(frozen=True)
class RunPlan:
    cells: tuple[Cell | str, ...] = ()
    spec: str | None = None  # the spec file the run used (None: the built-in default)
    blocked: Mapping[str, str] = field(default_factory=dict)  # cell id -> why it cannot run
    # What the cells' fingerprints were made with (``MatrixPlan.fingerprint``): the index's JSON
    # and the probe suite's digest; a result made with others is stale (``plan.stale``). Optional:
    # a plan written before #42 has neither.
    index: Mapping[str, Any] | None = None
    suite: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": PLAN_SCHEMA,
            "schema_version": PLAN_VERSION,
            "spec": self.spec,
            "cells": [c if isinstance(c, str) else c.to_json() for c in self.cells],
            "blocked": dict(sorted(self.blocked.items())),
        }
        if self.index is not None and self.suite:
            data.update(index=dict(self.index), suite=self.suite)
        return data


def plan_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / PLAN_NAME


def write_plan(run_dir: str | os.PathLike[str], plan: RunPlan) -> Path:
    return atomic_write(plan_path(run_dir), json.dumps(plan.to_json(), indent=1) + "\n")


def read_plan(run_dir: str | os.PathLike[str]) -> tuple[RunPlan | None, str]:
    """(the run's plan, "") ; (None, "") when there is none; (None, why) when it cannot be read."""
    path = plan_path(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        return None, f"{path}: not a readable run plan ({type(error).__name__}); ignored"
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA:
        return None, f"{path}: not a torch-matrix run plan; ignored"
    return _from_json(data, path)


def _from_json(data: Mapping[str, Any], path: Path) -> tuple[RunPlan | None, str]:
    items, spec, blocked = data.get("cells"), data.get("spec"), data.get("blocked") or {}
    if (
        not isinstance(items, list)
        or not (spec is None or isinstance(spec, str))
        or not isinstance(blocked, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in blocked.items())
    ):
        return None, f"{path}: not a torch-matrix run plan; ignored"
    cells: list[Cell | str] = []
    for item in items:
        if isinstance(item, str):
            cells.append(item)
            continue
        try:
            cells.append(Cell.from_json(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                cells.append(item["id"])
            else:
                return None, f"{path}: a cell entry is not a cell; ignored"
    if isinstance(spec, str):
        spec = spec_file(spec)  # a plan written before #42 named a pyproject spec as shown
    index, suite = data.get("index"), data.get("suite")
    known = isinstance(index, dict) and isinstance(suite, str) and bool(suite)
    return (
        RunPlan(
            cells=tuple(cells),
            spec=spec,
            blocked=dict(blocked),
            index=index if known else None,
            suite=str(suite) if known else "",
        ),
        "",
    )


def stale_in(run_dir: str | os.PathLike[str], results: Sequence[CellResult]) -> dict[str, str]:
    """cell id -> why, for each of ``results`` the run's plan no longer plans (``plan.stale``);
    nothing without a readable plan."""
    from torch_matrix.plan.stale import stale_results

    plan, _ = read_plan(run_dir)
    if plan is None or not plan.cells:
        return {}
    return stale_results(results, plan.cells, plan.index, plan.suite)


# Build backends whose sdist takes every file of the project except those the project's *root*
# ignore file lists (hatchling: ``.gitignore`` or ``.hgignore`` at the root, never a nested one,
# and a fixed list of names such as ``.nox``): the folder's own ``.gitignore`` does not reach
# them. setuptools (flat-layout discovery skips dot names; its sdist takes only the packages and
# git's files), flit, poetry-core and pdm-backend (the package, by the project's name) never take
# the folder.
ROOT_IGNORE_BACKENDS = ("hatchling.",)
ROOT_IGNORE_LINE = "/.torch-matrix/"


def build_backend_of(pyproject_text: str) -> str:
    """``[build-system] build-backend`` of a pyproject.toml's text; "" when absent or unreadable."""
    from torch_matrix.spec.parse import tomllib

    try:
        system = tomllib.loads(pyproject_text).get("build-system")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return ""
    backend = system.get("build-backend") if isinstance(system, dict) else None
    return backend if isinstance(backend, str) else ""


def root_ignores_folder(gitignore_text: str, folder: str) -> bool:
    """True when a root ``.gitignore`` has a line that ignores ``folder`` (a top-level folder) as
    a whole: ``folder``, ``folder/``, ``/folder``, ``/folder/``, or ``.*``-style dot patterns
    (``.*``, ``.*/``). A narrower or negated line is not enough; a redundant line is harmless."""
    forms = {folder, f"{folder}/", f"/{folder}", f"/{folder}/"}
    if folder.startswith("."):
        forms |= {".*", ".*/", "/.*", "/.*/"}
    lines = [line.strip() for line in gitignore_text.splitlines()]
    if any(line.startswith("!") and folder in line for line in lines):
        return False
    return any(line in forms for line in lines)


def keep_out_of_vcs(results_root: Path) -> str:
    """The default results root's hidden folder (``.torch-matrix/``) gets a ``.gitignore`` of ``*``,
    as uv and virtualenv do for a venv: git (and poetry's sdist, which asks git) leaves it out.
    A hatchling project also gets ``/.torch-matrix/`` in its root ``.gitignore`` (made if
    absent), the only ignore file hatchling's sdist reads. Returns the line that says so, or "".
    Any other root, named by the user, is theirs: nothing is written."""
    hidden = Path(results_root).parent
    if hidden.name != Path(DEFAULT_RESULTS).parent.name:
        return ""
    marker = hidden / ".gitignore"
    try:
        if not marker.exists():
            hidden.mkdir(parents=True, exist_ok=True)
            marker.write_text("# written by torch-matrix: its results, never the project's\n*\n")
    except OSError:
        return ""  # a read-only folder: the run itself says so when it writes its results
    project = hidden.parent
    try:
        backend = build_backend_of((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return ""
    if not backend.startswith(ROOT_IGNORE_BACKENDS):
        return ""
    root_ignore = project / ".gitignore"
    try:
        before = root_ignore.read_text(encoding="utf-8") if root_ignore.exists() else ""
        if root_ignores_folder(before, hidden.name):
            return ""
        lead = "" if not before or before.endswith("\n") else "\n"
        with root_ignore.open("a", encoding="utf-8") as out:
            out.write(f"{lead}# torch-matrix's results (its runs, never the project's)\n")
            out.write(f"{ROOT_IGNORE_LINE}\n")
    except (OSError, UnicodeDecodeError):
        return (
            f"could not add /.torch-matrix/ to {root_ignore}: {backend}'s sdist will take "
            f"the results; add that line yourself"
        )
    why = "'s sdist reads only the project's root .gitignore, and would take the results"
    return f"added /.torch-matrix/ to {root_ignore}: {backend}{why}"


class CellEvent(StrEnum):
    QUEUED = "queued"  # a nox process selected its session and will run it
    STARTED = "started"  # its session began (nox made its venv)
    RESULT = "result"  # its result file was written
    FAILED = "failed"  # its session stopped with an error before writing a result


@dataclass(frozen=True)
class Logged:
    """A cell's last event in the run's log."""

    event: CellEvent
    at: str = ""  # ISO time, UTC, to the second
    pid: int = 0
    why: str = ""  # FAILED: the error's line
    cell: Cell | None = None  # STARTED: the cell (a follow-up cell is in no plan)


def log_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / LOG_NAME


def record(
    run_dir: str | os.PathLike[str],
    event: CellEvent,
    cell_ids: Iterable[str],
    *,
    cell: Cell | None = None,
    why: str = "",
) -> str:
    """Append ``event`` for each of ``cell_ids`` to the run's log. Returns "" or the one line that
    says why it could not be written: the cells run on, only the report knows less."""
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    path = log_path(run_dir)
    try:
        for cell_id in cell_ids:
            entry: dict[str, Any] = {"event": str(event), "cell": cell_id, "at": at}
            entry["pid"] = os.getpid()
            if why:
                entry["why"] = " ".join(why.split())[:300]
            if cell is not None:
                entry["spec"] = cell.to_json()
            append_line(path, json.dumps(entry, ensure_ascii=True, sort_keys=True))
    except OSError as error:
        return f"cannot write the run's cell log: {error.strerror or error} ({path})"
    return ""


def read_log(run_dir: str | os.PathLike[str]) -> dict[str, Logged] | None:
    """Each logged cell's last event; None when the run kept no log (a run of an older version).
    Lines that are not an event (cut by a full disk, edited) are skipped."""
    try:
        text = log_path(run_dir).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return None
    last: dict[str, Logged] = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            event = CellEvent(entry["event"])
            cell_id = entry["cell"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if not isinstance(entry, dict) or not isinstance(cell_id, str):
            continue
        cell = None
        if isinstance(entry.get("spec"), dict):
            try:
                cell = Cell.from_json(entry["spec"])
            except (KeyError, TypeError, ValueError, AttributeError):
                cell = None
        pid = entry.get("pid")
        last[cell_id] = Logged(
            event=event,
            at=str(entry.get("at", "")),
            pid=pid if isinstance(pid, int) else 0,
            why=str(entry.get("why", "")),
            cell=cell if cell is not None and cell.id == cell_id else None,
        )
    return last


def _when(logged: Logged) -> str:
    return logged.at.replace("T", " ").replace("+00:00", " UTC") or "an unknown time"


def missing_reason(
    plan: RunPlan | None, cell_id: str, log: Mapping[str, Logged] | None = None
) -> str:
    """Why a planned cell has no result: what blocked it, else what the run's log says of it,
    else what is known in general."""
    if plan is not None and cell_id in plan.blocked:
        return plan.blocked[cell_id]
    logged = (log or {}).get(cell_id)
    if logged is None:
        if log is not None:
            return (
                "not run: no session of it started since it was planned (not selected, or the "
                "run stopped before it)"
            )
        return "no result: its session ended before the cell wrote one (see the run's log)"
    if logged.event == CellEvent.FAILED:
        return f"its session failed at {_when(logged)} before writing a result: {logged.why}"
    if logged.event == CellEvent.STARTED:
        return (
            f"started at {_when(logged)} (pid {logged.pid}) and ended without a result: the run "
            "was killed, its interpreter crashed, or it stopped before writing one (see that "
            "run's log); rerun it"
        )
    if logged.event == CellEvent.QUEUED:
        return (
            f"queued at {_when(logged)} (nox pid {logged.pid}) but its session never started: "
            "nox could not create its venv (uv's error is in that run's log), or the run was "
            "stopped before it"
        )
    return "its result file is gone"


def rerun_spec(plan: RunPlan | None) -> str | None:
    """What a rerun line names as the run's spec: its file, ``--default`` where the run had the
    built-in default matrix (``torch-matrix run`` finds no spec in a checkout without it), or None
    where no plan was read."""
    if plan is None:
        return None
    return plan.spec or DEFAULT_SPEC_OPTION


def unreadable_cells(
    plan: RunPlan | None, skipped: Iterable[str], problems: Iterable[str], present: set[str]
) -> list[tuple[Cell | str, str]]:
    """The cells whose result file is there but cannot be read (``LoadedResults.skipped``), each
    with why: the report lists them as missing instead of dropping them from its table, its
    summary.md and its results.json."""
    planned = dict(zip(planned_ids(plan.cells), plan.cells)) if plan is not None else {}
    lines = list(problems)
    found: list[tuple[Cell | str, str]] = []
    for where in skipped:
        path = Path(where)
        if path.parent.name != CELLS_DIR or path.suffix != ".json" or path.stem in present:
            continue
        why = next((line[len(where) + 2 :] for line in lines if line.startswith(f"{where}: ")), "")
        found.append(
            (
                planned.get(path.stem, path.stem),
                f"its result file {where} cannot be read ({why}): rerun the cell",
            )
        )
    return found


def planned_but_missing(
    plan: RunPlan | None, log: Mapping[str, Logged] | None, present: set[str]
) -> tuple[list[Cell | str], dict[str, str]]:
    """The cells without a result that the report lists (in plan order, then the log's other
    cells, e.g. follow-up cells that died), and why each. A cell whose result was written and
    later deleted is not among them; with no log (an older run), only the blocked cells are."""
    missing: list[Cell | str] = []
    seen: set[str] = set()
    for item in plan.cells if plan is not None else ():
        cell_id = planned_ids([item])[0]
        seen.add(cell_id)
        if cell_id in present:
            continue
        if plan is not None and cell_id in plan.blocked:
            missing.append(item)
        elif log is not None and (cell_id not in log or log[cell_id].event != CellEvent.RESULT):
            missing.append(item)
    for cell_id, logged in (log or {}).items():
        if cell_id in seen or cell_id in present:
            continue
        if logged.event in (CellEvent.STARTED, CellEvent.FAILED):
            missing.append(logged.cell or cell_id)
    reasons = {cell_id: missing_reason(plan, cell_id, log) for cell_id in planned_ids(missing)}
    return missing, reasons


def planned_ids(cells: Sequence[Cell | str]) -> list[str]:
    return [c if isinstance(c, str) else c.id for c in cells]
