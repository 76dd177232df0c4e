"""Every user-facing error names the fix: the uv-style hint line, path by path.

The error line itself (file, key, value) is tested where each module is tested; here
each path's *hint* is asserted, and how the CLI and the noxfile print both lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix import cli
from torch_matrix.vocab.errors import UserError
from torch_matrix.plan.grid import IndexFacts, nearest_releases, plan_cells
from torch_matrix.plan.shards import parse_shard, select_shard
from torch_matrix.spec.parse import parse_spec
from tests.test_spec import BAD


def test_render_is_the_error_line_then_an_indented_hint():
    error = UserError(
        "torch 2.9.9 does not exist on PyPI",
        "matrix.toml: torch[0]",
        hint="the nearest releases are 2.8.0, 2.9.1",
    )
    assert (
        error.one_line()
        == "torch-matrix: error: matrix.toml: torch[0]: torch 2.9.9 does not exist on PyPI"
    )
    assert error.render().splitlines() == [
        error.one_line(),
        "  hint: the nearest releases are 2.8.0, 2.9.1",
    ]
    assert UserError("x").render() == "torch-matrix: error: x"  # no hint, no second line


def test_cli_prints_the_hint_under_the_error_and_exits_2(tmp_path, capsys):
    assert cli.main(["pins", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == f"torch-matrix: error: {tmp_path}: no cell results found"
    assert err[-1].startswith("  hint: run `nox -s matrix` first")


def test_missing_results_directory_says_run_the_matrix_first(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"torch-matrix: error: {tmp_path / 'nowhere'}: results directory does not exist",
        "  hint: run `nox -s matrix` first (it writes results/<run>/cells/), or pass the "
        "directory that holds the cell results",
    ]


@pytest.mark.parametrize("text, key, value", BAD)
def test_every_bad_spec_value_points_at_its_section_of_the_shipped_reference(text, key, value):
    from torch_matrix.cli.reference import reference_text, topic

    with pytest.raises(UserError) as caught:
        parse_spec(text)
    hint = caught.value.hint
    assert "`torch-matrix help spec" in hint or "TOML syntax" in hint
    assert "`torch-matrix plan` checks a spec without installing anything" in hint
    section = key.split(".")[0].split("[")[0]
    if value == "unknown key" and "." not in key and "[" not in key:
        section = "keys"  # an unknown top-level key: the list of keys
    if key != "matrix.toml":
        assert f"`torch-matrix help spec {section}`" in hint
        assert topic(reference_text(), section), f"the reference has no section on {section!r}"


TORCH = ("2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0")


def _plan(text: str, **facts) -> list:
    values = {"torch_versions": {"default": TORCH}, "pairing": {}, "where": "PyPI"}
    values.update(facts)
    return plan_cells(
        parse_spec('torchvision = "none"\n' + text), IndexFacts(**values), {"current": None}
    )


def test_unknown_torch_names_the_nearest_releases():
    with pytest.raises(UserError) as caught:
        _plan('torch = ["2.9.9"]')
    assert caught.value.one_line().endswith("torch 2.9.9 does not exist on PyPI")
    assert caught.value.hint == "the nearest releases are 2.9.0, 2.9.1, 2.10.0, 2.11.0"
    assert nearest_releases("1.0", TORCH) == ["2.7.1", "2.8.0"]
    assert nearest_releases("9.0", TORCH) == ["2.10.0", "2.11.0"]


def test_unknown_torch_in_an_include_names_the_nearest_releases():
    with pytest.raises(UserError) as caught:
        _plan('torch = ["2.9.1"]\n[[include]]\npython = "3.11"\ntorch = "2.8.5"')
    assert caught.value.hint == "the nearest releases are 2.7.1, 2.8.0, 2.9.0, 2.9.1"


def test_unknown_torchvision_names_the_nearest_releases():
    with pytest.raises(UserError) as caught:
        plan_cells(
            parse_spec('torch = ["2.9.1"]\ntorchvision = ["0.24.5"]'),
            IndexFacts(
                torch_versions={"default": TORCH},
                torchvision_versions=("0.24.0", "0.24.1", "0.25.0"),
            ),
            {"current": None},
        )
    assert caught.value.hint == "the nearest releases are 0.24.0, 0.24.1, 0.25.0"


def test_a_range_matching_nothing_names_the_newest_releases():
    with pytest.raises(UserError) as caught:
        _plan('torch = { versions = ">=9" }')
    assert (
        caught.value.hint
        == "the newest releases there are 2.11.0, 2.10.0, 2.9.1: widen torch.versions"
    )
    with pytest.raises(UserError) as caught:
        _plan('torch = { versions = ">=9" }', torch_versions={"default": ()})
    assert "that index lists no torch release" in caught.value.hint


@pytest.mark.parametrize("bad", ["0/3", "a/b"])
def test_a_bad_shard_shows_how_shards_are_numbered(bad):
    with pytest.raises(UserError) as caught:
        parse_shard(bad, "TORCH_MATRIX_SHARD")
    assert "`--shard 2/5`" in caught.value.hint
    with pytest.raises(UserError) as caught:
        select_shard([], 4, 3)
    assert "numbered from 1" in caught.value.hint


# ---------------------------------------------------------------- spec files and values


def test_an_unreadable_spec_says_which_files_are_looked_for(tmp_path):
    from torch_matrix.world.specfile import load_spec

    with pytest.raises(UserError) as caught:
        load_spec(tmp_path / "nope.toml", {})
    assert "pass an existing file (--spec or $TORCH_MATRIX_SPEC)" in caught.value.hint


def test_a_home_path_without_home_says_to_write_it_absolute():
    with pytest.raises(UserError) as caught:
        parse_spec('[probes]\ndirs = ["~/probes"]', "m.toml", base_dir="/p", environ={})
    assert caught.value.where == "m.toml: probes.dirs[0]"
    assert caught.value.hint == "write the absolute path, or set HOME"
    spec = parse_spec(
        '[probes]\ndirs = ["~/probes"]', "m.toml", base_dir="/p", environ={"HOME": "/h"}
    )
    assert spec.probes.dirs == ("/h/probes",)


def test_a_bad_rule_specifier_shows_both_forms():
    with pytest.raises(UserError) as caught:
        parse_spec("[[exclude]]\ntorch = '>>2'")
    assert caught.value.hint.startswith(
        "use a version such as '2.5' (that release series) or a specifier"
    )


# ---------------------------------------------------------------- plan and report inputs


def test_zero_shards_says_what_shards_does(tmp_path, capsys):
    spec = tmp_path / "m.toml"
    spec.write_text('torch = ["2.5.1"]\n')
    assert cli.main(["plan", "--spec", str(spec), "--shards", "0"]) == 2
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == "  hint: `--shards 4` prints four shards for a CI matrix"
    )


@pytest.mark.parametrize(
    "content, what",
    [
        (None, "plan file does not exist"),
        ("{oops", "not JSON (line 1 column 2)"),
        ('{"cells": 3}', "expected a list of cells"),
        ('[{"torch": "2.5.1"}]', "entry 0 is not a cell (no id)"),
    ],
)
def test_a_bad_plan_file_says_how_to_write_one(tmp_path, capsys, content, what):
    results = tmp_path / "results"
    results.mkdir()
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content)
    assert cli.main(["report", str(results), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert what in err[-2]
    assert err[-1] == "  hint: --plan takes the file `torch-matrix plan --json > plan.json` wrote"


# ---------------------------------------------------------------- indexes and interpreters


def test_a_bad_index_ttl_shows_a_valid_value():
    from torch_matrix.world.indexcache import default_ttl

    for raw in ("soon", "-1"):
        with pytest.raises(UserError) as caught:
            default_ttl({"TORCH_MATRIX_INDEX_TTL": raw})
        assert "TORCH_MATRIX_INDEX_TTL=3600" in caught.value.hint


def test_index_errors_name_their_fix(tmp_path):
    from torch_matrix.world.indexcache import DiskCache
    from torch_matrix.world.index import IndexUnavailable, PackageIndex, Source, open_index
    from torch_matrix.spec.model import IndexConfig
    from tests.test_index import make_wheel

    missing = open_index(
        IndexConfig(default=(tmp_path / "empty").as_uri(), find_links=(str(tmp_path / "gone"),)),
        cache_dir=tmp_path / "cache",
        ttl=3600,
        environ={},
    )
    with pytest.raises(UserError) as caught:
        missing.versions("torch")
    assert "fix the path in [index] find_links" in caught.value.hint

    def offline(url, accept):
        raise IndexUnavailable(f"cannot reach {url}: offline")

    down = PackageIndex(
        [Source("https://pypi.example/simple", "simple")],
        DiskCache(tmp_path / "c2", 3600),
        fetch=offline,
    )
    with pytest.raises(UserError) as caught:
        down.versions("torch")
    assert "check the network and the index URL" in caught.value.hint

    sdists = tmp_path / "sdists"
    sdists.mkdir()
    (sdists / "torch-2.5.1.tar.gz").write_bytes(b"")
    no_wheels = open_index(
        IndexConfig(default=(tmp_path / "empty").as_uri(), find_links=(str(sdists),)),
        cache_dir=tmp_path / "c3",
        ttl=3600,
        environ={},
    )
    with pytest.raises(UserError) as caught:
        no_wheels.requires_dist("torch", "2.5.1")
    assert caught.value.hint.startswith("the index lists torch 2.5.1 without wheels")

    broken = tmp_path / "broken"
    wheel = make_wheel(broken, "torch", "2.5.1")
    wheel.write_bytes(b"not a zip")
    unreadable = open_index(
        IndexConfig(default=(tmp_path / "empty").as_uri(), find_links=(str(broken),)),
        cache_dir=tmp_path / "c4",
        ttl=3600,
        environ={},
    )
    with pytest.raises(UserError) as caught:
        unreadable.requires_dist("torch", "2.5.1")
    assert "metadata read once is cached" in caught.value.hint


def test_a_configured_interpreter_of_another_version_says_how_to_fix_the_entry(tmp_path):
    from torch_matrix.world.interpreters import find_interpreters
    from tests.test_interpreters import stub

    configured = stub(tmp_path / "py" / "python", "3.10.1")
    with pytest.raises(UserError) as caught:
        find_interpreters(["3.11"], {"3.11": str(configured)}, {"PATH": ""}, use_uv=False)
    assert caught.value.hint == (
        "point [interpreters] '3.11' at a Python 3.11 executable, or remove the "
        "entry to search PATH, pyenv and uv"
    )


# ---------------------------------------------------------------- pins --apply targets


def _pins_results(tmp_path):
    from torch_matrix.world.results import write_result
    from tests.pins_grids import single_bad_patch

    for result in single_bad_patch(with_torchvision=True):
        write_result(result, tmp_path / "results" / "default" / "cells")
    return tmp_path / "results"


@pytest.mark.parametrize(
    "name, content, hint",
    [
        ("requirements.txt", "torch>=>1\n", "fix that line (PEP 508"),
        (
            "pyproject.toml",
            "[project]\ndependencies = [1]\n",
            "each dependency is a PEP 508 string",
        ),
        ("pyproject.toml", '[project]\ndependencies = ["torch>=>1"]\n', "fix that line (PEP 508"),
        ("pyproject.toml", "[project\n", "fix the TOML syntax at that line"),
        ("missing.txt", None, "--apply takes an existing requirements*.txt or pyproject.toml"),
        (
            "latin1.txt",
            b"torch # caf\xe9\n",
            "--apply takes an existing requirements*.txt or pyproject.toml",
        ),
    ],
)
def test_a_bad_apply_target_says_what_to_fix_and_that_nothing_was_written(
    tmp_path, capsys, name, content, hint
):
    results = _pins_results(tmp_path)
    target = tmp_path / name
    if isinstance(content, str):
        target.write_text(content)
    elif content is not None:
        target.write_bytes(content)
    before = target.read_bytes() if target.exists() else None
    assert cli.main(["pins", str(results), "--no-coverage", "--apply", str(target)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("torch-matrix: error: ") and err[-1].startswith("  hint: ")
    assert hint in err[-1]
    assert (target.read_bytes() if target.exists() else None) == before


# ---------------------------------------------------------------- history, diff, bisect, run


def test_history_and_diff_errors_name_their_fix(tmp_path, capsys):
    empty = tmp_path / "results"
    empty.mkdir()
    assert cli.main(["import", str(empty), "--db", str(tmp_path / "h.sqlite")]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("  hint: run `nox -s matrix` first")
    assert cli.main(["diff", "a", "b", "c"]) == 2
    assert "`torch-matrix diff OLD NEW`" in capsys.readouterr().err.splitlines()[-1]


def test_bisect_in_the_wrong_order_says_which_end_is_which(tmp_path, capsys):
    spec = tmp_path / "m.toml"
    spec.write_text('torch = ["2.5.1"]\n')
    assert cli.main(["bisect", "--good", "2.6.0", "--bad", "2.3.0", "--spec", str(spec)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "  hint: --good is the last version that worked, --bad the first that broke"
    )


def test_run_with_another_noxfile_says_to_run_nox_directly(tmp_path):
    from torch_matrix.cli.run import nox_command

    with pytest.raises(UserError) as caught:
        nox_command(["-f", "other.py"], [], tmp_path)
    assert caught.value.hint == "run `nox -f FILE` yourself to use another one"


def test_every_user_error_in_the_package_carries_a_hint():
    """A static net under the behaviour tests above: no ``UserError(...)`` in matrix/ without a hint."""
    import ast

    package = Path(__file__).resolve().parent.parent / "torch_matrix"
    bare = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "UserError"
            ):
                if len(node.args) < 3 and "hint" not in {k.arg for k in node.keywords}:
                    bare.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert bare == []


@pytest.mark.parametrize(
    "text, guess, section",
    [
        ('torchvison = "none"', "did you mean 'torchvision'?", "keys"),
        ("[probes]\ntimout = 3", "did you mean 'timeout'?", "probes"),
        ("[index]\nfind-links = []", "did you mean 'find_links'?", "index"),
        ("[[exclude]]\nPython = '3.10'", "did you mean 'python'?", "exclude"),
        ("[probes]\ncolour = 1", "", "probes"),
    ],
)
def test_an_unknown_key_names_the_nearest_known_one(text, guess, section):
    with pytest.raises(UserError) as caught:
        parse_spec(text)
    assert caught.value.hint.startswith(guess) and (
        guess or not caught.value.hint.startswith("did you")
    )
    assert f"`torch-matrix help spec {section}`" in caught.value.hint


def test_an_unknown_probe_name_names_the_nearest_probe(tmp_path):
    from torch_matrix.world.probesuite import check_names

    spec = parse_spec('[probes]\nrun = ["lazy_cuda_int"]', str(tmp_path / "matrix.toml"))
    with pytest.raises(UserError) as caught:
        check_names(spec)
    assert caught.value.hint.startswith("did you mean 'lazy_cuda_init'? known probes: ")
