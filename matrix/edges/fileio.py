"""Files on disk, written whole or not at all; and the GC pause for loading thousands of results.

One atomic writer for everything the tool writes (cell results, merged results,
summary.md, pins outputs, downstream requirement files, the index cache): temp file in
the same directory, optional fsync, rename. A reader sees the old file or the new one,
never half, so a Ctrl-C loses nothing. ``probes/execute.py`` keeps its own small copy
because ``probes/`` is stdlib-only and never imports ``matrix``.
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically and return the path.

    An existing file keeps its permission bits; a new one gets ``0o666`` minus the umask,
    like ``open()``. ``durable``: fsync the file and its directory (off for caches, whose
    loss costs only a refetch).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_directory(target.parent)
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Thousands of results are ~100,000 containers that all stay alive: the cyclic collector
    would only rescan them, over and over (a quarter of the load time, half of the report's
    rendering). Results hold no cycles; the odd one from an exception is collected once the
    collector is back on. Nests: only the outermost turns it back on."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
