"""The standard probes against real torch wheels (marked realwheels), plus their pure helpers.

Each real-wheel venv runs the suite once through ``python -m torch_matrix.probes`` (module-scoped fixture);
the tests then assert the outcomes that version really has.
"""

from __future__ import annotations

import os
import threading

import pytest

from torch_matrix.probes.api import Context, Fail, Skip
from torch_matrix.probes.discovery import STANDARD_PROBES
from torch_matrix.probes.standard import _util
from torch_matrix.probes.standard.cuda_devices import arch_supported
from tests import realwheels

# The standard probes this file runs on real wheels (install_sanity and lazy_cuda_init have files of their own).
MY_PROBES = [name for name in STANDARD_PROBES if name not in ("install_sanity", "lazy_cuda_init")]


def suite_for(env, tmp_path_factory, names=MY_PROBES):
    try:
        python = realwheels.ensure_env(env)
    except realwheels.EnvUnavailable as exc:
        pytest.skip("cannot build %s here: %s" % (env.name, exc))
    return realwheels.run_suite(python, names, tmp_path_factory.mktemp(env.name))["by_name"]


@pytest.fixture(scope="module")
def cpu_2_13(tmp_path_factory):
    return suite_for(realwheels.CPU_2_13, tmp_path_factory)


@pytest.fixture(scope="module")
def pypi_2_4(tmp_path_factory):
    return suite_for(realwheels.PYPI_2_4, tmp_path_factory)


@pytest.fixture(scope="module")
def pypi_1_13(tmp_path_factory):
    return suite_for(realwheels.PYPI_1_13, tmp_path_factory)


@pytest.fixture(scope="module")
def numpy2_on_1_13(tmp_path_factory):
    return suite_for(
        realwheels.NUMPY2_ON_1_13, tmp_path_factory, ["numpy_interop", "training_step"]
    )


def statuses(results):
    return {name: result["status"] for name, result in results.items()}


def explain(results):
    """What to print when a status assertion fails: every non-passing probe with its message."""
    return {
        name: (result["status"], result.get("message", "")[:400], result.get("evidence"))
        for name, result in results.items()
        if result["status"] != "pass"
    }


# --- torch 2.13.0+cpu, Python 3.11, numpy 2, no torchvision, no onnx -----------------------------------


@pytest.mark.realwheels
def test_cpu_2_13_core_probes_pass(cpu_2_13):
    core = [
        "determinism",
        "training_step",
        "numpy_interop",
        "dataloader_workers",
        "distributed_gloo",
        "mixed_precision",
        "torchscript",
        "torch_compile",
        "torch_export",
    ]
    assert {name: cpu_2_13[name]["status"] for name in core} == {name: "pass" for name in core}, (
        explain(cpu_2_13)
    )


@pytest.mark.realwheels
def test_cpu_2_13_skips_what_it_lacks(cpu_2_13):
    assert cpu_2_13["cuda_devices"]["status"] == "skip"
    assert cpu_2_13["cuda_devices"]["message"] == "no CUDA device"
    for name in ("torchvision_transforms", "torchvision_model", "torchvision_ops"):
        assert (cpu_2_13[name]["status"], cpu_2_13[name]["message"]) == (
            "skip",
            "torchvision not installed",
        )
    assert (cpu_2_13["onnx_export"]["status"], cpu_2_13["onnx_export"]["message"]) == (
        "skip",
        "onnx not installed",
    )


@pytest.mark.realwheels
def test_cpu_2_13_checkpoint_changed_default_is_a_fail_with_its_workaround(cpu_2_13):
    # torch 2.6 flipped torch.load's weights_only default: the plain call breaks users' code, so the
    # probe fails (a finding), and its advice is the workaround.
    result = cpu_2_13["checkpoint_roundtrip"]
    assert result["status"] == "fail", explain(cpu_2_13)
    assert result["message"].startswith("changed default: torch.load(path) refuses this checkpoint")
    assert "weights_only=False" in result["message"]
    evidence = result["evidence"]
    assert evidence["advice"].startswith("load with weights_only=False or ")
    assert evidence["default_load"].startswith("UnpicklingError")
    assert evidence["requires"][0] == "weights_only=False"
    allowlist = evidence["requires"][1]
    assert (
        "safe_globals" in allowlist and "argparse.Namespace" in allowlist and "numpy" in allowlist
    )
    # The probe's own RunConfig stands in for the user's classes: the advice never names it.
    for text in (allowlist, evidence["advice"], result["message"]):
        assert "probes." not in text and "RunConfig" not in text, text
    assert "+ your own classes pickled in the checkpoint" in evidence["advice"]
    assert set(evidence["map_location"].values()) == {"cpu"}


@pytest.mark.realwheels
def test_cpu_2_13_evidence_names_the_new_apis(cpu_2_13):
    assert (
        cpu_2_13["training_step"]["evidence"]["weight_norm_api"]
        == "torch.nn.utils.parametrizations.weight_norm"
    )
    assert cpu_2_13["training_step"]["evidence"]["grad_after_zero_grad"] == "None"
    assert cpu_2_13["mixed_precision"]["evidence"]["cpu_output_dtype"] == "torch.bfloat16"
    assert "torch.amp.GradScaler" in cpu_2_13["mixed_precision"]["evidence"]["grad_scaler"]
    assert cpu_2_13["torch_compile"]["evidence"]["backend"] == "inductor"
    assert cpu_2_13["numpy_interop"]["evidence"]["numpy"].startswith("2.")
    assert cpu_2_13["determinism"]["evidence"]["seeded_run_identical"] is True
    # The catalogue: on CPU, torch 2.13 refuses exactly the two ops documented as refusing on CPU.
    assert cpu_2_13["determinism"]["evidence"]["cpu_refusing"] == ["max_unpool2d", "put_"]
    catalogue = cpu_2_13["determinism"]["evidence"]["catalogue"]
    assert catalogue["put_"] == {"documented_on": ["cpu", "cuda"], "refused_on": ["cpu"]}
    assert catalogue["histc"] == {"documented_on": ["cuda"], "refused_on": []}


# --- torch 2.4.1 + torchvision 0.19.1 from PyPI (CUDA build, run on CPU), Python 3.11, numpy<2, onnx -----


@pytest.mark.realwheels
def test_pypi_2_4_torchvision_and_onnx_pass(pypi_2_4):
    for name in (
        "torchvision_transforms",
        "torchvision_model",
        "torchvision_ops",
        "onnx_export",
        "training_step",
        "checkpoint_roundtrip",
        "torch_export",
        "distributed_gloo",
        "determinism",
    ):
        assert pypi_2_4[name]["status"] == "pass", explain(pypi_2_4)
    assert pypi_2_4["torchvision_transforms"]["evidence"]["v2"] == "ok"
    assert pypi_2_4["torchvision_model"]["evidence"]["no_weights_argument"] == "weights=None"
    assert (
        pypi_2_4["checkpoint_roundtrip"]["evidence"]["default_load"] == "ok"
    )  # before the 2.6 flip
    assert pypi_2_4["cuda_devices"]["status"] == "skip"


@pytest.mark.realwheels
def test_pypi_2_4_compile_without_setuptools_is_the_environments_fault_not_the_versions(pypi_2_4):
    # Inductor in torch 2.4.1 imports setuptools, which the wheel declares only for Python >= 3.12;
    # a uv venv on 3.11 has none. The probe reports what happened (torch.compile fails, the eager
    # backend works, so dynamo is fine), and the cause is the environment: no exclusion of torch
    # 2.4.1 or of Python 3.11 may follow from it, only the advice to add setuptools.
    from torch_matrix.judge.causes import Cause, EnvironmentKind, attribute
    from torch_matrix.vocab.records import ProbeResult
    from torch_matrix.judge.verdict import ENVIRONMENT, verdict_of
    from tests.factories import make_cell, make_result

    result = pypi_2_4["torch_compile"]
    assert result["status"] == "fail"
    assert "setuptools" in result["message"]
    assert result["evidence"]["eager_backend"] == "ok"
    assert "torch.compile(f)" in result["repro"]
    probe = ProbeResult.from_json(result)
    cell = make_result(
        make_cell(
            torch="2.4.1",
            python="3.11",
            torchvision="0.19.1",
            probes=("torch_compile",),
            required_probes=("torch_compile",),
        ),
        probes=[probe],
    )
    attribution = attribute(cell, probe)
    assert (attribution.cause, attribution.kind) == (
        Cause.ENVIRONMENT,
        EnvironmentKind.MISSING_DEPENDENCY,
    )
    assert attribution.requirement == "setuptools"
    assert verdict_of(cell).kind == ENVIRONMENT


# --- torch 1.13.1 + torchvision 0.14.1, Python 3.10, numpy<2 ---------------------------------------------


@pytest.mark.realwheels
def test_pypi_1_13_outcomes(pypi_1_13):
    assert statuses(pypi_1_13) == {
        "cuda_devices": "skip",
        "determinism": "pass",
        "training_step": "pass",
        "numpy_interop": "pass",
        "checkpoint_roundtrip": "pass",
        "dataloader_workers": "pass",
        "distributed_gloo": "pass",
        "mixed_precision": "pass",
        "torchscript": "pass",
        "torch_compile": "unsupported",
        "torch_export": "unsupported",
        "onnx_export": "skip",
        "torchvision_transforms": "pass",
        "torchvision_model": "pass",
        "torchvision_ops": "pass",
    }, explain(pypi_1_13)


@pytest.mark.realwheels
def test_pypi_1_13_evidence_names_the_old_apis(pypi_1_13):
    assert pypi_1_13["checkpoint_roundtrip"]["evidence"]["default_load"] == "ok"
    assert "requires" not in pypi_1_13["checkpoint_roundtrip"]["evidence"]
    assert pypi_1_13["training_step"]["evidence"]["weight_norm_api"] == "torch.nn.utils.weight_norm"
    assert pypi_1_13["training_step"]["evidence"]["grad_after_zero_grad"] == "zeros"
    assert list(pypi_1_13["mixed_precision"]["evidence"]["grad_scaler"]) == [
        "torch.cuda.amp.GradScaler"
    ]
    assert pypi_1_13["torchvision_transforms"]["evidence"]["v2"].startswith("unsupported")


@pytest.mark.realwheels
def test_numpy2_under_a_torch_built_for_numpy1_fails_numpy_interop(numpy2_on_1_13):
    result = numpy2_on_1_13["numpy_interop"]
    assert result["status"] == "fail"
    assert "Numpy is not available" in result["message"] and "pin numpy<2" in result["message"]
    assert result["evidence"]["numpy"].startswith("2.")
    assert "torch.from_numpy" in result["repro"]
    assert numpy2_on_1_13["training_step"]["status"] == "pass"  # torch itself still trains


@pytest.fixture(scope="module")
def oldest_1_8(tmp_path_factory):
    return suite_for(realwheels.OLDEST_1_8, tmp_path_factory)


@pytest.mark.realwheels
def test_oldest_torch_1_8_on_python_3_8(oldest_1_8):
    assert statuses(oldest_1_8) == {
        "cuda_devices": "skip",
        "determinism": "pass",
        "training_step": "pass",
        "numpy_interop": "pass",
        "checkpoint_roundtrip": "pass",
        "dataloader_workers": "pass",
        "distributed_gloo": "pass",
        "mixed_precision": "unsupported",
        "torchscript": "pass",
        "torch_compile": "unsupported",
        "torch_export": "unsupported",
        "onnx_export": "skip",
        "torchvision_transforms": "pass",
        "torchvision_model": "pass",
        "torchvision_ops": "pass",
    }, explain(oldest_1_8)
    assert oldest_1_8["torchvision_model"]["evidence"]["no_weights_argument"] == "pretrained=False"
    assert oldest_1_8["checkpoint_roundtrip"]["evidence"]["weights_only_parameter"] is False
    # torch < 1.9 forked workers share one numpy seed: the same "random" augmentation in every worker.
    assert (
        oldest_1_8["dataloader_workers"]["evidence"]["numpy_random_differs_across_workers"] is False
    )


@pytest.fixture(scope="module")
def cpu_2_13_onnx(tmp_path_factory):
    return suite_for(realwheels.CPU_2_13_ONNX, tmp_path_factory, ["onnx_export", "mixed_precision"])


@pytest.mark.realwheels
def test_cpu_2_13_onnx_export_records_the_onnxscript_requirement(cpu_2_13_onnx):
    result = cpu_2_13_onnx["onnx_export"]
    assert result["status"] == "pass"
    assert "onnxscript" in result["evidence"]["default_export"]
    assert result["evidence"]["exporter"].startswith("dynamo=False")
    assert "onnxscript" in result["evidence"]["requires"]
    scaler = cpu_2_13_onnx["mixed_precision"]["evidence"]["grad_scaler"]
    assert (
        "FutureWarning" in scaler["torch.cuda.amp.GradScaler"] and "torch.amp.GradScaler" in scaler
    )


# --- pure helpers: no torch needed -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capability, arch_list, expected",
    [
        ((9, 0), ["sm_80", "sm_90"], "sm_90"),
        ((8, 6), ["sm_80", "sm_90"], "sm_80 (binary compatible)"),
        ((12, 1), ["sm_80", "sm_90", "compute_120"], "compute_120 (PTX JIT)"),
        # PTX of an older major is tried through JIT (NVIDIA: PTX is forward compatible), though PyTorch
        # itself calls such a card not compatible (tests/test_cuda_arch.py, torch_matrix.judge.hardware: ptx-jit).
        ((12, 0), ["sm_80", "sm_90", "compute_90"], "compute_90 (PTX JIT, older generation)"),
        (
            (12, 0),
            ["sm_50", "sm_60", "sm_70", "sm_80", "sm_90"],
            None,
        ),  # is_available() is True, no kernels
        ((10, 0), ["sm_90", "sm_100a"], "sm_100a"),
    ],
)
def test_arch_supported(capability, arch_list, expected):
    assert arch_supported(capability, arch_list) == expected


@pytest.mark.parametrize(
    "message",
    [
        "Dynamo is not supported on Python 3.12+",  # torch.compile on torch 2.3.1 / Python 3.12
        "Python 3.12+ not yet supported for torch.compile",  # torch.export on torch 2.3.1 / Python 3.12
    ],
)
def test_dynamo_refusing_this_python_is_unsupported_with_one_reason_for_every_probe(message):
    from torch_matrix.probes.api import Unsupported

    reasons = set()
    for _ in ("torch_compile", "torch_export"):
        with pytest.raises(Unsupported) as raised:
            _util.raise_if_python_refused(RuntimeError(message))
        reasons.add(str(raised.value).split(": RuntimeError")[0])
    assert len(reasons) == 1 and "does not support Python" in reasons.pop()
    _util.raise_if_python_refused(
        RuntimeError("backend='inductor' raised: No module named 'setuptools'")
    )


def test_first_line_joins_a_header_that_ends_with_a_colon():
    exc = RuntimeError(
        "backend='inductor' raised:\n\x1b[1mModuleNotFoundError: No module named 'setuptools'\x1b[0m"
    )
    assert _util.first_line(exc) == (
        "RuntimeError: backend='inductor' raised: ModuleNotFoundError: No module named 'setuptools'"
    )


def _return_value(value):
    return value * 2


def _exit_hard(code):
    os._exit(code)


_never = threading.Event()


def _block_forever():
    _never.wait()


def test_run_in_children_collects_results_deaths_and_timeouts():
    assert _util.run_in_children(_return_value, [[1], [2]], timeout=30) == [("ok", 2), ("ok", 4)]
    assert _util.run_in_children(_exit_hard, [[3]], timeout=30) == [("died", 3)]
    assert _util.run_in_children(_block_forever, [[]], timeout=1) == [("timeout", 1)]


def test_optional_import_skips_only_when_the_package_itself_is_missing(monkeypatch):
    with pytest.raises(Skip, match="numpy not installed"):
        monkeypatch.setitem(
            __import__("sys").modules, "numpy", None
        )  # import numpy -> ModuleNotFoundError
        _util.require_numpy()

    def broken_import(name, *args, **kwargs):
        raise ModuleNotFoundError("No module named 'PIL'", name="PIL")

    monkeypatch.setattr("builtins.__import__", broken_import)
    with pytest.raises(Fail, match="No module named 'PIL'"):
        _util.require_torchvision()


def test_require_torchvision_fails_on_the_runners_import_error():
    ctx = Context()
    ctx.imports = {
        "torchvision": {
            "ok": False,
            "error": "RuntimeError: operator torchvision::nms does not exist",
        }
    }
    with pytest.raises(Fail, match="operator torchvision::nms does not exist"):
        _util.require_torchvision(ctx)
    ctx.imports = {
        "torchvision": {"ok": False, "error": "ModuleNotFoundError: No module named 'torchvision'"}
    }
    with pytest.raises(Skip, match="torchvision not installed"):
        _util.require_torchvision(ctx)


def test_gloo_ranks_that_hang_when_forked_are_judged_on_spawned_ranks(monkeypatch):
    """Forked ranks hanging is our process model (a zygote), not the release: spawn decides."""
    import sys
    import types

    from torch_matrix.probes.standard import distributed_gloo as gloo

    dist = types.SimpleNamespace(is_available=lambda: True, is_gloo_available=lambda: True)
    fake_torch = types.ModuleType("torch")
    fake_torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    ok = [
        ("ok", {"all_reduce": 3.0, "weight": [0.5, 0.25]}),
        ("ok", {"all_reduce": 3.0, "weight": [0.5, 0.25]}),
    ]
    calls = []

    def run_backend(backend, world_size, start_method):
        calls.append(start_method)
        if start_method is None:
            return [("timeout", 45), ("ok", {"all_reduce": 3.0, "weight": [0.5, 0.25]})], 1234
        return ok, 5678

    monkeypatch.setattr(gloo, "run_backend", run_backend)
    ctx = types.SimpleNamespace(cuda_available=lambda: False)
    facts = gloo.distributed_gloo(ctx)
    assert calls == [None, "spawn"]
    assert facts["start_method"] == "spawn" and facts["forked_ranks"] == [
        ("rank 0", "timeout", "45")
    ]
    assert facts["gloo"] == {"world_size": 2, "all_reduce": 3.0}

    # Spawned ranks that fail too are a real failure.
    monkeypatch.setattr(
        gloo, "run_backend", lambda b, w, s: ([("timeout", 45), ("timeout", 45)], None)
    )
    with pytest.raises(Fail):
        gloo.distributed_gloo(ctx)
