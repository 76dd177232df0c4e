"""Which wheels a cell installs, how large they are, and which uv's cache already holds.

Resolved the way uv resolves a cell with no other constraints: for each requirement, the newest
release the index lists that matches it and has a wheel for the cell's Python on this machine's
platform (the best-ranked tag, as uv picks); then that release's ``Requires-Dist`` (read from the
index's metadata, cached forever), markers evaluated for the cell's Python on this machine,
recursively. No backtracking: where uv would have to, the sizes are of the newest releases (close,
said as an estimate where a requirement cannot be matched). The project's own install items are not
counted (their size is the project's).

A wheel's unpacked size is the sum of its zip's central directory (read by ``edges.ranges``, the
tool's one range reader: a few KB to 1.3 MB for torch, cached forever per URL); where the host
refuses ranges it is left unknown and ``plan.cost`` bounds it.
"""

from __future__ import annotations

import os
import platform
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag, platform_tags
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_matrix.edges.ranges import (
    LocalZip,
    RangeFetch,
    RangeReadError,
    RangesUnsupported,
    RemoteZip,
    http_range,
    metadata_name,
    unpacked_size,
)
from torch_matrix.plan.cost import Wheel, WheelSet
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.listings import DistFile, parse_metadata
from torch_matrix.world.index import PackageIndex, _local_path

MAX_PROJECTS = 200  # a resolution that grows past this is not a torch stack: stop, say so


def tags_for(python: str) -> list[Tag]:
    """The wheel tags the cell's CPython X.Y accepts on this machine, best first."""
    major, minor = (int(part) for part in python.split(".")[:2])
    platforms = list(platform_tags())
    return list(cpython_tags((major, minor), platforms=platforms)) + list(
        compatible_tags((major, minor), f"cp{major}{minor}", platforms=platforms)
    )


def marker_environment(python: str) -> dict[str, str]:
    """The marker variables of the cell's Python on this machine (the release's full version unknown:
    ``X.Y.0`` is the lowest, the one a ``python_full_version`` bound is written against)."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "os_name": os.name,
        "sys_platform": sys.platform,
        "platform_system": platform.system(),
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_version": platform.version(),
        "extra": "",
    }


def serves(requires_python: str, python: str) -> bool:
    """Whether a file's Requires-Python admits the cell's Python X.Y (some patch release of it)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires_python:
        return True
    try:
        wanted = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return True  # uv ignores what it cannot read
    return wanted.contains(f"{python}.0", prereleases=True) or wanted.contains(
        f"{python}.99", prereleases=True
    )


def best_wheel(
    files: Iterable[DistFile], rank: Mapping[Tag, int], python: str = ""
) -> DistFile | None:
    """The wheel uv would take among one release's files: one whose Requires-Python admits the
    cell's Python, its best tag ranking first."""
    best: tuple[int, DistFile] | None = None
    for item in files:
        if not item.is_wheel or (python and not serves(item.requires_python, python)):
            continue
        score = min(
            (rank[tag] for text in item.tags for tag in parse_tag(text) if tag in rank),
            default=None,
        )
        if score is not None and (best is None or score < best[0]):
            best = (score, item)
    return best[1] if best else None


# ---------------------------------------------------------------- unpacked sizes


def wheel_facts(
    item: DistFile, index: PackageIndex, fetch_range: RangeFetch = http_range
) -> tuple[int | None, list[str] | None]:
    """(unpacked size, Requires-Dist) of one wheel from its own zip (``edges.ranges``: its
    directory, then its METADATA; a local file read directly), cached for good; None for what
    cannot be read."""
    local = _local_path(item.url)
    size = item.size
    if local is not None and size is None:
        try:
            size = local.stat().st_size
        except OSError:
            return None, None
    if not size:
        return None, None
    key = f"wheel {item.url} {size}"
    cached = index.cache.read("wheels", key)
    if cached is not None:
        return cached.get("unpacked"), cached.get("requires_dist")
    reader = LocalZip(local) if local is not None else RemoteZip(item.url, fetch_range)
    try:
        unpacked = unpacked_size(reader)
    except (RangesUnsupported, RangeReadError):
        return None, None
    requires: list[str] | None = None
    name = metadata_name(reader.members())
    if name is not None:
        try:
            data = reader.read(name)
        except (RangesUnsupported, RangeReadError):
            data = None
        if data is not None:
            requires = parse_metadata(data.decode("utf-8", "replace"))[0]
    if local is None:
        index.cache.write("wheels", key, {"unpacked": unpacked, "requires_dist": requires})
    return unpacked, requires


def wheel_of(item: DistFile, unpacked: int | None) -> Wheel:
    """``item`` as a ``Wheel``."""
    name = canonicalize_name(item.filename.split("-")[0])
    size = item.size
    local = _local_path(item.url)
    if local is not None and size is None:
        try:
            size = local.stat().st_size
        except OSError:
            size = None
    return Wheel(name, item.version, item.filename, size, unpacked)


def resolve(
    requirements: Iterable[str],
    index_for: Callable[[str], PackageIndex],
    python: str,
    fetch_range: RangeFetch = http_range,
) -> tuple[list[Wheel], list[str]]:
    """The files a set of requirements installs (see the module's docstring), and what could not be
    matched (``name: why``). ``index_for(project)``: the index a project is installed from."""
    rank = {tag: i for i, tag in enumerate(tags_for(python))}
    environment = marker_environment(python)
    queue: list[Requirement] = []
    for text in requirements:
        try:
            queue.append(Requirement(text))
        except InvalidRequirement:
            continue
    chosen: dict[str, Wheel] = {}
    unknown: list[str] = []
    seen: set[str] = set()
    while queue and len(seen) < MAX_PROJECTS:
        req = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        index = index_for(name)
        try:
            releases = sorted(_releases(index, name), key=lambda pair: pair[0], reverse=True)
        except UserError as error:
            unknown.append(f"{name}: {error.message}")
            continue
        found = None
        for version, files in releases:
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                continue
            wheel = best_wheel(files, rank, python)
            if wheel is not None:
                found = (version, wheel)
                break
        if found is None:
            unknown.append(f"{name}{req.specifier}: no wheel for Python {python} on this platform")
            continue
        version, wheel = found
        unpacked, requires = wheel_facts(wheel, index, fetch_range)
        chosen[name] = wheel_of(wheel, unpacked)
        dependencies = []
        if requires is None:  # the zip could not be read: the index's metadata
            try:
                dependencies = index.requires_dist(name, str(version))
            except UserError as error:
                unknown.append(f"{name} {version}'s dependencies: {error.message}")
                continue
        else:
            for line in requires:
                try:
                    dependencies.append(Requirement(line))
                except InvalidRequirement:
                    continue
        for dependency in dependencies:
            marker = dependency.marker
            if marker is not None and not _holds(marker, environment):
                continue
            queue.append(dependency)
    return list(chosen.values()), unknown


def _holds(marker: Marker, environment: Mapping[str, str]) -> bool:
    try:
        return marker.evaluate(dict(environment))
    except Exception:  # noqa: BLE001 - an odd marker: count the dependency (an upper bound)
        return True


def _releases(index: PackageIndex, name: str) -> list[tuple[Version, list[DistFile]]]:
    grouped: dict[str, list[DistFile]] = {}
    for item in index.all_files(name):
        grouped.setdefault(item.version, []).append(item)
    releases = []
    for text, files in grouped.items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease and not index.prereleases:
            continue
        releases.append((version, files))
    return releases


def cell_wheels(
    requirements: Iterable[str],
    index_for: Callable[[str], PackageIndex],
    python: str,
    fetch_range: RangeFetch = http_range,
) -> WheelSet:
    """The wheels a cell's requirements install, with their sizes (see the module's docstring)."""
    wheels, unknown = resolve(requirements, index_for, python, fetch_range)
    unknown += [f"{w.filename}: the index gives no size" for w in wheels if w.size is None]
    return WheelSet(tuple(wheels), tuple(unknown))


# ---------------------------------------------------------------- uv's cache


def cache_entries(uv_cache: str | os.PathLike[str], filename: str) -> list[Path]:
    """uv's entries for one wheel file (``wheels-v*/<index>/<name>/<version>-<tags>``, the index
    ``pypi``, ``index/<hash>`` or ``url/<hash>``): the link to its unpacked archive, which must resolve."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    name, _sep, rest = stem.partition("-")
    project = canonicalize_name(urllib.parse.unquote(name))
    found = []
    for bucket in Path(uv_cache).glob("wheels-v*"):
        for kind in bucket.iterdir() if bucket.is_dir() else ():
            for parent in (kind, *(p for p in kind.iterdir() if p.is_dir())):
                entry = parent / project / rest
                if entry.exists():
                    found.append(entry)
    return found


def cached_wheels(uv_cache: str | os.PathLike[str] | None, filenames: Iterable[str]) -> set[str]:
    """The wheel files among ``filenames`` that uv's cache holds unpacked, whichever index they
    came from."""
    if not uv_cache or not Path(uv_cache).is_dir():
        return set()
    return {filename for filename in filenames if cache_entries(uv_cache, filename)}


def unpacking_bytes(uv_cache: str | os.PathLike[str] | None) -> int:
    """The bytes uv has written so far of the wheels it is fetching now: uv unzips a wheel as it
    downloads into a temporary directory at the top of its cache (``<cache>/.tmp*``) and moves it
    into ``archive-v*`` once whole. Unpacked bytes (a file's length), not the download's."""
    if not uv_cache:
        return 0
    total = 0
    try:
        temporaries = [p for p in Path(uv_cache).glob(".tmp*") if p.is_dir()]
    except OSError:
        return 0
    for temporary in temporaries:
        for folder, _dirs, files in os.walk(temporary):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:  # moved into archive-v* meanwhile
                    continue
    return total


def evict(uv_cache: str | os.PathLike[str], filename: str) -> bool:
    """Remove one wheel from uv's cache: its entries (the link, ``.http``, ``.msgpack``, ``.lock``)
    and the unpacked archive the link points to (only inside the cache's ``archive-v*``). True when
    something was removed. uv fetches it again if a later install needs it."""
    import shutil

    root = Path(uv_cache).resolve()
    removed = False
    for entry in cache_entries(uv_cache, filename):
        target = entry.resolve()
        if target.parent.name.startswith("archive-v") and target.parent.parent == root:
            shutil.rmtree(target, ignore_errors=True)
        for sibling in (entry, *(entry.with_name(entry.name + s) for s in (".http", ".msgpack"))):
            if sibling.is_symlink() or sibling.is_file():
                sibling.unlink(missing_ok=True)
                removed = True
            elif sibling.is_dir():
                shutil.rmtree(sibling, ignore_errors=True)
                removed = True
    return removed
