"""A dependency release that breaks an older torch: setuptools 82 dropped ``pkg_resources``, which
torch <= 2.1's ``torch.utils.cpp_extension`` imports. The real run (issue #33; a downstream package
whose test calls ``cpp_extension.include_paths()``, torch 2.0.0/2.1.0/2.2.0 x setuptools <82/>=82,
py3.11, PyPI wheels) is replayed here: the grid as it ran, its failing cells carrying the real
probe (tests/fixtures/real-messages/torch2.1-setuptools84-pkg_resources.json), the follow-ups the
planner asks for judged by the same truth (setuptools >= 82 fails with torch < 2.2), and the pins
applied to every release pair, not only the tested ones.

The real run found two faults: its setuptools edge cell at 83.0.0 installed the confirmed fix
``setuptools<82`` on the axis it moves (so it tested 81.0.0), and the pin was ``setuptools<84``,
which admits 82.x and 83.0.0 (all without ``pkg_resources``) next to torch 2.0/2.1."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from torch_matrix.judge.runcontext import in_run_context
from torch_matrix.pins import requirement_lines, suggest_pins
from torch_matrix.plan import followups
from torch_matrix.plan.counterfactual import plan_counterfactuals
from torch_matrix.plan.counterfactual import requirement_name
from torch_matrix.vocab.records import ORIGIN_EDGE, Cell, CellResult, ProbeResult
from tests.factories import make_cell, make_probe, make_result

TORCH = ("2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.1.2", "2.2.0")
SETUPTOOLS = (
    "80.9.0", "80.10.2", "81.0.0", "82.0.0", "82.0.1", "83.0.0", "84.0.0", "84.1.0", "84.2.0", "84.2.1"
)  # fmt: skip
REAL = json.loads(
    (
        Path(__file__).parent
        / "fixtures"
        / "real-messages"
        / "torch2.1-setuptools84-pkg_resources.json"
    ).read_text()
)


def fails(torch: str, setuptools: str) -> bool:
    """The truth the real run showed: no ``pkg_resources`` (setuptools >= 82) under torch < 2.2."""
    return Version(torch) < Version("2.2") and Version(setuptools) >= Version("82")


def installed_setuptools(cell: Cell) -> str:
    """What uv installs for the cell: the newest setuptools its requirements admit."""
    wanted = SpecifierSet(
        ",".join(
            r[len("setuptools") :] for r in cell.requirements if requirement_name(r) == "setuptools"
        )
    )
    return max((v for v in SETUPTOOLS if v in wanted), key=Version)


def judge(cell: Cell) -> CellResult:
    """The cell's result as the runner writes it, with the modules each distribution shipped (the
    interpreter's ``providers``: setuptools < 82 ships ``pkg_resources``, as the real cells read)."""
    setuptools = installed_setuptools(cell)
    resolved = {"torch": cell.torch, "setuptools": setuptools}
    if fails(cell.torch, setuptools):
        probe = ProbeResult.from_json(REAL["probe"])
    else:
        probe = make_probe("tests", "pass", message="1 passed", isolation="command")
    result = make_result(cell, probes=[probe], resolved=resolved)
    modules = ["_distutils_hack", "setuptools"]
    if Version(setuptools) < Version("82"):
        modules.insert(1, "pkg_resources")
    providers = {"torch": ["functorch", "torch", "torchgen"], "setuptools": modules}
    return dataclasses.replace(result, interpreter={**result.interpreter, "providers": providers})


def loaded(results: Sequence[CellResult]) -> list[CellResult]:
    """The results as ``world.results.load_results`` hands them to the planner and the pins: read
    against the whole run (``judge.runcontext``)."""
    return in_run_context(list(results))


def grid() -> list[CellResult]:
    return [
        judge(
            make_cell(
                torch=torch,
                torchvision="",
                extras={"setuptools": extra},
                probes=("tests",),
                required_probes=("tests",),
            )
        )
        for torch in ("2.0.0", "2.1.0", "2.2.0")
        for extra in ("<82", ">=82")
    ]


def releases_for(cell: Cell, axis: str = "torch") -> Sequence[str]:
    return SETUPTOOLS if axis == "setuptools" else TORCH


def followed(cap: int) -> list[CellResult]:
    """The run: each grid cell and its counterfactual as the matrix session plans it (from the
    cell's own record: ``setuptools<82`` for the ``pkg_resources`` finding), then the follow-up
    session's cells, planned from the results as loaded, within the follow-up cap."""
    results = []
    spent = 0
    for result in grid():
        results.append(result)
        for cell in plan_counterfactuals(result)[: max(cap - spent, 0)]:
            results.append(judge(cell))
            spent += 1
    for _ in range(100):
        planned = followups.plan_followups(loaded(results), releases_for)
        now, _dropped = followups.within_cap(planned, spent, cap)
        if not now:
            return results
        results += [judge(cell) for cell in now]
        spent += len(now)
    raise AssertionError("the planner never stopped")


def admitted_failing_pairs(results: Sequence[CellResult]) -> list[tuple[str, str]]:
    """Every (torch, setuptools) release pair that fails and that constraints.txt still admits."""
    suggestion = suggest_pins(
        loaded(results), {"torch": list(TORCH), "setuptools": list(SETUPTOOLS)}
    )
    specs = {"torch": SpecifierSet(), "setuptools": SpecifierSet()}
    for line in requirement_lines(suggestion.recommended):
        assert not line.marker, line.text()  # a conditional pin would need the marker evaluated
        specs[line.package] &= SpecifierSet(",".join(line.specifiers))
    return [
        (t, s)
        for t in TORCH
        for s in SETUPTOOLS
        if fails(t, s) and t in specs["torch"] and s in specs["setuptools"]
    ]


def test_the_real_failure_is_the_setuptools_finding():
    (result,) = [r for r in grid() if r.cell.id == "t2.1.0-py3.11-setuptoolsge82"]
    assert "No module named 'pkg_resources'" in result.probes[0].message


@pytest.mark.parametrize("cap", [3, 10_000], ids=["cap3-as-the-real-run", "no-cap"])
def test_an_edge_on_the_setuptools_axis_installs_the_release_it_names(cap):
    """The confirmed fix ``setuptools<82`` is not installed into an edge cell that moves setuptools:
    it would replace the release under test (the real run's edge 'setuptools83.0.0' installed 81.0.0)."""
    edges = [
        r
        for r in followed(cap)
        if r.cell.origin == ORIGIN_EDGE and r.cell.axes["setuptools"].startswith("==")
    ]
    assert edges, "no edge on the setuptools axis was planned"
    for result in edges:
        assert result.install.resolved["setuptools"] == result.cell.axes["setuptools"][2:], (
            result.cell.id,
            result.cell.requirements,
        )


@pytest.mark.parametrize("cap", [3, 10_000], ids=["cap3-as-the-real-run", "no-cap"])
def test_the_pins_admit_no_failing_pair_of_any_release_and_keep_torch_whole(cap):
    """Applied as it is, constraints.txt admits no failing pair, tested or not (``setuptools<84``
    admitted 82.0.0..83.0.0 with torch 2.0/2.1), and the rule keeps torch whole: ``setuptools<82``."""
    results = followed(cap)
    assert admitted_failing_pairs(results) == []
    suggestion = suggest_pins(
        loaded(results), {"torch": list(TORCH), "setuptools": list(SETUPTOOLS)}
    )
    lines = {line.package: line.text() for line in requirement_lines(suggestion.recommended)}
    assert lines == {"setuptools": "setuptools<82"}, lines
    (line,) = requirement_lines(suggestion.recommended)
    # one window says why: the trade-off's line, or the proven window; not also an unproven
    # window of 83.0.0 inside it ("edge not found", next to a pin that excludes it)
    (window,) = line.windows
    assert window.releases[0] == "82.0.0" and window.releases[-1] == "84.2.1", window.releases
    assert "edge not found" not in window.proof()


def test_an_incidental_pin_torch_does_not_declare_says_it_must_be_installed():
    """``setuptools<82`` in constraints.txt restricts a setuptools something else installs; torch
    2.1.2 declares none, so ``uv pip install -c constraints.txt torch==2.1.2`` installs none and the
    test still fails. The files say the line must be installed (``-r requirements-pins.txt``)."""
    import json

    from torch_matrix.pins.render import render_constraints, render_json, render_requirements
    from torch_matrix.pins.render import render_text

    suggestion = suggest_pins(
        loaded(followed(10_000)), {"torch": list(TORCH), "setuptools": list(SETUPTOOLS)}
    )
    assert suggestion.must_install() == ["setuptools<82"]
    for text in (render_constraints(suggestion), render_requirements(suggestion)):
        assert "Install, not only constrain: setuptools<82" in text
        assert "`pip install -r requirements-pins.txt`" in text
    assert "setuptools<82" in render_requirements(suggestion).splitlines()
    assert "Install, not only constrain: setuptools<82" in render_text(suggestion)
    assert json.loads(render_json(suggestion))["must_install"] == ["setuptools<82"]
