"""The cells × hardware targets verdicts a plan gives before anything is installed.

Pure: a function of each cell's build facts as read from its wheels
(``torch_matrix.world.wheelfacts``) and the spec's targets; the verdicts are
``torch_matrix.judge.hardware``'s, the same a cell gives from its installed build. A cell whose
wheel could not be read is named with the reason: it is judged from its installed build instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_matrix.judge.gpus import Target
from torch_matrix.judge.hardware import TargetVerdict, judge_all

MARKS = {
    "native": "native",
    "ptx-jit": "ptx-jit",
    "no-kernel-image": "✗ no kernel image",
    "driver-too-old": "✗ driver too old",
    "no-cuda": "– no CUDA",
}


@dataclass(frozen=True)
class CellBuild:
    """One cell's build as its wheels say: ``facts`` in ``build_facts``' shape, or why none."""

    cell_id: str
    torch: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    why_not: str = ""  # "" when ``facts`` judge the cell

    @property
    def read(self) -> bool:
        return not self.why_not and bool(self.facts)


def verdicts(build: CellBuild, targets: Iterable[Target]) -> tuple[TargetVerdict, ...]:
    return judge_all(build.facts, targets) if build.read else ()


def table(
    builds: Sequence[CellBuild], targets: Sequence[Target]
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: cell, its build (torch+label, CUDA, arch list), a verdict per target."""
    headers = ["cell", "build", "CUDA", "arch list", *(t.label for t in targets)]
    rows = []
    for build in builds:
        if not build.read:
            continue
        found = {v.target: v for v in verdicts(build, targets)}
        rows.append(
            [
                build.cell_id,
                str(build.facts.get("torch") or build.torch),
                str(build.facts.get("torch_cuda") or "cpu"),
                str(build.facts.get("arch_flags") or "—"),
                *(
                    MARKS.get(str(found[t.label].verdict), "?") if t.label in found else ""
                    for t in targets
                ),
            ]
        )
    return headers, rows


def unread(builds: Sequence[CellBuild]) -> list[str]:
    """``cell: reason`` for each cell whose wheel did not give its facts."""
    return [f"{b.cell_id}: {b.why_not or 'no build facts'}" for b in builds if not b.read]


def to_json(build: CellBuild, targets: Sequence[Target]) -> dict[str, Any]:
    """A cell's plan-time hardware entry for ``torch-matrix plan --json``."""
    if not build.read:
        return {"read_from": "installed build", "why": build.why_not}
    return {
        "read_from": "wheel",
        "torch": build.facts.get("torch"),
        "cuda": build.facts.get("torch_cuda"),
        "arch_list": list(build.facts.get("arch_list") or ()),
        "verdicts": [v.to_json() for v in verdicts(build, targets)],
    }
