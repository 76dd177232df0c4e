"""Follow-up cells (plan.followups) and the windows they prove (pins.windows).

A synthetic index of releases and a "truth" (which release passes, fails or cannot be installed)
stand in for real wheels: the grid's cells are judged by the truth, the planner asks for follow-up
cells, they are judged by the truth too, until the planner asks for nothing. Then the pins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_matrix.pins import requirement_lines, suggest_pins
from torch_matrix.pins.specifiers import PinPolicy, specifier_set
from torch_matrix.judge.verdict import verdict_of
from torch_matrix.plan import bisection, followups
from torch_matrix.plan import edgecells
from torch_matrix.plan import breaks
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import ORIGIN_EDGE, ORIGIN_MATRIX, UNSATISFIABLE, Cell, CellResult
from packaging.version import Version
from tests.factories import make_cell, make_probe, make_result

RELEASES = (
    "1.13.0",
    "1.13.1",
    "2.0.0",
    "2.0.1",
    "2.1.0",
    "2.1.1",
    "2.1.2",
    "2.2.0",
    "2.2.1",
    "2.2.2",
    "2.3.0",
    "2.3.1",
    "2.4.0",
    "2.4.1",
    "2.5.0",
    "2.5.1",
    "2.6.0",
)
PASS, FAIL, UNSAT = "pass", "fail", "unsat"


def grid_cell(version: str, python: str = "3.11") -> Cell:
    return make_cell(
        torch=version, python=python, torchvision="", probes=("p",), required_probes=("p",)
    )


def judged(cell: Cell, outcome: str) -> CellResult:
    if outcome == UNSAT:
        return make_result(cell, status=UNSATISFIABLE, message=f"no torch {cell.torch} wheel")
    return make_result(
        cell, probes=[make_probe("p", outcome, message="" if outcome == PASS else "it broke")]
    )


def run(
    truth: Mapping[str, str],
    grid: Sequence[str],
    releases: Sequence[str] = RELEASES,
    cap: int = 10_000,
) -> list[CellResult]:
    """The grid, then follow-ups until the planner asks for none (or the cap is spent)."""
    results = [judged(grid_cell(v), truth[v]) for v in grid]
    spent = 0
    for _ in range(1000):
        planned = followups.plan_followups(results, lambda cell, axis="torch": releases)
        now, _dropped = followups.within_cap(planned, spent, cap)
        if not now:
            return results
        for cell in now:
            assert cell.origin in (ORIGIN_EDGE,) and cell.reason and cell.id.endswith("-edge")
            results.append(judged(cell, truth[cell.torch]))
            spent += 1
    raise AssertionError("the planner never stopped")


def torch_line(
    results: Sequence[CellResult],
    releases: Sequence[str] = RELEASES,
    policy: PinPolicy = PinPolicy.PROVEN,
) -> str:
    suggestion = suggest_pins(results, {"torch": list(releases)}, policy)
    lines = [
        line.text() for line in requirement_lines(suggestion.recommended) if line.package == "torch"
    ]
    return lines[0] if lines else "torch"


def edge_cells(results: Sequence[CellResult]) -> list[str]:
    return [r.cell.torch for r in results if r.cell.origin == ORIGIN_EDGE]


def truth_of(
    bad: set[str], releases: Sequence[str] = RELEASES, unsat: set[str] = frozenset()
) -> dict[str, str]:
    return {v: UNSAT if v in unsat else FAIL if v in bad else PASS for v in releases}


# ------------------------------------------------------------------------------- examples


def test_a_break_that_lasts_to_the_newest_release_becomes_an_upper_bound():
    """1.13.1 passes, 2.3.1 fails in the grid: bisect the start, test the newest; `torch<2`."""
    truth = truth_of({v for v in RELEASES if Version(v) >= Version("2.0.0")})
    results = run(truth, ["1.13.1", "2.3.1"])
    assert RELEASES[-1] in edge_cells(results)  # the newest release was tested
    start = len([v for v in edge_cells(results) if Version(v) < Version("2.3.1")])
    assert start <= bisection.max_cells(len(RELEASES[1:12]))
    assert torch_line(results) == "torch<2"
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    window = requirement_lines(suggestion.recommended)[0].windows[0]
    assert (window.first_bad, window.last_bad, window.kind) == ("2.0.0", "2.6.0", "upper-bound")
    proof = window.proof()
    assert proof.startswith(
        "first bad 2.0.0, found by bisect between 1.13.1 (passes) [t1.13.1-py3.11] "
        "and 2.0.0 (fails) [t2.0.0-py3.11-edge]; newest 2.6.0 fails [t2.6.0-py3.11-edge]; "
    )
    assert f"of {len(window.releases)} releases in the window tested" in proof


def test_a_closed_window_of_a_whole_minor_becomes_not_equal_star():
    """2.0.0 and 2.0.1 fail (torch.compile on Python 3.11 before 2.1), 1.13.1 and 2.4.1 pass."""
    truth = truth_of({"2.0.0", "2.0.1"})
    results = run(truth, ["1.13.1", "2.0.1", "2.4.1"])
    assert torch_line(results) == "torch!=2.0.*"
    assert sorted(edge_cells(results), key=Version)[0] == "2.0.0"
    # With follow-ups off, only the tested bad release is excluded, and the proof says why.
    grid_only = run(truth, ["1.13.1", "2.0.1", "2.4.1"], cap=0)
    assert edge_cells(grid_only) == [] and torch_line(grid_only) == "torch!=2.0.1"
    window = requirement_lines(suggest_pins(grid_only, {"torch": list(RELEASES)}).recommended)[
        0
    ].windows[0]
    assert (
        window.kind == "not-proven"
        and "first bad not found: 2.0.0 between 1.13.1 (passes) and 2.0.1" in window.proof()
    )


def test_an_unproven_windows_missing_releases_are_listed_oldest_first_on_both_sides():
    """Follow-ups off: 2.1.0 fails between 2.0.0 and 2.4.1. Each edge names the releases no cell
    reached oldest first, like every other list (the end edge listed them newest first)."""
    truth = truth_of({"2.1.0"})
    results = run(truth, ["2.0.0", "2.1.0", "2.4.1"], cap=0)
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    (line,) = [x for x in requirement_lines(suggestion.recommended) if x.package == "torch"]
    (window,) = line.windows
    assert window.start.missing == ("2.0.1",)
    assert window.end.missing == (
        "2.1.1", "2.1.2", "2.2.0", "2.2.1", "2.2.2", "2.3.0", "2.3.1", "2.4.0"
    )  # fmt: skip
    assert "last bad not found: 8 releases, 2.1.1 to 2.4.0 between 2.1.0 and 2.4.1 (passes)" in (
        window.proof()
    )
    truth = truth_of({"2.2.2"})
    results = run(truth, ["2.0.0", "2.2.2", "2.4.1"], cap=0)
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    (line,) = [x for x in requirement_lines(suggestion.recommended) if x.package == "torch"]
    (window,) = line.windows
    assert window.start.missing == ("2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.1")
    assert "6 releases, 2.0.1 to 2.2.1 between 2.0.0 (passes) and 2.2.2" in window.proof()


def test_a_closed_window_across_minors_lists_each_release():
    truth = truth_of({"2.1.2", "2.2.0", "2.2.1"})
    results = run(truth, ["1.13.1", "2.2.0", "2.6.0"])
    assert torch_line(results) == "torch!=2.1.2,!=2.2.0,!=2.2.1"


def test_a_window_from_the_oldest_release_becomes_a_floor():
    truth = truth_of({v for v in RELEASES if Version(v) < Version("2.4.0")})
    results = run(truth, ["2.0.1", "2.5.1"])
    assert torch_line(results) == "torch>=2.4"


def test_the_seed_case_plans_nothing_and_keeps_its_pins():
    """Adjacent edges (1.11.0 passes, 1.12.0 fails, 1.12.1 passes): nothing to bisect."""
    releases = ("1.10.2", "1.11.0", "1.12.0", "1.12.1", "1.13.0", "1.13.1")
    truth = truth_of({"1.12.0"}, releases)
    results = run(truth, ["1.11.0", "1.12.0", "1.12.1"], releases)
    assert edge_cells(results) == []
    assert torch_line(results, releases) == "torch!=1.12.0"


def test_an_uninstallable_release_next_to_the_break_leaves_the_edge_unproven():
    truth = truth_of({"2.0.1", "2.1.0"}, unsat={"2.0.0"})
    results = run(truth, ["1.13.1", "2.1.0", "2.4.1"])
    assert torch_line(results) == "torch!=2.0.1,!=2.1.0"


def test_follow_up_cells_keep_the_cells_probes_and_install_and_resume_by_id():
    base = grid_cell("2.3.1")
    cell = edgecells.edge_cell(base, "2.0.0", reason="start")
    assert (cell.probes, cell.required_probes, cell.install, cell.axes["python"]) == (
        base.probes,
        base.required_probes,
        base.install,
        "3.11",
    )
    assert cell.requirements == ("torch==2.0.0",) and cell.origin == ORIGIN_EDGE
    assert Cell.from_json(cell.to_json()) == cell
    paired = edgecells.edge_cell(
        make_cell(torch="2.3.1", torchvision="0.18.1"),
        "2.0.0",
        pairing={"2.0.0": "0.15.1"},
        pythons=frozenset({"3.8", "3.11"}),
    )
    assert paired.requirements == ("torch==2.0.0", "torchvision==0.15.1") and not paired.plan_note
    unpaired = edgecells.edge_cell(
        make_cell(torch="2.3.1", python="3.12"), "2.0.0", pairing={}, pythons=frozenset({"3.11"})
    )
    assert "no torchvision release requires torch==2.0.0" in unpaired.plan_note
    results = [judged(grid_cell("1.13.1"), PASS), judged(grid_cell("2.3.1"), FAIL)]
    first = followups.plan_followups(results, lambda c, axis="torch": RELEASES)
    assert (
        first
        and followups.plan_followups(
            results + [judged(c, FAIL) for c in first], lambda c, axis="torch": RELEASES
        )
        != first
    )


def test_cap_from_reads_the_follow_up_cap():
    assert followups.cap_from({}) == followups.DEFAULT_CAP
    assert followups.cap_from({"TORCH_MATRIX_FOLLOWUPS": "0"}) == 0
    assert (
        followups.cap_from({"TORCH_MATRIX_COUNTERFACTUALS": "3"}) == 3
    )  # the older name still works
    for bad in ("x", "-1", "2.5"):  # issue 35: 'x' was silently 24, '-1' silently 0
        with pytest.raises(UserError) as caught:
            followups.cap_from({"TORCH_MATRIX_FOLLOWUPS": bad})
        assert caught.value.one_line() == (
            f"torch-matrix: error: TORCH_MATRIX_FOLLOWUPS: {bad!r} is not accepted: expected a "
            "whole number from 0 to 100000 (0 switches follow-up cells off)"
        )
    assert followups.within_cap(["a", "b"], 7, 8) == (["a"], 1)


# ------------------------------------------------------------------------------- property


def break_patterns(most: int) -> st.SearchStrategy:
    """(an outcome per release of the first n <= ``most``, the 1-4 releases the grid tests)."""
    return st.integers(min_value=2, max_value=most).flatmap(
        lambda n: st.tuples(
            st.lists(st.sampled_from([PASS, PASS, FAIL, FAIL, UNSAT]), min_size=n, max_size=n),
            st.lists(
                st.integers(min_value=0, max_value=n - 1), min_size=1, max_size=4, unique=True
            ),
        )
    )


patterns = break_patterns(len(RELEASES))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns)
def test_windows_never_cover_a_passing_cell_and_edges_stay_within_budget(pattern):
    """Random break patterns (one window, several, an isolated pass or fail such as a flaky
    release, uninstallable holes): no pin excludes a release seen passing, and each edge spends
    at most ceil(log2 N) + 2 follow-up cells over its N releases."""
    outcomes, picked = pattern
    releases = RELEASES[: len(outcomes)]
    truth = dict(zip(releases, outcomes))
    results = run(truth, [releases[i] for i in sorted(picked)], releases)
    for edge in breaks.edges(results, lambda cell, axis="torch": releases):
        assert edge.spent <= edge.budget == bisection.max_cells(len(edge.span))
    line = torch_line(results, releases)
    specifiers = specifier_set([line[len("torch") :]] if line != "torch" else [])
    passing = {r.cell.torch for r in results if r.installed and r.probes[0].status == PASS}
    for version in passing:
        assert specifiers.contains(version), (line, version)
    suggestion = suggest_pins(results, {"torch": list(releases)})
    for pin in suggestion.recommended.pins:
        for window in pin.windows:
            assert not passing & set(window.releases)
    # A clean single window with a passing release on each side is found exactly.
    bad = [v for v in releases if truth[v] == FAIL]
    if UNSAT not in outcomes and bad and truth[releases[0]] == PASS and truth[releases[-1]] == PASS:
        first, last = releases.index(bad[0]), releases.index(bad[-1])
        tested = {r.cell.torch for r in results if r.cell.origin == ORIGIN_MATRIX}
        one_window = all(truth[v] == FAIL for v in releases[first : last + 1])
        if one_window and releases[0] in tested and releases[-1] in tested and tested & set(bad):
            expected = set(releases[first : last + 1])
            assert {v for v in releases if not specifiers.contains(v)} == expected, line


@pytest.mark.parametrize("grid", [["1.13.1", "2.6.0"], ["2.3.1"]])
def test_every_tested_release_fails_pins_only_the_tested_ones(grid):
    """Nothing passes at all: no window can be proven, the tested bad releases are excluded."""
    truth = truth_of(set(RELEASES))
    results = run(truth, grid)
    line = torch_line(results)
    assert not any(spec.startswith(("<", ">")) for spec in line[len("torch") :].split(",")), line


def test_the_table_and_the_html_show_follow_up_cells_apart_and_the_html_carries_the_proof():
    from torch_matrix.pins.render import proof_lines
    from torch_matrix.report.html_page import build_page, render_html
    from torch_matrix.report.terminal import render_text

    results = run(truth_of({"2.0.0", "2.0.1"}), ["1.13.1", "2.0.1", "2.4.1"])
    text = render_text(results)
    grid, rest = text.split("Follow-up cells (")
    assert "-edge" not in grid and "t2.0.1-py3.11 " in grid
    assert (
        "t2.0.0-py3.11-edge" in rest
        and "start of the break at torch 2.0.1: bisect 1.13.1 .. 2.0.1" in rest
    )
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    pins = [(line.text(), proof_lines(line)) for line in requirement_lines(suggestion.recommended)]
    page = build_page(results, pins=pins)
    in_grid = {view.id for row in page.rows for slot in row.slots for view in slot}
    assert in_grid == {"t1.13.1-py3.11", "t2.0.1-py3.11", "t2.4.1-py3.11"}
    assert {view.id for view in page.followups} == {
        r.cell.id for r in results if r.cell.origin == ORIGIN_EDGE
    }
    html = render_html(results, pins=pins)
    assert "<code>torch!=2.0.*</code>" in html and "found by bisect between 1.13.1 (passes)" in html
    assert 'id="followups"' in html


def test_a_follow_up_cell_is_rerun_through_the_follow_up_session():
    from torch_matrix.report.rows import cell_repro

    cell = edgecells.edge_cell(grid_cell("2.3.1"), "2.0.0", reason="start")
    assert (
        cell_repro(cell, "m.toml")
        == "torch-matrix run --spec m.toml -s followups -- --redo t2.0.0-py3.11-edge"
    )
    assert (
        cell_repro(grid_cell("2.3.1"), "m.toml")
        == "torch-matrix run --spec m.toml -s 'matrix(t2.3.1-py3.11)' -- --redo"
    )


def test_an_edge_cell_the_environment_explains_gets_its_counterfactual_which_settles_the_edge():
    """Real wheels: torch 2.1's torch.compile imports pkg_resources, which a uv venv lacks. The edge
    cell is `environment` (no evidence); its counterfactual (with setuptools) passes, so the release
    works and the end of the break is proven next to it. The edge waits for that verdict before it
    picks another release, and its next cells install the confirmed fix from the start."""
    truth = truth_of({"2.0.0", "2.0.1"})
    env_failure = {"2.1.0", "2.1.1", "2.1.2"}

    def judge(cell: Cell) -> CellResult:
        if (
            cell.torch in env_failure
            and cell.origin == ORIGIN_EDGE
            and "setuptools<82" not in cell.requirements
        ):
            return make_result(
                cell,
                probes=[
                    make_probe(
                        "p", FAIL, message="ModuleNotFoundError: No module named 'pkg_resources'"
                    )
                ],
            )
        return judged(cell, truth[cell.torch])

    def followed(grid: Sequence[str]) -> list[CellResult]:
        results = [judge(grid_cell(v)) for v in grid]
        for _ in range(50):
            planned = followups.plan_followups(results, lambda cell, axis="torch": RELEASES)
            if not planned:
                return results
            results += [judge(cell) for cell in planned]
        raise AssertionError("the planner never stopped")

    # The lead's real compile/py3.11 run (1.13.1 ✓, 2.0.1 ✗, 2.4.1 ✓): the end edge tested 2.2.1, 2.1.2,
    # 2.1.1, 2.1.0, each of 2.1.x ⚙ with a counterfactual: 8 follow-up cells. Now the first ⚙ release
    # is settled by its counterfactual, and 2.1.1 and 2.1.0 are tested with setuptools<82 at once: 6.
    # With the grid 1.13.1, 2.0.1, 2.6.0, the edge used to take the ⚙ 2.1.1 as no evidence and try
    # 2.1.2 beside it before the counterfactual was in.
    for grid in (["1.13.1", "2.0.1", "2.4.1"], ["1.13.1", "2.0.1", "2.6.0"]):
        results = followed(grid)
        assert sorted(edge_cells(results), key=Version) == sorted(
            edge_cells(run(truth, grid)), key=Version
        )
        counterfactuals = [r.cell for r in results if r.cell.origin == "counterfactual"]
        assert len(counterfactuals) == 1 and counterfactuals[0].requirements[-1] == "setuptools<82"
        fixed = [
            r.cell
            for r in results
            if r.cell.origin == ORIGIN_EDGE and "setuptools<82" in r.cell.requirements
        ]
        assert fixed and all(
            c.id.endswith("-with-setuptools_82-edge")
            and f"setuptools<82: the environment fix {counterfactuals[0].id} confirmed" in c.reason
            for c in fixed
        )
        assert len([r for r in results if r.cell.is_followup]) == len(edge_cells(results)) + 1
    results = followed(["1.13.1", "2.0.1", "2.4.1"])
    assert torch_line(results) == "torch!=2.0.*"
    window = requirement_lines(suggest_pins(results, {"torch": list(RELEASES)}).recommended)[
        0
    ].windows[0]
    assert (
        window.end.good == "2.1.0"
        and window.end.good_cell == "t2.1.0-py3.11-with-setuptools_82-edge"
    )
    assert window.end.found_by == "bisect"


def test_the_index_view_moves_torchvision_with_torch_unless_the_spec_has_none():
    """An explicit torchvision moves with torch too (held, every edge cell was uninstallable: each
    release requires one torch), and its releases are an axis of their own; "none": nothing to pair."""
    from types import SimpleNamespace

    from packaging.requirements import Requirement

    from torch_matrix.run.followups import IndexView

    paired = IndexView(SimpleNamespace(torchvision="paired"), {})
    assert paired.paired and not paired.torchvision_axis
    assert not IndexView(SimpleNamespace(torchvision="none"), {}).paired
    explicit = IndexView(SimpleNamespace(torchvision=("0.19.1",), python=("3.11",)), {})
    assert explicit.paired and explicit.torchvision_axis

    class Index:  # what read_torch_of asks of the index
        asked: list[list[str]] = []

        def requires_dist_many(self, project, versions, pythons=()):
            self.asked.append(list(versions))
            table = {
                "0.17.0": ["numpy", "torch==2.2.0"],
                "0.29.2": ["torch>=2.14.0"],
                "0.30.0": ["torch (==2.16.0+cpu)"],
                "0.1.0": ["numpy"],
            }
            return {v: [Requirement(line) for line in table[v]] for v in versions}

        def versions(self, project):
            return [Version(v) for v in ("2.13.0", "2.14.1", "2.15.0", "2.16.0rc1")]

    explicit._indexes["default"] = Index()
    explicit.read_torch_of(["0.17.0", "0.29.2", "0.30.0", "0.1.0"])
    assert explicit.torch_of == {"0.17.0": "2.2.0", "0.29.2": "2.15.0", "0.30.0": "2.16.0"}
    explicit.read_torch_of(["0.17.0"])
    assert Index.asked == [["0.17.0", "0.29.2", "0.30.0", "0.1.0"]]  # read once
    paired.read_torch_of(["0.17.0"])  # no torchvision axis: nothing read
    assert paired.torch_of == {}


def test_the_index_view_offers_an_sdist_only_release_only_where_the_package_ships_no_wheel_for_the_python():
    """numpy 1.3.0 is an sdist that does not build on 3.11, while numpy ships cp311 wheels elsewhere: an
    edge never lands on it (the windows do not admit it either: pins.windows.admitted_releases). A
    package that only ever ships sdists is installed from them."""
    from types import SimpleNamespace

    from torch_matrix.run.followups import IndexView

    files = {
        "numpy": {
            "1.3.0": [],
            "1.26.4": ["cp311-cp311-manylinux_2_17_x86_64"],
            "2.0.0": ["cp312-cp312-any"],
            "2.1.0": ["cp311-cp311-manylinux_2_17_x86_64"],
        },
        "oldpkg": {"0.1": [], "0.2": []},
    }

    class Index:
        def versions(self, project):
            return [Version(v) for v in files[project]]

        def files(self, project, version):
            tags = files[project][str(version)]
            return (
                [SimpleNamespace(tags=tuple(tags), requires_python="")]
                if tags
                else [SimpleNamespace(tags=(), requires_python="")]
            )

    view = IndexView(SimpleNamespace(torchvision="paired"), {})
    view._indexes["default"] = Index()
    cell = make_cell(torch="2.4.1", python="3.11")
    assert view.releases_for(cell, "numpy") == ["1.26.4", "2.1.0"]
    assert view.releases_for(cell, "oldpkg") == ["0.1", "0.2"]


NUMPY = (
    "1.24.4",
    "1.25.2",
    "1.26.0",
    "1.26.4",
    "2.0.0",
    "2.0.1",
    "2.0.2",
    "2.1.0",
    "2.1.3",
    "2.2.6",
    "2.3.5",
)


def test_an_extras_axis_is_bisected_over_its_releases_with_torch_held():
    """torch built against numpy 1 fails with numpy 2 (the grid: numpy<2 -> 1.26.4 passes, numpy>=2 ->
    2.1.3 fails): the numpy edges are bisected over numpy's releases, torch 2.2.2 held; the torch
    axis, which the grid did not vary, is never moved."""

    def numpy_cell(spec: str, installed: str, cell: Cell | None = None) -> CellResult:
        cell = cell or make_cell(
            torch="2.2.2",
            torchvision="",
            extras={"numpy": spec},
            probes=("p",),
            required_probes=("p",),
        )
        outcome = PASS if Version(installed) < Version("2") else FAIL
        return make_result(
            cell,
            probes=[make_probe("p", outcome, message="" if outcome == PASS else "numpy 2")],
            resolved={"torch": "2.2.2", "numpy": installed},
        )

    def releases(cell: Cell, axis: str = "torch") -> Sequence[str]:
        return NUMPY if axis == "numpy" else RELEASES

    results = [numpy_cell("<2", "1.26.4"), numpy_cell(">=2", "2.1.3")]
    for _ in range(50):
        planned = followups.plan_followups(results, releases)
        if not planned:
            break
        for cell in planned:
            assert cell.axes["torch"] == "2.2.2" and cell.axes["numpy"].startswith("==")
            results.append(numpy_cell(cell.axes["numpy"], cell.axes["numpy"][2:], cell))
    tested = sorted(
        (r.install.resolved["numpy"] for r in results if r.cell.origin == ORIGIN_EDGE), key=Version
    )
    assert tested[0] == "2.0.0" and tested[-1] == "2.3.5"  # the first bad, and the newest
    assert all(edge.axis == "numpy" for edge in breaks.edges(results, releases))
    suggestion = suggest_pins(results, {"numpy": list(NUMPY), "torch": list(RELEASES)})
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    assert lines == ["numpy<2"], lines


def test_each_follow_up_cell_is_told_the_planned_cells_after_it_for_the_prefetch():
    """run_followups says, before each cell, which planned cells follow it in its batch: what the
    prefetch fetches into uv's cache while that cell runs its probes."""
    from torch_matrix.run.followups import run_followups

    class View:  # what run_followups reads of the index (torch_matrix.run.followups.IndexView)
        paired, pairing, torch_of, torchvision_axis = False, None, None, False

        def read_pairing(self, versions) -> None:
            pass

        def read_torch_of(self, versions) -> None:
            pass

        def releases_for(self, cell, axis="torch"):
            return RELEASES

        def pythons_of(self, cell, version, axis):
            return None

    truth = truth_of({"2.1.0", "2.1.1", "2.1.2", "2.2.0"})
    results = [judged(grid_cell(v), truth[v]) for v in ("2.0.1", "2.2.0", "2.4.1")]
    told: list[tuple[str, tuple[str, ...]]] = []
    pending: list[tuple[str, ...]] = []

    def upcoming(cells) -> None:
        pending[:] = [tuple(cell.id for cell in cells)]

    def run_one(cell, position) -> None:
        told.append((cell.id, pending[0]))
        results.append(judged(cell, truth[cell.torch]))

    run_followups(
        lambda: list(results), View(), run_one, cap=50, log=lambda line: None, upcoming=upcoming
    )
    assert told and len(told) == len(results) - 3
    ran = [cell_id for cell_id, _ in told]
    for index, (cell_id, after) in enumerate(told):  # what follows it in its batch, in order
        assert after == tuple(ran[index + 1 : index + 1 + len(after)]) and cell_id not in after
    assert any(after for _, after in told)  # a batch of several cells: the prefetch had work


def test_a_window_from_the_oldest_release_with_a_wheel_for_the_tested_python_is_a_floor():
    """Releases too old to have a wheel for the tested Python are not admitted: the floor is proven
    when the oldest release that could be installed fails, and the proof says what it left out."""
    truth = truth_of({v for v in RELEASES if Version(v) < Version("2.4.0")})
    installable = RELEASES[2:]  # 2.0.0 is the first release with a cp311 wheel
    results = run(truth, ["2.2.2", "2.5.1"], installable)
    wheels = {
        "torch": {
            v: frozenset({"3.8", "3.10"}) if v in RELEASES[:2] else frozenset({"3.8", "3.11"})
            for v in RELEASES
        }
    }
    proven = suggest_pins(results, {"torch": list(RELEASES)}, wheel_pythons=wheels)
    line = requirement_lines(proven.recommended)[0]
    assert line.text() == "torch>=2.4"
    window = line.windows[0]
    assert (window.kind, window.first_bad, window.start.index_end) == ("floor", "2.0.0", "oldest")
    assert (
        "oldest 2.0.0 fails [t2.0.0-py3.11-edge] (the 2 older releases have no wheel for Python 3.11: "
        "not admitted)" in window.proof()
    )
    assert "1.13.1" not in proven.coverage["torch"].older  # not a gap: it cannot be installed there
    # Without the wheel facts, 1.13.0 and 1.13.1 are untested releases next to the break: no floor.
    unknown = suggest_pins(results, {"torch": list(RELEASES)})
    assert requirement_lines(unknown.recommended)[0].windows[0].kind == "not-proven"
    # A release the facts do not list stays admitted: still no floor.
    del wheels["torch"]["1.13.1"]
    assert (
        requirement_lines(
            suggest_pins(results, {"torch": list(RELEASES)}, wheel_pythons=wheels).recommended
        )[0]
        .windows[0]
        .kind
        == "not-proven"
    )


def test_an_sdist_only_release_is_admitted_only_where_the_package_ships_no_wheels_for_that_python():
    from torch_matrix.pins.windows import admitted_releases

    numpy = {"1.3.0": None, "1.22.4": frozenset({"3.8", "3.10"}), "1.26.4": frozenset({"3.11"})}
    assert admitted_releases(list(numpy), numpy, ["3.11"]) == (["1.26.4"], ["1.3.0", "1.22.4"])
    pure = {"0.1": None, "0.2": None}  # a project that only ever ships sdists
    assert admitted_releases(list(pure), pure, ["3.11"]) == (["0.1", "0.2"], [])


def test_the_pins_read_which_python_each_release_has_a_wheel_for_from_the_index(tmp_path):
    """``run.pins.index_facts``: released versions and, per release, the Pythons its wheels serve."""
    from torch_matrix.run.pins import index_facts
    from tests.test_index import make_wheel

    wheels = tmp_path / "wheels"
    make_wheel(wheels, "torch", "1.13.1", tag="cp310-cp310-manylinux1_x86_64")
    make_wheel(wheels, "torch", "2.0.0", tag="cp311-cp311-manylinux1_x86_64")
    make_wheel(wheels, "torch", "2.1.0", tag="py3-none-any")
    spec = tmp_path / "matrix.toml"
    spec.write_text(
        f'python = ["3.11"]\ntorch = ["2.0.0"]\n[index]\nfind_links = ["{wheels}"]\n'
        f'default = "{(tmp_path / "empty").as_uri()}"\n'
    )
    (tmp_path / "empty").mkdir()
    released, pythons = index_facts(["torch"], str(spec))
    assert released == {"torch": ["1.13.1", "2.0.0", "2.1.0"]}
    assert pythons["torch"]["1.13.1"] == frozenset({"3.10"}) and "3.11" in pythons["torch"]["2.1.0"]
    assert pythons["torch"]["2.0.0"] == frozenset({"3.11"})


# ------------------------------------------------------------------------------- the torchvision axis

TORCH_OF = {
    "0.15.1": "2.0.0",
    "0.15.2": "2.0.1",
    "0.16.0": "2.1.0",
    "0.16.1": "2.1.1",
    "0.16.2": "2.1.2",
    "0.17.0": "2.2.0",
    "0.17.1": "2.2.1",
    "0.17.2": "2.2.2",
    "0.18.0": "2.3.0",
    "0.18.1": "2.3.1",
    "0.19.0": "2.4.0",
    "0.19.1": "2.4.1",
    "0.20.0": "2.5.0",
    "0.20.1": "2.5.1",
    "0.21.0": "2.6.0",
}
VISION = tuple(TORCH_OF)
PAIRING = {torch: vision for vision, torch in TORCH_OF.items()}
GONE = "ModuleNotFoundError: No module named 'torchvision.transforms.functional_tensor'"


def pair_cell(vision: str, torch: str | None = None) -> Cell:
    """A cell of a spec that lists torchvision explicitly (its id names the torchvision)."""
    torch = torch or TORCH_OF[vision]
    return make_cell(
        torch=torch,
        torchvision=vision,
        id=f"t{torch}-tv{vision}-py3.11",
        probes=("tests",),
        required_probes=("tests",),
    )


def vision_releases(cell: Cell, axis: str = "torch") -> Sequence[str]:
    return VISION if axis == "torchvision" else RELEASES


def run_pairs(judge, grid: Sequence[Cell]) -> list[CellResult]:
    results = [judge(cell) for cell in grid]
    for _ in range(100):
        planned = followups.plan_followups(
            results, vision_releases, pairing=PAIRING, torch_of=TORCH_OF, torchvision_axis=True
        )
        if not planned:
            return results
        results += [judge(cell) for cell in planned]
    raise AssertionError("the planner never stopped")


def transforms_judge(cell: Cell) -> CellResult:
    """torchvision 0.17 removed torchvision.transforms.functional_tensor (deprecated since 0.15)."""
    if cell.plan_note:
        return make_result(cell, status=UNSATISFIABLE, message=cell.plan_note)
    gone = Version(cell.torchvision) >= Version("0.17")
    return make_result(
        cell, probes=[make_probe("tests", FAIL if gone else PASS, message=GONE if gone else "")]
    )


def test_a_break_that_names_torchvision_is_bisected_over_torchvision_releases_with_their_torch():
    """The spec lists torchvision; the failing cell's error names a torchvision module: the edges move
    torchvision, each release with the torch it requires, never torch on its own; the pin is
    torchvision's window, `torchvision<0.17`, with its proof."""
    results = run_pairs(transforms_judge, [pair_cell("0.16.2"), pair_cell("0.18.1")])
    edges = [r.cell for r in results if r.cell.origin == ORIGIN_EDGE]
    assert {cell.torchvision for cell in edges} >= {
        "0.17.0",
        "0.21.0",
    }  # the first bad, and the newest
    assert all(cell.torch == TORCH_OF[cell.torchvision] for cell in edges)
    assert all(cell.id == f"t{cell.torch}-tv{cell.torchvision}-py3.11-edge" for cell in edges)
    assert all(
        cell.requirements == (f"torch=={cell.torch}", f"torchvision=={cell.torchvision}")
        for cell in edges
    )
    assert all("torchvision" in cell.reason for cell in edges)
    found = breaks.edges(results, vision_releases, torchvision_axis=True)
    assert found and all(edge.axis == "torchvision" and edge.spent <= edge.budget for edge in found)
    start = [c for c in edges if Version(c.torchvision) < Version("0.18.1")]
    assert len(start) <= bisection.max_cells(6)  # 0.16.2 .. 0.18.1
    suggestion = suggest_pins(results, {"torch": list(RELEASES), "torchvision": list(VISION)})
    lines = {line.package: line for line in requirement_lines(suggestion.recommended)}
    assert lines["torchvision"].text() == "torchvision<0.17" and "torch" not in lines, [
        line.text() for line in lines.values()
    ]
    window = lines["torchvision"].windows[0]
    assert (window.first_bad, window.last_bad, window.kind) == ("0.17.0", "0.21.0", "upper-bound")
    assert window.proof().startswith(
        "first bad 0.17.0, found by bisect between 0.16.2 (passes) "
        "[t2.1.2-tv0.16.2-py3.11] and 0.17.0 (fails) [t2.2.0-tv0.17.0-py3.11-edge]"
    )


def test_without_an_explicit_torchvision_the_same_break_moves_torch_with_its_pair():
    """`torchvision = "paired"` (no torchvision axis): the break is bisected on torch, torchvision follows."""
    results = [transforms_judge(pair_cell(v)) for v in ("0.16.2", "0.18.1")]
    for _ in range(100):
        planned = followups.plan_followups(
            results, vision_releases, pairing=PAIRING, torch_of=TORCH_OF
        )
        if not planned:
            break
        results += [transforms_judge(cell) for cell in planned]
    edges = [r.cell for r in results if r.cell.origin == ORIGIN_EDGE]
    assert edges and all(edge.axis == "torch" for edge in breaks.edges(results, vision_releases))
    assert all(cell.torchvision == PAIRING[cell.torch] for cell in edges)
    assert {cell.torch for cell in edges} >= {"2.2.0", "2.6.0"}


def test_a_torch_break_of_an_explicit_torchvision_spec_moves_torchvision_with_torch():
    """An explicit torchvision was held while torch moved: every edge cell was uninstallable (each
    torchvision release requires one torch). Now torch's edges take each release's torchvision, and
    the id says which."""

    def judge(cell: Cell) -> CellResult:
        bad = Version(cell.torch) >= Version("2.2")
        return make_result(
            cell,
            probes=[
                make_probe(
                    "tests",
                    FAIL if bad else PASS,
                    message="No module named 'torch._six'" if bad else "",
                )
            ],
        )

    results = run_pairs(judge, [pair_cell("0.16.2"), pair_cell("0.18.1")])
    edges = [r.cell for r in results if r.cell.origin == ORIGIN_EDGE]
    assert edges and all(
        edge.axis == "torch"
        for edge in breaks.edges(results, vision_releases, torchvision_axis=True)
    )
    assert all(cell.torchvision == PAIRING[cell.torch] and not cell.plan_note for cell in edges)
    assert "t2.2.0-tv0.17.0-py3.11-edge" in {cell.id for cell in edges}


def test_a_break_between_two_torchvision_releases_of_one_torch_is_torchvisions():
    """torch 2.0.0 passes with torchvision 0.15.1 and fails with another build of its pair: torch
    cannot be blamed, whatever the message says."""

    def judge(cell: Cell) -> CellResult:
        bad = cell.torchvision == "0.15.9"
        return make_result(
            cell,
            probes=[make_probe("tests", FAIL if bad else PASS, message="it broke" if bad else "")],
        )

    grid = [pair_cell("0.15.1"), pair_cell("0.15.9", torch="2.0.0")]
    results = [judge(cell) for cell in grid]
    good = [{"cell": grid[0], "result": results[0]}]
    assert breaks.on_torchvision([{"cell": grid[1], "result": results[1]}], good)

    def releases(cell, axis="torch"):
        return (*VISION[:1], "0.15.9") if axis == "torchvision" else RELEASES

    found = breaks.edges(results, releases, torchvision_axis=True)
    assert found and {edge.axis for edge in found} == {"torchvision"}
    assert not breaks.edges(results, releases)  # without the axis: torch 2.0.0 passes, no break


def test_a_torchvision_release_without_a_single_torch_is_planned_unsatisfiable():
    cell = edgecells.vision_edge_cell(pair_cell("0.16.2"), "0.30.0", torch_of={}, reason="start")
    assert cell.plan_note == "torchvision 0.30.0 requires no single torch release on the index"
    narrow = edgecells.vision_edge_cell(
        pair_cell("0.16.2"), "0.17.0", torch_of=TORCH_OF, pythons=frozenset({"3.12"})
    )
    assert "no torchvision 0.17.0 wheel for Python 3.11" in narrow.plan_note


# ------------------------------------------------------------------------------- interactions

SETUPTOOLS = ("80.9.0", "81.0.0", "82.0.0", "82.0.1", "83.0.0", "84.2.1")
PKG_RESOURCES = "cpp_extension: the build helper broke with this setuptools"


def st_cell(torch: str, spec: str, python: str = "3.11") -> Cell:
    return make_cell(
        torch=torch,
        torchvision="",
        python=python,
        extras={"setuptools": spec},
        probes=("p",),
        required_probes=("p",),
    )


def run_configurations(
    truth,
    grid: Sequence[tuple[str, str]],
    releases=RELEASES,
    st_releases=SETUPTOOLS,
    cap: int = 10_000,
) -> list[CellResult]:
    """``truth(torch, setuptools) -> PASS | FAIL | UNSAT``; the grid's setuptools are `<82` (81.0.0)
    and `>=82` (the newest); follow-ups until the planner asks for none."""

    def installed(cell: Cell) -> str:
        value = cell.axes["setuptools"]
        if value.startswith("=="):
            return value[2:]
        return st_releases[-1] if value.startswith(">=") else "81.0.0"

    def judge(cell: Cell) -> CellResult:
        outcome = truth(cell.torch, installed(cell))
        if outcome == UNSAT:
            return make_result(cell, status=UNSATISFIABLE, message="no wheel")
        return make_result(
            cell,
            probes=[make_probe("p", outcome, message="" if outcome == PASS else PKG_RESOURCES)],
            resolved={"torch": cell.torch, "setuptools": installed(cell)},
        )

    def releases_for(cell: Cell, axis: str = "torch") -> Sequence[str]:
        return st_releases if axis == "setuptools" else releases

    results = [judge(st_cell(torch, spec)) for torch, spec in grid]
    spent = 0
    for _ in range(1000):
        planned = followups.plan_followups(results, releases_for)
        now, _dropped = followups.within_cap(planned, spent, cap)
        if not now:
            return results
        results += [judge(cell) for cell in now]
        spent += len(now)
    raise AssertionError("the planner never stopped")


def test_an_interactions_bad_edge_releases_are_tested_in_the_passing_configuration_too():
    """torch 1.13's cpp_extension imports pkg_resources, which setuptools 82 dropped: 1.13.1 fails only
    with setuptools>=82. The edge cell torch 1.13.0 (the oldest release) fails with setuptools>=82, and
    is tested with setuptools==81.0.0 too, where it passes: no pin may exclude torch 1.13.0 for everyone."""

    def truth(torch: str, setuptools: str) -> str:
        return (
            FAIL if Version(torch) < Version("2") and Version(setuptools) >= Version("82") else PASS
        )

    grid = [(t, s) for t in ("1.13.1", "2.4.1") for s in ("<82", ">=82")]
    results = run_configurations(truth, grid)
    edges = [r for r in results if r.cell.origin == ORIGIN_EDGE]
    others = [r for r in edges if breaks.OTHER_CONFIGURATION in r.cell.tags]
    bad_edges = [r for r in edges if r not in others and r.probes[0].status == FAIL]
    assert bad_edges and others
    # Every bad edge release has its twin in the other configuration, equal on every other axis.
    twins = {(r.cell.torch, r.install.resolved["setuptools"]): r for r in others}
    for bad in bad_edges:
        if (
            "setuptools" in bad.cell.reason.split(":")[0]
        ):  # a setuptools edge: its other configuration is torch 2.4.1
            twin = next(
                r
                for r in others
                if r.install.resolved["setuptools"] == bad.install.resolved["setuptools"]
            )
            assert twin.cell.torch == "2.4.1"
        else:
            twin = twins[
                (bad.cell.torch, "81.0.0")
            ]  # the passing grid cell's setuptools, as it has it
            assert (
                twin.cell.axes["setuptools"] == "<82" and "setuptools<82" in twin.cell.requirements
            )
        assert twin.probes[0].status == PASS and "other configuration" in twin.cell.reason
    assert ("1.13.0", "81.0.0") in twins
    # The bisection itself stays within its budget; its other-configuration cells never count there.
    found = breaks.edges(
        results, lambda cell, axis="torch": SETUPTOOLS if axis == "setuptools" else RELEASES
    )
    for edge in found:
        assert edge.spent <= edge.budget
    # torch 1.13.0 was seen working (with setuptools 81.0.0): no safe pin excludes it; the pinned
    # answer may trade it away only on a trade-off line that names the working pair (pins.search).
    suggestion = suggest_pins(results, {"torch": list(RELEASES), "setuptools": list(SETUPTOOLS)})
    for line in requirement_lines(suggestion.safe):
        if line.package == "torch":
            assert specifier_set([line.text()[len("torch") :]]).contains("1.13.0"), line.text()
    for line in requirement_lines(suggestion.recommended):
        if line.package == "torch" and not specifier_set([line.text()[len("torch") :]]).contains(
            "1.13.0"
        ):
            assert any(
                pair.startswith("torch 1.13.0 x setuptools 81.0.0 ") for pair in line.gives_up
            ), line


def test_a_finding_that_is_no_interaction_plans_no_other_configuration():
    def truth(torch: str, setuptools: str) -> str:
        return FAIL if Version(torch) < Version("2") else PASS

    results = run_configurations(
        truth, [(t, s) for t in ("1.13.1", "2.4.1") for s in ("<82", ">=82")]
    )
    assert not [r for r in results if breaks.OTHER_CONFIGURATION in r.cell.tags]
    assert [r for r in results if r.cell.origin == ORIGIN_EDGE]


configurations = st.integers(min_value=2, max_value=len(RELEASES)).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([PASS, PASS, FAIL, FAIL, UNSAT]), min_size=n, max_size=n),
        st.lists(st.sampled_from([PASS, PASS, PASS, FAIL]), min_size=n, max_size=n),
        st.lists(st.integers(min_value=0, max_value=n - 1), min_size=1, max_size=4, unique=True),
    )
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations)
def test_interactions_test_each_bad_edge_release_in_both_configurations_within_budget(pattern):
    """Random break patterns in two configurations (setuptools>=82 and <82; a release may fail in
    both): each edge spends at most ceil(log2 N) + 2 cells in its own configuration, and at most as
    many again in the other, one per release it found bad; every bad edge release of an interaction
    is tested in the passing configuration; no pin excludes a release seen passing."""
    with_82, without, picked = pattern
    releases = RELEASES[: len(with_82)]
    truth_82, truth_81 = dict(zip(releases, with_82)), dict(zip(releases, without))

    def truth(torch: str, setuptools: str) -> str:
        if truth_82[torch] == UNSAT:
            return UNSAT
        return truth_82[torch] if Version(setuptools) >= Version("82") else truth_81[torch]

    grid = [(releases[i], spec) for i in sorted(picked) for spec in ("<82", ">=82")]
    results = run_configurations(truth, grid, releases, st_releases=("81.0.0", "84.2.1"))
    found = breaks.edges(
        results,
        lambda cell, axis="torch": ("81.0.0", "84.2.1") if axis == "setuptools" else releases,
    )
    others = [r for r in results if breaks.OTHER_CONFIGURATION in r.cell.tags]
    for edge in found:
        assert edge.spent <= edge.budget == bisection.max_cells(len(edge.span))
        if edge.axis != "torch":
            continue
        mine = [
            r
            for r in others
            if r.cell.torch in edge.span
            and r.cell.axes["setuptools"] != dict(edge.context).get("setuptools")
        ]
        assert len(mine) <= edge.budget
    assert not breaks.other_configuration(results, found)  # every one was planned and ran
    passing = {r.cell.torch for r in results if r.installed and r.probes[0].status == PASS}
    suggestion = suggest_pins(results, {"torch": list(releases)})
    for line in requirement_lines(suggestion.safe):
        if line.package == "torch" and not line.marker:
            specifiers = specifier_set([line.text()[len("torch") :]])
            for version in passing:
                assert specifiers.contains(version), (line.text(), version)
    for line in requirement_lines(suggestion.recommended):  # a trade-off names what it gives up
        if line.package == "torch" and not line.marker:
            specifiers = specifier_set([line.text()[len("torch") :]])
            for version in passing - {v for v in passing if specifiers.contains(v)}:
                assert any(pair.startswith(f"torch {version} x ") for pair in line.gives_up), (
                    line,
                    version,
                )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(break_patterns(len(VISION)))
def test_torchvision_windows_never_cover_a_passing_release_and_edges_stay_within_budget(pattern):
    """The torchvision axis under random break patterns (failures naming a torchvision module):
    every edge cell moves torchvision with the torch it requires, each edge spends at most
    ceil(log2 N) + 2 cells, and no pin excludes a torchvision or torch release seen passing."""
    outcomes, picked = pattern
    releases = VISION[: len(outcomes)]
    truth = dict(zip(releases, outcomes))

    def judge(cell: Cell) -> CellResult:
        outcome = truth.get(cell.torchvision, UNSAT)
        if outcome == UNSAT or cell.plan_note:
            return make_result(cell, status=UNSATISFIABLE, message="no wheel")
        return make_result(
            cell, probes=[make_probe("tests", outcome, message=GONE if outcome == FAIL else "")]
        )

    def releases_for(cell: Cell, axis: str = "torch") -> Sequence[str]:
        return releases if axis == "torchvision" else tuple(TORCH_OF[v] for v in releases)

    results = [judge(pair_cell(releases[i])) for i in sorted(picked)]
    for _ in range(200):
        planned = followups.plan_followups(
            results, releases_for, pairing=PAIRING, torch_of=TORCH_OF, torchvision_axis=True
        )
        if not planned:
            break
        results += [judge(cell) for cell in planned]
    else:
        raise AssertionError("the planner never stopped")
    for edge in breaks.edges(results, releases_for, torchvision_axis=True):
        assert edge.axis == "torchvision" and edge.spent <= edge.budget == bisection.max_cells(
            len(edge.span)
        )
    assert all(
        r.cell.torch == TORCH_OF[r.cell.torchvision]
        for r in results
        if r.cell.origin == ORIGIN_EDGE
    )
    passing = [r.cell for r in results if r.installed and r.probes[0].status == PASS]
    suggestion = suggest_pins(
        results, {"torch": [TORCH_OF[v] for v in releases], "torchvision": list(releases)}
    )
    for line in requirement_lines(suggestion.recommended):
        specifiers = specifier_set([line.text()[len(line.package) :]])
        for cell in passing:
            assert specifiers.contains(cell.axes[line.package]), (line.text(), cell.id)


def test_a_traceback_through_torchvision_does_not_make_a_break_torchvisions():
    """Only a module the error quotes (or a torchvision_* probe) names torchvision; a frame inside
    torchvision may be torch's doing (torch changed, torchvision's code calling it broke): that
    break stays torch's, on the planner's side and the pins' alike."""
    frame = (
        'Traceback (most recent call last):\n  File "/v/lib/python3.11/site-packages/torchvision/ops/boxes.py", '
        "line 41, in nms\nRuntimeError: the op broke"
    )

    def judge(cell: Cell) -> CellResult:
        bad = Version(cell.torch) >= Version("2.2")
        return make_result(
            cell,
            probes=[
                make_probe(
                    "tests",
                    FAIL if bad else PASS,
                    message="the op broke" if bad else "",
                    output_tail=frame if bad else "",
                )
            ],
        )

    results = run_pairs(judge, [pair_cell("0.16.2"), pair_cell("0.18.1")])
    assert not breaks.names_torchvision(results[1])
    assert {
        edge.axis for edge in breaks.edges(results, vision_releases, torchvision_axis=True)
    } == {"torch"}
    lines = [
        line.text()
        for line in requirement_lines(suggest_pins(results, {"torch": list(RELEASES)}).recommended)
    ]
    assert lines and lines[0].startswith("torch<"), lines


# ------------------------------------------------------------------------- holes and replacements


def test_a_counterfactual_on_an_axis_the_cell_pins_replaces_that_axis_value():
    """The cell pins setuptools>=82 (its axis) and misses pkg_resources: the counterfactual installs
    setuptools<82 instead of it, never both (unsatisfiable by construction); the follow-up planner
    reads it back as the cell it follows up, its axis requirement put back."""
    from torch_matrix.plan.counterfactual import plan_counterfactuals, replaced_by, with_requirement

    cell = make_cell(
        torch="2.1.2",
        torchvision="",
        extras={"setuptools": ">=82"},
        probes=("p",),
        required_probes=("p",),
    )
    failing = make_result(
        cell,
        probes=[
            make_probe("p", FAIL, message="ModuleNotFoundError: No module named 'pkg_resources'")
        ],
        resolved={"torch": "2.1.2", "setuptools": "84.2.1"},
    )
    (counterfactual,) = plan_counterfactuals(failing)
    assert counterfactual.requirements == ("torch==2.1.2", "setuptools<82")
    assert counterfactual.axes["setuptools"] == ">=82"  # it counts where the cell it follows does
    assert replaced_by(counterfactual) == "setuptools>=82"
    # A requirement on another distribution stays; an exclusion of one build narrows, and stays.
    assert with_requirement(("torch==2.1.2", "numpy<2"), "setuptools") == (
        "torch==2.1.2",
        "numpy<2",
        "setuptools",
    )
    assert with_requirement(("torch==2.13.0", "torchvision==0.28.0"), "torch!=2.13.0+cpu") == (
        "torch==2.13.0",
        "torchvision==0.28.0",
        "torch!=2.13.0+cpu",
    )
    assert with_requirement(("torch==2.1.2", "Setuptools>=82"), "setuptools<82") == (
        "torch==2.1.2",
        "setuptools<82",
    )
    passing = make_result(
        counterfactual,
        probes=[make_probe("p", PASS)],
        resolved={"torch": "2.1.2", "setuptools": "81.0.0"},
    )
    entry = breaks.outcomes_by_context([failing, passing], "torch")
    (context,) = entry
    (seen,) = entry[context].values()
    assert seen["cell"].requirements == ("torch==2.1.2", "setuptools>=82")  # type: ignore[attr-defined]
    assert seen["kind"] == bisection.GOOD


def test_an_edge_in_a_context_that_pins_the_axis_installs_the_confirmed_fix_in_its_place():
    base = make_cell(torch="2.1.0", torchvision="", extras={"setuptools": ">=82"}, id="x-edge")
    fixed = edgecells.with_fixes(base, [("setuptools<82", "cf")])
    assert fixed.requirements == ("torch==2.1.0", "setuptools<82")


def test_a_start_edge_steps_over_releases_that_cannot_be_installed_to_the_next_one():
    """The project's requirements exclude 1.13.x (every cell of it is unsatisfiable), so the start
    edge of a break at 2.1.2 used to stop at 1.13.0 and never try 2.0.0..2.1.1. Now it steps over the
    holes to the oldest installable release, tests there and bisects; the reason names what it
    stepped over; the window's proof names the holes, and the pin is a floor over the admitted ones."""
    truth = truth_of(set(RELEASES[2:9]), unsat={"1.13.0", "1.13.1"})  # 2.0.0 .. 2.2.1 fail
    results = run(truth, ["2.1.2", "2.4.1"])
    tested = sorted({r.cell.torch for r in results if r.installed}, key=Version)
    assert "2.0.0" in tested and "2.2.2" in tested, tested
    stepped = [r.cell.reason for r in results if "stepped over" in r.cell.reason]
    assert stepped and "1.13.0 (" in stepped[0] and "stepped over the older" in stepped[0]
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    (line,) = [
        line for line in requirement_lines(suggestion.recommended) if line.package == "torch"
    ]
    assert line.text() == "torch>=2.2.2", line.text()
    (window,) = line.windows
    assert "oldest 2.0.0 fails" in window.proof()
    # oldest first, as every list of the proof (before: in the order the edge walked, newest first)
    assert "(stepped over 1.13.0 (unsatisfiable: no torch 1.13.0 wheel), 1.13.1 (" in window.proof()


def test_an_end_edge_steps_over_a_newest_release_whose_install_errored():
    """A break that lasts: the newest release's install errored. The end edge tries the nearer
    releases instead of stopping there, and the window is an upper bound whose proof names the
    release it stepped over."""
    releases = RELEASES[:12]  # .. 2.3.1

    def judge(cell: Cell) -> CellResult:
        if cell.torch == "2.3.1":
            return make_result(cell, status="error", message="uv: checksum mismatch")
        return judged(cell, PASS if Version(cell.torch) < Version("2.1.0") else FAIL)

    results = [judge(grid_cell(v)) for v in ("2.0.1", "2.1.2")]
    for _ in range(50):
        planned = followups.plan_followups(results, lambda cell, axis="torch": releases)
        if not planned:
            break
        results += [judge(cell) for cell in planned]
    tested = {r.cell.torch for r in results if r.installed}
    assert "2.3.0" in tested, sorted(tested, key=Version)
    suggestion = suggest_pins(results, {"torch": list(releases)})
    (line,) = [
        line for line in requirement_lines(suggestion.recommended) if line.package == "torch"
    ]
    assert line.text() == "torch<2.1", line.text()
    assert (
        "newest 2.3.0 fails [t2.3.0-py3.11-edge] (stepped over 2.3.1 (error: uv: checksum mismatch)"
        in (line.windows[0].proof())
    )


def test_an_unproven_start_edge_says_before_and_claims_no_cap():
    from torch_matrix.pins.windows import START, EdgeProof

    text = EdgeProof(START, "1.12.0", "c", missing=("1.11.0", "1.10.2")).sentence()
    assert "1.11.0, 1.10.2 before 1.12.0 not tested" in text and "cap reached" not in text


def test_edge_cells_ask_only_the_probes_that_fail_in_their_break():
    """The grid runs three probes; the break fails only q. Each edge cell runs install_sanity and
    q (its question), is judged on them alone, and the edges and pins come out as with the whole
    suite; no edge result holds p, so nothing claims p passes at an edge release."""
    suite = ("install_sanity", "p", "q")

    def cell_of(version: str) -> Cell:
        return make_cell(
            torch=version, python="3.11", torchvision="", probes=suite, required_probes=suite
        )

    def judge(cell: Cell, bad: bool) -> CellResult:
        names = cell.probe_subset or suite
        return make_result(
            cell,
            probes=[
                make_probe(
                    n, FAIL if (bad and n == "q") else PASS, message="q broke" if bad else ""
                )
                for n in names
            ],
        )

    bad = {"2.1.0", "2.1.1", "2.1.2", "2.2.0"}
    results = [judge(cell_of(v), v in bad) for v in ("1.13.1", "2.2.0", "2.6.0")]
    asked: list[tuple[str, ...]] = []
    for _ in range(50):
        planned = followups.plan_followups(results, lambda cell, axis="torch": RELEASES)
        if not planned:
            break
        for cell in planned:
            asked.append(cell.probe_subset)
            results.append(judge(cell, cell.torch in bad))
    assert asked and set(asked) == {("install_sanity", "q")}
    edges = [r for r in results if r.cell.origin == ORIGIN_EDGE]
    assert all(r.probe("p") is None for r in edges)
    assert all(verdict_of(r).kind in ("compatible", "incompatible") for r in edges)
    assert torch_line(results) == "torch!=2.1.*,!=2.2.0"
