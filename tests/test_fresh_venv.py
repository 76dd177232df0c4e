"""What a user does, from nothing: a fresh venv, ``pip install torch-matrix``, a plain directory
with a ``[tool.torch-matrix]`` table, ``torch-matrix run``: the table, report.html and pins/, exit 0.

Nothing of the interpreter running pytest is used: the venv is made by this test with uv from a
real interpreter (not this one: its site-packages may import modules at start-up, which once hid
a module of ours shadowing the standard library), torch-matrix is installed into it as a wheel
(not editable, no PYTHONPATH: package data must ship), and the cells install from the synthetic
index (tests/synthetic_wheels.py: torch 2.3.0 to 2.6.0, pytest and flit_core).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synthetic_wheels import build_index, downstream_wheels

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"

PYPROJECT = """\
[build-system]
requires = ["flit_core>=3.4,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "ckptkit"
version = "0.1.0"
description = "saves and resumes a training state"
dependencies = ["torch>=2.3"]

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.torch-matrix]
python = ["current"]
torch = ["2.5.0", "2.6.0"]
torchvision = "none"
install = [".[test]"]

[tool.torch-matrix.probes]
run = ["install_sanity"]
commands = { tests = "pytest -q tests" }
"""

PACKAGE = '''\
"""A training state that survives a restart."""
__version__ = "0.1.0"
import torch


class State:
    def __init__(self, epoch):
        self.epoch = epoch


def save(state, path):
    torch.save(state, path)


def resume(path):
    return torch.load(path)
'''

TESTS = """\
import ckptkit


def test_resume(tmp_path):
    ckptkit.save(ckptkit.State(3), tmp_path / "state.pt")
    assert ckptkit.resume(tmp_path / "state.pt").epoch == 3


def test_version():
    assert ckptkit.__version__ == "0.1.0"
"""


def _real_interpreter() -> str:
    """A base interpreter of this Python's X.Y (never the venv running pytest, nor a pyenv shim)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [
        path / "bin" / "python" for path in sorted(pyenv.glob(MINOR + ".*"), reverse=True)
    ]
    candidates += [Path(found) for found in (shutil.which(f"python{MINOR}"),) if found]
    for candidate in candidates:
        if (
            candidate.exists()
            and "shims" not in candidate.parts
            and not candidate.absolute().is_relative_to(Path(sys.prefix).absolute())
        ):
            return str(candidate)
    pytest.fail(
        f"no Python {MINOR} interpreter besides the one running pytest: cannot make a fresh venv"
    )


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)


def test_a_user_runs_the_matrix_from_a_fresh_venv_in_a_plain_directory(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail(
            "uv is not on PATH: it is a dependency of torch-matrix (`pip install -e '.[test]'`)"
        )
    venv = tmp_path / "venv"
    made = _run([uv, "venv", "-q", "--python", _real_interpreter(), str(venv)], timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # `pip install torch-matrix`, from a clean copy of this checkout (a wheel, not editable).
    source = tmp_path / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".nox",
            "results",
            ".torch-matrix",
            "__pycache__",
            "*.egg-info",
            "build",
            ".pytest_cache",
            ".hypothesis",
        ),
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TORCH_MATRIX_"))
    }
    installed = _run(
        [uv, "pip", "install", "-q", "--python", str(python), str(source)], env=env, timeout=900
    )
    if installed.returncode != 0:
        pytest.fail(
            f"cannot install torch-matrix into a fresh venv (its dependencies come from the "
            f"configured index or uv's cache): {installed.stderr[-2000:]}"
        )
    started = _run(
        [str(python), "-c", "import torch_matrix; print(torch_matrix.__file__)"],
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert str(venv) in started.stdout, (
        started.stdout + started.stderr
    )  # the wheel, not this checkout

    index = build_index(tmp_path / "index", downstream_wheels())
    project = tmp_path / "ckptkit"
    (project / "ckptkit").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "ckptkit" / "__init__.py").write_text(PACKAGE)
    (project / "tests" / "test_ckptkit.py").write_text(TESTS)
    run_env = {k: v for k, v in env.items() if not k.startswith(("UV_", "NOX", "PIP_"))}
    run_env.update(
        PIP_INDEX_URL=index.url,
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_NO_CONFIG="1",
        UV_HTTP_RETRIES="0",
        TORCH_MATRIX_CACHE_DIR=str(tmp_path / "index-cache"),
        PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
    )
    done = _run([str(venv / "bin" / "torch-matrix"), "run"], cwd=project, env=run_env, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "Traceback" not in log, log
    run_dir = project / ".torch-matrix" / "results" / "ckptkit"  # the README's default
    cells = {torch: f"t{torch}-py{MINOR}" for torch in ("2.5.0", "2.6.0")}
    for cell in cells.values():
        assert (run_dir / "cells" / f"{cell}.json").is_file()
    table = [line for line in done.stdout.splitlines() if line.startswith(tuple(cells.values()))]
    assert any(
        cells["2.5.0"] in line and "compatible" in line and "incompatible" not in line
        for line in table
    ), log
    assert any(cells["2.6.0"] in line and "incompatible" in line for line in table), log
    assert "1 failed, 1 passed: tests/test_ckptkit.py::test_resume -- " in done.stdout, (
        log
    )  # by node id
    assert (run_dir / "report.html").is_file() and (run_dir / "summary.md").is_file()
    # The HTML page carries the suggested pins with their reasons (the failing test by node id).
    page = (run_dir / "report.html").read_text()
    assert "<h2>Suggested pins</h2>" in page
    pins_section = page.split("<h2>Suggested pins</h2>")[1].split("<h2>")[0]
    assert "torch" in pins_section and "2.6.0" in pins_section
    assert "tests/test_ckptkit.py::test_resume" in pins_section
    constraints = (run_dir / "pins" / "constraints.txt").read_text()
    assert "torch" in constraints and "2.6.0" in constraints, constraints
