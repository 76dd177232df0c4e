"""Breaks no edge search covers (``plan.unbisected``): each said in one line, with why."""

from __future__ import annotations

import dataclasses

from torch_matrix.plan.unbisected import unbisected
from torch_matrix.vocab.records import FAIL, ORIGIN_EDGE
from tests.factories import make_cell, make_probe, make_result


def _failing(torch: str):
    return make_result(
        torch=torch, python="3.11", probes=[make_probe("install_sanity", FAIL, "boom")]
    )


def test_a_context_where_every_cell_fails_is_no_version_finding() -> None:
    found = unbisected([_failing("2.1.0"), _failing("2.2.0")])
    assert [(f.failing, f.passing) for f in found] == [(("2.1.0", "2.2.0"), ())]
    line = found[0].line()
    assert line.startswith("not bisected: torch 2.1.0, 2.2.0 fail in every cell of python 3.11")
    assert "no release passes there" in line


def test_a_passing_follow_up_cell_beside_failing_grid_cells_says_how_to_bisect() -> None:
    edge = make_result(torch="2.3.0", python="3.11")
    edge = dataclasses.replace(
        edge, cell=dataclasses.replace(edge.cell, id=edge.cell.id + "-edge", origin=ORIGIN_EDGE)
    )
    found = unbisected([_failing("2.1.0"), _failing("2.4.0"), edge])
    assert [(f.failing, f.passing) for f in found] == [(("2.1.0", "2.4.0"), ("2.3.0",))]
    assert "follow-up cells pass at 2.3.0" in found[0].line() and "--redo" in found[0].line()


def test_a_break_with_a_passing_grid_cell_is_bisected_so_not_listed() -> None:
    good = make_result(cell=make_cell(torch="2.1.0", python="3.11"))
    assert unbisected([good, _failing("2.2.0")]) == []
    assert unbisected([good]) == []


def _count_calls(monkeypatch) -> list[int]:
    """A list that grows by one at each call of ``plan.unbisected.unbisected`` (still called)."""
    from torch_matrix.plan import unbisected as module

    calls: list[int] = []
    real = module.unbisected

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "unbisected", counted)
    return calls


def test_a_report_searches_for_unbisected_breaks_once_for_its_table_and_summary(
    tmp_path, monkeypatch, capsys
) -> None:
    """The table and summary.md both list the break; the search over 2,000 results ran once per
    renderer (issue 46: 0.1 s of a report's CPU twice). Now once per report."""
    from torch_matrix import cli
    from torch_matrix.world import results

    edge = make_result(torch="2.3.0", python="3.11")
    edge = dataclasses.replace(
        edge, cell=dataclasses.replace(edge.cell, id=edge.cell.id + "-edge", origin=ORIGIN_EDGE)
    )
    cells = tmp_path / "run" / "cells"
    for result in (_failing("2.1.0"), _failing("2.4.0"), edge):
        results.write_result(result, cells)
    calls = _count_calls(monkeypatch)
    assert cli.main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    assert "follow-up cells pass at 2.3.0" in capsys.readouterr().out
    assert "follow-up cells pass at 2.3.0" in (tmp_path / "out" / "summary.md").read_text()
    assert len(calls) == 1


def test_a_report_of_grid_cells_only_has_no_unbisected_line_and_runs_no_search(
    tmp_path, monkeypatch, capsys
) -> None:
    """Only a follow-up cell (an edge, a counterfactual) can pass where every grid cell fails: a
    report without one skips the search (issue 46: 0.05 s of a 2,000-cell report) and says the
    same. With an edge cell beside the grid, the line is there (the test above)."""
    from torch_matrix import cli
    from torch_matrix.report.rows import judge, unbisected_notes
    from torch_matrix.world import results

    grid = [_failing("2.1.0"), _failing("2.4.0"), make_result(torch="2.3.0", python="3.12")]
    assert [f.passing for f in unbisected(grid)] == [()]  # a context, but nothing passes there
    cells = tmp_path / "run" / "cells"
    for result in grid:
        results.write_result(result, cells)
    calls = _count_calls(monkeypatch)
    assert cli.main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "not bisected" not in out and "Breaks not bisected" not in out
    assert "not bisected" not in (tmp_path / "out" / "summary.md").read_text()
    assert calls == []
    # A counterfactual of an edge cell is a follow-up too: the search runs for it.
    edge = make_result(torch="2.3.0", python="3.11")
    edge = dataclasses.replace(
        edge,
        cell=dataclasses.replace(edge.cell, id=edge.cell.id + "-edge", origin=ORIGIN_EDGE),
    )
    assert unbisected_notes(judge([*grid, edge])) and calls == [1]
