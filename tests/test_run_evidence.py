"""What a run may claim from its evidence, end to end (``torch-matrix run`` in a project, offline).

The downstream world of the synthetic index (tests/synthetic_wheels.py: torch 2.3.0 to 2.6.0,
real pytest, flit_core and setuptools repackaged from this interpreter), a small project per test:

- a suite that runs past ``[probes] timeout`` is no evidence (``timeout``), never ``incompatible``:
  the run fails, naming the key and the time the suite ran, and the heartbeat names the test;
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.judge.verdict import TIMED_OUT, verdict_of
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
    result = read_result(project / "results" / "slow" / "cells" / f"{cell}.json")
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
    summary = (project / "results" / "slow" / "summary.md").read_text()
    assert "[probes] timeout" in summary, summary
    # the heartbeat (every 15 s) named the probe and the test it was running
    assert "running tests: tests/test_slow.py::test_sleeps" in log, log
