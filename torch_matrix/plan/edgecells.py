"""The cell that tests one edge release (pure): a grid cell of the break with its axis moved.

``edge_cell`` (torch, its torchvision paired), ``vision_edge_cell`` (torchvision, the torch it
requires), ``extras_edge_cell`` (an extras package, torch held), ``configuration_cell`` (a bad
edge release in an interaction's passing configuration); ``moved_cell`` picks one by axis. The
cell asks only the break's probes (``asking_only``) and installs the environment fixes its
context confirmed (``with_fixes``). Where the edges are: ``plan.breaks``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

from packaging.version import Version

from torch_matrix.plan.breaks import (
    EDGE_SEPARATOR,
    OTHER_CONFIGURATION,
    TORCH,
    TORCHVISION,
    OtherConfiguration,
    value_on,
)
from torch_matrix.plan.counterfactual import (
    probe_subset,
    requirement_name,
    with_requirement,
)
from torch_matrix.vocab.layout import ID_UNSAFE
from torch_matrix.vocab.records import (
    ORIGIN_EDGE,
    Cell,
    CellResult,
)


def _difference(cell: CellResult, other: CellResult, axis: str) -> list[tuple[str, str, str]]:
    """(axis, this cell's value, the other's) on every held axis where the two configurations differ."""
    free = {TORCH, TORCHVISION} if axis in (TORCH, TORCHVISION) else {axis}
    names = [name for name in cell.cell.axes if name not in free]
    return [
        (name, cell.cell.axes.get(name, ""), other.cell.axes.get(name, ""))
        for name in names
        if cell.cell.axes.get(name, "") != other.cell.axes.get(name, "")
    ]


def configuration_cell(
    wanted: OtherConfiguration,
    *,
    pairing: Mapping[str, str] | None = None,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
) -> Cell:
    """The edge release in the passing configuration: the passing grid cell with the edge's axis at
    ``release``, every other axis and requirement as that grid cell has them (so it resolves what
    the grid cell resolved, and counts in the grid cell's context)."""
    edge, good = wanted.edge, wanted.good
    differ = _difference(good, wanted.bad, edge.axis)
    shown = ", ".join(f"{name}{_as_requirement(value)}" for name, value, _ in differ)
    failing = ", ".join(f"{name}{_as_requirement(value)}" for name, _, value in differ)
    reason = (
        f"{edge.axis} {wanted.release} in the finding's other configuration ({shown}, where "
        f"{edge.axis} {value_on(good, edge.axis)} passes [{good.cell.id}]): does it fail only with "
        f"{failing} [{wanted.bad.cell.id}]?"
    )
    cell = moved_cell(
        good.cell,
        edge.axis,
        wanted.release,
        pairing=pairing,
        torch_of=torch_of,
        pythons=pythons,
        reason=reason,
    )
    return dataclasses.replace(cell, tags=(*cell.tags, OTHER_CONFIGURATION))


def _as_requirement(value: str) -> str:
    return value if value[:1] in "<>=!~" else f"=={value}"


def moved_cell(
    base: Cell,
    axis: str,
    version: str,
    *,
    pairing: Mapping[str, str] | None = None,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    if axis == TORCH:
        return edge_cell(base, version, pairing=pairing, pythons=pythons, reason=reason)
    if axis == TORCHVISION:
        return vision_edge_cell(base, version, torch_of=torch_of, pythons=pythons, reason=reason)
    return extras_edge_cell(base, axis, version, pythons=pythons, reason=reason)


def extras_edge_cell(
    base: Cell, axis: str, version: str, *, pythons: frozenset[str] | None = None, reason: str = ""
) -> Cell:
    """``base`` with the extras package ``axis`` at exactly ``version`` (torch held), as an ``edge``
    follow-up: its axis value is ``==version``, its requirement ``axis==version``."""
    old = base.axes.get(axis, "")
    requirements = tuple(
        f"{axis}=={version}" if requirement == f"{axis}{old}" else requirement
        for requirement in base.requirements
    )
    if f"{axis}=={version}" not in requirements:
        requirements = (*requirements, f"{axis}=={version}")
    note = ""
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        note = f"no {axis} {version} wheel for Python {base.python} on the index (wheels for: {served})"
    cell_id = ID_UNSAFE.sub("_", f"{base.id}-{axis}{version}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if t != "planned-unsatisfiable"]
    return dataclasses.replace(
        base,
        id=cell_id,
        axes={**base.axes, axis: f"=={version}"},
        requirements=requirements,
        plan_note=note,
        tags=(*tags, ORIGIN_EDGE),
        origin=ORIGIN_EDGE,
        reason=reason,
    )


def edge_cell(
    base: Cell,
    version: str,
    *,
    pairing: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    """``base`` with torch ``version`` (and its paired torchvision when ``base`` has one from
    ``pairing``), as an ``edge`` follow-up. Planning already knows when it cannot install."""
    notes = []
    vision = base.torchvision
    if vision and pairing is not None:
        vision = pairing.get(version, "")
        if not vision:
            notes.append(f"no torchvision release requires torch=={version}")
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(
            f"no torch {version} wheel for Python {base.python} on the index (wheels for: {served})"
        )
    return _pair_cell(base, version, vision, notes, reason)


def vision_edge_cell(
    base: Cell,
    version: str,
    *,
    torch_of: Mapping[str, str] | None = None,
    pythons: frozenset[str] | None = None,
    reason: str = "",
) -> Cell:
    """``base`` with torchvision ``version`` and the torch that release requires (``torch_of``:
    torchvision release -> torch, read from its Requires-Dist), as an ``edge`` follow-up on the
    torchvision axis. Without a torch for it, the cell is planned unsatisfiable and says why."""
    notes = []
    torch = (torch_of or {}).get(version, "")
    if not torch:
        notes.append(f"torchvision {version} requires no single torch release on the index")
        torch = base.torch
    if pythons is not None and base.python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(
            f"no torchvision {version} wheel for Python {base.python} on the index (wheels for: {served})"
        )
    return _pair_cell(base, torch, version, notes, reason, vision_token=True)


def _pair_cell(
    base: Cell,
    torch: str,
    vision: str,
    notes: Sequence[str],
    reason: str,
    vision_token: bool = False,
) -> Cell:
    """``base`` with torch ``torch`` and torchvision ``vision`` (dropped when ""), as an edge cell:
    requirements, id (``t<torch>``, ``-tv<vision>`` where the id names torchvision) and tags follow."""
    axes = dict(base.axes)
    old_torch, old_vision = base.torch, base.torchvision
    axes["torch"] = torch
    axes["torchvision"] = vision
    requirements = []
    for requirement in base.requirements:
        if requirement == f"torch=={old_torch}":
            requirement = f"torch=={torch}"
        elif old_vision and requirement == f"torchvision=={old_vision}":
            if not vision:
                continue
            requirement = f"torchvision=={vision}"
        requirements.append(requirement)
    token = f"t{old_torch}"
    rest = base.id[len(token) :] if base.id.startswith(token) else "-" + base.id
    if old_vision and f"-tv{old_vision}" in rest:
        rest = rest.replace(f"-tv{old_vision}", f"-tv{vision}" if vision else "", 1)
    elif vision_token and vision:
        rest = f"-tv{vision}{rest}"
    cell_id = ID_UNSAFE.sub("_", f"t{torch}{rest}{EDGE_SEPARATOR}")
    tags = [t for t in base.tags if not t.startswith("torch") and t != "planned-unsatisfiable"]
    release = Version(torch)
    tags = [f"torch{release.major}.{release.minor}", *tags, ORIGIN_EDGE]
    return dataclasses.replace(
        base,
        id=cell_id,
        axes=axes,
        requirements=tuple(requirements),
        plan_note="; ".join(list(notes)[:1]),
        tags=tuple(tags),
        origin=ORIGIN_EDGE,
        reason=reason,
    )


def with_fixes(cell: Cell, fixes: Sequence[tuple[str, str]], axis: str = TORCH) -> Cell:
    """``cell`` with each confirmed environment fix of its context (``_confirmed_fixes``) installed
    from the start: a release next to one that needed ``setuptools<82`` would need it too, and its
    plain cell would cost a counterfactual more. The id says so (``...-with-setuptools_82-edge``).
    A fix on the ``axis`` the edge moves is not installed: it would replace the release the cell
    tests (an edge at setuptools 83.0.0 "with setuptools<82" installed 81.0.0)."""
    moving = {TORCH, TORCHVISION} if axis in (TORCH, TORCHVISION) else {requirement_name(axis)}
    wanted = [
        (fix, source)
        for fix, source in fixes
        if fix not in cell.requirements and requirement_name(fix) not in moving
    ]
    if not wanted or not cell.id.endswith(EDGE_SEPARATOR):
        return cell
    tokens = "".join(f"-with-{ID_UNSAFE.sub('_', fix).strip('_')}" for fix, _ in wanted)
    told = "; ".join(
        f"{fix}: the environment fix {source} confirmed in this context" for fix, source in wanted
    )
    return dataclasses.replace(
        cell,
        id=cell.id[: -len(EDGE_SEPARATOR)] + tokens + EDGE_SEPARATOR,
        requirements=functools.reduce(
            with_requirement, (fix for fix, _ in wanted), cell.requirements
        ),
        reason=f"{cell.reason} (with {told})" if cell.reason else f"with {told}",
    )


def asking_only(cell: Cell, deciding: Sequence[str]) -> Cell:
    """An edge cell that runs only the probes ``deciding`` its break (and the install check they
    rest on, ``install_sanity``, where its suite has it): ``probe_subset``. Its probes and required
    probes stay the grid's, so it is judged in the grid's context; its verdict is the subset's and
    its other results are neither run nor claimed (``judge.verdict``, ``run.cellrun``)."""
    if not deciding or cell.probe_subset:
        return cell
    return dataclasses.replace(cell, probe_subset=probe_subset(cell, deciding))
