"""What a cell's install weighs: its wheels resolved from the index (``world.wheelset``) and what
its ``install`` items add (named requirements, a requirements file, a local project's declared
dependencies, local wheel files), and a follow-up cell's cost. The budget they are held to is
``run.disk``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_matrix.plan.cost import Wheel, WheelSet
from torch_matrix.spec.model import DEFAULT_VARIANT, Spec
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell


def named_requirements(items: Sequence[str]) -> list[str]:
    """The install items that name a package on the index (``pytest>=8``), not a path or a file
    (``.[test]``, ``-r requirements.txt``: see ``install_items_cost``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for item in items:
        text = item.strip()
        if text.startswith(("-", ".", "/", "~")) or "@" in text:
            continue
        try:
            Requirement(text)
        except InvalidRequirement:
            continue
        found.append(text)
    return found


@dataclass(frozen=True)
class ItemsCost:
    """What a cell's ``install`` items add to its cost: requirements to resolve on the index (the
    named ones, those of a requirements file, a local project's declared dependencies), local wheel
    files (sized by ``stat`` and their zip directory), and what cannot be sized, each with why."""

    requirements: tuple[str, ...] = ()
    wheels: tuple[Wheel, ...] = ()
    unknown: tuple[str, ...] = ()


def install_items_cost(items: Sequence[str], base_dir: str) -> ItemsCost:
    """The cost side of the spec's ``install`` items (paths relative to ``base_dir``, the project)."""
    from torch_matrix.spec import install_items as kinds

    requirements: list[str] = []
    wheels: list[Wheel] = []
    unknown: list[str] = []
    for text in items:
        try:
            item = kinds.parse_item(text)
        except kinds.InstallItemError:
            unknown.append(f"{text}: not an install item this tool can size")
            continue
        if item.kind == kinds.REQUIREMENT:
            requirements.append(item.text)
        elif item.kind == kinds.REQUIREMENTS_FILE:
            more, why = _requirements_file(Path(item.absolute(base_dir)))
            requirements += more
            unknown += [f"{text}: {reason}" for reason in why]
        elif item.kind == kinds.PATH:
            path = item.absolute(base_dir)
            if kinds.is_project_dir(path):
                declared, complete = _declared_dependencies(Path(path), item.extras)
                requirements += declared
                unknown.append(f"{text}: the project itself, built from {path}: size unknown")
                if not complete:
                    unknown.append(
                        f"{text}: its dependencies are not declared in pyproject.toml "
                        "(setup.py or dynamic): their size is unknown"
                    )
            elif path.endswith(".whl") and os.path.isfile(path):
                wheels.append(_local_wheel(Path(path)))
            else:
                unknown.append(f"{text}: built from {path}: size unknown")
        # a constraints file installs nothing by itself
    return ItemsCost(tuple(requirements), tuple(wheels), tuple(unknown))


def _requirements_file(path: Path, depth: int = 0) -> tuple[list[str], list[str]]:
    """(the requirements a requirements file names, what in it cannot be sized)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return [], [f"cannot read {path}: {error}"]
    found: list[str] = []
    unknown: list[str] = []
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _sep, rest = line.partition(" ")
        if option in ("-r", "--requirement") and rest.strip() and depth < 5:
            more, why = _requirements_file(path.parent / rest.strip(), depth + 1)
            found += more
            unknown += why
            continue
        if option in ("-c", "--constraint") or line.startswith("--"):
            continue  # constraints and index options install nothing by themselves
        try:
            Requirement(line)
        except InvalidRequirement:
            unknown.append(f"{line} (in {path.name}): size unknown")
            continue
        if "@" in line:
            unknown.append(f"{line} (in {path.name}): a direct reference, size unknown")
            continue
        found.append(line)
    return found, unknown


def _declared_dependencies(project: Path, extras: str) -> tuple[list[str], bool]:
    """(a local project's dependencies, with those of ``extras``, from its pyproject.toml; whether
    that is all of them: False where they come from setup.py or are dynamic)."""
    from torch_matrix.spec.parse import TOML_ERRORS, tomllib

    try:
        data = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, *TOML_ERRORS):
        return [], False
    table = data.get("project")
    if not isinstance(table, dict):
        return [], False
    dynamic = table.get("dynamic") or []
    found = [str(d) for d in table.get("dependencies") or [] if isinstance(d, str)]
    optional = table.get("optional-dependencies") or {}
    for extra in (e.strip() for e in extras.strip("[]").split(",") if e.strip()):
        found += [str(d) for d in optional.get(extra) or [] if isinstance(d, str)]
    self_name = str(table.get("name", ""))
    # ``.[test]`` whose extra names the project again (``toyproj[dev]``) resolves through it.
    found = [d for d in found if not _names(d, self_name)]
    complete = "dependencies" not in dynamic and "optional-dependencies" not in dynamic
    return found, complete


def _names(requirement: str, project: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name) == canonicalize_name(project)
    except InvalidRequirement:
        return False


def _local_wheel(path: Path) -> Wheel:
    """A wheel file given by path: its size from ``stat``, unpacked from its zip directory."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    from torch_matrix.edges.ranges import LocalZip, RangeReadError, unpacked_size

    size = path.stat().st_size
    try:
        unpacked: int | None = unpacked_size(LocalZip(path))
    except RangeReadError:
        unpacked = None
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
        project, release = str(name), str(version)
    except InvalidWheelFilename:
        project, release = path.name, ""
    return Wheel(project, release, path.name, size, unpacked)


def cell_wheel_sets(
    spec: Spec, cells: Sequence[Cell], environ: Mapping[str, str], workers: int = 8
) -> dict[str, WheelSet]:
    """Each cell's wheels, resolved from the index (cells with a plan note install nothing)."""
    from torch_matrix.world.index import open_index
    from torch_matrix.world.specfile import project_dir
    from torch_matrix.world.wheelset import cell_wheels

    indexes = {}
    for variant in dict.fromkeys(c.variant for c in cells):
        indexes[variant] = open_index(
            spec.index, variant=variant or DEFAULT_VARIANT, environ=environ
        )

    base_dir = project_dir(spec)
    items = {c.install: install_items_cost(c.install, base_dir) for c in cells if not c.plan_note}

    def one(cell: Cell) -> WheelSet:
        if cell.plan_note:
            return WheelSet()
        index = indexes[cell.variant]
        extra = items[cell.install]
        try:
            found = cell_wheels(
                [*cell.requirements, *extra.requirements], lambda _name: index, cell.python
            )
        except (UserError, OSError, ValueError) as error:
            return WheelSet(unknown=(f"cannot size the cell: {error}", *extra.unknown))
        return WheelSet((*found.wheels, *extra.wheels), (*found.unknown, *extra.unknown))

    todo = [c for c in cells if not c.plan_note]
    found: dict[str, WheelSet] = {c.id: WheelSet() for c in cells if c.plan_note}
    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            found.update(zip([c.id for c in todo], pool.map(one, todo)))
    return found


def followup_cost(spec: Any, cell: Cell, environ: Mapping[str, str] = os.environ) -> Any:
    """A follow-up cell's cost (``plan.cost.CellCost``), or None when it installs nothing."""
    from torch_matrix.plan.cost import cell_cost
    from torch_matrix.world.environment import uv_cache_dir
    from torch_matrix.world.wheelset import cached_wheels

    if cell.plan_note:
        return None
    wheels = cell_wheel_sets(spec, [cell], environ)[cell.id]
    held = cached_wheels(uv_cache_dir(environ), [w.filename for w in wheels.wheels])
    return cell_cost(cell.id, cell.variant, wheels, held)


def cost_line(cost: Any) -> str:
    """``downloads 2.1 GB (of 2.9 GB; the rest is in uv's cache), needs 4.4 GB of disk``."""
    from torch_matrix.vocab.sizes import format_size

    cached = cost.size - cost.download
    return (
        f"downloads {format_size(cost.download)}"
        + (f" (of {format_size(cost.size)}; the rest is in uv's cache)" if cached else "")
        + f", needs {format_size(cost.new_disk)} of disk"
        + (" (some sizes estimated)" if not cost.exact else "")
    )
