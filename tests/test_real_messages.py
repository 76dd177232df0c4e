"""The cause catalogue (torch_matrix.judge.causes) on real output: each fixture under
tests/fixtures/real-messages/ is a command probe's result as the runner wrote it for a tiny
downstream test file in a venv holding a real torch release (captured with capture.py there;
the versions are in each file). No venv is needed to judge them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torch_matrix.judge.causes import Cause, EnvironmentKind, attribute
from torch_matrix.judge.verdict import ENVIRONMENT, verdict_of
from torch_matrix.plan.counterfactual import plan_counterfactuals
from torch_matrix.pins import suggest_pins
from torch_matrix.pins.render import render_text
from torch_matrix.vocab.records import CellResult, ProbeResult
from tests.factories import make_cell, make_result

FIXTURES = Path(__file__).parent / "fixtures" / "real-messages"


def real_result(name: str) -> tuple[CellResult, dict[str, Any]]:
    """A cell result holding the real probe of fixture ``name``, with the versions it ran."""
    record = json.loads((FIXTURES / f"{name}.json").read_text())
    probe = ProbeResult.from_json(record["probe"])
    resolved = dict(record["resolved"])
    cell = make_cell(
        torch=resolved["torch"].split("+")[0],
        python=record["python"],
        torchvision="",
        probes=(probe.name,),
        required_probes=(probe.name,),
    )
    return make_result(cell, probes=[probe], resolved=resolved), record


def test_numpy_2_under_torch_1_12_at_collection_is_an_environment_finding_with_numpy_lt_2():
    """torch 1.12.0 (built against numpy 1) with numpy 2.0.2: a test module that converts an
    array at import cannot be collected (``Numpy is not available``). Nothing ran: the finding is
    the environment's, its fix and counterfactual ``numpy<2``, never "fix the test suite"."""
    result, record = real_result("torch1.12-numpy2_collection")
    assert record["resolved"]["numpy"].startswith("2.")
    assert record["probe"]["evidence"]["pytest_exit"] == 2
    attribution = attribute(result, result.probes[0])
    assert (attribution.cause, attribution.kind) == (Cause.ENVIRONMENT, EnvironmentKind.NUMPY_ABI)
    assert attribution.requirement == "numpy<2"
    verdict = verdict_of(result)
    assert verdict.kind == ENVIRONMENT and "`numpy<2`" in verdict.reason
    assert "fix the test suite" not in verdict.reason
    (counterfactual,) = plan_counterfactuals(result)
    assert counterfactual.requirements[-1] == "numpy<2"
    text = render_text(suggest_pins([result]))
    assert "add `numpy<2`" in text and "torch!=" not in text


def test_a_test_that_ran_and_failed_on_numpy_2_stays_evidence_for_the_interaction():
    """The same torch and numpy, a test that ran and failed (``torch.from_numpy``): evidence about
    the pair (the pins close the interaction with ``numpy<2``), not an environment finding."""
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    assert "Numpy is not available" in result.probes[0].message
    assert attribute(result, result.probes[0]).cause == Cause.VERSION


def test_the_same_tests_with_numpy_1_are_evidence_about_the_versions():
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    older = make_result(
        result.cell, probes=result.probes, resolved={**result.install.resolved, "numpy": "1.26.4"}
    )
    assert attribute(older, older.probes[0]).cause == Cause.VERSION


def test_a_collection_error_from_torch_importing_pkg_resources_gets_the_setuptools_advice():
    """torch 1.12.0's torch.utils.cpp_extension imports pkg_resources, which setuptools 82 removed:
    the tests could not be collected, and the finding is the environment's, not "fix the suite"."""
    result, record = real_result("torch1.12-pkg_resources_collection")
    assert record["probe"]["evidence"]["pytest_exit"] == 2
    assert int(record["resolved"]["setuptools"].split(".")[0]) >= 82
    attribution = attribute(result, result.probes[0])
    assert attribution.kind == EnvironmentKind.MISSING_DEPENDENCY
    assert attribution.requirement == "setuptools<82"
    assert "fix the test suite" not in attribution.advice
    assert verdict_of(result).kind == ENVIRONMENT


def test_a_collection_error_in_the_projects_own_module_is_still_the_suites_to_fix():
    result, _record = real_result("torch1.12-pkg_resources_collection")
    probe = result.probes[0]
    own = ProbeResult.from_json(
        {
            **probe.to_json(),
            "message": probe.message.replace("pkg_resources", "mypkg_helpers"),
            "output_tail": "",
            "evidence": {**probe.evidence, "collection_errors": []},
        }
    )
    mine = make_result(result.cell, probes=[own], resolved=result.install.resolved)
    assert attribute(mine, own).kind == EnvironmentKind.TESTS_DID_NOT_RUN


@pytest.mark.parametrize("message", ["Numpy is not available", "_ARRAY_API not found"])
def test_an_import_torch_that_fails_at_the_install_check_carries_the_numpy_advice(message):
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    broken = make_result(
        result.cell,
        status="error",
        message=f"installed versions differ from the cell: torch: cannot read its __version__: "
        f"RuntimeError: {message}",
        resolved=result.install.resolved,
    )
    verdict = verdict_of(broken)
    assert verdict.kind == ENVIRONMENT and "`numpy<2`" in verdict.reason
    (counterfactual,) = plan_counterfactuals(broken)
    assert counterfactual.requirements[-1] == "numpy<2"
    assert counterfactual.probe_subset  # every probe of the cell: import torch itself failed
