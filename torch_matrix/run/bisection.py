"""The bisect command's use case (``torch-matrix bisect``): the edge of a bisect.

Takes the torch releases from X to Y from the spec's index (or the nightlies between two
dates from a nightly index), plans one cell per version with the spec's planner (paired
torchvision, every other axis held at one value), and runs the cells the pure
``torch_matrix.plan.bisection.next_version`` picks, one at a time, through ``cellrun.run_cell``: the same
install, verify and probe path as ``nox -s matrix``, writing ordinary result files with origin
``bisect`` to ``<results root>/<spec name>-bisect/cells/`` (ids ``bisect-<cell id>``, venvs of the
same names): apart from the run's cells, never overwriting one, never evidence for the pins.
Each cell names what judges it (the probe, the test node id or the verdict), so a cell already
complete there (same fingerprint) is reused only when judged the same way; a bisect resumes.
``--test NODEID`` runs that test alone, not the probe suite besides it.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.vocab import layout
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import ORIGIN_BISECT
from torch_matrix.vocab import settings as env_settings
from torch_matrix.vocab.escaping import terminal

if TYPE_CHECKING:  # imported when the command runs: other commands' start-up pays nothing
    from torch_matrix.plan import bisection as bisect_logic
    from torch_matrix.vocab.records import Cell, CellResult

NIGHTLY_ENV = env_settings.NIGHTLY_ENV
DEFAULT_NIGHTLY_INDEX = env_settings.DEFAULT_NIGHTLY_INDEX
TEST_PROBE = "test"
BISECT_PREFIX = "bisect-"
BISECT_RUN_SUFFIX = "-bisect"  # results/<spec name>-bisect/cells: never the run's own cells


@dataclasses.dataclass(frozen=True)
class BisectRequest:
    """What ``torch-matrix bisect`` is asked (its options; ``None`` where one is not given)."""

    good: str
    bad: str
    probe: str | None = None
    test: str | None = None
    spec: str | None = None
    python: str | None = None
    variant: str | None = None
    set_axes: tuple[str, ...] = ()  # --set AXIS=VALUE, repeated
    nightly: bool = False
    nightly_index: str | None = None
    max_cells: int | None = None
    envdir: str | None = None
    redo: bool = False


@dataclasses.dataclass(frozen=True)
class Tested:
    version: str
    cell: Cell
    outcome: bisect_logic.Outcome
    resumed: bool
    path: Path

    def installed(self, result: CellResult) -> str:
        from torch_matrix.vocab.records import built_versions

        resolved = built_versions(result)
        return ", ".join(
            f"{name} {resolved[name]}" for name in ("torch", "torchvision") if name in resolved
        )


def held_spec(spec: Any, args: BisectRequest, versions: list[str], index: Any) -> Any:
    """The spec narrowed to one value per axis, with ``versions`` as the explicit torch list."""
    from torch_matrix.spec.model import TorchSelection

    python = args.python or spec.python[0]
    variants = (args.variant or spec.variants[0],)
    chosen: dict[str, str] = {}
    for item in args.set_axes:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(
                f"expected AXIS=VALUE, got {item!r}", "--set", hint="e.g. --set 'numpy=<2'"
            )
        chosen[name.strip()] = value.strip()
    extras = []
    for axis in spec.extras:
        value = chosen.pop(axis.name, axis.values[0])
        if value not in axis.values:
            raise UserError(
                f"{axis.name}={value!r} is not one of the spec's values {list(axis.values)}",
                "--set",
                hint=f"choose one of: {', '.join(axis.values)}",
            )
        extras.append(dataclasses.replace(axis, values=(value,)))
    if chosen:
        raise UserError(
            f"no extra axis named {', '.join(chosen)} in {spec.path}",
            "--set",
            hint="axes: "
            + (", ".join(a.name for a in spec.extras) or "none besides python/torch/variant"),
        )
    probes = spec.probes
    if args.test:
        command = f"python -m pytest -x -q {shlex.quote(args.test)}"
        # Only the test: not the whole probe suite besides it.
        probes = dataclasses.replace(
            probes,
            commands={**dict(probes.commands), TEST_PROBE: command},
            run=(TEST_PROBE,),
            required=(TEST_PROBE,),
        )
    elif (
        args.probe
        and probes.run
        and args.probe not in probes.run
        and args.probe not in probes.commands
    ):
        raise UserError(
            f"probe {args.probe!r} is not in the spec's probes.run",
            spec.path,
            hint=f"choose one of: {', '.join(probes.run)}, or drop probes.run to run the whole suite",
        )
    return dataclasses.replace(
        spec,
        python=(python,),
        variants=variants,
        extras=tuple(extras),
        torch=TorchSelection(explicit=tuple(versions)),
        exclude=(),
        include=(),
        probes=probes,
        index=index,
    )


def _plan(
    spec: Any, environ: Mapping[str, str], prereleases: bool
) -> tuple[list[Cell], Mapping[str, Any]]:
    from torch_matrix.run.pipeline import plan_spec, wanted_pythons

    if not prereleases:
        planned = plan_spec(spec, environ)
        return planned.cells, planned.interpreters
    from torch_matrix.world.index import open_index
    from torch_matrix.world.interpreters import find_interpreters
    from torch_matrix.plan.grid import gather_facts, plan_cells

    facts = gather_facts(spec, open_index(spec.index, environ=environ, prereleases=True))
    interpreters = find_interpreters(wanted_pythons(spec), spec.interpreters, environ)
    return plan_cells(spec, facts, interpreters), interpreters


def _versions(args: BisectRequest, spec: Any, environ: Mapping[str, str]) -> tuple[list[str], Any]:
    """The candidate versions, oldest first, and the index configuration the cells install from."""
    from torch_matrix.plan import bisection as bisect_logic
    from torch_matrix.world.index import open_index

    if args.nightly:
        url = args.nightly_index or env_settings.read(environ, NIGHTLY_ENV) or DEFAULT_NIGHTLY_INDEX
        index_config = dataclasses.replace(spec.index, default=url)
        days = []
        for name, text in (("--good", args.good), ("--bad", args.bad)):
            day = bisect_logic.parse_day(text)
            if day is None:
                raise UserError(
                    f"not a date: {text!r}",
                    name,
                    hint="give YYYY-MM-DD or a nightly version such as 2.6.0.dev20241001",
                )
            days.append(day)
        good, bad = days
        if good >= bad:
            raise UserError(
                f"--good {args.good} is not before --bad {args.bad}",
                "--good",
                hint="--good is the last date that worked, --bad the first that broke",
            )
        listed = [
            str(v)
            for v in open_index(index_config, environ=environ, prereleases=True).versions("torch")
        ]
        versions = bisect_logic.nightly_candidates(listed, good, bad)
        where = url
    else:
        from packaging.version import InvalidVersion, Version

        index_config = spec.index
        for name, text in (("--good", args.good), ("--bad", args.bad)):
            try:
                Version(text)
            except InvalidVersion:
                raise UserError(
                    f"not a version: {text!r}",
                    name,
                    hint="e.g. --good 2.3.1 --bad 2.6.0 (or --nightly with dates)",
                ) from None
        if Version(args.good) >= Version(args.bad):
            raise UserError(
                f"--good {args.good} is not older than --bad {args.bad}",
                "--good",
                hint="--good is the last version that worked, --bad the first that broke",
            )
        listed = [str(v) for v in open_index(index_config, environ=environ).versions("torch")]
        versions = bisect_logic.release_candidates(listed, args.good, args.bad)
        where = index_config.default or "the default index"
        for name, text in (("--good", args.good), ("--bad", args.bad)):
            if str(Version(text)) not in versions:
                raise UserError(
                    f"torch {text} is not a release on {where}",
                    name,
                    hint=f"releases in range: {', '.join(versions) or 'none'}",
                )
    if len(versions) < 2:
        raise UserError(
            f"fewer than two torch versions from {args.good} to {args.bad} on {where}",
            "--good",
            hint="widen the range"
            + (" (nightlies need a .devYYYYMMDD version)" if args.nightly else ""),
        )
    return versions, index_config


def _run_one(
    cell: Cell,
    spec: Any,
    interpreter: str,
    cells_dir: Path,
    envdir: Path,
    position: int,
    total: int,
    redo: bool,
) -> tuple[CellResult, bool]:
    """The cell's result: the stored one when complete for the same fingerprint (the cell names
    what judges it, so a result judged otherwise never counts), else a fresh run in its own venv."""
    from torch_matrix.run.cellrun import CellSettings
    from torch_matrix.run.followups import run_in_own_venv
    from torch_matrix.world.specfile import project_dir

    settings = CellSettings(
        cells_dir=cells_dir,
        work_dir=envdir,
        index_config=spec.index,
        fingerprint=cell.fingerprint(spec.index.to_json()),
        probe_dirs=tuple(spec.probes.dirs),
        probe_commands=dict(spec.probes.commands),
        probe_timeout_s=spec.probes.timeout,
        probe_command_timeout_s=spec.probes.command_timeout,
        position=position,
        total=total,
        project_dir=project_dir(spec),
        targets=spec.targets,
    )
    return run_in_own_venv(cell, settings, interpreter, envdir / cell.id, redo=redo)


def as_bisect_cell(cell: Cell, judged_by: str) -> Cell:
    """A planned cell as a ``bisect`` cell: its own id (``bisect-<id>``), apart from the run's cells,
    and what judges it in the cell itself, so a resumed result must have been judged the same way."""
    return dataclasses.replace(
        cell,
        id=f"{BISECT_PREFIX}{cell.id}",
        origin=ORIGIN_BISECT,
        reason=f"torch-matrix bisect, judged by {judged_by}",
        tags=(*cell.tags, ORIGIN_BISECT),
    )


@dataclasses.dataclass(frozen=True)
class BisectAnswer:
    """A bisect's outcome: the candidate versions, each tested one with its result, the
    conclusion, the upstream compare link (empty when inconclusive) and the cell limit."""

    versions: list[str]
    tested: list[tuple[Tested, CellResult]]
    conclusion: bisect_logic.Conclusion
    url: str
    limit: int

    def text(self) -> str:
        """The answer for a reader: every tested version in order, the conclusion, the link."""
        versions, tested, conclusion, url, limit = (
            self.versions,
            self.tested,
            self.conclusion,
            self.url,
            self.limit,
        )
        lines = [
            f"tested {len(tested)} of {len(versions)} versions (limit {limit}; #n = order tested):"
        ]
        order = {pair[0].version: position for position, pair in enumerate(tested, 1)}
        rows = [
            [
                f"#{order[item.version]}",
                item.cell.id,
                item.installed(result) or "-",
                item.outcome.kind,
                item.outcome.evidence[:110] + (" [resumed]" if item.resumed else ""),
            ]
            for item, result in sorted(tested, key=lambda pair: versions.index(pair[0].version))
        ]
        if rows:
            widths = [max(len(row[i]) for row in rows) for i in range(4)]
            lines += [
                "  " + "  ".join(v.ljust(w) for v, w in zip(row[:4], widths)) + "  " + row[4]
                for row in rows
            ]
        lines.append(conclusion.sentence())
        if conclusion.non_monotone:
            lines.append(
                f"note: not monotone: {', '.join(conclusion.non_monotone)} passed after the first bad version"
            )
        if url:
            lines.append(f"upstream changes: {url}")
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        """The answer for a machine (``bisect --json``)."""
        versions, tested, conclusion, url, limit = (
            self.versions,
            self.tested,
            self.conclusion,
            self.url,
            self.limit,
        )
        from torch_matrix.vocab.records import built_versions

        return {
            "versions": versions,
            "limit": limit,
            "tested": [
                {
                    "version": item.version,
                    "cell": item.cell.id,
                    "outcome": item.outcome.kind,
                    "evidence": item.outcome.evidence,
                    "resumed": item.resumed,
                    "file": str(item.path),
                    "installed": built_versions(result),
                }
                for item, result in tested
            ],
            "last_good": conclusion.last_good,
            "first_bad": conclusion.first_bad,
            "exact": conclusion.exact,
            "between": list(conclusion.between),
            "problem": conclusion.problem,
            "answer": conclusion.sentence(),
            "compare_url": url,
        }


def run_bisect(
    args: BisectRequest, environ: Mapping[str, str], say: Callable[[str], None]
) -> BisectAnswer:
    """Bisect as asked: the versions, the held spec, one cell at a time until the edge is found or
    the cell limit is spent. ``say`` gets each progress line (the command prints them to stderr)."""
    from torch_matrix.plan import bisection as bisect_logic
    from torch_matrix.spec.model import DEFAULT_VARIANT
    from torch_matrix.world.specfile import load_spec

    if args.probe and args.test:
        raise UserError(
            "give --probe or --test, not both",
            "--test",
            hint="--probe NAME judges by one probe, --test 'CMD' by your own command",
        )
    spec = load_spec(args.spec, environ)
    if args.nightly and (args.variant or spec.variants[0]) != DEFAULT_VARIANT:
        raise UserError(
            "a nightly bisect holds the default variant",
            "--variant",
            hint="point --nightly-index at that variant's nightly index, e.g. "
            "https://download.pytorch.org/whl/nightly/cu124",
        )
    versions, index_config = _versions(args, spec, environ)
    held = held_spec(spec, args, versions, index_config)
    cells, interpreters = _plan(held, environ, prereleases=bool(args.nightly))
    probe = TEST_PROBE if args.test else args.probe
    what = f"test {args.test}" if args.test else f"probe {probe}" if probe else "the cell's verdict"
    by_version = {cell.torch: as_bisect_cell(cell, what) for cell in cells}
    interpreter = interpreters.get(held.python[0])
    interpreter_path = interpreter.path if interpreter is not None else sys.executable
    cells_dir = layout.cells_dir(
        layout.run_dir(layout.results_root(environ), spec.name + BISECT_RUN_SUFFIX)
    )
    envdir = Path(args.envdir or ".nox").absolute()
    limit = args.max_cells or bisect_logic.max_cells(len(versions))
    say(
        f"bisect {versions[0]} .. {versions[-1]}: {len(versions)} versions, at most {limit} cells, judged by "
        f"{what}; held: python {held.python[0]}, variant {held.variants[0]}"
        + "".join(f", {a.name} {a.values[0]}" for a in held.extras)
        + f"; results in {cells_dir}"
    )

    outcomes: dict[str, str] = {}
    tested: list[tuple[Tested, CellResult]] = []
    while len(tested) < limit:
        version = bisect_logic.next_version(versions, outcomes)
        if version is None:
            break
        cell = by_version[version]
        result, resumed = _run_one(
            cell, held, interpreter_path, cells_dir, envdir, len(tested) + 1, limit, bool(args.redo)
        )
        outcome = bisect_logic.outcome_of(result, probe)
        outcomes[version] = outcome.kind
        tested.append(
            (Tested(version, cell, outcome, resumed, layout.cell_file(cells_dir, cell.id)), result)
        )
        say(
            f"bisect: {cell.id}: {outcome.kind} ({terminal(outcome.evidence[:160])})"
            + (" [resumed]" if resumed else "")
        )
    budget_left = bisect_logic.next_version(versions, outcomes) is None or len(tested) < limit
    conclusion = bisect_logic.conclude(versions, outcomes, budget_left=budget_left)
    url = (
        bisect_logic.compare_url(conclusion.last_good, conclusion.first_bad)
        if conclusion.last_good and conclusion.first_bad and not conclusion.problem
        else ""
    )
    return BisectAnswer(versions, tested, conclusion, url, limit)
