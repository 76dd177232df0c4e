"""Figure 7 (the history at a year's scale, benchmarks/history.py) in CI: the same code at 30
nights x 100 cells, its generated file reused on the second call, every target measured.
The full scale (365 x 2,500) runs in `nox -s bench`; its figures are in benchmarks/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import history as figure
from benchmarks.common import BenchError, Context


def test_figure_7_measures_every_target_at_a_small_scale_and_reuses_its_year(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_MATRIX_BENCH_CACHE", str(tmp_path / "cache"))
    lines: list[str] = []
    ctx = Context(work=tmp_path / "work", quick=True, log=lines.append)
    ctx.facts["history_scale"] = "30x100"
    result = figure.measure(ctx)
    assert (result["nights"], result["cells"], result["cell_results"]) == (30, 100, 3000)
    assert result["build_s"] is not None and result["db_bytes"] > 0
    targets = {target.name: target for target in result["targets"]}
    assert set(targets) == {
        "diff, 30 nights x 100 cells",
        "history, 30 nights x 100 cells",
        "import one night of 100 cells",
        "file size, 30 nights x 100 cells",
    }
    assert all(target.value is not None and target.value > 0 for target in targets.values())
    assert targets["file size, 30 nights x 100 cells"].value == result["db_bytes"] / 2**20
    # each fresh process's CPU time beside its wall time, and the load they ran under
    assert set(result["cpu_seconds"]) == set(result["seconds"])
    assert all(0 < s["median"] for s in result["cpu_seconds"].values())
    assert result["cpu_seconds"]["import"]["n"] == result["seconds"]["import"]["n"]
    assert result["load_average"]["before"] >= 0
    assert any(line.startswith("  load average (1 min): ") for line in lines)
    # the import's floor, timed in the same rounds: seconds and a ratio to python -c pass, worded
    # in the import's line; context, not a target
    floor = result["floors"]["import"]
    assert floor["files"] == 100 and floor["modules"] > 0
    assert floor["seconds"]["n"] == result["seconds"]["python -c pass"]["n"]
    assert 0 < floor["cpu_seconds"]["median"] and floor["over_bare_python"] > 0
    phrase = "floor (interpreter + imports + one read of the 100 files) "
    assert phrase in targets["import one night of 100 cells"].note
    assert any(line.startswith(f"  import: {phrase}") for line in lines)
    # the second run reuses the generated year instead of building it again
    again = figure.measure(ctx)
    assert again["build_s"] is None and again["db_bytes"] == result["db_bytes"]
    assert any("reusing the generated history" in line for line in lines)


def test_the_generated_year_holds_every_night_and_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_MATRIX_BENCH_CACHE", str(tmp_path))
    from torch_matrix.world.history import open_history

    db, _ = figure.year_db(4, 30, lambda line: None)
    with open_history(db, create=False) as history:
        runs = history.runs()
        assert len(runs) == 4 and all(row.cells == 30 for row in runs)
        assert [row.run.date[:10] for row in runs] == [
            "2026-01-01",
            "2026-01-02",
            "2026-01-03",
            "2026-01-04",
        ]


@pytest.mark.parametrize("text", ["365", "0x10", "axb", "365x"])
def test_a_bad_history_scale_is_refused(text: str) -> None:
    with pytest.raises(BenchError, match="NIGHTSxCELLS"):
        figure.parse_scale(text)
