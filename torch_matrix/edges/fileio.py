"""Files on disk, written whole or not at all; and the GC pause for loading thousands of results.

One atomic writer for everything the tool writes (cell results, merged results,
summary.md, HTML, JUnit, repro bundles, pins outputs, downstream requirement files, the
issue plan, the index cache, a cell's override file): temp file in the same directory,
optional fsync, rename. A reader sees the old file or the new one, never half, so a Ctrl-C
loses nothing; a failure is ``WriteFailed``, one line at the entry point. The only other
writes append: ``append_line`` (a run's cell log, one whole line per write) and
``$GITHUB_STEP_SUMMARY`` (GitHub's protocol: append); and lock files. ``torch_matrix/probes/execute.py`` keeps its own small copy
because ``probes/`` is stdlib-only and never imports ``matrix``.
"""

from __future__ import annotations

import errno
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch_matrix.vocab.errors import UserError


class WriteFailed(OSError):
    """A file the tool writes could not be written (full disk, read-only folder, ...): still an
    ``OSError`` for callers that say it their own way; ``user_error()`` is the one line with the
    fix, which ``torch-matrix``'s entry point prints for everyone else."""

    def user_error(self) -> UserError:
        reason = self.strerror or str(self)
        if self.errno in (errno.ENOSPC, errno.EDQUOT):
            hint = "free some space, or write it elsewhere; the file that was there is unchanged"
        elif self.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            hint = "make the file and its folder writable, or write it elsewhere; the file that was there is unchanged"
        else:
            hint = "check the path, or write it elsewhere; the file that was there is unchanged"
        return UserError(f"cannot write the file: {reason}", str(self.filename or ""), hint=hint)


def atomic_write(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically and return the path.

    An existing file keeps its permission bits; a new one gets ``0o666`` minus the umask,
    like ``open()``. A symlink is written through: its target gets the new text, the link
    stays. ``durable``: fsync the file and its directory (off for caches, whose loss costs
    only a refetch). Raises ``WriteFailed`` (an ``OSError`` naming ``path``).
    """
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    try:
        _atomic_write(target, text, durable)
        return Path(path)
    except WriteFailed:
        raise
    except OSError as error:
        raise WriteFailed(error.errno, error.strerror or str(error), str(path)) from error


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """Append one line (no newline inside it) to ``path`` with a single ``write`` on an
    ``O_APPEND`` descriptor: readers see whole lines; a line cut by a full disk or a kill is the
    last one and has no newline (readers skip it). Raises ``WriteFailed``."""
    if "\n" in line or "\r" in line:
        raise ValueError("append_line writes one line")
    data = (line + "\n").encode("utf-8")
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, "No space left on device")
        finally:
            os.close(fd)
    except OSError as error:
        raise WriteFailed(error.errno, error.strerror or str(error), str(path)) from error


def _atomic_write(target: Path, text: str, durable: bool) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: every command imports this module, few write

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
