"""The shortcuts that make report/pins fast over thousands of cells must not change any output."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.world import results, resultschema
from torch_matrix.vocab.records import INSTALL_ERROR, UNSATISFIABLE, CellResult
from tests.factories import make_probe, make_result
from tests.test_results import full_result
from torch_matrix.judge import stored


def as_written(data: dict) -> dict:
    """``data`` as the tool writes it: judged, its verdict stored (``judge.stored``)."""
    bare = CellResult.from_json({key: value for key, value in data.items() if key != "verdict"})
    return stored.judged(bare).to_json()


def _written_as_before(results_list: list[CellResult], path: Path) -> str:
    """write_merged as it was: every cell through to_json()."""
    results.write_merged(results_list, path)
    return path.read_text(encoding="utf-8")


def _load(tmp_path: Path, datas: list[dict], run: str = "run") -> results.LoadedResults:
    cells = results.cells_dir(tmp_path / "in", run)
    cells.mkdir(parents=True)
    for data in datas:
        (cells / f"{data['cell']['id']}.json").write_text(
            json.dumps(data, indent=2), encoding="utf-8"
        )
    return results.load_results(tmp_path / "in")


CANONICAL = [  # as the tool writes them: each with its verdict (judge.stored)
    stored.judged(result)
    for result in (
        full_result(),
        make_result(status=UNSATISFIABLE, message="no wheel"),
        make_result(status=INSTALL_ERROR, probes=[]),
        make_result(probes=[make_probe("x", observed=0, expected=False)]),
    )
]


@pytest.mark.parametrize("result", CANONICAL)
def test_what_to_json_writes_is_canonical(result):
    assert resultschema.is_canonical_json(result.to_json())
    assert resultschema.is_canonical_json(json.loads(json.dumps(result.to_json())))


def _variant(mutate):
    data = full_result().to_json()
    mutate(data)
    return data


NOT_CANONICAL = [
    _variant(lambda d: d.update(schema_version=1.0)),
    _variant(lambda d: d["install"].update(attempts=1.0)),
    _variant(lambda d: d["timings"].update(total=12)),  # an int: to_json writes 12.0
    _variant(lambda d: d["timings"].update(total=1.23456)),  # to_json rounds to 3 places
    _variant(lambda d: d["probes"][0].update(duration_s=0)),
    _variant(lambda d: d["probes"][0].update(duration_s=0.123456)),
    _variant(lambda d: d["probes"][0].update(traceback="")),  # to_json leaves empty ones out
    _variant(lambda d: d["probes"][0].update(observed=None)),
    _variant(lambda d: d["probes"][0].update(evidence={})),
    _variant(lambda d: d.update(cell=dict(reversed(list(d["cell"].items()))))),  # key order
    _variant(lambda d: d["probes"].__setitem__(1, dict(reversed(list(d["probes"][1].items()))))),
    {key: value for key, value in reversed(list(full_result().to_json().items()))},
]


@pytest.mark.parametrize("data", NOT_CANONICAL)
def test_anything_to_json_would_change_is_not_canonical(data):
    assert resultschema.is_valid_cell_result(data)  # valid, so it loads; but it must be rewritten
    assert json.dumps(CellResult.from_json(data).to_json()) != json.dumps(data)
    assert not resultschema.is_canonical_json(data)


def test_write_merged_from_loaded_dicts_writes_the_same_bytes(tmp_path):
    datas = [result.to_json() for result in CANONICAL[:3]] + copy.deepcopy(NOT_CANONICAL[:6])
    for number, data in enumerate(datas):
        data["cell"]["id"] = f"cell{number}"
    datas[:3] = [as_written(data) for data in datas[:3]]  # judged under their new ids
    loaded = _load(tmp_path, datas)
    assert len(loaded.results) == len(datas) and not loaded.problems
    fast = results.write_merged(loaded.results, tmp_path / "fast.json", loaded).read_text(
        encoding="utf-8"
    )
    assert fast == _written_as_before(loaded.results, tmp_path / "slow.json")
    # the canonical ones were written from the loaded dicts, the others converted again
    assert sum(loaded.json_of(result) is not None for result in loaded.results) == 3


def test_json_of_only_answers_for_the_loaded_object(tmp_path):
    loaded = _load(tmp_path, [stored.judged(full_result()).to_json()])
    (result,) = loaded.results
    assert loaded.json_of(result) is not None
    assert (
        loaded.json_of(CellResult.from_json(result.to_json())) is None
    )  # equal but another object


def test_corrupt_merged_file_is_still_reported_by_name(tmp_path):
    loaded = _load(tmp_path, [full_result().to_json()])
    merged = results.write_merged(
        loaded.results, tmp_path / "in" / "downloaded" / results.MERGED_NAME, loaded
    )
    merged.write_text(merged.read_text(encoding="utf-8")[:-10], encoding="utf-8")
    again = results.load_results(tmp_path / "in")
    assert len(again.results) == 1
    assert [problem.split(":")[0] for problem in again.problems] == [str(merged)]
    assert again.skipped == [str(merged)]


def test_a_changed_copy_in_the_merged_file_is_still_validated(tmp_path):
    loaded = _load(tmp_path, [full_result().to_json()])
    merged = results.write_merged(
        loaded.results, tmp_path / "in" / "downloaded" / results.MERGED_NAME, loaded
    )
    data = json.loads(merged.read_text(encoding="utf-8"))
    data["cells"][0]["install"]["status"] = "maybe"
    merged.write_text(json.dumps(data), encoding="utf-8")
    again = results.load_results(tmp_path / "in")
    assert len(again.results) == 1
    assert again.problems and again.problems[0].startswith(
        f"{merged}[0]: invalid cell result at install/status"
    )


def test_report_and_pins_import_neither_jsonschema_nor_tabulate_unless_needed(tmp_path):
    """Import time counts over 2,000 cells too: jsonschema only for an invalid file, tabulate for odd text."""
    code = (
        "import sys, torch_matrix.cli.report, torch_matrix.cli.pins, torch_matrix.world.results as r, torch_matrix.report.terminal as t; "
        "t.render_text(r.load_results(sys.argv[1]).results); "
        "print('jsonschema' in sys.modules, 'tabulate' in sys.modules)"
    )
    loaded = _load(tmp_path, [full_result().to_json()])
    assert loaded.results
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "in")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == "False False"


# ------------------------------------------------------------------------------ report tables

_PIECES = [
    "a",
    " ",
    "Z",
    "1",
    "True",
    "False",
    "3.5",
    "-1e5",
    "nan",
    "✓",
    "✗",
    "–",
    "!",
    "?",
    "-",
    "x y",
    "",
]
_NOT_NARROW = ["é", "中", "\n", "\t", "\x1b[31m", "⚠️"]


def _random_table(rng, pieces):
    columns = rng.randint(1, 5)
    headers = ["".join(rng.choices(pieces, k=rng.randint(0, 3))) for _ in range(columns)]
    rows = [
        ["".join(rng.choices(pieces, k=rng.randint(0, 4))) for _ in range(columns)]
        for _ in range(rng.randint(1, 4))
    ]
    return headers, rows


def test_simple_table_is_exactly_tabulate_simple():
    import random

    from tabulate import tabulate

    from torch_matrix.report.terminal import _simple_table

    rng = random.Random(6)
    used = 0
    for _ in range(3000):
        headers, rows = _random_table(
            rng, _PIECES + _NOT_NARROW[:1] if rng.random() < 0.1 else _PIECES
        )
        fast = _simple_table(rows, headers)
        if fast is None:
            continue
        used += 1
        assert fast == tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True), (
            headers,
            rows,
        )
    assert used > 2000


@pytest.mark.parametrize("odd", _NOT_NARROW)
def test_simple_table_leaves_wide_or_multiline_text_to_tabulate(odd):
    from torch_matrix.report.terminal import _simple_table

    assert _simple_table([["a", f"x{odd}"]], ["h1", "h2"]) is None
    assert _simple_table([["a", "b"]], ["h1", f"h{odd}"]) is None
    assert _simple_table([["a", "b"]], ["h1", "h2"]) is not None


# ------------------------------------------------------------------------------ reading


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_broken_file_is_placed_by_line_and_column_whatever_its_newlines(tmp_path, newline):
    cells = results.cells_dir(tmp_path, "run")
    cells.mkdir(parents=True)
    broken = cells / "a.json"
    broken.write_bytes(newline.join(["{", '  "schema": "x",', "  oops", "}"]).encode())
    loaded = results.load_results(tmp_path)
    assert loaded.problems == [f"{broken}: not JSON (line 3 column 3)"]


def test_a_valid_file_with_crlf_newlines_loads(tmp_path):
    cells = results.cells_dir(tmp_path, "run")
    cells.mkdir(parents=True)
    result = full_result()
    text = json.dumps(result.to_json(), indent=2).replace("\n", "\r\n")
    (cells / f"{result.cell.id}.json").write_bytes(text.encode())
    loaded = results.load_results(tmp_path)
    assert loaded.results == [result] and not loaded.problems


def test_the_collector_is_paused_while_loading_and_back_on_after(tmp_path, monkeypatch):
    import gc

    seen = []
    real = results._load_files
    monkeypatch.setattr(
        results, "_load_files", lambda files: seen.append(gc.isenabled()) or real(files)
    )
    assert gc.isenabled()
    _load(tmp_path, [full_result().to_json()])
    assert seen == [False] and gc.isenabled()
    with results.cyclic_gc_paused():
        with results.cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # the inner one leaves it to the outer
    assert gc.isenabled()
    with pytest.raises(ValueError), results.cyclic_gc_paused():
        raise ValueError
    assert gc.isenabled()


# ------------------------------------------------------------------------------ a report run in place


def _root_with_merged(tmp_path, count=4, run="default"):
    """Cells in <root>/<run>/cells and a merged copy of them downloaded beside, <root>/downloaded/results.json
    (a report's own results.json, beside or above its cells, is never read back: test_faults).
    "default" (the run name without a spec) sorts before "downloaded", so the cells are loaded first."""
    datas = []
    for number in range(count):
        data = full_result().to_json()
        data["cell"]["id"] = f"cell{number}"
        datas.append(as_written(data))
    loaded = _load(tmp_path, datas, run)
    merged = results.write_merged(
        loaded.results, tmp_path / "in" / "downloaded" / results.MERGED_NAME, loaded
    )
    return tmp_path / "in", merged


def _load_whole(root, monkeypatch):
    """The merged file read as one JSON document (the path every other layout takes)."""
    with monkeypatch.context() as patch:
        patch.setattr(results, "_merged_items_by_line", lambda path, known: None)
        return results.load_results(root)


def _same(left, right):
    assert left.results == right.results
    assert left.problems == right.problems and left.skipped == right.skipped


def test_own_merged_file_read_back_line_by_line_gives_what_reading_it_whole_gives(
    tmp_path, monkeypatch
):
    root, merged = _root_with_merged(tmp_path)
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(
        results.json, "loads", lambda text, *a, **k: parsed.append(len(text)) or real_loads(text)
    )
    fast = results.load_results(root)
    assert len(parsed) == 4  # the four cell files; the merged copies were recognised by their bytes
    monkeypatch.undo()
    _same(fast, _load_whole(root, monkeypatch))
    # and written back unchanged, from the lines loading already made
    again = results.write_merged(fast.results, tmp_path / "again.json", fast)
    assert again.read_bytes() == merged.read_bytes()
    assert all(fast.merged_line_of(result) is not None for result in fast.results)


def test_merged_file_found_before_the_cells_is_read_whole_as_before(tmp_path, monkeypatch):
    root, _ = _root_with_merged(tmp_path, run="shard-1")  # "shard-1" sorts after "downloaded"
    _same(results.load_results(root), _load_whole(root, monkeypatch))


@pytest.mark.parametrize(
    "edit",
    [
        lambda lines: lines.__setitem__(
            2, lines[2].replace('"installed"', '"maybe"')
        ),  # invalid: named
        lambda lines: lines.__setitem__(
            2, lines[2].replace('"cell2"', '"cell9"')
        ),  # a result only here
        lambda lines: lines.__setitem__(
            2, lines[2].replace('"2026-11-21T08:00:10+00:00"', '"2026-11-22T08:00:10+00:00"')
        ),  # newer here
        lambda lines: lines.__setitem__(
            2, lines[2][:-20]
        ),  # broken JSON: the whole file is reported
        lambda lines: lines.insert(2, ""),
        lambda lines: lines.__setitem__(
            0, lines[0].replace('"schema_version":1', '"schema_version":2')
        ),
        lambda lines: lines.__setitem__(1, lines[1] + " "),
    ],
)
def test_any_other_merged_content_is_read_as_before(tmp_path, monkeypatch, edit):
    """A changed, added, newer, broken or foreign line: the same results and problems as reading it whole."""
    root, merged = _root_with_merged(tmp_path)
    lines = merged.read_text(encoding="utf-8").split("\n")
    edit(lines)
    merged.write_text("\n".join(lines), encoding="utf-8")
    fast = results.load_results(root)
    _same(fast, _load_whole(root, monkeypatch))
    assert fast.problems or len(fast.results) in (4, 5)


def test_report_run_twice_in_place_rewrites_the_same_files(tmp_path, capsys):
    from torch_matrix import cli

    root, _ = _root_with_merged(tmp_path, count=3)
    (root / "downloaded" / results.MERGED_NAME).unlink()
    assert cli.main(["report", str(root)]) == 0
    first = {name: (root / name).read_bytes() for name in ("results.json", "summary.md")}
    first_out = capsys.readouterr().out
    assert cli.main(["report", str(root)]) == 0  # its own results.json is not read back
    assert {name: (root / name).read_bytes() for name in first} == first
    assert capsys.readouterr().out == first_out
