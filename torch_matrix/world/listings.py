"""What an index says about a project's files: a listing page (PEP 691 JSON, PEP 503 HTML, a
find-links page) or a file name read into ``DistFile`` records, and a METADATA file's requirements.

Pure parsing; ``torch_matrix.world.index`` fetches the pages and caches them.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion


SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class DistFile:
    filename: str
    url: str  # without the #hash fragment
    version: str  # as the filename spells it (may carry a local label)
    requires_python: str = ""
    tags: tuple[str, ...] = ()  # "cp311-cp311-manylinux_2_28_x86_64"; empty for sdists
    yanked: bool = False
    has_metadata: bool = False  # PEP 658 .metadata advertised
    size: int | None = None  # bytes, where the index says (PEP 700 JSON ``size``, a local file)

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file://")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DistFile:
        # Keys a newer torch-matrix wrote into the shared cache are left out, not an error. Field
        # by field (a warm plan reads thousands of cached files: no per-file filtering).
        get = data.get
        return cls(
            filename=data["filename"],
            url=data["url"],
            version=data["version"],
            requires_python=get("requires_python", ""),
            tags=tuple(get("tags", ())),
            yanked=get("yanked", False),
            has_metadata=get("has_metadata", False),
            size=get("size"),
        )


def _strip_fragment(url: str) -> str:
    return urllib.parse.urldefrag(url)[0]


def dist_file(
    filename: str,
    url: str,
    project: str,
    requires_python: str = "",
    yanked: bool = False,
    has_metadata: bool = False,
    size: int | None = None,
) -> DistFile | None:
    """Describe one link, or None when it is not a distribution of ``project``."""
    try:
        if filename.endswith(".whl"):
            name, version, _build, tags = parse_wheel_filename(filename)
            tag_strings = tuple(sorted(str(tag) for tag in tags))
        elif filename.endswith(SDIST_SUFFIXES):
            name, version = parse_sdist_filename(filename)
            tag_strings = ()
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    if name != canonicalize_name(project):
        return None
    return DistFile(
        filename=filename,
        url=_strip_fragment(url),
        version=str(version),
        requires_python=requires_python or "",
        tags=tag_strings,
        yanked=yanked,
        has_metadata=has_metadata,
        size=size,
    )


@lru_cache(maxsize=1)
def _link_parser() -> type:
    """The HTML listing's link collector; html.parser is imported only when a listing is HTML
    (a warm run reads the cache and never needs it)."""
    from html.parser import HTMLParser

    class _LinkParser(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.links: list[tuple[dict[str, str | None], str]] = []
            self._current: dict[str, str | None] | None = None
            self._text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                self._current = dict(attrs)
                self._text = []

        def handle_data(self, data: str) -> None:
            if self._current is not None:
                self._text.append(data)

        def handle_endtag(self, tag: str) -> None:
            if tag == "a" and self._current is not None:
                self.links.append((self._current, "".join(self._text).strip()))
                self._current = None

    return _LinkParser


def parse_html_listing(text: str, base_url: str, project: str) -> list[DistFile]:
    parser = _link_parser()()
    parser.feed(text)
    files = []
    for attrs, label in parser.links:
        href = attrs.get("href")
        if not href:
            continue
        url = urllib.parse.urljoin(base_url, href)
        filename = urllib.parse.unquote(os.path.basename(urllib.parse.urlparse(url).path)) or label
        metadata = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        found = dist_file(
            filename,
            url,
            project,
            attrs.get("data-requires-python") or "",
            yanked="data-yanked" in attrs,
            has_metadata=metadata is not None and metadata.lower() != "false",
        )
        if found:
            files.append(found)
    return files


def parse_json_listing(data: Mapping[str, Any], base_url: str, project: str) -> list[DistFile]:
    files = []
    for entry in data.get("files", ()):
        size = entry.get("size")
        metadata = entry.get(
            "core-metadata",
            entry.get("data-dist-info-metadata", entry.get("dist-info-metadata", False)),
        )
        found = dist_file(
            entry.get("filename", ""),
            urllib.parse.urljoin(base_url, entry.get("url", "")),
            project,
            entry.get("requires-python") or "",
            yanked=bool(entry.get("yanked", False)),
            has_metadata=bool(metadata),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )
        if found:
            files.append(found)
    return files


def parse_metadata(text: str) -> tuple[list[str], str]:
    """Requires-Dist lines and Requires-Python of a METADATA / .metadata file."""
    import email.parser  # only cold reads parse metadata

    message = email.parser.HeaderParser().parsestr(text)
    return list(message.get_all("Requires-Dist") or []), message.get("Requires-Python", "") or ""
