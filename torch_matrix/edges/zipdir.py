"""A zip archive's directory, parsed from bytes: which ranges to read for one member of a wheel.

Pure (a function of bytes, no I/O): ``torch_matrix.edges.ranges`` fetches the ranges this module
names and hands the bytes back. The layout is PKWARE's APPNOTE.TXT (4.3.12 central directory
header, 4.3.14-16 the zip64 end records, 4.3.16 the end of central directory record, 4.3.7 the
local file header): read the end of the file, find the end-of-central-directory record (and the
zip64 one that a wheel over 4 GiB of entries or 65535 files needs), read the central directory it
points at, and from a member's entry the span holding its local header and data.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

EOCD_SIGNATURE = b"PK\x05\x06"
ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
CENTRAL_SIGNATURE = b"PK\x01\x02"
LOCAL_SIGNATURE = b"PK\x03\x04"
EOCD_SIZE = 22
ZIP64_LOCATOR_SIZE = 20
ZIP64_EOCD_SIZE = 56
CENTRAL_SIZE = 46
LOCAL_SIZE = 30
MAX_COMMENT = 0xFFFF
TAIL_BYTES = EOCD_SIZE + MAX_COMMENT + ZIP64_LOCATOR_SIZE  # enough to find the records in any zip
LOCAL_EXTRA_MARGIN = (
    1024  # a local header's extra field is not in the central directory: allow this
)
STORED, DEFLATED = 0, 8


class ZipFormatError(ValueError):
    """The bytes are not the zip structure they should be (truncated, corrupt, or not a zip)."""


@dataclass(frozen=True)
class Directory:
    """Where the central directory lies: ``offset`` and ``size`` in bytes, ``count`` entries."""

    offset: int
    size: int
    count: int


@dataclass(frozen=True)
class Member:
    name: str
    method: int  # 0 stored, 8 deflated
    compressed_size: int
    size: int
    crc: int
    header_offset: int  # where its local file header starts

    def span(self) -> tuple[int, int]:
        """(start, length) of a read that holds the local header and all the data."""
        name_bytes = len(self.name.encode("utf-8"))
        return (
            self.header_offset,
            LOCAL_SIZE + name_bytes + LOCAL_EXTRA_MARGIN + self.compressed_size,
        )


def find_directory(tail: bytes, tail_start: int) -> Directory | int:
    """The central directory's place, from the file's last bytes (``tail``, which starts at offset
    ``tail_start``); or, for a zip64 archive whose zip64 end record lies before ``tail``, the offset
    from which a longer tail must be read (an int)."""
    at = tail.rfind(EOCD_SIGNATURE)
    while at >= 0 and len(tail) - at < EOCD_SIZE:
        at = tail.rfind(EOCD_SIGNATURE, 0, at)
    if at < 0:
        raise ZipFormatError("no end-of-central-directory record: not a zip file, or truncated")
    (_sig, _disk, _cd_disk, _n_disk, count, size, offset, _comment) = struct.unpack(
        "<4sHHHHIIH", tail[at : at + EOCD_SIZE]
    )
    if count != 0xFFFF and size != 0xFFFFFFFF and offset != 0xFFFFFFFF:
        return Directory(offset, size, count)
    locator = at - ZIP64_LOCATOR_SIZE
    if locator < 0 or tail[locator : locator + 4] != ZIP64_LOCATOR_SIGNATURE:
        raise ZipFormatError("a zip64 archive without its zip64 end-of-central-directory locator")
    (_sig, _disk, record_offset, _disks) = struct.unpack(
        "<4sIQI", tail[locator : locator + ZIP64_LOCATOR_SIZE]
    )
    start = record_offset - tail_start
    if start < 0:
        return record_offset
    record = tail[start : start + ZIP64_EOCD_SIZE]
    if len(record) < ZIP64_EOCD_SIZE or record[:4] != ZIP64_EOCD_SIGNATURE:
        raise ZipFormatError("the zip64 end-of-central-directory record is not where it says")
    count, size, offset = struct.unpack("<QQQ", record[32:56])
    return Directory(offset, size, count)


def _zip64_values(extra: bytes, wanted: list[bool]) -> list[int]:
    """The zip64 extra field's 8-byte values, for the header fields that were 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<HH", extra[pos : pos + 4])
        if tag == 0x0001:
            body = extra[pos + 4 : pos + 4 + length]
            values = [struct.unpack("<Q", body[i : i + 8])[0] for i in range(0, len(body) - 7, 8)]
            return values[: sum(wanted)]
        pos += 4 + length
    return []


def parse_directory(data: bytes) -> dict[str, Member]:
    """Every entry of a central directory (the bytes ``find_directory`` located), by name."""
    members: dict[str, Member] = {}
    pos = 0
    while pos < len(data):
        header = data[pos : pos + CENTRAL_SIZE]
        if header[:4] != CENTRAL_SIGNATURE[: len(header)]:
            raise ZipFormatError(f"a corrupt central directory entry at byte {pos} of it")
        if len(header) < CENTRAL_SIZE:
            raise ZipFormatError(f"a truncated central directory entry at byte {pos} of it")
        fields = struct.unpack("<4sHHHHHHIIIHHHHHII", header)
        method, crc, compressed, size = fields[4], fields[7], fields[8], fields[9]
        name_len, extra_len, comment_len, offset = fields[10], fields[11], fields[12], fields[16]
        flags = fields[3]
        if pos + CENTRAL_SIZE + name_len + extra_len + comment_len > len(data):
            raise ZipFormatError(f"a truncated central directory entry at byte {pos} of it")
        raw_name = data[pos + CENTRAL_SIZE : pos + CENTRAL_SIZE + name_len]
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        extra = data[pos + CENTRAL_SIZE + name_len : pos + CENTRAL_SIZE + name_len + extra_len]
        big = [size == 0xFFFFFFFF, compressed == 0xFFFFFFFF, offset == 0xFFFFFFFF]
        if any(big):
            values = iter(_zip64_values(extra, big))
            size = next(values, size) if big[0] else size
            compressed = next(values, compressed) if big[1] else compressed
            offset = next(values, offset) if big[2] else offset
        members[name] = Member(name, method, compressed, size, crc, offset)
        pos += CENTRAL_SIZE + name_len + extra_len + comment_len
    return members


def member_data(member: Member, chunk: bytes, limit: int) -> bytes:
    """The member's content from ``chunk`` (the bytes of ``member.span()``), inflated and checked
    against the directory's CRC-32 and size; never inflated past its stated size or ``limit``
    (a zip bomb whose directory understates it stops there)."""
    if len(chunk) < LOCAL_SIZE or chunk[:4] != LOCAL_SIGNATURE:
        raise ZipFormatError(f"{member.name}: no local file header where the directory says")
    name_len, extra_len = struct.unpack("<HH", chunk[26:30])
    start = LOCAL_SIZE + name_len + extra_len
    raw = chunk[start : start + member.compressed_size]
    if len(raw) < member.compressed_size:
        raise ZipFormatError(f"{member.name}: its data is truncated")
    if member.method == STORED:
        data = raw
    elif member.method == DEFLATED:
        most = min(member.size, limit) + 1
        try:
            data = zlib.decompressobj(-15).decompress(raw, most)
        except zlib.error as error:
            raise ZipFormatError(f"{member.name}: cannot inflate: {error}") from None
    else:
        raise ZipFormatError(f"{member.name}: compression method {member.method} is not supported")
    if len(data) != member.size or zlib.crc32(data) != member.crc:
        raise ZipFormatError(f"{member.name}: its CRC-32 or size does not match the directory")
    return data
