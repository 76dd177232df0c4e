"""One run at a time per results directory and per nox env dir.

Two ``nox -s matrix`` runs in one project would recreate each other's venvs and record
false verdicts. Each run holds an ``flock`` on ``<dir>/.torch-matrix.lock`` (the file
says the holder's PID) for its whole life; a second run is refused with one line naming
that PID. The kernel drops the lock when its holder dies, however it dies, so a lock file
left by a dead run is simply taken over. ``nox --parallel`` workers are children of the
run that holds the locks: they find its PID in ``TORCH_MATRIX_LOCK_OWNER`` and go ahead.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO

from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.layout import LOCK_NAME
from torch_matrix.vocab.settings import LOCK_OWNER_ENV

OWNER_ENV = LOCK_OWNER_ENV

_held: dict[Path, IO[str]] = {}  # kept open for the life of the process


def _holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return "?"


def hold(
    directory: Path,
    what: str,
    environ: MutableMapping[str, str] = os.environ,
    hint: str = "",
) -> None:
    """Lock ``directory`` for this process, or raise ``UserError`` naming the run that holds it."""
    directory = Path(directory).absolute()
    if directory in _held:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / LOCK_NAME, "a+", encoding="utf-8")
    except OSError as error:
        raise UserError(
            f"cannot create a lock file: {error.strerror or error}",
            where=str(directory / LOCK_NAME),
            hint=f"make {directory} writable, or choose another {what}",
        ) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        holder = _holder(directory / LOCK_NAME)
        if holder != "?" and holder == environ.get(OWNER_ENV):
            return  # a --parallel worker of the run that holds it
        raise UserError(
            f"another torch-matrix run (pid {holder}) is using this {what}",
            where=str(directory),
            hint=f"pid {holder}: {hint}"
            if hint
            else f"wait for pid {holder} to finish, or give this run its own "
            "TORCH_MATRIX_RESULTS and --envdir",
        ) from None
    try:  # the PID is for the refusal message only: a full disk must not stop the run here
        os.ftruncate(handle.fileno(), 0)
        os.pwrite(
            handle.fileno(), f"{os.getpid()}\n".encode(), 0
        )  # unbuffered: nothing left to flush
    except OSError:
        pass
    _held[directory] = handle
    environ[OWNER_ENV] = str(os.getpid())
