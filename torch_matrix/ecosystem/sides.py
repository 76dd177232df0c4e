"""One project on one side of an ecosystem run (issue 34): a uv venv, the install (the side's torch
forced by an override, so a project's own cap on torch cannot pick another one; torch itself comes
from uv's shared cache, fetched once), then the project's own test command with no network where
the machine allows it, a memory limit, and its time budget. Returns a ``SideRun``; never raises
for what the project does.

The tests' outcomes come from the probe suite's pytest plugin (``pytest_outcomes``) and a retry
keeps only the regressed tests (``pytest_select``): both are copied into the side's folder and
loaded through ``PYTEST_ADDOPTS``, so nothing of ours is importable in the project's venv.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from torch_matrix.edges import indexgate, proc, sandbox
from torch_matrix.edges.sandbox import Sandbox
from torch_matrix.judge.catalogue import user_frames
from torch_matrix.probes import pytest_outcomes, pytest_select, safe_globals
from torch_matrix.spec.model import IndexConfig
from torch_matrix.ecosystem.projects import Project, Side, torchaudio_for
from torch_matrix.ecosystem.records import Role, SideRun, SideStatus
from torch_matrix.world.environment import base_env, parse_freeze, uv_cache_dir, uv_executable

INSTALL_TIMEOUT_S = 1800.0
# The build's own limit (address space): the project's, but never below what uv and a compiler
# need, so that a test limit too small to start an interpreter is said by the tests, not the install.
INSTALL_MEMORY_GIB = 8.0
TAIL_CHARS = 4000
FRAMES_KEPT = 3  # a failure's innermost frames in the project's own code: its call site
GIB = 1 << 30
PLUGINS = {
    "torch_matrix_pytest_outcomes": pytest_outcomes,
    "torch_matrix_pytest_select": pytest_select,
    "torch_matrix_safe_globals": safe_globals,  # a fix proof's allow-list (``fixproofs``)
}


@dataclass(frozen=True)
class Isolation:
    """What confines a side: bubblewrap (``sandbox.on``: edges/sandbox.py) around the install and
    the tests, or, with ``--no-sandbox`` only, the old prefix (``unshare -n`` where root) and
    ``prlimit``. ``hidden``: the run's own directory (its records), empty inside every sandbox;
    ``readable``: what the sandbox must see again (the interpreter's prefix, uv, local indexes)."""

    network_prefix: tuple[str, ...]
    network: str
    prlimit: str  # the prlimit executable, "" = none
    sandbox: Sandbox = Sandbox(why_none="--no-sandbox")
    tests_network: bool = False
    hidden: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    index_urls: tuple[
        str, ...
    ] = ()  # the install's http(s) indexes: the gate lets only them through

    def prefix(self, memory_gib: float) -> list[str]:
        memory = [self.prlimit, f"--as={int(memory_gib * GIB)}", "--"] if self.prlimit else []
        return [*self.network_prefix, *memory]

    def memory_note(self, memory_gib: float) -> str:
        if not self.prlimit:
            return "none: prlimit not found"
        return f"{memory_gib:g} GiB address space (prlimit --as)"

    def confinement(self) -> str:
        return sandbox.describe(self.sandbox, network=self.tests_network)


def isolation(
    network_off: bool = True,
    *,
    confine: bool = False,
    hidden: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    index_urls: Sequence[str] = (),
) -> Isolation:
    """``confine``: bubblewrap around every side (the caller has checked ``sandbox.detect()``);
    its network namespace takes the tests' network away. Unconfined (``--no-sandbox``):
    ``unshare -n`` (a network namespace with only loopback) when we are root and it works; else
    the network stays on and the note says why."""
    prlimit = shutil.which("prlimit") or ""
    if confine:
        found = sandbox.detect()
        return Isolation(
            (),
            "off (bwrap --unshare-net)" if network_off else "on (asked for)",
            prlimit,
            sandbox=found,
            tests_network=not network_off,
            hidden=tuple(hidden),
            readable=tuple(readable),
            index_urls=tuple(index_urls),
        )
    if not network_off:
        return Isolation((), "on (asked for)", prlimit)
    unshare = shutil.which("unshare")
    if not unshare:
        return Isolation((), "on: unshare not found", prlimit)
    if os.geteuid() != 0:
        return Isolation((), "on: unshare -n needs root", prlimit)
    code, _, err = proc.run_text([unshare, "-n", "true"], timeout=30)
    if code != 0:
        return Isolation((), f"on: unshare -n failed ({err.strip()[:120]})", prlimit)
    return Isolation((unshare, "-n"), "off (unshare -n)", prlimit)


Frames = tuple[dict[str, Any], ...]


def failure_details(
    records: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, str], dict[str, str], dict[str, Frames]]:
    """Each failed test's message; its whole text where the message was cut; its innermost frames
    in the project's own code (``pytest_outcomes`` records them): the report's cause reads the
    global a checkpoint holds from the text and the project's call site from the frames."""
    failures = [r for r in records if "nodeid" in r and r.get("outcome") in ("failed", "error")]
    messages = {str(r["nodeid"]): str(r.get("message", "")) for r in failures}
    texts = {str(r["nodeid"]): str(r["text"]) for r in failures if r.get("text")}
    frames: dict[str, Frames] = {}
    for record in failures:
        own = user_frames(record.get("frames") or ())[-FRAMES_KEPT:]
        if own:
            frames[str(record["nodeid"])] = tuple(site.to_json() for site in own)
    return messages, texts, frames


def install_args(project: Project, side: Side, tree: Path) -> list[str]:
    """The requirements of one side's install: the side's torch (and paired torchvision), the
    project from its tree with its extras, its extra requirements, and pytest when it runs pytest."""
    wanted = [f"torch=={side.torch}"]
    if project.torchvision:
        wanted.append(f"torchvision=={side.torchvision_version()}")
    extras = f"[{','.join(project.extras)}]" if project.extras else ""
    wanted.append(f"{tree}{extras}" if not extras else f"{project.name}{extras} @ {tree.as_uri()}")
    wanted += list(project.requires)
    if pytest_outcomes.runs_pytest(project.command) and not any(
        r.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() == "pytest"
        for r in project.requires
    ):
        wanted.append("pytest")
    return wanted


def overrides(project: Project, side: Side) -> str:
    """uv's overrides: the side's torch, and always its paired torchvision and torchaudio: an
    override installs nothing by itself, so it pins them only where the project or a requirement
    pulls them in (the newest torchaudio, built for another torch, does not load: ``undefined
    symbol``; the newest torchvision imports, then fails: ``operator torchvision::nms does not
    exist``)."""
    lines = [f"torch=={side.torch}"]
    vision = side.torchvision_version()
    if vision:
        lines.append(f"torchvision=={vision}")
    audio = torchaudio_for(side.torch)
    if audio:
        lines.append(f"torchaudio=={audio}")
    return "\n".join(lines) + "\n"


def index_args(index: IndexConfig, side: Side) -> list[str]:
    args: list[str] = []
    if index.default:
        args += ["--default-index", index.default]
    for url in (*index.extra, *([side.index] if side.index else [])):
        args += ["--index", url]
    for path in index.find_links:
        args += ["--find-links", path]
    if side.index:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


@dataclass
class SideWork:
    """Where one side works. ``folder`` is the harness's (overrides, retry ids, plugins: read-only
    in the sandbox); ``folder/box`` the one tree the side may write (its source copies, pytest's
    records); under a sandbox the venv lives in uv's cache (``venv_root``: hardlinks from the
    cache reach only within one mount). All deleted after the run (``cleanup``)."""

    project: Project
    side: Side
    tree: Path  # the project's unpacked source (shared by both sides, copied per side)
    folder: Path
    log: Path
    log_name: str  # the log's path as the result records it
    python: str
    index: IndexConfig
    isolation: Isolation
    marker: str = field(default_factory=proc.new_marker)  # marks every process of this side
    stopping: threading.Event = field(default_factory=threading.Event)  # interrupted: start nothing

    @property
    def box(self) -> Path:
        return self.folder / "box"

    def venv_root(self) -> Path:
        if self.isolation.sandbox.on:
            cache = uv_cache_dir()
            if cache:
                return Path(cache) / "torch-matrix-sandbox" / self.marker
        return self.folder

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.venv_root() != self.folder:
            shutil.rmtree(self.venv_root(), ignore_errors=True)


def _write(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8", errors="replace") as handle:
        handle.write(text)


def _fresh_dir(path: Path) -> Path:
    """``path`` as a new empty directory, whatever the side left there (a symlink out of its
    tree is removed, never followed: the harness writes here after the sandbox did)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _fresh_file(path: Path, text: str) -> None:
    """``text`` into a new file at ``path``, never through a link the side left there."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _local_paths(index: IndexConfig) -> list[Path]:
    """The install's local indexes and find-links folders: the sandbox must see them."""
    found = []
    for url in (index.default, *index.extra, *index.find_links):
        if url.startswith("file://"):
            found.append(Path(url[len("file://") :]))
        elif url and "://" not in url:
            found.append(Path(url))
    # a PEP 503 index's pages link to files beside them: ``root/simple`` -> ``root``
    found = [p.parent if p.name == "simple" else p for p in found]
    return [p for p in found if p.exists()]


def _uv_env() -> dict[str, str]:
    """uv's own settings a confined install keeps (where packages come from), never a password."""
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith("UV_")
        and not any(word in k for word in ("PASSWORD", "TOKEN", "USERNAME", "KEYRING", "AUTH"))
    }


def _confined_install(
    work: SideWork, command: list[str], env: dict[str, str], uv: str
) -> tuple[int, str, str]:
    """The install inside the sandbox: its build code with no network but the index (the gate),
    a memory limit, writing only the side's box and uv's cache (the venv is in it)."""
    iso = work.isolation
    cache = Path(uv_cache_dir())
    extra = {**_uv_env(), "UV_CACHE_DIR": str(cache), "UV_PYTHON_DOWNLOADS": "never"}
    readable = [
        *iso.readable,
        work.folder,
        Path(uv).resolve().parent,
        *_local_paths(work.index),
        *([Path(work.side.index)] if work.side.index and "://" not in work.side.index else []),
    ]
    urls = [u for u in (*iso.index_urls, work.side.index) if u.startswith(("http://", "https://"))]
    local_only = _local_paths(work.index) and not urls and work.index.default
    gate = None if local_only else indexgate.IndexGate(indexgate.index_hosts(urls))
    try:
        argv = list(command)
        if gate is not None:
            extra.update(indexgate.proxy_env())
            readable.append(gate.folder)
            argv = indexgate.forwarded(work.python, gate, argv)
        confined = sandbox.command(
            iso.sandbox,
            argv,
            cwd=work.box,
            env=sandbox.allowed_env(os.environ, extra),
            writable=[work.box, cache],
            readable=readable,
            hidden=iso.hidden,
            network=False,
            memory_bytes=int(max(work.project.memory_gib, INSTALL_MEMORY_GIB) * GIB),
        )
        code, out, err = proc.run_text(confined, timeout=INSTALL_TIMEOUT_S, env=env)
        if gate is not None and gate.refused:
            err += "".join(f"index gate: refused {line}\n" for line in gate.refused)
        return code, out, err
    finally:
        if gate is not None:
            gate.close()


def prepare(
    work: SideWork, echo: Callable[[str], None] | None = None
) -> tuple[SideRun | None, str]:
    """The venv with everything installed: (None, venv python) or (a BROKEN SideRun, "")."""
    uv = uv_executable()
    env = base_env()
    work.folder.mkdir(parents=True, exist_ok=True)
    _fresh_dir(work.box)
    started = time.monotonic()
    venv = work.venv_root() / "venv"
    code, out, err = proc.run_text(
        [uv, "venv", "-q", "--python", work.python, str(venv)], timeout=300, env=env
    )
    _write(work.log, f"$ uv venv --python {work.python} {venv}\n{out}{err}")
    venv_python = str(venv / "bin" / "python")
    if code != 0:
        return _broken(work, f"uv venv failed: {(err or out).strip()[-300:]}", started), ""
    over = work.folder / "overrides.txt"
    over.write_text(overrides(work.project, work.side), encoding="utf-8")
    confined = work.isolation.sandbox.on
    tree = work.tree
    if confined:  # the build writes into its source (egg-info, build/): a copy in the box
        tree = work.box / "build-src"
        shutil.copytree(work.tree, tree, symlinks=True)
    command = [
        uv,
        "pip",
        "install",
        "--python",
        venv_python,
        "--overrides",
        str(over),
        *index_args(work.index, work.side),
        *install_args(work.project, work.side, tree),
    ]
    _write(work.log, "$ " + " ".join(command) + "\n")
    if confined:
        _write(
            work.log,
            f"# confined: {work.isolation.confinement()}; the build reaches the index only\n",
        )
        code, out, err = _confined_install(work, command, env, uv)
    else:
        code, out, err = proc.run_text(command, timeout=INSTALL_TIMEOUT_S, env=env)
    _write(work.log, out + err + f"[install exit {code}]\n")
    if code != 0:
        lines = [line for line in (err or out).splitlines() if line.strip()]
        wanted = [line for line in lines if "error" in line.lower() or "×" in line]
        why = " ".join((wanted or lines or [f"exit {code}"])[0].split())[:300]
        return _broken(work, f"install failed: {why}", started, tail=(out + err)[-TAIL_CHARS:]), ""
    return None, venv_python


def _broken(work: SideWork, detail: str, started: float, tail: str = "") -> SideRun:
    return SideRun(
        project=work.project.name,
        role=Role(work.side.role),
        torch=work.side.torch,
        torchvision=work.side.torchvision_version() if work.project.torchvision else "",
        status=SideStatus.BROKEN,
        detail=detail,
        output_tail=tail,
        install_seconds=time.monotonic() - started,
        log=work.log_name,
        network=work.isolation.network,
        memory_limit=work.isolation.memory_note(work.project.memory_gib),
        confinement=work.isolation.confinement(),
    )


def freeze(venv_python: str) -> dict[str, str]:
    code, out, _ = proc.run_text(
        [uv_executable(), "pip", "freeze", "--python", venv_python], timeout=120
    )
    return parse_freeze(out) if code == 0 else {}


def _fresh_tree(work: SideWork, suffix: str) -> tuple[Path, Path, Path]:
    """A fresh copy of the project's tree in the side's box, pytest's stop file, our two plugins,
    and the place of pytest's records (none yet): (tree, plugins, records)."""
    box = work.box
    box.mkdir(parents=True, exist_ok=True)
    tree = box / f"src{suffix}"
    if tree.is_symlink():
        tree.unlink()
    elif tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(work.tree, tree, symlinks=True)
    # pytest climbs from the tests to the first ini file it finds: with none in the project's tree
    # it would take one above the run directory (a checkout's pyproject.toml), its options and its
    # rootdir. This empty one stops the climb; the project's own ini, nearer, still wins.
    _fresh_file(box / "pytest.ini", "[pytest]\n")
    plugins = _fresh_dir(work.folder / "plugins")
    for name, module in PLUGINS.items():
        shutil.copyfile(str(module.__file__), plugins / f"{name}.py")
    records = box / f"outcomes{suffix}.jsonl"
    if records.is_symlink() or records.exists():
        records.unlink()
    return tree, plugins, records


def _test_command(
    work: SideWork,
    venv_python: str,
    tree: Path,
    plugins: Path,
    records: Path,
    only: Sequence[str],
    extra: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The project's test command and its environment: in the side's sandbox when it has one,
    else behind the isolation's prefix (network, memory). ``extra``: a fix proof's variables (the
    safe globals, which load their plugin, or the old ``torch.load`` default)."""
    bin_dir = str(Path(venv_python).parent)
    confined = work.isolation.sandbox.on
    ours = {
        "PATH": bin_dir
        + os.pathsep
        + (sandbox.SYSTEM_PATH if confined else os.environ.get("PATH", "")),
        "VIRTUAL_ENV": str(Path(bin_dir).parent),
        "PYTHONPATH": str(plugins),
        # --rootdir: node ids relative to the project's own tree on both sides, even where
        # the tree has no ini file and pytest would climb to one above it
        "PYTEST_ADDOPTS": f"-p torch_matrix_pytest_outcomes -p torch_matrix_pytest_select "
        f"--rootdir={tree}",
        pytest_outcomes.OUT_ENV: str(records),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
        proc.MARKER: work.marker,
    }
    for name, value in (extra or {}).items():
        ours[name] = value
        if name == safe_globals.GLOBALS_ENV:
            ours["PYTEST_ADDOPTS"] += " -p torch_matrix_safe_globals"
    if only:
        selected = work.folder / "retry-ids.txt"
        selected.write_text("\n".join(only) + "\n", encoding="utf-8")
        ours[pytest_select.ONLY_ENV] = str(selected)
    if confined:
        iso = work.isolation
        env = sandbox.allowed_env(os.environ, ours)
        command = sandbox.command(
            iso.sandbox,
            ["bash", "-c", work.project.command],
            cwd=tree,
            env=env,
            writable=[work.box],
            readable=[*iso.readable, work.folder, Path(bin_dir).parent],
            hidden=iso.hidden,
            network=iso.tests_network,
            memory_bytes=int(work.project.memory_gib * GIB),
        )
        env = {**base_env(), proc.MARKER: work.marker}  # bwrap's own: --clearenv sets the inside
    else:
        env = base_env(ours)
        command = [
            *work.isolation.prefix(work.project.memory_gib),
            "bash",
            "-c",
            work.project.command,
        ]
    return command, env


def _status(
    work: SideWork, done: Any, found: Sequence[Mapping[str, Any]], summary: str
) -> tuple[SideStatus, str]:
    """What the test command's end says about the side, and why when it did not pass or fail."""
    code = done.returncode
    detail = ""
    if done.timed_out:
        status = SideStatus.TIMEOUT
        detail = f"past its time budget of {work.project.budget_s:g} s ({summary})"
    elif found and pytest_outcomes.runs_pytest(work.project.command):
        state, message, _ = pytest_outcomes.judge(code, found, done.output)
        status = {
            "pass": SideStatus.PASSED,
            "fail": SideStatus.FAILED,
            "skip": SideStatus.BROKEN,
        }.get(state, SideStatus.BROKEN)
        if status == SideStatus.BROKEN:
            detail = message
    elif code == 0:
        status = SideStatus.PASSED
    elif pytest_outcomes.runs_pytest(work.project.command) and code in (2, 3, 4, 5):
        status = SideStatus.BROKEN
        detail = f"the tests did not run (pytest exit {code})"
    elif code < 0 or code in (137,):
        status = SideStatus.BROKEN
        detail = f"killed (exit {code})"
    else:
        status = SideStatus.FAILED
    collect = [r for r in found if r.get("when") == "collect"]
    if collect and not detail and status == SideStatus.BROKEN:
        detail = f"collection error in {collect[0]['nodeid']}: {collect[0].get('message', '')}"
    return status, detail


def run_tests(
    work: SideWork,
    venv_python: str,
    *,
    only: Sequence[str] = (),
    install_seconds: float = 0.0,
    echo: Callable[[str], None] | None = None,
    purpose: str = "retry",
    extra: Mapping[str, str] | None = None,
    budget_s: float | None = None,
) -> SideRun:
    """The project's command in a fresh copy of its tree; ``only``: the node ids a retry (or a
    bisection, a fix proof: ``purpose``, as the log says it) keeps; ``extra``: a fix proof's
    variables; ``budget_s``: less than the project's budget."""
    if work.stopping.is_set():
        return _broken(work, "interrupted before its tests ran", time.monotonic())
    tree, plugins, records = _fresh_tree(work, "-retry" if only else "")
    command, env = _test_command(work, venv_python, tree, plugins, records, only, extra)
    shown = " ".join(f"{k}={v}" for k, v in sorted((extra or {}).items()))
    _write(
        work.log,
        f"\n$ {shown + ' ' if shown else ''}{work.project.command}"
        f"{f'  # {purpose} of {len(only)} test(s)' if only else ''}\n",
    )
    started = time.monotonic()
    with open(work.log, "a", encoding="utf-8", errors="replace") as log:

        def echo_line(line: str) -> None:
            log.write(line + "\n")
            if echo is not None:
                echo(line)

        try:
            done = proc.stream(
                command,
                cwd=tree,
                env=env,
                timeout_s=min(work.project.budget_s, budget_s or work.project.budget_s),
                echo=echo_line,
                keep_chars=TAIL_CHARS,
            )
        except OSError as error:
            return _broken(work, f"cannot start the test command: {error}", started)
    seconds = time.monotonic() - started
    # a link the side left in place of its records is not read (it could point anywhere)
    found = [] if records.is_symlink() else pytest_outcomes.read_records(str(records))
    outcomes = pytest_outcomes.per_test(found)
    messages, texts, frames = failure_details(found)
    summary = pytest_outcomes.counts_text(outcomes) if found else f"exit {done.returncode}"
    code = done.returncode
    status, detail = _status(work, done, found, summary)
    return SideRun(
        project=work.project.name,
        role=Role(work.side.role),
        torch=work.side.torch,
        torchvision=work.side.torchvision_version() if work.project.torchvision else "",
        status=status,
        exit_code=code,
        tests=outcomes,
        messages=messages,
        texts=texts,
        frames=frames,
        summary=summary,
        detail=detail,
        output_tail=done.output[-TAIL_CHARS:],
        seconds=seconds,
        install_seconds=install_seconds,
        log=work.log_name,
        network=work.isolation.network,
        memory_limit=work.isolation.memory_note(work.project.memory_gib),
        confinement=work.isolation.confinement(),
        resolved=freeze(venv_python),
        retry_of=tuple(only),
    )
