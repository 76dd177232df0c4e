"""Counterfactual cells: before a failure is blamed, run the cell that isolates the blame.

Pure planning: a function of one finished ``CellResult`` and its verdict. The cells it returns
are ordinary ``Cell``s (same axes, same probes, one requirement more), run by the ordinary
cell machinery right after the cell they test (``torch_matrix.run.sessions``), with their own result
files. Their results are evidence like any other cell's:

- an environment failure ``No module named 'setuptools'`` (``torch_matrix.judge.causes``) plans the same
  cell with ``setuptools`` added. If it passes, the versions work once the environment is
  fixed, and the advice is confirmed (the pins report names the passing cell);
- torch and torchvision from different builds (``mismatched-build``: e.g. a ``+cpu`` torch from a
  find-links directory next to PyPI's torchvision) plans the same cell with that build excluded
  (``torch!=2.13.0+cpu``), so the resolver takes the build the companion was made with. If it
  passes, the release works and only the pairing of builds was wrong;
- a version exclusion is confirmed from the grid itself: the pins name a passing cell that
  differs only on the blamed axis (``torch_matrix.pins.search``), or mark the exclusion unconfirmed.

Bounded: counterfactual cells are follow-up cells (``plan.followups``): they share its cap per
run (``TORCH_MATRIX_FOLLOWUPS``; ``0`` switches them off), printed when a run plans one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from torch_matrix.judge.causes import EnvironmentKind
from torch_matrix.vocab.records import (
    CORE_AXES,
    ORIGIN_COUNTERFACTUAL,
    Cell,
    CellResult,
    local_label,
)
from torch_matrix.judge.verdict import verdict_of

TAG = "counterfactual"
NEEDED = (
    "install_sanity"  # every probe's premise: the pinned versions import and are what was asked
)
_SEPARATOR = "-cf-"
MAX_FIXES = 3  # environment fixes one counterfactual chain may stack (numpy, then setuptools, ...)


def is_counterfactual(cell_id: str) -> bool:
    return _SEPARATOR in cell_id


def counterfactual_of(cell_id: str) -> str:
    """The id of the cell a counterfactual tests (the id itself for an ordinary cell)."""
    return cell_id.split(_SEPARATOR, 1)[0]


def _token(requirement: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", requirement).strip("_")


def parent_counterfactual(cell_id: str) -> str:
    """The cell a counterfactual's last fix was added to: ``A-cf-with-numpy`` for
    ``A-cf-with-numpy-with-setuptools``, ``A`` for ``A-cf-with-numpy``, the id for any other."""
    if not is_counterfactual(cell_id):
        return cell_id
    original, steps = cell_id.split(_SEPARATOR, 1)
    parts = steps.split("-with-")
    if len(parts) == 1:
        return original
    return original + _SEPARATOR + "-with-".join(parts[:-1])


def fixes_applied(cell: Cell) -> int:
    """How many fixes a counterfactual carries (0 for an ordinary cell)."""
    if not is_counterfactual(cell.id):
        return 0
    return len(cell.id.split(_SEPARATOR, 1)[1].split("-with-"))


def plan_counterfactuals(result: CellResult) -> list[Cell]:
    """The cells that would isolate the blame for ``result``'s failure (none when it passed).

    A counterfactual that fails for want of another module (torch 2.2.0's torch.compile misses
    numpy, then, numpy added, setuptools) gets one more, with both fixes (``A-cf-with-numpy-with-
    setuptools``), up to ``MAX_FIXES``; never one that adds a requirement it already has."""
    cell = result.cell
    chained = is_counterfactual(cell.id)
    if chained and fixes_applied(cell) >= MAX_FIXES:
        return []
    have = {requirement_name(r) for r in cell.requirements}
    verdict = verdict_of(result)
    added: dict[
        tuple[str, str], list[str]
    ] = {}  # (id suffix, requirement) -> the probes it concerns
    for name, attribution in verdict.environment.items():
        step: tuple[str, str] | None
        if (
            attribution.kind in (EnvironmentKind.MISSING_DEPENDENCY, EnvironmentKind.NUMPY_ABI)
            and attribution.requirement
        ):
            step = (f"with-{_token(attribution.requirement)}", attribution.requirement)
            if chained and requirement_name(attribution.requirement) in have:
                continue  # the fix was applied and did not help: no loop
        elif chained:
            continue
        elif attribution.kind == EnvironmentKind.MISMATCHED_BUILD:
            step = _matched_build(result.install.resolved)
        else:
            continue
        if step is not None:
            # "install": ``import torch`` itself failed, so every probe of the cell is concerned.
            added.setdefault(step, []).extend([name] if name != "install" else cell.probes)
    cells = []
    for (suffix, requirement), concerned in added.items():
        cells.append(
            Cell(
                id=f"{cell.id}-{suffix}" if chained else f"{cell.id}{_SEPARATOR}{suffix}",
                axes=dict(cell.axes),
                requirements=with_requirement(cell.requirements, requirement),
                probes=cell.probes,
                required_probes=cell.required_probes,
                tags=tuple(dict.fromkeys((*cell.tags, TAG, f"{TAG}-of-{cell.id}"))),
                policy=dict(cell.policy),
                install=cell.install,
                install_digest=cell.install_digest,
                probe_subset=probe_subset(cell, concerned),
                origin=ORIGIN_COUNTERFACTUAL,
                reason=f"{cell.id} with {requirement}",
            )
        )
    return cells


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names, normalized (``Setuptools>=82`` -> ``setuptools``)."""
    name = re.split(r"[<>=!~;\[ @(]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def with_requirement(requirements: Sequence[str], fix: str) -> tuple[str, ...]:
    """``requirements`` with ``fix`` last, replacing every requirement on the same distribution: a fix
    on an axis the cell pins replaces that axis value (``setuptools>=82`` becomes ``setuptools<82``,
    never both, which no installer can satisfy). A requirement on another distribution, or a
    mismatched-build exclusion of torch's own build (``torch!=2.13.0+cpu`` next to ``torch==2.13.0``),
    which narrows rather than contradicts, is kept."""
    name = requirement_name(fix)
    narrows = fix.lstrip().startswith(name) and "!=" in fix and "<" not in fix and ">" not in fix
    kept = tuple(
        requirement
        for requirement in requirements
        if narrows or requirement_name(requirement) != name
    )
    return (*kept, fix)


def replaced_by(cell: Cell) -> str:
    """The requirement of the cell a counterfactual follows up that its fix replaced (``""``: the
    fix was added): the axis requirement on the fix's distribution (``setuptools>=82``)."""
    if not is_counterfactual(cell.id) or not cell.requirements:
        return ""
    name = requirement_name(cell.requirements[-1])
    if any(requirement_name(r) == name for r in cell.requirements[:-1]):
        return ""
    for axis, value in cell.axes.items():  # an extras axis' requirement is ``f"{axis}{value}"``
        if value and axis not in CORE_AXES and requirement_name(axis) == name:
            return f"{axis}{value}"
    return ""


def probe_subset(cell: Cell, concerned: Sequence[str]) -> tuple[str, ...]:
    """What a counterfactual runs: the probes its finding concerns, and what they need (the
    install check, ``install_sanity``, when the cell's suite has it); the rest is the original's."""
    needed = (
        [NEEDED] if NEEDED not in concerned and (not cell.probes or NEEDED in cell.probes) else []
    )
    return tuple(dict.fromkeys([*needed, *concerned]))


def _matched_build(resolved: Mapping[str, str]) -> tuple[str, str] | None:
    """The requirement that keeps the odd build out: the package whose local label
    (``+cpu``, ``+cu121``) its companion lacks or does not share, excluded exactly."""
    torch, vision = resolved.get("torch", ""), resolved.get("torchvision", "")
    torch_label, vision_label = local_label(torch), local_label(vision)
    if torch_label == vision_label:
        return None
    name, version = ("torch", torch) if torch_label else ("torchvision", vision)
    return "matched-build", f"{name}!={version}"
