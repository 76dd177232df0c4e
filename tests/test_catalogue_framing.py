"""A fix framed on the release that broke the user's call (issue 42): timm's ``from torch._six
import container_abcs`` broke at torch 1.9 (its pin is ``torch<1.9``), so its fix never says
"torch 2.0.0: torch._six was removed", even where torch._six is gone altogether."""

from __future__ import annotations

import pytest

from torch_matrix.judge.catalogue import TORCH_SIX, TORCH_SIX_SHIMS, cause_of, diagnose

TIMM_FRAME = {
    "path": "timm/models/layers/helpers.py",
    "line": 6,
    "code": "from torch._six import container_abcs",
}


@pytest.mark.parametrize(
    "message",
    [
        "ImportError: cannot import name 'container_abcs' from 'torch._six'",  # torch 1.9-1.13
        "ModuleNotFoundError: No module named 'torch._six'",  # torch >= 2.0
    ],
)
def test_timms_container_abcs_break_is_framed_on_1_9(message):
    finding = diagnose(message, [TIMM_FRAME])
    assert finding is not None and finding.change is TORCH_SIX_SHIMS
    advice = finding.advice()
    assert advice.startswith("torch 1.9.0: ")
    assert "torch 2.0.0: torch._six was removed" not in advice
    assert "collections.abc" in advice
    cause = cause_of(message, frames=[TIMM_FRAME])
    assert "(torch 1.9.0)" in cause.what and "2.0.0)" not in cause.what


def test_a_string_classes_import_is_still_the_2_0_removal():
    frame = {
        "path": "tests/test_case.py",
        "line": 1,
        "code": "from torch._six import string_classes",
    }
    finding = diagnose("ModuleNotFoundError: No module named 'torch._six'", [frame])
    assert finding is not None and finding.change is TORCH_SIX
    assert finding.advice().startswith("torch 2.0.0: torch._six was removed")
