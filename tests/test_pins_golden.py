"""Golden tests: realistic grids -> the exact text a nightly job would commit.

Regenerate after an intended change with ``TORCH_MATRIX_UPDATE_GOLDEN=1 pytest tests/test_pins_golden.py``
and review the diff. Each grid also has explicit assertions on what a maintainer would write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from torch_matrix.pins import PinPolicy, requirement_lines, suggest_pins
from torch_matrix.pins.render import (
    render_constraints,
    render_json,
    render_requirements,
    render_text,
)
from torch_matrix.world.results import load_results
from tests.pins_grids import GRIDS, RELEASED

GOLDEN = Path(__file__).parent / "golden" / "pins"
UPDATE = os.environ.get("TORCH_MATRIX_UPDATE_GOLDEN") == "1"
REAL_RUN = GOLDEN / "real_yolo_run"  # cells from a real `nox -s matrix` run of REAL_RUN/matrix.toml


REAL_SETUPTOOLS_RUN = (
    GOLDEN / "real_setuptools_run"
)  # a real run of its matrix.toml (issue 11, case a)


def _real_results(run: Path = REAL_RUN):
    loaded = load_results(run / "cells")
    assert loaded.problems == []
    return loaded.results


GRIDS = {
    **GRIDS,
    "real_yolo_run": _real_results,
    "real_setuptools_run": lambda: _real_results(REAL_SETUPTOOLS_RUN),
    "real_lazy_run": lambda: _real_results(GOLDEN / "real_lazy_run"),
    "real_numpy_run": lambda: _real_results(GOLDEN / "real_numpy_run"),
    "real_mismatched_pair_run": lambda: _real_results(GOLDEN / "real_mismatched_pair_run"),
}


def _suggest(name: str, **options):
    return suggest_pins(GRIDS[name](), RELEASED if name == "single_bad_patch" else None, **options)


def _constraint_lines(text: str) -> list[str]:
    return [line.split("  #")[0] for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_outputs_match_golden_files(name):
    suggestion = _suggest(name)
    outputs = {
        "report.txt": render_text(suggestion),
        "constraints.txt": render_constraints(suggestion),
        "requirements-pins.txt": render_requirements(suggestion),
        "pins.json": render_json(suggestion),
    }
    for filename, text in outputs.items():
        path = GOLDEN / name / filename
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        assert path.read_text(encoding="utf-8") == text, f"{path} differs (see module docstring)"


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_outputs_are_deterministic_and_valid(name):
    first, second = (
        _suggest(name),
        suggest_pins(
            list(reversed(GRIDS[name]())), RELEASED if name == "single_bad_patch" else None
        ),
    )
    assert render_text(first) == render_text(second)
    assert render_json(first) == render_json(second)
    for line in _constraint_lines(render_constraints(first)):
        assert not Requirement(line).extras  # constraints files cannot carry extras
    data = json.loads(render_json(first))
    assert data["schema"] == "torch-matrix/pins"


def test_single_bad_patch_release_is_excluded_alone():
    suggestion = _suggest("single_bad_patch")
    assert _constraint_lines(render_constraints(suggestion)) == ["torch!=1.12.0"]
    (exclusion,) = suggestion.recommended.pins[0].exclusions
    assert exclusion.probes == ("lazy_cuda_init",)
    assert exclusion.cells == ("t1.12.0-py3.10", "t1.12.0-py3.9")
    assert "CUDA was initialised" in exclusion.summary and "observed True" in exclusion.summary
    cov = suggestion.coverage["torch"]
    assert (cov.older, cov.untested, cov.newer) == (("1.10.2",), ("1.13.0",), ("2.0.1",))  # no rc


def test_bad_release_excludes_its_paired_torchvision_with_a_reason():
    suggestion = _suggest("bad_release_paired_torchvision")
    assert _constraint_lines(render_constraints(suggestion)) == [
        "torch!=1.12.0",
        "torchvision!=0.13.0",
    ]
    (tv,) = suggestion.recommended.pins_for("torchvision")[0].exclusions
    assert tv.paired_with == "torch 1.12.0"
    assert "torchvision 0.13.0" in render_requirements(suggestion)


def test_range_broken_only_with_numpy2_is_an_interaction_pinned_by_the_rule():
    suggestion = _suggest("numpy2_range", pin_tradeoffs=False)  # `pins --tradeoffs show`
    # numpy<2 would exclude numpy 2 where torch 2.3.1 works with it, torch>=2.3 would exclude
    # 2.1.2/2.2.2 where they work with numpy 1: the safe answer says neither; the rule pins the
    # incidental dependency (numpy), the other trade-off is shown, each saying what it gives up.
    assert suggestion.safe.lost == () and len(suggestion.safe.unresolved) == 2
    assert _constraint_lines(render_constraints(suggestion)) == []
    assert suggestion.recommended is suggestion.safe
    pinned = _suggest("numpy2_range")  # the default
    assert _constraint_lines(render_constraints(pinned)) == ["numpy!=2.0.2"]
    assert (
        pinned.recommended.lost == ("t2.3.1-py3.11-numpyge2",)
        and pinned.recommended.unresolved == ()
    )
    first, second = suggestion.tradeoffs
    assert (first.rank, first.line(), first.pin.gives_up) == (
        1,
        "numpy!=2.0.2",
        ("torch 2.3.1 x numpy 2.0.2 [t2.3.1-py3.11-numpyge2]",),
    )
    assert (second.rank, second.line(), second.pairs) == (2, "torch!=2.1.2,!=2.2.2", 2)
    assert (
        "# torch!=2.1.2,!=2.2.2  # trade-off 2 (not pinned) for the interaction torch 2.1.2, 2.2.2 with "
        "numpy 2.0.2 (each passes in another pair): torch!=2.1.2,!=2.2.2: "
        "gives up 2 working pairs" in render_constraints(suggestion)
    )
    diagnosis = suggestion.diagnosis
    assert (
        diagnosis is not None
        and diagnosis.kept == diagnosis.good_total
        and diagnosis.unresolved == ()
    )
    assert diagnosis.describe() == "torch!=2.1.2,!=2.2.2 (only where numpy>=2)"
    assert all(answer.lost == () for answer in suggestion.answers)
    assert "Trade-offs (PEP 508 cannot condition a pin on another package's version" in render_text(
        suggestion
    )


def test_break_on_one_python_becomes_a_marker():
    suggestion = _suggest("one_python")
    assert _constraint_lines(render_constraints(suggestion)) == [
        'torch!=2.2.2,!=2.3.1; python_version >= "3.12"'
    ]
    lines = requirement_lines(suggestion.recommended)
    assert [line.text() for line in lines] == [
        'torch; python_version < "3.12"',
        'torch!=2.2.2,!=2.3.1; python_version >= "3.12"',
    ]
    assert suggestion.recommended.lost == ()


def test_all_bad_after_a_version_excludes_each_tested_release_not_the_untested_future():
    suggestion = _suggest("upper_bound")
    assert _constraint_lines(render_constraints(suggestion)) == ["torch!=2.6.0,!=2.7.0"]
    tested_only = suggest_pins(GRIDS["upper_bound"](), policy=PinPolicy.TESTED_ONLY)
    assert _constraint_lines(render_constraints(tested_only)) == ["torch<2.6"]
    assert [e.version for e in suggestion.recommended.pins[0].exclusions] == ["2.6.0", "2.7.0"]


def test_break_on_one_variant_is_diagnosed_and_approximated():
    suggestion = _suggest("one_variant")
    assert suggestion.diagnosis.describe() == "torch!=2.6.0 (only where variant cu118)"
    # torch!=2.6.0 would exclude 2.6.0 where it works (cu126): it is not suggested.
    assert _constraint_lines(render_constraints(suggestion)) == []
    assert suggestion.recommended.lost == ()
    assert suggestion.recommended.unresolved == ("t2.6.0-cu118-py3.11",)


def test_install_errors_and_unsatisfiable_cells_make_no_pins():
    suggestion = _suggest("install_errors")
    assert _constraint_lines(render_constraints(suggestion)) == []
    assert [n.cell_id for n in suggestion.unsatisfiable] == ["t1.12.0-py3.12"]
    assert [n.cell_id for n in suggestion.no_evidence] == ["t2.6.0-py3.11"]
    assert "incompatible" not in render_text(suggestion).split("Unsatisfiable")[1].split("\n\n")[0]


def test_real_run_gives_what_a_maintainer_writes_by_hand():
    """torch 1.11-1.13.1 (paired torchvision) x numpy <2 / >=2 on Python 3.10, full suite, CPU-only machine:
    exactly yolov5's hand-written `torch!=1.12.0` / `torchvision!=0.13.0`, plus the tested numpy 2
    release (numpy<2 would also exclude the untested 2.0 and 2.1 releases)."""
    suggestion = _suggest("real_yolo_run")
    assert _constraint_lines(render_constraints(suggestion)) == [
        "torch!=1.12.0",
        "torchvision!=0.13.0",
        "numpy!=2.2.6",
    ]
    reasons = {
        (e.package, e.version): e for pin in suggestion.recommended.pins for e in pin.exclusions
    }
    assert reasons["torch", "1.12.0"].probes == ("lazy_cuda_init",)
    assert reasons["torchvision", "0.13.0"].paired_with == "torch 1.12.0"
    assert reasons["numpy", "2.2.6"].probes == ("numpy_interop", "torchvision_transforms")
    assert len(reasons["numpy", "2.2.6"].cells) == 4


def test_real_setuptools_run_blames_the_environment_not_python_or_torch():
    """Python 3.10/3.12 x torch 2.3.1/2.4.1, torch_compile required, real PyPI wheels in uv venvs:
    3.10 lacks setuptools (environment; the automatic counterfactual cells with setuptools pass),
    2.3.1 on 3.12 is refused by dynamo (the version). Not `Requires-Python >=3.12`, not `torch>=2.4`."""
    suggestion = _suggest("real_setuptools_run")
    assert _constraint_lines(render_constraints(suggestion)) == [
        'torch!=2.3.1; python_version >= "3.12"'
    ]
    assert not suggestion.recommended.pins_for("python")
    (exclusion,) = suggestion.recommended.pins_for("torch")[0].exclusions
    assert exclusion.counterfactual() == (
        "2.3.1 fails torch_compile [t2.3.1-py3.12]; 2.4.1, all else equal, passes [t2.4.1-py3.12]"
    )
    (advice,) = suggestion.environment
    assert advice.requirement == 'setuptools; python_version < "3.12"'
    assert advice.confirmed_by == (
        "t2.3.1-py3.10-cf-with-setuptools",
        "t2.4.1-py3.10-cf-with-setuptools",
    )


def test_real_lazy_run_is_still_exactly_the_hand_written_pins():
    """torch 1.11.0/1.12.0/1.12.1 with paired torchvision, numpy<2, Python 3.10, full suite (issue 11, case c)."""
    suggestion = _suggest("real_lazy_run")
    assert _constraint_lines(render_constraints(suggestion)) == [
        "torch!=1.12.0",
        "torchvision!=0.13.0",
    ]
    (torch,) = suggestion.recommended.pins_for("torch")[0].exclusions
    assert torch.counterfactual() == (
        "1.12.0 fails lazy_cuda_init [t1.12.0-py3.10-numpylt2]; 1.12.1, all else "
        "equal, passes [t1.12.1-py3.10-numpylt2]"
    )


def test_real_numpy_run_ranks_the_trade_offs_and_confirms_the_setuptools_advice():
    """torch 2.2.2/2.3.1 x numpy <2/>=2, Python 3.11, full suite (issue 11, case d): 2.2.2 breaks with
    numpy 2 only; torch!=2.2.2 and numpy!=2.4.6 each give up one working pair and one release: on
    the rule the dependency ranks first, and is pinned (not with ``--tradeoffs show``)."""
    suggestion = _suggest("real_numpy_run", pin_tradeoffs=False)
    assert suggestion.safe.unresolved == (
        "t2.2.2-py3.11-npge2",
        "t2.2.2-py3.11-npge2-cf-with-setuptools",
    )
    assert [t.line() for t in suggestion.tradeoffs] == ["numpy!=2.4.6", "torch!=2.2.2"]
    assert _constraint_lines(render_constraints(suggestion)) == []
    pinned = _suggest("real_numpy_run")
    assert _constraint_lines(render_constraints(pinned)) == ["numpy!=2.4.6"]
    assert pinned.recommended.unresolved == ()
    assert suggestion.diagnosis.describe() == "torch!=2.2.2 (only where numpy>=2)"
    (advice,) = suggestion.environment
    assert (
        advice.requirement == "setuptools"
        and len(advice.confirmed_by) == 4
        and advice.refuted_by == ()
    )


def test_real_mismatched_pair_gets_pairing_advice_and_no_bound():
    """torch 2.3.1 + torchvision 0.19.1 (built for 2.4.1) installed on purpose (install = "override"),
    next to the correct pair 2.4.1 + 0.19.1, real wheels (issue 11, case e)."""
    suggestion = _suggest("real_mismatched_pair_run")
    assert _constraint_lines(render_constraints(suggestion)) == []
    (advice,) = suggestion.environment
    assert advice.kind == "mismatched-pair" and advice.cells == ("t2.3.1-tv0.19.1-py3.11-override",)
    assert advice.confirmed_by == ("t2.4.1-py3.11",)
