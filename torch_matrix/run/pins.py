"""The pins pipeline, one for ``torch-matrix pins`` and ``torch-matrix report --pins``: loaded
results + the index's released versions -> the suggestion (``torch_matrix.pins``), per hardware
target too -> ``constraints.txt``, ``requirements-pins.txt``, ``pins.json``, ``targets/``.

Both commands take the same options (``PinsOptions``: ``--policy``, ``--tradeoffs``,
``--no-coverage``, ``--spec``), so the report's pins are the pins command's pins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_matrix.edges import console
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.pins import PinPolicy, package_axes, suggest_pins
from torch_matrix.pins.render import (
    CONSTRAINTS_NAME,
    JSON_NAME,
    REQUIREMENTS_NAME,
    render_constraints,
    render_json,
    render_requirements,
)
from torch_matrix.pins.target_render import TARGETS_DIR, render_target_constraints
from torch_matrix.pins.targets import target_pins
from torch_matrix.report.rows import shorten
from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.records import CellResult

Released = Mapping[str, list[str]]
WheelPythons = dict[str, dict[str, "frozenset[str] | None"]]

TRADEOFF_CHOICES = ("pin", "pin-first", "show")


@dataclass(frozen=True)
class PinsOptions:
    """What both commands let the user choose."""

    policy: PinPolicy = PinPolicy.PROVEN
    tradeoffs: str = "pin"  # pin (= pin-first): pin one answer by the rule; show: pin none
    coverage: bool = True  # False (--no-coverage): do not ask the index for released versions
    spec: str | None = None  # the spec whose [index] lists the released versions
    run_dir: str | None = (
        None  # the results directory: its index-facts.json, when the run wrote one
    )

    @classmethod
    def from_args(cls, args: Any) -> PinsOptions:
        run_dir = _text_or_none(getattr(args, "results_dir", None))
        return cls(
            policy=PinPolicy(getattr(args, "policy", None) or PinPolicy.PROVEN),
            tradeoffs=getattr(args, "tradeoffs", None) or "pin",
            coverage=not getattr(args, "no_coverage", False),
            spec=getattr(args, "spec", None) or run_spec(run_dir),
            run_dir=run_dir,
        )


def run_spec(run_dir: str | None) -> str | None:
    """The spec the run in ``run_dir`` planned its cells with (its ``planned-cells.json``: the
    file, or the built-in default's), so ``pins RESULTS`` reads that run's range and index wherever
    it is run from; None where the run wrote no plan (the spec found from here, as before)."""
    if not run_dir:
        return None
    from torch_matrix.spec.model import DEFAULT_SPEC_PATH
    from torch_matrix.world.runplan import read_plan

    plan, _ = read_plan(run_dir)
    if plan is None:
        return None
    return plan.spec or str(DEFAULT_SPEC_PATH)


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass
class PinsOutcome:
    """The suggestion and what it was derived from."""

    suggestion: Any  # torch_matrix.pins.model.Suggestion
    per_target: list[Any] = field(default_factory=list)  # torch_matrix.pins.targets.TargetPins
    released: Released | None = None
    wheel_pythons: WheelPythons = field(default_factory=dict)
    release_reads: Any = None  # torch_matrix.run.targetplan.ReleaseReads, when read


def releases_in_declared_ranges(
    released: Mapping[str, list[str]], declared: Mapping[str, tuple[str, str]]
) -> dict[str, list[str]]:
    """The released versions the project's own declared range admits (coverage counts only those:
    a release the project already excludes is no gap in the matrix). Not to be confused with
    ``pins.windows.admitted_releases``: the releases a tested Python can install."""
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


def index_facts(
    packages: Sequence[str], spec_path: str | None = None
) -> tuple[Released | None, WheelPythons]:
    """(released, wheel Pythons): the released versions per package the project's declared range
    admits, and per release the Python X.Y values its wheels serve (None: no wheel tells), so the
    pins count only releases a tested Python could install; (None, {}) when unavailable."""
    try:
        from torch_matrix.world.specfile import load_spec

        return spec_index_facts(load_spec(spec_path), packages)
    except Exception as error:  # noqa: BLE001 - offline, no index module, bad spec: coverage unknown
        console.note(
            f"torch-matrix pins: coverage unknown (cannot list released versions: "
            f"{' '.join(str(error).split())[:160]})"
        )
        return None, {}


def spec_index_facts(spec: Any, packages: Sequence[str]) -> tuple[Released, WheelPythons]:
    """``index_facts`` for a loaded spec (``spec.model.Spec``); raises when the index cannot be
    listed. The run calls it as its cells start and keeps the answer (``world.runfacts``)."""
    from torch_matrix.plan.grid import _wheel_pythons
    from torch_matrix.world.index import open_index
    from torch_matrix.world.specfile import declared_ranges

    index = open_index(spec.index)
    released = releases_in_declared_ranges(
        {package: [str(v) for v in index.versions(package)] for package in packages},
        declared_ranges(spec),
    )
    try:
        pythons: WheelPythons = {
            package: {
                version: _wheel_pythons(index.files(package, version)) for version in versions
            }
            for package, versions in released.items()
        }
    except Exception:  # noqa: BLE001 - files not listed: every release counts as installable (as before)
        pythons = {}
    return released, pythons


def _is_run_dir(path: str) -> bool:
    """A run's directory (it holds planned-cells.json), where index-facts.json was due; a folder
    of results alone (older runs, downloaded shards) reads the index as it always did, silently."""
    from torch_matrix.world.runplan import plan_path

    return plan_path(path).is_file()


def coverage_facts(
    packages: Sequence[str], options: PinsOptions
) -> tuple[Released | None, WheelPythons]:
    """What the coverage counts over: the run's own reading (``results/<run>/index-facts.json``,
    written as its cells started) when it has every package, else the spec's index read now
    (said so)."""
    if options.run_dir is not None:
        from torch_matrix.world.runfacts import facts_path, read_facts

        stored, why = read_facts(options.run_dir)
        if stored is not None and stored.covers(packages):
            kept = stored.only(packages)
            console.note(
                f"torch-matrix pins: released versions and wheel Pythons as the run read them "
                f"({facts_path(options.run_dir)}, {kept.written or 'undated'}); the index is not "
                "read again"
            )
            return dict(kept.released), {p: dict(v) for p, v in kept.wheel_pythons.items()}
        if stored is not None:
            missing = ", ".join(p for p in packages if p not in stored.released)
            why = f"{facts_path(options.run_dir)} has no released versions of {missing}"
        if stored is not None or _is_run_dir(options.run_dir):  # a run of this version keeps them
            console.note(f"torch-matrix pins: {why}: the released versions are read from the index")
    return index_facts(packages, options.spec)


def derive_pins(results: Sequence[CellResult], options: PinsOptions) -> PinsOutcome:
    """The suggestion for ``results`` under ``options`` (the index read unless ``coverage`` is off)."""
    released: Released | None = None
    wheel_pythons: WheelPythons = {}
    if options.coverage:
        released, wheel_pythons = coverage_facts(package_axes(results), options)
    suggestion = suggest_pins(
        results,
        released,
        options.policy,
        wheel_pythons,
        pin_tradeoffs=options.tradeoffs != "show",
    )
    builds = other_builds(results, options.spec) if options.coverage else None
    reads = range_reads(results, options.spec) if options.coverage else None
    per_target = target_pins(
        results,
        released,
        options.policy,
        wheel_pythons,
        builds,
        reads.by_release if reads is not None else None,
    )
    return PinsOutcome(suggestion, per_target, released, wheel_pythons, reads)


def range_reads(results: Sequence[CellResult], spec_path: str | None = None) -> Any:
    """Every torch release of the spec's range read from its wheels, for the per-target bounds
    (``run.targetplan.release_reads``); None where no result was judged for a target, or where the
    index cannot be listed (said so: the per-target pins then rest on the tested cells alone)."""
    if not any(result.targets for result in results):
        return None
    try:
        from torch_matrix.pins.wheelbounds import releases_in_range
        from torch_matrix.run.targetplan import release_reads
        from torch_matrix.world.index import open_index
        from torch_matrix.world.specfile import load_spec

        spec = load_spec(spec_path)
        listed = [str(v) for v in open_index(spec.index).versions("torch")]
        releases = releases_in_range(listed, spec.torch)
        pythons = list(dict.fromkeys(r.cell.python for r in results if r.cell.python))
        variants = list(dict.fromkeys(r.cell.variant for r in results if r.cell.variant))
        reads = release_reads(spec.index, releases, pythons, variants or ["default"])
    except Exception as error:  # noqa: BLE001 - offline or a bad spec: no bound from the wheels
        console.note(
            "torch-matrix pins: the releases of the spec's range were not read from their wheels, "
            "so the per-target pins rest on the tested cells alone "
            f"({' '.join(str(error).split())[:160]})"
        )
        return None
    unknown = sum(1 for rs in reads.by_release.values() for r in rs if not r.read)
    console.note(
        f"torch-matrix pins: {len(reads.by_release)} torch release(s) of the spec's range read from "
        f"their wheels for the per-target bounds: {reads.bytes_fetched / 1e6:.1f} MB in "
        f"{reads.requests} request(s), {reads.seconds:.1f} s"
        + (
            f"; {unknown} build(s) could not be read (unknown: no bound crosses them)"
            if unknown
            else ""
        )
    )
    return reads


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
        console.note(
            "torch-matrix pins: the other CUDA builds of each release were not read, so none is "
            f"advised ({' '.join(str(error).split())[:160]})"
        )
        return None


def missing_of(results_dir: Path, results: Sequence[CellResult]) -> dict[str, str]:
    """Planned cells of the run (its planned-cells.json and cell log) without a result: cell id ->
    why. Their evidence is absent from the pins, which say so."""
    from torch_matrix.world.runplan import planned_but_missing, read_log, read_plan

    if not results_dir.is_dir():
        return {}
    plan, _problem = read_plan(results_dir)
    present = {result.cell.id for result in results}
    _cells, reasons = planned_but_missing(plan, read_log(results_dir), present)
    return reasons  # a deleted result stays deleted


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
    """constraints.txt, requirements-pins.txt and pins.json under ``out_dir``; each names the
    planned cells without a result (``missing``: cell id -> why)."""
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


def write_target_outputs(per_target: Sequence[Any], out_dir: Path) -> list[Path]:
    """``<out_dir>/targets/<target>/constraints.txt`` for each hardware target
    (``torch_matrix.pins.targets``)."""
    written = []
    for pins in per_target:
        path = out_dir / TARGETS_DIR / pins.slug / CONSTRAINTS_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, render_target_constraints(pins))
        written.append(path)
    return written


def no_evidence_line(suggestion: Any) -> str:
    """Why no pin can be said at all, "" when some cell gave evidence (compatible or incompatible):
    "none needed" holds only where a cell was seen working or failing. Said, and the command
    fails, when every cell was unsatisfiable or without evidence (installs that all failed)."""
    counts = suggestion.counts
    if counts.get("compatible", 0) or counts.get("incompatible", 0):
        return ""
    parts = []
    if suggestion.no_evidence:
        first = suggestion.no_evidence[0]
        parts.append(
            f"{len(suggestion.no_evidence)} without evidence ({first.cell_id}: "
            f"{shorten(first.reason, 160)})"
        )
    if suggestion.unsatisfiable:
        parts.append(f"{len(suggestion.unsatisfiable)} unsatisfiable")
    if suggestion.environment:
        parts.append(f"{len(suggestion.environment)} environment finding(s), advice only")
    return (
        "none proven: no cell was seen working or failing"
        + (f" ({'; '.join(parts)})" if parts else "")
        + "; fix what the table says and run again"
    )


def summary_lines(
    suggestion: Any, paths: Sequence[Path], target_paths: Sequence[Path], pins_dir: Path
) -> list[str]:
    """What ``pins`` and ``report --pins`` print once the pins are written, the one summary of
    both: the pins line (the pins, or why there are none; where they are, how to apply them), each
    untested release and each trade-off under it, then the per-target files."""
    from torch_matrix.pins import requirement_lines

    # the lines constraints.txt holds: a Python line a marker leaves unpinned is no pin
    pins = [line.text() for line in requirement_lines(suggestion.recommended) if line.specifiers]
    open_breaks = len(
        {t.interaction for t in suggestion.tradeoffs}
        - {t.interaction for t in suggestion.tradeoffs if suggestion.pinned(t)}
    )
    missing = no_evidence_line(suggestion)
    summary = (
        ", ".join(pins)
        if pins
        else missing
        if missing
        else "none needed"
        if not open_breaks and not suggestion.untested
        else "none proven needed so far"
        if not open_breaks
        else "none that keeps every working version"
    )
    if open_breaks:  # "none needed" would be false: a break is open until the maintainer picks
        summary += f"; {open_breaks} break{'s' if open_breaks > 1 else ''} left open, choose a trade-off below"
    lines = [
        f"pins: {summary}: {paths[0]} (and {paths[1].name}, {paths[2].name}; "
        "`torch-matrix pins --apply FILE` updates a requirements file)"
    ]
    lines += [f"  {line}" for line in suggestion.untested]  # never a bare "none needed"
    for tradeoff in suggestion.tradeoffs:  # a pin that gives up working pairs says so here
        state = "pinned by the rule" if suggestion.pinned(tradeoff) else "not pinned"
        lines.append(f"  trade-off {tradeoff.rank} ({state}): {tradeoff.describe()}")
    if target_paths:
        lines.append(
            f"pins per hardware target: {len(target_paths)} file(s) under {pins_dir / TARGETS_DIR}"
        )
    return lines
