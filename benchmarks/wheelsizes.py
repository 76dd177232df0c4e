"""Which wheels a set of venvs (or uv's cache) holds, and how many bytes those wheel files are on
the index.

The denominator of the cold-matrix figure: the unique bytes the matrix *needs*. Each
installed distribution's ``.dist-info/WHEEL`` keeps the wheel's tags, so the exact file
can be found again among the release's files (PyPI JSON API, which gives sizes). A run that
deletes each cell's venv leaves none to read: then uv's cache (``cached_wheel_files``) names the
files the run fetched, and the plan (``torch-matrix plan --json``) their sizes.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from packaging.tags import parse_tag, sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

PYPI_JSON = "https://pypi.org/pypi/{project}/json"


@dataclass(frozen=True)
class InstalledWheel:
    name: str  # canonical
    version: str
    tags: frozenset[str]  # e.g. {"cp311-cp311-manylinux1_x86_64"}


def read_installed(site_packages: Path) -> list[InstalledWheel]:
    found = []
    for dist_info in sorted(site_packages.glob("*.dist-info")):
        metadata, wheel = dist_info / "METADATA", dist_info / "WHEEL"
        if not metadata.is_file() or not wheel.is_file():
            continue
        headers = HeaderParser().parsestr(metadata.read_text(encoding="utf-8", errors="replace"))
        wheel_headers = HeaderParser().parsestr(wheel.read_text(encoding="utf-8", errors="replace"))
        tags = frozenset(
            str(t) for tag in wheel_headers.get_all("Tag") or () for t in parse_tag(tag)
        )
        found.append(InstalledWheel(canonicalize_name(headers["Name"]), headers["Version"], tags))
    return found


def site_packages_of(venv: Path) -> Path:
    candidates = sorted(venv.glob("lib/python*/site-packages"))
    if not candidates:
        raise FileNotFoundError(f"no site-packages under {venv}")
    return candidates[0]


def unique_installed(venvs: Iterable[Path]) -> list[InstalledWheel]:
    seen: dict[tuple[str, str, frozenset[str]], InstalledWheel] = {}
    for venv in venvs:
        for wheel in read_installed(site_packages_of(venv)):
            seen.setdefault((wheel.name, wheel.version, wheel.tags), wheel)
    return sorted(seen.values(), key=lambda w: (w.name, w.version))


def pick_file(
    wheel: InstalledWheel, files: Iterable[dict], supported: Sequence[str]
) -> dict | None:
    """The release file the installed wheel came from (pure).

    Exact tag match first. Some projects retag the file name but not ``WHEEL`` (torch's
    ``manylinux1`` files say ``linux_x86_64`` inside), so otherwise take the file an
    installer would pick: same interpreter-abi, best rank in ``supported`` (this platform's
    tags, most preferred first).
    """
    rank = {tag: i for i, tag in enumerate(supported)}
    wheel_pairs = {tag.rsplit("-", 1)[0] for tag in wheel.tags}
    best: tuple[int, dict] | None = None
    for item in files:
        filename = item.get("filename", "")
        if not filename.endswith(".whl"):
            continue
        tags = {str(t) for t in parse_wheel_filename(filename)[3]}
        if tags == set(wheel.tags):
            return item
        if not {tag.rsplit("-", 1)[0] for tag in tags} & wheel_pairs:
            continue
        ranks = [rank[tag] for tag in tags if tag in rank]
        if ranks and (best is None or min(ranks) < best[0]):
            best = (min(ranks), item)
    return best[1] if best else None


def wheel_sizes(wheels: Iterable[InstalledWheel], timeout: float = 60.0) -> dict[str, int]:
    """filename -> size in bytes, from the PyPI JSON API (one request per project).

    Assumes the venvs' interpreter is the one running this (the platform tags come from it).
    """
    supported = [str(tag) for tag in sys_tags()]
    by_project: dict[str, list[InstalledWheel]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.name, []).append(wheel)
    sizes: dict[str, int] = {}
    for project, wanted in by_project.items():
        with urllib.request.urlopen(PYPI_JSON.format(project=project), timeout=timeout) as response:
            releases = json.load(response)["releases"]
        for wheel in wanted:
            item = pick_file(wheel, releases.get(wheel.version, []), supported)
            if item is None:
                raise LookupError(
                    f"no wheel file of {project} {wheel.version} with tags {sorted(wheel.tags)}"
                )
            sizes[item["filename"]] = int(item["size"])
    return sizes


def wheel_key(filename: str) -> tuple[str, str]:
    """(canonical project, ``<version>-<tags>``) of a wheel file name: the key uv's cache files a
    wheel under (``wheels-v*/<index>/<project>/<version>-<tags>``), whatever the name's spelling."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    name, _sep, rest = stem.partition("-")
    return canonicalize_name(name), rest


def cached_wheel_files(uv_cache: Path) -> set[str]:
    """The wheel files uv's cache holds, as file names (``<project>-<version>-<tags>.whl``, the
    project spelled with underscores): its entries ``wheels-v*/<index>[/<hash>]/<project>/<version>-<tags>``
    (the link to the unpacked archive, beside its ``.http``, ``.msgpack``, ``.rev`` and ``.lock``).
    uv names an entry of a long tag set by a digest (``3.0.4-516d0c2242d49034``): that name is
    kept as it is, and is no wheel file name (``unique_wheel_sizes`` says so)."""
    found: set[str] = set()
    for bucket in sorted(uv_cache.glob("wheels-v*")):
        for kind in sorted(p for p in bucket.iterdir() if p.is_dir()):
            for project in _project_dirs(kind):
                for entry in project.iterdir():
                    name = entry.name
                    for suffix in (".http", ".msgpack", ".rev"):
                        name = name.removesuffix(suffix)
                    if name.endswith(".lock") or "-" not in name:
                        continue
                    found.add(f"{project.name.replace('-', '_')}-{name}.whl")
    return found


def _project_dirs(kind: Path) -> list[Path]:
    """The project folders under one index of uv's cache: ``pypi/<project>``, or a level deeper
    (``index/<hash>/<project>``). A project folder holds files (``.http``, ``.lock``); a hash
    folder only folders."""
    out = []
    for child in sorted(p for p in kind.iterdir() if p.is_dir()):
        if any(item.is_file() for item in child.iterdir()):
            out.append(child)
        else:
            out.extend(sorted(p for p in child.iterdir() if p.is_dir()))
    return out


def unique_wheel_sizes(
    planned: Mapping[str, int | None], fetched: Iterable[str], looked_up: Mapping[str, int] = {}
) -> tuple[dict[str, int], list[str]]:
    """The run's unique wheel files and their bytes (pure): every file the plan names or the
    run's cache holds, each once (matched by ``wheel_key``: uv's cache spells the project its own
    way), sized by the plan, else by ``looked_up`` (the index's sizes of the files the plan does
    not name). Returns (filename -> bytes, the files no size is known for)."""
    by_key: dict[tuple[str, str], tuple[str, int | None]] = {
        wheel_key(name): (name, size) for name, size in planned.items()
    }
    for name in fetched:
        by_key.setdefault(wheel_key(name), (name, looked_up.get(name)))
    sizes = {name: size for name, size in by_key.values() if size is not None}
    unsized = sorted(name for name, size in by_key.values() if size is None)
    return sizes, unsized


def not_planned(planned: Iterable[str], fetched: Iterable[str]) -> list[str]:
    """The cache's wheel files the plan does not name (pure): the files to size from the index."""
    keys = {wheel_key(name) for name in planned}
    return sorted(name for name in fetched if wheel_key(name) not in keys)


def is_wheel_name(filename: str) -> bool:
    try:
        parse_wheel_filename(filename)
    except ValueError:
        return False
    return True


def file_sizes(filenames: Iterable[str], timeout: float = 60.0) -> dict[str, int]:
    """filename -> size in bytes of named wheel files, from the PyPI JSON API (one request per
    project); a file PyPI does not list is left out."""
    by_project: dict[str, set[str]] = {}
    for filename in filenames:
        by_project.setdefault(wheel_key(filename)[0], set()).add(filename)
    sizes: dict[str, int] = {}
    for project, wanted in by_project.items():
        keys = {wheel_key(name): name for name in wanted}
        with urllib.request.urlopen(PYPI_JSON.format(project=project), timeout=timeout) as response:
            releases = json.load(response)["releases"]
        for files in releases.values():
            for item in files:
                name = keys.get(wheel_key(item.get("filename", "")))
                if name is not None:
                    sizes[name] = int(item["size"])
    return sizes
