"""The report command's use case (``torch-matrix report RESULTS_DIR``): merge every cell result
found, judge it, list the planned cells without a result and why, write the files, and give the
command the table to print.

Writes ``summary.md`` (GitHub Markdown) and a merged ``results.json`` into the results
directory (or ``--out``), and what was asked: the HTML page, JUnit XML, the pins (what
``torch-matrix pins`` writes, from the same loaded results), the GitHub step summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from torch_matrix.report.rows import judge, unbisected_notes
from torch_matrix.report import terminal as report
from torch_matrix.report import markdown as report_markdown
from torch_matrix.edges import console
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import MERGED_NAME, PINS_DIR, SPEC_ENV, SUMMARY_NAME
from torch_matrix.world.results import load_results, rejudged_lines, write_merged
from torch_matrix.world.runplan import (
    missing_reason,
    planned_but_missing,
    planned_ids,
    read_log,
    read_plan,
    rerun_spec,
    unreadable_cells,
)
from torch_matrix.judge.verdict import NO_EVIDENCE, TIMED_OUT

if TYPE_CHECKING:
    from torch_matrix.run.pins import PinsOptions

PLAN_HINT = "--plan takes the file `torch-matrix plan --json > plan.json` wrote"


@dataclasses.dataclass(frozen=True)
class ReportRequest:
    """What ``torch-matrix report`` is asked (its options)."""

    results_dir: Path
    rejudge: bool = False
    strict: bool = False
    plan: str | None = None  # a `torch-matrix plan --json` file: its cells without a result
    spec: str | None = None  # a spec: its planned cells without a result; the rerun lines
    max_summary_bytes: int | None = None
    format: str = "text"  # the table: text or markdown
    pivot: bool = False
    grid: bool = False
    width: int | None = None  # the terminal's, when the table goes to one
    out: str | None = None
    github_summary: bool = False
    junit: str | None = None
    html: str | None = None
    previous: str | None = None
    pins: PinsOptions | None = None  # write the pins too, with these options


@dataclasses.dataclass(frozen=True)
class ReportOutcome:
    """What the command prints: the table (stdout), then what writing the files said (stderr);
    ``unwritten``: the files could not be written (an error after the table); ``strict``:
    --strict's complaint (exit 1), '' when none."""

    table: str = ""
    said: str = ""
    unwritten: UserError | None = None
    strict: str = ""
    # ``--pins``: why no pin could be said at all (``run.pins.no_evidence_line``): exit 1.
    no_evidence: str = ""


def _cells_from_plan_json(data: Any, where: str) -> list[Cell | str]:
    """Cells from ``torch-matrix plan --json`` output: a list of cells, or an object with "cells"."""
    items = data.get("cells") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise UserError(
            "expected a list of cells (the output of `torch-matrix plan --json`)",
            where,
            hint=PLAN_HINT,
        )
    cells: list[Cell | str] = []
    for position, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get("cell"), dict):
            item = item["cell"]
        if isinstance(item, str):
            cells.append(item)
            continue
        if not isinstance(item, dict) or "id" not in item:
            raise UserError(f"entry {position} is not a cell (no id)", where, hint=PLAN_HINT)
        try:
            cells.append(Cell.from_json(item))
        except (KeyError, TypeError, ValueError):
            cells.append(str(item["id"]))
    return cells


def _planned_from_file(path: str) -> list[Cell | str]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError("plan file does not exist", path, hint=PLAN_HINT) from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read plan file ({error})", path, hint=PLAN_HINT) from None
    except json.JSONDecodeError as error:
        raise UserError(
            f"not JSON (line {error.lineno} column {error.colno})", path, hint=PLAN_HINT
        ) from None
    return _cells_from_plan_json(data, path)


def _planned_from_spec(spec_path: str) -> list[Cell | str]:
    """Plan the spec the way ``torch-matrix plan`` does (reads the indexes, so imported only
    here). In CI prefer ``--plan``: the plan the shards actually ran."""
    from torch_matrix.run import pipeline
    from torch_matrix.world import specfile as spec

    return list(pipeline.plan_for_spec(spec.load_spec(spec_path)))


def missing_cells(planned: Sequence[Cell | str], present_ids: set[str]) -> list[Cell | str]:
    return [
        cell for cell in planned if (cell if isinstance(cell, str) else cell.id) not in present_ids
    ]


def _append_github_summary(
    results: list, missing: list, explicit_limit: int | None, spec: str | None = None
) -> None:
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        console.warn("--github-summary: GITHUB_STEP_SUMMARY is not set")
        return
    path = Path(target)
    used = path.stat().st_size if path.exists() else 0
    room = report_markdown.GITHUB_SUMMARY_LIMIT - used - 1
    limit = min(room, explicit_limit) if explicit_limit else room
    text = report_markdown.render_markdown_summary(
        results, max_bytes=max(limit, 0), missing=missing, spec=spec
    )
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def previous_verdicts(
    where: str, current: Sequence = (), results_dir: Path | None = None
) -> tuple[dict[str, str], str]:
    """Cell id -> verdict kind of an earlier run, and how to name it. ``where``: a results directory,
    a merged results.json, a run id from the history database (``torch-matrix history`` lists them),
    or ``last``: the newest run of this spec in the history that is not the one being reported."""
    from torch_matrix.judge.verdict import verdict_of

    path = Path(where)
    if path.exists():
        loaded = load_results(path)
        for problem in loaded.problems:
            console.warn(f"--previous: {problem}")
        return {result.cell.id: verdict_of(result).kind for result in loaded.results}, where
    from torch_matrix.judge.snapshot import run_id
    from torch_matrix.world.history import db_path, open_history, run_name_of

    database = db_path(None)
    hint = (
        "pass an earlier run's results directory (results/<run>) or its results.json, a run id from "
        "`torch-matrix history`, or `last`"
    )
    if not database.is_file():
        raise UserError(
            "no such results directory, and no history database to look the run up in",
            f"--previous {where}",
            hint=hint,
        )
    with open_history(database, create=False) as history:
        if where == "last":
            this = run_id(current)
            spec = run_name_of(results_dir) if results_dir is not None else None
            rows = [row for row in history.runs(spec=spec) if row.run.id != this]
            row = rows[-1] if rows else None
        else:
            row = history.find(where)
        if row is None:
            raise UserError(
                f"no such run in the history {database}", f"--previous {where}", hint=hint
            )
        snapshot = history.snapshot(row)
    return {cell: state.verdict for cell, state in snapshot.cells.items()}, f"run {row.run.label()}"


def _write_pins(
    results: list[Any],
    out_dir: Path,
    options: PinsOptions,
    missing_reasons: Mapping[str, str] | None = None,
) -> tuple[list[tuple[str, tuple[str, ...]]], str]:
    """What ``torch-matrix pins`` writes (``torch_matrix.run.pins``, the same options), from the
    results already loaded (one load for both); returns each requirement line with its proof, for
    the HTML report, and why no pin could be said at all ("" when some cell gave evidence)."""
    from torch_matrix.pins.render import pinned_with_proof
    from torch_matrix.run.pins import (
        derive_pins,
        no_evidence_line,
        summary_lines,
        write_outputs,
        write_target_outputs,
    )

    if not results:
        print("pins: no cell results, nothing to suggest", file=sys.stderr)
        return [], "no cell results"
    outcome = derive_pins(results, options)
    suggestion = outcome.suggestion
    paths = write_outputs(suggestion, out_dir / PINS_DIR, missing_reasons)
    per_target = write_target_outputs(outcome.per_target, out_dir / PINS_DIR)
    for line in summary_lines(suggestion, paths, per_target, out_dir / PINS_DIR):
        print(line, file=sys.stderr)
    return pinned_with_proof(suggestion), no_evidence_line(suggestion)


def cell_files(sources: Mapping[str, str], page: Path) -> dict[str, str]:
    """Cell id -> the cell's own result file relative to the page (its link to the full text), for
    every cell read from a cell file, whatever folder of the results it lies in; a cell read from a
    merged results.json (``results.json[3]``) has none."""
    where = os.path.dirname(os.path.abspath(page))
    folders: dict[str, str] = {}  # each folder's path relative to the page, worked out once
    links = {}
    for cell_id, source in sources.items():
        if not source.endswith(".json"):
            continue
        folder, name = os.path.split(os.path.abspath(source))
        relative = folders.get(folder)
        if relative is None:
            relative = folders[folder] = os.path.relpath(folder, where)
        links[cell_id] = quote(os.path.normpath(os.path.join(relative, name)).replace(os.sep, "/"))
    return links


def _write_html(
    target: Path,
    judged: list,
    missing: list,
    previous_dir: str | None,
    results_dir: Path,
    spec: str | None = None,
    pins: Sequence[tuple[str, Sequence[str]]] = (),
    sources: Mapping[str, str] | None = None,
) -> Path:
    from datetime import datetime, timezone

    from torch_matrix.report.html_page import render_html
    from torch_matrix.world.indexcache import default_cache_dir

    previous, label = (
        previous_verdicts(previous_dir, [item.result for item in judged], results_dir)
        if previous_dir
        else (None, None)
    )
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    named = results_dir.resolve()
    if named.name == "cells" or named.is_file():
        named = named.parent
    title = f"torch-matrix: {named.name}"
    text = render_html(
        judged,
        missing=missing,
        previous=previous,
        previous_label=label,
        title=title,
        generated=generated,
        spec=spec,
        cell_files=cell_files(sources or {}, target),
        pins=pins,
        compiled_dir=str(default_cache_dir() / "templates"),
    )
    atomic_write(target, text)
    return target


def _write_files(
    args: ReportRequest,
    judged: Any,
    missing: Any,
    loaded: Any,
    out_dir: Path,
    summary: str,
    results_dir: Path,
    spec: Any,
    max_bytes: Any,
    reasons: Mapping[str, str] | None = None,
    pins_spec: str | None = None,
) -> str:
    """Write the report's files; returns ``--pins``' no-evidence line ("" when evidence exists)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [atomic_write(out_dir / SUMMARY_NAME, summary)]
    written.append(write_merged([item.result for item in judged], out_dir / MERGED_NAME, loaded))
    if args.github_summary:
        _append_github_summary(judged, missing, max_bytes, spec)
    if args.junit:
        from torch_matrix.report.junit import render_junit

        written.append(atomic_write(Path(args.junit), render_junit(judged)))
    print("wrote " + ", ".join(str(path) for path in written), file=sys.stderr)
    pins: list[tuple[str, tuple[str, ...]]] = []
    unproven = ""
    if args.pins is not None:
        from torch_matrix.run.pins import run_spec

        options = dataclasses.replace(args.pins, spec=pins_spec or run_spec(str(results_dir)))
        pins, unproven = _write_pins([item.result for item in judged], out_dir, options, reasons)
    if args.html:
        path = _write_html(
            Path(args.html),
            judged,
            missing,
            args.previous,
            results_dir,
            spec,
            pins,
            loaded.sources,
        )
        print(f"HTML report: {path}", file=sys.stderr)
    return unproven


def _missing(args: ReportRequest, loaded: Any) -> tuple[Any, list[Cell | str], dict[str, str]]:
    """The run's plan, its planned cells that have no result and why each has none."""
    results_dir = args.results_dir
    # The run's own plan (results/<run>/planned-cells.json, written when its cells started): every planned
    # cell is listed, a missing one with why; and the spec it ran, for the rerun lines.
    run_plan, plan_problem = read_plan(results_dir) if results_dir.is_dir() else (None, "")
    if plan_problem:
        console.warn(plan_problem)
    present = {result.cell.id for result in loaded.results}
    log = read_log(results_dir) if results_dir.is_dir() else None
    if args.plan or args.spec:
        planned: list[Cell | str] = (
            _planned_from_file(args.plan) if args.plan else _planned_from_spec(args.spec or "")
        )
        missing = missing_cells(planned, present)
        reasons = {
            cell_id: missing_reason(run_plan, cell_id, log) for cell_id in planned_ids(missing)
        }
    else:
        # The run's own plan and cell log: a cell that died before its result is listed with
        # why; a result deleted on purpose does not come back as "missing".
        missing, reasons = planned_but_missing(run_plan, log, present)
    listed = set(planned_ids(missing))
    for item in run_plan.cells if run_plan is not None else ():
        cell_id = planned_ids([item])[0]
        stale = getattr(loaded, "stale", {}).get(cell_id)
        if stale and cell_id not in listed:  # its file holds an earlier definition's result
            missing.append(item)
            reasons[cell_id] = f"its result is stale ({stale})"
            listed.add(cell_id)
    for item, why in unreadable_cells(run_plan, loaded.skipped, loaded.problems, present):
        cell_id = planned_ids([item])[0]
        if cell_id not in listed:
            missing.append(item)
        reasons[cell_id] = why
    if not loaded.results and not loaded.problems and not missing:
        # Nothing to report: a report of "0 cells" (exit 0, summary.md and results.json written
        # there) read as a run that found nothing wrong. pins, import and diff refuse it too.
        from torch_matrix.world.results import no_results_hint

        cells = results_dir / "cells"
        odd = f"; {cells} is not a directory" if cells.exists() and not cells.is_dir() else ""
        raise UserError(
            "no cell results found (expected <run>/cells/*.json or a merged results.json)" + odd,
            str(results_dir),
            hint=no_results_hint(),
        )
    return run_plan, missing, reasons


def _loaded(args: ReportRequest) -> Any:
    """The results, with a warning for each file that could not be read and each cell judged
    again in the run's context (a follow-up refuted its advice, ...): the report shows that verdict
    and writes it into results.json; the cell's own file is left as it is."""
    loaded = load_results(args.results_dir, rejudge=args.rejudge)
    for problem in loaded.problems:
        console.warn(str(problem))
    for line in rejudged_lines(loaded):
        console.warn(line)
    return loaded


def make_report(args: ReportRequest) -> ReportOutcome:
    """The report as asked: the results loaded and judged, the missing cells with why, the
    files written (summary.md, results.json, and what was asked: HTML, JUnit, pins, the GitHub
    summary), the table for stdout. Warnings go out as they are found; what writing the files
    said waits in the outcome, to follow the table."""
    results_dir = args.results_dir
    loaded = _loaded(args)
    if not loaded.results and not loaded.problems and args.strict:
        return ReportOutcome(
            strict=UserError(
                "no cell results found (looked for cells/*.json and results.json)",
                where=str(results_dir),
                hint="run the cells first (`nox -s matrix`), or point the report at the "
                "directory that holds them",
            ).render()
        )

    run_plan, missing, reasons = _missing(args, loaded)

    max_bytes = args.max_summary_bytes
    spec = (  # for the rerun lines
        args.spec
        or settings.read(os.environ, SPEC_ENV)
        or (run_plan.spec if run_plan is not None else None)
        or None
    )
    pins_spec, spec = spec, spec or rerun_spec(run_plan)  # the built-in matrix reruns --default
    judged = judge(loaded.results)
    unbisected = unbisected_notes(judged)  # once, for the table and the summary (issue 46)
    table = _table(args, judged, missing, spec, reasons, unbisected)
    out_dir = Path(args.out or (results_dir.parent if results_dir.is_file() else results_dir))
    summary = report_markdown.render_markdown_summary(
        judged,
        max_bytes=max_bytes,
        missing=missing,
        spec=spec,
        missing_reasons=reasons,
        unbisected=unbisected,
    )
    # Files first, then the table (the command prints it): a reader that stops early (`| head`)
    # closes the pipe, and what was asked for (summary.md, results.json, the HTML, pins) must be
    # written by then. What the writing says on stderr follows the table, where it is read.
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            unproven = _write_files(
                args,
                judged,
                missing,
                loaded,
                out_dir,
                summary,
                results_dir,
                spec,
                max_bytes,
                reasons,
                pins_spec,
            )
    except OSError as error:  # the table comes out even when the files cannot be written
        return ReportOutcome(
            table,
            said.getvalue(),
            unwritten=UserError(
                f"cannot write the report: {error.strerror or error}",
                where=str(out_dir if error.filename is None else error.filename),
                hint="free some space or fix the permissions, or write the report's files "
                "elsewhere with --out DIR",
            ),
        )
    return ReportOutcome(
        table,
        said.getvalue(),
        strict=_strict(args, judged, missing, loaded),
        no_evidence=unproven,
    )


def _table(
    args: ReportRequest,
    judged: Any,
    missing: list[Cell | str],
    spec: str | None,
    reasons: Mapping[str, str],
    unbisected: Sequence[str] | None = None,
) -> str:
    """The table the command prints: text laid out to the terminal, or Markdown."""
    if args.format == "markdown":
        return report_markdown.render_markdown_summary(
            judged,
            max_bytes=args.max_summary_bytes,
            missing=missing,
            spec=spec,
            missing_reasons=reasons,
            unbisected=unbisected,
        )
    return report.render_text(
        judged,
        pivot=args.pivot,
        grid=args.grid,
        missing=missing,
        width=args.width,
        spec=spec,
        missing_reasons=reasons,
        unbisected=unbisected,
    )


def _strict(args: ReportRequest, judged: Any, missing: Sequence[Any], loaded: Any) -> str:
    """--strict's complaint (error cells, missing cells, unreadable files), '' when none."""
    if args.strict:
        errors = [item.cell.id for item in judged if item.verdict.kind in (NO_EVIDENCE, TIMED_OUT)]
        unread = loaded.skipped
        if errors or missing or unread:
            return (
                f"torch-matrix: --strict: {len(errors)} error cell(s), {len(missing)} missing cell(s), "
                f"{len(unread)} unreadable file(s)"
            )
    return ""
