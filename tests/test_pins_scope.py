"""Where a pin holds (issue 42): a failure excludes a release only on the Pythons whose cells saw it,
a start edge at the first release with a wheel for a Python is proven, and the same evidence gives
the same answer wherever it is shown (the pins, the alternatives, the trade-offs) and in whatever
order the cells come."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

from torch_matrix.pins import requirement_lines, suggest_pins
from torch_matrix.pins.render import render_json, render_text
from tests.pins_grids import cell

DYNAMO = "torch.compile failed: RuntimeError: Dynamo is not supported on Python 3.12+"
NUMPY = "torch.from_numpy failed: RuntimeError: Numpy is not available"
TORCH = [
    "1.12.0",
    "1.12.1",
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
]


def _pythons(version: str) -> frozenset[str]:
    """Which Pythons PyPI's torch wheels serve (the field notes' table)."""
    minor = tuple(int(p) for p in version.split(".")[:2])
    found = {"3.10"} if minor >= (1, 11) else set()
    if minor >= (1, 13):
        found.add("3.11")
    if minor >= (2, 2):
        found.add("3.12")
    return frozenset(found)


WHEELS = {"torch": {v: _pythons(v) for v in TORCH}}


def floor_run():
    """The 3.12 floor: 2.3.1 and 2.4.0 on 3.11 and 3.12, and an edge cell that ran 2.2.0 on 3.12
    only (the first torch with a cp312 wheel)."""
    return [
        cell("2.3.1", "3.11", torchvision="", probe="torch_compile"),
        cell("2.4.0", "3.11", torchvision="", probe="torch_compile"),
        cell("2.2.0", "3.12", torchvision="", fail="torch_compile", message=DYNAMO),
        cell("2.3.1", "3.12", torchvision="", fail="torch_compile", message=DYNAMO),
        cell("2.4.0", "3.12", torchvision="", probe="torch_compile"),
    ]


def _excludes(line_text: str, version: str, python: str) -> bool:
    requirement = Requirement(line_text)
    applies = requirement.marker is None or requirement.marker.evaluate(
        {"python_version": python, "python_full_version": python + ".0"}
    )
    return applies and not requirement.specifier.contains(version)


def test_a_failure_seen_on_one_python_excludes_nothing_on_another():
    suggestion = suggest_pins(floor_run(), {"torch": TORCH}, wheel_pythons=WHEELS)
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    # 2.2.0 ran on 3.12 only: nothing excludes it on 3.11, where no cell ran it.
    assert not any(_excludes(text, "2.2.0", "3.11") for text in lines), lines
    assert any(_excludes(text, "2.2.0", "3.12") for text in lines), lines
    for answer in suggestion.answers:
        for pin in answer.pins:
            for exclusion in pin.exclusions:
                if exclusion.version == "2.2.0":
                    assert pin.condition is not None
                    assert [str(v) for v in pin.condition.values] == ["3.12"]


def test_the_first_release_with_a_wheel_for_a_python_proves_a_floor_on_that_python():
    suggestion = suggest_pins(floor_run(), {"torch": TORCH}, wheel_pythons=WHEELS)
    (line,) = [line for line in requirement_lines(suggestion.recommended) if line.specifiers]
    assert line.text() == 'torch>=2.4; python_version >= "3.12"'
    (window,) = line.windows
    assert (window.kind, window.first_bad, window.last_bad) == ("floor", "2.2.0", "2.3.1")
    assert window.start.index_end == "oldest" and window.start.bad_cell == "t2.2.0-py3.12"
    text = render_text(suggestion)
    assert "not tested" not in text.split("Coverage")[0], text


def test_a_window_never_calls_a_release_it_tested_untested():
    suggestion = suggest_pins(floor_run(), {"torch": TORCH}, wheel_pythons=WHEELS)
    tested = {"2.2.0", "2.3.1", "2.4.0"}
    for answer in suggestion.answers:
        for line in requirement_lines(answer):
            for window in line.windows:
                for edge in (window.start, window.end):
                    assert not tested & set(edge.missing), window.proof()


def numpy_window_run():
    """torch 1.13.0 and 2.2.2 fail with numpy 2 (built against numpy 1), 2.3.0 passes; all pass
    with numpy 1."""
    out = []
    for torch in ("1.13.0", "2.2.2", "2.3.0"):
        for numpy in (("<2", "1.26.4"), (">=2", "2.0.2")):
            bad = numpy[1].startswith("2") and torch != "2.3.0"
            out.append(
                cell(
                    torch,
                    "3.11",
                    torchvision="",
                    numpy=numpy,
                    probe="numpy_interop",
                    fail="numpy_interop" if bad else "",
                    message=NUMPY,
                )
            )
    return out


NUMPY_RELEASES = {"torch": TORCH, "numpy": ["1.26.4", "2.0.0", "2.0.1", "2.0.2", "2.1.0"]}
NUMPY_WHEELS = {
    "torch": WHEELS["torch"],
    "numpy": {v: frozenset({"3.10", "3.11", "3.12"}) for v in NUMPY_RELEASES["numpy"]},
}


def test_the_same_window_is_the_same_bound_in_the_alternatives_and_the_tradeoffs():
    suggestion = suggest_pins(numpy_window_run(), NUMPY_RELEASES, wheel_pythons=NUMPY_WHEELS)
    data = json.loads(render_json(suggestion))
    torch_tradeoff = [t for t in data["tradeoffs"] if t["package"] == "torch"]
    assert [t["requirement"] for t in torch_tradeoff] == ["torch>=2.3"]
    scoped = [
        pin
        for answer in data["alternatives"]
        for pin in answer["pins"]
        if pin["package"] == "torch" and pin["condition"]
    ]
    assert scoped and all(pin["specifier"] == ">=2.3" for pin in scoped), scoped
    assert all(pin["windows"][0]["kind"] == "floor" for pin in scoped)
    assert "torch!=1.13.0" not in render_text(suggestion)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_the_same_evidence_in_any_order_gives_the_same_pins(data):
    for results, released, wheels in (
        (floor_run(), {"torch": TORCH}, WHEELS),
        (numpy_window_run(), NUMPY_RELEASES, NUMPY_WHEELS),
    ):
        shuffled = data.draw(st.permutations(results))
        assert render_json(suggest_pins(shuffled, released, wheel_pythons=wheels)) == render_json(
            suggest_pins(results, released, wheel_pythons=wheels)
        )


def test_the_pins_line_names_only_the_lines_the_files_pin(tmp_path, capsys):
    """The floor run's pins line read ``pins: torch; python_version < "3.12", torch>=2.4; ...``: a
    Python line the marker leaves unpinned is no pin."""
    from torch_matrix import cli
    from torch_matrix.world.results import write_result

    run = tmp_path / "run"
    for result in floor_run():
        write_result(result, run / "cells")
    assert cli.main(["pins", str(run), "--no-coverage", "--out", str(tmp_path / "p")]) == 0
    out, _ = capsys.readouterr()
    (line,) = [line for line in out.splitlines() if line.startswith("pins: ")]
    assert not line.startswith('pins: torch; python_version < "3.12"'), line
