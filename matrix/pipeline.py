"""Spec -> cells, with the edges wired in: read the indexes, find the interpreters, plan.

The one place that composes the I/O modules (``index``, ``interpreters``) with the
pure planner (``plan``). ``torch-matrix plan``, ``torch-matrix report --spec`` and the
noxfile (``nox_support``) all plan through here, so they always agree on the cells.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .index import open_index, open_variant_index
from .interpreters import Interpreter, find_interpreters
from .plan import gather_facts, parse_shard, plan_cells, select_shard
from .records import Cell
from .spec import DEFAULT_VARIANT, Spec


@dataclass(frozen=True)
class Planned:
    cells: list[Cell]
    interpreters: Mapping[str, Interpreter | None]  # requested ("3.11", "current") -> found or None


def wanted_pythons(spec: Spec) -> list[str]:
    """Every Python the spec names (axis values, then include rules), in order, once."""
    return list(dict.fromkeys(list(spec.python) + [r.values["python"][0] for r in spec.include]))


def plan_spec(spec: Spec, environ: Mapping[str, str] = os.environ) -> Planned:
    """Read the indexes and find the interpreters (the edge), then plan (pure)."""
    index = open_index(spec.index, environ=environ)
    variant_indexes = {variant: open_variant_index(spec.index, variant, environ=environ)
                       for variant in spec.variants if variant != DEFAULT_VARIANT}
    facts = gather_facts(spec, index, variant_indexes=variant_indexes)
    interpreters = find_interpreters(wanted_pythons(spec), spec.interpreters, environ)
    return Planned(plan_cells(spec, facts, interpreters), interpreters)


def plan_for_spec(spec: Spec, environ: Mapping[str, str] = os.environ) -> list[Cell]:
    """The cells ``spec`` expands to (see ``plan_spec``)."""
    return plan_spec(spec, environ).cells


def shard_cells(cells: list[Cell], shard_text: str, where: str) -> list[Cell]:
    """Only shard ``K/N`` of ``cells`` (``where`` names the option or variable for errors)."""
    if not shard_text:
        return cells
    k, n = parse_shard(shard_text, where)
    return select_shard(cells, k, n)
