"""What a real GPU said, against what torch-matrix judges without one.

The fixture (tests/fixtures/device/h200-torch-2.11.0/, its README says how it was read) is the
probe suite and the build facts of torch 2.11.0+cu130 run on a lent NVIDIA H200. The static
verdict for that card and driver must be the one the device showed (the CUDA probes ran), and a
card the build has no kernel for must not be judged runnable from the same facts.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch_matrix.judge.hardware import cell_verdicts, disagreements
from torch_matrix.judge.gpus import targets_of

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "device" / "h200-torch-2.11.0"


def _device() -> tuple[dict, dict]:
    probes = json.loads((FIXTURE / "probes.json").read_text(encoding="utf-8"))
    gpu = dict(probes["gpu"], build=json.loads((FIXTURE / "build.json").read_text("utf-8")))
    results = probes["results"]
    by_name = {r["name"]: r for r in results} if isinstance(results, list) else dict(results)
    return gpu, by_name


def test_the_device_ran_the_cuda_probes():
    gpu, probes = _device()
    assert gpu["devices"] == [{"index": 0, "name": "NVIDIA H200", "capability": "9.0"}]
    assert gpu["driver"] == "580.159.04" and gpu["cuda_available"] is True
    for name in ("cuda_devices", "lazy_cuda_init", "mixed_precision", "determinism"):
        assert probes[name]["status"] == "pass", (name, probes[name].get("message"))
    assert probes["checkpoint_roundtrip"]["status"] == "fail"  # torch.load's default, as on CPU
    assert "changed default" in probes["checkpoint_roundtrip"]["message"]


def test_the_static_verdict_for_the_h200_is_what_the_device_did():
    gpu, probes = _device()
    targets = targets_of(["H200", "GTX 1080", "V100"], ["580.159.04"])
    verdicts = {v["target"]: v for v in cell_verdicts(gpu, targets, probes["cuda_devices"])}
    h200 = next(v for label, v in verdicts.items() if label.startswith("H200"))
    assert h200["verdict"] == "native" and h200["agrees"] is True, h200
    assert disagreements(verdicts.values()) == []
    # the same build facts, judged for cards it has no kernels for (sm_61, sm_70: dropped in cu130)
    others = {label.split(" (")[0]: v["verdict"] for label, v in verdicts.items()}
    assert others["GTX 1080"] == others["V100"] == "no-kernel-image"
