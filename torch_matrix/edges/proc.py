"""Child processes: the one module that starts them (uv, the cell's Python, nvidia-smi, the probe runner).

Like nox's ``command.py``: ``run`` for a command whose output is wanted whole, ``stream``
for a long one whose lines are echoed as they come and which is stopped, with
everything it forked, when it runs past its limit or we are interrupted. Callers
decide what a failure means; this module only runs things.
"""

from __future__ import annotations

import collections
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torch_matrix.vocab.settings import CELL_ENV

PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
CompletedProcess = subprocess.CompletedProcess
TimeoutExpired = subprocess.TimeoutExpired
SubprocessError = subprocess.SubprocessError

# Anything with ``subprocess.run``'s signature: the seam tests use to fake a command.
Runner = Callable[..., subprocess.CompletedProcess]


# The directory that holds the ``matrix`` package (site-packages, or a checkout's root).
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
# ``python -m X`` puts the working directory first on sys.path, and nox runs the shipped noxfile's
# sessions from the noxfile's folder (the package directory): any file there, or in the project a
# user runs from, would shadow the standard library or our own packages. This starts the module
# with the working directory dropped and the package root in its place (Python 3.10 has no -P).
_BOOT = (
    "import runpy, sys; del sys.path[0]; r = {root!r}; r in sys.path or sys.path.insert(0, r); "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)


def python_module(module: str, *args: str, python: str | None = None) -> list[str]:
    """The command that runs ``python -m module args`` with nothing of the working directory on
    sys.path (what ``-P`` does on 3.11+): ours find themselves, a user's files never shadow them."""
    import sys

    return [python or sys.executable, "-c", _BOOT.format(root=PACKAGE_ROOT, module=module), *args]


def run(command: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` without ``check`` (callers read the return code); raises ``OSError``
    when the program cannot start and ``TimeoutExpired`` past ``timeout``."""
    kwargs.setdefault("check", False)
    return subprocess.run(list(command), **kwargs)


def run_text(
    command: Sequence[str],
    *,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    runner: Runner = run,
) -> tuple[int, str, str]:
    """(returncode, stdout, stderr) as text; a command that cannot start or runs past
    ``timeout`` is returncode -1 with the reason in stderr, never an exception."""
    extra = {"cwd": str(cwd)} if cwd is not None else {}
    try:
        done = runner(
            list(command),
            stdout=PIPE,
            stderr=PIPE,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            **extra,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return -1, "", str(error)
    return done.returncode, done.stdout or "", done.stderr or ""


CALL_GRACE_S = 60.0


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) to the tool: raised where the signal lands, so it unwinds as Ctrl-C
    does; ``signum`` says which (the exit status is 128 + it)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def stop_on_sigterm() -> None:
    """SIGTERM, and SIGHUP (the terminal closed: the child in a group of its own would not get
    it), raise ``Terminated`` (a ``KeyboardInterrupt``) in the main thread: a command stops as
    Ctrl-C stops it (its children wound down, its files whole), instead of dying at once with
    its children left running."""
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)


def call(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace_s: float = CALL_GRACE_S,
) -> int:
    """Run ``command`` in the foreground (our stdin/stdout/stderr) and return its exit status.

    The child runs in a process group of its own, and an interrupt of ours is passed on to it
    once: Ctrl-C at the terminal, ``kill -INT`` of our process alone, or SIGTERM (with
    ``stop_on_sigterm``) all reach the child and what it started as one SIGINT, as a terminal's
    Ctrl-C would. It is given ``grace_s`` to wind down (a nox run stops its cell's probe runner
    and its prefetch, keeps the finished cells) before it is stopped, not killed at once as
    ``subprocess.call`` does after 0.25 s. A second interrupt stops it now. The interrupt is
    raised again after."""
    process = subprocess.Popen(
        list(command), env=dict(env) if env is not None else None, cwd=cwd, process_group=0
    )
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            os.killpg(process.pid, signal.SIGINT)
        except OSError:
            pass  # gone already
        try:
            process.wait(grace_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            stop(process)
        raise
    finally:
        if process.poll() is None:  # any other way out: never leave it running
            stop(process)


@dataclass(frozen=True)
class Streamed:
    returncode: int
    output: str  # the last part of stdout+stderr
    timed_out: bool


def low_priority(command: Sequence[str]) -> list[str]:
    """``command`` run at the lowest CPU priority (``nice -n 19``) and the lowest best-effort I/O
    priority (``ionice -c 2 -n 7``), where those tools exist. Both exec the command, so its process
    id stays the one we started. Neither reaches the kernel's own work for it (network, page
    cache, write-back); and a nice value ranks a process only against the others of its
    *scheduling group*: see ``background`` for the rest."""
    prefix: list[str] = []
    nice = shutil.which("nice")
    if nice:
        prefix += [nice, "-n", "19"]
    ionice = shutil.which("ionice")
    if ionice and sys.platform.startswith("linux"):
        prefix += [
            ionice,
            "-t",
            "-c",
            "2",
            "-n",
            "7",
        ]  # -t: run it even where the class cannot be set
    return prefix + list(command)


@functools.cache
def _pdeathsig_prefix() -> tuple[str, ...]:
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if not setpriv:
        return ()
    prefix = (setpriv, "--pdeathsig", "KILL")
    try:  # util-linux before 2.33 (RHEL 8, Ubuntu 18.04) has setpriv without --pdeathsig
        ok = (
            subprocess.run(
                [*prefix, "true"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=10,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else ()


def dies_with_us() -> list[str]:
    """A prefix that makes the command die (SIGKILL) when the thread that started it ends, however
    it ends (``kill -9``, a parallel nox worker killed, a closed terminal): util-linux's ``setpriv
    --pdeathsig``, which execs the command. [] where there is no ``setpriv`` that can (off Linux,
    util-linux before 2.33): tried once per process."""
    return list(_pdeathsig_prefix())


LOWEST_NICE = 19


def lower_session(pid: int, tries: int = 3) -> bool:
    """Give the session of ``pid`` (a session leader we started) the lowest CPU weight, where the
    kernel groups processes by session (Linux's autogroup, on by default on desktops and on
    this project's machines): there the scheduler first shares the cores out *between sessions*,
    equally whatever their nice values, and only then between the processes of each. A process
    niced to 19 in our session still got a whole core beside the probe runner (in a session of
    its own): torch.compile took 18.6 s beside a niced download, 9 s alone. Writing the
    session's own nice value (``/proc/PID/autogroup``; raising it needs no privilege) makes the
    group yield. The kernel takes one such write per 100 ms from an unprivileged process
    (EAGAIN otherwise): tried again. False where it cannot be set (no autogroup)."""
    for _ in range(tries):
        try:
            with open(f"/proc/{pid}/autogroup", "w") as handle:
                handle.write(str(LOWEST_NICE))
            return True
        except BlockingIOError:
            time.sleep(0.1)
        except OSError:
            return False
    return False


def normal_priority(process: subprocess.Popen) -> bool:
    """A ``background(low=True)`` process, and every process and thread of its group, back at
    normal priority: nice 0 (a thread's nice value is its own: each is set), best-effort I/O,
    its session's CPU weight at 0. False where that is not allowed (lowering a nice value needs
    privilege) or the process cannot be found: the caller then stops it instead."""
    if process.poll() is not None:
        return True
    try:
        group = os.getpgid(process.pid)
        members = [process.pid]
        if group == process.pid:
            for entry in os.listdir("/proc"):
                if entry.isdigit() and int(entry) != process.pid:
                    try:
                        if os.getpgid(int(entry)) == group:
                            members.append(int(entry))
                    except OSError:
                        continue
        for pid in members:
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.setpriority(os.PRIO_PROCESS, int(tid), 0)
    except (OSError, AttributeError, ValueError):
        return False
    try:
        with open(f"/proc/{process.pid}/autogroup", "w") as handle:
            handle.write("0")
    except OSError:
        pass
    ionice = shutil.which("ionice")
    if ionice:
        for pid in members:
            subprocess.run(
                [ionice, "-c", "2", "-n", "4", "-p", str(pid)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
    return True


def background(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, low: bool = False
) -> subprocess.Popen:
    """Start ``command`` in the background, its output discarded (a prefetch): stop it with ``stop``.

    ``low``: so it uses only what the foreground work leaves idle, at the lowest priority
    (``low_priority``) and, where it can be made to die with us (``dies_with_us``), in a session
    of its own whose scheduling group gets the lowest weight (``lower_session``). There Ctrl-C
    at the terminal does not reach it: its owner stops it (``Prefetcher.close`` at exit; SIGTERM
    unwinds like Ctrl-C, ``torch_matrix.run.sessions.stop_on_sigterm``), and if we die first the
    kernel kills it. Elsewhere, and without ``low``, it stays in our process group."""
    guard = dies_with_us() if low else []
    process = subprocess.Popen(
        low_priority(guard + list(command)) if low else list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=bool(guard),
    )
    if guard:
        lower_session(process.pid)
    return process


def stop(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; reaped either way. A process we started in a
    group of its own (``background``) is signalled with its group: what it started goes too."""
    if process.poll() is not None:
        return
    _signal(process, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        _signal(process, signal.SIGKILL)
        process.wait()


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        if os.getpgid(process.pid) == process.pid != os.getpgrp():
            os.killpg(process.pid, signum)
            return
    except (OSError, AttributeError):  # gone already, or no process groups here
        pass
    try:
        process.terminate() if signum == signal.SIGTERM else process.kill()
    except OSError:
        pass


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- process trees
#
# Process groups are not enough to stop what a cell started: the probe runner, its zygote
# and each command probe start their own session, and a probe's own
# ``Popen(..., start_new_session=True)`` daemon leaves every group we know. So ``stream``
# callers mark the child's environment with ``TORCH_MATRIX_CELL=<token>``; every
# descendant inherits it (unless it clears its environment on purpose) and
# ``kill_marked`` finds them in ``/proc/<pid>/environ``. No cgroups, no root. Off Linux
# (no ``/proc``) only the child's process group is killed.

MARKER = CELL_ENV


def new_marker() -> str:
    return uuid.uuid4().hex


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return data.startswith(needle) or b"\0" + needle in data


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def marked_pids(token: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``MARKER=token``."""
    if not token or not os.path.isdir("/proc"):
        return []
    needle = f"{MARKER}={token}\0".encode()
    me = os.getpid()
    return [
        int(name)
        for name in os.listdir("/proc")
        if name.isdigit()
        and int(name) != me
        and _environ_has(int(name), needle)
        and not _is_zombie(int(name))
    ]


def kill_marked(token: str, process: subprocess.Popen | None = None, rounds: int = 20) -> list[int]:
    """SIGKILL ``process``'s group and every process carrying ``token``; return the marked pids.

    Scans again until one finds none, since a process may fork while we scan."""
    if process is not None:
        kill_group(process)
    killed: list[int] = []
    for _ in range(rounds):
        pids = marked_pids(token)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def stream(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    echo: Callable[[str], None] | None = None,
    keep_chars: int = 12000,
) -> Streamed:
    """Run ``command``, echoing each output line as it comes (long probe runs stay visible).

    However it ends (normally, past ``timeout_s``, Ctrl-C, SIGTERM), everything it left
    behind is killed: its process group, and every process carrying the ``MARKER`` that
    ``env`` holds (the zygote, command probes, daemons a probe detached with ``setsid``).
    Raises ``OSError`` when it cannot start.
    """
    token = env.get(MARKER, "")
    tail: collections.deque[str] = collections.deque(maxlen=400)
    process = subprocess.Popen(
        list(command),
        stdout=PIPE,
        stderr=STDOUT,
        text=True,
        errors="replace",
        cwd=str(cwd),
        env=dict(env),
        start_new_session=True,
    )
    expired = threading.Event()

    def on_timeout() -> None:
        expired.set()
        kill_marked(token, process)

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
        kill_marked(token, process)
        process.wait()
        raise
    finally:
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
        kill_marked(token, process)  # daemons a probe left running after the suite
    return Streamed(process.returncode, "".join(tail)[-keep_chars:], expired.is_set())
