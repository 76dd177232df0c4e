"""The plan kept between listings: ``nox -l`` lists the cells of the last plan of the same spec
when nothing planning reads has changed since, instead of decoding every cached listing again.

A kept plan names what it was planned from: a key (the spec as parsed, the interpreters found,
the settings and environment variables planning reads, the host, this Python and the tool's own
code) and each index cache file planning read (``indexcache.recording``: inode, size, mtime and,
for a listing, when it was fetched). It is taken only while the key is the same, every file is
unchanged and every listing is still fresh (``$TORCH_MATRIX_INDEX_TTL``), so the cells are the
ones planning would give now. A local index directory (find-links) is checked the same way: the
directory and each file planning listed in it. A plan that gave a warning is never kept. One file per spec file, under ``<cache dir>/plans/``; a damaged or foreign one is
planned again, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch_matrix
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.vocab.records import Cell
from torch_matrix.world.indexcache import Reads, default_cache_dir, default_ttl

FORMAT = 1
LISTINGS = "listings"  # the cache kind with a TTL (``indexcache.DiskCache``)
# The environment planning reads besides the spec (settings, index and cache locations, where
# interpreters are looked for): all of these prefixes and names are in the key.
ENV_PREFIXES = ("TORCH_MATRIX_", "UV_", "PIP_")
ENV_NAMES = ("PATH", "HOME", "XDG_CACHE_HOME", "PYENV_ROOT", "VIRTUAL_ENV", "CI")


def code_stamp(package: Path = Path(torch_matrix.__file__).parent) -> list[tuple[str, int, int]]:
    """Each source file of the tool, with its size and mtime: an edited planner plans again."""
    found = []
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), stat.st_size, stat.st_mtime_ns))
    return found


def plan_key(spec: Any, interpreters: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The digest of everything a plan is computed from apart from the index cache's files."""
    import packaging

    settings = sorted(
        (name, value)
        for name, value in environ.items()
        if name.startswith(ENV_PREFIXES) or name in ENV_NAMES
    )
    parts = (
        FORMAT,
        repr(spec),
        repr(sorted(interpreters.items())),
        settings,
        (platform.system(), platform.machine(), sys.version, sys.executable),
        (torch_matrix.__version__, packaging.__version__),
        code_stamp(),
    )
    return "sha256:" + hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def plan_file(spec_path: str, environ: Mapping[str, str]) -> Path:
    """Where the plan of the spec at ``spec_path`` is kept."""
    name = hashlib.sha256(os.path.abspath(spec_path).encode("utf-8", "surrogatepass")).hexdigest()
    return default_cache_dir(environ) / "plans" / f"{name[:32]}.json"


def unchanged(files: Mapping[str, Any], ttl: float, now: float) -> bool:
    """Every recorded cache file is the one read (same inode, size, mtime) and each listing among
    them is still fresh by the TTL now in force."""
    for path, recorded in files.items():
        kind, inode, size, mtime, fetched_at = recorded
        try:
            stat = os.stat(path)
        except OSError:
            if inode == -1:  # not there when planned, and still not: the same plan
                continue
            return False
        if (stat.st_ino, stat.st_size, stat.st_mtime_ns) != (inode, size, mtime):
            return False
        if kind == LISTINGS and not (ttl > 0 and now - float(fetched_at) < ttl):
            return False
    return True


def load(
    spec_path: str, key: str, environ: Mapping[str, str], now: float | None = None
) -> tuple[list[Cell], tuple[str, ...]] | None:
    """(cells, notes) of the kept plan for ``key``, or None: none kept, another key, a file it read
    changed or a listing it read expired, or the file cannot be read."""
    try:
        data = json.loads(plan_file(spec_path, environ).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
            return None
        if not unchanged(data["files"], default_ttl(environ), time.time() if now is None else now):
            return None
        return [Cell.from_json(cell) for cell in data["cells"]], tuple(data["notes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(
    spec_path: str,
    key: str,
    environ: Mapping[str, str],
    cells: Sequence[Cell],
    notes: Sequence[str],
    reads: Reads,
) -> None:
    """Keep this plan for the next listing. A cache that cannot be written costs only the next
    listing's planning."""
    path = plan_file(spec_path, environ)
    data = {
        "format": FORMAT,
        "key": key,
        "files": reads.files,
        "cells": [cell.to_json() for cell in cells],
        "notes": list(notes),
    }
    try:
        atomic_write(path, json.dumps(data), durable=False)
    except OSError:
        return
