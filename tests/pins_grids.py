"""Realistic outcome grids for the pins tests, built with tests.factories."""

from __future__ import annotations

from collections.abc import Callable

from torch_matrix.vocab.records import INSTALL_ERROR, UNSATISFIABLE, CellResult
from tests.factories import make_probe, make_result

PAIRED_TORCHVISION = {
    "1.11.0": "0.12.0",
    "1.12.0": "0.13.0",
    "1.12.1": "0.13.1",
    "1.13.1": "0.14.1",
    "2.0.1": "0.15.2",
    "2.1.2": "0.16.2",
    "2.2.2": "0.17.2",
    "2.3.1": "0.18.1",
    "2.4.1": "0.19.1",
    "2.5.1": "0.20.1",
    "2.6.0": "0.21.0",
    "2.7.0": "0.22.0",
}


def cell(
    torch: str,
    python: str = "3.10",
    *,
    fail: str = "",
    message: str = "",
    variant: str = "default",
    torchvision: str | None = None,
    numpy: tuple[str, str] | None = None,
    probe: str = "",
    observed=None,
    expected=None,
    local: str = "",
) -> CellResult:
    """One installed cell; ``fail`` names the failing probe (others pass)."""
    names = ["install_sanity", probe or fail or "training_step"]
    probes = [
        make_probe(
            name,
            "fail" if name == fail else "pass",
            message if name == fail else "",
            observed=observed if name == fail else None,
            expected=expected if name == fail else None,
        )
        for name in dict.fromkeys(names)
    ]
    tv = PAIRED_TORCHVISION.get(torch, "") if torchvision is None else torchvision
    resolved = {"torch": torch + (f"+{local}" if local else "")}
    if tv:
        resolved["torchvision"] = tv
    extras = {}
    if numpy:
        extras["numpy"] = numpy[0]
        resolved["numpy"] = numpy[1]
    return make_result(
        torch=torch,
        python=python,
        variant=variant,
        torchvision=tv,
        extras=extras or None,
        probes=probes,
        resolved=resolved,
    )


def single_bad_patch(with_torchvision: bool = False) -> list[CellResult]:
    """torch 1.12.0 initialises CUDA at import (the yolov5 case)."""
    out = []
    for torch in ("1.11.0", "1.12.0", "1.12.1", "1.13.1"):
        for python in ("3.9", "3.10"):
            bad = torch == "1.12.0"
            out.append(
                cell(
                    torch,
                    python,
                    torchvision=None if with_torchvision else "",
                    probe="lazy_cuda_init",
                    fail="lazy_cuda_init" if bad else "",
                    message="CUDA was initialised by `import torch`",
                    observed=True,
                    expected=False,
                )
            )
    return out


def numpy2_range() -> list[CellResult]:
    """torch < 2.3 wheels were built against NumPy 1 and break with NumPy 2."""
    out = []
    for torch in ("2.1.2", "2.2.2", "2.3.1"):
        for numpy in (("<2", "1.26.4"), (">=2", "2.0.2")):
            bad = numpy[1].startswith("2") and torch != "2.3.1"
            out.append(
                cell(
                    torch,
                    "3.11",
                    torchvision="",
                    numpy=numpy,
                    probe="numpy_interop",
                    fail="numpy_interop" if bad else "",
                    local="cu121",
                    message="A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.2",
                )
            )
    return out


def one_python() -> list[CellResult]:
    """torch.compile is unsupported on Python 3.12 before torch 2.4."""
    out = []
    for torch in ("2.2.2", "2.3.1", "2.4.1"):
        for python in ("3.10", "3.11", "3.12"):
            bad = python == "3.12" and torch != "2.4.1"
            out.append(
                cell(
                    torch,
                    python,
                    torchvision="",
                    probe="torch_compile",
                    fail="torch_compile" if bad else "",
                    message="Dynamo is not supported on Python 3.12+",
                )
            )
    return out


def upper_bound() -> list[CellResult]:
    """torch.load defaults to weights_only=True from 2.6: checkpoints with pickled objects fail."""
    out = []
    for torch in ("2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.0"):
        bad = torch in ("2.6.0", "2.7.0")
        out.append(
            cell(
                torch,
                "3.11",
                torchvision="",
                probe="checkpoint_roundtrip",
                fail="checkpoint_roundtrip" if bad else "",
                message="Weights only load failed: Unsupported global: argparse.Namespace",
            )
        )
    return out


def one_variant() -> list[CellResult]:
    """torch 2.6.0 fails mixed precision only in the cu118 build."""
    out = []
    for torch in ("2.5.1", "2.6.0", "2.7.0"):
        for variant in ("cu118", "cu126"):
            bad = torch == "2.6.0" and variant == "cu118"
            out.append(
                cell(
                    torch,
                    "3.11",
                    torchvision="",
                    variant=variant,
                    probe="mixed_precision",
                    fail="mixed_precision" if bad else "",
                    local=variant,
                    message="bf16 autocast result differs from fp32 beyond tolerance",
                )
            )
    return out


def install_errors_only() -> list[CellResult]:
    """Good cells, plus cells whose install broke or could not resolve: no pins from those."""
    out = [cell(torch, "3.11", torchvision="") for torch in ("2.4.1", "2.5.1")]
    out.append(
        make_result(
            torch="2.6.0",
            python="3.11",
            torchvision="",
            status=INSTALL_ERROR,
            message="network timeout while downloading torch-2.6.0 (3 attempts)",
        )
    )
    out.append(
        make_result(
            torch="1.12.0",
            python="3.12",
            torchvision="",
            status=UNSATISFIABLE,
            message="no wheel for torch==1.12.0 on cp312",
        )
    )
    return out


GRIDS: dict[str, Callable[[], list[CellResult]]] = {
    "single_bad_patch": single_bad_patch,
    "bad_release_paired_torchvision": lambda: single_bad_patch(with_torchvision=True),
    "numpy2_range": numpy2_range,
    "one_python": one_python,
    "upper_bound": upper_bound,
    "one_variant": one_variant,
    "install_errors": install_errors_only,
}

RELEASED = {
    "torch": ["1.10.2", "1.11.0", "1.12.0", "1.12.1", "1.13.0", "1.13.1", "2.0.0rc1", "2.0.1"],
    "torchvision": ["0.12.0", "0.13.0", "0.13.1", "0.14.0", "0.14.1", "0.15.2"],
}
