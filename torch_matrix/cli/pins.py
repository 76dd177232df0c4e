"""``torch-matrix pins RESULTS_DIR [--out DIR] [--apply FILE [--dry-run]] [--no-coverage]``.

Loads cell results, derives the suggestion (``torch_matrix.pins``), prints it, writes
constraints.txt, requirements-pins.txt and pins.json, and optionally updates a
downstream requirements file. Coverage needs the released versions from the package
index; offline or with ``--no-coverage`` the suggestion says coverage is unknown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_matrix.vocab.errors import UserError
from torch_matrix.edges.fileio import atomic_write, cyclic_gc_paused
from torch_matrix.vocab.layout import PINS_DIR
from torch_matrix.pins import PYTHON, PinPolicy, package_axes, requirement_lines, suggest_pins
from torch_matrix.pins.targets import target_pins
from torch_matrix.pins.render import (
    render_pr_body,
    TARGETS_DIR,
    render_target_constraints,
    render_target_summary,
    CONSTRAINTS_NAME,
    JSON_NAME,
    REQUIREMENTS_NAME,
    render_constraints,
    render_json,
    render_requirements,
    render_text,
)
from torch_matrix.world.results import load_results, no_results_hint
from torch_matrix.vocab.settings import RUN_URL_ENV
from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.records import CellResult


def index_facts(
    packages: Sequence[str], spec_path: str | None = None
) -> tuple[Mapping[str, list[str]] | None, dict[str, dict[str, frozenset[str] | None]]]:
    """(released, wheel Pythons): the released versions per package the project's declared range
    admits, and per release the Python X.Y values its wheels serve (None: no wheel tells), so the
    pins count only releases a tested Python could install; (None, {}) when unavailable."""
    try:
        from torch_matrix.plan.grid import _wheel_pythons
        from torch_matrix.world.index import open_index
        from torch_matrix.world.specfile import declared_ranges, load_spec

        spec = load_spec(spec_path)
        index = open_index(spec.index)
        released = admitted_releases(
            {package: [str(v) for v in index.versions(package)] for package in packages},
            declared_ranges(spec),
        )
    except Exception as error:  # noqa: BLE001 - offline, no index module, bad spec: coverage unknown
        print(
            f"torch-matrix pins: coverage unknown (cannot list released versions: "
            f"{' '.join(str(error).split())[:160]})",
            file=sys.stderr,
        )
        return None, {}
    try:
        pythons = {
            package: {
                version: _wheel_pythons(index.files(package, version)) for version in versions
            }
            for package, versions in released.items()
        }
    except Exception:  # noqa: BLE001 - files not listed: every release counts as installable (as before)
        pythons = {}
    return released, pythons


def other_builds(results: Sequence[Any], spec_path: str | None = None) -> Any:
    """The other CUDA builds of each release that does not run on a target, read from their own
    wheels (``run.targetplan.sibling_builds``): the only builds the per-target advice names."""
    if not any(result.targets for result in results):
        return None
    try:
        from torch_matrix.run.targetplan import sibling_builds
        from torch_matrix.world.specfile import load_spec

        return sibling_builds(results, load_spec(spec_path).index)
    except Exception as error:  # noqa: BLE001 - offline or a bad spec: advise no other build
        print(
            "torch-matrix pins: the other CUDA builds of each release were not read, so none is "
            f"advised ({' '.join(str(error).split())[:160]})",
            file=sys.stderr,
        )
        return None


def admitted_releases(
    released: Mapping[str, list[str]], declared: Mapping[str, tuple[str, str]]
) -> dict[str, list[str]]:
    """The released versions the project's own declared range admits (coverage counts only those:
    a release the project already excludes is no gap in the matrix)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    out = {}
    for package, versions in released.items():
        if package not in declared:
            out[package] = list(versions)
            continue
        allowed = SpecifierSet(declared[package][0])
        kept = []
        for version in versions:
            try:
                if allowed.contains(Version(version), prereleases=True):
                    kept.append(version)
            except InvalidVersion:
                kept.append(version)
        out[package] = kept
    return out


def missing_of(results_dir: Path, results: Sequence[CellResult]) -> dict[str, str]:
    """Planned cells of the run (its planned-cells.json) without a result: cell id -> why. Their
    evidence is absent from the pins, which say so."""
    from torch_matrix.world.runplan import missing_reason, planned_ids, read_plan

    plan, _problem = read_plan(results_dir) if results_dir.is_dir() else (None, "")
    if plan is None:
        return {}
    present = {result.cell.id for result in results}
    return {
        cell_id: missing_reason(plan, cell_id)
        for cell_id in planned_ids(plan.cells)
        if cell_id not in present and cell_id in plan.blocked  # a deleted result stays deleted
    }


def _with_missing(text: str, missing: Mapping[str, str]) -> str:
    """A constraints or requirements file with one comment line per missing planned cell."""
    if not missing:
        return text
    lines = [
        f"# planned but missing (no evidence from it in these pins): {cell_id}: {why}"
        for cell_id, why in sorted(missing.items())
    ]
    return text + "".join(terminal(line, multiline=False) + "\n" for line in lines)


def write_outputs(
    suggestion: Any, out_dir: Path, missing: Mapping[str, str] | None = None
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    missing = missing or {}
    data = json.loads(render_json(suggestion))
    if missing:  # only when there are some: earlier pins.json files stay byte-identical
        data["missing"] = [{"cell": c, "reason": why} for c, why in sorted(missing.items())]
    for name, text in (
        (CONSTRAINTS_NAME, _with_missing(render_constraints(suggestion), missing)),
        (REQUIREMENTS_NAME, _with_missing(render_requirements(suggestion), missing)),
        (
            JSON_NAME,
            render_json(suggestion)
            if not missing
            else json.dumps(data, indent=2, sort_keys=True) + "\n",
        ),
    ):
        path = out_dir / name
        atomic_write(path, text)
        written.append(path)
    return written


def write_target_outputs(per_target, out_dir: Path) -> list[Path]:
    """``<out_dir>/targets/<target>/constraints.txt`` for each hardware target (``torch_matrix.pins.targets``)."""
    written = []
    for pins in per_target:
        path = out_dir / TARGETS_DIR / pins.slug / CONSTRAINTS_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, render_target_constraints(pins))
        written.append(path)
    return written


def history_confidence(suggestion, args: argparse.Namespace) -> str:
    """The pass rate of each excluded version's failing cells+probes over the last nights (additive:
    the pins themselves do not change; ``torch_matrix.report.diff.exclusion_confidence`` is the pure part)."""
    from torch_matrix.report.diff import exclusion_confidence
    from torch_matrix.world.history import db_path, open_history, run_name_of

    exclusions = [
        exclusion
        for line in requirement_lines(suggestion.recommended)
        for exclusion in line.exclusions
    ]
    window = getattr(args, "last", 30) or 30
    with open_history(db_path(args.history or None), create=False) as history:
        spec = run_name_of(Path(args.results_dir))
        if spec not in history.specs():
            return f"\nHistory: no runs of {spec!r} in {history.path} (specs: {', '.join(history.specs()) or 'none'})\n"
        rates = history.pass_rates(spec, window)
        where = history.path
    lines = exclusion_confidence(exclusions, rates)
    out = ["", f"History over the last {window} night(s) of {spec!r} ({where}):"]
    out += [f"  {label}: {text}" for label, text in lines] or [
        "  no excluded version has history yet"
    ]
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.rundir import resolve

    resolve(args, "pins")
    with cyclic_gc_paused():  # the loaded results live until the end: rescanning them is waste
        return _pins(args)


def _pins(args: argparse.Namespace) -> int:
    loaded = load_results(args.results_dir)
    for problem in loaded.problems:
        print(f"torch-matrix: warning: {problem}", file=sys.stderr)
    if not loaded.results:
        raise UserError("no cell results found", str(args.results_dir), hint=no_results_hint())
    released: Mapping[str, list[str]] | None = None
    wheel_pythons: dict[str, dict[str, frozenset[str] | None]] = {}
    if not getattr(args, "no_coverage", False):
        released, wheel_pythons = index_facts(
            package_axes(loaded.results), getattr(args, "spec", None)
        )
    policy = PinPolicy(getattr(args, "policy", None) or PinPolicy.PROVEN)
    suggestion = suggest_pins(
        loaded.results,
        released,
        policy,
        wheel_pythons,
        pin_tradeoffs=getattr(args, "tradeoffs", "pin") != "show",
    )
    # Everything is written (pins files, the applied requirements file) before anything is printed:
    # a reader that stops early (`| head`) must not cost a file.
    text = [render_text(suggestion)]
    missing = missing_of(Path(args.results_dir), loaded.results)
    if missing:
        text.append(
            f"\nPlanned but missing ({len(missing)}; no evidence from them in these pins):\n"
            + "".join(
                f"  {cell_id}: {terminal(why, multiline=False)}\n"
                for cell_id, why in sorted(missing.items())
            )
        )
    builds = (
        None
        if getattr(args, "no_coverage", False)
        else other_builds(loaded.results, getattr(args, "spec", None))
    )
    per_target = target_pins(loaded.results, released, policy, wheel_pythons, builds)
    if per_target:
        text.append("\n" + render_target_summary(per_target))
    if getattr(args, "history", None) is not None:
        text.append(history_confidence(suggestion, args))
    out_dir = Path(args.out) if args.out else Path(args.results_dir) / PINS_DIR
    if not (args.apply and args.dry_run):
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            for path in write_outputs(suggestion, out_dir, missing):
                text.append(f"wrote {path}\n")
            for path in write_target_outputs(per_target, out_dir):
                text.append(f"wrote {path}\n")
            if getattr(args, "pr_body", None):  # the nightly's pull request body: fix first
                body = Path(args.pr_body)
                atomic_write(body, render_pr_body(suggestion, os.environ.get(RUN_URL_ENV, "")))
                text.append(f"wrote {body}\n")
        except OSError as error:
            sys.stdout.write("".join(text))
            sys.stdout.flush()
            raise UserError(
                f"cannot write the pins: {error.strerror or error}",
                where=str(error.filename or out_dir),
                hint="free some space or fix the permissions, or write them elsewhere "
                "with --out DIR",
            ) from None
    if args.apply:
        from torch_matrix.world.apply import (  # tomlkit: only --apply edits a file
            EXCLUDED_NOTE,
            apply_pins,
        )

        result = apply_pins(
            args.apply, requirement_lines(suggestion.recommended), dry_run=args.dry_run
        )
        if result.changed:
            text.append(result.diff())
        text.append(
            f"{args.apply}: "
            + (
                "not edited"
                if not result.edited
                else "not changed, but a requirement installs a release the evidence excludes "
                "(see the notes)"
                if not result.changed and any(EXCLUDED_NOTE in note for note in result.notes)
                else "no change needed"
                if not result.changed
                else "would change (dry run, nothing written)"
                if args.dry_run
                else f"updated ({len(result.changes)} requirement(s))"
            )
            + "\n"
        )
        text += [f"note: {note}\n" for note in result.notes]
        advice = ",".join(
            spec
            for pin in suggestion.recommended.pins_for(PYTHON)
            if pin.condition is None
            for spec in pin.specifiers
        )
        if advice:
            text.append(
                f"note: Requires-Python advice {advice} is not applied; update requires-python yourself\n"
            )
    sys.stdout.write("".join(text))
    return 0
