"""A new user's first hour: spec mistakes caught at plan time, and commands that find their run
and never lose a file to a closed pipe.

- an [extras] version the index lacks is exit 2 naming the nearest releases, like torch;
- a Python no interpreter provides is exit 2 naming the interpreters found and how to add one,
  unless the spec says ``allow_missing_interpreters = true``;
- an empty spec is the default matrix's selection, not every release since 1.0;
- ``report`` / ``pins`` with no argument use the run of the spec found here;
- ``report ... | head`` writes every file and prints no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix import cli
from torch_matrix.plan.grid import IndexFacts, plan_cells
from torch_matrix.run.pipeline import plan_spec
from torch_matrix.spec.model import DEFAULT_TORCH
from torch_matrix.vocab.errors import UserError
from torch_matrix.world import results
from torch_matrix.spec.parse import parse_spec
from torch_matrix.spec.parse import tomllib
from tests.factories import make_cell, make_result
from tests.synthetic_wheels import build_index

REPO = Path(__file__).resolve().parent.parent
TORCH = ("2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0")
NUMPY = ("1.26.3", "1.26.4", "2.0.0", "2.1.0", "2.2.6")


def _plan(text: str) -> list:
    facts = IndexFacts(
        torch_versions={"default": TORCH}, extras_versions={"numpy": NUMPY}, where="PyPI"
    )
    return plan_cells(
        parse_spec('torchvision = "none"\ntorch = ["2.9.1"]\n' + text), facts, {"current": None}
    )


def test_an_unknown_extras_version_names_the_nearest_releases():
    with pytest.raises(UserError) as caught:
        _plan('[extras]\nnumpy = ["<2", "9.9.9"]')
    assert caught.value.one_line().endswith(
        "extras.numpy[1]: no numpy release on PyPI matches '==9.9.9'"
    )
    assert caught.value.hint == "the nearest releases are 2.1.0, 2.2.6"
    with pytest.raises(UserError) as caught:
        _plan('[extras]\nnumpy = { values = [">=3"], label = "np" }')
    assert caught.value.hint == "the newest releases there are 2.2.6, 2.1.0, 2.0.0"
    assert len(_plan('[extras]\nnumpy = ["<2", ">=2", "1.26.4"]')) == 3


def test_an_empty_spec_is_the_default_matrix_selection_not_every_release():
    empty = parse_spec("")
    default = parse_spec((REPO / "torch_matrix" / "spec" / "default_matrix.toml").read_text())
    assert empty.torch == default.torch
    assert tomllib.loads((REPO / "torch_matrix" / "spec" / "default_matrix.toml").read_text())[
        "torch"
    ] == dict(DEFAULT_TORCH)
    cells = plan_cells(
        empty,
        IndexFacts(
            torch_versions={"default": ("1.0.1", "1.13.1", *TORCH)},
            pairing={v: "0.1" for v in TORCH},
        ),
        {"current": None},
    )
    assert [c.axes["torch"] for c in cells] == ["2.11.0", "2.10.0", "2.9.1"]


def _spec(tmp_path: Path, text: str):
    index = build_index(tmp_path / "index")
    return parse_spec(
        f'torch = ["2.1.0"]\ntorchvision = "none"\n{text}\n[index]\ndefault = "{index.url}"\n'
        "extra = []\nfind_links = []\n",
        str(tmp_path / "matrix.toml"),
    )


def test_a_python_with_no_interpreter_is_exit_2_naming_what_is_there(tmp_path):
    env = {**os.environ, "TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache")}
    with pytest.raises(UserError) as caught:
        plan_spec(_spec(tmp_path, 'python = ["current", "3.21"]'), env)
    error = caught.value
    assert error.one_line().startswith(
        f"torch-matrix: error: {tmp_path / 'matrix.toml'}: python[1]: "
        "no Python 3.21 interpreter found"
    )
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert error.hint.startswith("interpreters found here: ") and here in error.hint.split(";")[0]
    assert "uv python install 3.21" in error.hint and '[interpreters] "3.21"' in error.hint
    assert "allow_missing_interpreters = true" in error.hint

    allowed = plan_spec(
        _spec(tmp_path, 'python = ["3.21"]\nallow_missing_interpreters = true'), env
    ).cells
    assert [c.plan_note.split(" (")[0] for c in allowed] == ["no Python 3.21 interpreter found"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory with its spec, its run's results and another run's beside them."""
    (tmp_path / "matrix.toml").write_text('name = "proj"\n')
    for run, torch in (("proj", "2.5.1"), ("other", "2.4.1")):
        results.write_result(
            make_result(make_cell(torch=torch)), results.cells_dir(tmp_path / "results", run)
        )
    monkeypatch.chdir(tmp_path)
    for name in ("TORCH_MATRIX_RESULTS", "TORCH_MATRIX_SPEC"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_report_and_pins_without_an_argument_use_the_run_of_the_spec_found_here(project, capsys):
    assert cli.main(["report"]) == 0
    captured = capsys.readouterr()
    assert "t2.5.1-py3.11" in captured.out and "t2.4.1-py3.11" not in captured.out
    assert (project / "results" / "proj" / "summary.md").is_file()
    assert not (project / "results" / "summary.md").exists()  # not at the results root
    assert f"torch-matrix report: {project / 'results' / 'proj'}" in captured.err
    assert cli.main(["pins", "--no-coverage"]) == 0
    assert (project / "results" / "proj" / "pins" / "constraints.txt").is_file()
    assert not (project / "results" / "pins").exists()


def test_report_piped_into_head_writes_every_file_first(tmp_path):
    run = tmp_path / "results" / "big"
    cells = results.cells_dir(tmp_path / "results", "big")
    for minor in range(10):
        for patch in range(10):
            results.write_result(make_result(make_cell(torch=f"1.{minor}.{patch}")), cells)
    html = tmp_path / "report.html"
    # `head -n 0` closes the pipe before the report has written a byte: deterministic, where
    # `head -1` races the pipe buffer (what was lost depended on how far the table got).
    command = (
        f"{sys.executable} -m torch_matrix.cli report {run} --html {html} --pins --grid | head -n 0; "
        "echo ${PIPESTATUS[0]} >&2"
    )
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.stdout == ""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] in (
        "0",
        "141",
    )  # a cut-off reader, no error of ours
    assert html.stat().st_size > 0
    assert (run / "summary.md").is_file() and (run / "results.json").is_file()
    assert (run / "pins" / "constraints.txt").is_file()
