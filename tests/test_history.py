"""The history database (torch_matrix/world/history.py), the diff (torch_matrix/report/diff.py) and their commands.

Behaviour: importing runs written as today's tool writes them (schema v1 files, merged
results.json), idempotent imports, the diff of a history of several nights (broken, fixed,
appeared, vanished, probe changes, the first run a failure appeared in), flaky pass rates,
and one-line errors for bad databases. Pure parts get hypothesis properties.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torch_matrix.report import diff_render
from torch_matrix.cli import main as cli_main
from torch_matrix.judge.snapshot import (
    CellState,
    ProbeState,
    RunRef,
    Snapshot,
    pass_rate,
    snapshot_of,
)
from torch_matrix.report.diff import diff_snapshots, streak_start
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.history import open_history, run_name_of, run_ref_for
from torch_matrix.world.history_schema import SCHEMA_VERSION
from torch_matrix.vocab.records import FAIL, PASS, SKIP
from torch_matrix.world.results import load_results, write_merged, write_result
from torch_matrix.judge.verdict import verdict_of
from tests.factories import make_cell, make_probe, make_result

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "pins" / "real_yolo_run"
PROBES = ("install_sanity", "training_step", "numpy_interop")


def night(day: int, failing: dict[str, str], cells=("2.4.1", "2.5.1", "2.6.0")) -> list:
    """One night's results: each torch version a cell; ``failing`` maps torch -> failing probe."""
    results = []
    for torch in cells:
        cell = make_cell(torch=torch, probes=PROBES, required_probes=PROBES)
        probes = [
            make_probe(
                name,
                FAIL if failing.get(torch) == name else PASS,
                f"{name} broke" if failing.get(torch) == name else "",
                repro=f"import torch  # {name}" if failing.get(torch) == name else "",
            )
            for name in PROBES
        ]
        results.append(
            make_result(cell, probes=probes, finished_at=f"2026-11-{day:02d}T03:00:00+00:00")
        )
    return results


def write_night(root: Path, results: list) -> Path:
    cells = root / "nightly" / "cells"
    for result in results:
        write_result(result, cells)
    return root / "nightly"


def cli(*args: str) -> int:
    return cli_main(list(args))


# ---------------------------------------------------------------------------- importing


def test_v1_results_written_by_todays_tool_import_cleanly_and_once(tmp_path, capsys):
    """The golden cells are a real run (schema v1, as `nox -s matrix` writes it)."""
    run = shutil.copytree(GOLDEN / "cells", tmp_path / "yolo" / "cells")
    assert all(json.loads(p.read_text())["schema_version"] == 1 for p in run.glob("*.json"))
    db = tmp_path / "h.sqlite"
    assert cli("import", str(run.parent), "--db", str(db), "--commit", "abc123") == 0
    assert cli("import", str(run.parent), "--db", str(db), "--commit", "abc123") == 0
    out = capsys.readouterr().out
    assert "imported run" in out and "already in the history (nothing added)" in out

    loaded = load_results(run)
    with open_history(db, create=False) as history:
        rows = history.runs()
        assert len(rows) == 1
        row = rows[0]
        assert (row.run.spec, row.run.commit, row.cells) == ("yolo", "abc123", 8)
        assert row.run.date == "2026-11-21T09:38:01+00:00"  # the last cell's finished_at
        snapshot = history.snapshot(row)
        for result in loaded.results:
            state = snapshot.cells[result.cell.id]
            assert state.verdict == verdict_of(result).kind
            assert {name: p.status for name, p in state.probes.items()} == {
                p.name: p.status for p in result.probes
            }
        counts = [
            history.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "cells")
        ]
        assert counts == [1, 8]  # one row per cell and night, its probes inside it
        assert sum(len(state.probes) for state in snapshot.cells.values()) == sum(
            len(r.probes) for r in loaded.results
        )
        assert history.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_schema_1_database_migrates_and_keeps_its_runs(tmp_path):
    """A file written before the environment count existed opens, gains the column, keeps its rows."""
    import sqlite3

    from torch_matrix.world.history_schema import MIGRATIONS

    db = tmp_path / "old.sqlite"
    connection = sqlite3.connect(db)
    connection.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    connection.execute(
        "INSERT INTO runs (id, date, spec, imported_at, cells, compatible, incompatible,"
        " unsatisfiable, error) VALUES ('r1', '2026-11-01T00:00:00+00:00', 'nightly', 'x', 3, 2, 1, 0, 0)"
    )
    connection.commit()
    connection.close()
    with open_history(db, create=False) as history:
        assert history.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        (row,) = history.runs()
        assert row.run.id == "r1" and row.counts == {
            "compatible": 2,
            "incompatible": 1,
            "unsatisfiable": 0,
            "error": 0,
            "environment": 0,
        }


def test_a_schema_2_database_migrates_to_compact_rows_and_keeps_every_value(tmp_path):
    """Schema 3 keeps one row per cell and night (the probes inside it, repeated texts once): a
    file written with one row per probe reads back the same snapshot after the migration."""
    import sqlite3

    from torch_matrix.report.diff import CellState, ProbeState
    from torch_matrix.world.history_schema import MIGRATIONS

    db = tmp_path / "v2.sqlite"
    connection = sqlite3.connect(db)
    connection.executescript(MIGRATIONS[0] + MIGRATIONS[1] + "PRAGMA user_version = 2;")
    for seq, day in ((1, "01"), (2, "02")):
        connection.execute(
            "INSERT INTO runs (seq, id, date, spec, imported_at, cells, compatible, incompatible,"
            " unsatisfiable, error) VALUES (?, ?, ?, 'nightly', 'x', 2, 1, 1, 0, 0)",
            (seq, f"r{seq}", f"2026-11-{day}T00:00:00+00:00"),
        )
        connection.executemany(
            "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (seq, "t2.5.1-py3.11", "compatible", "", "", "torch==2.5.1 numpy<2", "3.11"),
                (
                    seq,
                    "t2.6.0-py3.11",
                    "incompatible",
                    "checkpoint failed",
                    "checkpoint",
                    "torch==2.6.0",
                    "3.11",
                ),
            ],
        )
        connection.executemany(
            "INSERT INTO probes VALUES (?, ?, ?, ?, ?, ?)",
            [
                (seq, "t2.5.1-py3.11", "checkpoint", "pass", "", ""),
                (seq, "t2.5.1-py3.11", "cuda", "skip", "no CUDA device", ""),
                (
                    seq,
                    "t2.6.0-py3.11",
                    "checkpoint",
                    "fail",
                    f"Weights only {day}",
                    "torch.load(p)",
                ),
                (seq, "t2.6.0-py3.11", "cuda", "skip", "no CUDA device", ""),
            ],
        )
    connection.commit()
    connection.close()
    with open_history(db, create=False) as history:
        assert history.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {row[0] for row in history.db.execute("SELECT name FROM sqlite_master")}
        assert "probes" not in tables and {"cells", "texts"} <= tables
        # schema 4: no index by cell (each night's rows were spread over its pages)
        assert "cells_by_cell" not in tables
        assert history.db.execute("SELECT count(*) FROM cells").fetchone()[0] == 4
        rows = history.runs()
        assert [row.run.id for row in rows] == ["r1", "r2"]
        snapshot = history.snapshot(rows[1])
        assert snapshot.cells == {
            "t2.5.1-py3.11": CellState(
                cell="t2.5.1-py3.11",
                verdict="compatible",
                requirements=("torch==2.5.1", "numpy<2"),
                python="3.11",
                probes={
                    "checkpoint": ProbeState("pass"),
                    "cuda": ProbeState("skip", "no CUDA device"),
                },
            ),
            "t2.6.0-py3.11": CellState(
                cell="t2.6.0-py3.11",
                verdict="incompatible",
                reason="checkpoint failed",
                failing=("checkpoint",),
                requirements=("torch==2.6.0",),
                python="3.11",
                probes={
                    "checkpoint": ProbeState("fail", "Weights only 02", "torch.load(p)"),
                    "cuda": ProbeState("skip", "no CUDA device"),
                },
            ),
        }
        assert history.snapshot(rows[0]).cells["t2.6.0-py3.11"].probes["checkpoint"].message == (
            "Weights only 01"
        )
        rates = history.pass_rates("nightly", 30)
        assert (
            rates[("t2.6.0-py3.11", "checkpoint")].passed,
            rates[("t2.6.0-py3.11", "checkpoint")].runs,
        ) == (0, 2)
        assert (
            rates[("t2.5.1-py3.11", "checkpoint")].passed,
            rates[("t2.5.1-py3.11", "checkpoint")].runs,
        ) == (2, 2)
        # the repeated texts are stored once: 2 reasons, 2 requirement lists, 1 name list, ...
        texts = history.db.execute("SELECT count(*) FROM texts").fetchone()[0]
        assert texts < 4 * 5


def test_a_merged_results_json_is_the_same_run_as_its_cells(tmp_path):
    results = night(20, {"2.6.0": "training_step"})
    run_dir = write_night(tmp_path / "a", results)
    merged = write_merged(results, tmp_path / "b" / "results.json")
    db = tmp_path / "h.sqlite"
    with open_history(db) as history:
        first = run_ref_for(load_results(run_dir).results, run_dir, commit="")
        assert history.import_run(load_results(run_dir).results, first)
        again = run_ref_for(load_results(merged).results, merged, spec="nightly", commit="")
        assert again.id == first.id
        assert not history.import_run(load_results(merged).results, again)
        assert len(history.runs()) == 1


def test_run_name_follows_the_results_layout(tmp_path):
    (tmp_path / "root" / "nightly" / "cells").mkdir(parents=True)
    assert run_name_of(tmp_path / "root") == "nightly"
    assert run_name_of(tmp_path / "root" / "nightly") == "nightly"
    assert run_name_of(tmp_path / "root" / "nightly" / "cells") == "nightly"


# ---------------------------------------------------------------------------- diff over nights


@pytest.fixture
def three_nights(tmp_path):
    """Night 20: 2.6.0 fails numpy_interop. Night 21: 2.4.1 breaks training_step, 2.6.0 still fails.
    Night 22: 2.6.0 is fixed, 2.4.1 still broken, 2.5.1 is gone, 2.7.0 appears failing install_sanity."""
    db = tmp_path / "h.sqlite"
    nights = [
        night(20, {"2.6.0": "numpy_interop"}),
        night(21, {"2.6.0": "numpy_interop", "2.4.1": "training_step"}),
        night(
            22,
            {"2.4.1": "training_step", "2.7.0": "install_sanity"},
            cells=("2.4.1", "2.6.0", "2.7.0"),
        ),
    ]
    dirs = []
    for day, results in zip((20, 21, 22), nights):
        run_dir = write_night(tmp_path / f"night{day}", results)
        assert cli("import", str(run_dir), "--db", str(db), "--commit", f"c{day}") == 0
        dirs.append(run_dir)
    return db, dirs


def test_default_diff_compares_the_newest_run_with_the_one_before(three_nights, capsys):
    db, _ = three_nights
    capsys.readouterr()
    assert cli("diff", "--db", str(db), "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["old"]["commit"] == "c21" and data["new"]["commit"] == "c22"
    assert [c["cell"] for c in data["fixed"]] == ["t2.6.0-py3.11"]
    assert [c["cell"] for c in data["appeared"]] == ["t2.7.0-py3.11"]
    assert [c["cell"] for c in data["vanished"]] == ["t2.5.1-py3.11"]
    assert data["broken"] == [] and data["other"] == []
    assert [(c["cell"], c["probe"], c["old"], c["new"]) for c in data["probe_changes"]] == [
        ("t2.6.0-py3.11", "numpy_interop", FAIL, PASS)
    ]
    # 2.4.1 has failed since night 21: not new. 2.7.0 is new tonight.
    assert [(f["cell"], f["probe"], f["first_run"]["commit"]) for f in data["new_failures"]] == [
        ("t2.7.0-py3.11", "install_sanity", "c22")
    ]


def test_diff_of_two_run_ids_names_the_first_run_each_failure_appeared_in(three_nights, capsys):
    db, _ = three_nights
    with open_history(db, create=False) as history:
        first, _, last = (row.run.id for row in history.runs())
    capsys.readouterr()
    assert cli("diff", first[:6], last, "--db", str(db), "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    found = {(f["cell"], f["probe"]): f["first_run"]["commit"] for f in data["new_failures"]}
    assert found == {
        ("t2.4.1-py3.11", "training_step"): "c21",
        ("t2.7.0-py3.11", "install_sanity"): "c22",
    }
    assert [c["cell"] for c in data["broken"]] == ["t2.4.1-py3.11"]


def test_diff_of_results_directories_works_with_or_without_history(three_nights, tmp_path, capsys):
    db, dirs = three_nights
    capsys.readouterr()
    assert (
        cli("diff", str(dirs[0]), str(dirs[2]), "--db", str(tmp_path / "none.sqlite")) == 2
    )  # --db must exist
    assert "no history database here" in capsys.readouterr().err
    assert cli("diff", str(dirs[1]), str(dirs[2]), "--db", str(db), "--format", "markdown") == 0
    text = capsys.readouterr().out
    assert "### Fixed (1)" in text and "| t2.6.0-py3.11 | incompatible -> compatible |" in text
    # A new directory that is not in the history yet: compared with the newest stored run.
    tonight = write_night(
        tmp_path / "night23",
        night(
            23,
            {"2.4.1": "training_step", "2.6.0": "training_step"},
            cells=("2.4.1", "2.6.0", "2.7.0"),
        ),
    )
    assert cli("diff", str(tonight), "--db", str(db), "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["old"]["commit"] == "c22"
    assert [(c["cell"], c["old"], c["new"]) for c in data["broken"]] == [
        ("t2.6.0-py3.11", "compatible", "incompatible")
    ]
    assert [c["cell"] for c in data["fixed"]] == ["t2.7.0-py3.11"]


def test_issue_plan_opens_one_issue_per_new_failure_and_closes_what_passes(
    three_nights, tmp_path, capsys
):
    db, _ = three_nights
    issues = tmp_path / "issues.json"
    assert (
        cli("diff", "--db", str(db), "--issues", str(issues), "--run-url", "https://ci/run/1") == 0
    )
    plan = json.loads(issues.read_text())
    assert [item["title"] for item in plan["open"]] == [
        "torch-matrix: install_sanity fails in t2.7.0-py3.11"
    ]
    body = plan["open"][0]["body"]
    assert "torch-matrix run -s 'matrix(t2.7.0-py3.11)' -- --redo" in body
    assert (
        "torch==2.7.0" in body
        and "import torch  # install_sanity" in body
        and "https://ci/run/1" in body
    )
    assert "torch-matrix: numpy_interop fails in t2.6.0-py3.11" in plan["close"]  # fixed tonight
    assert (
        "torch-matrix: training_step fails in t2.4.1-py3.11" not in plan["close"]
    )  # still failing


def test_history_lists_runs_and_flaky_pass_rates(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    for day in range(1, 7):  # 2.5.1's training_step fails every other night
        failing = {"2.5.1": "training_step"} if day % 2 else {}
        assert (
            cli(
                "import",
                str(write_night(tmp_path / f"n{day}", night(day, failing))),
                "--db",
                str(db),
            )
            == 0
        )
    capsys.readouterr()
    assert cli("history", "--db", str(db), "--last", "4") == 0
    out = capsys.readouterr().out
    assert out.count("nightly ") >= 4 and "4 run(s) shown" in out
    assert "t2.5.1-py3.11  training_step  2/4 (50%)" in out
    assert cli("history", "--db", str(db), "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)["nightly"]
    assert len(data["runs"]) == 6
    rate = next(
        r
        for r in data["pass_rates"]
        if r["cell"] == "t2.5.1-py3.11" and r["probe"] == "training_step"
    )
    assert (rate["passed"], rate["runs"]) == (3, 6)


# ---------------------------------------------------------------------------- bad input


def test_bad_databases_get_one_line(tmp_path, capsys):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE t (x)")
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    for path, words in (
        (garbage, "not a torch-matrix history database"),
        (foreign, "not a torch-matrix history database"),
        (newer, "newer than this tool understands"),
        (tmp_path / "missing.sqlite", "no history database here"),
    ):
        assert cli("history", "--db", str(path)) == 2
        err = capsys.readouterr().err
        assert err.startswith("torch-matrix: error: ") and words in err and str(path) in err
        assert "Traceback" not in err and err.count("\n") <= 2
    before = garbage.read_bytes()
    assert cli("import", str(GOLDEN / "cells"), "--db", str(garbage)) == 2
    assert garbage.read_bytes() == before  # nothing lost


def test_an_unknown_run_id_is_named(three_nights, capsys):
    db, _ = three_nights
    assert cli("diff", "zzzz9999", "--db", str(db)) == 2
    err = capsys.readouterr().err
    assert "zzzz9999: neither a results directory nor a run id" in err


def test_history_commands_run_as_fresh_processes(three_nights):
    db, _ = three_nights
    done = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "diff", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "fixed (1):" in done.stdout and "t2.7.0-py3.11  install_sanity" in done.stdout


# ---------------------------------------------------------------------------- pure properties

RUNS = [RunRef(id=f"r{i}", date=f"2026-11-{i + 1:02d}") for i in range(30)]


@given(st.lists(st.sampled_from([True, False, None]), max_size=30))
def test_streak_start_is_the_first_failing_run_after_the_last_pass(flags):
    series = list(zip(RUNS, flags))
    start = streak_start(series)
    evidence = [(run, flag) for run, flag in series if flag is not None]
    if not evidence or not evidence[-1][1]:
        assert start is None
        return
    last_pass = max((i for i, (_, flag) in enumerate(evidence) if not flag), default=-1)
    assert start == evidence[last_pass + 1][0]


@given(
    st.lists(st.sampled_from([PASS, FAIL, SKIP, "error", "crash", None]), max_size=40),
    st.integers(min_value=1, max_value=40),
)
def test_pass_rate_counts_only_evidence_in_the_window(statuses, last):
    rate = pass_rate(statuses, last)
    window = statuses[-last:]
    assert rate.nights == len(window)
    assert rate.passed == window.count(PASS)
    assert rate.runs == sum(1 for s in window if s in (PASS, FAIL, "error", "crash", "timeout"))
    assert rate.flaky == (0 < rate.passed < rate.runs)


def _snapshot(run: str, verdicts: dict[str, tuple[str, tuple[str, ...]]]) -> Snapshot:
    return Snapshot(
        RunRef(run),
        {
            cell: CellState(
                cell, verdict, failing=failing, probes={p: ProbeState(FAIL) for p in failing}
            )
            for cell, (verdict, failing) in verdicts.items()
        },
    )


_cells = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]),
    st.sampled_from([("compatible", ()), ("incompatible", ("p",)), ("error", ())]),
)


@given(_cells, _cells)
def test_diff_is_quiet_on_itself_and_swaps_when_reversed(old_cells, new_cells):
    old, new = _snapshot("old", old_cells), _snapshot("new", new_cells)
    assert diff_snapshots(new, new).quiet and not diff_snapshots(new, new).new_failures
    forward, backward = diff_snapshots(old, new), diff_snapshots(new, old)
    assert {c.cell for c in forward.appeared} == {c.cell for c in backward.vanished}
    assert {c.cell for c in forward.fixed} <= {c.cell for c in backward.broken}
    assert {(f.cell, f.probe) for f in forward.new_failures} == {
        (cell, "p")
        for cell, (verdict, _) in new_cells.items()
        if verdict == "incompatible" and old_cells.get(cell, ("",))[0] != "incompatible"
    }


def test_snapshot_keeps_required_failures_only():
    cell = make_cell(
        probes=("install_sanity", "torch_compile"), required_probes=("install_sanity",)
    )
    result = make_result(
        cell,
        probes=[
            make_probe("install_sanity", FAIL, "boom"),
            make_probe("torch_compile", FAIL, "not required"),
        ],
    )
    state = snapshot_of([result], RunRef("x")).cells[cell.id]
    assert state.failing == ("install_sanity",)
    assert (
        diff_render.issue_title(cell.id, "install_sanity")
        == f"torch-matrix: install_sanity fails in {cell.id}"
    )


def test_open_history_refuses_a_directory(tmp_path):
    with pytest.raises(UserError, match="is a directory"):
        open_history(tmp_path)


# ---------------------------------------------------------------------------- pins quote the history


def test_exclusion_confidence_is_the_failure_rate_of_its_cells_and_probes():
    from torch_matrix.judge.snapshot import PassRate
    from torch_matrix.report.diff import exclusion_confidence
    from torch_matrix.pins.model import Exclusion

    steady = Exclusion("torch", "1.12.0", probes=("lazy_cuda_init",), cells=("a", "b"))
    flaky = Exclusion("torch", "2.6.0", probes=("training_step",), cells=("c",))
    paired = Exclusion("torchvision", "0.13.0", paired_with="torch 1.12.0")
    unseen = Exclusion("numpy", "2.2.6", probes=("numpy_interop",), cells=("d",))
    rates = {
        ("a", "lazy_cuda_init"): PassRate(0, 30, 30),
        ("b", "lazy_cuda_init"): PassRate(0, 10, 30),
        ("c", "training_step"): PassRate(1, 5, 5),
    }
    assert exclusion_confidence([steady, flaky, paired, unseen], rates) == [
        ("torch 1.12.0", "lazy_cuda_init failed 40/40 cell-night(s)"),
        ("torch 2.6.0", "training_step failed 4/5 cell-night(s) (flaky: passed 1; confidence 80%)"),
    ]


def test_pins_quote_the_pass_rate_of_each_exclusion(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    for day in range(1, 6):  # 2.6.0's training_step fails on 4 of 5 nights, the last one included
        failing = {} if day == 2 else {"2.6.0": "training_step"}
        last = write_night(tmp_path / f"n{day}", night(day, failing))
        assert cli("import", str(last), "--db", str(db)) == 0
    capsys.readouterr()
    assert (
        cli(
            "pins",
            str(last),
            "--no-coverage",
            "--out",
            str(tmp_path / "pins"),
            "--history",
            str(db),
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "torch!=2.6.0" in out
    assert "History over the last 30 night(s) of 'nightly'" in out
    assert (
        "torch 2.6.0: training_step failed 4/5 cell-night(s) (flaky: passed 1; confidence 80%)"
        in out
    )


@pytest.mark.parametrize("cells_per_query", [500, 1, 2])
def test_sql_pass_rates_agree_with_the_pure_function(tmp_path, monkeypatch, cells_per_query):
    """And the per-cell queries (one per run and chunk of cells, by the primary key) read every
    cell whatever the chunk size."""
    import random

    from torch_matrix.world import history as history_module

    monkeypatch.setattr(history_module, "CELLS_PER_QUERY", cells_per_query)

    rng = random.Random(3)
    db = tmp_path / "h.sqlite"
    with open_history(db) as history:
        for day in range(1, 13):
            failing = {
                torch: rng.choice(PROBES)
                for torch in ("2.4.1", "2.5.1", "2.6.0")
                if rng.random() < 0.4
            }
            cells = (
                ("2.4.1", "2.5.1", "2.6.0") if day % 5 else ("2.4.1", "2.6.0")
            )  # 2.5.1 absent some nights
            results = night(day, failing, cells=cells)
            history.import_run(results, run_ref_for(results, tmp_path / "nightly", commit=""))
        for window in (1, 4, 12, 30):
            _, series = history.probe_series("nightly", window)
            assert history.pass_rates("nightly", window) == {
                key: pass_rate(statuses) for key, statuses in series.items()
            }
            last = history.last_statuses("nightly", list(series), window)
            assert last == {
                key: next(s for s in reversed(statuses) if s is not None)
                for key, statuses in series.items()
            }


_night_statuses = st.lists(
    st.tuples(*[st.sampled_from([PASS, FAIL, SKIP, "error"])] * 4), min_size=1, max_size=6
)


@settings(max_examples=25, deadline=None)
@given(_night_statuses, st.integers(min_value=1, max_value=7))
def test_pass_rates_from_compact_rows_equal_pass_rate_over_each_series(nights, last):
    """SQLite counts distinct rows (schema 3) the way ``pass_rate`` counts a probe's statuses."""
    import tempfile

    with (
        tempfile.TemporaryDirectory() as scratch,
        open_history(Path(scratch) / "h.sqlite") as history,
    ):
        for day, statuses in enumerate(nights):
            results = [
                make_result(
                    make_cell(torch=torch, probes=("a", "b")),
                    probes=[make_probe("a", first), make_probe("b", second)],
                    finished_at=f"2026-11-{day + 1:02d}T00:00:00+00:00",
                )
                for torch, first, second in (
                    ("2.5.1", statuses[0], statuses[1]),
                    ("2.6.0", statuses[2], statuses[3]),
                )
            ]
            history.import_run(results, run_ref_for(results, Path(scratch), spec="n", commit=""))
        _, series = history.probe_series("n", last)
        assert len(series) == 4
        assert history.pass_rates("n", last) == {
            key: pass_rate(statuses, last) for key, statuses in series.items()
        }
