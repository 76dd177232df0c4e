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

from matrix.pins import requirement_lines, suggest_pins
from matrix.pins.specifiers import PinPolicy, specifier_set
from matrix.plan import bisection, followups
from matrix.vocab.records import ORIGIN_EDGE, ORIGIN_MATRIX, UNSATISFIABLE, Cell, CellResult
from packaging.version import Version
from tests.factories import make_cell, make_probe, make_result

RELEASES = ("1.13.0", "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.1", "2.2.2",
            "2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0")
PASS, FAIL, UNSAT = "pass", "fail", "unsat"


def grid_cell(version: str, python: str = "3.11") -> Cell:
    return make_cell(torch=version, python=python, torchvision="", probes=("p",), required_probes=("p",))


def judged(cell: Cell, outcome: str) -> CellResult:
    if outcome == UNSAT:
        return make_result(cell, status=UNSATISFIABLE, message=f"no torch {cell.torch} wheel")
    return make_result(cell, probes=[make_probe("p", outcome, message="" if outcome == PASS else "it broke")])


def run(truth: Mapping[str, str], grid: Sequence[str], releases: Sequence[str] = RELEASES,
        cap: int = 10_000) -> list[CellResult]:
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


def torch_line(results: Sequence[CellResult], releases: Sequence[str] = RELEASES,
               policy: PinPolicy = PinPolicy.PROVEN) -> str:
    suggestion = suggest_pins(results, {"torch": list(releases)}, policy)
    lines = [line.text() for line in requirement_lines(suggestion.recommended) if line.package == "torch"]
    return lines[0] if lines else "torch"


def edge_cells(results: Sequence[CellResult]) -> list[str]:
    return [r.cell.torch for r in results if r.cell.origin == ORIGIN_EDGE]


def truth_of(bad: set[str], releases: Sequence[str] = RELEASES, unsat: set[str] = frozenset()) -> dict[str, str]:
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
    assert proof.startswith("first bad 2.0.0, found by bisect between 1.13.1 (passes) [t1.13.1-py3.11] "
                            "and 2.0.0 (fails) [t2.0.0-py3.11-edge]; newest 2.6.0 fails [t2.6.0-py3.11-edge]; ")
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
    window = requirement_lines(suggest_pins(grid_only, {"torch": list(RELEASES)}).recommended)[0].windows[0]
    assert window.kind == "not-proven" and "first bad not found: 2.0.0 between 1.13.1 (passes) and 2.0.1" \
        in window.proof()


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
    cell = followups.edge_cell(base, "2.0.0", reason="start")
    assert (cell.probes, cell.required_probes, cell.install, cell.axes["python"]) == \
        (base.probes, base.required_probes, base.install, "3.11")
    assert cell.requirements == ("torch==2.0.0",) and cell.origin == ORIGIN_EDGE
    assert Cell.from_json(cell.to_json()) == cell
    paired = followups.edge_cell(make_cell(torch="2.3.1", torchvision="0.18.1"), "2.0.0",
                                 pairing={"2.0.0": "0.15.1"}, pythons=frozenset({"3.8", "3.11"}))
    assert paired.requirements == ("torch==2.0.0", "torchvision==0.15.1") and not paired.plan_note
    unpaired = followups.edge_cell(make_cell(torch="2.3.1", python="3.12"), "2.0.0", pairing={},
                                   pythons=frozenset({"3.11"}))
    assert "no torchvision release requires torch==2.0.0" in unpaired.plan_note
    results = [judged(grid_cell("1.13.1"), PASS), judged(grid_cell("2.3.1"), FAIL)]
    first = followups.plan_followups(results, lambda c, axis="torch": RELEASES)
    assert first and followups.plan_followups(results + [judged(c, FAIL) for c in first],
                                              lambda c, axis="torch": RELEASES) != first


def test_cap_from_reads_the_follow_up_cap():
    assert followups.cap_from({}) == followups.DEFAULT_CAP
    assert followups.cap_from({"TORCH_MATRIX_FOLLOWUPS": "0"}) == 0
    assert followups.cap_from({"TORCH_MATRIX_COUNTERFACTUALS": "3"}) == 3  # the older name still works
    assert followups.cap_from({"TORCH_MATRIX_FOLLOWUPS": "x"}) == followups.DEFAULT_CAP
    assert followups.within_cap(["a", "b"], 7, 8) == (["a"], 1)


# ------------------------------------------------------------------------------- property

patterns = st.integers(min_value=2, max_value=len(RELEASES)).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([PASS, PASS, FAIL, FAIL, UNSAT]), min_size=n, max_size=n),
    st.lists(st.integers(min_value=0, max_value=n - 1), min_size=1, max_size=4, unique=True)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns)
def test_windows_never_cover_a_passing_cell_and_edges_stay_within_budget(pattern):
    """Random break patterns (one window, several, an isolated pass or fail such as a flaky
    release, uninstallable holes): no pin excludes a release seen passing, and each edge spends
    at most ceil(log2 N) + 2 follow-up cells over its N releases."""
    outcomes, picked = pattern
    releases = RELEASES[:len(outcomes)]
    truth = dict(zip(releases, outcomes))
    results = run(truth, [releases[i] for i in sorted(picked)], releases)
    for edge in followups.edges(results, lambda cell, axis="torch": releases):
        assert edge.spent <= edge.budget == bisection.max_cells(len(edge.span))
    line = torch_line(results, releases)
    specifiers = specifier_set([line[len("torch"):]] if line != "torch" else [])
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
        one_window = all(truth[v] == FAIL for v in releases[first:last + 1])
        if one_window and releases[0] in tested and releases[-1] in tested and tested & set(bad):
            expected = set(releases[first:last + 1])
            assert {v for v in releases if not specifiers.contains(v)} == expected, line


@pytest.mark.parametrize("grid", [["1.13.1", "2.6.0"], ["2.3.1"]])
def test_every_tested_release_fails_pins_only_the_tested_ones(grid):
    """Nothing passes at all: no window can be proven, the tested bad releases are excluded."""
    truth = truth_of(set(RELEASES))
    results = run(truth, grid)
    line = torch_line(results)
    assert not any(spec.startswith(("<", ">")) for spec in line[len("torch"):].split(",")), line


def test_the_table_and_the_html_show_follow_up_cells_apart_and_the_html_carries_the_proof():
    from matrix.pins.render import proof_lines
    from matrix.report.html_page import build_page, render_html
    from matrix.report.terminal import render_text

    results = run(truth_of({"2.0.0", "2.0.1"}), ["1.13.1", "2.0.1", "2.4.1"])
    text = render_text(results)
    grid, rest = text.split("Follow-up cells (")
    assert "-edge" not in grid and "t2.0.1-py3.11 " in grid
    assert "t2.0.0-py3.11-edge" in rest and "start of the break at torch 2.0.1: bisect 1.13.1 .. 2.0.1" in rest
    suggestion = suggest_pins(results, {"torch": list(RELEASES)})
    pins = [(line.text(), proof_lines(line)) for line in requirement_lines(suggestion.recommended)]
    page = build_page(results, pins=pins)
    in_grid = {view.id for row in page.rows for slot in row.slots for view in slot}
    assert in_grid == {"t1.13.1-py3.11", "t2.0.1-py3.11", "t2.4.1-py3.11"}
    assert {view.id for view in page.followups} == {r.cell.id for r in results if r.cell.origin == ORIGIN_EDGE}
    html = render_html(results, pins=pins)
    assert "<code>torch!=2.0.*</code>" in html and "found by bisect between 1.13.1 (passes)" in html
    assert 'id="followups"' in html


def test_a_follow_up_cell_is_rerun_through_the_follow_up_session():
    from matrix.report.terminal import cell_repro

    cell = followups.edge_cell(grid_cell("2.3.1"), "2.0.0", reason="start")
    assert cell_repro(cell, "m.toml") == \
        "rm cells/t2.0.0-py3.11-edge.json && torch-matrix run --spec m.toml -s followups"
    assert cell_repro(grid_cell("2.3.1"), "m.toml") == "torch-matrix run --spec m.toml -s 'matrix(t2.3.1-py3.11)' -- --redo"


def test_an_edge_cell_the_environment_explains_gets_its_counterfactual_which_settles_the_edge():
    """Real wheels: torch 2.1's torch.compile imports pkg_resources, which a uv venv lacks. The edge
    cell is `environment` (no evidence); its counterfactual (with setuptools) passes, so the release
    works and the end of the break is proven next to it."""
    truth = truth_of({"2.0.0", "2.0.1"})
    env_failure = {"2.1.0", "2.1.1", "2.1.2"}

    def judge(cell: Cell) -> CellResult:
        if cell.torch in env_failure and cell.origin == ORIGIN_EDGE:
            return make_result(cell, probes=[make_probe("p", FAIL, message="ModuleNotFoundError: No module named "
                                                                          "'pkg_resources'")])
        return judged(cell, truth[cell.torch])

    results = [judge(grid_cell(v)) for v in ("1.13.1", "2.0.1", "2.4.1")]
    for _ in range(50):
        planned = followups.plan_followups(results, lambda cell, axis="torch": RELEASES)
        if not planned:
            break
        results += [judge(cell) for cell in planned]
    counterfactuals = [r.cell for r in results if r.cell.origin == "counterfactual"]
    assert counterfactuals and all(c.requirements[-1] == "setuptools<82" for c in counterfactuals)
    assert torch_line(results) == "torch!=2.0.*"
    window = requirement_lines(suggest_pins(results, {"torch": list(RELEASES)}).recommended)[0].windows[0]
    assert window.end.good == "2.1.0" and window.end.good_cell == "t2.1.0-py3.11-edge-cf-with-setuptools_82"
    assert window.end.found_by == "bisect"


def test_the_index_view_pairs_torchvision_only_when_the_spec_pairs_it():
    from types import SimpleNamespace

    from matrix.run.followups import IndexView

    assert IndexView(SimpleNamespace(torchvision="paired"), {}).paired
    explicit = IndexView(SimpleNamespace(torchvision=("0.19.1",)), {})
    assert not explicit.paired
    explicit.read_pairing(["2.0.0"])  # reads nothing: an explicit torchvision is held as it is
    assert explicit.pairing == {}
    held = followups.edge_cell(make_cell(torch="2.4.1", torchvision="0.19.1"), "2.3.1", pairing=None)
    assert held.axes["torchvision"] == "0.19.1" and not held.plan_note


NUMPY = ("1.24.4", "1.25.2", "1.26.0", "1.26.4", "2.0.0", "2.0.1", "2.0.2", "2.1.0", "2.1.3", "2.2.6", "2.3.5")


def test_an_extras_axis_is_bisected_over_its_releases_with_torch_held():
    """torch built against numpy 1 fails with numpy 2 (the grid: numpy<2 -> 1.26.4 passes, numpy>=2 ->
    2.1.3 fails): the numpy edges are bisected over numpy's releases, torch 2.2.2 held; the torch
    axis, which the grid did not vary, is never moved."""
    def numpy_cell(spec: str, installed: str, cell: Cell | None = None) -> CellResult:
        cell = cell or make_cell(torch="2.2.2", torchvision="", extras={"numpy": spec}, probes=("p",),
                                 required_probes=("p",))
        outcome = PASS if Version(installed) < Version("2") else FAIL
        return make_result(cell, probes=[make_probe("p", outcome, message="" if outcome == PASS else "numpy 2")],
                           resolved={"torch": "2.2.2", "numpy": installed})

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
    tested = sorted((r.install.resolved["numpy"] for r in results if r.cell.origin == ORIGIN_EDGE), key=Version)
    assert tested[0] == "2.0.0" and tested[-1] == "2.3.5"  # the first bad, and the newest
    assert all(edge.axis == "numpy" for edge in followups.edges(results, releases))
    suggestion = suggest_pins(results, {"numpy": list(NUMPY), "torch": list(RELEASES)})
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    assert lines == ["numpy<2"], lines


def test_each_follow_up_cell_is_told_the_planned_cells_after_it_for_the_prefetch():
    """run_followups says, before each cell, which planned cells follow it in its batch: what the
    prefetch fetches into uv's cache while that cell runs its probes."""
    from matrix.run.followups import run_followups

    class View:  # what run_followups reads of the index (matrix.run.followups.IndexView)
        paired, pairing = False, None

        def read_pairing(self, versions) -> None:
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

    run_followups(lambda: list(results), View(), run_one, cap=50, log=lambda line: None, upcoming=upcoming)
    assert told and len(told) == len(results) - 3
    ran = [cell_id for cell_id, _ in told]
    for index, (cell_id, after) in enumerate(told):  # what follows it in its batch, in order
        assert after == tuple(ran[index + 1:index + 1 + len(after)]) and cell_id not in after
    assert any(after for _, after in told)  # a batch of several cells: the prefetch had work


def test_a_window_from_the_oldest_release_with_a_wheel_for_the_tested_python_is_a_floor():
    """Releases too old to have a wheel for the tested Python are not admitted: the floor is proven
    when the oldest release that could be installed fails, and the proof says what it left out."""
    truth = truth_of({v for v in RELEASES if Version(v) < Version("2.4.0")})
    installable = RELEASES[2:]  # 2.0.0 is the first release with a cp311 wheel
    results = run(truth, ["2.2.2", "2.5.1"], installable)
    wheels = {"torch": {v: frozenset({"3.8", "3.10"}) if v in RELEASES[:2] else frozenset({"3.8", "3.11"})
                        for v in RELEASES}}
    proven = suggest_pins(results, {"torch": list(RELEASES)}, wheel_pythons=wheels)
    line = requirement_lines(proven.recommended)[0]
    assert line.text() == "torch>=2.4"
    window = line.windows[0]
    assert (window.kind, window.first_bad, window.start.index_end) == ("floor", "2.0.0", "oldest")
    assert "oldest 2.0.0 fails [t2.0.0-py3.11-edge] (the 2 older releases have no wheel for Python 3.11: " \
           "not admitted)" in window.proof()
    assert "1.13.1" not in proven.coverage["torch"].older  # not a gap: it cannot be installed there
    # Without the wheel facts, 1.13.0 and 1.13.1 are untested releases next to the break: no floor.
    unknown = suggest_pins(results, {"torch": list(RELEASES)})
    assert requirement_lines(unknown.recommended)[0].windows[0].kind == "not-proven"
    # A release whose wheels do not say (None) stays admitted: still no floor.
    wheels["torch"]["1.13.1"] = None
    assert requirement_lines(suggest_pins(results, {"torch": list(RELEASES)}, wheel_pythons=wheels)
                             .recommended)[0].windows[0].kind == "not-proven"


def test_the_pins_read_which_python_each_release_has_a_wheel_for_from_the_index(tmp_path):
    """``cli.pins.index_facts``: released versions and, per release, the Pythons its wheels serve."""
    from matrix.cli.pins import index_facts
    from tests.test_index import make_wheel

    wheels = tmp_path / "wheels"
    make_wheel(wheels, "torch", "1.13.1", tag="cp310-cp310-manylinux1_x86_64")
    make_wheel(wheels, "torch", "2.0.0", tag="cp311-cp311-manylinux1_x86_64")
    make_wheel(wheels, "torch", "2.1.0", tag="py3-none-any")
    spec = tmp_path / "matrix.toml"
    spec.write_text(f'python = ["3.11"]\ntorch = ["2.0.0"]\n[index]\nfind_links = ["{wheels}"]\n'
                    f'default = "{(tmp_path / "empty").as_uri()}"\n')
    (tmp_path / "empty").mkdir()
    released, pythons = index_facts(["torch"], str(spec))
    assert released == {"torch": ["1.13.1", "2.0.0", "2.1.0"]}
    assert pythons["torch"]["1.13.1"] == frozenset({"3.10"}) and "3.11" in pythons["torch"]["2.1.0"]
    assert pythons["torch"]["2.0.0"] == frozenset({"3.11"})
