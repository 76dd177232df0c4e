"""Prefetch: while a cell runs its probes, fetch the next cells' wheels into uv's cache.

A cold matrix otherwise pays every download in series with the probes: a cell whose torch
is not cached spends seconds downloading before its probes start, while the previous cell's
probes left the network idle. Here, when a cell's probes start, the next cells' pins are
installed by one background ``uv pip install --target <scratch>`` at a time: uv fills its
cache (what the next cell's own install then links from); then the install check's hashing
runs over the scratch directory (its files are the cache's inodes, which the cell's venv will
hardlink: ``torch_matrix/probes/facts.py``'s memo then knows them), and the scratch directory is deleted.
Bounded and never in the way:

- at the lowest CPU and I/O priority (``nice``/``ionice``), in a session of its own whose
  scheduling group has the lowest weight (``proc.background``): uv's own work uses the cores the
  probes leave idle instead of taking one of the two from torch.compile (beside a fetch niced in
  our own session, the probe suite took 28 s instead of 14; in a session that yields, 17.5 s);
- at most ``ahead`` cells ahead (``TORCH_MATRIX_PREFETCH``, default 2; ``0`` switches it off),
  only cells that will run (the caller says which), each once per run;
- a disk budget: nothing starts, and a running fetch is stopped, while the free space on uv's
  cache's filesystem is below ``TORCH_MATRIX_PREFETCH_FREE_GB`` (default 10 GB);
- never two writers on one venv: a fetch writes only into its own scratch directory and uv's
  cache (which is safe to share), never into a cell's venv;
- Ctrl-C, the end of the run, a failed or stopped fetch: the uv process is stopped and the
  scratch directory removed. A fetch that fails is only a miss: the cell installs as before.

Only the pins are fetched (not the project's own install items), and not for a cell that
installs a pair over its own requirement (``install = "override"``).

What a session fetches ahead: ``queued_cells`` reads the cells after the running session from nox's
command line (``run.selection``: nox's own queue is private); ``prefetch_steps`` gives each cell the
``CellSteps`` whose probe phase starts fetching them (one ``Prefetcher`` per nox process, closed at
exit). Off under ``-j`` and with ``TORCH_MATRIX_PREFETCH=0``.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_matrix.edges import proc
from torch_matrix.run.disk import free_bytes
from torch_matrix.run.matrixplan import (
    MatrixPlan,
    is_complete,
    redo_requested,
    selected_cells,
)
from torch_matrix.vocab import layout
from torch_matrix.vocab import settings as env_settings
from torch_matrix.vocab.settings import BUDGET_ENV as BUDGET_ENV, PREFETCH_ENV as PREFETCH_ENV
from torch_matrix.vocab.records import Cell
from torch_matrix.world import environment, probe_process

DEFAULT_AHEAD = env_settings.DEFAULT_PREFETCH
DEFAULT_FREE_GB = env_settings.DEFAULT_PREFETCH_FREE_GB
POLL_S = 0.5


@dataclass(frozen=True)
class PrefetchSettings:
    ahead: int = DEFAULT_AHEAD  # cells fetched ahead of the running one (0: off)
    min_free_bytes: int = int(DEFAULT_FREE_GB * 1e9)  # the disk budget: free space a fetch leaves


def settings_from(environ: Mapping[str, str] = os.environ) -> PrefetchSettings:
    """The prefetch settings from the environment; a bad value is one error line (vocab/settings.py)."""
    ahead: int = env_settings.read(environ, PREFETCH_ENV)
    free_gb: float = env_settings.read(environ, BUDGET_ENV)
    return PrefetchSettings(ahead=ahead, min_free_bytes=int(free_gb * 1e9))


def fetch_command(
    cell: Cell, index_config: Any, python: str, target: Path, uv: str
) -> list[str] | None:
    """The cell's own install command, pins only, into ``target`` instead of a venv; None when the
    cell cannot be fetched this way (an override pair)."""
    if environment.OVERRIDE_TAG in cell.tags or cell.plan_note:
        return None
    command = environment.install_command(cell, index_config, python, uv=uv, with_project=False)
    at = command.index("--python") + 2
    return command[:at] + ["--target", str(target), "--quiet"] + command[at:]


class Prefetcher:
    """One per run. ``ahead(cells)`` when a cell's probes start; ``close()`` at the end (idempotent)."""

    def __init__(
        self,
        settings: PrefetchSettings,
        *,
        cache_dir: str,
        scratch: Path,
        index_config: Any,
        python_for: Callable[[Cell], str],
        env: Mapping[str, str] | None = None,
        uv: str | None = None,
        log: Callable[[str], None] = lambda line: None,
        free: Callable[[str], int] = free_bytes,
        start: Callable[..., Any] = proc.background,
        boost: Callable[[Any], bool] = proc.normal_priority,
    ) -> None:
        self.settings = settings
        self.cache_dir = cache_dir
        self.scratch = Path(scratch)
        self.index_config = index_config
        self.python_for = python_for
        self.env = dict(env) if env is not None else None
        self.uv = uv or environment.uv_executable()
        self.log = log
        self.free = free
        self.start = start
        self.boost = boost
        # Whether a cell may be fetched ahead now ("" or why not): the run's disk budget
        # (``run.disk.Keeper.ahead``), set once the run has one.
        self.fits: Callable[[Cell], str] | None = None
        self.queued: list[Cell] = []
        self.seen: set[str] = set()  # cell ids queued once this run (fetched, failed or skipped)
        self.done: dict[str, str] = {}  # cell id -> "fetched" / why not
        self._lock = threading.Condition()
        self._current = ""  # the cell being fetched now
        self._handed = ""  # a cell whose fetch its own install took over
        self._claimed = ""  # a cell whose install waits for its fetch
        self._step = ""  # what the running process does: "fetch" or "hash"
        self._thread: threading.Thread | None = None
        self._process: Any = None  # the running fetch (a Popen)
        self._closed = False

    def ahead(self, upcoming: Sequence[Cell]) -> list[Cell]:
        """Queue the first ``settings.ahead`` of ``upcoming`` not queued before; returns them."""
        if self.settings.ahead <= 0 or self._closed:
            return []
        with self._lock:
            new = [cell for cell in upcoming[: self.settings.ahead] if cell.id not in self.seen]
            self.seen.update(cell.id for cell in new)
            self.queued.extend(new)
            if new and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(
                    target=self._work, name="torch-matrix-prefetch", daemon=True
                )
                self._thread.start()
        if new:
            self.log(
                f"prefetch: fetching the wheels of {', '.join(c.id for c in new)} while the probes run"
            )
        return new

    def claim(self, cell_id: str, timeout_s: float = 3600.0) -> None:
        """``cell_id`` is about to install: drop it from the queue. When it is being fetched, the
        cell never waits behind a fetch at the lowest priority: the fetch is raised to normal
        priority and waited for (it downloads what the install needs; two uv processes would
        download it twice), said; where its priority cannot be raised (no privilege), it is
        stopped and the cell's own install fetches the rest (what it finished stays in uv's cache)."""
        with self._lock:
            self.queued = [cell for cell in self.queued if cell.id != cell_id]
            if self._current != cell_id:
                return
            self._claimed = cell_id  # its install starts once the fetch ends: nothing after it
            process = self._process
            if self._step == "hash" and process is not None:  # hashing ahead is only a head start
                proc.stop(process)
                process = None
            raised = process is not None and self.boost(process)
            if not raised:
                self._handed = cell_id
        started = time.monotonic()
        if raised:
            self.log(
                f"prefetch: {cell_id}: its wheels are still being fetched: the fetch goes on at "
                "normal priority and the cell installs once it ends"
            )
        else:
            self.log(
                f"prefetch: {cell_id}: its wheels were still being fetched in the background: the "
                "cell's install takes the fetch over at normal priority (what is fetched is kept)"
            )
            if process is not None:
                proc.stop(process)
        with self._lock:
            self._lock.wait_for(lambda: self._current != cell_id, timeout_s)
        if raised:
            self.log(f"prefetch: {cell_id}: waited {time.monotonic() - started:.1f}s for its fetch")

    def wait(self, timeout_s: float | None = None) -> None:
        """Until the queue is empty (tests; the run itself never waits for a fetch)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def close(self) -> None:
        """Stop the running fetch, drop the queue, remove the scratch directory."""
        with self._lock:
            self._closed = True
            self.queued.clear()
            process = self._process
        if process is not None:
            proc.stop(process)
        if self._thread is not None:
            self._thread.join(10)
        shutil.rmtree(self.scratch, ignore_errors=True)

    # ------------------------------------------------------------------ the worker thread

    def _next(self) -> Cell | None:
        with self._lock:
            cell = None if self._closed or not self.queued else self.queued.pop(0)
            self._current = cell.id if cell is not None else ""
            self._lock.notify_all()
            return cell

    def _work(self) -> None:
        try:
            while (cell := self._next()) is not None:
                started = time.monotonic()
                self.done[cell.id] = self._fetch(cell)
                self.log(
                    f"prefetch: {cell.id}: {self.done[cell.id]} ({time.monotonic() - started:.1f}s)"
                )
        finally:
            with self._lock:
                self._current = ""
                self._lock.notify_all()

    def _fetch(self, cell: Cell) -> str:
        budget = self.settings.min_free_bytes
        if self.free(self.cache_dir) < budget:
            return f"skipped: less than {budget / 1e9:g} GB free ({BUDGET_ENV})"
        if self.fits is not None:
            why = self.fits(cell)
            if why:
                return f"skipped: {why}"
        target = self.scratch / cell.id
        command = fetch_command(cell, self.index_config, self.python_for(cell), target, self.uv)
        if command is None:
            return "skipped: not fetchable"
        try:
            self._step = "fetch"
            returncode, why = self._run(command, budget)
            if why:
                return why
            if self._handed == cell.id:
                return "handed over to the cell's own install"
            if returncode != 0:
                return f"failed (uv exited {returncode})"
            if self._claimed == cell.id:  # never keep a waiting cell behind the hashing
                return "fetched (not hashed ahead: its cell is installing)"
            # The cell's install check hashes every file of its venv against RECORD once per inode
            # (torch_matrix/probes/facts.py's memo); the venv's files are hardlinks of the cache files that the
            # scratch target holds now: hash them here, so that cell's check finds them hashed.
            self._step = "hash"
            returncode, why = self._run(hash_command(self.python_for(cell), target), None)
            if why:
                return why
            return (
                "fetched"
                if returncode == 0
                else f"fetched (files not hashed ahead: exited {returncode})"
            )
        except OSError as error:
            return f"failed: {error}"
        finally:
            shutil.rmtree(target, ignore_errors=True)

    def _run(self, command: list[str], budget: int | None) -> tuple[int | None, str]:
        """Run one background step at low priority until it ends: (its exit status, ""), or
        (None, why it did not run or was stopped: the run ended, the disk budget)."""
        try:
            with self._lock:
                if self._closed:
                    return None, "skipped: run ended"
                self._process = self.start(command, env=self.env, low=True)
            process = self._process
            while process.poll() is None:
                if budget is not None and self.free(self.cache_dir) < budget:
                    proc.stop(process)
                    return None, f"stopped: less than {budget / 1e9:g} GB free ({BUDGET_ENV})"
                time.sleep(POLL_S)
            return process.returncode, ""
        finally:
            with self._lock:
                self._process = None


def hash_command(python: str, target: Path) -> list[str]:
    """``torch_matrix/probes/facts.py record TARGET``: the install check over a fetched target, which fills its
    memo of files hashed (the exit status says nothing of the files: only matches are remembered)."""
    return [python, "-I", str(probe_process.facts_script()), "record", str(target)]


# ---------------------------------------------------------------- what a session fetches ahead

PREFETCHER: list[Any] = []  # one Prefetcher per nox process (closed at exit)


def queued_cells(
    plan: MatrixPlan,
    running: str,
    posargs: Sequence[str],
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> list[Cell] | None:
    """The matrix cells nox runs after the session named ``running``, in its order (those with a complete result are
    skipped unless redone): the plan's cells as nox's command line (``argv``, default this
    process's) selects them (``torch_matrix.run.selection``). None when that selection is not
    one this tool can follow, or ``running`` is not in it (then nothing is fetched ahead)."""
    chosen = selected_cells(plan, sys.argv[1:] if argv is None else argv, environ)
    names = [layout.cell_session(cell.id) for cell in chosen or ()]
    if running not in names:
        return None
    by_name = {layout.cell_session(cell.id): cell for cell in plan.cells}
    after = names[names.index(running) + 1 :]
    redo = redo_requested(posargs, environ)
    return [
        cell
        for cell in (by_name[name] for name in after)
        if not cell.plan_note
        and plan.has_interpreter(cell)
        and (redo or not is_complete(plan, cell))
    ]


def run_prefetcher(
    session: Any,
    index_config: Any,
    python_for: Callable[[Cell], str],
    venvs_dir: Path,
    environ: Mapping[str, str] = os.environ,
) -> Any:
    """The run's one ``Prefetcher`` (closed at exit), or None when ``TORCH_MATRIX_PREFETCH=0``."""
    import atexit

    from torch_matrix.world.environment import base_env, uv_cache_dir

    settings = settings_from(environ)
    if settings.ahead <= 0:
        return None
    if not PREFETCHER:
        prefetcher = Prefetcher(
            settings,
            cache_dir=uv_cache_dir(environ) or str(venvs_dir),
            scratch=venvs_dir / f".torch-matrix-prefetch-{os.getpid()}",
            index_config=index_config,
            python_for=python_for,
            env=base_env(),
            log=session.log,
        )
        atexit.register(prefetcher.close)
        PREFETCHER.append(prefetcher)
    return PREFETCHER[0]


def prefetch_steps(
    session: Any, plan: MatrixPlan, venvs_dir: Path, environ: Mapping[str, str] = os.environ
) -> Callable[[Cell, Sequence[Cell]], Any]:
    """``steps(cell, first)``: the ``CellSteps`` for ``cell``, whose probe phase starts the prefetch of
    what runs next: ``first`` (follow-up cells), then the next cells nox has queued. A fetch of
    ``cell`` itself still under way is waited for (never two uv processes on the same downloads).
    Off under ``-j`` (cells overlap there) and with ``TORCH_MATRIX_PREFETCH=0``."""
    from torch_matrix.run.cellrun import CellSteps

    if getattr(session, "parallel", False):
        return lambda cell, first: None
    prefetcher = run_prefetcher(
        session, plan.planned_spec.index, plan.interpreter_for, venvs_dir, environ
    )
    if prefetcher is None:
        return lambda cell, first: None

    def steps(cell: Cell, first: Sequence[Cell]) -> Any:
        prefetcher.claim(cell.id)

        def starting(_running: Cell) -> None:
            upcoming = queued_cells(plan, session.name, session.posargs, environ=environ)
            if upcoming is not None:
                prefetcher.ahead([*first, *upcoming])

        return CellSteps(probes_starting=starting)

    return steps
