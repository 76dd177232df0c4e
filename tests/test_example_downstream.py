"""examples/tinytrain end to end: ``torch-matrix run`` in a repository with no noxfile, offline.

A copy of the example project runs against the downstream world of the synthetic index
(tests/synthetic_wheels.py: torch 2.3.0 to 2.6.0, real pytest and flit_core repackaged
from this interpreter). The real nox and uv install the project editable into each cell
next to its pins, and run its pytest suite from the project directory:

- torch 2.3.0: the project's requirements.txt says torch>=2.4: unsatisfiable, and said so;
- torch 2.4.0, 2.5.0: compatible (the GPU-only test is skipped, not failed);
- torch 2.6.0: torch.load's weights_only default breaks resuming a checkpoint:
  incompatible, with the failing test named by node id in the report and the pins;

then ``torch-matrix pins --apply requirements.txt`` merges the exclusion into the existing
``torch>=2.4`` line, and a second run changes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.world.results import load_results, read_result
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, NOT_INSTALLABLE, verdict_of
from tests.synthetic_wheels import build_index, downstream_wheels

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "tinytrain"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
FAILING_TEST = "tests/test_checkpoint.py::test_resume_from_checkpoint"


def _world(tmp: Path):
    try:
        return build_index(tmp / "index", downstream_wheels())
    except Exception as error:  # noqa: BLE001 - say loudly why the test cannot run
        pytest.fail(
            f"cannot build the downstream synthetic index (pytest and flit_core must be "
            f"installed, `pip install -e '.[test]'`): {error!r}"
        )


def _env(tmp: Path, index_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX", "PIP_")) and k != "VIRTUAL_ENV"
    }
    # The example's table names no index: like pip, the spec takes PIP_INDEX_URL from here.
    env.update(
        PIP_INDEX_URL=index_url,
        PIP_EXTRA_INDEX_URL="",
        PIP_FIND_LINKS="",
        PYTHONPATH=str(REPO),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_HTTP_RETRIES="0",
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
        UV_NO_CONFIG="1",
    )
    return env


def _cli(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_example_project_runs_its_own_tests_in_every_cell(tmp_path):
    index = _world(tmp_path)
    project = tmp_path / "tinytrain"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns("results", ".torch-matrix", ".nox", "__pycache__"),
    )
    assert not (project / "noxfile.py").exists()
    env = _env(tmp_path, index.url)
    cells = {torch: f"t{torch}-py{PY}" for torch in ("2.3.0", "2.4.0", "2.5.0", "2.6.0")}

    listed = _cli(project, env, "run", "-l")
    assert listed.returncode == 0, listed.stderr
    for cell in cells.values():
        assert f"* matrix({cell})" in listed.stdout
    # followups and report run after the cells: the listing marks them so (they were `-`)
    assert "* followups" in listed.stdout and "* report" in listed.stdout, listed.stdout
    assert "- pins" in listed.stdout, listed.stdout

    done = _cli(project, env, "run")
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    # the project's name, never results/default; under .torch-matrix/, which no build discovers
    run_dir = project / ".torch-matrix" / "results" / "tinytrain"
    assert (project / ".nox").is_dir()  # venvs under the project, not inside the package
    results = {
        torch: read_result(run_dir / "cells" / f"{cell}.json") for torch, cell in cells.items()
    }
    verdicts = {torch: verdict_of(result) for torch, result in results.items()}

    excluded = verdicts["2.3.0"]
    assert excluded.kind == NOT_INSTALLABLE, excluded
    assert excluded.reason.startswith("your requirements exclude torch 2.3.0"), excluded.reason
    for torch in ("2.4.0", "2.5.0"):
        assert verdicts[torch].kind == COMPATIBLE, (torch, verdicts[torch].reason)
        tests = results[torch].probe("tests")
        assert tests.status == "pass"
        assert tests.evidence["tests"] == {"passed": 3, "skipped": 1}  # the GPU-only test skips
    broken = verdicts["2.6.0"]
    assert broken.kind == INCOMPATIBLE and broken.failing == ("tests",)
    probe = results["2.6.0"].probe("tests")
    assert probe.message.startswith(f"1 failed, 2 passed, 1 skipped: {FAILING_TEST} -- "), (
        probe.message
    )
    assert "weights_only" in probe.message
    assert [f["nodeid"] for f in probe.evidence["failed"]] == [FAILING_TEST]

    # The project went in editable, after the pins, with its requirements file (and pytest, which
    # the tests command runs: named once more, the resolver reconciles it with .[test]'s own).
    command = results["2.4.0"].install.command
    assert list(command[command.index("torch==2.4.0") + 1 :]) == [
        "-r",
        str(project / "requirements.txt"),
        "-e",
        f"{project}[test]",
        "pytest",
    ]
    assert results["2.4.0"].cell.install == ("-r requirements.txt", ".[test]", "pytest")

    # The report (run by the matrix session) names the failing test and the excluding requirement.
    assert FAILING_TEST in done.stdout
    assert "your requirements exclude torch 2.3.0" in done.stdout
    assert load_results(run_dir).problems == []

    # Pins into the project's own requirements.txt: merged into the existing line, comments kept.
    before = (project / "requirements.txt").read_text()
    dry = _cli(project, env, "pins", str(run_dir), "--apply", "requirements.txt", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "-torch>=2.4  # the training loop needs 2.4 or newer" in dry.stdout
    assert (project / "requirements.txt").read_text() == before  # a dry run writes nothing
    assert FAILING_TEST in dry.stdout  # the pin's reason names the test
    applied = _cli(project, env, "pins", str(run_dir), "--apply", "requirements.txt")
    assert applied.returncode == 0, applied.stderr
    after = (project / "requirements.txt").read_text()
    merged = [line for line in after.splitlines() if line.startswith("torch")]
    assert len(merged) == 1 and merged[0].startswith("torch>=2.4,"), after
    assert "2.6" in merged[0] and merged[0].endswith("# the training loop needs 2.4 or newer")
    assert after.startswith("# tinytrain runtime requirements\n")
    again = _cli(project, env, "pins", str(run_dir), "--apply", "requirements.txt")
    assert again.returncode == 0 and (project / "requirements.txt").read_text() == after

    # The edited requirements.txt is part of the cells' fingerprint: the next run redoes them.
    rerun = _cli(project, env, "run", "-s", f"matrix({cells['2.4.0']})")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "skipped: already complete" not in rerun.stderr
