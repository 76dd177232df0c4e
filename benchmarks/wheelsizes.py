"""Which wheels a set of venvs holds, and how many bytes those wheel files are on the index.

The denominator of the cold-matrix figure: the unique bytes the matrix *needs*. Each
installed distribution's ``.dist-info/WHEEL`` keeps the wheel's tags, so the exact file
can be found again among the release's files (PyPI JSON API, which gives sizes).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Iterable, Sequence

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
