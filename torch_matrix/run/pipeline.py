"""Spec -> cells, with the edges wired in: read the indexes, find the interpreters, plan.

The one place that composes the I/O modules (``index``, ``interpreters``) with the
pure planner (``plan``). ``torch-matrix plan``, ``torch-matrix report --spec`` and the
noxfile (``sessions``) all plan through here, so they always agree on the cells.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from torch_matrix.edges import console
from torch_matrix.world import probesuite
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.interpreters import Interpreter, find_interpreters, installed_pythons
from torch_matrix.plan.shards import parse_shard, select_shard
from torch_matrix.vocab.records import Cell
from torch_matrix.spec.model import DEFAULT_VARIANT, INTERPRETER_SEARCH, Spec


@dataclass(frozen=True)
class Planned:
    cells: list[Cell]
    interpreters: Mapping[str, Interpreter | None]  # requested ("3.11", "current") -> found or None
    notes: tuple[str, ...] = ()  # what planning decided for the user (variant = "auto")


def has_gpu(environ: Mapping[str, str] = os.environ) -> str:
    """The GPU this machine has as the NVIDIA driver lists it ("" when none): ``/proc/driver/nvidia
    /gpus`` (no process started), else ``nvidia-smi -L``."""
    import glob
    import shutil

    listed = glob.glob("/proc/driver/nvidia/gpus/*")
    if listed:
        return f"{len(listed)} NVIDIA GPU(s)"
    smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if smi:
        from torch_matrix.edges import proc

        code, out, _err = proc.run_text([smi, "-L"], timeout=30)
        if code == 0 and out.strip():
            return out.strip().splitlines()[0]
    return ""


def resolve_auto(
    spec: Spec, environ: Mapping[str, str] = os.environ, gpu: str | None = None
) -> tuple[Spec, str]:
    """``variant = "auto"`` made concrete, and the line that says what it became: with a GPU here,
    the default builds (as without it); without one, ``cpu`` where PyTorch's CPU index (or its
    mirror) answers, else the default builds, which take a find-links CPU build of a release where
    the configured find-links have one (``torch 2.13.0+cpu``)."""
    import dataclasses

    from torch_matrix.spec.model import AUTO_VARIANT

    if AUTO_VARIANT not in spec.variants:
        return spec, ""
    from torch_matrix.world.index import open_index, open_variant_index

    gpu = has_gpu(environ) if gpu is None else gpu
    if gpu:
        chosen = DEFAULT_VARIANT
        note = f'variant "auto": {gpu} here: the default builds'
    else:
        cpu_index = open_variant_index(spec.index, "cpu", environ=environ, optional=False)
        try:
            readable = bool(cpu_index.versions("torch"))
        except UserError:
            readable = False
        if readable:
            chosen = "cpu"
            note = (
                f'variant "auto": no GPU here: the CPU builds from {spec.index.variant_url("cpu")} '
                "(no CUDA wheels downloaded)"
            )
        else:
            chosen = DEFAULT_VARIANT
            local = sorted(
                {
                    f"torch {f.version}"
                    for f in open_index(spec.index, environ=environ).all_files("torch")
                    if f.is_local and "+cpu" in f.version
                }
            )
            note = (
                f'variant "auto": no GPU here, but the CPU index {spec.index.variant_url("cpu")} '
                "cannot be read: the default builds (with their CUDA wheels)"
                + (
                    f"; the find-links CPU build is taken where it has the release ({', '.join(local)})"
                    if local
                    else ""
                )
            )
    variants = tuple(dict.fromkeys(chosen if v == AUTO_VARIANT else v for v in spec.variants))
    return dataclasses.replace(spec, variants=variants), note


def wanted_pythons(spec: Spec) -> list[str]:
    """Every Python the spec names (axis values, then include rules), in order, once."""
    return list(dict.fromkeys(list(spec.python) + [r.values["python"][0] for r in spec.include]))


def plan_spec(
    spec: Spec, environ: Mapping[str, str] = os.environ, *, reuse: bool = False
) -> Planned:
    """Check the probe suite, read the indexes and find the interpreters (the edge), then plan (pure).

    Everything a cell would otherwise discover only after installing (an unknown probe name,
    a missing probe directory, an unreachable PyTorch variant index, a wrong configured
    interpreter) is a ``UserError`` here, naming the spec file, with a hint.

    ``reuse`` (a listing: ``nox -l``) takes the plan the last listing of this spec kept
    (``world.plancache``) where nothing it was planned from has changed, else plans now and keeps
    that plan. A run plans now, always. A spec with ``variant = "auto"`` (it asks the machine for
    a GPU) is planned now and never kept.
    """
    from torch_matrix.spec.model import AUTO_VARIANT

    probesuite.check(spec)
    if not reuse or AUTO_VARIANT in spec.variants:
        return _plan_now(spec, environ)
    from torch_matrix.world import plancache
    from torch_matrix.world.indexcache import recording

    try:
        interpreters = _interpreters(spec, environ)  # part of the key (they say nothing)
    except UserError:
        return _plan_now(spec, environ)  # its errors in planning's order (the index's first)
    key = plancache.plan_key(spec, interpreters, environ)
    kept = plancache.load(spec.path, key, environ)
    if kept is not None:
        return Planned(kept[0], interpreters, kept[1])
    warnings = console.warnings_printed()
    with recording() as reads:
        planned = _plan_now(spec, environ)
    if console.warnings_printed() == warnings and planned.interpreters == interpreters:
        plancache.store(spec.path, key, environ, planned.cells, planned.notes, reads)
    return planned


def _plan_now(spec: Spec, environ: Mapping[str, str]) -> Planned:
    from torch_matrix.plan.grid import gather_facts, plan_cells
    from torch_matrix.world.index import open_index, open_variant_index

    spec, auto_note = resolve_auto(spec, environ)
    index = open_index(spec.index, environ=environ)
    variant_indexes = {
        variant: open_variant_index(spec.index, variant, environ=environ, optional=False)
        for variant in spec.variants
        if variant != DEFAULT_VARIANT
    }
    for variant, variant_index in variant_indexes.items():
        # Every cell of the variant installs from this index: unreachable now means each cell
        # would retry and end as an error. Say so once, before anything is installed.
        try:
            variant_index.versions("torch")
        except UserError as error:
            raise UserError(
                f"the PyTorch index for variant {variant!r} cannot be read: {error.message}",
                where=f"{spec.path}: index.pytorch",
                hint=f'set `[index] pytorch = "<mirror>"` to a reachable mirror of '
                f'{spec.index.pytorch}, or test without it: `variant = "default"`',
            ) from None
    facts = gather_facts(spec, index, variant_indexes=variant_indexes)
    interpreters = _interpreters(spec, environ)
    return Planned(
        plan_cells(spec, facts, interpreters), interpreters, (auto_note,) if auto_note else ()
    )


def _interpreters(spec: Spec, environ: Mapping[str, str]) -> dict[str, Interpreter | None]:
    """The interpreters of the spec's Pythons; a missing one is a ``UserError`` unless the spec
    allows it."""
    try:
        interpreters = find_interpreters(wanted_pythons(spec), spec.interpreters, environ)
    except UserError as error:
        raise UserError(
            error.message,
            where=f"{spec.path}: {error.where}",
            hint=error.hint
            or "point it at an interpreter of that Python version, or remove "
            "the entry to search PATH, pyenv and uv's Pythons",
        ) from None
    if not spec.allow_missing_interpreters:
        check_interpreters(spec, interpreters, environ)
    return interpreters


def check_interpreters(
    spec: Spec, interpreters: Mapping[str, Interpreter | None], environ: Mapping[str, str]
) -> None:
    """A Python the spec names that no interpreter here provides is a ``UserError`` (a typo such as
    "3.21" must not become unsatisfiable cells and a green run), naming what this machine has."""
    missing = [version for version in wanted_pythons(spec) if interpreters.get(version) is None]
    if not missing:
        return
    version = missing[0]
    if version in spec.python:
        key = f"python[{spec.python.index(version)}]"
    else:
        key = next(
            f"{rule.where}.python" for rule in spec.include if rule.values["python"][0] == version
        )
    found = installed_pythons(environ)
    raise UserError(
        f"no Python {version} interpreter found (looked in: {INTERPRETER_SEARCH})",
        where=f"{spec.path}: {key}",
        hint=f"interpreters found here: {', '.join(found) or 'none'}; add Python {version} with "
        f"`uv python install {version}` (or pyenv), or give its path in [interpreters] "
        f'"{version}" = "/path/to/python{version}"; or set allow_missing_interpreters '
        "= true to plan its cells as unsatisfiable",
    )


def plan_for_spec(spec: Spec, environ: Mapping[str, str] = os.environ) -> list[Cell]:
    """The cells ``spec`` expands to (see ``plan_spec``)."""
    return plan_spec(spec, environ).cells


def shard_cells(cells: list[Cell], shard_text: str, where: str) -> list[Cell]:
    """Only shard ``K/N`` of ``cells`` (``where`` names the option or variable for errors)."""
    if not shard_text:
        return cells
    k, n = parse_shard(shard_text, where)
    return select_shard(cells, k, n)
