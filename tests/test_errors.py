"""Every user-facing error names the fix: the uv-style hint line, path by path.

The error line itself (file, key, value) is tested where each module is tested; here
each path's *hint* is asserted, and how the CLI and the noxfile print both lines.
"""

from __future__ import annotations

import pytest

from matrix import cli
from matrix.errors import UserError
from matrix.plan import IndexFacts, nearest_releases, parse_shard, plan_cells, select_shard
from matrix.spec import parse_spec
from tests.test_spec import BAD


def test_render_is_the_error_line_then_an_indented_hint():
    error = UserError("torch 2.9.9 does not exist on PyPI", "matrix.toml: torch[0]",
                      hint="the nearest releases are 2.8.0, 2.9.1")
    assert error.one_line() == "torch-matrix: error: matrix.toml: torch[0]: torch 2.9.9 does not exist on PyPI"
    assert error.render().splitlines() == [error.one_line(), "  hint: the nearest releases are 2.8.0, 2.9.1"]
    assert UserError("x").render() == "torch-matrix: error: x"  # no hint, no second line


def test_cli_prints_the_hint_under_the_error_and_exits_2(tmp_path, capsys):
    assert cli.main(["pins", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == f"torch-matrix: error: {tmp_path}: no cell results found"
    assert err[-1].startswith("  hint: run `nox -s matrix` first")


def test_missing_results_directory_says_run_the_matrix_first(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"torch-matrix: error: {tmp_path / 'nowhere'}: results directory does not exist",
                   "  hint: run `nox -s matrix` first (it writes results/<run>/cells/), or pass the "
                   "directory that holds the cell results"]


@pytest.mark.parametrize("text, key, value", BAD)
def test_every_bad_spec_value_points_at_its_section_of_docs_spec_md(text, key, value):
    with pytest.raises(UserError) as caught:
        parse_spec(text)
    hint = caught.value.hint
    assert "docs/spec.md" in hint or "TOML syntax" in hint
    assert "`torch-matrix plan` checks a spec without installing anything" in hint
    section = key.split(".")[0].split("[")[0]
    if key != "matrix.toml":
        assert f"`{section}`" in hint


TORCH = ("2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0")


def _plan(text: str, **facts) -> list:
    values = {"torch_versions": {"default": TORCH}, "pairing": {}, "where": "PyPI"}
    values.update(facts)
    return plan_cells(parse_spec('torchvision = "none"\n' + text), IndexFacts(**values), {"current": None})


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
        plan_cells(parse_spec('torch = ["2.9.1"]\ntorchvision = ["0.24.5"]'),
                   IndexFacts(torch_versions={"default": TORCH}, torchvision_versions=("0.24.0", "0.24.1", "0.25.0")),
                   {"current": None})
    assert caught.value.hint == "the nearest releases are 0.24.0, 0.24.1, 0.25.0"


def test_a_range_matching_nothing_names_the_newest_releases():
    with pytest.raises(UserError) as caught:
        _plan('torch = { versions = ">=9" }')
    assert caught.value.hint == "the newest releases there are 2.11.0, 2.10.0, 2.9.1: widen torch.versions"
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
