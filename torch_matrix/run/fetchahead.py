"""What a session fetches ahead: the cells nox runs next, in its order, and the run's one prefetcher.

``queued_cells`` reads the cells after the running session from nox's command line
(``run.selection``: nox's own queue is private); ``prefetch_steps`` gives each cell the
``CellSteps`` whose probe phase starts fetching them (``run.prefetch.Prefetcher``, one per nox
process, closed at exit). Off under ``-j`` and with ``TORCH_MATRIX_PREFETCH=0``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_matrix.run.matrixplan import (
    MatrixPlan,
    is_complete,
    redo_requested,
    selected_cells,
)
from torch_matrix.vocab import layout
from torch_matrix.vocab.records import Cell

PREFETCHER: list[
    Any
] = []  # one torch_matrix.run.prefetch.Prefetcher per nox process (closed at exit)


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

    from torch_matrix.run.prefetch import Prefetcher, settings_from
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
