"""The noxfile's logic without nox: what to plan, resume, redo, GPU claims, session outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix.run import matrixplan
from torch_matrix.run.matrixplan import MatrixPlan, is_complete, redo_requested
from torch_matrix.run.sessions import claim_gpu, gpu_list, run_matrix_cell
from torch_matrix.run.selection import wants_matrix
from torch_matrix.vocab.records import ERROR, PROBE_RUNNER
from torch_matrix.world.results import write_result
from torch_matrix.spec.parse import parse_spec
from tests.factories import make_cell, make_probe, make_result


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], True),
        (["-l"], True),
        (["-k", "py3_11"], True),
        (["-t", "torch2.5"], True),
        (["-s", "matrix"], True),
        (["-s", "matrix(t2.1.0-py3.11)"], True),
        (["-s", "report"], False),
        (["-s", "report", "pins"], False),
        (["-s", "tests", "matrix"], True),
        (["--session=lint"], False),
        (["-f", "noxfile.py", "-s", "pins", "--", "-s", "matrix"], False),
    ],
)
def test_wants_matrix_plans_unless_other_sessions_are_named(argv, expected):
    assert wants_matrix(argv, environ={}) is expected


def test_noxsession_variable_counts_as_dash_s():
    assert wants_matrix([], environ={"NOXSESSION": "report"}) is False
    assert wants_matrix([], environ={"NOXSESSION": "report,matrix"}) is True


def test_redo_by_variable_or_posarg():
    assert redo_requested([], {"TORCH_MATRIX_REDO": "1"})
    assert redo_requested(["--redo"], {})
    assert not redo_requested([], {"TORCH_MATRIX_REDO": "0"})
    assert not redo_requested([], {})


def test_gpu_claims_hand_out_distinct_devices(tmp_path):
    assert gpu_list({"TORCH_MATRIX_GPUS": "0, 1"}) == ["0", "1"]
    with claim_gpu(["0", "1"], tmp_path) as first, claim_gpu(["0", "1"], tmp_path) as second:
        assert {first, second} == {"0", "1"}
    with claim_gpu([], tmp_path) as none:
        assert none is None


def plan_with(tmp_path: Path, cells, interpreters=None) -> MatrixPlan:
    spec = parse_spec('name = "t"\n', "matrix.toml", environ={})
    return MatrixPlan(
        spec=spec,
        cells=list(cells),
        interpreters=interpreters or {},
        results_root=tmp_path / "results",
    )


def test_resume_ignores_a_result_whose_probe_runner_died(tmp_path):
    cell = make_cell(probes=())
    plan = plan_with(tmp_path, [cell])
    died = make_result(
        cell,
        probes=[make_probe(PROBE_RUNNER, ERROR, "exited with -11")],
        fingerprint=plan.fingerprint(cell),
    )
    write_result(died, plan.cells_dir)
    assert not is_complete(plan, cell)
    write_result(
        make_result(
            cell, probes=[make_probe("install_sanity")], fingerprint=plan.fingerprint(cell)
        ),
        plan.cells_dir,
    )
    assert is_complete(plan, cell)


class FakeSession:
    """Just what run_matrix_cell touches; skip/error raise like nox's do."""

    class Stop(Exception):
        pass

    def __init__(self, venv: Path, posargs=()):
        self.posargs = list(posargs)
        self.virtualenv = type("V", (), {"location": str(venv)})()
        self.parallel = False
        self.notified, self.logs, self.warnings = [], [], []

    def notify(self, name):
        self.notified.append(name)

    def skip(self, message):
        raise self.Stop(("skip", message))

    def error(self, message):
        raise self.Stop(("error", message))

    def log(self, message):
        self.logs.append(message)

    def warn(self, message):
        self.warnings.append(message)


def test_missing_interpreter_is_unsatisfiable_on_a_workstation(tmp_path):
    cell = make_cell(python="3.9", plan_note="no Python 3.9 interpreter found")
    plan = plan_with(tmp_path, [cell])
    session = FakeSession(tmp_path / "venv")
    run_matrix_cell(session, plan, cell, environ={})
    assert session.notified == ["followups", "report"]  # the follow-up cells, then the report
    assert any("UNSATISFIABLE" in w for w in session.warnings)
    assert (plan.cells_dir / f"{cell.id}.json").is_file()


def test_missing_interpreter_is_an_error_when_ci_is_set(tmp_path):
    cell = make_cell(python="3.9", plan_note="no Python 3.9 interpreter found")
    plan = plan_with(tmp_path, [cell])
    with pytest.raises(FakeSession.Stop) as stop:
        run_matrix_cell(FakeSession(tmp_path / "venv"), plan, cell, environ={"CI": "true"})
    kind, message = stop.value.args[0]
    assert kind == "error" and "no Python 3.9 interpreter" in message
    assert not (plan.cells_dir / f"{cell.id}.json").exists()


def test_a_complete_cell_is_skipped_unless_redo(tmp_path, monkeypatch):
    cell = make_cell()
    plan = plan_with(tmp_path, [cell], {"3.11": "/usr/bin/python3.11"})
    write_result(make_result(cell, fingerprint=plan.fingerprint(cell)), plan.cells_dir)
    with pytest.raises(FakeSession.Stop) as stop:
        run_matrix_cell(FakeSession(tmp_path / "venv"), plan, cell, environ={})
    assert stop.value.args[0][0] == "skip"
    ran = []
    monkeypatch.setattr(
        "torch_matrix.run.cellrun.run_cell",
        lambda c, py, settings, *steps: ran.append(settings) or make_result(c),
    )
    run_matrix_cell(FakeSession(tmp_path / "venv", ["--redo"]), plan, cell, environ={})
    assert len(ran) == 1 and ran[0].fingerprint == plan.fingerprint(cell)


def test_only_no_evidence_fails_the_session(tmp_path, monkeypatch):
    cell = make_cell()
    plan = plan_with(tmp_path, [cell], {"3.11": "/usr/bin/python3.11"})
    outcomes = {
        "incompatible": make_result(cell, probes=[make_probe("install_sanity", "fail", "nms")]),
        "error": make_result(cell, status="error", message="Connection refused"),
    }
    monkeypatch.setattr(
        "torch_matrix.run.cellrun.run_cell", lambda c, py, s, *steps: outcomes[kind]
    )
    kind = "incompatible"
    session = FakeSession(tmp_path / "venv")
    run_matrix_cell(session, plan, cell, environ={"TORCH_MATRIX_REDO": "1"})
    assert any("INCOMPATIBLE" in w for w in session.warnings)
    kind = "error"
    with pytest.raises(FakeSession.Stop) as stop:
        run_matrix_cell(
            FakeSession(tmp_path / "venv"), plan, cell, environ={"TORCH_MATRIX_REDO": "1"}
        )
    assert stop.value.args[0][0] == "error" and "Connection refused" in stop.value.args[0][1]


def test_an_environment_finding_warns_and_does_not_fail_the_session(tmp_path, monkeypatch):
    """A missing undeclared dependency is advice, not missing evidence: the run stays green."""
    cell = make_cell(
        probes=("install_sanity", "torch_compile"),
        required_probes=("install_sanity", "torch_compile"),
    )
    plan = plan_with(tmp_path, [cell], {"3.11": "/usr/bin/python3.11"})
    missing = "torch.compile failed: ModuleNotFoundError: No module named 'setuptools'"
    result = make_result(
        cell, probes=[make_probe("install_sanity"), make_probe("torch_compile", "fail", missing)]
    )
    monkeypatch.setattr("torch_matrix.run.cellrun.run_cell", lambda c, py, s, *steps: result)
    session = FakeSession(tmp_path / "venv")
    run_matrix_cell(
        session, plan, cell, environ={"TORCH_MATRIX_REDO": "1", "TORCH_MATRIX_COUNTERFACTUALS": "0"}
    )
    assert any("ENVIRONMENT" in w and "setuptools" in w for w in session.warnings)
    assert not any("INCOMPATIBLE" in w for w in session.warnings)


def test_parallel_sessions_do_not_notify(tmp_path):
    cell = make_cell(plan_note="no wheel")
    session = FakeSession(tmp_path / "venv")
    session.parallel = True
    run_matrix_cell(session, plan_with(tmp_path, [cell]), cell, environ={})
    assert session.notified == []


def test_interpreter_for_a_missing_python_is_ours():
    import sys

    plan = MatrixPlan(cells=[], interpreters={"3.11": "/x/python3.11"})
    assert plan.interpreter_for(make_cell(python="3.11")) == "/x/python3.11"
    assert plan.interpreter_for(make_cell(python="3.9")) == sys.executable
    cell = make_cell(python="3.11")
    plan = MatrixPlan(cells=[cell], interpreters={"3.11": "/x/py"})
    assert matrixplan.params(plan) == [("/x/py", cell.id, list(cell.tags))]
    assert plan.cell(cell.id) is cell


def test_a_uv_cache_on_another_filesystem_is_warned_about_once(tmp_path, monkeypatch):
    """uv copies instead of hardlinking across filesystems: N cells would cost N copies of torch."""
    import os as _os

    from torch_matrix.run import sessions

    class FakeSession:
        def __init__(self):
            self.warnings = []

        def warn(self, text):
            self.warnings.append(text)

    monkeypatch.setattr(sessions, "_LINK_CHECKED", [])
    real_stat = _os.stat
    cache = tmp_path / "cache"
    cache.mkdir()

    class FakeStat:
        def __init__(self, dev):
            self.st_dev = dev

    def fake_stat(path, *args, **kwargs):
        return (
            FakeStat(99) if str(path).startswith(str(cache)) else real_stat(path, *args, **kwargs)
        )

    monkeypatch.setattr("torch_matrix.world.environment.os.stat", fake_stat)
    session = FakeSession()
    environ = {"UV_CACHE_DIR": str(cache)}
    warning = sessions.warn_if_uv_cannot_hardlink(session, tmp_path / ".nox", environ)
    assert warning and "different filesystems" in warning and "UV_CACHE_DIR" in warning
    assert session.warnings == [f"torch-matrix: warning: {warning}"]
    assert sessions.warn_if_uv_cannot_hardlink(session, tmp_path / ".nox", environ) is None
    assert len(session.warnings) == 1


def test_same_filesystem_cache_gives_no_warning(tmp_path, monkeypatch):
    from torch_matrix.run import sessions

    monkeypatch.setattr(sessions, "_LINK_CHECKED", [])
    session = type(
        "S", (), {"warn": lambda self, text: (_ for _ in ()).throw(AssertionError(text))}
    )()
    assert (
        sessions.warn_if_uv_cannot_hardlink(
            session, tmp_path, {"UV_CACHE_DIR": str(tmp_path / "c")}
        )
        is None
    )


def test_a_complete_cell_kept_on_resume_is_judged_for_targets_added_since(tmp_path):
    """[targets] change no fingerprint: the kept result is judged again from its recorded build facts."""
    import dataclasses
    import json

    from torch_matrix.world.results import read_result

    cell = make_cell()
    plan = plan_with(tmp_path, [cell], {"3.11": "/usr/bin/python3.11"})
    facts = json.loads(
        (Path(__file__).parent / "fixtures" / "wheel-builds" / "torch-2.7.1.json").read_text()
    )
    stored = dataclasses.replace(
        make_result(cell, fingerprint=plan.fingerprint(cell)), gpu={"build": facts}
    )
    write_result(stored, plan.cells_dir)
    plan = dataclasses.replace(
        plan,
        spec=parse_spec('name = "t"\n[targets]\ngpus = ["RTX 5090"]\n', "matrix.toml", environ={}),
    )
    assert is_complete(plan, cell)  # the same fingerprint: kept
    session = FakeSession(tmp_path / "venv")
    with pytest.raises(FakeSession.Stop) as stop:
        run_matrix_cell(session, plan, cell, environ={})
    assert stop.value.args[0][0] == "skip"
    assert any("hardware targets judged again" in line for line in session.logs)
    kept = read_result(plan.cells_dir / f"{cell.id}.json")
    assert kept is not None and [(t["target"], t["verdict"]) for t in kept.targets] == [
        ("RTX 5090 (sm_120)", "no-kernel-image")
    ]


def test_redo_takes_follow_up_cell_ids_and_the_report_never_sees_them():
    from torch_matrix.run.matrixplan import redo_cells, report_posargs
    from torch_matrix.vocab.errors import UserError

    assert redo_cells(["--redo", "t2.0.0-py3.11-edge", "t2.5.0-py3.11-edge", "--html"]) == [
        "t2.0.0-py3.11-edge",
        "t2.5.0-py3.11-edge",
    ]
    assert redo_cells(["--redo"]) == [] and redo_cells([]) == []
    assert report_posargs(["--redo", "t2.0.0-py3.11-edge", "--html"]) == ["--html"]
    assert report_posargs(["--redo"]) == [] and report_posargs(["--html", "x"]) == ["--html", "x"]
    for bad in ("../cells/x", "a/b", ".hidden"):
        with pytest.raises(UserError, match="is not a cell id"):
            redo_cells(["--redo", bad])
