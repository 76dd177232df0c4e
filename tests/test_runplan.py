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


# ---------------------------------------------------------------- evidence belongs to its spec


def _grid(torch: str, digest: str) -> Cell:
    import dataclasses

    from tests.factories import make_cell

    made = make_cell(torch=torch, torchvision="", probes=("tests",), required_probes=("tests",))
    return dataclasses.replace(made, install=(".[test]",), install_digest=digest)


def test_results_the_plan_no_longer_plans_are_stale_and_never_counted(tmp_path: Path) -> None:
    """The spec changed (its install file: another install digest, so new definitions): the grid
    cell ran again, but the counterfactual and the edge cell planned from its earlier result, and a
    cell the spec dropped, stayed and counted in the table, report.html and pins ("6 evidence
    cells"). Now they are listed as stale and left out of the table and the pins."""
    import dataclasses

    from tests.factories import make_probe, make_result
    from torch_matrix.vocab.records import ORIGIN_COUNTERFACTUAL, ORIGIN_EDGE
    from torch_matrix.world.results import load_results, write_result
    from torch_matrix.world.runplan import write_plan

    index = {"default": "https://example.invalid/simple"}
    suite = "suite-digest-1"
    old, new = _grid("2.4.0", "sha256:old"), _grid("2.4.0", "sha256:new")
    dropped = _grid("2.2.0", "sha256:old")
    counterfactual = dataclasses.replace(
        old,
        id=f"{old.id}-cf-with-numpy",
        requirements=(*old.requirements, "numpy"),
        tags=("counterfactual", f"counterfactual-of-{old.id}"),
        origin=ORIGIN_COUNTERFACTUAL,
        reason=f"{old.id} with numpy",
    )
    edge = dataclasses.replace(
        old, id="t2.3.0-py3.11-edge", requirements=("torch==2.3.0",), origin=ORIGIN_EDGE
    )
    edge = dataclasses.replace(edge, axes={**edge.axes, "torch": "2.3.0"})
    cells = tmp_path / "run" / "cells"
    failing = [make_probe("tests", "fail", message="1 failed: tests/test_x.py::test_y")]
    for made, probes in (
        (new, None),
        (counterfactual, None),
        (edge, failing),
        (dropped, failing),
    ):
        write_result(
            make_result(made, probes=probes, fingerprint=made.fingerprint(index, suite)), cells
        )
    write_plan(tmp_path / "run", RunPlan(cells=(new,), spec=None, index=index, suite=suite))

    loaded = load_results(tmp_path / "run")
    assert [r.cell.id for r in loaded.results] == [new.id]
    assert sorted(loaded.stale) == sorted([counterfactual.id, edge.id, dropped.id])
    assert "plans this cell no more" in loaded.stale[dropped.id]
    assert "follow-up of a cell the spec plans no more" in loaded.stale[edge.id]
    assert any("stale, not counted" in line for line in loaded.problems)

    # The same cell files, once the plan is the one they were made for: all four count again.
    write_plan(tmp_path / "run", RunPlan(cells=(old, dropped), spec=None, index=index, suite=suite))
    assert len(load_results(tmp_path / "run").results) == 3  # (the new grid file replaced old's)

    # Another probe suite (the tool or the probes changed): every follow-up is stale.
    write_plan(tmp_path / "run", RunPlan(cells=(new,), spec=None, index=index, suite="other"))
    again = load_results(tmp_path / "run")
    assert again.results == [] and "another index or probe suite" in again.stale[counterfactual.id]


def test_the_report_and_pins_leave_stale_results_out(tmp_path: Path, capsys) -> None:
    """End to end through the commands: the table counts the current cell only, and the pins draw
    nothing from the stale failure."""
    import dataclasses

    from tests.factories import make_probe, make_result
    from torch_matrix import cli
    from torch_matrix.vocab.records import ORIGIN_EDGE
    from torch_matrix.world.results import write_result
    from torch_matrix.world.runplan import write_plan

    index, suite = {"default": ""}, "s1"
    new = _grid("2.4.0", "sha256:new")
    edge = dataclasses.replace(
        _grid("2.3.0", "sha256:old"), id="t2.3.0-py3.11-edge", origin=ORIGIN_EDGE
    )
    run = tmp_path / "run"
    write_result(make_result(new, fingerprint=new.fingerprint(index, suite)), run / "cells")
    failing = [make_probe("tests", "fail", message="1 failed: tests/test_x.py::test_y")]
    write_result(
        make_result(edge, probes=failing, fingerprint=edge.fingerprint(index, suite)), run / "cells"
    )
    # a planned cell whose file holds its earlier definition: listed as missing, saying why
    old_five, new_five = _grid("2.5.0", "sha256:old"), _grid("2.5.0", "sha256:new")
    write_result(
        make_result(old_five, fingerprint=old_five.fingerprint(index, suite)), run / "cells"
    )
    write_plan(run, RunPlan(cells=(new, new_five), spec=None, index=index, suite=suite))
    assert cli.main(["report", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "1 cell: 1 compatible, 0 incompatible" in out, out
    assert "its result is stale (the spec plans this cell with another definition" in out, out
    assert "t2.3.0-py3.11-edge" not in out and "stale, not counted" in err, err
    assert cli.main(["pins", str(run), "--no-coverage", "--out", str(tmp_path / "pins")]) == 0
    out, err = capsys.readouterr()
    assert "2.3.0" not in (tmp_path / "pins" / "constraints.txt").read_text()
