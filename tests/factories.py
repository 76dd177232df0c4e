"""Small builders of test data (Cell, ProbeResult, CellResult), shared by every test module.

Every argument has a plain default so a test names only what it is about:
``make_result(torch="2.5.1", probes=[make_probe("training_step", "fail")])``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torch_matrix.vocab.records import (
    INSTALLED,
    PASS,
    Cell,
    CellResult,
    InstallOutcome,
    ProbeResult,
)


def cell_id(
    torch: str, python: str, variant: str = "default", extras: Mapping[str, str] | None = None
) -> str:
    """The contract's id shape (``t2.5.1-cu124-py3.11-numpy2``), good enough for tests."""
    parts = [f"t{torch}"]
    if variant != "default":
        parts.append(variant)
    parts.append(f"py{python}")
    operators = (
        ("<=", "le"),
        (">=", "ge"),
        ("==", "eq"),
        ("!=", "ne"),
        ("~=", "compat"),
        ("<", "lt"),
        (">", "gt"),
    )
    for name, value in (extras or {}).items():
        for operator, word in operators:
            value = value.replace(operator, word)
        parts.append(name + "".join(ch for ch in value if ch.isalnum() or ch in "._-"))
    return "-".join(parts)


def make_cell(
    torch: str = "2.5.1",
    python: str = "3.11",
    variant: str = "default",
    torchvision: str = "0.20.1",
    extras: Mapping[str, str] | None = None,
    probes: Iterable[str] = ("install_sanity",),
    required_probes: Iterable[str] = (),
    id: str | None = None,
    policy: Mapping[str, str] | None = None,
    plan_note: str = "",
) -> Cell:
    axes = {
        "python": python,
        "torch": torch,
        "torchvision": torchvision,
        "variant": variant,
        **dict(extras or {}),
    }
    requirements = [f"torch=={torch}"] + ([f"torchvision=={torchvision}"] if torchvision else [])
    requirements += [f"{name}{value}" for name, value in (extras or {}).items()]
    kwargs: dict[str, Any] = {}
    if policy is not None:
        kwargs["policy"] = dict(policy)
    return Cell(
        id=id or cell_id(torch, python, variant, extras),
        axes=axes,
        requirements=tuple(requirements),
        probes=tuple(probes),
        required_probes=tuple(required_probes),
        plan_note=plan_note,
        **kwargs,
    )


def make_probe(
    name: str = "install_sanity", status: str = PASS, message: str = "", **fields: Any
) -> ProbeResult:
    """``fields`` are any other ProbeResult fields: observed, expected, repro, evidence, ..."""
    return ProbeResult(name=name, status=status, message=message, duration_s=0.5, **fields)


def make_result(
    cell: Cell | None = None,
    *,
    status: str = INSTALLED,
    message: str = "",
    probes: Iterable[ProbeResult] | None = None,
    resolved: Mapping[str, str] | None = None,
    finished_at: str = "2026-11-21T08:00:10+00:00",
    fingerprint: str | None = None,
    total_s: float = 12.5,
    **cell_fields: Any,
) -> CellResult:
    """A finished cell. ``cell_fields`` go to ``make_cell`` when no ``cell`` is given
    (``probes`` here are ProbeResults; to choose the probes a cell asks for, pass ``make_cell(probes=...)``).

    Installed cells default to one passing probe per probe the cell asked for;
    unsatisfiable/error cells default to no probes.
    """
    cell = cell or make_cell(**cell_fields)
    if probes is None:
        probes = [make_probe(name) for name in cell.probes] if status == INSTALLED else []
    if resolved is None and status == INSTALLED:
        resolved = {
            "torch": cell.torch,
            **({"torchvision": cell.torchvision} if cell.torchvision else {}),
        }
    return CellResult(
        cell=cell,
        fingerprint=cell.fingerprint() if fingerprint is None else fingerprint,
        install=InstallOutcome(
            status=status,
            message=message,
            resolved=dict(resolved or {}),
            command=("uv", "pip", "install", *cell.requirements),
        ),
        probes=tuple(probes),
        interpreter={"version": cell.python + ".0", "path": f"/usr/bin/python{cell.python}"},
        platform={"system": "Linux", "machine": "x86_64"},
        timings={"install": total_s / 2, "probes": total_s / 2, "total": total_s},
        started_at="2026-11-21T08:00:00+00:00",
        finished_at=finished_at,
        tool_version="0.1.0",
    )
