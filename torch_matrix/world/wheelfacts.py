"""A cell's build facts read from its wheels at plan time: which wheel, its files, a cache per wheel.

For each cell the wheel uv would install (its torch release, its Python, this machine's platform,
the variant's index) is found in the index listing; ``torch_matrix.edges.ranges`` reads its
``torch/version.py`` and ``CUDAConfig.h`` (and torchvision's ``version.py``) by range requests, or
directly for a ``file://`` wheel; ``torch_matrix.judge.wheelbuild`` turns the text into the record
``build_facts`` that an installed build gives. A read is cached for good per wheel (its URL and
size: a published file never changes), so a second plan makes no request. Where a wheel cannot be
read (the server serves no ranges, the wheel records no arch list, the network is down) the read
says why: the cell is then judged from its installed build, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.tags import parse_tag
from packaging.version import InvalidVersion, Version

from torch_matrix.edges.ranges import (
    RangeFetch,
    RangeReadError,
    RangesUnsupported,
    http_range,
    open_zip,
)
from torch_matrix.judge.wheelbuild import (
    CUDA_CONFIG_FILE,
    TORCH_VERSION_FILE,
    TORCHVISION_VERSION_FILE,
    torch_build_facts,
    with_torchvision,
)
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.listings import DistFile
from torch_matrix.world.index import PackageIndex

CACHE_KIND = "wheelfacts"
FACTS_FORMAT = (
    1  # bump when the record read from a wheel changes: older cache entries are read again
)


@dataclass(frozen=True)
class WheelRead:
    """What was read from one wheel: its facts (``{}`` when none), how, and what it cost."""

    filename: str
    url: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    how: str = ""  # "range requests" | "local file" | "cache"
    fallback: str = ""  # why the installed build must be read instead; "" when ``facts`` judge
    bytes_fetched: int = 0
    requests: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "url": self.url,
            "facts": dict(self.facts),
            "how": self.how,
            "fallback": self.fallback,
            "bytes_fetched": self.bytes_fetched,
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
        }


def _cache_key(item: DistFile) -> str:
    size = getattr(item, "size", None)
    return f"wheelfacts v{FACTS_FORMAT} {item.url} {size if size is not None else ''}"


def _members(
    item: DistFile, names: Sequence[str], fetch: RangeFetch
) -> tuple[dict[str, str | None], int, int, str]:
    """(the members' text by name, bytes fetched, requests, how)."""
    reader = open_zip(item.url, fetch)
    texts: dict[str, str | None] = {}
    try:
        for name in names:
            data = reader.read(name)
            texts[name] = None if data is None else data.decode("utf-8", errors="replace")
    finally:
        fetched, requests = reader.bytes_fetched, reader.requests
    return texts, fetched, requests, ("local file" if item.is_local else "range requests")


def read_wheel(
    item: DistFile,
    cache: DiskCache | None = None,
    fetch: RangeFetch = http_range,
    clock: Callable[[], float] = time.monotonic,
) -> WheelRead:
    """The build facts of one torch or torchvision wheel (from the cache when read before)."""
    key = _cache_key(item)
    if cache is not None and not item.is_local:
        cached = cache.read(CACHE_KIND, key)
        if cached is not None and isinstance(cached.get("facts"), dict):
            return WheelRead(item.filename, item.url, cached["facts"], "cache")
    torchvision = item.filename.startswith("torchvision-")
    names = [TORCHVISION_VERSION_FILE] if torchvision else [TORCH_VERSION_FILE, CUDA_CONFIG_FILE]
    started = clock()
    try:
        texts, fetched, requests, how = _members(item, names, fetch)
    except RangesUnsupported as error:
        return WheelRead(item.filename, item.url, fallback=str(error), seconds=clock() - started)
    except RangeReadError as error:
        return WheelRead(
            item.filename,
            item.url,
            fallback=f"cannot read the wheel: {error}",
            seconds=clock() - started,
        )
    if torchvision:
        facts = with_torchvision({}, texts[TORCHVISION_VERSION_FILE])
    else:
        facts = torch_build_facts(texts[TORCH_VERSION_FILE], texts[CUDA_CONFIG_FILE], item.filename)
    fallback = str(facts.get("error") or "")
    if cache is not None and not item.is_local:  # the wheel's content never changes: keep it
        cache.write(CACHE_KIND, key, {"facts": facts})
    return WheelRead(
        item.filename, item.url, facts, how, fallback, fetched, requests, clock() - started
    )


def _interpreter_tags(python: str) -> set[str]:
    major, minor = python.split(".")[:2]
    return {f"cp{major}{minor}", f"py{major}{minor}", f"py{major}"}


def choose_wheel(
    files: Iterable[DistFile], python: str, platforms: Sequence[str], local: str = ""
) -> DistFile | None:
    """The wheel an installer picks for Python ``python`` on a machine whose platform tags are
    ``platforms`` (best first, as ``packaging.tags.platform_tags()`` gives them): the best platform
    match; of a release's several builds, one whose local label is ``local`` ("cu128"; "" for
    none) first, else another (a find-links ``+cpu`` build on the default variant). None when no
    wheel fits."""
    interpreters = _interpreter_tags(python)
    abis = {next(t for t in interpreters if t.startswith("cp")), "abi3", "none"}
    rank = {tag: i for i, tag in enumerate([*platforms, "any"])}
    best: tuple[tuple[bool, int], DistFile] | None = None
    for item in files:
        if not item.is_wheel:
            continue
        try:
            label = Version(item.version).local or ""
        except InvalidVersion:
            continue
        for text in item.tags:
            for tag in parse_tag(text):
                if tag.interpreter in interpreters and tag.abi in abis and tag.platform in rank:
                    score = (label != local, rank[tag.platform])
                    if best is None or score < best[0]:
                        best = (score, item)
    return best[1] if best else None


def build_of(
    index: PackageIndex,
    torch: str,
    python: str,
    platforms: Sequence[str],
    torchvision: str = "",
    local: str = "",
    fetch: RangeFetch = http_range,
) -> tuple[dict[str, Any], list[WheelRead], str]:
    """(build facts, the reads, why not) for one cell: its torch wheel and, where the cell has one,
    its torchvision wheel. ``why not`` is "" when the facts judge the cell."""
    wheel = choose_wheel(index.files("torch", torch), python, platforms, local)
    if wheel is None:
        return {}, [], f"no torch {torch} wheel for Python {python} on this platform in the index"
    reads = [read_wheel(wheel, index.cache, fetch)]
    facts = dict(reads[0].facts)
    if reads[0].fallback:
        return facts, reads, reads[0].fallback
    if torchvision:
        vision = choose_wheel(index.files("torchvision", torchvision), python, platforms, local)
        if vision is not None:
            reads.append(read_wheel(vision, index.cache, fetch))
            if not reads[-1].fallback:
                facts = {**facts, **reads[-1].facts}
    return facts, reads, ""
