"""An environment gap is advice, in every probe and test (issue 42): a module the cell misses
that no axis of it varies (numpy, setuptools, onnxscript, ...) goes through the counterfactual
(install it, all else equal); only a confirmed version failure excludes a version."""

from __future__ import annotations

import pytest

from torch_matrix.judge.causes import Cause, EnvironmentKind, attribute
from torch_matrix.judge.verdict import ENVIRONMENT, INCOMPATIBLE, verdict_of
from torch_matrix.pins import suggest_pins
from torch_matrix.pins.evidence import environment_advice
from torch_matrix.pins.render import render_text
from torch_matrix.plan.counterfactual import parent_counterfactual, plan_counterfactuals
from torch_matrix.vocab.records import CellResult, Cell, ProbeResult
from tests.factories import make_cell, make_probe, make_result
from tests.test_real_messages import real_result


def test_torch_compile_missing_numpy_is_advice_with_a_counterfactual_not_a_torch_pin():
    """Real output: torch 2.2.0 on Python 3.11 in a venv without numpy, torch.compile fails with
    ``InternalTorchDynamoError: No module named 'numpy'`` (torch does not declare numpy). It was
    pinned ``torch!=2.2.0`` with no advice."""
    result, _record = real_result("torch2.2-py3.11-no-numpy_compile")
    attribution = attribute(result, result.probes[0])
    assert (attribution.cause, attribution.kind) == (
        Cause.ENVIRONMENT,
        EnvironmentKind.MISSING_DEPENDENCY,
    )
    assert attribution.requirement == "numpy"
    assert verdict_of(result).kind == ENVIRONMENT
    (counterfactual,) = plan_counterfactuals(result)
    assert counterfactual.id == "t2.2.0-py3.11-cf-with-numpy"
    assert counterfactual.requirements == ("torch==2.2.0", "numpy")
    text = render_text(suggest_pins([result]))
    assert "torch!=" not in text and "add `numpy`" in text


@pytest.mark.parametrize("module", ["numpy", "onnxscript", "setuptools", "yaml"])
def test_a_module_missed_in_a_users_test_is_an_environment_gap(module):
    probe = make_probe(
        "tests",
        "fail",
        f"1 failed, 3 passed: tests/test_x.py::test_export -- ModuleNotFoundError: No module "
        f"named '{module}'",
        isolation="command",
        evidence={"pytest_exit": 1},
    )
    result = make_result(make_cell(torchvision="", probes=("tests",)), probes=[probe])
    attribution = attribute(result, probe)
    assert attribution.kind == EnvironmentKind.MISSING_DEPENDENCY
    (counterfactual,) = plan_counterfactuals(result)
    assert counterfactual.requirements[-1] == {"yaml": "pyyaml"}.get(module, module)


def test_numpy_is_under_test_where_the_cell_varies_it_or_installs_it():
    probe = make_probe("torch_compile", "fail", "InternalTorchDynamoError: No module named 'numpy'")
    installed = make_result(
        make_cell(torchvision="", probes=("torch_compile",)),
        probes=[probe],
        resolved={"torch": "2.5.1", "numpy": "2.1.0"},
    )
    assert attribute(installed, probe).cause == Cause.VERSION
    about_numpy = make_probe("numpy_interop", "fail", "No module named 'numpy'")
    result = make_result(make_cell(torchvision="", probes=("numpy_interop",)), probes=[about_numpy])
    assert attribute(result, about_numpy).cause == Cause.VERSION


def test_torchs_numpy_warning_in_the_output_is_not_the_failure():
    """torch 2.3.1 on 3.12: dynamo is unsupported, and torch warned ``Failed to initialize NumPy:
    No module named 'numpy'`` on the way: a version finding, not a numpy gap."""
    probe = make_probe(
        "torch_compile",
        "fail",
        "torch.compile failed: RuntimeError: Dynamo is not supported on Python 3.12+",
        output_tail="torch/nn/init.py:459: UserWarning: Failed to initialize NumPy: No module "
        "named 'numpy' (Triggered internally at ../torch/csrc/utils/tensor_numpy.cpp:84.)",
    )
    result = make_result(
        make_cell("2.3.1", "3.12", torchvision="", probes=("torch_compile",)), probes=[probe]
    )
    assert verdict_of(result).kind == INCOMPATIBLE


def _fails(cell: Cell, module: str) -> CellResult:
    probe = make_probe(
        "torch_compile",
        "fail",
        f"torch.compile failed: BackendCompilerFailed: backend='inductor' raised: "
        f"ModuleNotFoundError: No module named '{module}'",
    )
    return make_result(cell, probes=[make_probe("install_sanity"), probe])


def test_a_counterfactual_that_misses_another_module_gets_one_more_with_both_fixes():
    """torch 2.2.0: numpy added, inductor then misses setuptools. The numpy cell neither confirms
    nor refutes; the cell with both fixes decides, for each advice."""
    original = _fails(
        make_cell("2.2.0", torchvision="", probes=("install_sanity", "torch_compile")), "numpy"
    )
    (with_numpy,) = plan_counterfactuals(original)
    first = _fails(with_numpy, "setuptools")
    (both,) = plan_counterfactuals(first)
    assert both.id == "t2.2.0-py3.11-cf-with-numpy-with-setuptools"
    assert both.requirements == ("torch==2.2.0", "numpy", "setuptools")
    assert parent_counterfactual(both.id) == with_numpy.id
    assert parent_counterfactual(with_numpy.id) == original.cell.id
    # The same gap again, with its fix applied: no loop.
    assert plan_counterfactuals(_fails(both, "numpy")) == []
    passed = make_result(both, probes=[make_probe("install_sanity"), make_probe("torch_compile")])
    advice = {a.requirement: a for a in environment_advice([original, first, passed])}
    assert advice["numpy"].confirmed_by == (both.id,) and advice["numpy"].refuted_by == ()
    assert advice["setuptools"].confirmed_by == (both.id,)
    text = render_text(suggest_pins([original, first, passed]))
    assert "torch!=" not in text
    # "all else equal" is said of the chain's cell only with the fixes it stacks named
    assert "confirmed: with the fix applied (and the other fixes its cell names)" in text


@pytest.mark.realwheels
def test_real_torch_2_2_0_on_3_11_misses_numpy_then_setuptools_and_passes_with_both(tmp_path):
    """PyPI's torch 2.2.0 in a bare uv venv on Python 3.11: torch.compile misses numpy (advice, not
    a torch pin); numpy and setuptools added, all else equal, it passes."""
    from tests import realwheels

    bare = realwheels.WheelEnv("g-torch2.2.0-py3.11-bare", "3.11", ("torch==2.2.0",))
    fixed = realwheels.WheelEnv(
        "h-torch2.2.0-py3.11-numpy-setuptools", "3.11", ("torch==2.2.0", "numpy<2", "setuptools")
    )
    try:
        pythons = [realwheels.ensure_env(env) for env in (bare, fixed)]
    except realwheels.EnvUnavailable as exc:
        pytest.skip(str(exc))
    seen = []
    for python, where in zip(pythons, ("bare", "fixed")):
        (tmp_path / where).mkdir()
        document = realwheels.run_suite(python, ["torch_compile"], tmp_path / where)
        seen.append(document["by_name"]["torch_compile"])
    probe = ProbeResult.from_json(seen[0])
    assert probe.status == "fail" and "No module named 'numpy'" in probe.message, seen[0]
    result = make_result(
        make_cell("2.2.0", "3.11", torchvision="", probes=("torch_compile",)),
        probes=[probe],
        resolved={"torch": "2.2.0"},
    )
    assert attribute(result, probe).requirement == "numpy"
    assert "torch!=" not in render_text(suggest_pins([result]))
    assert seen[1]["status"] == "pass", seen[1]
