"""What the tool prints while it works: warnings, user errors, and progress lines. The one place.

Like nox's ``logger.py``: library modules (``index``, ``sessions``, ``cellrun``) call
these instead of ``print``; the ``*_cli`` modules write their command's own output.
Everything goes to stderr except a command's output.

Progress: ``[3/12] t2.5.1-cu124-py3.11 install ...`` when a phase starts, and
``[3/12] t2.5.1-cu124-py3.11 install ... 24.1s installed`` when it ends. A long phase is not
silence: on a terminal a live line shows the elapsed time (rewritten in place, cleared at the
end); elsewhere (CI logs, ``nox -j``, which buffers a session's output) a plain
``... 30s so far`` line every ``heartbeat_s`` seconds. No colours.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from torch_matrix.vocab.escaping import terminal

if TYPE_CHECKING:
    from torch_matrix.vocab.errors import UserError

WARNING = "torch-matrix: warning: "
HEARTBEAT_S = 15.0  # a "still working" line this often in logs
LIVE_S = 1.0  # the live line's refresh on a terminal

_warned: set[str] = set()
_warn_lock = threading.Lock()


def warning_line(message: str) -> str:
    """``torch-matrix: warning: <message>``, escaped for a terminal: what ``warn`` prints, for a
    writer that is not ours (nox's ``session.warn``)."""
    return WARNING + terminal(message)


def warn(message: str, stream: TextIO | None = None) -> None:
    _warnings[0] += 1
    print(warning_line(message), file=stream or sys.stderr, flush=True)


_warnings = [0]  # warnings this process has given (warn_once's repeats counted too)


def warnings_printed() -> int:
    """How many warnings this process has given, repeats that ``warn_once`` kept quiet included
    (a plan is kept only where planning gave none)."""
    return _warnings[0]


def warn_once(message: str) -> None:
    """``warn``, but each distinct message only once per process (index fallbacks repeat)."""
    with _warn_lock:
        if message in _warned:
            _warnings[0] += 1  # said before in this process: still one a fresh process would say
            return
        _warned.add(message)
    warn(message)


def error(problem: UserError, stream: TextIO | None = None) -> None:
    """The error line and its hint line (``UserError.render``)."""
    print(terminal(problem.render()), file=stream or sys.stderr, flush=True)


def note(text: str, stream: TextIO | None = None) -> None:
    """A plain line on stderr (``wrote ...``, ``interrupted``)."""
    print(terminal(text), file=stream or sys.stderr, flush=True)


@dataclass
class PhaseNote:
    """Set ``outcome`` inside the ``with`` block to have it printed on the closing line."""

    outcome: str = ""
    elapsed_s: float = 0.0
    # What the heartbeat adds to "... 30s so far" (bytes fetched, the package being fetched);
    # called from the heartbeat's thread, so it must only read.
    detail: Callable[[], str] | None = None


@dataclass
class Progress:
    cell_id: str
    position: int = 0  # 1-based position of this cell in the planned run; 0 = unknown
    total: int = 0
    stream: TextIO | None = None
    clock: Callable[[], float] = time.monotonic
    timings: dict[str, float] = field(default_factory=dict)
    heartbeat_s: float | None = HEARTBEAT_S  # None: no heartbeat
    live: bool | None = None  # None: a live line when the stream is a terminal

    @property
    def prefix(self) -> str:
        counter = f"[{self.position}/{self.total}] " if self.total else ""
        return f"{counter}{self.cell_id}"

    def _stream(self) -> TextIO:
        return self.stream or sys.stderr

    def line(self, text: str) -> None:
        print(terminal(f"{self.prefix} {text}", multiline=False), file=self._stream(), flush=True)

    def _is_live(self) -> bool:
        if self.live is not None:
            return self.live
        isatty = getattr(self._stream(), "isatty", None)
        return bool(isatty and isatty())

    @contextlib.contextmanager
    def _heartbeat(self, name: str, start: float, note: PhaseNote | None = None) -> Iterator[None]:
        """A thread that says the phase is still running until the ``with`` block ends."""
        if not self.heartbeat_s:
            yield
            return
        live = self._is_live()
        interval = LIVE_S if live else self.heartbeat_s
        done = threading.Event()
        lock = threading.Lock()
        shown = [0]  # width of the live line on screen

        def beat() -> None:
            # Ctrl-C must reach the main thread: a signal the kernel hands to this thread would leave
            # the main thread asleep in waitpid() until the child exits on its own.
            if hasattr(signal, "pthread_sigmask"):
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            while not done.wait(interval):
                elapsed = self.clock() - start
                extra = ""
                if note is not None and note.detail is not None:
                    try:
                        extra = note.detail()
                    except Exception:  # noqa: BLE001 - progress must never stop the phase
                        extra = ""
                with lock:
                    if done.is_set():
                        return
                    if live:
                        text = f"\r{self.prefix} {name} ... {elapsed:.0f}s" + (
                            f": {extra}" if extra else ""
                        )
                        self._stream().write(text)
                        self._stream().flush()
                        shown[0] = len(text)
                    else:
                        self.line(
                            f"{name} ... {elapsed:.0f}s so far" + (f": {extra}" if extra else "")
                        )

        thread = threading.Thread(target=beat, name=f"progress-{name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            with lock:
                done.set()
                if live and shown[0]:
                    self._stream().write("\r" + " " * shown[0] + "\r")
                    self._stream().flush()
            thread.join(timeout=1.0)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[PhaseNote]:
        """Time one phase (recorded in ``timings``) and print its start and end lines."""
        note = PhaseNote()
        self.line(f"{name} ...")
        start = self.clock()
        try:
            with self._heartbeat(name, start, note):
                yield note
        except BaseException:
            note.outcome = note.outcome or "interrupted"
            raise
        finally:
            note.elapsed_s = self.clock() - start
            self.timings[name] = self.timings.get(name, 0.0) + note.elapsed_s
            tail = f" {note.outcome}" if note.outcome else ""
            self.line(f"{name} ... {note.elapsed_s:.1f}s{tail}")
