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
from torch_matrix.pins.render import (
    render_constraints,
    render_json,
    render_requirements,
    render_text,
)
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


# ------------------------------------------------------------------- variants (cpu, cu124, ...)

VARIANT_TORCH = ["2.4.0", "2.5.0", "2.6.0", "2.7.0"]
BOOM = "training_step failed: CUDA error: no kernel image is available for execution"


def variant_run():
    """2.5.0 and 2.6.0 pass on cpu and cu124; 2.4.0 fails on both; an edge cell ran 2.7.0 on cu124
    only, and it failed there."""
    out = [cell(t, "3.11", variant=v, torchvision="") for t in ("2.5.0", "2.6.0") for v in VARIANTS]
    out += [
        cell("2.4.0", "3.11", variant=v, torchvision="", fail="training_step", message=BOOM)
        for v in VARIANTS
    ]
    out.append(cell("2.7.0", "3.11", variant="cu124", torchvision="", fail="training_step"))
    return out


VARIANTS = ("cpu", "cu124")


def test_a_failure_seen_on_one_variant_excludes_nothing_for_another():
    """torch 2.7.0 ran on cu124 only and failed: the pins read `torch<2.7` for everyone, cpu users
    included, where no cell ran it. Now no line excludes it; the files say it holds on cu124."""
    suggestion = suggest_pins(variant_run(), {"torch": VARIANT_TORCH})
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    assert lines == ["torch>=2.5"], lines  # 2.4.0 failed on both variants: excluded for both
    assert suggestion.recommended.unresolved == ("t2.7.0-cu124-py3.11",)
    (held,) = suggestion.variant_only()
    assert held.describe() == "torch<2.7 (only where variant cu124)"
    for text in (render_text(suggestion), render_constraints(suggestion)):
        note = text.split("Held on a variant only", 1)[1]
        assert "torch<2.7 (only where variant cu124) [t2.7.0-cu124-py3.11]" in note, text
    assert "Held on a variant only" in render_requirements(suggestion)
    # not "no pin excludes without excluding a version seen working": none would be; no cell ran it
    held = "Unresolved (incompatible cells held on a variant only, below):"
    assert held in render_text(suggestion) and held in render_requirements(suggestion)
    assert "without excluding" not in render_text(suggestion).split("Interaction")[0]
    data = json.loads(render_json(suggestion))
    assert data["constraints"] == ["torch>=2.5"]
    assert [pin["condition"]["values"] for pin in data["variant_only"]] == [["cu124"]]


def test_a_failure_seen_on_every_variant_is_excluded_and_no_variant_note():
    both = [r for r in variant_run() if r.cell.torch != "2.7.0"]
    both += [
        cell("2.7.0", "3.11", variant=v, torchvision="", fail="training_step") for v in VARIANTS
    ]
    suggestion = suggest_pins(both, {"torch": VARIANT_TORCH})
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    assert lines == ["torch>=2.5,<2.7"], lines
    assert suggestion.variant_only() == []
    assert "variant_only" not in json.loads(render_json(suggestion))
    assert "Held on a variant only" not in render_constraints(suggestion)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(VARIANT_TORCH), st.sampled_from(VARIANTS)),
        st.booleans(),  # True: the cell passes
        min_size=1,
    ),
    st.booleans(),
)
def test_no_line_excludes_a_release_for_a_variant_where_no_cell_ran_it(grid, with_released):
    """Any grid of torch x {cpu, cu124} cells, each passing or failing, some missing: a release the
    requirement lines exclude has a failing cell on every variant of the run."""
    results = [
        cell(t, "3.11", variant=v, torchvision="", fail="" if good else "training_step")
        for (t, v), good in sorted(grid.items())
    ]
    released = {"torch": VARIANT_TORCH} if with_released else None
    suggestion = suggest_pins(results, released)
    run_variants = {v for _, v in grid}
    for line in requirement_lines(suggestion.recommended):
        if line.package != "torch" or not line.specifiers:
            continue
        for t in {t for t, _ in grid}:
            if _excludes(line.text(), t, "3.11"):
                failing_on = {v for (u, v), good in grid.items() if u == t and not good}
                assert failing_on == run_variants, (line.text(), t, grid)
