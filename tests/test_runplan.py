"""The run's plan and cell log (``world.runplan``): which planned cells the report lists as
missing, and why; a result deleted on purpose is never one of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torch_matrix.edges.fileio import append_line
from torch_matrix.vocab.records import Cell
from torch_matrix.world.runplan import (
    LOG_NAME,
    CellEvent,
    RunPlan,
    planned_but_missing,
    read_log,
    record,
)


def cell(torch: str) -> Cell:
    return Cell(
        id=f"t{torch}-py3.11",
        axes={"python": "3.11", "torch": torch},
        requirements=(f"torch=={torch}",),
    )


A, B, C, D = (cell(v) for v in ("2.1.0", "2.2.0", "2.3.0", "2.4.0"))


def test_each_planned_cell_without_a_result_is_listed_by_its_last_event(tmp_path: Path) -> None:
    record(tmp_path, CellEvent.QUEUED, [A.id, B.id, C.id, D.id])
    record(tmp_path, CellEvent.STARTED, [A.id], cell=A)
    record(tmp_path, CellEvent.RESULT, [A.id])
    record(tmp_path, CellEvent.STARTED, [B.id], cell=B)
    record(tmp_path, CellEvent.STARTED, [C.id], cell=C)
    record(tmp_path, CellEvent.FAILED, [C.id], why="torch-matrix: error: cannot write\nhint: x")
    plan = RunPlan(cells=(A, B, C, D))
    missing, why = planned_but_missing(plan, read_log(tmp_path), present=set())
    # A was written and is gone now: deleted on purpose, not listed.
    assert missing == [B, C, D]
    assert "ended without a result" in why[B.id] and "(pid " in why[B.id]
    assert why[C.id].endswith("torch-matrix: error: cannot write hint: x")
    assert "queued" in why[D.id] and "never started" in why[D.id]
    missing, _ = planned_but_missing(plan, read_log(tmp_path), present={B.id, C.id, D.id})
    assert missing == []


def test_a_follow_up_cell_that_died_is_listed_from_the_log_with_its_columns(tmp_path: Path) -> None:
    record(tmp_path, CellEvent.STARTED, [D.id], cell=D)
    missing, why = planned_but_missing(RunPlan(cells=(A,)), read_log(tmp_path), present={A.id})
    assert missing == [D] and "ended without a result" in why[D.id]


def test_without_a_log_only_blocked_cells_are_listed(tmp_path: Path) -> None:
    """A run of an older version kept no log: a cell without a result may have been deleted on
    purpose, so only what blocked a cell is known."""
    plan = RunPlan(cells=(A, B), blocked={B.id: "its venv directory blocks it"})
    assert read_log(tmp_path) is None
    assert planned_but_missing(plan, None, present=set()) == (
        [B],
        {B.id: "its venv directory blocks it"},
    )


def test_a_planned_cell_no_session_started_is_listed_as_not_run(tmp_path: Path) -> None:
    record(tmp_path, CellEvent.QUEUED, [A.id])
    missing, why = planned_but_missing(RunPlan(cells=(A, B)), read_log(tmp_path), set())
    assert missing == [A, B] and why[B.id].startswith("not run:")


def test_lines_that_are_not_events_are_skipped(tmp_path: Path) -> None:
    record(tmp_path, CellEvent.STARTED, [A.id], cell=A)
    with (tmp_path / LOG_NAME).open("a", encoding="utf-8") as handle:
        handle.write("not json\n[1]\n" + json.dumps({"event": "nope", "cell": A.id}) + "\n")
        handle.write(json.dumps({"event": "result", "cell": 7}) + "\n")
        handle.write('{"event": "result", "cell": "' + A.id)  # cut by a kill: no newline
    log = read_log(tmp_path)
    assert log is not None and log[A.id].event == CellEvent.STARTED and log[A.id].cell == A


def test_a_log_that_cannot_be_written_is_one_line_never_an_exception(tmp_path: Path) -> None:
    (tmp_path / LOG_NAME).mkdir()
    problem = record(tmp_path, CellEvent.STARTED, [A.id])
    assert problem.startswith("cannot write the run's cell log:") and LOG_NAME in problem


def test_append_line_writes_one_line() -> None:
    with pytest.raises(ValueError):
        append_line("/nonexistent/x", "two\nlines")
