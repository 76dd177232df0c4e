"""The style checks, run by the README's test command: ``ruff format --check``, ``ruff check`` and
mypy (strict on the pure layers), each configured in pyproject.toml at the versions the ``test``
extra pins. A failure prints the tool's own output: the files and lines to fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each check's command, run from the repository root so pyproject.toml's settings apply.
CHECKS = {
    "ruff format": [sys.executable, "-m", "ruff", "format", "--check", "."],
    "ruff check": [sys.executable, "-m", "ruff", "check", "."],
    "mypy": [sys.executable, "-m", "mypy", "--python-executable", sys.executable],
}


def _tool_present(module: str) -> bool:
    found = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, check=False
    )
    return found.returncode == 0


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_tree_passes(name: str) -> None:
    module = name.split()[0]
    if not _tool_present(module):
        # The test extra installs both (pyproject.toml): a missing one is a broken set-up.
        pytest.fail(f"{module} is not installed here: pip install -e '.[test]'")
    done = subprocess.run(
        CHECKS[name], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}{done.stderr}"


def test_the_pinned_versions_are_the_ones_running() -> None:
    """The test extra pins each tool; a different version on PATH must not be what checks main."""
    text = (ROOT / "pyproject.toml").read_text()
    for module, flag in (("ruff", "--version"), ("mypy", "--version")):
        shown = subprocess.run(
            [sys.executable, "-m", module, flag], capture_output=True, text=True, check=False
        ).stdout.split()
        assert len(shown) >= 2, f"{module} {flag} printed nothing"
        assert f'"{module}=={shown[1]}"' in text, f"{module} {shown[1]} is not the pinned version"
