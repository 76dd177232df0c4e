"""Plan-time hardware facts: each cell's wheels read (range requests, in parallel) before installing.

Wiring: the spec's indexes (one per variant, as the cells install from them), this machine's
platform tags, and ``torch_matrix.world.wheelfacts`` for each distinct build; the table itself is
``torch_matrix.plan.hardware``'s (pure).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from torch_matrix.edges.ranges import RangeFetch, http_range
from torch_matrix.judge.hardware import RUNS, variant_cuda
from torch_matrix.pins.wheelbounds import ReleaseRead
from torch_matrix.plan.hardware import CellBuild
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell, CellResult
from torch_matrix.world.index import PackageIndex, open_index, open_variant_index
from torch_matrix.spec.model import DEFAULT_VARIANT, IndexConfig, Spec
from torch_matrix.world.wheelfacts import WheelRead, build_of, choose_wheel, read_wheel

WORKERS = 8
RUNS_VERDICTS = {str(v) for v in RUNS}


@dataclass(frozen=True)
class TargetPlan:
    builds: tuple[CellBuild, ...]
    reads: tuple[WheelRead, ...]  # every wheel read (one per distinct wheel), with its cost

    @property
    def bytes_fetched(self) -> int:
        return sum(r.bytes_fetched for r in self.reads)


def host_platforms() -> list[str]:
    from packaging.tags import platform_tags

    return list(platform_tags())


def read_builds(
    spec: Spec,
    cells: Sequence[Cell],
    environ: Mapping[str, str] = os.environ,
    fetch: RangeFetch = http_range,
    platforms: Sequence[str] | None = None,
) -> TargetPlan:
    """Each installable cell's build facts from its wheels (cells planned unsatisfiable are left out)."""
    platforms = list(platforms) if platforms is not None else host_platforms()
    indexes: dict[str, PackageIndex] = {}
    keys: dict[str, tuple[str, str, str, str]] = {}
    for cell in cells:
        if cell.plan_note or not cell.torch:
            continue
        if cell.variant not in indexes:
            indexes[cell.variant] = open_index(spec.index, variant=cell.variant, environ=environ)
        keys[cell.id] = (cell.torch, cell.python, cell.torchvision, cell.variant)

    def one(key: tuple[str, str, str, str]) -> tuple[dict[str, object], list[WheelRead], str]:
        torch, python, torchvision, variant = key
        local = "" if variant == DEFAULT_VARIANT else variant
        try:
            return build_of(indexes[variant], torch, python, platforms, torchvision, local, fetch)
        except UserError as error:  # the index could not be listed: the run will say so too
            return {}, [], f"cannot list the index: {error.message}"

    distinct = list(dict.fromkeys(keys.values()))
    with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(distinct)))) as pool:
        found = dict(zip(distinct, pool.map(one, distinct)))
    builds = []
    for cell in cells:
        if cell.id not in keys:
            continue
        facts, _reads, why = found[keys[cell.id]]
        builds.append(CellBuild(cell.id, cell.torch, facts, why))
    reads = {r.url: r for _f, rs, _w in found.values() for r in rs}
    return TargetPlan(tuple(builds), tuple(reads.values()))


def listed_variants(result: CellResult) -> list[str]:
    """The CUDA builds of a cell's release that torch's own table names (``cu126``, ...): the
    builds worth reading, never advice on their own."""
    table = (result.gpu.get("build") or {}).get("release_variants_code_cc")
    if not isinstance(table, Mapping):
        return []
    return [
        "cu" + str(cuda).replace(".", "")
        for cuda in table
        if variant_cuda(f"cu{str(cuda).replace('.', '')}")
    ]


def sibling_builds(
    results: Sequence[CellResult],
    index_config: IndexConfig,
    environ: Mapping[str, str] = os.environ,
    fetch: RangeFetch = http_range,
    platforms: Sequence[str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """release -> variant tag -> build facts read from that build's wheel on the PyTorch index, for
    every cell whose build does not run on one of its targets (``pins.targets.advice_for``). A
    build whose wheel is not on the index, or cannot be read, is left out (and so not advised)."""
    platforms = list(platforms) if platforms is not None else host_platforms()
    wanted: dict[tuple[str, str, str], None] = {}
    for result in results:
        if not any(str(t.get("verdict")) not in RUNS_VERDICTS for t in result.targets):
            continue
        release = result.cell.torch
        for tag in listed_variants(result):
            wanted[(release, tag, result.cell.python)] = None
    if not wanted:
        return {}
    indexes = {
        tag: open_variant_index(index_config, tag, environ=environ)
        for tag in {tag for _r, tag, _p in wanted}
    }

    def one(key: tuple[str, str, str]) -> dict[str, Any] | None:
        release, tag, python = key
        try:
            facts, _reads, why = build_of(indexes[tag], release, python, platforms, "", tag, fetch)
        except UserError:
            return None
        if why or facts.get("torch_cuda") is None:
            return None
        version = str(facts.get("torch") or "")
        return facts if version.endswith(f"+{tag}") else None  # that build, not another

    keys = list(wanted)
    with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(keys)))) as pool:
        read = dict(zip(keys, pool.map(one, keys)))
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for (release, tag, _python), facts in read.items():
        if facts is not None:
            found.setdefault(release, {})[tag] = facts
    return found


@dataclass(frozen=True)
class ReleaseReads:
    """Every release of the spec's range as its wheels say (``pins.wheelbounds``' evidence), and
    what reading them cost."""

    by_release: dict[str, list[ReleaseRead]]
    reads: tuple[WheelRead, ...]
    seconds: float

    @property
    def bytes_fetched(self) -> int:
        return sum(r.bytes_fetched for r in self.reads)

    @property
    def requests(self) -> int:
        return sum(r.requests for r in self.reads)


def release_reads(
    index_config: IndexConfig,
    releases: Sequence[str],
    pythons: Sequence[str],
    variants: Sequence[str] = (DEFAULT_VARIANT,),
    environ: Mapping[str, str] = os.environ,
    fetch: RangeFetch = http_range,
    platforms: Sequence[str] | None = None,
) -> ReleaseReads:
    """Each release's build of each variant, read from the wheel a cell would install (the first of
    ``pythons`` with a wheel of it, this machine's platform; cached per wheel): the evidence of the
    per-target bounds over the spec's range. A release whose wheel is missing or unreadable is read
    as unknown, with the reason."""
    import time

    platforms = list(platforms) if platforms is not None else host_platforms()
    started = time.monotonic()
    indexes = {v: open_index(index_config, variant=v, environ=environ) for v in variants}

    def one(key: tuple[str, str]) -> tuple[ReleaseRead, list[WheelRead]]:
        release, variant = key
        local = "" if variant == DEFAULT_VARIANT else variant
        why = f"no torch {release} wheel for Python {', '.join(pythons)} on this platform"
        try:
            files = indexes[variant].files("torch", release)
        except UserError as error:
            return ReleaseRead(release, variant, why_not=f"cannot list: {error.message}"), []
        for python in pythons:
            wheel = choose_wheel(files, python, platforms, local)
            if wheel is None:
                continue
            read = read_wheel(wheel, indexes[variant].cache, fetch)
            facts = dict(read.facts) if not read.fallback else {}
            return ReleaseRead(release, variant, wheel.filename, facts, read.fallback), [read]
        return ReleaseRead(release, variant, why_not=why), []

    keys = [(r, v) for r in releases for v in variants]
    with ThreadPoolExecutor(max_workers=max(1, min(WORKERS, len(keys)))) as pool:
        found = list(pool.map(one, keys))
    by_release: dict[str, list[ReleaseRead]] = {r: [] for r in releases}
    wheels: dict[str, WheelRead] = {}
    for read, raw in found:
        by_release[read.release].append(read)
        wheels.update({r.url: r for r in raw})
    return ReleaseReads(by_release, tuple(wheels.values()), time.monotonic() - started)
