"""A session's side of the run's disk budget (``run.budget``): the keeper, the costs, the refusals.

The first matrix cell sets the run's ``Keeper`` up (the plan's cost printed, a budget that cannot
hold the largest cell refused) and tells the prefetcher what fits ahead; each cell's install is
watched (bytes fetched) or refused (``not_run``: no evidence, never a finding); the follow-up
session keeps the same ledger and prints each follow-up cell's cost first (``cost_line``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch_matrix.run.fetchahead import PREFETCHER
from torch_matrix.run.matrixplan import (
    MatrixPlan,
)
from torch_matrix.vocab.records import Cell

KEEPER: list[Any] = []  # (run.budget.Keeper, plan.cost.PlanCost): one per nox process


def disk_keeper(
    session: Any, plan: MatrixPlan, venvs_dir: Path, environ: Mapping[str, str] = os.environ
) -> tuple[Any, Any]:
    """The run's disk budget (``torch_matrix.run.budget``), set up by its first cell: the plan's cost
    printed, a budget that cannot hold the largest cell refused (``UserError``), what uv's cache
    holds of the plan's wheels now recorded as the user's (never evicted)."""
    from torch_matrix.plan.cost import summary_lines
    from torch_matrix.run.budget import LEDGER_NAME, Keeper, Ledger, plan_cost, refuse_unless_fits
    from torch_matrix.world.environment import uv_cache_dir

    if not KEEPER:
        assert plan.spec is not None  # a matrix cell's plan always has its spec
        uv_cache = uv_cache_dir(environ)
        cost = plan_cost(plan.spec, plan.cells, environ, uv_cache=uv_cache, venvs_dir=venvs_dir)
        for line in summary_lines(cost):
            session.log(f"cost: {line}")
        refuse_unless_fits(cost)
        keeper = Keeper(
            cost.budget,
            cost.budget_origin,
            uv_cache,
            Ledger(plan.run_dir / LEDGER_NAME),
            log=session.log,
        )
        keeper.start({w.filename: w.disk for c in cost.cells for w in c.wheels})
        KEEPER.append((keeper, cost))
        if PREFETCHER:  # the prefetch fetches a cell ahead only where the budget holds it
            PREFETCHER[0].fits = lambda cell: keeper_ahead(keeper, cost, plan, cell, environ)
    return KEEPER[0]


def keeper_ahead(keeper: Any, cost: Any, plan: MatrixPlan, cell: Cell, environ: Any) -> str:
    own = cost.cell(cell.id)
    if own is None and plan.spec is not None:
        own = followup_cost(plan.spec, cell, environ)
    return keeper.ahead(own) if own is not None else ""


def not_run(steps: Any, why: str) -> Any:
    """``steps`` whose install does not run: the cell is recorded as not run, with ``why`` (an
    install error, no evidence: never a finding)."""
    import dataclasses

    from torch_matrix.run.cellrun import CellSteps
    from torch_matrix.vocab.records import INSTALL_ERROR, InstallOutcome

    def refuse(*_args: Any, **_kwargs: Any) -> InstallOutcome:
        return InstallOutcome(INSTALL_ERROR, (), why, 0)

    return dataclasses.replace(steps or CellSteps(), install=refuse)


def watched(steps: Any, cost: Any, uv_cache: str) -> Any:
    """``steps`` whose install heartbeat says the bytes fetched and what is being fetched."""
    import dataclasses

    from torch_matrix.run.budget import install_watch
    from torch_matrix.run.cellrun import CellSteps

    return dataclasses.replace(steps or CellSteps(), install_progress=install_watch(cost, uv_cache))


def remove_venv(venv: Path, environ: Mapping[str, str], log: Callable[[str], None]) -> None:
    from torch_matrix.run.budget import remove_venv as remove

    remove(venv, environ, log)


def followup_keeper(
    session: Any, plan: MatrixPlan, envdir: Path, environ: Mapping[str, str] = os.environ
) -> Any:
    """The follow-up session's side of the run's disk budget (the same ledger as its matrix cells)."""
    from torch_matrix.run.budget import LEDGER_NAME, Keeper, Ledger, budget_of
    from torch_matrix.world.environment import uv_cache_dir

    assert plan.spec is not None  # load_plan always sets it
    uv_cache = uv_cache_dir(environ)
    budget, origin = budget_of(plan.spec, environ, uv_cache or envdir)
    return Keeper(budget, origin, uv_cache, Ledger(plan.run_dir / LEDGER_NAME), log=session.log)


def followup_cost(spec: Any, cell: Cell, environ: Mapping[str, str] = os.environ) -> Any:
    """A follow-up cell's cost (``plan.cost.CellCost``), or None when it installs nothing."""
    from torch_matrix.plan.cost import cell_cost
    from torch_matrix.run.budget import cell_wheel_sets
    from torch_matrix.world.environment import uv_cache_dir
    from torch_matrix.world.wheelset import cached_wheels

    if cell.plan_note:
        return None
    wheels = cell_wheel_sets(spec, [cell], environ)[cell.id]
    held = cached_wheels(uv_cache_dir(environ), [w.filename for w in wheels.wheels])
    return cell_cost(cell.id, cell.variant, wheels, held)


def cost_line(cost: Any) -> str:
    """``downloads 2.1 GB (of 2.9 GB; the rest is in uv's cache), needs 4.4 GB of disk``."""
    from torch_matrix.vocab.sizes import format_size

    cached = cost.size - cost.download
    return (
        f"downloads {format_size(cost.download)}"
        + (f" (of {format_size(cost.size)}; the rest is in uv's cache)" if cached else "")
        + f", needs {format_size(cost.new_disk)} of disk"
        + (" (some sizes estimated)" if not cost.exact else "")
    )
