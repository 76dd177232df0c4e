"""``results/<run>/planned-cells.json``: what a run planned, written when its cells start.

The report lists every planned cell, with a result or as missing with its reason; without this
file ``torch-matrix report DIR`` knew only the results, so a cell that never wrote one (its venv
could not be created) vanished from the table, summary.md and the pins. It also names the spec
the run used, so a report made later on its own prints rerun lines with ``--spec``. A file that
cannot be read is no plan (the report says so and goes on with the results).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_matrix.edges.fileio import atomic_write
from torch_matrix.vocab.records import Cell

PLAN_NAME = "planned-cells.json"
PLAN_SCHEMA = "torch-matrix-run-plan"
PLAN_VERSION = 1


@dataclass(frozen=True)
class RunPlan:
    cells: tuple[Cell | str, ...] = ()
    spec: str | None = None  # the spec file the run used (None: the built-in default)
    blocked: Mapping[str, str] = field(default_factory=dict)  # cell id -> why it cannot run

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA,
            "schema_version": PLAN_VERSION,
            "spec": self.spec,
            "cells": [c if isinstance(c, str) else c.to_json() for c in self.cells],
            "blocked": dict(sorted(self.blocked.items())),
        }


def plan_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / PLAN_NAME


def write_plan(run_dir: str | os.PathLike[str], plan: RunPlan) -> Path:
    return atomic_write(plan_path(run_dir), json.dumps(plan.to_json(), indent=1) + "\n")


def read_plan(run_dir: str | os.PathLike[str]) -> tuple[RunPlan | None, str]:
    """(the run's plan, "") ; (None, "") when there is none; (None, why) when it cannot be read."""
    path = plan_path(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        return None, f"{path}: not a readable run plan ({type(error).__name__}); ignored"
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA:
        return None, f"{path}: not a torch-matrix run plan; ignored"
    return _from_json(data, path)


def _from_json(data: Mapping[str, Any], path: Path) -> tuple[RunPlan | None, str]:
    items, spec, blocked = data.get("cells"), data.get("spec"), data.get("blocked") or {}
    if (
        not isinstance(items, list)
        or not (spec is None or isinstance(spec, str))
        or not isinstance(blocked, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in blocked.items())
    ):
        return None, f"{path}: not a torch-matrix run plan; ignored"
    cells: list[Cell | str] = []
    for item in items:
        if isinstance(item, str):
            cells.append(item)
            continue
        try:
            cells.append(Cell.from_json(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                cells.append(item["id"])
            else:
                return None, f"{path}: a cell entry is not a cell; ignored"
    return RunPlan(cells=tuple(cells), spec=spec, blocked=dict(blocked)), ""


def missing_reason(plan: RunPlan | None, cell_id: str) -> str:
    """Why a planned cell has no result: what blocked it, else what is known in general."""
    if plan is not None and cell_id in plan.blocked:
        return plan.blocked[cell_id]
    return "no result: its session ended before the cell wrote one (see the run's log)"


def planned_ids(cells: Sequence[Cell | str]) -> list[str]:
    return [c if isinstance(c, str) else c.id for c in cells]
