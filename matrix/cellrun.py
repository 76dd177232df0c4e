"""Run one cell end to end: install, verify, probe, record. The only place that knows the order.

Phases: ``resolve+install`` (one ``uv pip install``; uv's own resolve / prepare / install
times are kept in the timings), ``verify`` (what is really in the venv), ``probes``
(``python -m probes`` inside the cell's interpreter). The result is written atomically
as soon as the cell ends, so an interrupted run loses no finished cell.

The probe runner sees only the cell's own site-packages plus a staged copy of the
``probes`` package (stdlib-only, copied into the run directory): never our venv, never
the repository root, so a probe cannot accidentally import the wrong torch.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as _dt
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from . import __version__ as TOOL_VERSION
from . import environment
from .progress import Progress
from .records import (
    ERROR,
    INSTALLED,
    PROBE_RUNNER,
    UNSATISFIABLE,
    Cell,
    CellResult,
    InstallOutcome,
    ProbeResult,
)
from .results import write_result
from .verdict import verdict_of

OUTPUT_TAIL = 3000


@dataclass(frozen=True)
class CellSettings:
    """How to run a cell; the noxfile builds one per cell from the spec."""

    cells_dir: Path  # where the result file goes (results/<run>/cells)
    work_dir: Path  # scratch for this cell: staged probes, probe output
    index_config: Any = None  # spec.IndexConfig
    fingerprint: str = ""
    probe_dirs: tuple[str, ...] = ()
    probe_commands: Mapping[str, str] = field(default_factory=dict)
    probe_timeout_s: float = 300.0  # per probe; the runner as a whole gets a multiple of it
    probe_grace_s: float = 60.0  # on top: interpreter start, importing torch once
    install_retries: int = environment.DEFAULT_RETRIES
    retry_backoff_s: float = environment.DEFAULT_BACKOFF_S
    install_timeout_s: float | None = 3600.0
    position: int = 0
    total: int = 0
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables (CUDA_VISIBLE_DEVICES)
    uv: str | None = None
    # The project under test (the spec's directory): install paths are relative to it, and
    # command probes (``pytest -q tests``) run from it. None: the current directory.
    project_dir: str | None = None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def host_platform() -> dict[str, Any]:
    libc = " ".join(platform.libc_ver()).strip()
    return {"system": platform.system(), "machine": platform.machine(),
            "release": platform.release(), "libc": libc, "host": platform.node()}


def host_gpu(timeout_s: float = 15.0) -> dict[str, Any]:
    """Driver and devices from nvidia-smi when there is one; empty on a CPU-only machine."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        done = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    devices = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            devices.append({"name": parts[0], "memory": parts[2]})
            driver = parts[1]
    return {"driver": driver, "devices": devices} if devices else {}


def interpreter_facts(venv_python: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The cell's interpreter: the venv's python and the base interpreter it was made from."""
    script = ("import json, platform, sys; print(json.dumps({'version': platform.python_version(),"
              " 'implementation': sys.implementation.name,"
              " 'base': getattr(sys, '_base_executable', sys.executable)}))")
    facts: dict[str, Any] = {"path": str(venv_python)}
    try:
        done = subprocess.run([str(venv_python), "-I", "-c", script], capture_output=True,
                              text=True, timeout=60, env=dict(env), check=False)
        if done.returncode == 0:
            facts.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        pass
    return facts


def probes_source() -> Path:
    """The ``probes`` package directory, found without importing it (it is stdlib-only)."""
    spec = importlib.util.find_spec("probes")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the probes package is not importable")
    return Path(next(iter(spec.submodule_search_locations)))


def stage_probes(work_dir: Path) -> Path:
    """Copy ``probes`` into ``work_dir/stage``; that directory alone goes on PYTHONPATH."""
    stage = work_dir / "stage"
    target = stage / "probes"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(probes_source(), target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return stage


def expected_versions(cell: Cell) -> dict[str, str]:
    """Exact pins the cell asked for (``torch==2.5.1`` -> torch: 2.5.1), for the probes to check."""
    expected = {}
    for text in cell.requirements:
        req = Requirement(text)
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if len(pins) == 1 and "*" not in pins[0]:
            expected[req.name] = pins[0]
    return expected


def probe_command(cell: Cell, venv_python: str, out: Path, settings: CellSettings) -> list[str]:
    command = [str(venv_python), "-m", "probes", "--out", str(out), "--variant", cell.variant]
    if cell.probes:
        command += ["--select", ",".join(cell.probes)]
    for name, version in expected_versions(cell).items():
        command += ["--expect", f"{name}={version}"]
    for directory in settings.probe_dirs:
        command += ["--probe-dir", str(directory)]
    for name, text in settings.probe_commands.items():
        command += ["--command", f"{name}={text}"]
    if settings.probe_commands and settings.project_dir:
        command += ["--command-dir", str(settings.project_dir)]
    return command


def runner_failure(message: str, output: str = "", duration_s: float = 0.0) -> ProbeResult:
    """The probe runner itself broke: recorded, but never evidence about the cell."""
    return ProbeResult(name=PROBE_RUNNER, status=ERROR, message=message, duration_s=duration_s,
                       output_tail=output[-OUTPUT_TAIL:])


@dataclass
class ProbeRun:
    probes: tuple[ProbeResult, ...]
    data: Mapping[str, Any]  # the runner's whole output (python, platform, gpu, packages)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stream_process(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
                   echo: Callable[[str], None] | None = None) -> tuple[int, str, bool]:
    """Run ``command``, echoing each output line as it comes (long probe runs stay visible).

    Returns (returncode, last output, timed out). The child gets its own process group so
    a timeout or Ctrl-C stops everything it forked (the probe runner's zygote children).
    """
    tail: collections.deque[str] = collections.deque(maxlen=400)
    proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", cwd=str(cwd), env=dict(env),
                            start_new_session=True)
    expired = threading.Event()

    def on_timeout() -> None:
        expired.set()
        _kill_group(proc)

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            if echo is not None:
                echo(line.rstrip("\n"))
        proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    return proc.returncode, "".join(tail)[-OUTPUT_TAIL * 4:], expired.is_set()


def run_probes(cell: Cell, venv_python: str, settings: CellSettings,
               env: Mapping[str, str], echo: Callable[[str], None] | None = None) -> ProbeRun:
    work = Path(settings.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    out = work / "probes.json"
    if out.exists():
        out.unlink()
    stage = stage_probes(work)
    command = probe_command(cell, venv_python, out, settings)
    count = max(1, len(cell.probes) or 20) + len(settings.probe_commands)
    timeout = settings.probe_timeout_s * count + settings.probe_grace_s
    probe_env = dict(env)
    venv_dir = Path(venv_python).parent.parent
    if (venv_dir / "pyvenv.cfg").is_file():
        # Command probes (``pytest tests/x``) run the cell's tools, as in an activated venv.
        probe_env["VIRTUAL_ENV"] = str(venv_dir)
        probe_env["PATH"] = os.pathsep.join([str(Path(venv_python).parent), env.get("PATH", "")])
    probe_env["PYTHONPATH"] = str(stage)
    probe_env["PYTHONNOUSERSITE"] = "1"
    probe_env["PYTHONDONTWRITEBYTECODE"] = "1"
    probe_env.update(settings.env)
    try:
        returncode, output, timed_out = stream_process(command, cwd=work, env=probe_env,
                                                       timeout_s=timeout, echo=echo)
    except OSError as error:
        return ProbeRun((runner_failure(f"cannot start the probe runner: {error}"),), {})
    if timed_out:
        return ProbeRun((runner_failure(f"probe runner ran past {timeout:g} s", output),), {})
    try:
        data = json.loads(out.read_text(encoding="utf-8"))
        probes = tuple(ProbeResult.from_json(item) for item in data["results"])
    except FileNotFoundError:
        return ProbeRun((runner_failure(
            f"probe runner exited with {returncode} without writing {out.name}", output),), {})
    except (OSError, ValueError, KeyError, TypeError) as error:
        return ProbeRun((runner_failure(f"unreadable probe output: {error}", output),), {})
    return ProbeRun(probes, data)


def headline(message: str, limit: int = 200) -> str:
    """The informative line of a message: uv's ``cause: Because ...`` rather than ``error: ...``."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and lines[0].startswith(environment.EXCLUDED_BY_PROJECT):
        return lines[0] if len(lines[0]) <= limit else lines[0][:limit - 3] + "..."
    for line in lines:
        if "Because" in line:
            text = line.removeprefix("cause:").strip()
            return text if len(text) <= limit else text[:limit - 3] + "..."
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _finish(cell: Cell, settings: CellSettings, progress: Progress, started: str, *,
            install: InstallOutcome, probes: Sequence[ProbeResult] = (),
            interpreter: Mapping[str, Any] | None = None,
            platform_facts: Mapping[str, Any] | None = None,
            gpu: Mapping[str, Any] | None = None, wall_start: float) -> CellResult:
    timings = dict(progress.timings)
    timings["total"] = progress.clock() - wall_start
    timings = {name: round(seconds, 3) for name, seconds in timings.items()}  # as stored
    result = CellResult(cell=cell, fingerprint=settings.fingerprint, install=install,
                        probes=tuple(probes), interpreter=dict(interpreter or {}),
                        platform=dict(platform_facts or host_platform()), gpu=dict(gpu or {}),
                        timings=timings, started_at=started, finished_at=_now(),
                        tool_version=TOOL_VERSION)
    path = write_result(result, settings.cells_dir)
    verdict = verdict_of(result)
    reason = f": {headline(verdict.reason)}" if verdict.reason else ""
    progress.line(f"done {verdict.kind}{reason} ({timings['total']:.1f}s) -> {path}")
    return result


def run_cell(cell: Cell, venv_python: str, settings: CellSettings) -> CellResult:
    """Install, verify and probe ``cell`` in the venv of ``venv_python``; write and return its result."""
    progress = Progress(cell.id, settings.position, settings.total)
    wall_start = progress.clock()
    started = _now()
    env = environment.base_env()
    if cell.plan_note:
        outcome = InstallOutcome(UNSATISFIABLE, message=cell.plan_note, attempts=0)
        return _finish(cell, settings, progress, started, install=outcome, wall_start=wall_start)
    interpreter = interpreter_facts(venv_python, env)
    common: dict[str, Any] = {"retries": settings.install_retries,
                              "backoff_s": settings.retry_backoff_s,
                              "timeout_s": settings.install_timeout_s, "env": env, "uv": settings.uv}
    # One uv call resolves and installs: uv refuses before downloading anything when the
    # resolver says no, so a separate dry-run would only pay for a second resolution.
    with progress.phase("resolve+install") as note:
        outcome = environment.install(cell, settings.index_config, venv_python,
                                      project_dir=settings.project_dir, **common)
        steps = environment.uv_step_seconds(outcome.message)
        progress.timings.update(steps)
        note.outcome = outcome.status + (f" (resolve {steps['resolve']:.1f}s)" if "resolve" in steps
                                         else "")
    with progress.phase("verify") as note:
        outcome = environment.verify(cell, venv_python, outcome, env=env, uv=settings.uv)
        note.outcome = "ok" if outcome.status == INSTALLED else outcome.status
    if outcome.status != INSTALLED:
        return _finish(cell, settings, progress, started, install=outcome,
                       interpreter=interpreter, wall_start=wall_start)
    with progress.phase("probes") as note:
        run = run_probes(cell, venv_python, settings, env,
                         echo=lambda line: progress.line(f"  | {line}"))
        counts: dict[str, int] = {}
        for probe in run.probes:
            counts[probe.status] = counts.get(probe.status, 0) + 1
        note.outcome = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    python = run.data.get("python") or {}
    if python:
        interpreter = {**interpreter, **{k: v for k, v in python.items() if k != "executable"}}
    gpu = run.data.get("gpu") or host_gpu()
    return _finish(cell, settings, progress, started, install=outcome, probes=run.probes,
                   interpreter=interpreter, platform_facts=run.data.get("platform"), gpu=gpu,
                   wall_start=wall_start)


def with_position(settings: CellSettings, position: int, total: int) -> CellSettings:
    return dataclasses.replace(settings, position=position, total=total)
