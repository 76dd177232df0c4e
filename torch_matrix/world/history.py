"""The history of merged runs, in one SQLite file (stdlib ``sqlite3``): the I/O edge.

Every run imported keeps its date, spec name, commit and each cell's verdict plus every
probe's status and message. A run's id is derived from its content (``torch_matrix.judge.snapshot.run_id``),
so importing the same results twice adds nothing. The schema is versioned with
``PRAGMA user_version``; ``history_schema.MIGRATIONS`` brings an older file up to date on open,
and a file from a newer tool is refused with one line rather than misread.

Default location: ``<results root>/history.sqlite`` (``$TORCH_MATRIX_RESULTS`` or
``./results``); ``$TORCH_MATRIX_HISTORY`` or ``--db`` choose another file (a path on shared
storage works for a team; see docs/nightly.md for the next step). What changed between two
runs is pure logic in ``torch_matrix.report.diff``; this module only reads and writes rows.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from torch_matrix.judge.snapshot import (
    EVIDENCE_STATUSES,
    CellState,
    PassRate,
    ProbeState,
    RunRef,
    Snapshot,
    run_id,
    snapshot_of,
)
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.settings import HISTORY_ENV, RESULTS_ENV
from torch_matrix.vocab.records import PASS, CellResult
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, VERDICTS
from torch_matrix.world.history_schema import (
    COUNT_COLUMNS,
    DB_NAME,
    INSERT_CELL,
    RESTORE,
    Texts,
    check_tables,
    migrate,
    row_values,
)

# Cells named in one per-run query (SQLite's variable limit is 999 before 3.32).
CELLS_PER_QUERY = 500


def default_db_path(environ: Mapping[str, str] = os.environ) -> Path:
    explicit = settings.read(environ, HISTORY_ENV)
    if explicit:
        return Path(explicit)
    return Path(settings.read(environ, RESULTS_ENV) or settings.DEFAULT_RESULTS) / DB_NAME


def db_path(explicit: str | None, environ: Mapping[str, str] = os.environ) -> Path:
    return Path(explicit) if explicit else default_db_path(environ)


@dataclass(frozen=True)
class RunRow:
    run: RunRef
    seq: int
    cells: int
    counts: Mapping[str, int]  # verdict -> cells


class History:
    """An open history database. Use ``open_history``; close with ``close()`` or ``with``."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.db = connection
        self.path = path
        self.texts = Texts(connection)
        self._decoded_probes: dict[tuple[int, int, int], Mapping[str, ProbeState]] = {}

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writing

    def import_run(self, results: Sequence[CellResult], run: RunRef) -> bool:
        """Add ``run`` with its results; False (and nothing written) when it is already there."""
        snapshot = snapshot_of(results, run)
        counts: dict[str, int] = {kind: 0 for kind in VERDICTS}
        for state in snapshot.cells.values():
            counts[state.verdict] = counts.get(state.verdict, 0) + 1
        with self.db:
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO runs (id, date, spec, commit_sha, source, imported_at, cells, compatible,"
                " incompatible, unsatisfiable, error, environment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.date,
                    run.spec,
                    run.commit,
                    run.source,
                    _now(),
                    len(snapshot.cells),
                    counts.get("compatible", 0),
                    counts.get("incompatible", 0),
                    counts.get("unsatisfiable", 0),
                    counts.get("error", 0),
                    counts.get("environment", 0),
                ),
            )
            if cursor.rowcount == 0:
                return False
            seq = cursor.lastrowid
            assert seq is not None
            try:
                self.db.executemany(
                    INSERT_CELL,
                    [row_values(self.texts, seq, state) for state in snapshot.cells.values()],
                )
            except BaseException:
                self.texts = Texts(self.db)  # ids cached from the rolled-back transaction
                raise
        return True

    # ------------------------------------------------------------------ reading

    def runs(self, spec: str | None = None, last: int | None = None) -> list[RunRow]:
        """Runs oldest first (by date, then import order); ``last`` keeps the newest N."""
        query = (
            "SELECT seq, id, date, spec, commit_sha, source, cells, compatible, incompatible,"
            " unsatisfiable, error, environment FROM runs"
        )
        params: list[object] = []
        if spec is not None:
            query += " WHERE spec = ?"
            params.append(spec)
        query += " ORDER BY date DESC, seq DESC"
        if last:
            query += " LIMIT ?"
            params.append(last)
        rows = [
            RunRow(
                run=RunRef(id=r[1], date=r[2], spec=r[3], commit=r[4], source=r[5]),
                seq=r[0],
                cells=r[6],
                counts=dict(zip(COUNT_COLUMNS, r[7:12])),
            )
            for r in self.db.execute(query, params)
        ]
        return rows[::-1]

    def find(self, ref: str) -> RunRow | None:
        """A run by id or unique id prefix (4+ characters); None when there is none."""
        matches = [row for row in self.runs() if row.run.id == ref]
        if not matches and len(ref) >= 4:
            matches = [row for row in self.runs() if row.run.id.startswith(ref)]
        if len(matches) > 1:
            raise UserError(
                f"run id prefix {ref!r} matches {len(matches)} runs",
                str(self.path),
                hint="give more characters of the id (`torch-matrix history` lists them)",
            )
        return matches[0] if matches else None

    def snapshot(self, row: RunRow) -> Snapshot:
        texts = self.texts
        cells = {}
        for (
            cell,
            verdict,
            failing,
            python,
            reason,
            requirements,
            names,
            statuses,
            notes,
        ) in self.db.execute(
            "SELECT cell, verdict, failing, python, reason, requirements, probe_names,"
            " probe_statuses, probe_notes FROM cells WHERE run = ?",
            (row.seq,),
        ):
            cells[cell] = CellState(
                cell=cell,
                verdict=verdict,
                reason=texts.text(reason),
                failing=tuple(f for f in failing.split(",") if f),
                requirements=tuple(texts.text(requirements).split()),
                python=python,
                probes=self._probes(names, statuses, notes),
            )
        return Snapshot(run=row.run, cells=cells)

    def _probes(self, names: int, statuses: int, notes: int) -> Mapping[str, ProbeState]:
        """A stored row's probes, read-only: cells with the same names, statuses and notes (most
        cells, most nights) share one mapping, built once."""
        key = (names, statuses, notes)
        found = self._decoded_probes.get(key)
        if found is None:
            texts = self.texts
            noted = texts.probe_notes(notes)
            probes = {}
            for name, status in zip(texts.strings(names), texts.strings(statuses)):
                message, repro = noted.get(name) or ("", "")
                probes[name] = ProbeState(status, message, repro)
            found = self._decoded_probes[key] = MappingProxyType(probes)
        return found

    def _statuses(self, names: int, statuses: int) -> list[tuple[str, str]]:
        """(probe, status) of one stored row, in the cell's probe order."""
        return list(zip(self.texts.strings(names), self.texts.strings(statuses)))

    def failing_history(
        self, spec: str, pairs: Iterable[tuple[str, str]], until: RunRef | None = None
    ) -> dict[tuple[str, str], list[tuple[RunRef, bool | None]]]:
        """For each (cell, probe): oldest first, per run of ``spec`` up to ``until``, True when the
        probe made the cell incompatible, False when the cell had evidence otherwise, None when
        the cell was absent or had no evidence (see ``torch_matrix.report.diff.streak_start``)."""
        wanted = set(pairs)
        if not wanted:
            return {}
        runs = self.runs(spec=spec)
        if until is not None:
            position = next((i for i, row in enumerate(runs) if row.run.id == until.id), None)
            if position is not None:
                runs = runs[: position + 1]
            else:
                runs = [row for row in runs if row.run.date <= until.date]
        seqs = {row.seq: i for i, row in enumerate(runs)}
        cells_wanted = {cell for cell, _ in wanted}
        states: dict[tuple[int, str], tuple[str, str]] = {}
        for seq, cell, verdict, failing in self._cell_rows("verdict, failing", seqs, cells_wanted):
            states[(seq, cell)] = (verdict, failing)
        out: dict[tuple[str, str], list[tuple[RunRef, bool | None]]] = {}
        for cell, probe in wanted:
            series: list[tuple[RunRef, bool | None]] = []
            for row in runs:
                state = states.get((row.seq, cell))
                if state is None or state[0] not in (COMPATIBLE, INCOMPATIBLE):
                    series.append((row.run, None))
                else:
                    series.append((row.run, probe in state[1].split(",")))
            out[(cell, probe)] = series
        return out

    def probe_series(
        self, spec: str, last: int
    ) -> tuple[list[RunRow], dict[tuple[str, str], list[str | None]]]:
        """The newest ``last`` runs of ``spec`` and, per (cell, probe), its status in each (None: absent)."""
        runs = self.runs(spec=spec, last=last)
        position = {row.seq: i for i, row in enumerate(runs)}
        series: dict[tuple[str, str], list[str | None]] = {}
        if not runs:
            return runs, series
        marks = ",".join("?" * len(runs))
        for seq, cell, names, statuses in self.db.execute(
            f"SELECT run, cell, probe_names, probe_statuses FROM cells WHERE run IN ({marks})",
            list(position),
        ):
            index = position[seq]
            for probe, status in self._statuses(names, statuses):
                found = series.get((cell, probe))
                if found is None:
                    found = series[(cell, probe)] = [None] * len(runs)
                found[index] = status
        return runs, series

    def pass_rates(self, spec: str, last: int) -> dict[tuple[str, str], PassRate]:
        """``torch_matrix.judge.snapshot.pass_rate`` of every (cell, probe) over the newest ``last`` runs
        (the same numbers as ``pass_rate`` over ``probe_series``). SQLite counts the nights each
        cell had the same probe statuses (most cells, most nights), so each distinct row is read once."""
        runs = self.runs(spec=spec, last=last)
        if not runs:
            return {}
        marks = ",".join("?" * len(runs))
        evidence = set(map(str, EVIDENCE_STATUSES))
        flags: dict[int, tuple[list[int], list[int]]] = {}  # statuses -> (passed, evidence) indexes
        tallies: dict[
            tuple[str, int], list[int]
        ] = {}  # (cell, names) -> nights passed, with evidence
        for cell, names, statuses, nights in self.db.execute(
            f"SELECT cell, probe_names, probe_statuses, count(*) FROM cells WHERE run IN ({marks})"
            " GROUP BY cell, probe_names, probe_statuses",
            [row.seq for row in runs],
        ):
            found = flags.get(statuses)
            if found is None:
                values = self.texts.strings(statuses)
                found = flags[statuses] = (
                    [i for i, status in enumerate(values) if status == PASS],
                    [i + len(values) for i, status in enumerate(values) if status in evidence],
                )
            tally = tallies.get((cell, names))
            if tally is None:
                tally = tallies[(cell, names)] = [0] * (2 * len(self.texts.strings(names)))
            for index in found[0]:
                tally[index] += nights
            for index in found[1]:
                tally[index] += nights
        rates: dict[tuple[str, str], PassRate] = {}
        for (cell, names), tally in sorted(tallies.items()):
            probes = self.texts.strings(names)
            for index, probe in enumerate(probes):
                rates[(cell, probe)] = PassRate(
                    passed=tally[index], runs=tally[index + len(probes)], nights=len(runs)
                )
        return dict(sorted(rates.items()))

    def last_statuses(
        self, spec: str, pairs: Iterable[tuple[str, str]], last: int
    ) -> dict[tuple[str, str], str]:
        """The newest status of each (cell, probe) among the newest ``last`` runs of ``spec``."""
        runs = self.runs(spec=spec, last=last)
        order = {row.seq: i for i, row in enumerate(runs)}
        wanted = set(pairs)
        cells = sorted({cell for cell, _ in wanted})
        if not runs or not cells:
            return {}
        best: dict[tuple[str, str], tuple[int, str]] = {}
        for seq, cell, names, statuses in self._cell_rows(
            "probe_names, probe_statuses", order, cells
        ):
            position = order[seq]
            for probe, status in self._statuses(names, statuses):
                key = (cell, probe)
                if key in wanted and (key not in best or position > best[key][0]):
                    best[key] = (position, status)
        return {key: status for key, (_, status) in best.items()}

    def _cell_rows(
        self, columns: str, runs: Iterable[int], cells: Iterable[str]
    ) -> Iterator[tuple[Any, ...]]:
        """``(run, cell, *columns)`` of the given cells in the given runs, read by the primary key
        (run, cell): one query per run and up to ``CELLS_PER_QUERY`` cells, a lookup each."""
        wanted = sorted(set(cells))
        for start in range(0, len(wanted), CELLS_PER_QUERY):
            chunk = wanted[start : start + CELLS_PER_QUERY]
            query = (
                f"SELECT run, cell, {columns} FROM cells WHERE run = ? AND cell IN "
                f"({','.join('?' * len(chunk))})"
            )
            for seq in sorted(set(runs)):
                yield from self.db.execute(query, [seq, *chunk])

    def specs(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT spec FROM runs ORDER BY spec")]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------- SQLite failures, one line each


def history_failure(error: sqlite3.Error, where: Path) -> UserError:
    """What an SQLite error means for the user, as one line naming the file, and the fix.

    A failed write changes nothing: every write is one transaction (``with self.db``, each
    migration step in BEGIN ... COMMIT) and SQLite rolls it back."""
    text = " ".join(str(error).split()) or type(error).__name__
    lower = text.lower()
    if "full" in lower:
        return UserError(
            f"cannot write the history database: No space left on device ({text}); nothing was written",
            str(where),
            hint="free some space, then run the command again",
        )
    if (
        "readonly" in lower
        or "read-only" in lower
        or "unable to open" in lower
        or "permission" in lower
    ):
        return UserError(
            f"cannot write the history database: it is read-only ({text}); nothing was written",
            str(where),
            hint="make the file and its folder writable, or give another file with "
            f"--db / ${HISTORY_ENV}",
        )
    if "locked" in lower or "busy" in lower:
        return UserError(
            f"the history database is busy ({text}); nothing was written",
            str(where),
            hint="another torch-matrix import is writing it: run the command again when it ends",
        )
    if "not a database" in lower or "encrypted" in lower:  # the header itself is not SQLite's
        return UserError(
            f"not a torch-matrix history database ({text})",
            str(where),
            hint=f"point --db / ${HISTORY_ENV} at the history file; if this was it, {RESTORE}",
        )
    if "malformed" in lower or "corrupt" in lower:
        return UserError(f"the history database is damaged ({text})", str(where), hint=RESTORE)
    if "no such table" in lower or "no such column" in lower or "has no column" in lower:
        return UserError(
            f"the history database does not have the tables of its version ({text})",
            str(where),
            hint=RESTORE,
        )
    return UserError(f"the history database failed ({text})", str(where), hint=RESTORE)


def _one_line_failures(method):
    @functools.wraps(method)
    def wrapper(self: History, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as error:
            raise history_failure(error, self.path) from None

    return wrapper


for _name, _method in list(vars(History).items()):  # every query and write of an open history
    if callable(_method) and not _name.startswith("_") and _name != "close":
        setattr(History, _name, _one_line_failures(_method))


def open_history(path: str | os.PathLike[str], *, create: bool = True) -> History:
    """Open (and create or migrate) the database at ``path``. Bad files raise ``UserError``."""
    target = Path(path)
    if not create and not target.is_file():
        raise UserError(
            "no history database here",
            str(target),
            hint=f"run `torch-matrix import RESULTS_DIR` first, or point --db / ${HISTORY_ENV} at one",
        )
    if target.is_dir():
        raise UserError(
            "is a directory, not a history database file",
            str(target),
            hint=f"name a file, e.g. {target / DB_NAME}",
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(target)
    except (OSError, sqlite3.Error) as error:
        raise UserError(
            f"cannot open the history database ({error})",
            str(target),
            hint="give a writable file with --db or $TORCH_MATRIX_HISTORY",
        ) from None
    try:
        migrate(connection, target)
        check_tables(connection, target)
    except sqlite3.Error as error:
        connection.close()
        raise history_failure(error, target) from None
    except BaseException:
        connection.close()
        raise
    return History(connection, target)


# ---------------------------------------------------------------------------- importing a directory


def run_name_of(results_dir: Path) -> str:
    """The spec's run name from the layout ``<root>/<name>/cells/*.json``; the folder's own name
    when it holds cells directly; ``,``-joined names when it holds several runs."""
    base = results_dir if results_dir.is_dir() else results_dir.parent
    if base.name == "cells":
        return base.parent.name
    if (base / "cells").is_dir():
        return base.name
    names = sorted({path.parent.name for path in base.glob("*/cells") if path.is_dir()})
    return ",".join(names) or base.name


def newest_finish(results: Iterable[CellResult]) -> str:
    """The latest ``finished_at`` as ISO 8601 UTC (seconds), or "" when none parses."""
    best: datetime | None = None
    for result in results:
        try:
            moment = datetime.fromisoformat(result.finished_at.replace("Z", "+00:00"))
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        best = moment if best is None or moment > best else best
    return best.astimezone(timezone.utc).isoformat(timespec="seconds") if best else ""


def current_commit(environ: Mapping[str, str] = os.environ, cwd: str | None = None) -> str:
    """``$GITHUB_SHA`` in CI, else ``git rev-parse HEAD`` of the working directory, else ""."""
    if environ.get("GITHUB_SHA"):
        return environ["GITHUB_SHA"]
    # Imported here: subprocess and its kin cost every `diff`, `history` and `import` a few ms
    from torch_matrix.edges import proc

    code, out, _err = proc.run_text(["git", "rev-parse", "HEAD"], timeout=10, cwd=cwd)
    return out.strip() if code == 0 else ""


def run_ref_for(
    results: Sequence[CellResult],
    results_dir: Path,
    *,
    spec: str | None = None,
    commit: str | None = None,
    date: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> RunRef:
    return RunRef(
        id=run_id(results),
        date=date or newest_finish(results) or _now(),
        spec=spec or run_name_of(results_dir),
        commit=current_commit(environ) if commit is None else commit,
        source=str(results_dir),
    )
