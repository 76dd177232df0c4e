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

from torch_matrix.plan.cost import PlanCost, cell_note, summary_lines
from torch_matrix.run.disk import plan_cost, refuse_unless_fits
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.sizes import format_size
from torch_matrix.vocab.layout import SHARD_ENV
from torch_matrix.plan import hardware
from torch_matrix.run.pipeline import plan_spec, shard_cells
from torch_matrix.run.targetplan import TargetPlan, read_builds
from torch_matrix.plan.shards import shards
from torch_matrix.vocab.records import Cell
from torch_matrix.spec.model import Spec
from torch_matrix.world.specfile import declared_ranges, load_spec, require_spec


def cell_json(cell: Cell, spec: Spec, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    from torch_matrix.world.index import sources_in_use
    from torch_matrix.world.probesuite import suite_digest

    return {
        **cell.to_json(),
        "fingerprint": cell.fingerprint(spec.index.to_json(), suite_digest(spec)),
        "sources": sources_in_use(spec.index, cell.variant, environ),
    }


def render_sources(cells: list[Cell], spec: Spec, environ: Mapping[str, str]) -> str:
    """Every index and find-links location the cells install from, and where each came from; then
    the index settings of pip's configuration files, which torch-matrix does not read, each with
    its file and whether the run uses the same locations anyway."""
    from torch_matrix.world.index import sources_in_use
    from torch_matrix.world.pipconfig import read_settings

    used: dict[tuple[str, str], dict[str, str]] = {}
    for variant in dict.fromkeys([c.variant for c in cells] or ["default"]):
        for source in sources_in_use(spec.index, variant, environ):
            used.setdefault((source["kind"], source["location"]), source)
    lines = ["indexes and find-links the cells install from (in the order uv is given them):"]
    width = max(len(s["location"]) for s in used.values())
    lines += [
        f"  {s['kind']:<14} {s['location']:<{width}}  from {s['from']}" for s in used.values()
    ]
    settings = read_settings(environ, sys.prefix)
    if settings:
        lines.append(
            "pip's configuration files (not read by torch-matrix: it honours the spec's [index] and "
            "$PIP_INDEX_URL, $PIP_EXTRA_INDEX_URL, $PIP_FIND_LINKS; `torch-matrix help spec index`):"
        )
        locations = {location for _kind, location in used}
        variable = {
            "index-url": "$PIP_INDEX_URL or [index] default",
            "extra-index-url": "$PIP_EXTRA_INDEX_URL or [index] extra",
            "find-links": "$PIP_FIND_LINKS or [index] find_links",
        }
        for setting in settings:
            state = (
                "the same locations are in use"
                if set(setting.values) <= locations
                else f"not used; to use it, set {variable[setting.key]}"
            )
            lines.append(
                f"  {setting.key} = {' '.join(setting.values)}  ({setting.origin}): {state}"
            )
    return "\n".join(lines)


def outside_declared(cell: Cell, declared: Mapping[str, tuple[str, str]]) -> str:
    """Why the project's own requirements exclude this cell's versions (``torch 1.8.1 is outside the
    project's declared torch>=1.9 (pyproject.toml: [project] dependencies)``), or ""."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    for name, (specifier, where) in declared.items():
        value = cell.axes.get(name, "")
        try:
            if value and not SpecifierSet(specifier).contains(Version(value), prereleases=True):
                return (
                    f"{name} {value} is outside the project's declared {name}{specifier} ({where}): "
                    "the install will refuse it (unsatisfiable)"
                )
        except InvalidVersion:
            continue
    return ""


def render_table(
    cells: list[Cell],
    spec: Spec,
    declared: Mapping[str, tuple[str, str]] | None = None,
    cost: PlanCost | None = None,
) -> str:
    from tabulate import tabulate  # only the human output needs it

    extras = [axis.name for axis in spec.extras]
    rows = []
    by_id = {c.cell_id: c for c in cost.cells} if cost is not None else {}
    for cell in cells:
        note = cell.plan_note or outside_declared(cell, declared or {})
        row = [
            cell.id,
            cell.python,
            cell.torch,
            cell.torchvision or "-",
            cell.variant,
            " ".join(f"{n}{cell.axes[n]}" for n in extras if cell.axes.get(n)) or "-",
            " ".join(cell.requirements),
        ]
        if cost is not None:
            own = by_id.get(cell.id)
            row += [cell_note(own) if own else "-", format_size(own.disk) if own else "-"]
        rows.append([*row, note])
    headers = ["id", "python", "torch", "torchvision", "variant", "extras", "install pins"]
    if cost is not None:
        headers += ["download", "disk"]
    headers.append("note")
    return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)


def render_targets(found: TargetPlan, spec: Spec) -> str:
    """The cells × targets table read from each cell's wheels, what the reading cost, and the cells
    whose wheel could not be read (judged from their installed build instead)."""
    from tabulate import tabulate

    targets = list(spec.targets)
    headers, rows = hardware.table(found.builds, targets)
    lines = [f"hardware targets ({len(targets)}): " + "; ".join(t.label for t in targets)]
    if rows:
        read = [r for r in found.reads if r.how != "cache"]
        lines.append(
            f"verdicts read from the wheels before installing ({len(read)} wheel(s) read, "
            f"{found.bytes_fetched / 1e6:.1f} MB fetched; "
            f"{len(found.reads) - len(read)} from the cache):"
        )
        lines.append(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    missing = hardware.unread(found.builds)
    if missing:
        lines.append(
            "judged from the installed build instead (the wheel could not be read before installing):"
        )
        lines += [f"  {line}" for line in missing]
    return "\n".join(lines)


def main(
    args: argparse.Namespace, out: TextIO | None = None, environ: Mapping[str, str] = os.environ
) -> int:
    out = out or sys.stdout  # looked up now: a test (or a caller) may have replaced it
    require_spec(getattr(args, "spec", None), getattr(args, "default", False), environ)
    spec = load_spec(getattr(args, "spec", None), environ)
    planned = plan_spec(spec, environ)
    cells = planned.cells
    shard_text = getattr(args, "shard", None) or settings.shard_text(environ)
    where = "--shard" if getattr(args, "shard", None) else SHARD_ENV
    n_shards = getattr(args, "shards", None)
    if n_shards is not None and n_shards < 1:
        raise UserError(
            f"expected a positive number of shards, got {n_shards}",
            where="--shards",
            hint="`--shards 4` prints four shards for a CI matrix",
        )
    cells = shard_cells(cells, shard_text, where)

    if n_shards:
        entries = shards(cells, n_shards)
        if getattr(args, "json", False):
            out.write(json.dumps(entries) + "\n")
        else:
            for entry in entries:
                out.write(
                    f"shard {entry['shard']}: {entry['count']} cells, variants "
                    f"{', '.join(entry['variants'])}, torch {', '.join(entry['torch'])}\n"
                )
                out.writelines(f"  {cell_id}\n" for cell_id in entry["cells"])
        return 0
    cost = None if getattr(args, "no_cost", False) else plan_cost(spec, cells, environ)
    if getattr(args, "json", False):
        by_id = {c.cell_id: c for c in cost.cells} if cost is not None else {}
        builds = (
            {b.cell_id: b for b in read_builds(spec, cells, environ).builds} if spec.targets else {}
        )
        entries = []
        for cell in cells:
            entry = cell_json(cell, spec, environ)
            if cell.id in by_id:
                entry["cost"] = by_id[cell.id].to_json()
            if cell.id in builds:
                entry["hardware"] = hardware.to_json(builds[cell.id], spec.targets)
            entries.append(entry)
        out.write(json.dumps(entries, indent=2) + "\n")
        if cost is not None:
            refuse_unless_fits(cost)
        return 0
    out.write(f"spec {spec.path} (run {spec.name!r}): {len(cells)} cells\n")
    out.writelines(f"{note}\n" for note in planned.notes)
    declared = declared_ranges(spec)
    out.write(render_table(cells, spec, declared, cost) + "\n")
    if spec.targets:
        out.write(render_targets(read_builds(spec, cells, environ), spec) + "\n")
    out.write(render_sources(cells, spec, environ) + "\n")
    blocked = sum(1 for c in cells if c.plan_note)
    if blocked:
        out.write(
            f"{blocked} cell(s) cannot be installed as planned; they will be recorded "
            "as unsatisfiable\n"
        )
    outside = [c.id for c in cells if not c.plan_note and outside_declared(c, declared)]
    if outside:
        out.write(
            f"{len(outside)} cell(s) lie outside the project's own declared range: "
            f"{', '.join(outside)} (widen the requirement, or drop them from the spec)\n"
        )
    if cost is not None:
        out.write("cost (download: wheels not in uv's cache; disk: the cell's wheels unpacked):\n")
        out.writelines(f"  {line}\n" for line in summary_lines(cost))
        out.flush()
        refuse_unless_fits(cost)
    return 0


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix plan``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.add_argument(
        "--spec",
        help="spec file (default: $TORCH_MATRIX_SPEC, ./matrix.toml, [tool.torch-matrix] in "
        "./pyproject.toml; none found: an error, unless --default)",
    )
    parser.add_argument(
        "--default",
        action="store_true",
        help="plan the built-in default matrix when no spec is found here",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--no-cost",
        action="store_true",
        help="skip the cost (bytes to download, disk at the peak): no index reads beyond the cells'",
    )
    parser.add_argument("--shard", help="only the cells of shard K/N (1-based)")
    parser.add_argument(
        "--shards", type=int, help="print the N shards (with --json: a list for a CI matrix)"
    )
