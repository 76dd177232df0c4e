"""Found by running the installed CLI as a user would, with bad input of every kind (session 9):
each case here printed a traceback, a false verdict or nothing at all before its fix. Every bad
input is one line naming the file, key or value, then `hint:`, and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix import cli
from torch_matrix.world.results import load_results

DEEP_TOML = "torch = " + "[" * 5000 + "]" * 5000 + "\n"


def _error_lines(err: str) -> list[str]:
    """The error line and its hint: what a user sees, and no traceback anywhere."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("torch-matrix: error: ")]
    assert len(errors) == 1, lines
    at = lines.index(errors[0])
    assert lines[at + 1].startswith("  hint: "), lines
    return lines[at : at + 2]


def test_a_cell_file_with_a_number_python_cannot_read_is_named_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = tmp_path / "run" / "cells"
    cells.mkdir(parents=True)
    bad = cells / "t2.5.1-py3.11.json"
    bad.write_text('{"schema_version": 1' + "0" * 5000 + "}\n")
    loaded = load_results(tmp_path / "run")
    assert loaded.results == []
    assert loaded.problems == [f"{bad}: not JSON that Python reads (a number with too many digits)"]
    cli.main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{bad}: not JSON that Python reads" in err


@pytest.mark.parametrize("file_name", ["matrix.toml", "pyproject.toml"])
def test_a_spec_nested_too_deeply_is_one_line_naming_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    file_name: str,
) -> None:
    text = DEEP_TOML if file_name == "matrix.toml" else "[tool.torch-matrix]\n" + DEEP_TOML
    (tmp_path / file_name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    assert cli.main(["plan"]) == 2
    error, hint = _error_lines(capsys.readouterr().err)
    assert error.startswith(f"torch-matrix: error: {tmp_path / file_name}")
    assert "invalid TOML: arrays or tables nested too deeply to read" in error
    assert "fix the TOML syntax" in hint


def test_a_projects_file_nested_too_deeply_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    projects = tmp_path / "projects.toml"
    projects.write_text('[[project]]\nname = "x"\nrequires = ' + "[" * 5000 + "]" * 5000 + "\n")
    argv = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    assert cli.main([*argv, "--estimate", "--out", str(tmp_path / "out")]) == 2
    error, _ = _error_lines(capsys.readouterr().err)
    assert error == (
        f"torch-matrix: error: {projects}: invalid TOML: arrays or tables nested too deeply to read"
    )
