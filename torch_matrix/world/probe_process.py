"""The cell's own Python processes: stage and run ``python -m torch_matrix.probes``, and ask ``torch_matrix/probes/facts.py``.

The probe runner sees only the cell's own site-packages plus a staged copy of the
``probes`` package (stdlib-only, copied into the cell's work directory): never our
venv, never the repository root, so a probe cannot accidentally import the wrong
torch. Its output lines are echoed as they come; a runner that dies, hangs past its
limit or writes no output becomes one ``probe-runner`` result with status ``error``,
never evidence about the cell (see ``verdict``). Facts about an interpreter (its
version, its base interpreter, each package's own ``__version__``) come from running
``torch_matrix/probes/facts.py`` as a script in it, with ``-I`` so it sees nothing of ours.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from torch_matrix.edges import proc
from torch_matrix.judge.gpus import Gpu, Target, TargetError, parse_driver
from torch_matrix.vocab.records import ERROR, PROBE_RUNNER, Cell, ProbeResult
from torch_matrix.vocab.settings import PROBE_NOW_ENV

OUTPUT_TAIL = 3000


@dataclass(frozen=True)
class ProbeOptions:
    """What the spec's [probes] table adds to a cell's probe run."""

    dirs: tuple[str, ...] = ()
    commands: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 300.0  # per probe; the runner as a whole gets a multiple of it
    command_timeout_s: float | None = None  # per command probe; None: ``timeout_s``
    grace_s: float = 60.0  # on top: interpreter start, importing torch once
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables (CUDA_VISIBLE_DEVICES)
    command_dir: str | None = None  # where command probes run (the project under test); None: cwd
    user_site: bool = (
        False  # an existing environment (torch-matrix check) keeps its user site-packages
    )


@dataclass
class ProbeRun:
    probes: tuple[ProbeResult, ...]
    data: Mapping[str, Any]  # the runner's whole output (python, platform, gpu, packages)


# ---------------------------------------------------------------- the probes package


def _probes_package() -> Path:
    spec = importlib.util.find_spec("torch_matrix.probes")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the probes package is not importable")
    return Path(next(iter(spec.submodule_search_locations)))


def probes_source() -> Path:
    """The ``probes`` package directory to stage, found without importing it (it is stdlib-only)."""
    return _probes_package()


def facts_script() -> Path:
    return _probes_package() / "facts.py"


def stage_probes(work_dir: Path) -> Path:
    """Copy ``torch_matrix.probes`` into ``work_dir/stage``; that directory alone goes on PYTHONPATH.

    The stage holds ``torch_matrix/__init__.py`` (a stub: the cell's interpreter may be Python 3.8
    and must import nothing of ours but the probes) and ``torch_matrix/probes/``.
    """
    stage = work_dir / "stage"
    package = stage / "torch_matrix"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        '"""Staged for a cell: only the probe suite (torch_matrix.probes)."""\n'
    )
    shutil.copytree(
        probes_source(), package / "probes", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return stage


# ---------------------------------------------------------------- facts


def run_facts(
    python: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
    runner: proc.Runner = proc.run,
    isolated: bool = True,
) -> tuple[Any, str]:
    """Run ``torch_matrix/probes/facts.py ARGS`` in ``python``: (its JSON, "") or (None, why not).

    ``isolated`` (``-I``): nothing of the caller's environment, no user site-packages. An
    existing environment (``torch-matrix check``) is read as its user runs it instead."""
    flags = ["-I"] if isolated else []
    code, out, err = proc.run_text(
        [str(python), *flags, str(facts_script()), *args], timeout=timeout_s, env=env, runner=runner
    )
    if code != 0:
        return None, (err.strip() or f"exited with {code}")
    try:
        return json.loads(out.strip().splitlines()[-1]), ""
    except (ValueError, IndexError) as error:
        return None, f"unreadable output: {error}"


def interpreter_facts(venv_python: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The cell's interpreter: the venv's python and the base interpreter it was made from."""
    facts: dict[str, Any] = {"path": str(venv_python)}
    found, _why = run_facts(venv_python, ["interpreter"], env=env)
    if isinstance(found, dict):
        facts.update({k: v for k, v in found.items() if k != "executable"})
    return facts


def host_platform() -> dict[str, Any]:
    libc = " ".join(platform.libc_ver()).strip()
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "release": platform.release(),
        "libc": libc,
        "host": platform.node(),
    }


def host_gpu(timeout_s: float = 15.0) -> dict[str, Any]:
    """Driver and devices from nvidia-smi when there is one; empty on a CPU-only machine."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    code, out, _err = proc.run_text(
        [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        timeout=timeout_s,
    )
    if code != 0:
        return {}
    devices = []
    driver = ""
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            devices.append({"name": parts[0], "memory": parts[2]})
            driver = parts[1]
    return {"driver": driver, "devices": devices} if devices else {}


def host_gpu_targets(timeout_s: float = 15.0) -> tuple[Target, ...]:
    """The GPUs and driver of this machine as hardware targets, from nvidia-smi (its ``compute_cap``
    field); () where there is no nvidia-smi or it finds no GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ()
    code, out, _err = proc.run_text(
        [smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
        timeout=timeout_s,
    )
    if code != 0:
        return ()
    return targets_from_smi(out)


def targets_from_smi(text: str) -> tuple[Target, ...]:
    """``NVIDIA H100 80GB HBM3, 9.0, 550.54.15`` lines -> one target per distinct GPU (pure)."""
    found: list[Target] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not re.fullmatch(r"\d+\.\d", parts[1]):
            continue
        major, minor = parts[1].split(".")
        try:
            driver = parse_driver(parts[2])
        except TargetError:
            driver = ""
        target = Target(Gpu(parts[0], int(major) * 10 + int(minor)), driver)
        if target not in found:
            found.append(target)
    return tuple(found)


# ---------------------------------------------------------------- the probe runner


def expected_versions(cell: Cell) -> dict[str, str]:
    """Exact pins the cell asked for (``torch==2.5.1`` -> torch: 2.5.1), for the probes to check."""
    expected = {}
    for text in cell.requirements:
        req = Requirement(text)
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if len(pins) == 1 and "*" not in pins[0]:
            expected[req.name] = pins[0]
    return expected


def probe_command(cell: Cell, venv_python: str, out: Path, options: ProbeOptions) -> list[str]:
    command = [
        str(venv_python),
        "-m",
        "torch_matrix.probes",
        "--out",
        str(out),
        "--variant",
        cell.variant,
        "--timeout",
        f"{options.timeout_s:g}",
    ]  # the spec's per-probe limit, both ways
    if options.commands:
        command += ["--command-timeout", f"{_command_limit(options):g}"]
    if cell.probes:
        command += ["--select", ",".join(cell.probes)]
    for name, version in expected_versions(cell).items():
        command += ["--expect", f"{name}={version}"]
    for directory in options.dirs:
        command += ["--probe-dir", str(directory)]
    for name, text in options.commands.items():
        command += ["--command", f"{name}={text}"]
    if options.commands and options.command_dir:
        command += ["--command-dir", str(options.command_dir)]
    return command


def _command_limit(options: ProbeOptions) -> float:
    return options.timeout_s if options.command_timeout_s is None else options.command_timeout_s


def runner_failure(message: str, output: str = "", duration_s: float = 0.0) -> ProbeResult:
    """The probe runner itself broke: recorded, but never evidence about the cell."""
    return ProbeResult(
        name=PROBE_RUNNER,
        status=ERROR,
        message=message,
        duration_s=duration_s,
        output_tail=output[-OUTPUT_TAIL:],
    )


def probe_env(
    venv_python: str,
    stage: Path,
    env: Mapping[str, str],
    extra: Mapping[str, str],
    user_site: bool = False,
) -> dict[str, str]:
    """The runner's environment: the staged probes alone on PYTHONPATH, the venv's tools first on PATH."""
    result = dict(env)
    venv_dir = Path(venv_python).parent.parent
    if (venv_dir / "pyvenv.cfg").is_file():
        # Command probes (``pytest tests/x``) run the cell's tools, as in an activated venv.
        result["VIRTUAL_ENV"] = str(venv_dir)
        result["PATH"] = os.pathsep.join([str(Path(venv_python).parent), env.get("PATH", "")])
    result["PYTHONPATH"] = str(stage)
    if not user_site:
        result["PYTHONNOUSERSITE"] = "1"
    result["PYTHONDONTWRITEBYTECODE"] = "1"
    result.update(extra)
    return result


def run_probes(
    cell: Cell,
    venv_python: str,
    work_dir: Path,
    options: ProbeOptions,
    env: Mapping[str, str],
    echo: Callable[[str], None] | None = None,
) -> ProbeRun:
    """Stage the probes, run ``python -m torch_matrix.probes`` in the cell, read what it wrote."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    out = work / "probes.json"
    if out.exists():
        out.unlink()
    stage = stage_probes(work)
    command = probe_command(cell, venv_python, out, options)
    count = max(1, len(cell.probes) or 20)
    timeout = (
        options.timeout_s * count
        + _command_limit(options) * len(options.commands)
        + options.grace_s
    )
    count += len(options.commands)
    runner_env = probe_env(venv_python, stage, env, options.env, options.user_site)
    now = running_file(work)
    for stale in (now, now.with_name(now.name + ".test")):
        stale.unlink(missing_ok=True)
    runner_env[PROBE_NOW_ENV] = str(now)
    runner_env[proc.MARKER] = proc.new_marker()  # how everything the runner starts is found again
    try:
        done = proc.stream(
            command,
            cwd=work,
            env=runner_env,
            timeout_s=timeout,
            echo=echo,
            keep_chars=OUTPUT_TAIL * 4,
        )
    except OSError as error:
        return ProbeRun((runner_failure(f"cannot start the probe runner: {error}"),), {})
    if done.timed_out:
        kept = _partial_probes(out)
        return ProbeRun(
            kept
            + (
                runner_failure(
                    f"probe runner ran past {timeout:g} s (the cell's watchdog: [probes] timeout x "
                    f"{count} probes + {options.grace_s:g} s); {len(kept)} finished probe(s) kept",
                    done.output,
                ),
            ),
            {},
        )
    return _read_output(out, done)


def _read_output(out: Path, done: Any) -> ProbeRun:
    """What the probe runner wrote to ``out`` once it exited (``done``: its ``proc.stream`` outcome):
    every probe, or the finished ones and a runner failure that says why the rest are missing."""
    try:
        data = json.loads(out.read_text(encoding="utf-8"))
        probes = _probe_results(data["results"])
    except FileNotFoundError:
        return ProbeRun(
            (
                runner_failure(
                    f"probe runner exited with {done.returncode} without writing {out.name}",
                    done.output,
                ),
            ),
            {},
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        return ProbeRun((runner_failure(f"unreadable probe output: {error}", done.output),), {})
    if data.get("partial"):  # the runner died between two probes: keep what it finished
        return ProbeRun(
            probes
            + (
                runner_failure(
                    f"probe runner exited with {done.returncode} before the suite finished; "
                    f"{len(probes)} finished probe(s) kept",
                    done.output,
                ),
            ),
            {},
        )
    return ProbeRun(probes, data)


def running_file(work_dir: Path) -> Path:
    """Where the probe runner names the probe it runs (``$TORCH_MATRIX_PROBE_NOW``); its command's
    pytest names the running test in ``<it>.test``."""
    return Path(work_dir) / "probe-now.txt"


def running_now(work_dir: Path) -> str:
    """What the cell's probe phase is running (``tests: tests/test_x.py::test_y``), for its
    heartbeat; "" when the runner has named nothing yet."""
    now = running_file(work_dir)
    try:
        probe = now.read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    try:
        test = now.with_name(now.name + ".test").read_text(encoding="utf-8").strip()
    except OSError:
        test = ""
    if not probe:
        return ""
    return f"running {probe}" + (f": {test}" if test else "")


def _partial_probes(out: Path) -> tuple[ProbeResult, ...]:
    """Results the runner wrote before it was stopped (it rewrites ``out`` after each probe)."""
    try:
        data = json.loads(out.read_text(encoding="utf-8"))
        return _probe_results(data["results"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def _probe_results(items: Any) -> tuple[ProbeResult, ...]:
    """Each probe's result; one that does not read costs that probe (an ``error`` naming what was wrong),
    never the others. The runner checks what it records, so this is a second line."""
    probes = []
    for position, item in enumerate(items):
        try:
            probes.append(ProbeResult.from_json(item))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            name = item.get("name") if isinstance(item, dict) else None
            shown = name if isinstance(name, str) and name else f"probe #{position + 1}"
            probes.append(
                ProbeResult(
                    name=shown, status=ERROR, message=f"unreadable probe result: {error!r}"[:300]
                )
            )
    return tuple(probes)
