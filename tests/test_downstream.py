"""Downstream mode, piece by piece: spec lookup in pyproject.toml, the ``install`` key, the
pytest command probe, ``torch-matrix run``'s command line. (The whole of it, with real nox
and uv against the synthetic index, is tests/test_example_downstream.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix import cli
from torch_matrix.world import environment
from torch_matrix.spec import install_items
from torch_matrix.cli import run as run_cli
from torch_matrix.vocab.errors import UserError
from torch_matrix.plan.grid import cell_install
from torch_matrix.vocab.records import Cell
from torch_matrix.spec.model import DEFAULT_SPEC_PATH
from torch_matrix.world.specfile import find_spec, load_spec
from torch_matrix.spec.parse import parse_spec
from torch_matrix.probes import pytest_outcomes

REPO = Path(__file__).resolve().parent.parent

PYPROJECT = """\
[project]
name = "Tiny.Train"
version = "0.1"

[tool.torch-matrix]
torch = ["2.3.1", "2.6.0"]
python = ["3.11"]
torchvision = "none"
install = [".[test]", "-r requirements.txt"]

[tool.torch-matrix.index]
find_links = []

[tool.torch-matrix.probes]
commands = { tests = "pytest -q tests" }
"""


# ------------------------------------------------------------------ spec lookup


def test_lookup_order(tmp_path):
    env: dict[str, str] = {}
    assert find_spec(None, env, str(tmp_path)).builtin
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no table: not a spec
    assert find_spec(None, env, str(tmp_path)).path == DEFAULT_SPEC_PATH
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    found = find_spec(None, env, str(tmp_path))
    assert found.pyproject and found.path == tmp_path / "pyproject.toml"
    (tmp_path / "matrix.toml").write_text('name = "m"\n')
    assert find_spec(None, env, str(tmp_path)).path == tmp_path / "matrix.toml"
    env["TORCH_MATRIX_SPEC"] = str(tmp_path / "other.toml")
    assert find_spec(None, env, str(tmp_path)).path == tmp_path / "other.toml"
    assert find_spec(str(tmp_path / "pyproject.toml"), env, str(tmp_path)).pyproject  # --spec wins


def test_pyproject_table_takes_the_same_keys_and_its_results_are_its_own(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")
    spec = load_spec(None, {}, cwd=str(tmp_path))
    assert spec.name == "tiny-train"  # the project's name, never "default"
    assert spec.torch.explicit == ("2.3.1", "2.6.0") and spec.torchvision == "none"
    assert spec.install == (".[test]", "-r requirements.txt")
    assert spec.probes.commands == {"tests": "pytest -q tests"}
    assert spec.base_dir == str(tmp_path.resolve())
    assert spec.install_digest
    # The digest follows the files the items name: an edited requirements.txt reruns the cells.
    (tmp_path / "requirements.txt").write_text("torch>=2.0,!=2.6.0\n")
    assert load_spec(None, {}, cwd=str(tmp_path)).install_digest != spec.install_digest


def test_a_spec_without_a_name_does_not_share_results_default(tmp_path):
    one, two = tmp_path / "alpha", tmp_path / "beta"
    for directory in (one, two):
        directory.mkdir()
        (directory / "matrix.toml").write_text('torch = ["2.5.1"]\n')
    names = {load_spec(None, {}, cwd=str(d)).name for d in (one, two)}
    assert names == {"alpha", "beta"}
    (one / "gpu.toml").write_text('torch = ["2.5.1"]\n')
    assert load_spec(str(one / "gpu.toml"), {}).name == "alpha-gpu"
    assert load_spec(None, {}, cwd=str(tmp_path)).name == "default"  # only the built-in one
    (tmp_path / "pyproject.toml").write_text("[tool.torch-matrix]\ntorch = ['2.5.1']\n")
    assert load_spec(None, {}, cwd=str(tmp_path)).name not in ("default", "")


@pytest.mark.parametrize(
    "text, where, words",
    [
        ("[tool.torch-matrix]\ncolour = 1\n", "[tool.torch-matrix]: colour", "unknown key"),
        ("[tool.torch-matrix]\ninstall = ['.[test', 'x']\n", "install[0]", "malformed extras"),
        (
            "[tool.torch-matrix]\ninstall = ['pytest', 'no such thing']\n",
            "install[1]",
            "neither a path",
        ),
        ("[tool.torch-matrix]\ninstall = ['--pre']\n", "install[0]", "unsupported option"),
        ("[tool.torch-matrix]\ninstall = ['-r']\n", "install[0]", "needs a file name"),
        ("[tool.torch-matrix]\ninstall = ['-e requests']\n", "install[0]", "only local paths"),
        ("[tool.torch-matrix]\ninstall = ['./nowhere[test]']\n", "install[0]", "does not exist"),
        ("[tool.torch-matrix]\ninstall = '-r missing.txt'\n", "install[0]", "does not exist"),
        ("[tool]\ntorch-matrix = 3\n", "[tool.torch-matrix]", "expected a table"),
    ],
)
def test_bad_pyproject_table_is_one_line_naming_file_and_key(tmp_path, text, where, words):
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        load_spec(str(path), {})
    line = caught.value.one_line()
    assert str(path) in line and where in line and words in line, line
    assert "\n" not in line and caught.value.hint  # one error line, then how to fix it


def test_cli_reports_a_bad_install_item_in_one_line(tmp_path, capsys):
    (tmp_path / "matrix.toml").write_text('install = ["not a requirement!"]\n')
    code = cli.main(["plan", "--spec", str(tmp_path / "matrix.toml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 2 and "install[0]" in err[0] and "Traceback" not in err[0]
    assert err[1].startswith("  hint: each `install` entry is a path such as '.[test]'")


# ------------------------------------------------------------------ install items


def test_install_items_become_uv_arguments(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname='p'\nversion='1'\n")
    (project / "dist").mkdir()
    items = [
        ".[test]",
        "-r requirements.txt",
        "-rother.txt",
        "-c c.txt",
        "pytest>=8",
        "numpy<2; python_version<'3.13'",
        "./dist/p-1-py3-none-any.whl",
        "-e ../lib[dev]",
    ]
    assert install_items.uv_args(items, str(project)) == [
        "-e",
        f"{project}[test]",
        "-r",
        f"{project}/requirements.txt",
        "-r",
        f"{project}/other.txt",
        "-c",
        f"{project}/c.txt",
        "pytest>=8",
        "numpy<2; python_version<'3.13'",
        f"{project}/dist/p-1-py3-none-any.whl",
        "-e",
        f"{tmp_path}/lib[dev]",
    ]
    assert install_items.requirement_names(items) == {"pytest", "numpy"}


def test_pytest_is_added_when_a_command_runs_it_and_nothing_names_it():
    def spec(install, command):
        return parse_spec(
            f'install = {json.dumps(install)}\n[probes]\ncommands = {{ t = "{command}" }}\n'
        )

    assert cell_install(spec([".[test]"], "pytest -q tests")) == (".[test]", "pytest")
    assert cell_install(spec(["pytest==8.3.2"], "python -m pytest tests")) == ("pytest==8.3.2",)
    assert cell_install(spec([], "python smoke.py")) == ()
    assert install_items.runs_pytest("cd sub && py.test -x")
    assert not install_items.runs_pytest("python pytest_helpers.py")


def test_the_install_list_is_part_of_the_cell_and_its_fingerprint():
    base = Cell(id="c", axes={"python": "3.11", "torch": "2.3.1"}, requirements=("torch==2.3.1",))
    with_project = Cell(**{**base.__dict__, "install": (".[test]",)})
    assert "install" not in base.to_json()  # cells without it keep their old shape and fingerprint
    assert Cell.from_json(with_project.to_json()) == with_project
    assert with_project.fingerprint() != base.fingerprint()


def _cell(install=(".[test]",)):
    return Cell(
        id="t2.3.1-py3.11",
        axes={"python": "3.11", "torch": "2.3.1", "torchvision": ""},
        requirements=("torch==2.3.1",),
        install=install,
    )


def test_install_command_puts_the_project_after_the_pins(tmp_path):
    (tmp_path / "setup.py").write_text("")
    command = environment.install_command(
        _cell(), {}, "/v/bin/python", uv="uv", project_dir=str(tmp_path)
    )
    assert command == [
        "uv",
        "pip",
        "install",
        "--python",
        "/v/bin/python",
        "torch==2.3.1",
        "-e",
        f"{tmp_path}[test]",
    ]
    alone = environment.install_command(
        _cell(), {}, "/v/bin/python", uv="uv", project_dir=str(tmp_path), with_project=False
    )
    assert alone[-1] == "torch==2.3.1"


NO_SOLUTION = (
    "  x No solution found when resolving dependencies:\n  `-> Because tiny depends on "
    "torch>=2.4 and you require torch==2.3.1, we can conclude that your requirements are "
    "unsatisfiable."
)


class FakeUv:
    """uv that refuses the install with the project and answers the pins-alone dry run as told."""

    def __init__(self, alone_ok: bool):
        self.alone_ok = alone_ok
        self.calls: list[list[str]] = []

    def __call__(self, command, **_):
        self.calls.append(list(command))
        ok = "--dry-run" in command and self.alone_ok
        return subprocess.CompletedProcess(
            command, 0 if ok else 1, stdout="" if ok else NO_SOLUTION
        )


def test_the_projects_requirements_excluding_a_cell_is_said_so(tmp_path):
    uv = FakeUv(alone_ok=True)
    outcome = environment.install(
        _cell(), {}, "/v/bin/python", uv="uv", runner=uv, project_dir=str(tmp_path)
    )
    assert outcome.status == "unsatisfiable"
    assert outcome.message.startswith("your requirements exclude torch 2.3.1")
    assert "Because tiny depends on torch>=2.4" in outcome.message  # the resolver's own words kept
    assert uv.calls[1][-1] == "torch==2.3.1" and "--dry-run" in uv.calls[1]
    # When the pins fail alone too, the project is not blamed.
    outcome = environment.install(
        _cell(),
        {},
        "/v/bin/python",
        uv="uv",
        runner=FakeUv(alone_ok=False),
        project_dir=str(tmp_path),
    )
    assert outcome.status == "unsatisfiable" and not outcome.message.startswith("your requirements")
    # Without install items there is nothing to blame and no second resolution.
    plain = FakeUv(alone_ok=True)
    environment.install(_cell(install=()), {}, "/v/bin/python", uv="uv", runner=plain)
    assert len(plain.calls) == 1


# ------------------------------------------------------------------ pytest as a probe


RECORD = st.fixed_dictionaries(
    {
        "nodeid": st.sampled_from(
            ["tests/test_a.py::test_x", "tests/test_b.py::test_y[1]", "t.py::C::test_z"]
        ),
        "when": st.sampled_from(["setup", "call", "teardown"]),
        "outcome": st.sampled_from(["passed", "failed", "skipped", "xfailed", "xpassed"]),
        "message": st.text(max_size=20),
    }
)


@given(st.sampled_from([0, 1, 2, 3, 4, 5]), st.lists(RECORD, max_size=8))
def test_judging_pytest_follows_its_exit_code(code, records):
    status, message, evidence = pytest_outcomes.judge(code, records)
    failed = [r for r in records if r["outcome"] == "failed"]
    ran = [
        n
        for n, o in pytest_outcomes.per_test(records).items()
        if o in ("passed", "xpassed", "failed", "error")
    ]
    if code in (0, 5) and not ran:
        assert status == "skip" and message.endswith(("no evidence", "(pytest collected no tests)"))
        assert evidence["no_evidence"] is True  # nothing ran: never a pass
    elif code == 0:
        assert status == "pass" and message == evidence["summary"]
    elif code in (2, 3, 4, 5):
        assert status == "error" and "the tests did not run" in message  # judged by the verdict
    else:
        assert status == "fail" and evidence["summary"] in message
        # every failure counted once per (message, test), whatever the cap on node ids shown
        distinct = {
            (r["message"] or "(no message)", r["nodeid"], r["when"]) for r in failed
        }  # setup and teardown errors are two
        assert sum(g["count"] for g in evidence.get("failure_groups", [])) + (
            evidence.get("more_groups") or {}
        ).get("failures", 0) == len(distinct)
        counts = [g["count"] for g in evidence.get("failure_groups", [])]
        assert counts == sorted(counts, reverse=True)  # largest group first
    assert evidence["pytest_exit"] == code
    assert sum(evidence["tests"].values()) == len(records)


def test_failures_are_grouped_by_message_largest_first_and_every_one_counted():
    records = [
        {
            "nodeid": f"tests/test_sd.py::test_load[{i}]",
            "when": "call",
            "outcome": "failed",
            "message": "AttributeError: 'dict' object has no attribute '_metadata'",
        }
        for i in range(168)
    ]
    records += [
        {
            "nodeid": "tests/test_opt.py::test_step",
            "when": "call",
            "outcome": "failed",
            "message": "AssertionError: 1.0 != 2.0",
        }
    ]
    records += [
        {
            "nodeid": f"tests/test_ok.py::test_{i}",
            "when": "call",
            "outcome": "passed",
            "message": "",
        }
        for i in range(44)
    ]
    records += [
        {
            "nodeid": f"tests/test_gpu.py::test_{i}",
            "when": "setup",
            "outcome": "skipped",
            "message": "needs CUDA",
        }
        for i in range(4)
    ]
    status, message, evidence = pytest_outcomes.judge(1, records)
    assert status == "fail"
    assert message.startswith(
        "169 failed, 44 passed, 4 skipped: [168] tests/test_sd.py::test_load[0], "
    )
    assert (
        "tests/test_sd.py::test_load[2], +165 more -- AttributeError: 'dict' object has no attribute "
        "'_metadata'; [1] tests/test_opt.py::test_step -- AssertionError: 1.0 != 2.0" in message
    )
    groups = evidence["failure_groups"]
    assert [g["count"] for g in groups] == [168, 1] and len(
        groups[0]["nodeids"]
    ) == pytest_outcomes.LISTED
    assert groups[0]["more"] == 158
    assert pytest_outcomes.judge(0, records[169:])[1] == "44 passed, 4 skipped"
    # Many groups (a parametrized suite whose messages name each case): every failure still counted,
    # the evidence stays small enough for the probe runner to keep whole (it cuts past 64,000 chars).
    many = [
        {
            "nodeid": f"tests/test_opt.py::test_step[Opt{k}-{i}]",
            "when": "call",
            "outcome": "failed",
            "message": f"AttributeError: 'Opt{k}' object has no attribute '_hooks' " + "x" * 250,
        }
        for k in range(40)
        for i in range(6)
    ]
    status, message, evidence = pytest_outcomes.judge(1, many)
    assert len(json.dumps(evidence)) < 32000 and evidence["more_groups"] == {
        "groups": 20,
        "failures": 120,
    }
    assert message.startswith("240 failed, 0 passed: [6] ") and message.endswith(
        "; +35 more groups (210 failures)"
    )
    assert (
        sum(g["count"] for g in evidence["failure_groups"]) + evidence["more_groups"]["failures"]
        == 240
    )
    assert pytest_outcomes.judge(0, records[-4:])[:2] == (
        "skip",
        "0 passed, 4 skipped: no evidence",
    )


def _probe_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    project = tmp_path / "project"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return project


def run_command_probes(tmp_path: Path, project: Path, **commands: str) -> dict[str, dict]:
    out = tmp_path / "probes.json"
    command = [
        sys.executable,
        "-m",
        "torch_matrix.probes",
        "--no-standard",
        "--quiet",
        "--out",
        str(out),
        "--command-dir",
        str(project),
    ]
    for name, text in commands.items():
        command += ["--command", f"{name}={text}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return {r["name"]: r for r in json.loads(out.read_text())["results"]}


def test_a_pytest_command_probe_names_failing_tests_and_not_skips(tmp_path):
    project = _probe_dir(
        tmp_path,
        {
            "tests/test_resume.py": (
                "import os, pytest\n"
                "def test_runs_from_the_project():\n    assert os.path.isfile('marker.txt')\n"
                "def test_resume_from_checkpoint():\n    assert {'epoch': 1} == {'epoch': 2}, 'resumed wrong'\n"
                "def test_needs_gpu():\n    pytest.skip('no CUDA device')\n"
                "@pytest.mark.xfail(reason='known')\ndef test_known():\n    assert False\n"
            ),
            "tests/test_fine.py": "def test_fine():\n    pass\n",
            "marker.txt": "",
            "broken/test_import.py": "import no_such_module_here\n",
        },
    )
    results = run_command_probes(
        tmp_path,
        project,
        tests="pytest -q tests",
        skips="python -m pytest -q tests -k 'gpu or fine'",
        gpu_only="pytest -q tests -k gpu",
        collection="pytest -q broken",
        usage="pytest --no-such-option",
        empty="pytest -q tests -k nothing",
        plain="python -c 'raise SystemExit(3)'",
        missing="no-such-command-xyz",
    )
    tests = results["tests"]
    assert tests["status"] == "fail"
    assert tests["message"].startswith(
        "1 failed, 2 passed, 1 skipped, 1 xfailed: tests/test_resume.py::test_resume_from_checkpoint -- "
    )
    assert "resumed wrong" in tests["message"]
    assert tests["evidence"]["tests"] == {"passed": 2, "failed": 1, "skipped": 1, "xfailed": 1}
    assert (
        tests["evidence"]["failed"][0]["nodeid"]
        == "tests/test_resume.py::test_resume_from_checkpoint"
    )
    # The repro runs the cell's own pytest: the runner's interpreter's directory first on PATH.
    assert (
        tests["repro"]
        == f'cd {project} && PATH={Path(sys.executable).parent}:"$PATH" pytest -q tests'
    )
    assert results["skips"]["status"] == "pass"  # skipped tests are not failures
    assert results["skips"]["message"] == "1 passed, 1 skipped"
    assert results["skips"]["evidence"]["tests"] == {"passed": 1, "skipped": 1}
    # Every selected test skipped (a GPU-only selection on a CPU runner): no evidence, never a pass.
    assert results["gpu_only"]["status"] == "skip"
    assert results["gpu_only"]["message"] == "0 passed, 1 skipped: no evidence"
    collection = results["collection"]
    assert collection["status"] == "error"
    assert "collection error in broken/test_import.py" in collection["message"]
    assert "no_such_module_here" in collection["message"]
    assert results["usage"]["status"] == "error" and "usage error" in results["usage"]["message"]
    assert (
        results["empty"]["status"] == "skip" and "collected no tests" in results["empty"]["message"]
    )
    assert results["empty"]["message"].startswith("0 passed, 0 skipped: no evidence")
    assert results["plain"]["status"] == "fail"  # not pytest: exit code 3 is just a failure
    assert results["missing"]["status"] == "error" and "not found" in results["missing"]["message"]
    assert not (project / ".pytest_cache").exists()  # cells never write into the project


# ------------------------------------------------------------------ torch-matrix run


def test_run_hands_nox_the_shipped_noxfile_and_passes_options_through(tmp_path):
    command = run_cli.nox_command(
        ["-s", "matrix", "report", "-j", "2", "-t", "py3.11", "-k", "2.5"], ["--redo"], tmp_path
    )
    assert command[0] == sys.executable and command[1] == "-c" and "'nox'" in command[2]
    assert command[3:5] == ["--noxfile", str(REPO / "torch_matrix" / "noxfile.py")]
    assert command[5:] == [
        "--envdir",
        str(tmp_path / ".nox"),
        "-s",
        "matrix",
        "report",
        "-j",
        "2",
        "-t",
        "py3.11",
        "-k",
        "2.5",
        "--",
        "--redo",
    ]
    assert run_cli.nox_command(["--envdir", "/x"], [], tmp_path).count("--envdir") == 1
    # Each spec its own venvs: `torch-matrix run --spec gpu.toml` never reuses matrix.toml's cells' venvs.
    named = run_cli.nox_command([], [], tmp_path, "tiny-train-gpu")
    assert named[named.index("--envdir") + 1] == str(tmp_path / ".nox" / "tiny-train-gpu")
    with pytest.raises(UserError):
        run_cli.nox_command(["-f", "other.py"], [], tmp_path)


class _RecordingSession:
    """What the shipped noxfile's report and pins sessions ask nox to run."""

    def __init__(self):
        self.posargs: list[str] = []
        self.commands: list[list[str]] = []

    def run(self, *args, **_):
        self.commands.append([str(a) for a in args])


@pytest.mark.parametrize("session_name", ["report", "pins"])
def test_the_shipped_sessions_never_put_their_working_directory_on_sys_path(
    tmp_path, monkeypatch, session_name
):
    """nox runs the shipped noxfile's sessions from the noxfile's folder, the package directory:
    with ``python -m torch_matrix.cli`` that folder came first on sys.path, and a module there named like
    the standard library's (``bisect.py`` once) broke ``import tempfile``: no table, no pins. The
    sessions' commands, run from a folder holding such a module, must not see it."""
    monkeypatch.setattr(
        sys, "argv", ["nox", "-s", session_name]
    )  # importing it plans only for `-s matrix`
    import torch_matrix.noxfile as shipped

    (tmp_path / "tempfile.py").write_text(
        "raise ImportError('the working directory shadowed tempfile')\n"
    )
    (tmp_path / "random.py").write_text(
        "raise ImportError('the working directory shadowed random')\n"
    )
    run_dir = tmp_path / "results" / "x"
    (run_dir / "cells").mkdir(parents=True)
    monkeypatch.setattr(shipped.matrixplan, "run_dir_for_session", lambda *a, **k: run_dir)
    session = _RecordingSession()
    session.posargs = [
        "--redo"
    ]  # `torch-matrix run -s 'matrix(ID)' -- --redo`: nox gives it to every session
    getattr(shipped, session_name)(session)
    assert session.commands
    for command in session.commands:
        assert "--redo" not in command  # the cells' option, not the report's (it would refuse it)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCH_MATRIX_"))}
    for command in session.commands:  # (a local run) the import into the history, then the report
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert "shadowed" not in done.stderr, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 2), (
            done.stderr
        )  # "no cell results" is the tool's own one-line error


def test_torch_matrix_run_starts_nox_without_the_projects_folder_on_sys_path(tmp_path):
    """``torch-matrix run`` starts nox from the user's project: a project module named like one of
    the standard library's, or like one of our packages, must not replace it inside nox."""
    (tmp_path / "matrix.toml").write_text(
        'torch = ["2.5.1"]\ntorchvision = "none"\npython = ["current"]\n'
    )
    (tmp_path / "tempfile.py").write_text("raise ImportError('the project shadowed tempfile')\n")
    (tmp_path / "nox").mkdir()
    (tmp_path / "nox" / "__init__.py").write_text("raise ImportError('the project shadowed nox')\n")
    command = run_cli.nox_command(["--version"], [], tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCH_MATRIX_"))}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "shadowed" not in done.stderr, done.stderr


def test_run_makes_spec_and_results_absolute(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    env = run_cli.run_environment(None, None, tmp_path, {})
    assert env["TORCH_MATRIX_SPEC"] == str(tmp_path / "pyproject.toml")
    assert env["TORCH_MATRIX_RESULTS"] == str(tmp_path / ".torch-matrix" / "results")
    with pytest.raises(UserError):
        run_cli.run_environment("nope.toml", None, tmp_path, {})


def test_help_lists_only_commands_that_exist(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = capsys.readouterr().out
    commands = cli._build_parser()._subparsers._group_actions[0].choices
    assert {"plan", "report", "pins", "run"} <= set(commands)
    for name in commands:
        assert name in listed
        module = cli.command_module(name)  # the registry's module: its options and its work
        assert callable(module.add_arguments) and callable(module.main)


def test_a_pytest_run_whose_tests_did_not_run_is_no_evidence_and_failed_tests_are():
    """Collection/usage errors say nothing about torch: no evidence, never incompatible."""
    from dataclasses import replace

    from torch_matrix.vocab.records import CellResult, InstallOutcome, ProbeResult
    from torch_matrix.judge.verdict import INCOMPATIBLE, NO_EVIDENCE, verdict_of

    cell = _cell()
    base = CellResult(
        cell=cell, fingerprint="f", install=InstallOutcome("installed", resolved={"torch": "2.3.1"})
    )
    for code, words in (
        (2, "collection error in tests/test_x.py: SyntaxError: invalid syntax"),
        (4, "pytest usage error (bad option or path)"),
        (5, "pytest collected no tests"),
    ):
        probe = ProbeResult(
            name="tests",
            status="error",
            message=f"{words} (exit {code}): not evidence",
            evidence={"pytest_exit": code, "tests": {}},
            isolation="command",
        )
        verdict = verdict_of(replace(base, probes=(probe,)))
        assert verdict.kind == NO_EVIDENCE, (code, verdict)
        assert "tests did not run" in verdict.reason
    failed = ProbeResult(
        name="tests",
        status="fail",
        message="1 of 3 tests failed: tests/t.py::test_a",
        evidence={"pytest_exit": 1, "tests": {"passed": 2, "failed": 1}},
        isolation="command",
    )
    verdict = verdict_of(replace(base, probes=(failed,)))
    assert verdict.kind == INCOMPATIBLE and "tests/t.py::test_a" in verdict.reason


def test_run_keeps_nox_options_and_posargs_apart_and_other_commands_stay_strict():
    args = cli.parse_args(
        ["run", "--spec", "s.toml", "-s", "matrix", "-j", "2", "-k", "py3", "--", "--redo"]
    )
    assert args.spec == "s.toml" and args.nox_args == ["-s", "matrix", "-j", "2", "-k", "py3"]
    assert args.posargs == ["--redo"]
    with pytest.raises(SystemExit):
        cli.parse_args(["plan", "-s", "matrix"])  # only `run` passes unknown options on


def test_a_command_probe_in_which_no_test_ran_is_no_evidence_for_the_verdict_or_the_pins():
    """A GPU-only selection on a CPU runner: every test skipped. Zero tests ran, so the cell is not
    evidence of a working version (it once was "compatible" and could block a pin)."""
    from dataclasses import replace

    from torch_matrix.pins.evidence import observe
    from torch_matrix.judge.verdict import COMPATIBLE, NO_EVIDENCE, verdict_of
    from torch_matrix.report.terminal import render_text
    from torch_matrix.vocab.records import CellResult, InstallOutcome, ProbeResult

    cell = _cell()
    base = CellResult(
        cell=cell, fingerprint="f", install=InstallOutcome("installed", resolved={"torch": "2.3.1"})
    )
    sanity = ProbeResult(name="install_sanity", status="pass")
    idle = ProbeResult(
        name="tests",
        status="skip",
        message="0 passed, 4 skipped: no evidence",
        isolation="command",
        evidence={
            "pytest_exit": 0,
            "tests": {"skipped": 4},
            "summary": "0 passed, 4 skipped",
            "no_evidence": True,
        },
    )
    result = replace(base, probes=(sanity, idle))
    for policy in ({}, {"skip": "fail"}):  # a strict skip policy does not make it a failure either
        verdict = verdict_of(replace(result, cell=replace(cell, policy=policy)))
        assert verdict.kind == NO_EVIDENCE and verdict.idle == ("tests",), verdict
        assert "tests: 0 passed, 4 skipped: no evidence" in verdict.reason
    evidence, _unsatisfiable, no_evidence = observe([result])
    assert evidence == [] and [note.cell_id for note in no_evidence] == [cell.id]
    text = render_text([result])
    assert "! error: no test ran in tests (tests: 0 passed, 4 skipped)" in text
    assert "0 passed, 4 skipped: no evidence" in text.split("Cells that did not pass:")[1]
    ran = replace(
        idle,
        status="pass",
        message="44 passed, 4 skipped",
        evidence={
            "pytest_exit": 0,
            "tests": {"passed": 44, "skipped": 4},
            "summary": "44 passed, 4 skipped",
        },
    )
    good = replace(result, probes=(sanity, ran))
    assert verdict_of(good).kind == COMPATIBLE
    assert "✓ compatible (tests: 44 passed, 4 skipped)" in render_text([good])
    from torch_matrix.report.html_page import render_html
    from torch_matrix.report.junit import render_junit
    from torch_matrix.report.markdown import render_markdown_summary

    assert "<system-out>44 passed, 4 skipped</system-out>" in render_junit([good])
    assert 'message="skip: 0 passed, 4 skipped: no evidence"' in render_junit([result])
    assert "compatible (tests: 44 passed, 4 skipped)" in render_markdown_summary([good])
    assert "44 passed, 4 skipped" in render_html([good])


def _collection_error(module_error: str, code: int = 2):
    from tests.factories import make_probe

    message = f"collection error in tests/test_norm.py: {module_error} (pytest exit {code}): the tests did not run"
    return make_probe(
        "tests",
        "error",
        message,
        isolation="command",
        evidence={
            "pytest_exit": code,
            "tests": {},
            "summary": "0 passed",
            "collection_errors": [{"nodeid": "tests/test_norm.py", "message": module_error}],
        },
    )


def _passing_tests():
    from tests.factories import make_probe

    return make_probe(
        "tests",
        "pass",
        "2 passed",
        isolation="command",
        evidence={"pytest_exit": 0, "tests": {"passed": 2}, "summary": "2 passed"},
    )


def test_a_collection_error_naming_torch_where_other_cells_collect_is_incompatible_and_pinned(
    tmp_path,
):
    """The package imports, at module level, a torch module a release removed: pytest exits 2 on the
    releases without it. That is the release breaking the project (pinned), not the suite to fix."""
    from torch_matrix.judge.verdict import INCOMPATIBLE, NO_EVIDENCE, verdict_of
    from torch_matrix.pins import suggest_pins
    from torch_matrix.world.results import load_results, write_result
    from tests.factories import make_probe, make_result

    sanity = make_probe("install_sanity")
    old = make_result(torch="1.13.1", torchvision="", probes=[sanity, _passing_tests()])
    broken = [
        make_result(
            torch=version,
            torchvision="",
            probes=[sanity, _collection_error("ModuleNotFoundError: No module named 'torch._six'")],
        )
        for version in ("2.4.1", "2.13.0")
    ]
    for result in (old, *broken):
        write_result(result, tmp_path / "run" / "cells")
    loaded = load_results(tmp_path / "run").results
    verdicts = {r.cell.torch: verdict_of(r) for r in loaded}
    for version in ("2.4.1", "2.13.0"):
        assert verdicts[version].kind == INCOMPATIBLE and verdicts[version].failing == ("tests",)
        assert "No module named 'torch._six'" in verdicts[version].reason
    suggestion = suggest_pins(loaded)
    excluded = {
        e.version: e for pin in suggestion.recommended.pins_for("torch") for e in pin.exclusions
    }
    assert set(excluded) == {"2.4.1", "2.13.0"}, suggestion.exclusions
    for exclusion in excluded.values():  # every exclusion names its failing and its passing cell
        assert exclusion.failing_cell and exclusion.passing_cell == old.cell.id, exclusion
        assert "torch._six" in exclusion.summary

    # The same error in every cell: the suite is to fix (no evidence), nothing is pinned.
    everywhere = tmp_path / "everywhere"
    for result in broken:
        write_result(result, everywhere / "cells")
    loaded = load_results(everywhere).results
    for result in loaded:
        verdict = verdict_of(result)
        assert verdict.kind == NO_EVIDENCE and "fix the test suite" in verdict.reason, verdict
    assert suggest_pins(loaded).recommended.pins_for("torch") == []

    # An error that names no module of an axis (the project's own, a plugin) stays no evidence.
    own = make_result(
        torch="2.4.1",
        torchvision="",
        probes=[sanity, _collection_error("ModuleNotFoundError: No module named 'yaml'")],
    )
    assert verdict_of(own).kind == NO_EVIDENCE
    for error in (
        "ImportError: cannot import name 'inf' from 'torch._six' (/x/site-packages/torch/_six.py)",
        "AttributeError: module 'torch.optim' has no attribute 'SparseAdam2'",
    ):
        named = make_result(
            torch="2.4.1", torchvision="", probes=[sanity, _collection_error(error)]
        )
        assert verdict_of(named).kind == INCOMPATIBLE, error


def _missing_module_cell(
    torch: str, setuptools: str, ships_pkg_resources: bool, fails: bool, **cell
):
    from dataclasses import replace

    from tests.factories import make_cell, make_probe, make_result

    probe = (
        make_probe(
            "tests",
            "fail",
            "1 failed: tests/test_paths.py::test_include_dirs -- "
            "ModuleNotFoundError: No module named 'pkg_resources'",
            isolation="command",
            evidence={"pytest_exit": 1, "summary": "1 failed"},
        )
        if fails
        else make_probe(
            "tests",
            "pass",
            "1 passed",
            isolation="command",
            evidence={"pytest_exit": 0, "summary": "1 passed"},
        )
    )
    result = make_result(
        make_cell(torch=torch, torchvision="", **cell),
        probes=[make_probe("install_sanity"), probe],
        resolved={"torch": torch, "setuptools": setuptools},
    )
    modules = (
        ["_distutils_hack", "pkg_resources", "setuptools"]
        if ships_pkg_resources
        else ["_distutils_hack", "setuptools"]
    )
    return replace(result, interpreter={**result.interpreter, "providers": {"setuptools": modules}})


def test_a_module_a_dependency_release_dropped_is_a_version_finding_on_that_dependency():
    """torch 1.13.1 imports pkg_resources, which setuptools 82 stopped shipping: the advice was
    "add pkg_resources", which no index has. The module is mapped to its provider (setuptools, seen
    shipping it in another cell) and the finding is about versions, with the two honest answers."""
    from torch_matrix.judge.runcontext import in_run_context
    from torch_matrix.judge.verdict import INCOMPATIBLE, verdict_of

    new = _missing_module_cell("1.13.1", "84.0.0", False, True, extras={"setuptools": ">=82"})
    old = _missing_module_cell("1.13.1", "80.9.0", True, False, extras={"setuptools": "<82"})
    before = verdict_of(new)
    assert before.kind == "environment"  # alone, the cell can only advise a requirement
    judged = {r.cell.id: verdict_of(r) for r in in_run_context([new, old])}
    verdict = judged[new.cell.id]
    assert verdict.kind == INCOMPATIBLE and verdict.environment == {}, verdict
    assert "`pkg_resources` comes from setuptools: setuptools 80.9.0 ships it" in verdict.reason
    assert (
        "Either cap setuptools<=80.9.0 (keeps torch 1.13.1), or raise torch's floor above 1.13.1 "
        "(keeps setuptools 84.0.0)" in verdict.reason
    )
    assert "add `" not in verdict.reason


def test_an_unsatisfiable_counterfactual_refutes_its_advice_and_says_so(tmp_path):
    """The advice "add <module>" names a module, not a distribution: its counterfactual cell is
    unsatisfiable. The advice is withdrawn, the output says so, and the failure counts against the
    cell's versions (pinned, naming its failing and its passing cell)."""
    from dataclasses import replace

    from torch_matrix.judge.verdict import ENVIRONMENT, INCOMPATIBLE, verdict_of
    from torch_matrix.pins import suggest_pins
    from torch_matrix.pins.evidence import environment_advice
    from torch_matrix.plan.counterfactual import plan_counterfactuals
    from torch_matrix.world.results import load_results, write_result
    from tests.factories import make_result

    def missing_extmod(result):
        probes = tuple(
            replace(p, message=p.message.replace("pkg_resources", "_torch_ext_helpers"))
            for p in result.probes
        )
        return replace(result, probes=probes)

    broken = missing_extmod(_missing_module_cell("1.13.1", "84.0.0", False, True))
    assert verdict_of(broken).kind == ENVIRONMENT
    [planned] = plan_counterfactuals(broken)
    assert planned.requirements[-1] == "_torch_ext_helpers"
    counterfactual = make_result(
        planned,
        status="unsatisfiable",
        message=(
            "× No solution found when resolving dependencies:\n╰─▶ Because -torch-ext-helpers was not found in "
            "the package registry and you require -torch-ext-helpers, your requirements are unsatisfiable."
        ),
    )
    newer = _missing_module_cell("2.4.1", "84.0.0", False, False)
    for result in (broken, counterfactual, newer):
        write_result(result, tmp_path / "cells")
    loaded = load_results(tmp_path).results
    by_id = {r.cell.id: r for r in loaded}
    verdict = verdict_of(by_id[broken.cell.id])
    assert verdict.kind == INCOMPATIBLE, verdict
    assert (
        f"refuted: `add _torch_ext_helpers` (its counterfactual cell {planned.id} is unsatisfiable: "
        "the index has no `_torch_ext_helpers`)" in verdict.reason
    )
    assert all(
        "_torch_ext_helpers" not in advice.requirement for advice in environment_advice(loaded)
    )
    [exclusion] = [
        e for pin in suggest_pins(loaded).recommended.pins_for("torch") for e in pin.exclusions
    ]
    assert exclusion.version == "1.13.1" and exclusion.failing_cell == broken.cell.id
    assert exclusion.passing_cell == newer.cell.id and "refuted" in exclusion.summary


def test_module_providers_lists_only_distributions_whose_modules_differ_from_their_name():
    """typing-extensions ships typing_extensions: the same name, normalised, so it is no provider of
    note; setuptools ships _distutils_hack too. (The install check's own name rule once shadowed the
    one this uses, and every distribution with '-', '_' or '.' in its name came back.)"""
    from importlib import metadata

    from torch_matrix.probes import facts

    providers = facts.module_providers()
    names = {dist.metadata["Name"] for dist in metadata.distributions()}
    assert "typing_extensions" in names or "typing-extensions" in names, (
        "the test venv has typing-extensions"
    )
    assert not {"typing_extensions", "typing-extensions"} & set(providers), providers
    if "setuptools" in names:
        assert (
            "_distutils_hack" in providers["setuptools"]
        )  # and pkg_resources before setuptools 82


def test_plan_and_run_with_no_spec_here_say_so_and_exit_2_unless_default(
    tmp_path, capsys, monkeypatch
):
    """Outside a project, `plan` and `run` never take the built-in matrix (three CUDA torch
    installs) silently: one line names what was looked for, exit 2; `--default` asks for it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    assert cli.main(["plan"]) == 2
    err = capsys.readouterr().err
    assert "no spec found here (looked for --spec, $TORCH_MATRIX_SPEC, ./matrix.toml" in err
    assert "--default" in err and "Traceback" not in err
    assert cli.main(["run"]) == 2
    assert "no spec found here" in capsys.readouterr().err
    env = run_cli.run_environment(None, None, tmp_path, {}, default=True)
    assert env["TORCH_MATRIX_SPEC"].endswith("default_matrix.toml")
    assert cli.parse_args(["plan", "--default"]).default


def test_no_results_hints_name_the_command_the_user_has(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert cli.main(["pins", str(tmp_path / "results" / "x")]) == 2
    err = capsys.readouterr().err
    assert "`torch-matrix run` first" in err and "nox -s matrix" not in err
    (tmp_path / "noxfile.py").write_text("")
    assert cli.main(["pins", str(tmp_path / "results" / "x")]) == 2
    assert "`nox -s matrix` first" in capsys.readouterr().err
