"""Child processes: the one module that starts them (uv, the cell's Python, nvidia-smi, the probe runner).

Like nox's ``command.py``: ``run`` for a command whose output is wanted whole, ``stream``
for a long one whose lines are echoed as they come and which is stopped, with
everything it forked, when it runs past its limit or we are interrupted. Callers
decide what a failure means; this module only runs things.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
CompletedProcess = subprocess.CompletedProcess
TimeoutExpired = subprocess.TimeoutExpired
SubprocessError = subprocess.SubprocessError

# Anything with ``subprocess.run``'s signature: the seam tests use to fake a command.
Runner = Callable[..., subprocess.CompletedProcess]


def run(command: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` without ``check`` (callers read the return code); raises ``OSError``
    when the program cannot start and ``TimeoutExpired`` past ``timeout``."""
    kwargs.setdefault("check", False)
    return subprocess.run(list(command), **kwargs)


def run_text(command: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
             runner: Runner = run) -> tuple[int, str, str]:
    """(returncode, stdout, stderr) as text; a command that cannot start or runs past
    ``timeout`` is returncode -1 with the reason in stderr, never an exception."""
    try:
        done = runner(list(command), stdout=PIPE, stderr=PIPE, text=True, timeout=timeout,
                      env=dict(env) if env is not None else None)
    except (OSError, subprocess.SubprocessError) as error:
        return -1, "", str(error)
    return done.returncode, done.stdout or "", done.stderr or ""


@dataclass(frozen=True)
class Streamed:
    returncode: int
    output: str  # the last part of stdout+stderr
    timed_out: bool


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stream(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
           echo: Callable[[str], None] | None = None, keep_chars: int = 12000) -> Streamed:
    """Run ``command``, echoing each output line as it comes (long probe runs stay visible).

    The child gets its own process group, so a timeout or Ctrl-C stops everything it
    forked (the probe runner's zygote children). Raises ``OSError`` when it cannot start.
    """
    tail: collections.deque[str] = collections.deque(maxlen=400)
    process = subprocess.Popen(list(command), stdout=PIPE, stderr=STDOUT, text=True, errors="replace",
                               cwd=str(cwd), env=dict(env), start_new_session=True)
    expired = threading.Event()

    def on_timeout() -> None:
        expired.set()
        kill_group(process)

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line)
            if echo is not None:
                echo(line.rstrip("\n"))
        process.wait()
    except BaseException:
        kill_group(process)
        process.wait()
        raise
    finally:
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
    return Streamed(process.returncode, "".join(tail)[-keep_chars:], expired.is_set())
