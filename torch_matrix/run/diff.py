"""``torch-matrix diff``'s use case: two runs compared, each a results directory or a run of the
history database (one given: the run before it; none: the last two), with the run each new
failure first appeared in; and ``--issues``: the issue plan and each new failure's repro bundle.
``torch-matrix import`` reads a results directory the same way (``load_run_dir``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.edges import console
from torch_matrix.vocab.errors import UserError

if TYPE_CHECKING:  # imported when the command runs: other commands' start-up pays nothing
    from torch_matrix.judge.snapshot import RunRef, Snapshot
    from torch_matrix.world.history import History, RunRow


def load_run_dir(path: Path, args: Any) -> tuple[list, RunRef]:
    """A results directory's cells and the run they make (``--name``, ``--commit``, ``--date`` where
    given); one warning a file that could not be read; no result at all: an error."""
    from torch_matrix.world.history import run_ref_for
    from torch_matrix.world.results import load_results, no_results_hint

    loaded = load_results(path)
    for problem in loaded.problems:
        console.warn(str(problem))
    if not loaded.results:
        raise UserError(
            "no cell results found (expected <run>/cells/*.json or a merged results.json)",
            str(path),
            hint=no_results_hint(),
        )
    ref = run_ref_for(
        loaded.results,
        path,
        spec=getattr(args, "name", None),
        commit=getattr(args, "commit", None),
        date=getattr(args, "date", None),
    )
    return loaded.results, ref


def _open_if_present(args: Any) -> History | None:
    from torch_matrix.world.history import db_path, open_history

    path = db_path(args.db)
    if args.db or path.is_file():
        return open_history(path, create=False)
    return None


def _side(ref: str, history: History | None, args: Any) -> tuple[Snapshot, RunRow | None]:
    from torch_matrix.judge.snapshot import snapshot_of

    path = Path(ref)
    if path.exists():
        results, run = load_run_dir(path, args)
        row = history.find(run.id) if history is not None else None
        return snapshot_of(results, run), row
    if history is None:
        raise UserError(
            "neither a results directory nor a run id (no history database to look it up in: "
            "--db or $TORCH_MATRIX_HISTORY)",
            ref,
            hint="give a results directory, or point --db at the history that holds the run",
        )
    row = history.find(ref)
    if row is None:
        raise UserError(
            f"neither a results directory nor a run id in {history.path}",
            ref,
            hint="`torch-matrix history` lists the run ids",
        )
    return history.snapshot(row), row


def _filed_as(row: RunRow | None, new: Snapshot) -> str:
    """The spec name a run is filed under: its stored row's (``import --name`` may differ from
    the results layout's), else its own."""
    return row.run.spec if row is not None else new.run.spec


def _previous(history: History, row: RunRow | None, new: Snapshot) -> RunRow | None:
    """The run before ``new`` of the spec it is filed under: before its row, or the newest when
    it is not stored."""
    runs = history.runs(spec=_filed_as(row, new))
    if row is not None:
        seqs = [candidate.seq for candidate in runs]
        position = seqs.index(row.seq) if row.seq in seqs else len(runs)
        return runs[position - 1] if position > 0 else None
    older = [candidate for candidate in runs if candidate.run.id != new.run.id]
    return older[-1] if older else None


def _first_runs(
    history: History | None, new: Snapshot, pairs: list[tuple[str, str]], stored: bool
) -> dict[tuple[str, str], RunRef]:
    from torch_matrix.report.diff import streak_start

    if history is None or not pairs:
        return {}
    series = history.failing_history(new.run.spec, pairs, until=new.run if stored else None)
    found = {}
    for key, runs in series.items():
        if not stored:
            runs = runs + [(new.run, True)]
        start = streak_start(runs)
        if start is not None:
            found[key] = start
    return found


def compare(args: Any, refs: list[str]) -> Any:
    """The two runs compared (each a results directory or a run of the history; one or none
    given: the run before it, the last two), with the run each new failure first appeared in."""
    from torch_matrix.report.diff import diff_snapshots, failing_pairs
    from torch_matrix.world.history import db_path

    history = _open_if_present(args)
    new_row: RunRow | None
    try:
        if not refs:
            if history is None:
                raise UserError(
                    "no history database: give two results directories, or import runs first "
                    "(`torch-matrix import RESULTS_DIR`)",
                    str(db_path(args.db)),
                    hint="`torch-matrix diff OLD_RESULTS NEW_RESULTS` needs no history",
                )
            runs = history.runs(spec=args.spec) if args.spec else history.runs()
            if not runs:
                raise UserError(
                    "the history holds no runs" + (f" of spec {args.spec!r}" if args.spec else ""),
                    str(history.path),
                    hint="import runs first: `torch-matrix import RESULTS_DIR`",
                )
            new_row = runs[-1]
            new = history.snapshot(new_row)
        else:
            new, new_row = _side(refs[-1], history, args)
        if len(refs) == 2:
            old: Snapshot | None = _side(refs[0], history, args)[0]
        else:
            previous = _previous(history, new_row, new) if history is not None else None
            if previous is None and history is None:
                raise UserError(
                    "one run given and no history database to find the run before it: give OLD "
                    "too, or import runs first",
                    refs[0],
                    hint="`torch-matrix diff OLD_RESULTS NEW_RESULTS`",
                )
            old = (
                history.snapshot(previous) if previous is not None and history is not None else None
            )
            if old is None:
                print(
                    f"torch-matrix: note: no earlier run of spec {_filed_as(new_row, new)!r} in "
                    "the history; "
                    "every cell counts as appeared",
                    file=sys.stderr,
                )
        pairs = sorted(failing_pairs(new) - (failing_pairs(old) if old is not None else set()))
        first = _first_runs(history, new, pairs, stored=new_row is not None)
    finally:
        if history is not None:
            history.close()
    return diff_snapshots(old, new, first)


def write_issues(args: Any, refs: list[str], result: Any) -> str:
    """--issues FILE: the issue plan (what to open, what to close) and each new failure's bundle;
    the line that says so."""
    from torch_matrix.report import diff_render
    from torch_matrix.world.results import atomic_write_text

    bundles, fixes = _from_new_run(refs[-1] if refs else None, result.new_failures)
    plan = diff_render.issue_plan(result, run_url=args.run_url or "", bundles=bundles, fixes=fixes)
    for (
        cell,
        probe,
    ), text in bundles.items():  # whole, beside the plan: the body may hold them cut
        atomic_write_text(
            Path(args.issues).parent / "bundles" / diff_render.bundle_file(cell, probe), text
        )
    atomic_write_text(Path(args.issues), json.dumps(plan, indent=1) + "\n")
    return (
        f"wrote {args.issues}: {len(plan['open'])} issue(s) to open, {len(plan['close'])} cell+probe "
        "pair(s) passing"
    )


def _from_new_run(
    ref: str | None, failures: Any
) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """For each new failure, when the new run is a results directory: its repro bundle
    (``torch-matrix repro CELL PROBE``) and the code fix its cell's verdict gives (the user's call
    site; ``Verdict.fixes``). The nightly's issue bodies hold both."""
    if not failures or ref is None or not Path(ref).is_dir():
        return {}, {}
    from torch_matrix.judge.verdict import verdict_of
    from torch_matrix.report.repro import render_bundle
    from torch_matrix.world.results import load_results

    results = load_results(Path(ref)).results
    by_id = {item.cell.id: item for item in results}
    found = [f for f in failures if f.cell in by_id and by_id[f.cell].probe(f.probe)]
    bundles = {(f.cell, f.probe): render_bundle(by_id[f.cell], results, f.probe) for f in found}
    fixes = {}
    for failure in found:
        attribution = verdict_of(by_id[failure.cell]).fixes.get(failure.probe)
        if attribution is not None and attribution.advice:
            fixes[(failure.cell, failure.probe)] = attribution.advice
    return bundles, fixes
