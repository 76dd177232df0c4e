"""The index's disk cache: listings with a TTL (``TORCH_MATRIX_INDEX_TTL`` seconds, default 6 h),
metadata and wheel facts forever (a published file never changes), one small JSON file each.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
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
        try:
            data = json.loads(self._path(kind, key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def fresh(self, entry: Mapping[str, Any]) -> bool:
        return self.ttl > 0 and self.clock() - float(entry.get("fetched_at", 0)) < self.ttl

    def write(self, kind: str, key: str, payload: Mapping[str, Any]) -> None:
        path = self._path(kind, key)
        data = {"key": key, "fetched_at": self.clock(), **payload}
        try:
            atomic_write(path, json.dumps(data), durable=False)  # losing it costs a refetch
        except OSError as error:  # a read-only cache must not stop planning
            warn_once(f"cannot write the index cache under {self.root}: {error}")
