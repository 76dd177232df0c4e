"""One verdict per cell, computed once and stored in its result (``judge.stored``).

The cell is judged when its result is written; the table, the HTML, results.json, repro, the pins
and the history read that verdict. It counts only for the record and the run context it judged:
an edited file, a record changed in memory, or a run whose context changed is judged again, and
the report stores the new verdict in the cell's file and says which changed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix.judge import stored
from torch_matrix.judge import verdict as verdict_module
from torch_matrix.judge.causes import Attribution, Cause
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    ENVIRONMENT,
    INCOMPATIBLE,
    VERDICTS,
    Verdict,
    VerdictKind,
    verdict_of,
)
from torch_matrix.plan.counterfactual import plan_counterfactuals
from torch_matrix.vocab import layout
from torch_matrix.vocab.records import FAIL, PASS, CellResult
from torch_matrix.world.results import load_results, rejudged_lines, write_merged, write_result
from tests.factories import make_cell, make_probe, make_result
from tests.test_downstream import _missing_module_cell


@pytest.fixture
def no_judging(monkeypatch):
    """Judging a record fails the test: what runs under it reads stored verdicts only."""

    def refuse(result: CellResult) -> Verdict:
        raise AssertionError(f"{result.cell.id} was judged again")

    monkeypatch.setattr(verdict_module, "fresh_verdict", refuse)
    verdict_module._JUDGED.clear()


def _refuted_run(tmp_path: Path) -> tuple[Path, CellResult, CellResult]:
    """The issue's cell: alone, "add <module>" (environment); the run's counterfactual for it was
    unsatisfiable (no such distribution), so in the run it is a version finding (incompatible)."""

    def missing_extmod(result: CellResult) -> CellResult:
        probes = tuple(
            replace(p, message=p.message.replace("pkg_resources", "_torch_ext_helpers"))
            for p in result.probes
        )
        return replace(result, probes=probes)

    broken = missing_extmod(_missing_module_cell("1.13.1", "84.0.0", False, True))
    [planned] = plan_counterfactuals(broken)
    counterfactual = make_result(
        planned,
        status="unsatisfiable",
        message="× No solution found when resolving dependencies: because -torch-ext-helpers was "
        "not found in the package registry, your requirements are unsatisfiable.",
    )
    cells = layout.cells_dir(tmp_path / "run")
    write_result(broken, cells)  # as the cell's session writes it, before its counterfactual ran
    write_result(counterfactual, cells)
    return tmp_path / "run", broken, counterfactual


def _stored(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["verdict"]


def test_a_written_result_stores_its_verdict_and_readers_never_judge_it_again(
    tmp_path, no_judging, monkeypatch
):
    monkeypatch.undo()  # judging is allowed while writing
    passing = make_result(make_cell(torch="2.5.1"), probes=[make_probe("install_sanity")])
    failing = make_result(
        make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL, "boom")]
    )
    cells = layout.cells_dir(tmp_path / "run")
    for result in (passing, failing):
        write_result(result, cells)
    on_disk = _stored(layout.cell_file(cells, failing.cell.id))
    assert on_disk["kind"] == INCOMPATIBLE and on_disk["failing"] == ["install_sanity"]
    assert on_disk["of"] == stored.record_digest(failing.to_json())
    assert _stored(layout.cell_file(cells, passing.cell.id))["kind"] == COMPATIBLE

    def refuse(result: CellResult) -> Verdict:
        raise AssertionError(f"{result.cell.id} was judged again")

    monkeypatch.setattr(verdict_module, "fresh_verdict", refuse)
    verdict_module._JUDGED.clear()
    loaded = load_results(tmp_path / "run")
    assert loaded.problems == [] and loaded.rejudged == []
    kinds = {r.cell.id: verdict_of(r).kind for r in loaded.results}
    assert kinds == {passing.cell.id: COMPATIBLE, failing.cell.id: INCOMPATIBLE}
    merged = json.loads(write_merged(loaded.results, tmp_path / "results.json", loaded).read_text())
    assert {c["cell"]["id"]: c["verdict"]["kind"] for c in merged["cells"]} == kinds


def test_the_issues_cell_has_one_verdict_in_the_report_results_json_and_history(
    tmp_path, monkeypatch, capsys
):
    """Alone the cell is "environment" (what its file stores); the run's counterfactual refuted
    the advice. The report shows "incompatible", says why it differs from the file, stores it in
    results.json with its context, and leaves the cell's file as the cell wrote it. Read back as an
    artifact, that results.json gives the same verdict without judging anything."""
    from torch_matrix.cli import main as cli
    from torch_matrix.judge.snapshot import cell_state

    run, broken, _ = _refuted_run(tmp_path)
    cell_file = layout.cell_file(layout.cells_dir(run), broken.cell.id)
    assert _stored(cell_file)["kind"] == ENVIRONMENT
    before = cell_file.read_bytes()

    loaded = load_results(run)
    [item] = loaded.rejudged
    assert (item.cell, item.was, item.now, item.why) == (
        broken.cell.id,
        ENVIRONMENT,
        INCOMPATIBLE,
        "context",
    )
    assert rejudged_lines(loaded) == [
        f"{broken.cell.id}: incompatible ({cell_file} stored environment): judged in this run's "
        "context, which its result was judged without"
    ]
    assert cell_state(loaded.results[0]).verdict == INCOMPATIBLE  # what the history stores

    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "out"
    assert cli(["report", str(run), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"{broken.cell.id}: incompatible ({cell_file} stored environment)" in captured.err
    row = next(line for line in captured.out.splitlines() if broken.cell.id in line)
    assert "incompatible" in row and "environment" not in row
    assert cell_file.read_bytes() == before  # a reader never rewrites a cell's file
    line = next(
        c
        for c in json.loads((out / "results.json").read_text())["cells"]
        if c["cell"]["id"] == broken.cell.id
    )
    assert line["verdict"]["kind"] == INCOMPATIBLE and "refuted" in line["verdict"]["reason"]
    assert line["verdict"]["context"]["tests"]["refuted_by"]["module"] == "_torch_ext_helpers"

    artifact = tmp_path / "downloaded"
    artifact.mkdir()
    (artifact / "results.json").write_bytes((out / "results.json").read_bytes())
    monkeypatch.setattr(verdict_module, "fresh_verdict", lambda r: pytest.fail("judged again"))
    verdict_module._JUDGED.clear()
    again = load_results(artifact)
    assert again.problems == [] and again.rejudged == []
    by_id = {r.cell.id: r for r in again.results}
    assert verdict_of(by_id[broken.cell.id]).kind == INCOMPATIBLE


def test_an_edited_file_is_judged_again_and_named(tmp_path):
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    cells = layout.cells_dir(tmp_path / "run")
    path = write_result(result, cells)
    data = json.loads(path.read_text())
    assert data["verdict"]["kind"] == INCOMPATIBLE
    data["probes"][0]["status"] = PASS  # edited by hand; the stored verdict no longer fits
    data["probes"][0]["message"] = ""
    path.write_text(json.dumps(data, indent=2))
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert problem.startswith(str(path)) and "changed after its verdict (incompatible)" in problem
    assert "rerun the cell" in problem
    assert verdict_of(loaded.results[0]).kind == COMPATIBLE  # never the stale "incompatible"


@pytest.mark.parametrize(
    "damage",
    [
        lambda verdict: verdict.update(kind="maybe"),
        lambda verdict: verdict.pop("of"),
        lambda verdict: verdict.update(failing="install_sanity"),
    ],
    ids=["unknown kind", "no digest", "not a list"],
)
def test_a_damaged_stored_verdict_costs_the_verdict_never_the_cell(tmp_path, damage):
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    path = write_result(result, layout.cells_dir(tmp_path / "run"))
    data = json.loads(path.read_text())
    damage(data["verdict"])
    path.write_text(json.dumps(data, indent=2))
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert problem.startswith(f"{path}: its stored verdict is not valid (verdict")
    assert problem.endswith("judged again") and loaded.skipped == []
    [again] = loaded.results
    assert verdict_of(again).kind == INCOMPATIBLE and again.verdict["kind"] == INCOMPATIBLE


def test_a_value_the_loader_repairs_is_said_once_not_called_an_edit(tmp_path):
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    path = write_result(result, layout.cells_dir(tmp_path / "run"))
    data = json.loads(path.read_text())
    data["probes"][0]["duration_s"] = float("nan")  # another writer's NaN: the loader repairs it
    path.write_text(json.dumps(data))
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert "duration_s" in problem and "changed after its verdict" not in problem
    assert verdict_of(loaded.results[0]).kind == INCOMPATIBLE


def test_a_file_written_otherwise_but_meaning_the_same_keeps_its_verdict(tmp_path):
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    path = write_result(result, layout.cells_dir(tmp_path / "run"))
    data = json.loads(path.read_text())
    data["install"]["attempts"] = 1.0  # another writer's JSON: 1.0 for 1
    path.write_text(json.dumps(dict(reversed(list(data.items()))), indent=4))
    loaded = load_results(tmp_path / "run")
    assert loaded.problems == [] and loaded.rejudged == []
    kept = {key: value for key, value in data["verdict"].items() if key != "text"}
    assert loaded.results[0].verdict == kept  # the file's own digest stays with the file


def test_a_record_changed_in_memory_carries_no_stale_verdict():
    result = stored.judged(make_result(probes=[make_probe("install_sanity", FAIL)]))
    assert verdict_of(result).kind == INCOMPATIBLE
    fixed = replace(result, probes=(make_probe("install_sanity", PASS),))
    assert fixed.verdict == {} and verdict_of(fixed).kind == COMPATIBLE


def test_rejudge_judges_a_verdict_an_older_tool_stored_again_for_that_report(tmp_path, capsys):
    """A stored verdict stands on later loads (an older tool's rules included); ``report
    --rejudge`` shows every cell judged with this version's rules, names what changed, and leaves
    the cell's file as it is."""
    from torch_matrix.cli import main as cli

    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    older = result.with_verdict(
        {"kind": "compatible", "of": stored.record_digest(result.to_json()), "judged_by": "0.0.1"}
    )
    path = write_result(older, layout.cells_dir(tmp_path / "run"))
    before = path.read_bytes()
    assert verdict_of(load_results(tmp_path / "run").results[0]).kind == COMPATIBLE
    out = tmp_path / "out"
    assert cli(["report", str(tmp_path / "run"), "--rejudge", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (
        f"{result.cell.id}: incompatible ({path} stored compatible): judged again with this "
        "version's rules (--rejudge)" in err
    )
    [line] = json.loads((out / "results.json").read_text())["cells"]
    assert line["verdict"]["kind"] == INCOMPATIBLE and line["verdict"]["judged_by"] != "0.0.1"
    assert path.read_bytes() == before


def test_an_old_file_without_a_stored_verdict_is_judged_on_load_and_left_as_it_is(tmp_path):
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    data = result.to_json()
    data["schema_version"] = 6
    path = layout.cell_file(layout.cells_dir(tmp_path / "run"), result.cell.id)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    loaded = load_results(tmp_path / "run")
    assert loaded.problems == [] and loaded.rejudged == []
    assert loaded.results[0].verdict["kind"] == INCOMPATIBLE
    assert path.read_bytes() == before


_names = st.lists(st.sampled_from(["a", "tests", "install_sanity", "x y"]), unique=True, max_size=3)
_attributions = st.dictionaries(
    st.sampled_from(["tests", "install", "p"]),
    st.builds(
        Attribution,
        st.sampled_from(list(Cause)),
        kind=st.sampled_from(["", "numpy-abi", "code-fix"]),
        advice=st.text(max_size=20),
        requirement=st.sampled_from(["", "numpy<2", "setuptools<82"]),
        detail=st.text(max_size=10),
        fix=st.text(max_size=10),
    ),
    max_size=2,
)


@given(
    st.builds(
        Verdict,
        st.sampled_from(VERDICTS),
        failing=_names.map(tuple),
        missing=_names.map(tuple),
        reason=st.text(max_size=40),
        environment=_attributions,
        advice=_attributions,
        idle=_names.map(tuple),
        fixes=_attributions,
    )
)
def test_a_stored_verdict_reads_back_as_the_same_verdict(verdict):
    from torch_matrix.world.resultschema import is_valid_cell_result

    again = Verdict.from_json(json.loads(json.dumps(verdict.to_json())))
    assert again == verdict and isinstance(again.kind, VerdictKind)
    record = make_result().with_verdict({**verdict.to_json(), "of": "sha256:" + "0" * 64})
    assert is_valid_cell_result(record.to_json())


def test_the_cells_session_reads_its_verdict_beside_its_counterfactuals(tmp_path):
    """The session runs a cell's counterfactuals right after it: the line it prints already says
    what the report will (the advice refuted: incompatible), and what the file says alone."""
    from torch_matrix.run.sessions import in_light_of
    from torch_matrix.world.results import read_result

    run, broken, counterfactual = _refuted_run(tmp_path)
    cells = layout.cells_dir(run)
    before = layout.cell_file(cells, broken.cell.id).read_bytes()
    alone = read_result(layout.cell_file(cells, broken.cell.id))
    assert verdict_of(alone).kind == ENVIRONMENT
    cf = read_result(layout.cell_file(cells, counterfactual.cell.id))
    now, was = in_light_of(alone, [cf])
    assert verdict_of(now).kind == INCOMPATIBLE and "refuted" in verdict_of(now).reason
    assert was == ENVIRONMENT
    assert layout.cell_file(cells, broken.cell.id).read_bytes() == before
    assert in_light_of(alone, []) == (alone, "")


# ---------------------------------------------------------------------------- the file's own digest


def _written(tmp_path: Path, status: str = FAIL) -> Path:
    result = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", status)])
    return write_result(result, layout.cells_dir(tmp_path / "run"))


@given(
    st.builds(
        Verdict,
        st.sampled_from(VERDICTS),
        failing=_names.map(tuple),
        reason=st.text(max_size=40),
        environment=_attributions,
        fixes=_attributions,
    )
)
def test_a_cell_file_is_its_records_indented_json_with_the_verdicts_text_last(verdict):
    from torch_matrix.world.resultschema import (
        cell_file_text,
        is_valid_cell_result,
        written_with_verdict,
    )

    record = make_result().with_verdict({**verdict.to_json(), "of": "sha256:" + "1" * 64})
    text = cell_file_text(record.to_json())
    data = json.loads(text)
    assert list(data["verdict"])[-1] == "text"
    assert text == json.dumps(data, indent=2) + "\n"  # the layout every earlier version wrote
    assert {k: v for k, v in data["verdict"].items() if k != "text"} == record.verdict
    assert written_with_verdict(text, data) and is_valid_cell_result(data)


def test_an_unchanged_file_is_trusted_without_its_schema_check_or_record_digest(
    tmp_path, no_judging, monkeypatch
):
    from torch_matrix.world import results as results_module

    path = _written(tmp_path)
    monkeypatch.setattr(results_module, "describe_schema_error", lambda data: "checked")
    monkeypatch.setattr(results_module, "holds", lambda data, result: False)
    loaded = load_results(tmp_path / "run")
    assert loaded.problems == [] and loaded.skipped == []
    assert verdict_of(loaded.results[0]).kind == INCOMPATIBLE
    # the same file, one byte changed, is checked: the schema check runs (and here refuses it)
    path.write_text(path.read_text().replace('"fail"', '"pass"', 1))
    assert load_results(tmp_path / "run").results == []


def test_a_key_added_after_the_verdict_is_no_unchanged_file(tmp_path):
    """JSON keeps the last of two equal keys: one added after the verdict would override what
    the file's digest covered. Here it empties the probes: the record changed, judged again."""
    path = _written(tmp_path)
    text = path.read_text()
    path.write_text(text[: -len("\n}\n")] + ',\n  "probes": []\n}\n')
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert "changed after its verdict (incompatible)" in problem
    assert verdict_of(loaded.results[0]).kind == COMPATIBLE and loaded.results[0].probes == ()


def test_an_edited_stored_verdict_is_judged_again_and_named(tmp_path):
    path = _written(tmp_path)
    text = path.read_text()
    path.write_text(text.replace('"kind": "incompatible"', '"kind": "compatible"'))
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert problem == (
        f"{path}: its stored verdict (compatible, not incompatible) is not what its record "
        "judges: the file was edited after it was written; judged again"
    )
    assert verdict_of(loaded.results[0]).kind == INCOMPATIBLE


def _without_text(text: str) -> str:
    """The file as if its own digest had never been written (or was deleted by hand)."""
    head, _, _ = text.rpartition(',\n    "text": ')
    return head + "\n  }\n}\n"


def test_an_edited_verdict_whose_digest_was_deleted_too_is_judged_again(tmp_path):
    path = _written(tmp_path)
    edited = _without_text(path.read_text()).replace(
        '"kind": "incompatible"', '"kind": "compatible"'
    )
    path.write_text(edited)
    loaded = load_results(tmp_path / "run")
    [problem] = loaded.problems
    assert "(compatible, not incompatible)" in problem and "edited" in problem
    assert verdict_of(loaded.results[0]).kind == INCOMPATIBLE


def test_a_reworded_verdict_of_this_version_is_named_by_what_differs(tmp_path):
    path = _written(tmp_path)
    data = json.loads(path.read_text())
    data["verdict"]["reason"] = "nothing failed, honest"
    path.write_text(json.dumps(data, indent=4))
    [problem] = load_results(tmp_path / "run").problems
    assert "(incompatible, with another reason or cause)" in problem


def test_another_versions_verdict_in_a_reserialised_file_is_kept_quietly(tmp_path):
    """Its rules may differ from this version's: the layout alone never costs a stored verdict."""
    path = _written(tmp_path)
    data = json.loads(path.read_text())
    data["verdict"].update(judged_by="0.0.1", reason="an older version's words")
    path.write_text(json.dumps(data, indent=4))
    loaded = load_results(tmp_path / "run")
    assert (
        loaded.problems == [] and loaded.results[0].verdict["reason"] == "an older version's words"
    )


def test_the_writer_vouches_only_for_a_valid_record_with_its_own_verdict(tmp_path):
    """A record the schema refuses, or one carrying another record's verdict, is written without
    the file's digest, so the loader checks it in full: refused, or judged again."""
    cells = layout.cells_dir(tmp_path / "run")
    bogus = make_result(make_cell(torch="2.5.1"), probes=[make_probe("install_sanity", "bogus")])
    path = write_result(bogus, cells)
    assert '"text"' not in path.read_text()
    loaded = load_results(tmp_path / "run")
    assert loaded.results == [] and loaded.skipped == [str(path)]
    assert "invalid cell result at probes/0/status" in loaded.problems[0]
    path.unlink()
    passing = stored.judged(
        make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity")])
    )
    failing = make_result(make_cell(torch="2.6.0"), probes=[make_probe("install_sanity", FAIL)])
    path = write_result(failing.with_verdict(passing.verdict), cells)
    assert '"text"' not in path.read_text()
    loaded = load_results(tmp_path / "run")
    assert "changed after its verdict (compatible)" in loaded.problems[0]
    assert verdict_of(loaded.results[0]).kind == INCOMPATIBLE


def test_a_file_with_other_line_endings_keeps_its_verdict_quietly(tmp_path):
    path = _written(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))  # a Windows checkout
    loaded = load_results(tmp_path / "run")
    assert loaded.problems == [] and loaded.rejudged == []
    assert loaded.results[0].verdict["kind"] == INCOMPATIBLE
