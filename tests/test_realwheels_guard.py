"""The real-wheel guard (tests/conftest.py) in a pytest of its own: loud line, opt-in failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

SKIPPING = """
import pytest

@pytest.mark.realwheels
def test_needs_wheels():
    pytest.skip("cannot build a-torch2.13-cpu here: offline")

@pytest.mark.realwheels
@pytest.mark.skipif(True, reason="needs PIP_FIND_LINKS with torch-2.13.0+cpu")
def test_needs_find_links():
    pass

def test_other_skip():
    pytest.skip("not a real-wheel test")
"""


def run_pytest(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(SKIPPING)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    realwheels: real wheels\n")
    # Not the outer run's PYTEST_ADDOPTS: ci.yml's `-m "not realwheels"` would deselect the very
    # test this inner run is about (the guard tests failed on GitHub's runners for that).
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TORCH_MATRIX_REQUIRE_REALWHEELS", "PYTEST_ADDOPTS")
    }
    if require is not None:
        env["TORCH_MATRIX_REQUIRE_REALWHEELS"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("require", [None, "0"])
def test_a_skipped_real_wheel_test_is_named_in_the_summary(tmp_path, require):
    done = run_pytest(tmp_path, require)
    assert done.returncode == 0, done.stdout
    out = done.stdout
    assert "REAL-WHEEL CHECKS DID NOT RUN" in out
    assert (
        "realwheels skipped: test_x.py::test_needs_wheels: cannot build a-torch2.13-cpu here: offline"
        in out
    )
    assert "realwheels skipped: test_x.py::test_needs_find_links: needs PIP_FIND_LINKS" in out
    assert "test_other_skip" not in out.split("REAL-WHEEL CHECKS DID NOT RUN")[1]
    assert (
        "2 real-wheel test(s) skipped" in out
        and "TORCH_MATRIX_REQUIRE_REALWHEELS=1 to make this" in out
    )


def test_required_real_wheels_turn_a_skip_into_a_failure(tmp_path):
    done = run_pytest(tmp_path, "1")
    assert done.returncode == 1, done.stdout
    assert "TORCH_MATRIX_REQUIRE_REALWHEELS=1: this real-wheel test must run here" in done.stdout
    assert (
        "1 failed" in done.stdout and "1 error" in done.stdout
    )  # the call skip fails, the setup skip errors
    assert "1 skipped" in done.stdout  # the ordinary skip stays a skip
