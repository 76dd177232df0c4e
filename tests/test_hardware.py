"""The hardware verdicts (``torch_matrix.judge.hardware``) against architecture lists read from PyPI's
own wheels, with no GPU: ``tests/fixtures/wheel-builds/torch-*.json`` were recorded by
``torch_matrix/probes/facts.py build`` inside a fresh venv holding each release (the install command is in
each file's ``recorded_with``), one release at a time under ``flock /work/runs/realwheels.lock``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from torch_matrix.judge.hardware import (
    variant_cuda,
    BuildFacts,
    Hardware,
    TargetVerdict,
    arch_judgement,
    cell_verdicts,
    cubin_runs,
    disagreements,
    judge,
    judge_all,
    variant_cuda_for,
)
from torch_matrix.judge.gpus import (
    GPU_CAPABILITIES,
    KNOWN_CAPABILITIES,
    Target,
    TargetError,
    parse_driver,
    parse_gpu,
    targets_of,
)

FIXTURES = Path(__file__).parent / "fixtures" / "wheel-builds"


def recorded(version: str) -> dict:
    return json.loads((FIXTURES / f"torch-{version.replace('+', '_')}.json").read_text())


def build(version: str) -> BuildFacts:
    return BuildFacts.from_facts(recorded(version))


def verdict(version: str, gpu: str = "", driver: str = "") -> TargetVerdict:
    found = judge(build(version), Target(parse_gpu(gpu) if gpu else None, driver))
    assert found is not None
    return found


def test_the_fixtures_are_what_the_wheels_said():
    """The facts the rules are tested on, as recorded (the issue's own figures)."""
    seven = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    expected = {
        "2.2.2": ("12.1", seven),
        "2.4.1": ("12.1", seven),
        "2.6.0": ("12.4", seven),
        "2.7.1": ("12.6", seven),
        "2.13.0": ("13.0", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"),
        "1.13.1": ("11.7", "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86"),
    }
    for version, (cuda, flags) in expected.items():
        facts = recorded(version)
        assert (facts["torch_cuda"], facts["arch_flags"]) == (cuda, flags), version
        # torch.cuda.get_arch_list() answered [] without a device (it asked is_available() first)
        # until a release between 2.7.1 and 2.13.0, which asks only whether CUDA was compiled in.
        without_device = flags.split() if version == "2.13.0" else []
        assert facts["get_arch_list_without_device"] == without_device, version
    assert (
        recorded("2.13.0+cpu")["torch_cuda"] is None
        and recorded("2.13.0+cpu")["arch_flags"] is None
    )


@pytest.mark.parametrize("version", ["1.13.1", "2.2.2", "2.4.1", "2.6.0", "2.7.1"])
def test_a_default_build_before_cuda_12_8_has_no_kernels_for_an_rtx_5090(version):
    found = verdict(version, "RTX 5090")
    assert found.verdict == Hardware.NO_KERNEL_IMAGE
    assert "no sm_120" in found.reason and "no kernel image is available" in found.reason
    assert recorded(version)["arch_flags"] in found.reason  # the build's own list, verbatim


@pytest.mark.parametrize("gpu", ["GTX 1080", "V100", "sm_61", "7.0", "P100"])
def test_torch_2_13_dropped_pascal_and_volta(gpu):
    assert verdict("2.13.0", gpu).verdict == Hardware.NO_KERNEL_IMAGE
    assert verdict("2.7.1", gpu).verdict == Hardware.NATIVE


def test_an_rtx_4090_runs_sm_86_cubins_and_an_h100_its_own():
    found = verdict("2.4.1", "RTX 4090")
    assert (
        found.verdict == Hardware.NATIVE
        and "sm_86 cubins run on compute capability 8.9" in found.reason
    )
    assert verdict("2.13.0", "H100").reason.startswith("sm_90 is in the build's arch list")
    assert verdict("2.13.0", "RTX 5090").verdict == Hardware.NATIVE


def test_a_cpu_build_says_so_for_every_target():
    for target in targets_of(["V100", "RTX 5090"], ["580.82.07"]) + targets_of([], ["470.57"]):
        found = judge(build("2.13.0+cpu"), target)
        assert (
            found is not None
            and found.verdict == Hardware.NO_CUDA
            and "CPU-only build" in found.reason
        )


def test_the_driver_floor_of_each_cuda_major():
    assert (
        verdict("2.13.0", "RTX 4090", "535.104").verdict == Hardware.DRIVER_TOO_OLD
    )  # CUDA 13.0 needs 580
    assert (
        verdict("2.13.0", "RTX 4090", "580.82.07").verdict == Hardware.NATIVE
    )  # 580.82.07 meets 580.65.06


def test_a_driver_is_compared_as_written_never_padded_to_the_floor():
    # '580.65' is below CUDA 13.0's 580.65.06 floor; a branch alone is another matter (issue 45)
    for written in ("580.65", "580.65.05", "575"):
        found = verdict("2.13.0", "RTX 4090", written)
        assert found.verdict == Hardware.DRIVER_TOO_OLD and ">= 580.65.06" in found.reason, written
    for written in ("580.65.06", "580.82.07", "581", "580"):
        assert verdict("2.13.0", "RTX 4090", written).verdict == Hardware.NATIVE, written
    assert (
        verdict("2.4.1", "RTX 4090", "470.57").verdict == Hardware.DRIVER_TOO_OLD
    )  # CUDA 12.1 needs 525.60.13
    assert (
        verdict("1.13.1", "V100", "470.57").verdict == Hardware.NATIVE
    )  # 11.7 by minor version compatibility
    assert "minor version compatibility" in verdict("1.13.1", "V100", "470.57").reason
    assert verdict("2.13.0", driver="575.51").verdict == Hardware.DRIVER_TOO_OLD
    alone = verdict("2.7.1", driver="560.35.03")
    assert alone.verdict == Hardware.NATIVE and "no GPU named" in alone.reason


def test_driver_and_architecture_both_ruling_out_is_driver_too_old_naming_both():
    found = verdict("2.13.0", "V100", "535.104")
    assert found.verdict == Hardware.DRIVER_TOO_OLD
    assert ">= 580.65.06" in found.reason and "no sm_70" in found.reason


def test_torchvisions_newer_runtime_sets_the_driver_floor():
    facts = {**recorded("2.4.1"), "torchvision_ops_cuda": 12060}
    found = judge(BuildFacts.from_facts(facts), Target(parse_gpu("V100"), "550.54"))
    assert found is not None and found.verdict == Hardware.NATIVE
    assert (
        "CUDA 12.6 (torchvision's ops)" in found.reason
        and "minor version compatibility" in found.reason
    )


def test_ptx_runs_through_jit_and_needs_the_toolkit_driver():
    facts = {
        **recorded("2.13.0"),
        "arch_list": None,
        "arch_flags": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120",
    }
    ptx = BuildFacts.from_facts(facts)
    found = judge(ptx, Target(parse_gpu("sm_121")))
    assert found is not None and found.verdict == Hardware.NATIVE  # sm_120 cubins run on 12.1
    jit = judge(
        BuildFacts.from_facts({**facts, "arch_flags": "sm_80 compute_80"}),
        Target(parse_gpu("H100")),
    )
    assert jit is not None and jit.verdict == Hardware.PTX_JIT and "compute_80 PTX" in jit.reason
    # 13.1's toolkit driver is 590.44.01: under minor version compatibility its PTX cannot be JIT-compiled
    newer = BuildFacts.from_facts({**facts, "torch_cuda": "13.1", "arch_flags": "sm_80 compute_80"})
    found = judge(newer, Target(parse_gpu("H100"), "580.65.06"))
    assert found is not None and found.verdict == Hardware.DRIVER_TOO_OLD and "JIT" in found.reason
    found = judge(newer, Target(parse_gpu("A100"), "580.65.06"))
    assert found is not None and found.verdict == Hardware.NATIVE


def test_the_cubin_rules_follow_torchs_device_requirement():
    assert cubin_runs(86, "", 89) and not cubin_runs(86, "", 87)  # Orin runs only sm_87
    assert cubin_runs(87, "", 87) and not cubin_runs(87, "", 89)
    assert cubin_runs(101, "", 110) and not cubin_runs(100, "", 101)
    assert cubin_runs(90, "a", 90) and not cubin_runs(90, "a", 91)
    assert not cubin_runs(90, "", 100)  # never across a major
    assert arch_judgement(100, ["sm_90", "sm_100f"])[0] == Hardware.NATIVE


def test_gpu_names_and_capabilities_parse_with_hints():
    assert parse_gpu("NVIDIA GeForce RTX 4090").capability == 89
    assert parse_gpu("sm_120").label == "sm_120" and parse_gpu("12.0").capability == 120
    assert parse_gpu("rtx-5090").label == "RTX 5090 (sm_120)"
    with pytest.raises(TargetError) as error:
        parse_gpu("RTX 409")
    assert "did you mean 'RTX 4090'" in error.value.hint
    with pytest.raises(TargetError, match="unknown compute capability"):
        parse_gpu("sm_88")
    with pytest.raises(TargetError) as error:
        parse_driver("12.4")
    assert "nvidia-smi" in error.value.hint
    assert all(parse_gpu(name).name == name for name in GPU_CAPABILITIES)


def test_targets_cross_gpus_with_drivers_and_have_stable_names():
    targets = targets_of(["V100", "sm_89"], ["535.104", "580.82.07"])
    assert [t.label for t in targets] == [
        "V100 (sm_70), driver 535.104",
        "V100 (sm_70), driver 580.82.07",
        "sm_89, driver 535.104",
        "sm_89, driver 580.82.07",
    ]
    assert [t.slug for t in targets][:3] == [
        "v100-sm_70-driver-535.104",
        "v100-sm_70-driver-580.82.07",
        "sm_89-driver-535.104",
    ]
    assert [t.label for t in targets_of([], ["580.82.07"])] == ["driver 580.82.07"]


def test_verdicts_round_trip_and_unreadable_facts_judge_nothing():
    found = verdict("2.13.0", "V100")
    assert TargetVerdict.from_json(json.loads(json.dumps(found.to_json()))) == found
    assert judge_all(None, targets_of(["V100"], [])) == ()
    assert (
        judge_all(
            {"torch": "2.4.1", "torch_cuda": "12.1", "arch_flags": None}, targets_of(["V100"], [])
        )
        == ()
    )
    assert judge_all({"error": "import torch failed"}, targets_of(["V100"], [])) == ()


# ----------------------------------------------------------------------------- where a GPU is present
# No GPU was lent to the session that wrote these: the device facts below are shaped like what
# torch_matrix/probes/facts.py gpu_facts() and the cuda_devices probe write, not recorded on a device.


def _device_facts(version: str, name: str, capability: str, driver: str) -> dict:
    return {
        "cuda_available": True,
        "driver": driver,
        "build": recorded(version),
        "devices": [{"index": 0, "name": name, "capability": capability}],
    }


def test_the_device_a_cell_ran_on_is_judged_and_checked_against_the_device_probe():
    facts = _device_facts("2.7.1", "NVIDIA GeForce RTX 5090", "12.0", "570.124.06")
    probe = {
        "name": "cuda_devices",
        "status": "fail",
        "message": "NVIDIA GeForce RTX 5090 (sm_120) has no kernels in this build; is_available() says True",
    }
    found = cell_verdicts(facts, targets_of(["V100"], []), probe)
    assert [v["target"] for v in found] == [
        "V100 (sm_70)",
        "NVIDIA GeForce RTX 5090 (sm_120), driver 570.124.06 (this machine)",
    ]
    assert found[1]["verdict"] == "no-kernel-image" and found[1]["agrees"] is True
    assert disagreements(found) == []


def test_a_disagreement_with_the_device_is_reported_not_smoothed_over():
    facts = _device_facts("2.13.0", "NVIDIA H100 80GB HBM3", "9.0", "580.65.06")
    probe = {
        "name": "cuda_devices",
        "status": "fail",
        "message": "a small kernel failed on NVIDIA H100: no kernel image",
    }
    found = cell_verdicts(facts, (), probe)
    assert found[0]["verdict"] == "native" and found[0]["agrees"] is False
    (line,) = disagreements(found)
    assert "static verdict is native" in line and "cuda_devices fail: a small kernel failed" in line


def test_a_declared_target_that_is_the_device_carries_the_device_answer():
    facts = _device_facts("2.4.1", "Tesla V100-SXM2-32GB", "7.0", "535.104")
    found = cell_verdicts(
        facts, targets_of(["V100"], ["535.104"]), {"name": "cuda_devices", "status": "pass"}
    )
    assert (
        len(found) == 1
        and found[0]["target"] == "V100 (sm_70), driver 535.104"
        and found[0]["agrees"] is True
    )
    skipped = cell_verdicts(
        facts, (), {"name": "cuda_devices", "status": "skip", "message": "no CUDA device"}
    )
    assert "agrees" not in skipped[0]  # no answer from the device: nothing to compare


def test_a_cell_without_build_facts_records_no_verdicts():
    assert cell_verdicts({"devices": [], "driver": None}, targets_of(["V100"], [])) == ()
    assert (
        cell_verdicts({"build": {"error": "import torch failed"}}, targets_of(["V100"], [])) == ()
    )


def test_a_driver_older_than_the_card_is_too_old_whatever_the_build():
    found = verdict(
        "2.8.0", "RTX 5090", "535.104"
    )  # CUDA 12.8 runs on 535 by minor version compatibility ...
    assert (
        found.verdict == Hardware.DRIVER_TOO_OLD
    )  # ... but R535 predates Blackwell (CUDA 12.8: >= 570.26)
    assert "predates the RTX 5090 (sm_120)" in found.reason and ">= 570.26" in found.reason
    assert verdict("2.8.0", "RTX 5090", "570.124.06").verdict == Hardware.NATIVE
    assert (
        verdict("2.8.0", "H100", "515.65").verdict == Hardware.DRIVER_TOO_OLD
    )  # Hopper: CUDA 11.8, 520.61.05
    assert verdict("2.7.1", "V100", "535.104").verdict == Hardware.NATIVE


EXTRA_LISTS = (
    ["sm_80", "compute_80"],
    ["sm_37", "compute_37"],
    ["sm_90a"],
    ["sm_100f", "compute_90a"],
    ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
)


def test_the_device_probe_and_the_static_rules_agree_on_every_card_and_recorded_build():
    """cuda_devices (on a device) and judge.hardware (on CPU) must give the same answer to "does this build
    have code for this card", or a GPU run would report disagreements that are only definitions."""
    from torch_matrix.probes.standard.cuda_devices import arch_verdict

    lists = [
        recorded(f.stem[len("torch-") :].replace("_", "+"))["arch_list"]
        for f in sorted(FIXTURES.glob("*.json"))
    ]
    for arch_list in [a for a in lists if a] + [list(a) for a in EXTRA_LISTS]:
        for capability in sorted(KNOWN_CAPABILITIES):
            probe_runs = (
                arch_verdict((capability // 10, capability % 10), arch_list).kernels is not None
            )
            static = arch_judgement(capability, arch_list)[0]
            assert probe_runs == (static in (Hardware.NATIVE, Hardware.PTX_JIT)), (
                capability,
                arch_list,
                static,
            )


# ----------------------------------------------------------------------------- variant builds
# The PyTorch index is unreachable here, so a variant build (cu126 ...) cannot be installed. Its facts
# come from the installed release's own table of its builds (torch.cuda.PYTORCH_RELEASES_CODE_CC,
# recorded by `torch_matrix/probes/facts.py build` from PyPI's torch 2.13.0 in tests/fixtures/wheel-builds): what
# torch itself uses to advise "reinstall against a CUDA build that does" (not recorded from the variant).


def test_the_release_records_its_variants_builds():
    table = recorded("2.13.0")["release_variants_code_cc"]
    assert table["12.6"]["x86_64"] == [50, 60, 70, 75, 80, 86, 90]
    assert table["13.0"]["x86_64"] == [75, 80, 86, 90, 100, 120]


def variant_facts(
    release_facts: Mapping[str, Any], variant: str, machine: str = "x86_64"
) -> dict[str, Any] | None:
    """The build facts of a sibling variant (``cu126``) of a release, from that release's own table of
    its builds (``torch.cuda.PYTORCH_RELEASES_CODE_CC`` as ``torch_matrix/probes/facts.py build`` recorded it from
    the installed wheel): its CUDA runtime and cubins. None when the table does not list the variant.
    The variant wheels cannot be installed here (the PyTorch index is unreachable): this builds their
    facts for the test from what the default wheel records; an installed variant cell has its own."""
    cuda = variant_cuda(variant)
    table = release_facts.get("release_variants_code_cc")
    if not cuda or not isinstance(table, Mapping) or not isinstance(table.get(cuda), Mapping):
        return None
    by_arch = table[cuda]
    host = "aarch64" if machine.lower() == "aarch64" else "x86_64"
    ccs = by_arch.get(host, by_arch.get("any"))
    if not ccs:
        return None
    public = str(release_facts.get("torch") or "").split("+")[0]
    flags = " ".join(f"sm_{int(cc)}" for cc in sorted(ccs))
    return {
        "torch": f"{public}+{variant}",
        "torch_cuda": cuda,
        "arch_flags": flags,
        "arch_list": flags.split(),
        "source": f"torch.cuda.PYTORCH_RELEASES_CODE_CC of the installed torch {release_facts.get('torch')}",
    }


def test_variant_builds_are_judged_by_the_same_rules():
    cu126 = variant_facts(recorded("2.13.0"), "cu126")
    assert cu126 is not None and cu126["torch"] == "2.13.0+cu126" and cu126["torch_cuda"] == "12.6"
    build = BuildFacts.from_facts(cu126)
    for gpu, expected in (
        ("V100", Hardware.NATIVE),
        ("GTX 1080", Hardware.NATIVE),
        ("RTX 5090", Hardware.NO_KERNEL_IMAGE),
    ):
        found = judge(build, Target(parse_gpu(gpu), "570.124.06"))
        assert found is not None and found.verdict == expected, (gpu, found)
    assert (
        verdict("2.13.0", "V100", "570.124.06").verdict == Hardware.DRIVER_TOO_OLD
    )  # the default (cu130) build
    on_535 = judge(
        build, Target(parse_gpu("V100"), "535.104")
    )  # cu126 on R535: minor version compatibility
    assert (
        on_535 is not None
        and on_535.verdict == Hardware.NATIVE
        and "minor version compatibility" in on_535.reason
    )
    assert variant_facts(recorded("2.13.0"), "cu118") is None  # not a build of 2.13.0
    assert variant_facts(recorded("2.7.1"), "cu126") is None  # 2.7.1 records no such table


def test_the_variant_that_runs_on_a_card_and_driver_is_the_one_pins_advise():
    facts = recorded("2.13.0")
    assert variant_cuda_for(facts, 70, "535.104") == "12.6"  # V100 on R535: cu126
    assert (
        variant_cuda_for(facts, 120, "580.82.07") == "13.2"
    )  # RTX 5090 on R580: the newest that runs
    assert variant_cuda_for(facts, 61, "470.57") == ""  # R470 runs no CUDA 12 or 13 build
