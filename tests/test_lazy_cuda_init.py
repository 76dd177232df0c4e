"""lazy_cuda_init on synthetic torch packages: one that queries CUDA during import fails, one that does not passes.

No GPU or driver is needed: the query is observed, not its answer.
"""

import json
import os
import subprocess
import sys

import pytest

from synthetic_torch import make_fake_torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lazy_result(tmp_path, fake_root, *extra):
    out = tmp_path / "lazy.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake_root), REPO]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_matrix.probes",
            "--out",
            str(out),
            "--select",
            "lazy_cuda_init",
        ]
        + list(extra),
        cwd=str(tmp_path),
        env=env,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    (result,) = json.loads(out.read_text())["results"]
    return result


# "auto": the zygote's own `import torch` is the observed one; "pristine": the probe imports torch itself.
@pytest.mark.parametrize("isolation", ["auto", "pristine"])
def test_torch_that_queries_cuda_during_import_fails(tmp_path, isolation):
    fake = make_fake_torch(tmp_path / "site", query_cuda_at_import=True)
    result = lazy_result(tmp_path, fake, "--isolation", isolation)
    assert result["status"] == "fail", result
    assert "torch._C._cuda_getDeviceCount" in result["observed"]["functions"]
    assert "torch.cuda.device_count" in result["observed"]["functions"]
    first = result["evidence"]["calls"][0]
    assert first["caller"].split(":")[0].endswith(os.path.join("torch", "__init__.py"))
    assert "_cuda_getDeviceCount" in result["repro"] and "import torch" in result["repro"]
    assert result["evidence"]["observed_by"] == ("runner" if isolation == "auto" else "probe")


@pytest.mark.parametrize("isolation", ["auto", "pristine"])
def test_torch_that_stays_lazy_passes(tmp_path, isolation):
    fake = make_fake_torch(tmp_path / "site", query_cuda_at_import=False)
    result = lazy_result(tmp_path, fake, "--isolation", isolation)
    assert result["status"] == "pass", result
    assert result["evidence"]["functions_called"] == [] and result["evidence"]["call_count"] == 0
    assert result["evidence"]["behaviour"].startswith("skipped")  # no GPU on the test machine


def test_repro_snippet_detects_the_query_on_its_own(tmp_path):
    """The repro in a failure is standalone: pasted into a fresh interpreter, it shows the query."""
    fake = make_fake_torch(tmp_path / "site", query_cuda_at_import=True)
    result = lazy_result(tmp_path, fake)
    env = dict(os.environ, PYTHONPATH=str(fake))
    proc = subprocess.run(
        [sys.executable, "-c", result["repro"]], env=env, stdout=subprocess.PIPE, timeout=60
    )
    assert "_cuda_getDeviceCount at" in proc.stdout.decode()


# torch 1.12.0 queried CUDA during import (torch/_prims/utils.py: torch.cuda.is_available(), pytorch#80876);
# 1.12.1 fixed it. Both are cu102 builds from PyPI: the check needs no GPU and no driver.
@pytest.mark.realwheels
@pytest.mark.parametrize("version,status", [("1.12.0", "fail"), ("1.12.1", "pass")])
def test_real_torch_1_12_regression_is_caught_without_a_gpu(tmp_path, version, status):
    from tests import realwheels

    env = realwheels.WheelEnv(
        "lazy-torch%s-py3.10" % version, "3.10", ("torch==%s" % version, "numpy<2")
    )
    try:
        python = realwheels.ensure_env(env)
    except realwheels.EnvUnavailable as exc:
        pytest.skip(str(exc))
    result = realwheels.run_suite(python, ["lazy_cuda_init"], tmp_path)["by_name"]["lazy_cuda_init"]
    assert result["status"] == status, result
    if status == "fail":
        assert "torch.cuda.is_available" in result["observed"]["functions"]
        assert "_prims" in result["evidence"]["calls"][0]["caller"]
