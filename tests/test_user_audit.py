"""Found by running the installed CLI as a user would, with bad input of every kind (session 9):
each case here printed a traceback, a false verdict or nothing at all before its fix. Every bad
input is one line naming the file, key or value, then `hint:`, and a non-zero exit."""

from __future__ import annotations

from collections.abc import Callable
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


def test_venvs_on_a_small_other_filesystem_refuse_the_run_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv's cache on the big disk, the venvs on a small one: uv copies every wheel into each venv,
    so the budget (read at uv's cache) said 21.8 GB while the venvs' 200 MB tmpfs filled 33 s into
    the first install ('No space left on device', an error cell). Now refused before anything is
    installed, with the figures."""
    from tests.test_cost import _env, _project
    from torch_matrix.run import pipeline
    from torch_matrix.run.disk import plan_cost, refuse_unless_fits
    from torch_matrix.world.specfile import load_spec
    from torch_matrix.vocab.errors import UserError

    project = _project(tmp_path)
    environ = {**_env(tmp_path), "UV_LINK_MODE": "copy"}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCH_MATRIX_DISK_BUDGET", raising=False)
    spec = load_spec(project / "matrix.toml", environ)
    cells = list(pipeline.plan_for_spec(spec))
    venvs = tmp_path / "small" / ".nox"

    def free(path: object) -> int:
        return 1000 if Path(str(path)) == venvs else 10**12

    cost = plan_cost(
        spec, cells, environ, uv_cache=str(tmp_path / "uv"), venvs_dir=venvs, free=free
    )
    with pytest.raises(UserError) as caught:
        refuse_unless_fits(cost)
    error = caught.value
    need = max(c.disk for c in cost.cells)
    assert error.one_line().startswith(
        f"torch-matrix: error: {venvs}: the venvs' disk cannot hold this run: uv copies every "
        f"wheel into each venv, and the largest cell, {cells[0].id}, needs "
    )
    assert error.one_line().endswith("of disk there; 1.0 kB is free")
    assert "UV_CACHE_DIR" in (error.hint or "")
    assert need > 1000
    # room enough there, or uv hardlinking: no refusal
    roomy = plan_cost(
        spec,
        cells,
        environ,
        uv_cache=str(tmp_path / "uv"),
        venvs_dir=venvs,
        free=lambda _path: 10**12,
    )
    refuse_unless_fits(roomy)
    linked = plan_cost(
        spec, cells, _env(tmp_path), uv_cache=str(tmp_path / "uv"), venvs_dir=venvs, free=free
    )
    refuse_unless_fits(linked)


@pytest.mark.parametrize("spec", [None, "/work/proj/matrix.toml"])
def test_the_rerun_line_of_a_run_of_the_built_in_matrix_works_as_printed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    spec: str | None,
) -> None:
    """The README's main job (`nox -s matrix` in a clone: the built-in default matrix) ended with
    `torch-matrix run -s 'matrix(t2.13.0-py3.11)' -- --redo`, which in that clone said "no spec
    found here" and exit 2: `run` takes the built-in matrix only with --default."""
    from tests.factories import make_probe, make_result
    from torch_matrix.vocab.records import FAIL
    from torch_matrix.world.results import write_result
    from torch_matrix.world.runplan import RunPlan, write_plan

    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    result = make_result(probes=[make_probe("install_sanity", FAIL, "boom")])
    run = tmp_path / "results" / "default"
    write_result(result, run / "cells")
    write_plan(run, RunPlan(cells=(result.cell,), spec=spec))
    assert cli.main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    option = "--default" if spec is None else f"--spec {spec}"
    line = f"torch-matrix run {option} -s 'matrix({result.cell.id})' -- --redo"
    assert line in out
    assert line in (run / "summary.md").read_text(encoding="utf-8")
    assert cli.main(["repro", result.cell.id, "--results", str(tmp_path / "results")]) == 0
    # the issue bundle names the spec from the project's directory, never a machine path (#42)
    portable = "--default" if spec is None else "--spec matrix.toml"
    bundle = capsys.readouterr().out
    assert f"torch-matrix run {portable} -s 'matrix({result.cell.id})' -- --redo" in bundle
    assert "/work/proj" not in bundle


def test_a_cell_whose_result_file_cannot_be_read_is_listed_as_missing_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated cell file was one warning, then gone: the table, summary.md and results.json
    had one cell fewer and no trace of it (the nightly's summary said '3 cells' of 4)."""
    from tests.factories import make_probe, make_result
    from torch_matrix.vocab.records import FAIL
    from torch_matrix.world.results import write_result
    from torch_matrix.world.runplan import RunPlan, write_plan

    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    good = make_result(torch="2.5.1")
    bad = make_result(torch="2.6.0", probes=[make_probe("install_sanity", FAIL, "boom")])
    run = tmp_path / "run"
    write_result(good, run / "cells")
    damaged = write_result(bad, run / "cells")
    damaged.write_bytes(damaged.read_bytes()[:300])
    write_plan(run, RunPlan(cells=(good.cell, bad.cell), spec=None))
    assert cli.main(["report", str(run)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "1 planned but missing" in captured.out
    why = f"its result file {damaged} cannot be read (not JSON (line "
    row = next(line for line in captured.out.splitlines() if line.startswith(bad.cell.id))
    assert why in row
    summary = (run / "summary.md").read_text(encoding="utf-8")
    assert bad.cell.id in summary and why in summary
    assert cli.main(["report", str(run), "--strict"]) == 1


ECO_ARGS = ["--baseline", "2.5.1", "--candidate", "2.6.0", "--estimate"]
PROJECT = '[[project]]\nname = "x"\ncommand = "pytest -q"\n'


@pytest.mark.parametrize(
    "body, where, words",
    [
        # a checkout that is not there: the run started, and each side failed on it
        ('path = "./nowhere"\n', "x.path", "nowhere is not a directory"),
        # an empty reason: the project meant to be skipped was run
        ('sdist = "einops==0.8.1"\nskip = " "\n', "x.skip", "skip must be the reason, a non-empty"),
    ],
)
def test_a_projects_file_mistake_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, where: str, words: str
) -> None:
    projects = tmp_path / "projects.toml"
    projects.write_text(PROJECT + body)
    argv = ["ecosystem", "run", str(projects), *ECO_ARGS, "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 2
    error, _ = _error_lines(capsys.readouterr().err)
    assert error.startswith(f"torch-matrix: error: {projects} [[project]] {where}: ")
    assert words in error
    assert not (tmp_path / "out").exists()


def test_a_projects_file_that_is_not_utf8_says_where_and_to_resave_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Python's codec message ('utf-8' codec can't decode byte 0xff in position 20: ...)
    and a hint to give the path of a projects file, which it was."""
    projects = tmp_path / "projects.toml"
    projects.write_bytes(b'[[project]]\nname = "\xff"\n')
    assert cli.main(["ecosystem", "run", str(projects), *ECO_ARGS]) == 2
    error, hint = _error_lines(capsys.readouterr().err)
    assert error == f"torch-matrix: error: {projects}: not valid UTF-8 (byte 0xff on line 2)"
    assert "re-save the projects file as UTF-8" in hint


@pytest.mark.parametrize("nightly", ["nightly-2025-13-45:2.7.0", "nightly-2025-02-30:2.7.0"])
def test_a_nightly_on_a_day_that_does_not_exist_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nightly: str
) -> None:
    """Before: the estimate went on with 'torch 2.7.0.dev20251345: size unknown'."""
    projects = tmp_path / "projects.toml"
    projects.write_text(PROJECT + 'sdist = "einops==0.8.1"\n')
    argv = ["ecosystem", "run", str(projects), "--baseline", nightly, "--candidate", "2.6.0"]
    assert cli.main([*argv, "--estimate", "--out", str(tmp_path / "out")]) == 2
    error, hint = _error_lines(capsys.readouterr().err)
    assert error.startswith(f"torch-matrix: error: --baseline: nightly '{nightly}': 2025-")
    assert error.endswith("is not a date") and "nightly-YYYY-MM-DD" in hint


@pytest.mark.parametrize(
    "argv, words",
    [
        (["history", "--last", "-1"], "--last: expected a number of runs >= 1, got -1"),
        (["history", "--last", "0"], "--last: expected a number of runs >= 1, got 0"),
        (["import", "RUN", "--date", "notadate"], "--date: 'notadate' is not an ISO date"),
    ],
)
def test_a_bad_history_option_is_one_line_and_nothing_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    """Before: `history --last -1` showed one run, `--last 0` thirty, and `import --date notadate`
    stored a run dated 'notadate' (exit 0 each)."""
    from tests.factories import make_result
    from torch_matrix.world.results import write_result

    run = tmp_path / "run"
    write_result(make_result(), run / "cells")
    db = tmp_path / "history.sqlite"
    assert cli.main(["import", str(run), "--db", str(db)]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    argv = [str(run) if arg == "RUN" else arg for arg in argv]
    assert cli.main([*argv, "--db", str(db)]) == 2
    error, _ = _error_lines(capsys.readouterr().err)
    assert error == f"torch-matrix: error: {words}"
    assert db.read_bytes() == before


DEEP_JSON = "[" * 100000 + "]" * 100000


def test_damaged_ecosystem_files_are_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run.json, a side result or an ecosystem.json nested past the recursion limit, and an
    ecosystem.json whose projects are not a table, each printed a traceback (RecursionError,
    AttributeError: 'int' object has no attribute 'items')."""
    run = tmp_path / "run"
    (run / "projects" / "x").mkdir(parents=True)
    meta = '{"baseline": {"torch": "2.5.1"}, "candidate": {"torch": "2.6.0"}, "projects": []}'
    (run / "run.json").write_text(meta)
    side = run / "projects" / "x" / "candidate.json"
    side.write_text(DEEP_JSON)
    assert cli.main(["ecosystem", "report", str(run), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{side}: left out: " in err
    (run / "run.json").write_text(DEEP_JSON)
    assert cli.main(["ecosystem", "report", str(run)]) == 2
    error, _ = _error_lines(capsys.readouterr().err)
    assert error.startswith(f"torch-matrix: error: {run / 'run.json'}: cannot read run.json")
    good = tmp_path / "out" / "ecosystem.json"
    assert good.is_file()
    for text in (DEEP_JSON, '{"projects": 5}', '{"projects": {"x": 1}}', '{"projects": [1]}'):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert cli.main(["ecosystem", "diff", str(bad), str(good)]) == 2
        error, _ = _error_lines(capsys.readouterr().err)
        assert error.startswith(f"torch-matrix: error: {bad}: ")


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda d: (d / "matrix.toml").mkdir(), "; ./matrix.toml is not a file"),
        (
            lambda d: (d / "pyproject.toml").write_text('[tool.torch_matrix]\ntorch = ["2.5.1"]\n'),
            "; ./pyproject.toml has [tool.torch_matrix], not [tool.torch-matrix]",
        ),
    ],
)
def test_no_spec_found_names_what_nearly_was_one(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], object],
    words: str,
) -> None:
    """Before: only 'no spec found here (looked for ... ./matrix.toml ...)' while ./matrix.toml was
    there (a directory), or the table was spelt [tool.torch_matrix]."""
    make(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    assert cli.main(["plan"]) == 2
    error, _ = _error_lines(capsys.readouterr().err)
    assert error.endswith(words) and "no spec found here" in error


@pytest.mark.parametrize("cells_is_a_file", [False, True])
def test_a_report_of_a_folder_without_results_is_refused_not_zero_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cells_is_a_file: bool
) -> None:
    """Before: '0 cells: 0 compatible, ...', exit 0, summary.md and results.json written into the
    folder (a typo'd path that exists, or a run whose cells/ became a file, read as a clean run);
    pins, import and diff of the same folder already said 'no cell results found', exit 2."""
    if cells_is_a_file:
        (tmp_path / "cells").write_text("x")
    assert cli.main(["report", str(tmp_path)]) == 2
    error, hint = _error_lines(capsys.readouterr().err)
    assert error.startswith(f"torch-matrix: error: {tmp_path}: no cell results found")
    assert error.endswith(f"{tmp_path / 'cells'} is not a directory") == cells_is_a_file
    assert not (tmp_path / "summary.md").exists() and not (tmp_path / "results.json").exists()
