"""Read a few members of a remote wheel without fetching it: HTTP range requests.

The one range reader of the tool: the build facts (``world.wheelfacts``), the unpacked sizes and
``Requires-Dist`` of the plan's cost (``world.wheelset``) and a wheel's METADATA where the index
serves no ``.metadata`` file (``world.index``) all read through it.

The one I/O job: byte ranges of a URL (``Range: bytes=...``, answered ``206 Partial Content``).
The zip structure is parsed by the pure ``torch_matrix.edges.zipdir``: the end of the file, then
its central directory, then one span per member, so a 900 MB torch wheel's version and arch list
cost about a megabyte (its directory) plus a few kilobytes. A ``file://`` URL is a local file and
is read directly. A server that answers a range request with the whole file (``200``) does not
serve ranges: ``RangesUnsupported`` is raised before its body is read, and the caller falls back.
"""

from __future__ import annotations

import re
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from torch_matrix.vocab.sizes import format_size

from torch_matrix.edges.zipdir import (
    TAIL_BYTES,
    Directory,
    Member,
    ZipFormatError,
    find_directory,
    member_data,
    parse_directory,
)

# What a wheel may claim before it is "not read": far above any real wheel (torch's directory is
# about 1 MB; its METADATA, CUDAConfig.h and version.py a few kB each), far below the memory a
# plan can spend. A member is inflated no further than its limit, whatever its directory says.
MAX_DIRECTORY_BYTES = 64_000_000
MAX_MEMBER_BYTES = 16_000_000
USER_AGENT = "torch-matrix (reading a wheel's build facts; +https://github.com/)"


class RangesUnsupported(Exception):
    """The server does not answer range requests (it sent the whole file, or refused the range)."""


class RangeReadError(Exception):
    """A range could not be read (network, HTTP error, a wheel that is not a valid zip)."""


# (url, "bytes=-N" or "bytes=A-B") -> (first byte's offset, the bytes, the file's total size)
RangeFetch = Callable[[str, str], "tuple[int, bytes, int]"]
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def http_range(url: str, wanted: str, timeout: float | None = None) -> tuple[int, bytes, int]:
    """GET one range of ``url``; raises ``RangesUnsupported`` when the answer is not a 206. At
    most the bytes asked for are read, within one read's deadline (``edges.httpget``)."""
    import urllib.error  # imported here: a warm plan never needs http

    from torch_matrix.edges import httpget  # http.client and ssl with it: only when fetching

    found: list[re.Match[str]] = []

    def partial_only(response: Any) -> None:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if response.status != 206 or match is None:  # the whole file is coming: do not read it
            raise RangesUnsupported(
                f"{_host(url)} answered a range request with HTTP {response.status} and no "
                "Content-Range: it does not serve ranges"
            )
        found.append(match)

    headers = {"Range": wanted, "User-Agent": USER_AGENT}
    try:
        answer = httpget.get(
            url, headers, _asked(wanted), "a range", before_body=partial_only, deadline_s=timeout
        )
    except urllib.error.HTTPError as error:
        if error.code == 416:
            raise RangesUnsupported(f"{_host(url)} refused a range request (HTTP 416)") from None
        raise RangeReadError(f"HTTP {error.code} from {url}") from None
    except httpget.ReadFailed as error:
        raise RangeReadError(str(error)) from None
    return int(found[0].group(1)), answer.body, int(found[0].group(3))


def _asked(wanted: str) -> int:
    """How many bytes ``bytes=A-B`` or ``bytes=-N`` asks for: the most a range answer may hold."""
    first, _dash, last = wanted.removeprefix("bytes=").partition("-")
    if not first:
        return int(last)
    return int(last) - int(first) + 1


def _host(url: str) -> str:
    return urllib.parse.urlparse(url).netloc or url


class RemoteZip:
    """The members of a zip at an http(s) URL, read by range requests; counts what it fetched."""

    def __init__(self, url: str, fetch: RangeFetch = http_range) -> None:
        self.url = url
        self.fetch = fetch
        self.bytes_fetched = 0
        self.requests = 0
        self._members: dict[str, Member] | None = None
        self._tail: tuple[int, bytes] = (0, b"")
        self._whole = False  # the tail read was the whole file (a small wheel)

    def _get(self, wanted: str) -> tuple[int, bytes, int]:
        start, data, total = self.fetch(self.url, wanted)
        self.requests += 1
        self.bytes_fetched += len(data)
        return start, data, total

    def _range(self, start: int, length: int) -> bytes:
        """Bytes [start, start + length), from the tail already read where it holds them all."""
        tail_start, tail = self._tail
        if (
            tail
            and start >= tail_start
            and (start + length <= tail_start + len(tail) or self._whole)
        ):
            return tail[start - tail_start : start - tail_start + length]
        return self._get(f"bytes={start}-{start + max(length, 1) - 1}")[1]

    def members(self) -> dict[str, Member]:
        if self._members is None:
            try:
                tail_start, tail, total = self._get(f"bytes=-{TAIL_BYTES}")
                self._tail, self._whole = (tail_start, tail), tail_start == 0 and len(tail) == total
                found = find_directory(tail, tail_start)
                if isinstance(found, int):  # a zip64 end record before the tail: read from there
                    tail = self._range(found, tail_start + len(tail) - found)
                    tail_start = found
                    found = find_directory(tail, tail_start)
                    if not isinstance(found, Directory):
                        raise ZipFormatError("the zip64 end record was not found where it says")
                if found.size > MAX_DIRECTORY_BYTES:
                    raise RangeReadError(
                        f"{self.url}: its central directory claims {format_size(found.size)}, "
                        f"over the limit of {format_size(MAX_DIRECTORY_BYTES)}: not read"
                    )
                if found.offset >= tail_start:  # a small zip: its directory is in the tail
                    at = found.offset - tail_start
                    directory = tail[at : at + found.size]
                else:
                    directory = self._range(found.offset, found.size)
                self._members = parse_directory(directory)
            except ZipFormatError as error:
                raise RangeReadError(f"{self.url}: not a readable wheel: {error}") from None
        return self._members

    def read(self, name: str) -> bytes | None:
        """One member's content; None when the archive has no such member."""
        member = self.members().get(name)
        if member is None:
            return None
        _within_limit(self.url, member.name, member.size, member.compressed_size)
        start, length = member.span()
        try:
            return member_data(member, self._range(start, length), MAX_MEMBER_BYTES)
        except ZipFormatError as error:
            raise RangeReadError(f"{self.url}: {error}") from None


class LocalZip:
    """The same interface over a local file (a find-links wheel): read directly, nothing fetched."""

    def __init__(self, path: Path) -> None:
        self.url = path.as_uri()
        self.path = path
        self.bytes_fetched = 0
        self.requests = 0

    def members(self) -> dict[str, Member]:
        try:
            with zipfile.ZipFile(self.path) as archive:
                return {
                    i.filename: Member(
                        i.filename, i.compress_type, i.compress_size, i.file_size, i.CRC, 0
                    )
                    for i in archive.infolist()
                }
        except (OSError, zipfile.BadZipFile) as error:
            raise RangeReadError(f"{self.path}: not a readable wheel: {error}") from None

    def read(self, name: str) -> bytes | None:
        try:
            with zipfile.ZipFile(self.path) as archive:
                return read_member(archive, name, self.url) if name in archive.NameToInfo else None
        except (OSError, zipfile.BadZipFile) as error:
            raise RangeReadError(f"{self.path}: not a readable wheel: {error}") from None


def _within_limit(url: str, name: str, size: int, compressed: int) -> None:
    if max(size, compressed) > MAX_MEMBER_BYTES:
        raise RangeReadError(
            f"{url}: {name} claims {format_size(max(size, compressed))}, over the limit of "
            f"{format_size(MAX_MEMBER_BYTES)} for one member: not read"
        )


def read_member(archive: zipfile.ZipFile, name: str, url: str) -> bytes:
    """One member of a local (or wholly fetched) zip, inflated no further than
    ``MAX_MEMBER_BYTES``: a ``RangeReadError`` naming ``url`` and the limit past it."""
    info = archive.getinfo(name)
    _within_limit(url, name, info.file_size, info.compress_size)
    with archive.open(info) as member:
        data = member.read(MAX_MEMBER_BYTES + 1)
    _within_limit(url, name, len(data), 0)
    return data


def metadata_name(members: Iterable[str]) -> str | None:
    """A wheel's ``<name>.dist-info/METADATA`` member among ``members``; None when it has none."""
    return next(
        (n for n in members if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None
    )


def unpacked_size(reader: RemoteZip | LocalZip) -> int:
    """The sum of the members' uncompressed sizes: the disk a wheel takes unpacked."""
    return sum(member.size for member in reader.members().values())


def open_zip(url: str, fetch: RangeFetch = http_range) -> RemoteZip | LocalZip:
    """A reader for a wheel's URL: a local file for ``file://``, range requests for http(s)."""
    if url.startswith("file://"):
        return LocalZip(Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)))
    return RemoteZip(url, fetch)
