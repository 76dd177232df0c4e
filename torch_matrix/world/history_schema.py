"""The history file's schema (``torch_matrix.world.history`` reads and writes it): its tables,
the migrations that bring an older file up to date on open, and schema 3's one row per cell and
night, whose texts that repeat night after night are stored once (``Texts``).

The version is SQLite's ``PRAGMA user_version``; ``MIGRATIONS[i]`` brings version i to i + 1, and
a file from a newer tool is refused with one line rather than misread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch_matrix.judge.snapshot import CellState, ProbeState
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.settings import HISTORY_ENV

# runs' per-verdict count columns, in table order (``environment`` came with migration 2)
COUNT_COLUMNS = ("compatible", "incompatible", "unsatisfiable", "error", "environment")
DB_NAME = "history.sqlite"
MESSAGE_LIMIT = 500  # characters of a probe message kept; the result files keep everything
REPRO_LIMIT = 2000


class Texts:
    """The ``texts`` table of schema 3: each distinct string stored once, rows hold its id.
    Writing interns (``id_of``); reading decodes ids (``text``, ``decoded``), cached per process."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.db = connection
        self.ids: dict[str, int] = {}
        self.values: dict[tuple[Any, ...], int] = {}
        self.texts: dict[int, str] = {}
        self.json: dict[int, object] = {}
        self.lists: dict[int, tuple[str, ...]] = {}

    def id_of(self, text: str) -> int:
        found = self.ids.get(text)
        if found is None:
            row = self.db.execute("SELECT id FROM texts WHERE text = ?", (text,)).fetchone()
            if row is None:
                cursor = self.db.execute("INSERT INTO texts (text) VALUES (?)", (text,))
                assert cursor.lastrowid is not None
                found = cursor.lastrowid
            else:
                found = int(row[0])
            self.ids[text] = found
            self.texts[found] = text
        return found

    def id_of_json(self, value: tuple[Any, ...], shape: Callable[[tuple[Any, ...]], object]) -> int:
        """The id of ``json.dumps(shape(value))``; a value seen before is not encoded again."""
        found = self.values.get(value)
        if found is None:
            found = self.values[value] = self.id_of(json.dumps(shape(value), sort_keys=True))
        return found

    def text(self, text_id: int) -> str:
        found = self.texts.get(text_id)
        if found is None:
            row = self.db.execute("SELECT text FROM texts WHERE id = ?", (text_id,)).fetchone()
            found = str(row[0]) if row is not None else ""
            self.texts[text_id] = found
        return found

    def decoded(self, text_id: int) -> object:
        """The JSON value stored as text ``text_id`` (probe names, statuses, notes)."""
        if text_id not in self.json:
            self.json[text_id] = json.loads(self.text(text_id) or "null")
        return self.json[text_id]

    def strings(self, text_id: int) -> tuple[str, ...]:
        """A stored JSON list of strings (probe names, statuses), decoded once per id."""
        found = self.lists.get(text_id)
        if found is None:
            value = self.decoded(text_id)
            found = self.lists[text_id] = (
                tuple(str(item) for item in value) if isinstance(value, list) else ()
            )
        return found

    def probe_notes(self, text_id: int) -> dict[str, list[str]]:
        value = self.decoded(text_id)
        return value if isinstance(value, dict) else {}


def row_values(texts: Texts, run: int, state: CellState) -> tuple[object, ...]:
    """One cell of one night as a schema-3 row (``COMPACT_COLUMNS``' order)."""
    probes = state.probes
    names = tuple(probes)
    notes = tuple(
        (name, probe.message[:MESSAGE_LIMIT], probe.repro[:REPRO_LIMIT])
        for name, probe in probes.items()
        if probe.message or probe.repro
    )
    return (
        run,
        state.cell,
        state.verdict,
        ",".join(state.failing),
        state.python,
        texts.id_of(state.reason[:MESSAGE_LIMIT]),
        texts.id_of(" ".join(state.requirements)),
        texts.id_of_json(names, list),
        texts.id_of_json(tuple(str(probes[name].status) for name in names), list),
        texts.id_of_json(notes, _notes_json),
    )


def _notes_json(notes: tuple[tuple[str, str, str], ...]) -> dict[str, list[str]]:
    return {name: [message, repro] for name, message, repro in notes}


COMPACT_COLUMNS = (
    "run",
    "cell",
    "verdict",
    "failing",
    "python",
    "reason",
    "requirements",
    "probe_names",
    "probe_statuses",
    "probe_notes",
)
INSERT_CELL = f"INSERT INTO cells VALUES ({', '.join('?' * len(COMPACT_COLUMNS))})"


_COMPACT_SCHEMA = (
    "CREATE TABLE texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE)",
    """CREATE TABLE cells_v3 (
        run INTEGER NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
        cell TEXT NOT NULL,
        verdict TEXT NOT NULL,
        failing TEXT NOT NULL,            -- required probes that failed, comma-separated
        python TEXT NOT NULL,
        reason INTEGER NOT NULL,          -- texts.id
        requirements INTEGER NOT NULL,    -- texts.id: the cell's pins, space-separated
        probe_names INTEGER NOT NULL,     -- texts.id: JSON list, in the cell's probe order
        probe_statuses INTEGER NOT NULL,  -- texts.id: JSON list, one status per probe
        probe_notes INTEGER NOT NULL,     -- texts.id: JSON {probe: [message, repro]}, non-empty
        PRIMARY KEY (run, cell)
    ) WITHOUT ROWID""",
)


def _compact_rows(connection: sqlite3.Connection) -> None:
    """Schema 2 -> 3: the ``cells`` and ``probes`` tables (one row per probe per cell per night:
    a year of a 2,500-cell nightly is ~15 million rows) become one ``cells`` row per cell and
    night whose repeated texts live once in ``texts``. Every stored value is kept."""
    for statement in _COMPACT_SCHEMA:  # execute, not executescript: that would commit
        connection.execute(statement)
    texts = Texts(connection)
    insert = INSERT_CELL.replace("INTO cells ", "INTO cells_v3 ")
    runs = [row[0] for row in connection.execute("SELECT DISTINCT run FROM cells ORDER BY run")]
    for run in runs:  # one night at a time: an old file of any size migrates in bounded memory
        probes: dict[str, dict[str, ProbeState]] = {}
        for cell, probe, status, message, repro in connection.execute(
            "SELECT cell, probe, status, message, repro FROM probes WHERE run = ?", (run,)
        ):
            probes.setdefault(cell, {})[probe] = ProbeState(status, message, repro)
        rows = [
            row_values(
                texts,
                run,
                CellState(
                    cell=cell,
                    verdict=verdict,
                    reason=reason,
                    failing=tuple(f for f in failing.split(",") if f),
                    requirements=tuple(requirements.split()),
                    python=python,
                    probes=probes.get(cell, {}),
                ),
            )
            for cell, verdict, reason, failing, requirements, python in connection.execute(
                "SELECT cell, verdict, reason, failing, requirements, python FROM cells"
                " WHERE run = ?",
                (run,),
            )
        ]
        connection.executemany(insert, rows)
    for statement in (
        "DROP TABLE probes",
        "DROP TABLE cells",
        "ALTER TABLE cells_v3 RENAME TO cells",
        "CREATE INDEX cells_by_cell ON cells (cell, run)",  # failing_history, last_statuses
    ):
        connection.execute(statement)


# Index i brings user_version i to i + 1. Append only: never edit a released step. A step is SQL,
# or a function of the connection where rows must be rewritten (each runs in one transaction).
MIGRATIONS: tuple[str | Callable[[sqlite3.Connection], None], ...] = (
    """
    CREATE TABLE runs (
        seq INTEGER PRIMARY KEY,          -- import order; ties on date sort by it
        id TEXT NOT NULL UNIQUE,          -- torch_matrix.judge.snapshot.run_id: content-derived
        date TEXT NOT NULL,               -- ISO 8601 UTC, when the run's last cell finished
        spec TEXT NOT NULL,
        commit_sha TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        imported_at TEXT NOT NULL,
        cells INTEGER NOT NULL,
        compatible INTEGER NOT NULL,
        incompatible INTEGER NOT NULL,
        unsatisfiable INTEGER NOT NULL,
        error INTEGER NOT NULL
    );
    CREATE INDEX runs_by_spec_date ON runs (spec, date, seq);
    CREATE TABLE cells (
        run INTEGER NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
        cell TEXT NOT NULL,
        verdict TEXT NOT NULL,
        reason TEXT NOT NULL,
        failing TEXT NOT NULL,            -- required probes that failed, comma-separated
        requirements TEXT NOT NULL,       -- the cell's pins, space-separated
        python TEXT NOT NULL,
        PRIMARY KEY (run, cell)
    ) WITHOUT ROWID;
    CREATE TABLE probes (
        run INTEGER NOT NULL,
        cell TEXT NOT NULL,
        probe TEXT NOT NULL,
        status TEXT NOT NULL,
        message TEXT NOT NULL,
        repro TEXT NOT NULL,
        PRIMARY KEY (run, cell, probe)
    ) WITHOUT ROWID;
    """,
    # 2: cells whose failures the environment explains (verdict ``environment``) get their own count.
    "ALTER TABLE runs ADD COLUMN environment INTEGER NOT NULL DEFAULT 0;",
    # 3: one compact row per cell and night, the texts that repeat stored once.
    _compact_rows,
    # 4: no index by cell. It put each night's 2,500 rows on ~2,500 of its pages: an import wrote
    # ~10 MB and waited on it (0.3 s of a night's 1.6 s). The per-cell queries read the primary key
    # (run, cell), one run at a time (``History._cell_rows``).
    "DROP INDEX IF EXISTS cells_by_cell;",
)
SCHEMA_VERSION = len(MIGRATIONS)


RESTORE = (
    f"restore it from the history branch (`git fetch origin torch-matrix-history && git show "
    f"FETCH_HEAD:{DB_NAME} > FILE`), or delete it and reimport the runs you have "
    "(`torch-matrix import RESULTS_DIR`)"
)


# The tables and columns this version's queries use: a file at our version without them (restored
# from the wrong place, edited by hand) is refused at open, not mid-query.
TABLES = {
    "runs": (
        "seq",
        "id",
        "date",
        "spec",
        "commit_sha",
        "source",
        "imported_at",
        "cells",
        *COUNT_COLUMNS,
    ),
    "cells": COMPACT_COLUMNS,
    "texts": ("id", "text"),
}


def check_tables(connection: sqlite3.Connection, where: Path) -> None:
    for table, columns in TABLES.items():
        have = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        lacking = [column for column in columns if column not in have]
        if lacking:
            what = f"no table {table}" if not have else f"table {table} lacks {', '.join(lacking)}"
            raise UserError(
                f"the history database does not have the tables of its version "
                f"{SCHEMA_VERSION} ({what})",
                str(where),
                hint=RESTORE,
            )


def migrate(connection: sqlite3.Connection, where: Path) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise UserError(
            f"history schema version {version} is newer than this tool understands "
            f"({SCHEMA_VERSION})",
            str(where),
            hint="upgrade torch-matrix to read it",
        )
    if version == 0:
        tables = connection.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()[0]
        if tables:
            raise UserError(
                "not a torch-matrix history database (an SQLite file with other tables)",
                str(where),
                hint=f"point --db / ${HISTORY_ENV} at another file",
            )
    for step in range(version, SCHEMA_VERSION):  # each step and its version number commit together
        migration = MIGRATIONS[step]
        if isinstance(migration, str):
            connection.executescript(
                "BEGIN;" + migration + f"PRAGMA user_version = {step + 1};COMMIT;"
            )
            continue
        connection.commit()
        connection.execute("BEGIN")
        try:
            migration(connection)
            connection.execute(f"PRAGMA user_version = {step + 1}")
        except BaseException:
            connection.rollback()
            raise
        connection.commit()
    connection.execute("PRAGMA foreign_keys = ON")
