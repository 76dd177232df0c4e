"""``torch-matrix plan``: print the cells a spec expands to, without installing anything.

Also the source for CI sharding: ``--shards N --json`` prints a GitHub Actions matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from matrix.vocab.errors import UserError
from matrix.vocab.layout import SHARD_ENV
from matrix.run.pipeline import plan_for_spec, shard_cells
from matrix.plan.shards import shards
from matrix.vocab.records import Cell
from matrix.world.specfile import Spec, load_spec


def cell_json(cell: Cell, spec: Spec) -> dict[str, Any]:
    from matrix.world.probesuite import suite_digest

    return {**cell.to_json(), "fingerprint": cell.fingerprint(spec.index.to_json(), suite_digest(spec))}


def render_table(cells: list[Cell], spec: Spec) -> str:
    from tabulate import tabulate  # only the human output needs it

    extras = [axis.name for axis in spec.extras]
    rows = []
    for cell in cells:
        rows.append([cell.id, cell.python, cell.torch, cell.torchvision or "-", cell.variant,
                     " ".join(f"{n}{cell.axes[n]}" for n in extras if cell.axes.get(n)) or "-",
                     " ".join(cell.requirements), cell.plan_note or ""])
    headers = ["id", "python", "torch", "torchvision", "variant", "extras", "install pins", "note"]
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def main(args: argparse.Namespace, out: TextIO = sys.stdout,
         environ: Mapping[str, str] = os.environ) -> int:
    spec = load_spec(getattr(args, "spec", None), environ)
    cells = plan_for_spec(spec, environ)
    shard_text = getattr(args, "shard", None) or environ.get(SHARD_ENV, "")
    where = "--shard" if getattr(args, "shard", None) else SHARD_ENV
    n_shards = getattr(args, "shards", None)
    if n_shards is not None and n_shards < 1:
        raise UserError(f"expected a positive number of shards, got {n_shards}", where="--shards",
                        hint="`--shards 4` prints four shards for a CI matrix")
    cells = shard_cells(cells, shard_text, where)

    if n_shards:
        entries = shards(cells, n_shards)
        if getattr(args, "json", False):
            out.write(json.dumps(entries) + "\n")
        else:
            for entry in entries:
                out.write(f"shard {entry['shard']}: {entry['count']} cells, variants "
                          f"{', '.join(entry['variants'])}, torch {', '.join(entry['torch'])}\n")
                out.writelines(f"  {cell_id}\n" for cell_id in entry["cells"])
        return 0
    if getattr(args, "json", False):
        out.write(json.dumps([cell_json(c, spec) for c in cells], indent=2) + "\n")
        return 0
    out.write(f"spec {spec.path} (run {spec.name!r}): {len(cells)} cells\n")
    out.write(render_table(cells, spec) + "\n")
    if spec.targets:
        out.write(f"hardware targets ({len(spec.targets)}, judged in each cell from its build, no GPU needed): "
                  + "; ".join(t.label for t in spec.targets) + "\n")
    blocked = sum(1 for c in cells if c.plan_note)
    if blocked:
        out.write(f"{blocked} cell(s) cannot be installed as planned; they will be recorded "
                  "as unsatisfiable\n")
    return 0
