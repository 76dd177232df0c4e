"""Confinement for code nobody here chose (an ecosystem project's build and tests), with
bubblewrap (``bwrap``, https://github.com/containers/bubblewrap): a well-kept tool, never a
home-made jail. One confined command gets:

- the system read-only (``--ro-bind / /``), with the user's homes (``/root``, ``/home``) and
  every folder the caller names as ``hidden`` (the run's own records) replaced by empty tmpfs,
  a private ``/tmp`` and ``/dev/shm``, a minimal ``/dev``, its own ``/proc``;
- writable only the folders the caller names (one side's tree); a few others read-only again
  (the interpreter's prefix, the project's source);
- an empty ``HOME`` (``/tmp/home``), and an environment built from an allow-list
  (``ENV_ALLOWED``) plus what the caller sets: no tokens, no cloud or registry credentials;
- its own PID namespace (``--unshare-pid``): when the command ends, or is killed at its budget,
  the kernel ends every process it started (daemons, ``setsid`` and ``env -i`` children), and
  no process inside can signal one outside (the run itself); ``--die-with-parent`` too;
- no network (``--unshare-net``: only a loopback) unless ``network`` is set; the build reaches
  the package index only through ``edges/indexgate.py``;
- a memory limit: ``prlimit --as`` (address space) inside the sandbox; no cgroup;
- no capabilities (``--cap-drop ALL``), its own session (``--new-session``), IPC and UTS.

As non-root, bubblewrap needs unprivileged user namespaces; ``detect`` tries it once and says
why not where the machine offers none.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from torch_matrix.edges import proc

GIB = 1 << 30
SANDBOX_HOME = "/tmp/home"
# What a confined command may inherit from ours: the locale, the time zone, the CA bundles (a
# site's TLS inspection), thread counts. Nothing that names an account: no *_TOKEN, *_KEY,
# AWS_*, GOOGLE_*, *_PASSWORD, NETRC, HF_TOKEN, GITHUB_*, CI secrets, SSH agent.
ENV_ALLOWED = (
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "SOURCE_DATE_EPOCH",
)
# The system's own folders for programs (PATH inside is these and what the caller puts first).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# The users' homes: hidden whole (a home's .netrc, .ssh, .config, credentials, caches).
HOMES = ("/root", "/home")


@dataclass(frozen=True)
class Sandbox:
    """Whether this machine can confine a command: ``bwrap`` its path, else ``why_none``."""

    bwrap: str = ""
    why_none: str = ""

    @property
    def on(self) -> bool:
        return bool(self.bwrap)


@functools.cache
def detect() -> Sandbox:
    """bubblewrap, tried once with the options every confined command uses (a user namespace
    where we are not root: a kernel or a security module may refuse it)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return Sandbox(why_none="bubblewrap (bwrap) is not installed")
    probe = [bwrap, *_namespaces(network=False), "--ro-bind", "/", "/", "--proc", "/proc", "true"]
    code, out, err = proc.run_text(probe, timeout=60)
    if code != 0:
        said = " ".join((err or out).split())[:200] or f"exit {code}"
        user = "" if os.geteuid() == 0 else " (as non-root it needs unprivileged user namespaces)"
        return Sandbox(why_none=f"bwrap cannot start a sandbox here{user}: {said}")
    return Sandbox(bwrap=bwrap)


def _namespaces(network: bool) -> list[str]:
    found = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    return found if network else [*found, "--unshare-net"]


def allowed_env(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The confined command's whole environment: the allow-list's variables we have, an empty
    HOME, then ``extra`` (the caller's own: PATH, the plugins, the index)."""
    env = {name: environ[name] for name in ENV_ALLOWED if name in environ}
    env.update(HOME=SANDBOX_HOME, PATH=SYSTEM_PATH, TMPDIR="/tmp", USER="sandbox")
    env.update(extra)
    return env


def _real(path: Path | str) -> str:
    return os.path.realpath(str(path))


def command(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    writable: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    network: bool = False,
    memory_bytes: int | None = None,
) -> list[str]:
    """``argv`` confined: the bwrap command line (``sandbox.on`` must hold). ``env`` is the whole
    environment inside (``allowed_env``); ``hidden`` folders are empty inside, ``writable`` ones
    (inside a hidden one, typically) the only places it can write outside its private /tmp."""
    assert sandbox.on, "no sandbox on this machine"
    args = [sandbox.bwrap, *_namespaces(network)]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/dev/shm", "--dir", SANDBOX_HOME]
    for home in HOMES:
        if os.path.isdir(home):
            args += ["--tmpfs", home]
    for path in hidden:
        if os.path.isdir(path):
            args += ["--tmpfs", _real(path)]
    for path in readable:
        if os.path.exists(path):
            args += ["--ro-bind", _real(path), _real(path)]
    for path in writable:
        args += ["--bind", _real(path), _real(path)]
    args += ["--clearenv"]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    args += ["--chdir", _real(cwd), "--"]
    if memory_bytes:
        prlimit = shutil.which("prlimit")
        if prlimit:
            args += [prlimit, f"--as={memory_bytes}", "--"]
    return [*args, *argv]


def describe(sandbox: Sandbox, *, network: bool, gate: str = "") -> str:
    """One line for a side's result: what confined its commands."""
    if not sandbox.on:
        return f"none: {sandbox.why_none}"
    net = "network: the package index only" if gate else ("network on" if network else "no network")
    return (
        "bwrap: system read-only, HOME empty, environment allow-list, private /tmp, "
        f"PID namespace, {net}"
    )
