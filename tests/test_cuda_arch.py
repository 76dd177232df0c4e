"""The architecture verdict of ``cuda_devices``: a build's ``torch.cuda.get_arch_list()`` against a
card's compute capability, as a pure function (no torch, no GPU).

The arch lists are real, not invented:

- ``CU102_PIP``: what torch 1.x ``+cu102`` wheels print, quoted in PyTorch's own warning on an
  A100 ("The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70",
  pytorch/pytorch#45028);
- ``CU102_WITH_PTX``: the same build with the ``compute_37`` PTX that other cu102 builds carry
  (warning text quoted in junyanz/pytorch-CycleGAN-and-pix2pix#1490: "... sm_75 compute_37");
- ``CU130_X86``: torch 2.11 ``+cu130`` on x86_64, derived from PyTorch's release build script
  (``.ci/manywheel/build_cuda.sh``, CUDA 13.0: ``TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;9.0;10.0;12.0+PTX"``).
  It is NOT a list recorded on a device: no GPU was lent to the session that wrote this test.
"""

from __future__ import annotations

import pytest

from torch_matrix.probes.standard.cuda_devices import arch_supported, arch_verdict

CU102_PIP = ["sm_37", "sm_50", "sm_60", "sm_70"]
CU102_WITH_PTX = CU102_PIP + ["compute_37"]
CU130_X86 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
H100 = (9, 0)


def test_an_old_build_without_sm_90_fails_on_an_h100():
    verdict = arch_verdict(H100, CU102_PIP)
    assert verdict.kernels is None and arch_supported(H100, CU102_PIP) is None
    assert "no sm_90" in verdict.reason and "sm_37" in verdict.reason


def test_older_generation_ptx_is_tried_through_jit_and_named_as_what_torch_calls_not_compatible():
    """PTX is forward compatible (NVIDIA), so the kernel is tried and the device decides; the same rule
    as torch_matrix.judge.hardware's ptx-jit, so the two can be compared on a device."""
    verdict = arch_verdict(H100, CU102_WITH_PTX)
    assert verdict.kernels == "compute_37 (PTX JIT, older generation)"
    assert "compute_37" in verdict.reason and "not compatible" in verdict.reason
    assert "older generation" not in arch_verdict(H100, CU102_PIP).reason


def test_torch_2_11_cu130_has_native_kernels_for_an_h100():
    verdict = arch_verdict(H100, CU130_X86)
    assert verdict.kernels == "sm_90"
    assert verdict.reason == "sm_90 is in the build"


@pytest.mark.parametrize(
    "capability, expected",
    [
        ((7, 0), None),  # V100: CUDA 13 builds dropped Volta
        ((7, 5), "sm_75"),
        ((8, 9), "sm_86 (binary compatible)"),  # L4 / RTX 40xx run sm_86 cubins
        ((10, 3), "sm_100 (binary compatible)"),
        ((12, 1), "sm_120 (binary compatible)"),  # DGX Spark
    ],
)
def test_cu130_against_other_cards(capability, expected):
    assert arch_supported(capability, CU130_X86) == expected


def test_arch_specific_cubins_count_only_for_their_exact_capability():
    assert arch_supported((9, 0), ["sm_80", "sm_90a"]) == "sm_90a"
    assert arch_supported((9, 1), ["sm_90a"]) is None  # "a" features are not forward compatible
    assert arch_supported((10, 3), ["sm_100f"]) == "sm_100f (binary compatible)"


def test_malformed_entries_are_ignored_not_fatal():
    assert arch_supported(H100, ["", "sm_", "gfx90a", "sm_90"]) == "sm_90"
    assert arch_supported(H100, []) is None
