"""Find a Python X.Y interpreter for each requested version.

Looked in, in order: the spec's ``[interpreters]`` table, ``pythonX.Y`` on PATH (pyenv
shims included, but a shim that exits 127 for a non-global version does not count),
pyenv installs (``$PYENV_ROOT/versions/X.Y.*/bin/python``), and only when still missing,
uv-managed Pythons. ``current`` is the interpreter running us. Each candidate is run
once to confirm its version (cached per process), so a stale symlink never counts; a compiled
interpreter's answer is also remembered across processes by its file's identity (``confirm``:
``nox -l`` of a 4-Python spec ran 4 interpreters, 0.2 s of its 0.47 s).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_matrix.edges import proc
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.environment import find_uv
from torch_matrix.world.probe_process import run_facts
from torch_matrix.spec.model import CURRENT_PYTHON as CURRENT
from torch_matrix.vocab.versions import version_key

_confirmed: dict[str, Interpreter | None] = {}


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: str  # full version, e.g. "3.11.7"
    implementation: str = "cpython"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "version": self.version, "implementation": self.implementation}


def confirm(path: str, environ: Mapping[str, str] = os.environ) -> Interpreter | None:
    """Run the interpreter once; None when it does not run (a pyenv shim for another version).

    What a compiled interpreter answered is remembered across processes (``MEMO_NAME`` in the
    tool's cache), by its resolved file's identity (device, inode, size, modification time): the
    same file answers the same, and a reinstalled one is a new file. A script (a pyenv shim, a
    wrapper) is run each time: what it starts may change with the environment."""
    if path in _confirmed:
        return _confirmed[path]
    key = _file_identity(path)
    remembered = _read_memo(environ).get(key) if key else None
    if isinstance(remembered, dict) and remembered.get("version"):
        known = Interpreter(
            path=path,
            version=str(remembered["version"]),
            implementation=str(remembered.get("implementation", "cpython")),
        )
        _confirmed[path] = known
        return known
    found = None
    identity, _why = run_facts(
        path, ["interpreter"], env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout_s=20
    )
    if isinstance(identity, dict) and identity.get("version"):
        # Keep the path we were given (a venv or pyenv path) rather than the resolved one.
        found = Interpreter(
            path=path,
            version=str(identity["version"]),
            implementation=str(identity.get("implementation", "cpython")),
        )
        if key:
            _remember(environ, key, found)
    _confirmed[path] = found
    return found


MEMO_NAME = "interpreters.json"
MEMO_ENTRIES = 64  # the newest kept: a machine has a handful of interpreters


def _file_identity(path: str) -> str:
    """``realpath:dev:inode:size:mtime_ns`` of a compiled interpreter; "" for a script (``#!``)
    or a file that cannot be read."""
    try:
        real = os.path.realpath(path)
        with open(real, "rb") as handle:
            if handle.read(2) == b"#!":
                return ""
            info = os.fstat(handle.fileno())
    except OSError:
        return ""
    return f"{real}:{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"


def _memo_path(environ: Mapping[str, str]) -> Path:
    from torch_matrix.world.indexcache import default_cache_dir

    return default_cache_dir(environ) / MEMO_NAME


def _read_memo(environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        data = json.loads(_memo_path(environ).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(environ: Mapping[str, str], key: str, found: Interpreter) -> None:
    """Add one answer to the memo (a lost or unwritable memo only costs a run next time)."""
    from torch_matrix.edges.fileio import atomic_write

    memo = {k: v for k, v in _read_memo(environ).items() if k != key}
    memo[key] = {"version": found.version, "implementation": found.implementation}
    kept = dict(list(memo.items())[-MEMO_ENTRIES:])
    try:
        atomic_write(_memo_path(environ), json.dumps(kept), durable=False)
    except OSError:
        pass


def _pyenv_candidates(version: str, environ: Mapping[str, str]) -> list[str]:
    root = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if not root.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(version)}\.(\d+)$")
    matches = []
    for entry in root.iterdir():
        match = pattern.match(entry.name)
        if match and (entry / "bin" / "python").exists():
            matches.append((int(match.group(1)), str(entry / "bin" / "python")))
    return [path for _patch, path in sorted(matches, reverse=True)]


def _uv_candidates(version: str, environ: Mapping[str, str]) -> list[str]:
    uv = find_uv(environ)
    if not uv:
        return []
    code, out, _err = proc.run_text(
        [uv, "python", "list", version, "--only-installed", "--output-format", "json"], timeout=30
    )
    try:
        entries = json.loads(out) if code == 0 else []
    except ValueError:
        return []
    return [e["path"] for e in entries if isinstance(e, dict) and e.get("path")]


def find_interpreter(
    version: str,
    configured: Mapping[str, str] | None = None,
    environ: Mapping[str, str] = os.environ,
    use_uv: bool = True,
) -> Interpreter | None:
    if version == CURRENT:
        return Interpreter(
            path=sys.executable,
            version=".".join(map(str, sys.version_info[:3])),
            implementation=sys.implementation.name,
        )
    configured = configured or {}
    if version in configured:
        path = configured[version]
        found = confirm(path, environ)
        if found is None or found.minor != version:
            what = "does not run" if found is None else f"is Python {found.version}"
            raise UserError(
                f"{path} {what}, not Python {version}",
                where=f"interpreters.{version!r}",
                hint=f"point [interpreters] {version!r} at a Python {version} executable, "
                "or remove the entry to search PATH, pyenv and uv",
            )
        return found
    candidates = _pyenv_candidates(version, environ)
    on_path = shutil.which(f"python{version}", path=environ.get("PATH"))
    if on_path:
        # A pyenv shim runs bash and pyenv (slow, and exits 127 for a non-global version):
        # try the real installs it points to first.
        shim = os.sep + "shims" + os.sep in on_path
        candidates = candidates + [on_path] if shim else [on_path] + candidates
    for path in candidates:
        found = confirm(path, environ)
        if found is not None and found.minor == version:
            return found
    if use_uv:
        for path in _uv_candidates(version, environ):
            found = confirm(path, environ)
            if found is not None and found.minor == version:
                return found
    return None


def find_interpreters(
    versions: Sequence[str],
    configured: Mapping[str, str] | None = None,
    environ: Mapping[str, str] = os.environ,
    use_uv: bool = True,
) -> dict[str, Interpreter | None]:
    """{requested version ("3.10" or "current"): Interpreter, or None when not found}."""
    return {version: find_interpreter(version, configured, environ, use_uv) for version in versions}


def installed_pythons(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The Python X.Y versions this machine has where ``find_interpreter`` looks (pyenv installs,
    ``pythonX.Y`` on PATH that is not a shim, uv-managed Pythons), without running them: for the
    message that says a requested one is missing."""
    found: set[str] = set()
    root = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if root.is_dir():
        for entry in root.iterdir():
            match = re.match(r"^(\d+\.\d+)\.\d+$", entry.name)
            if match and (entry / "bin" / "python").exists():
                found.add(match.group(1))
    for minor in range(6, 20):
        on_path = shutil.which(f"python3.{minor}", path=environ.get("PATH"))
        if on_path and os.sep + "shims" + os.sep not in on_path:
            found.add(f"3.{minor}")
    uv = find_uv(environ)
    if uv:
        code, out, _err = proc.run_text(
            [uv, "python", "list", "--only-installed", "--output-format", "json"], timeout=30
        )
        try:
            entries = json.loads(out) if code == 0 else []
        except ValueError:
            entries = []
        for entry in entries if isinstance(entries, list) else []:
            match = (
                re.match(r"^(\d+\.\d+)", str(entry.get("version", "")))
                if isinstance(entry, dict)
                else None
            )
            if match:
                found.add(match.group(1))
    return sorted(found, key=version_key)
