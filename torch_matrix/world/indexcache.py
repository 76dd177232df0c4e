"""The index's disk cache: listings with a TTL (``TORCH_MATRIX_INDEX_TTL`` seconds, default 6 h),
metadata and wheel facts forever (a published file never changes), one small JSON file each.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from torch_matrix.edges.console import warn_once
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.vocab import settings

DEFAULT_TTL_S = settings.DEFAULT_INDEX_TTL_S


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    explicit = settings.read(environ, settings.CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "torch-matrix"
    return Path.home() / ".cache" / "torch-matrix"


def default_ttl(environ: Mapping[str, str] = os.environ) -> float:
    """``$TORCH_MATRIX_INDEX_TTL`` seconds, else 6 h (vocab/settings.py parses it)."""
    ttl: float = settings.read(environ, settings.TTL_ENV)
    return ttl


@dataclass
class Reads:
    """What planning read (``recording``): each cache file as it was read or written (its inode,
    size and mtime), with its ``fetched_at``; each local index directory and file it listed."""

    # path -> (kind, inode, size, mtime in ns, fetched_at); inode -1: the file was not there (or
    # could not be read)
    files: dict[str, tuple[str, int, int, int, float]] = field(default_factory=dict)


_recording: list[Reads] = []  # the ``recording()`` blocks open now


@contextmanager
def recording() -> Iterator[Reads]:
    """Every cache file read or written inside the block (``world.plancache`` keeps a plan with
    them and takes it again only while each is unchanged and, for a listing, still fresh)."""
    reads = Reads()
    _recording.append(reads)
    try:
        yield reads
    finally:
        _recording.remove(reads)


def note_local(path: str | os.PathLike[str], stat: os.stat_result | None = None) -> None:
    """Planning read ``path`` outside this cache (a find-links directory, a file in it, a local
    index's page): its state now (``stat`` where the caller has it; a directory's mtime moves
    when an entry is added, removed or renamed), or that it is not there."""
    if not _recording:
        return
    if stat is None:
        try:
            stat = os.stat(path)
        except OSError:
            stat = None
    _noted(LOCAL, Path(path), stat, None)


LOCAL = "local"  # the kind noted for a file or directory outside the cache


def _noted(kind: str, path: Path, stat: os.stat_result | None, fetched_at: Any) -> None:
    when = float(fetched_at) if isinstance(fetched_at, (int, float)) else 0.0
    state = (stat.st_ino, stat.st_size, stat.st_mtime_ns) if stat is not None else (-1, -1, -1)
    for reads in _recording:
        reads.files[str(path)] = (kind, *state, when)


class DiskCache:
    """Listings (TTL) and metadata (forever), one small JSON file each, written atomically."""

    def __init__(self, root: Path, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.ttl = ttl
        self.clock = clock

    def _path(self, kind: str, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return self.root / kind / f"{digest}.json"

    def read(self, kind: str, key: str) -> dict[str, Any] | None:
        path = self._path(kind, key)
        if _recording:
            return self._read_recorded(kind, key, path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def _read_recorded(self, kind: str, key: str, path: Path) -> dict[str, Any] | None:
        """``read``, noting the file's state with the text it held (one open file: the same
        inode); a file not there is noted too (planning differs once it is written)."""
        try:
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                data = json.loads(handle.read().decode("utf-8"))
        except FileNotFoundError:
            _noted(kind, path, None, None)
            return None
        except (OSError, ValueError):
            _noted(kind, path, None, None)  # unreadable now: planned again once that changes
            return None
        valid = isinstance(data, dict) and data.get("key") == key
        _noted(kind, path, stat, data.get("fetched_at") if valid else None)
        return data if valid else None

    def fresh(self, entry: Mapping[str, Any]) -> bool:
        return self.ttl > 0 and self.clock() - float(entry.get("fetched_at", 0)) < self.ttl

    def write(self, kind: str, key: str, payload: Mapping[str, Any]) -> None:
        path = self._path(kind, key)
        data = {"key": key, "fetched_at": self.clock(), **payload}
        try:
            atomic_write(path, json.dumps(data), durable=False)  # losing it costs a refetch
            if _recording:
                _noted(kind, path, os.stat(path), data["fetched_at"])
        except OSError as error:  # a read-only cache must not stop planning
            warn_once(f"cannot write the index cache under {self.root}: {error}")
