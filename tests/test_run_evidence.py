"""What a run may claim from its evidence, end to end (``torch-matrix run`` in a project, offline).

The downstream world of the synthetic index (tests/synthetic_wheels.py: torch 2.3.0 to 2.6.0,
real pytest, flit_core and setuptools repackaged from this interpreter), a small project per test:

- a suite that runs past ``[probes] timeout`` is no evidence (``timeout``), never ``incompatible``:
  the run fails, naming the key and the time the suite ran, and the heartbeat names the test;
- a flat-layout setuptools project (automatic discovery, ``install = [".[test]"]``) installs in
  every cell: the tool's results and scratch are nowhere its build looks;
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.judge.verdict import COMPATIBLE, TIMED_OUT, verdict_of
from torch_matrix.world.results import read_result
from tests.synthetic_wheels import build_index, downstream_wheels, installed_wheels

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    try:
        return build_index(root / "index", downstream_wheels() + installed_wheels(("setuptools",)))
    except Exception as error:  # noqa: BLE001 - say loudly why the tests cannot run
        pytest.fail(
            f"cannot build the downstream synthetic index (pytest, flit_core and setuptools must be "
            f"installed, `pip install -e '.[test]'`): {error!r}"
        )


def env_for(tmp: Path, index_url: str, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX", "PIP_")) and k != "VIRTUAL_ENV"
    }
    env.update(
        PIP_INDEX_URL=index_url,
        PIP_EXTRA_INDEX_URL="",
        PIP_FIND_LINKS="",
        PYTHONPATH=str(REPO),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_HTTP_RETRIES="0",
        UV_NO_CONFIG="1",
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
    )
    env.update(extra)
    return env


def cli(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def write_files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SLOW_SUITE = {
    "matrix.toml": """\
name = "slow"
python = ["current"]
torch = ["2.4.0"]
torchvision = "none"
install = ["pytest"]

[probes]
run = ["tests"]
commands = { tests = "pytest -q tests" }
timeout = 20
""",
    "tests/test_slow.py": "import time\n\ndef test_sleeps():\n    time.sleep(120)\n",
}


FLAT_LAYOUT = {
    "pyproject.toml": """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "flat"
version = "0.1"

[project.optional-dependencies]
test = ["pytest"]

[tool.torch-matrix]
python = ["current"]
torch = ["2.4.0", "2.5.0"]
torchvision = "none"
install = [".[test]"]

[tool.torch-matrix.probes]
run = ["tests"]
commands = { tests = "pytest -q tests" }
""",
    "flat/__init__.py": "def answer():\n    return 42\n",
    "tests/test_flat.py": "import flat\n\ndef test_answer():\n    assert flat.answer() == 42\n",
}


def test_a_flat_layout_setuptools_project_installs_in_every_cell(tmp_path, world):
    """setuptools' automatic discovery took the tool's `results/` for a second top-level package:
    every cell `! error` ("Multiple top-level packages discovered in a flat-layout: ['flat',
    'results']"), retried 3 times. The results now go to `.torch-matrix/results/`, a folder no
    backend discovers (git ignores it too); a run the old default left in `results/` still reads."""
    project = write_files(tmp_path / "flat", FLAT_LAYOUT)
    env = env_for(tmp_path, world.url)
    done = cli(project, env, "run")
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "Multiple top-level packages" not in log
    run_dir = project / ".torch-matrix" / "results" / "flat"
    for torch in ("2.4.0", "2.5.0"):
        result = read_result(run_dir / "cells" / f"t{torch}-py{PY}.json")
        assert result is not None, log
        assert verdict_of(result).kind == COMPATIBLE, (torch, verdict_of(result).reason)
        assert result.probe("tests").evidence["tests"] == {"passed": 1}
    assert not (project / "results").exists()
    ignored = subprocess.run(
        ["git", "init", "-q", "."], cwd=project, capture_output=True, text=True, check=False
    )
    if ignored.returncode == 0:  # git sees nothing of the tool's: the folder ignores itself
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=project,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert ".torch-matrix" not in status, status
    # A run the old default left in ./results: `report` and `pins` with no argument still read it.
    (project / ".torch-matrix" / "results").rename(project / "results")
    shutil.rmtree(project / ".torch-matrix")
    report = cli(project, env, "report")
    assert report.returncode == 0, report.stderr
    assert "2 cells: 2 compatible" in report.stdout, report.stdout
    assert f"torch-matrix report: {project / 'results' / 'flat'}" in report.stderr, report.stderr


def test_a_suite_past_its_limit_is_no_evidence_and_fails_the_run(tmp_path, world):
    """The project's suite sleeps past `[probes] timeout = 20`: the cell was `✗ incompatible` and the
    run exited 0, nothing naming the limit. Now its verdict is `timeout` (no evidence), the run
    exits non-zero with a hint naming `[probes] timeout` and the time the suite ran, no pin is
    drawn from it, and the heartbeat said which test was running."""
    project = write_files(tmp_path / "slow", SLOW_SUITE)
    env = env_for(tmp_path, world.url)
    done = cli(project, env, "run")
    log = done.stdout + done.stderr
    cell = f"t2.4.0-py{PY}"
    result = read_result(project / ".torch-matrix" / "results" / "slow" / "cells" / f"{cell}.json")
    assert result is not None, log
    assert result.probe("tests").status == "timeout", result.probe("tests")
    verdict = verdict_of(result)
    assert verdict.kind == TIMED_OUT, verdict
    assert done.returncode != 0, log
    assert f"{cell}: TIMEOUT (no evidence)" in log, log
    assert "raise [probes] timeout" in verdict.reason and "tests ran 2" in verdict.reason, verdict
    assert "incompatible" not in result.verdict["kind"]
    assert "⏱ timeout" in done.stdout, done.stdout  # the table's own status
    assert (
        "1 cell: 0 compatible, 0 incompatible, 0 unsatisfiable, 0 error, 1 timeout" in done.stdout
    )
    summary = (project / ".torch-matrix" / "results" / "slow" / "summary.md").read_text()
    assert "[probes] timeout" in summary, summary
    # the heartbeat (every 15 s) named the probe and the test it was running
    assert "running tests: tests/test_slow.py::test_sleeps" in log, log


def _printed_command(line: str) -> list[str]:
    """A printed `torch-matrix ...` line as this interpreter runs it (the installed script's twin)."""
    words = shlex.split(line.strip())
    assert words[0] == "torch-matrix", line
    return words[1:]


def test_every_printed_command_runs_as_printed_for_a_pyproject_spec(tmp_path, world):
    """A pyproject spec's "Rerun a cell" line said `--spec '<file> [tool.torch-matrix]'` (the run's
    plan stored the spec as messages show it): "no such spec file", exit 2, from the table,
    summary.md and a later report alike. The bundle's rerun line named `$PROJECT/...`, and its probe
    repro the venv the session had deleted. Each printed line now runs as printed, from the
    project's directory, and names no machine path."""
    project = write_files(tmp_path / "flat", FLAT_LAYOUT)
    (project / "tests" / "test_torch.py").write_text(  # a finding on 2.5.0: a rerun line to print
        "import torch\n\ndef test_not_2_5():\n    assert torch.__version__ != '2.5.0'\n"
    )
    env = env_for(tmp_path, world.url)
    done = cli(project, env, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = project / ".torch-matrix" / "results" / "flat"
    cell = f"t2.5.0-py{PY}"
    # the report made later, on its own (from the plan), and summary.md print the same line
    later = cli(project, env, "report", str(run_dir))
    summary = (run_dir / "summary.md").read_text()
    for text in (later.stdout, summary):
        lines = [line for line in text.splitlines() if f"'matrix({cell})'" in line]
        assert lines, text
        for line in lines:
            assert "[tool.torch-matrix]" not in line, line
            again = cli(project, env, *_printed_command(line))
            assert again.returncode == 0, (line, again.stdout + again.stderr)
    assert ".nox" not in summary, summary  # no probe repro names the venv the session removed
    # the issue bundles, of the failing cell and of a compatible one: their rerun lines run from
    # the project's directory
    for shown in (cell, f"t2.4.0-py{PY}"):
        _bundle_runs(project, env, run_dir, shown, tmp_path)


def _bundle_runs(project: Path, env: dict[str, str], run_dir: Path, cell: str, tmp_path: Path):
    bundle = cli(project, env, "repro", cell, "--results", str(run_dir))
    assert bundle.returncode == 0, bundle.stderr
    text = bundle.stdout
    assert str(tmp_path) not in text and "/root/" not in text and "&lt;" not in text, text
    assert "file://" not in text and "$PROJECT[" not in text, text  # installs from the project
    rerun = text.split("#### Rerun with torch-matrix", 1)[1].split("```sh\n", 1)[1].split("\n")[0]
    again = cli(project, env, *_printed_command(rerun))
    assert again.returncode == 0, (rerun, again.stdout + again.stderr)


BROKEN_BUILD = {
    "pyproject.toml": """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.torch-matrix]
name = "native"
python = ["current"]
torch = ["2.4.0"]
torchvision = "none"
install = ["."]

[tool.torch-matrix.probes]
run = ["install_sanity"]
""",
    "setup.py": "raise RuntimeError('native: cannot find libfoo.so (set FOO_HOME)')\n",
}


def test_the_builds_own_error_comes_first_and_is_not_retried(tmp_path, world):
    """A project whose setup.py cannot find its native library: the table and summary.md showed
    uv's chain ("Failed to build ...; The build backend returned an error; Call to ... failed")
    and the RuntimeError only in nox's abort line, after 3 attempts with --reinstall. The build's
    own error now comes first, and a build that fails as written is tried once."""
    project = write_files(tmp_path / "native", BROKEN_BUILD)
    env = env_for(tmp_path, world.url)
    done = cli(project, env, "run")
    log = done.stdout + done.stderr
    assert done.returncode != 0, log
    cell = f"t2.4.0-py{PY}"
    result = read_result(
        project / ".torch-matrix" / "results" / "native" / "cells" / f"{cell}.json"
    )
    assert result is not None and result.install.status == "error", log
    expected = "the build failed: RuntimeError: native: cannot find libfoo.so (set FOO_HOME)"
    assert result.install.message.startswith(expected), result.install.message
    assert result.install.attempts == 1, result.install.attempts
    assert "install attempt 1 of" not in log, log
    assert expected in done.stdout, done.stdout  # the table's row
    summary = (project / ".torch-matrix" / "results" / "native" / "summary.md").read_text()
    assert expected in summary, summary
