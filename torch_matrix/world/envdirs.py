"""A cell's venv directory left half-made by an earlier run: recognised, and removed only when
torch-matrix (through uv) made it.

``uv venv --clear`` refuses a directory that is not a virtual environment ("uv will not clear a
directory that is not a virtual environment"): a run killed while uv was creating a cell's venv
left one, and every later run of that cell failed before it started, with no result. A directory
at a cell's venv path that has no ``pyvenv.cfg`` and holds only what uv and torch-matrix put in
a venv (``bin``, ``lib``, ..., the cell's ``torch-matrix`` work dir) is such a leftover: it is
removed. Anything else there (a file of someone else's, a symlink) is never removed: the cell is
blocked, with the reason, and the report lists it as missing with that reason.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

# What ``uv venv`` writes into a venv, plus torch-matrix's own work dir inside it.
VENV_MADE = frozenset(
    {
        "bin",
        "lib",
        "lib64",
        "include",
        "share",
        ".gitignore",
        "CACHEDIR.TAG",
        ".lock",
        "torch-matrix",
    }
)
_SHOWN = 3


def leftover_problem(path: Path) -> str | None:
    """None: nothing to do (no directory there, or a venv uv can clear). "": a half-made venv of
    ours, safe to remove. Otherwise why the directory blocks the cell and is not removed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot read it ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link, not a venv torch-matrix made"
    if not stat.S_ISDIR(info.st_mode):
        return "it is a file, not a venv"
    if (path / "pyvenv.cfg").is_file():
        return None
    try:
        names = sorted(os.listdir(path))
    except OSError as error:
        return f"cannot list it ({error.strerror or error})"
    foreign = [name for name in names if name not in VENV_MADE]
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        return (
            f"it is not a venv (no pyvenv.cfg) and holds what neither uv nor torch-matrix "
            f"makes there ({shown}{more})"
        )
    return ""


def clear_leftover(path: Path) -> str:
    """Remove a half-made venv of ours at ``path``; "" when the path is free for ``uv venv --clear``
    (removed, absent, or a venv), else the reason the directory blocks it (left as it is)."""
    problem = leftover_problem(path)
    if problem is None:
        return ""
    if problem:
        return f"{path}: {problem}"
    try:
        shutil.rmtree(path)
    except OSError as error:
        return f"{path}: a half-made venv that cannot be removed ({error.strerror or error})"
    return ""
