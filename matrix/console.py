"""What the tool prints while it works: warnings, user errors, and progress lines. The one place.

Like nox's ``logger.py``: library modules (``index``, ``nox_support``, ``cellrun``) call
these instead of ``print``; the ``*_cli`` modules write their command's own output.
Everything goes to stderr except a command's output.

Progress: ``[3/12] t2.5.1-cu124-py3.11 install ...`` when a phase starts, and
``[3/12] t2.5.1-cu124-py3.11 install ... 24.1s installed`` when it ends. No carriage
returns or colours: CI logs keep every line, and a parallel nox run buffers a session's
output and prints it as one block.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from .errors import UserError

WARNING = "torch-matrix: warning: "

_warned: set[str] = set()
_warn_lock = threading.Lock()


def warn(message: str, stream: TextIO | None = None) -> None:
    print(WARNING + message, file=stream or sys.stderr, flush=True)


def warn_once(message: str) -> None:
    """``warn``, but each distinct message only once per process (index fallbacks repeat)."""
    with _warn_lock:
        if message in _warned:
            return
        _warned.add(message)
    warn(message)


def error(problem: UserError, stream: TextIO | None = None) -> None:
    """The error line and its hint line (``UserError.render``)."""
    print(problem.render(), file=stream or sys.stderr, flush=True)


def note(text: str, stream: TextIO | None = None) -> None:
    """A plain line on stderr (``wrote ...``, ``interrupted``)."""
    print(text, file=stream or sys.stderr, flush=True)


@dataclass
class PhaseNote:
    """Set ``outcome`` inside the ``with`` block to have it printed on the closing line."""

    outcome: str = ""
    elapsed_s: float = 0.0


@dataclass
class Progress:
    cell_id: str
    position: int = 0  # 1-based position of this cell in the planned run; 0 = unknown
    total: int = 0
    stream: TextIO | None = None
    clock: Callable[[], float] = time.monotonic
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        counter = f"[{self.position}/{self.total}] " if self.total else ""
        return f"{counter}{self.cell_id}"

    def line(self, text: str) -> None:
        stream = self.stream or sys.stderr
        print(f"{self.prefix} {text}", file=stream, flush=True)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[PhaseNote]:
        """Time one phase (recorded in ``timings``) and print its start and end lines."""
        note = PhaseNote()
        self.line(f"{name} ...")
        start = self.clock()
        try:
            yield note
        except BaseException:
            note.outcome = note.outcome or "interrupted"
            raise
        finally:
            note.elapsed_s = self.clock() - start
            self.timings[name] = self.timings.get(name, 0.0) + note.elapsed_s
            tail = f" {note.outcome}" if note.outcome else ""
            self.line(f"{name} ... {note.elapsed_s:.1f}s{tail}")
