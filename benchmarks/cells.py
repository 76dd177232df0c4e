"""The real cells the benchmarks install: torch from PyPI, two releases, paired torchvision.

Pins are exact (torchvision pairs read from PyPI metadata once: 0.19.1 requires
torch==2.4.1, 0.20.1 requires torch==2.5.1), so every run installs the same wheels.
Cells are built as ``torch_matrix.vocab.records.Cell`` and installed through ``torch_matrix.world.environment``,
the tool's own code path; the index options come from ``torch_matrix.world.specfile`` as for a user.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path
from typing import Any, Iterable

from torch_matrix.world.environment import install_command, uv_executable
from torch_matrix.vocab.records import INSTALLED, Cell

from .common import BenchError, interpreter_path, nox_venv, patched_environ, run_command

PYTHON = "3.11"
PAIRS = {"2.4.1": "0.19.1", "2.5.1": "0.20.1"}


def make_cell(
    torch: str, numpy: str = "", python: str = PYTHON, torchvision: str | None = None
) -> Cell:
    torchvision = PAIRS[torch] if torchvision is None else torchvision
    axes = {"python": python, "torch": torch, "torchvision": torchvision, "variant": "default"}
    requirements = [f"torch=={torch}"] + ([f"torchvision=={torchvision}"] if torchvision else [])
    cell_id = f"t{torch}-py{python}"
    if numpy:
        axes["numpy"] = numpy
        requirements.append(f"numpy=={numpy}")
        cell_id += f"-np{numpy}"
    return Cell(
        id=cell_id,
        axes=axes,
        requirements=tuple(requirements),
        probes=("install_sanity",),
        required_probes=("install_sanity",),
    )


def light_cell(numpy: str, pillow: str = "11.0.0") -> Cell:
    """A few-MB cell for ``--quick``: same code path, no multi-GB torch stack."""
    axes = {"python": PYTHON, "torch": "", "torchvision": "", "variant": "default", "numpy": numpy}
    return Cell(
        id=f"light-np{numpy}-py{PYTHON}",
        axes=axes,
        requirements=(f"numpy=={numpy}", f"pillow=={pillow}"),
    )


def warm_cell(quick: bool) -> Cell:
    """Figure 1's cell: one torch release with its paired torchvision (light in --quick)."""
    return light_cell("2.0.2") if quick else make_cell("2.4.1")


def matrix_cells(quick: bool) -> list[Cell]:
    """The cold matrix / disk cells: two torch releases, numpy as a second axis (5 cells).

    Cells share wheels (torch, its nvidia-* stack) so the cache must fetch each once.
    """
    if quick:
        return [light_cell(v) for v in ("1.25.2", "1.26.4", "2.0.2", "2.1.3", "2.2.6")]
    return [
        make_cell("2.4.1", "1.26.4"),
        make_cell("2.4.1", "2.0.2"),
        make_cell("2.5.1", "1.26.4"),
        make_cell("2.5.1", "2.0.2"),
        make_cell("2.5.1", "2.1.3"),
    ]


def index_config() -> Any:
    """The index options the tool would use here (pip's find-links etc. honoured), via torch_matrix.world.specfile."""
    from torch_matrix.spec.parse import parse_spec

    text = f'name = "bench"\npython = ["{PYTHON}"]\ntorch = {{ versions = "==2.5.1" }}\n'
    return parse_spec(text, "benchmarks/cells.py", environ=os.environ).index


def cell_ids(cells: Iterable[Cell]) -> list[str]:
    return [cell.id for cell in cells]


def _clock_stops_at_probes(stopped: dict[str, float]) -> Any:
    """``CellSteps`` that run ``run_cell`` up to its probes phase only: the figure ends when the
    venv is verified. The probes step notes the time and returns no probes; every step
    before it is the tool's unchanged code."""
    from torch_matrix.run.cellrun import CellSteps
    from torch_matrix.world.probe_process import ProbeRun

    def stop(*args: Any, **kwargs: Any) -> Any:
        stopped["at"] = time.perf_counter()
        return ProbeRun((), {"gpu": {"skipped": "benchmark"}})

    return CellSteps(probes=stop)


def run_our_cell(
    cell: Cell, location: os.PathLike[str], index: Any, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """What a ``nox -s matrix`` cell does before its probes, timed from its start.

    nox's uv backend creates the venv (nox's own ``VirtualEnv``), then
    ``torch_matrix.run.cellrun.run_cell`` runs its phases (interpreter facts, resolve, install,
    verify). ``env`` (e.g. a fresh ``UV_CACHE_DIR``) goes into the process environment,
    which is where nox and ``run_cell`` read it from.
    """
    from torch_matrix.run.cellrun import CellSettings, run_cell

    location = Path(location)
    settings = CellSettings(
        cells_dir=location.parent / "cells",
        work_dir=location / "torch-matrix",
        index_config=index,
        fingerprint=cell.fingerprint(),
    )
    interpreter = interpreter_path(cell.python)
    progress = io.StringIO()
    stopped: dict[str, float] = {}
    steps = _clock_stops_at_probes(stopped)
    with patched_environ(env or {}), contextlib.redirect_stderr(progress):
        start = time.perf_counter()
        python = nox_venv(location, interpreter, "uv")
        created = time.perf_counter()
        result = run_cell(cell, str(python), settings, steps)
    verified = stopped.get("at", time.perf_counter())
    if result.install.status != INSTALLED:
        raise BenchError(
            f"our cell {cell.id}: {result.install.status}: {result.install.message[-800:]}"
        )
    phases = {
        name: seconds for name, seconds in result.timings.items() if name not in ("probes", "total")
    }
    return {
        "venv_s": created - start,
        "cellrun_s": verified - created,
        "total_s": verified - start,
        "phases": phases,  # run_cell's own timings (its phases, and uv's steps when it reports them)
        "python": str(python),
        "resolved": dict(result.install.resolved),
        "command": list(result.install.command),
        "message": result.install.message,
    }


def run_floor(
    cell: Cell, location: os.PathLike[str], index: Any, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The floor: bare ``uv venv`` + ``uv pip install`` with the same pins and index options.

    It calls the uv binary directly (the one ``torch_matrix.world.environment`` uses), not a ``uv`` found
    on PATH, which here is a pyenv shim costing ~70 ms a call.
    """
    location = Path(location)
    uv = uv_executable()
    start = time.perf_counter()
    run_command(
        [uv, "venv", "-q", "--clear", "-p", interpreter_path(cell.python), str(location)], env=env
    )
    python = location / "bin" / "python"
    run_command(install_command(cell, index, str(python), uv=uv), env=env)
    return {"total_s": time.perf_counter() - start, "python": str(python)}


def run_virtualenv_pip(
    cell: Cell, location: os.PathLike[str], env: dict[str, str]
) -> dict[str, Any]:
    """nox's default backend for the same cell: virtualenv, then ``pip install`` of the pins."""
    start = time.perf_counter()
    python = nox_venv(Path(location), interpreter_path(cell.python), "virtualenv")
    created = time.perf_counter()
    run_command([str(python), "-m", "pip", "install", "-q", *cell.requirements], env=env)
    return {
        "venv_s": created - start,
        "total_s": time.perf_counter() - start,
        "python": str(python),
    }
