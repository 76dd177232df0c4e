"""The report: tables, pivot, per-probe details, probe grid, Markdown summary, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from torch_matrix import cli
from torch_matrix.report import rows as report_rows
from torch_matrix.report import terminal as report
from torch_matrix.report import markdown as report_markdown
from torch_matrix.world import results
from torch_matrix.vocab.records import FAIL, INSTALL_ERROR, UNSATISFIABLE
from tests.factories import make_cell, make_probe, make_result

RESOLVER_MESSAGE = (
    "  × No solution found when resolving dependencies:\n"
    "  ╰─▶ Because torch==2.4.1 has no wheels with a matching Python ABI tag (e.g., `cp313`) "
    "and you require torch==2.4.1, we can conclude that your requirements are unsatisfiable. "
    + "hint: "
    * 60
)


def sample():
    """One cell of each verdict, across two torch versions, two pythons and two variants."""
    return [
        make_result(torch="2.5.1"),
        make_result(
            make_cell(torch="2.6.0", probes=("install_sanity", "training_step")),
            probes=[
                make_probe("install_sanity"),
                make_probe(
                    "training_step",
                    FAIL,
                    "loss is nan after 3 steps",
                    observed="nan",
                    expected="finite",
                    repro="python -c 'import torch; print(torch.ones(2).sum())'",
                ),
            ],
        ),
        make_result(torch="2.4.1", python="3.13", status=UNSATISFIABLE, message=RESOLVER_MESSAGE),
        make_result(
            torch="2.5.1", variant="cpu", status=INSTALL_ERROR, message="connection reset by peer"
        ),
    ]


def text_lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


# ------------------------------------------------------------------------------ terminal


def test_counts_line_counts_each_verdict():
    judged = report_rows.judge(sample())
    assert (
        report_rows.counts_line(judged)
        == "4 cells: 1 compatible, 1 incompatible, 1 unsatisfiable, 1 error"
    )
    assert report_rows.counts_line(judged, ["t9-py3.11"]).endswith("; 1 planned but missing")


def test_cell_table_has_one_row_per_cell_with_verdict_and_failing_probe():
    text = report.render_text(sample())
    row = text_lines(text, "t2.6.0-py3.11 ")[0]
    assert "✗ incompatible: training_step" in row
    assert "torch 2.6.0, torchvision 0.20.1" in row
    assert "12.5s" in row
    assert "✓ compatible" in text_lines(text, "t2.5.1-py3.11 ")[0]
    assert "– unsatisfiable" in text_lines(text, "t2.4.1-py3.13 ")[0]
    assert "! error" in text_lines(text, "t2.5.1-cpu-py3.11 ")[0]


def test_rows_are_ordered_by_torch_version_not_text():
    rows = report_rows.cell_rows(
        report_rows.judge([make_result(torch="2.10.0"), make_result(torch="2.9.1")])
    )
    assert [row[2] for row in rows] == ["2.9.1", "2.10.0"]


def test_extras_and_installed_versions_are_shown():
    result = make_result(
        extras={"numpy": "<2"},
        resolved={
            "torch": "2.5.1+cpu",
            "torchvision": "0.20.1",
            "numpy": "1.26.4",
            "filelock": "3.0",
        },
    )
    row = report_rows.cell_rows(report_rows.judge([result]))[0]
    assert row[5] == "numpy<2"
    assert row[6] == "torch 2.5.1+cpu, torchvision 0.20.1, numpy 1.26.4"


def test_installed_versions_carry_the_builds_local_labels_everywhere():
    # PyPI's wheels: the freeze says 2.14.1 / 0.29.2, the builds say +cu130 / +cu132 (install_sanity saw
    # them): a mismatched pair of CUDA builds must not read as a plain pair.
    from torch_matrix.report.html_page import render_html
    from torch_matrix.report.repro import render_bundle

    sanity = make_probe(
        "install_sanity",
        evidence={"versions": {"torch": "2.14.1+cu130", "torchvision": "0.29.2+cu132"}},
    )
    result = make_result(
        torch="2.14.1",
        torchvision="0.29.2",
        probes=[sanity],
        resolved={"torch": "2.14.1", "torchvision": "0.29.2"},
    )
    shown = "torch 2.14.1+cu130, torchvision 0.29.2+cu132"
    assert report_rows.cell_rows(report_rows.judge([result]))[0][6] == shown
    assert shown in report.render_text([result])
    assert shown in report_markdown.render_markdown_summary([result])
    assert shown in render_html([result])
    assert "torch 2.14.1+cu130" in render_bundle(result, [result])
    judged = dataclasses.replace(
        result,
        gpu={"build": {"torch": "2.14.1", "torch_cuda": "13.0"}},
        targets=(
            {
                "target": "V100 (sm_70), driver 580.82.07",
                "verdict": "native",
                "reason": "sm_70 in the build",
            },
        ),
    )
    assert report_rows.hardware_table(report_rows.judge([judged]))[1][0][1] == "2.14.1+cu130"
    # A probe's version of another release never replaces what the freeze says is installed.
    odd = make_result(
        probes=[make_probe("install_sanity", evidence={"versions": {"torch": "9.9.9+cpu"}})],
        resolved={"torch": "2.5.1", "torchvision": "0.20.1"},
    )
    assert (
        report_rows.cell_rows(report_rows.judge([odd]))[0][6] == "torch 2.5.1, torchvision 0.20.1"
    )


ADVICE = (
    "load with weights_only=False or torch.serialization.safe_globals / add_safe_globals(['argparse.Namespace']"
    " + your own classes pickled in the checkpoint) (torch.load's default changed)"
)


def _changed_default_run():
    """torch 2.5.1 loads the checkpoint; 2.6.0 refuses it with the plain call (the weights_only flip)."""
    probes = ("install_sanity", "checkpoint_roundtrip")
    old = make_result(make_cell(torch="2.5.1", probes=probes))
    flip = make_probe(
        "checkpoint_roundtrip",
        FAIL,
        "changed default: torch.load(path) refuses this checkpoint",
        evidence={"advice": ADVICE},
    )
    new = make_result(
        make_cell(torch="2.6.0", torchvision="0.21.0", probes=probes),
        probes=[make_probe("install_sanity"), flip],
    )
    return old, new


def test_a_compatible_cell_with_a_changed_default_is_marked_with_a_one_line_note():
    from torch_matrix.report.html_page import render_html

    old, new = _changed_default_run()
    text = report.render_text([old, new], grid=True)
    assert "2 cells: 2 compatible" in text
    assert (
        "✓ compatible ⚑ changed default: checkpoint_roundtrip"
        in text_lines(text, "t2.6.0-py3.11 ")[0]
    )
    assert "⚑" not in text_lines(text, "t2.5.1-py3.11 ")[0]  # no mark where nothing changed
    assert f"  ⚑ checkpoint_roundtrip in t2.6.0-py3.11: {ADVICE}" in text.splitlines()
    assert re.search(
        r"^checkpoint_roundtrip +pass +FAIL ⚑$", text, re.M
    )  # the grid says which FAIL it is
    pivot = report.render_text([old, new], pivot=True)
    assert (
        "✓ compatible ⚑" in text_lines(pivot, "2.6.0 ")[0]
        and "⚑" not in text_lines(pivot, "2.5.1 ")[0]
    )

    summary = report_markdown.render_markdown_summary([old, new])
    assert (
        "### ⚑ Changed defaults" in summary
        and f"- ⚑ checkpoint_roundtrip in t2.6.0-py3.11: {ADVICE}" in summary
    )
    assert "✅ compatible ⚑ changed default: checkpoint_roundtrip" in summary

    html = render_html([old, new])
    flagged = re.search(
        r'<a class="cell v-compatible"[^>]*data-cell="t2.6.0-py3.11"[^>]*>(.*?)</a>', html
    )
    assert flagged and 'class="flag"' in flagged.group(1) and "⚑" in flagged.group(1)
    plain = re.search(
        r'<a class="cell v-compatible"[^>]*data-cell="t2.5.1-py3.11"[^>]*>(.*?)</a>', html
    )
    assert plain and "flag" not in plain.group(1)
    assert (
        'id="changed-defaults"' in html
        and "⚑ checkpoint_roundtrip in t2.6.0-py3.11: load with" in html
    )


def test_details_explain_each_cell_that_did_not_pass():
    text = report.render_text(sample())
    details = text.split("Cells that did not pass:")[1]
    failing = text_lines(details, "training_step")[0]
    assert "fail" in failing and "loss is nan after 3 steps" in failing
    assert "'nan' vs 'finite'" in failing
    assert "python -c 'import torch; print(torch.ones(2).sum())'" in failing
    unsatisfiable = text_lines(details, "t2.4.1-py3.13")[0]
    assert (
        "No solution found when resolving dependencies: Because torch==2.4.1 has no wheels"
        in unsatisfiable
    )
    assert "╰─▶" not in unsatisfiable and "…" in unsatisfiable  # shortened, one line
    assert "connection reset by peer" in text_lines(details, "t2.5.1-cpu-py3.11")[0]
    assert "t2.5.1-py3.11 " not in details  # compatible cells have no details


def test_repro_lines_name_the_failing_and_error_cells_only():
    text = report.render_text(sample())
    repro = text.split("Rerun a cell:")[1]
    assert "torch-matrix run -s 'matrix(t2.6.0-py3.11)' -- --redo" in repro
    assert "matrix(t2.5.1-cpu-py3.11)" in repro
    assert "t2.4.1-py3.13" not in repro  # unsatisfiable: nothing to rerun
    assert "matrix(t2.5.1-py3.11)" not in repro


def test_missing_required_probe_and_not_required_failure_are_labelled():
    cell = make_cell(
        probes=("install_sanity", "torch_compile", "determinism"),
        required_probes=("install_sanity", "determinism"),
    )
    result = make_result(
        cell,
        probes=[
            make_probe("install_sanity"),
            make_probe("torch_compile", FAIL, "inductor missing"),
        ],
    )
    rows = report_rows.detail_rows(report_rows.judge([result]))
    assert ["t2.5.1-py3.11", "torch_compile", "fail (not required)"] == rows[0][:3]
    assert ["t2.5.1-py3.11", "determinism", "missing"] == rows[1][:3]
    assert report.render_text([result]).count("! error: no result for determinism") == 1


def test_skip_and_unsupported_follow_the_cell_policy():
    lenient = make_cell(policy={"unsupported": "pass", "skip": "pass"})
    result = make_result(
        lenient, probes=[make_probe("install_sanity", "unsupported", "no torch.export")]
    )
    assert report_rows.detail_rows(report_rows.judge([result])) == []
    strict = make_result(
        make_cell(), probes=[make_probe("install_sanity", "unsupported", "no torch.export")]
    )
    assert report_rows.detail_rows(report_rows.judge([strict]))[0][1:3] == [
        "install_sanity",
        "unsupported",
    ]


def test_pivot_has_torch_rows_and_variant_python_columns():
    headers, rows = report_rows.pivot_table(report_rows.judge(sample()))
    assert headers == ["torch", "torchvision", "default py3.11", "default py3.13", "cpu py3.11"]
    by_torch = {row[0]: row for row in rows}
    assert list(by_torch) == ["2.4.1", "2.5.1", "2.6.0"]
    assert by_torch["2.5.1"][2:] == ["✓ compatible", "", "! error"]
    assert by_torch["2.4.1"][3] == "– unsatisfiable"
    assert by_torch["2.6.0"][2] == "✗ incompatible"


def test_pivot_columns_are_python_only_for_one_variant_and_extras_make_rows():
    cells = [
        make_result(torch="2.5.1", extras={"numpy": "<2"}),
        make_result(
            torch="2.5.1",
            extras={"numpy": ">=2"},
            probes=[make_probe("install_sanity", FAIL, "numpy ABI")],
        ),
        make_result(torch="2.5.1", python="3.12", extras={"numpy": "<2"}),
    ]
    headers, rows = report_rows.pivot_table(report_rows.judge(cells))
    assert headers == ["torch", "torchvision", "numpy", "py3.11", "py3.12"]
    assert rows == [
        ["2.5.1", "0.20.1", "<2", "✓ compatible", "✓ compatible"],
        ["2.5.1", "0.20.1", ">=2", "✗ incompatible", ""],
    ]


def test_pivot_text_output_and_missing_cells_in_pivot():
    missing = [make_cell(torch="2.7.0")]
    text = report.render_text(sample(), pivot=True, missing=missing)
    assert text_lines(text, "2.7.0 ")[0].split()[-2:] == ["?", "missing"]
    assert "Planned but missing (1):" in text
    assert (
        "t2.6.0-py3.11 " not in text.split("Cells that did not pass")[0]
    )  # pivot, not per-cell rows


def test_probe_grid_has_probes_as_rows():
    headers, rows = report_rows.probe_grid(report_rows.judge(sample()))
    assert headers == [
        "probe",
        "t2.4.1-py3.13",
        "t2.5.1-py3.11",
        "t2.5.1-cpu-py3.11",
        "t2.6.0-py3.11",
    ]
    grid = {row[0]: row[1:] for row in rows}
    assert grid["install_sanity"] == ["(unsatisfiable)", "pass", "(error)", "pass"]
    assert grid["training_step"] == ["(unsatisfiable)", "", "(error)", "FAIL"]
    assert "Probe status per cell:" in report.render_text(sample(), grid=True)


def test_empty_results_render_a_counts_line():
    assert (
        report.render_text([])
        == "0 cells: 0 compatible, 0 incompatible, 0 unsatisfiable, 0 error\n"
    )


# ------------------------------------------------------------------------------ Markdown


def test_markdown_summary_has_every_section_and_escapes_pipes():
    result = make_result(probes=[make_probe("install_sanity", FAIL, "a | b", repro="x | y")])
    text = report_markdown.render_markdown_summary(
        [*sample(), make_result(torch="2.3.0", id="t2.3.0-py3.11", probes=result.probes)]
    )
    for heading in (
        "## torch-matrix results",
        "### Compatibility",
        "### Cells",
        "### Cells that did not pass",
        "### Probe status per cell",
    ):
        assert heading in text
    assert "**5 cells: 1 compatible, 2 incompatible, 1 unsatisfiable, 1 error**" in text
    assert "a \\| b" in text and "`x \\| y`" in text
    assert "❌ incompatible: training_step" in text
    assert "torch-matrix run -s 'matrix(t2.6.0-py3.11)' -- --redo" in text
    assert "Summary shortened" not in text


def test_markdown_lists_planned_but_missing_cells():
    text = report_markdown.render_markdown_summary(
        sample(), missing=[make_cell(torch="2.7.0"), "t2.8.0-py3.11"]
    )
    section = text.split("Planned but missing (2)")[1]
    assert "| t2.7.0-py3.11 | 3.11 | 2.7.0 |" in section and "| t2.8.0-py3.11 |" in section


def many_results(count: int = 60):
    return [
        make_result(
            torch=f"2.{n // 10}.{n % 10}", probes=[make_probe("install_sanity", FAIL, "x" * 80)]
        )
        if n % 3 == 0
        else make_result(torch=f"2.{n // 10}.{n % 10}")
        for n in range(count)
    ]


def test_markdown_drops_details_first_when_too_large():
    cells = many_results()
    full = report_markdown.render_markdown_summary(cells)
    limited = report_markdown.render_markdown_summary(cells, max_bytes=len(full.encode()) - 1)
    assert "### Cells that did not pass" not in limited
    assert "### Cells\n" in limited and "### Compatibility" in limited
    assert "Summary shortened to fit" in limited and "per-probe details" in limited
    assert len(limited.encode()) < len(full.encode())


def test_markdown_summarises_by_verdict_when_tables_do_not_fit():
    cells = many_results()
    limited = report_markdown.render_markdown_summary(cells, max_bytes=1500)
    assert len(limited.encode()) <= 1500
    assert "|" not in limited  # no tables left
    assert "cells listed by verdict" in limited
    assert "**incompatible**: 20: `t2.0.0-py3.11`" in limited
    assert "**compatible**: 40" in limited


@pytest.mark.parametrize("limit", [1, 40, 200, 700, 3000, 20000])
def test_markdown_never_exceeds_the_limit(limit):
    text = report_markdown.render_markdown_summary(
        many_results(), max_bytes=limit, missing=[make_cell(torch="3.0.0")]
    )
    assert len(text.encode("utf-8")) <= limit
    text.encode("utf-8").decode("utf-8")  # never cut inside a character


# ------------------------------------------------------------------------------ CLI


@pytest.fixture
def results_dir(tmp_path):
    cells = results.cells_dir(tmp_path, "default")
    for result in sample():
        results.write_result(result, cells)
    return tmp_path


def run_report(capsys, *argv):
    code = cli.main(["report", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_prints_table_writes_summary_and_merged_results(results_dir, capsys):
    (results_dir / "default" / "cells" / "broken.json").write_text("{")
    code, out, err = run_report(capsys, results_dir)
    assert code == 0  # an incompatible cell is a finding, not a failure
    assert "4 cells: 1 compatible, 1 incompatible, 1 unsatisfiable, 1 error" in out
    assert "✗ incompatible: training_step" in out
    warnings = [line for line in err.splitlines() if "warning" in line]
    broken = results_dir / "default" / "cells" / "broken.json"
    assert warnings == [f"torch-matrix: warning: {broken}: not JSON (line 1 column 2)"]
    assert "### Compatibility" in (results_dir / "summary.md").read_text()
    merged = json.loads((results_dir / "results.json").read_text())
    assert [cell["cell"]["id"] for cell in merged["cells"]] == [
        "t2.4.1-py3.13",
        "t2.5.1-py3.11",
        "t2.5.1-cpu-py3.11",
        "t2.6.0-py3.11",
    ]
    # A second report over the same directory reads the merged file without complaint.
    code, out2, err2 = run_report(capsys, results_dir)
    assert out2 == out and err2.count("warning") == 1


def test_cli_out_dir_pivot_and_markdown_format(results_dir, tmp_path, capsys):
    out_dir = tmp_path / "merged"
    code, out, _ = run_report(capsys, results_dir, "--out", out_dir, "--pivot")
    assert code == 0 and "default py3.13" in out
    assert (out_dir / "summary.md").exists() and (out_dir / "results.json").exists()
    assert not (results_dir / "summary.md").exists()
    _, out, _ = run_report(capsys, results_dir, "--format", "markdown", "--out", out_dir)
    assert out.startswith("## torch-matrix results")


def test_cli_strict_fails_on_error_cells_not_on_incompatible(tmp_path, capsys):
    cells = results.cells_dir(tmp_path, "default")
    results.write_result(make_result(probes=[make_probe("install_sanity", FAIL, "nms")]), cells)
    assert run_report(capsys, tmp_path, "--strict")[0] == 0
    results.write_result(
        make_result(torch="2.6.0", status=INSTALL_ERROR, message="disk full"), cells
    )
    code, _, err = run_report(capsys, tmp_path, "--strict")
    assert code == 1 and "1 error cell(s)" in err
    assert run_report(capsys, tmp_path)[0] == 0


def test_cli_plan_flags_missing_cells_and_strict_fails(results_dir, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    planned = [make_cell(torch="2.5.1"), make_cell(torch="2.7.0")]
    plan.write_text(json.dumps([{**cell.to_json(), "fingerprint": "x"} for cell in planned]))
    code, out, err = run_report(capsys, results_dir, "--plan", plan, "--strict")
    assert code == 1 and "1 missing cell(s)" in err
    assert "Planned but missing (1):" in out and "t2.7.0-py3.11" in out
    assert "Planned but missing (1)" in (results_dir / "summary.md").read_text()


def test_cli_strict_fails_on_unreadable_result_file(tmp_path, capsys):
    cells = results.cells_dir(tmp_path, "default")
    results.write_result(make_result(), cells)
    assert run_report(capsys, tmp_path, "--strict")[0] == 0
    (cells / "t2.6.0-py3.11.json").write_text('{"schema": "torch-matrix/cell-result", "sche')
    code, _, err = run_report(capsys, tmp_path, "--strict")
    assert code == 1 and "1 unreadable file(s)" in err


def test_cli_prints_the_table_and_one_error_line_when_the_files_cannot_be_written(
    results_dir, tmp_path, capsys
):
    """The files are written before the table is printed; when they cannot be (--out is a file),
    the table still comes out, then what was written so far, then one error line: exit 2."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = run_report(capsys, results_dir, "--out", blocker / "sub")
    assert code == 2
    assert "4 cells: 1 compatible, 1 incompatible, 1 unsatisfiable, 1 error" in out
    errors = [line for line in err.splitlines() if line.startswith("torch-matrix: error:")]
    assert len(errors) == 1 and "cannot write the report" in errors[0], err
    assert "Traceback" not in err


def test_the_report_use_case_writes_the_files_and_returns_what_the_command_prints(results_dir):
    """run.report.make_report: the files are written; the table and what writing them said come
    back for the command to print (nothing of it is printed yet)."""
    from torch_matrix.run.report import ReportRequest, make_report

    outcome = make_report(ReportRequest(results_dir=results_dir, strict=True))
    assert "4 cells: 1 compatible, 1 incompatible, 1 unsatisfiable, 1 error" in outcome.table
    assert outcome.said.startswith("wrote ") and str(results_dir / "summary.md") in outcome.said
    assert (results_dir / "summary.md").is_file() and (results_dir / "results.json").is_file()
    assert outcome.unwritten is None
    assert outcome.strict.startswith("torch-matrix: --strict: 1 error cell(s)")


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    code, _, err = run_report(capsys, tmp_path / "nowhere")
    assert code == 2
    assert err.strip().splitlines()[0] == (
        f"torch-matrix: error: {tmp_path / 'nowhere'}: results directory does not exist"
    )
    (tmp_path / "plan.json").write_text("{oops")
    code, _, err = run_report(capsys, tmp_path, "--plan", tmp_path / "plan.json")
    assert code == 2 and err.strip().splitlines()[0].endswith(
        "plan.json: not JSON (line 1 column 2)"
    )


def test_cli_github_summary_appends_within_the_remaining_room(
    results_dir, tmp_path, capsys, monkeypatch
):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setattr(report_markdown, "GITHUB_SUMMARY_LIMIT", 600)
    code, _, _ = run_report(capsys, results_dir, "--github-summary")
    text = summary.read_text()
    assert code == 0 and text.startswith("earlier step\n## torch-matrix results")
    assert len(text.encode()) <= 600 and "Summary shortened" in text


def test_cli_spec_plans_lazily_and_flags_missing(results_dir, capsys, monkeypatch):
    import torch_matrix.run.pipeline
    import torch_matrix.world.specfile

    planned = [make_cell(torch="2.5.1"), make_cell(torch="2.8.0")]
    monkeypatch.setattr(torch_matrix.world.specfile, "load_spec", lambda path: f"spec:{path}")
    monkeypatch.setattr(
        torch_matrix.run.pipeline,
        "plan_for_spec",
        lambda spec: planned if spec == "spec:m.toml" else [],
    )
    code, out, _ = run_report(capsys, results_dir, "--spec", "m.toml")
    assert code == 0 and "Planned but missing (1):" in out and "t2.8.0-py3.11" in out


def test_an_environment_cell_is_counted_and_listed_with_its_rerun_line():
    cell = make_cell(
        probes=("install_sanity", "torch_compile"),
        required_probes=("install_sanity", "torch_compile"),
    )
    missing = "torch.compile failed: ModuleNotFoundError: No module named 'setuptools'"
    result = make_result(
        cell, probes=[make_probe("install_sanity"), make_probe("torch_compile", "fail", missing)]
    )
    text = report.render_text([result])
    assert text.startswith(
        "1 cell: 0 compatible, 0 incompatible, 0 unsatisfiable, 0 error, 1 environment\n"
    )
    assert "⚙ environment" in text and "setuptools" in text
    assert [cell_id for cell_id, _ in report_rows.repro_lines(report_rows.judge([result]))] == [
        cell.id
    ]
