"""Shared I/O for the figures: subprocesses, timing, nox venv backends, du, network counters.

Every figure gets a ``Context`` (work directory, repeats, quick mode, log function) so the
modules stay small and ``run.py`` decides where things go and how often they repeat.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .floor import traced_modules

REPO_ROOT = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    """A measurement could not be taken (a command failed); the figure is then NOT MEASURED."""


@dataclass
class Context:
    work: Path  # scratch space on the same filesystem as the repo (venvs, fresh caches)
    quick: bool
    log: Callable[[str], None] = print
    facts: dict[str, Any] = field(
        default_factory=dict
    )  # shared between figures (e.g. venvs to reuse)

    def dir(self, name: str, fresh: bool = True) -> Path:
        path = self.work / name
        if fresh:
            remove_tree(path)
        path.mkdir(parents=True, exist_ok=True)
        return path


def remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def run_command(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run and capture; on failure raise ``BenchError`` with the command and its output tail."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        list(map(str, cmd)),
        env=full_env,
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise BenchError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}: {proc.stdout[-1500:]}"
        )
    return proc


def traced_imports(
    command: Sequence[str], *, env: Mapping[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``command`` (``[python, ...]``) once, untimed, with ``-X importtime``: the finished
    process and the modules it imported at the top level, in order (``floor.traced_modules``)."""
    done = run_command([command[0], "-X", "importtime", *command[1:]], env=env, cwd=REPO_ROOT)
    return done, traced_modules(done.stdout)


def run_nox_matrix(
    envdir: Path, env: Mapping[str, str], *args: str, noxfile: Path | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """``nox -s matrix`` through the project's noxfile (or ``noxfile``) as a user runs it (never
    raises on its exit status: the caller reads the results); (wall seconds, the finished process)."""
    command = [
        sys.executable,
        "-m",
        "nox",
        "-f",
        str(noxfile or REPO_ROOT / "noxfile.py"),
        "--envdir",
        str(envdir),
        "-s",
        "matrix",
        *args,
    ]
    start = time.perf_counter()
    proc = run_command(command, env=env, cwd=REPO_ROOT, check=False)
    return time.perf_counter() - start, proc


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def interpreter_path(version: str) -> str:
    """An absolute interpreter for X.Y (pyenv shims are not enough, see FIELD-NOTES)."""
    try:  # the tool's own finder, once it exists
        from torch_matrix.world.interpreters import find_interpreters  # type: ignore

        found = find_interpreters([version], {}).get(version)
        if found is not None:
            return str(getattr(found, "path", found))
    except Exception:  # noqa: BLE001 - fall back to the simple search below
        pass
    if sys.version_info[:2] == tuple(int(p) for p in version.split(".")):
        return sys.executable
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for candidate in sorted(
        glob.glob(str(pyenv_root / "versions" / f"{version}.*" / "bin" / f"python{version}"))
    ):
        return candidate
    which = shutil.which(f"python{version}")
    if which:
        return which
    raise BenchError(f"no Python {version} found")


def nox_venv(location: Path, interpreter: str, backend: str) -> Path:
    """Create a venv exactly as a nox session does (nox's own VirtualEnv class); return its python."""
    from nox.virtualenv import VirtualEnv

    VirtualEnv(str(location), interpreter=interpreter, venv_backend=backend).create()
    return location / "bin" / "python"


def uv_env(cache_dir: Path | None = None) -> dict[str, str]:
    env = {"UV_NO_PROGRESS": "1"}
    if cache_dir is not None:
        env["UV_CACHE_DIR"] = str(cache_dir)
    return env


def du_bytes(paths: Sequence[Path]) -> int:
    """Disk usage of all paths together; ``du`` counts a hardlinked file once across its arguments."""
    proc = run_command(["du", "-s", "-c", "-B1", *map(str, paths)])
    return int(proc.stdout.strip().splitlines()[-1].split()[0])


def net_rx_bytes() -> int:
    """Bytes received on every non-loopback interface of this network namespace."""
    total = 0
    with open("/proc/net/dev") as handle:
        for line in handle.readlines()[2:]:
            name, data = line.split(":", 1)
            if name.strip() != "lo":
                total += int(data.split()[0])
    return total


def filesystem_type(path: Path) -> str:
    proc = run_command(["df", "--output=fstype", str(path)], check=False)
    lines = proc.stdout.split()
    return lines[-1] if proc.returncode == 0 and len(lines) > 1 else "unknown"


def tool_version(cmd: Sequence[str]) -> str:
    try:
        return run_command(cmd, check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "unavailable"


class patched_environ:  # noqa: N801 - used as a context manager, reads like one
    """Temporarily set environment variables for code that reads ``os.environ`` (nox, uv calls)."""

    def __init__(self, overrides: Mapping[str, str]) -> None:
        self.overrides = dict(overrides)
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.overrides.items():
            self.saved[key] = os.environ.get(key)
            os.environ[key] = value

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
