"""The HTML heatmap and the JUnit XML, as functions of results (the browser test is test_report_browser)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from matrix.cli import main as cli
from matrix.junit import render_junit
from matrix.records import FAIL, SKIP, UNSATISFIABLE, UNSUPPORTED
from matrix.report import counts_line, judge, plural
from matrix.report_html import _cause_text, build_page, render_html
from tests.factories import make_cell, make_probe, make_result


def _grid():
    return [
        make_result(torch="2.5.1", python="3.11", probes=[make_probe("install_sanity"),
                                                          make_probe("training_step")]),
        make_result(torch="2.5.1", python="3.12", probes=[
            make_probe("install_sanity"),
            make_probe("training_step", FAIL, "loss is <NaN>", observed="nan", expected="finite",
                       traceback="Traceback ...\nRuntimeError: boom", repro="import torch; torch.ones(1)")]),
        make_result(torch="2.4.1", torchvision="0.19.1", python="3.12", status=UNSATISFIABLE,
                    message="no wheel for cp312"),
    ]


def test_page_has_torch_rows_python_columns_and_a_slot_per_cell():
    page = build_page(_grid())
    assert [row.torch for row in page.rows] == ["2.5.1", "2.4.1"]  # newest first
    assert [column.label for column in page.columns] == ["py3.11", "py3.12"]
    top = page.rows[0]
    assert [slot[0].verdict for slot in top.slots] == ["compatible", "incompatible"]
    assert page.rows[1].slots[0] == ()  # 2.4.1 was not planned on 3.11
    assert page.rows[1].slots[1][0].verdict == "unsatisfiable"
    assert page.probe_names == ["install_sanity", "training_step"]


def test_html_is_self_contained_and_escapes_what_results_say():
    text = render_html(_grid())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched
    assert "<link" not in text and "@import" not in text
    assert "loss is &lt;NaN&gt;" in text and "loss is <NaN>" not in text
    assert 'data-cell="t2.5.1-py3.12" data-verdict="incompatible"' in text
    assert "RuntimeError: boom" in text and "import torch; torch.ones(1)" in text
    assert "TORCH_MATRIX_REDO=1 nox -s &#39;matrix(t2.5.1-py3.12)&#39;" in text
    assert "no wheel for cp312" in text
    for kind in ("compatible", "incompatible", "unsatisfiable", "error", "planned but missing"):
        assert kind in text  # the legend


def test_changes_against_a_previous_run_are_marked():
    previous = {"t2.5.1-py3.11": "compatible", "t2.5.1-py3.12": "compatible", "t2.3.1-py3.11": "compatible"}
    page = build_page(_grid(), previous=previous, previous_label="results/last")
    changes = {view.id: view.change for view in page.changes}
    assert changes == {"t2.5.1-py3.12": "compatible", "t2.4.1-py3.12": "new"}
    assert page.gone == ["t2.3.1-py3.11"]
    text = render_html(_grid(), previous=previous, previous_label="results/last")
    assert "was compatible" in text and "Changes since results/last" in text


def test_planned_but_missing_cells_have_a_slot():
    missing = [make_cell(torch="2.6.0", python="3.11")]
    page = build_page(_grid(), missing=missing)
    assert page.rows[0].torch == "2.6.0" and page.rows[0].slots[0][0].verdict == "missing"


def test_a_cause_is_shown_when_a_probe_carries_one():
    @dataclass
    class Cause:
        kind: str
        advice: str

    @dataclass
    class WithCause:
        cause: object

    assert _cause_text(WithCause(Cause("environment", "install numpy<2"))) == "environment: install numpy<2"
    assert _cause_text(WithCause("version")) == "version"
    assert _cause_text(make_probe("x")) == ""


def test_plurals():
    assert plural(1, "cell") == "1 cell" and plural(2, "cell") == "2 cells" and plural(0, "cell") == "0 cells"
    assert counts_line(judge(_grid()[:1])).startswith("1 cell: ")


# ------------------------------------------------------------------------------ JUnit

def test_junit_has_one_testcase_per_cell_and_probe_with_statuses_mapped():
    crashed = make_result(make_cell(torch="2.6.0", required_probes=("install_sanity", "torch_export")),
                          probes=[make_probe("install_sanity", "crash", "SIGSEGV\x00"),
                                  make_probe("torch_compile", UNSUPPORTED, "no"),
                                  make_probe("cuda_devices", SKIP, "no CUDA")])
    results = _grid() + [crashed]
    root = ET.fromstring(render_junit(results))
    assert root.tag == "testsuites"
    cases = {(case.get("classname"), case.get("name")): case for case in root.iter("testcase")}
    assert len(cases) == 2 + 2 + 1 + 4  # 2 probes, 2 probes, one install case, 3 probes + 1 missing
    failure = cases[("t2.5.1-py3.12", "training_step")].find("failure")
    assert failure is not None and "loss is <NaN>" in failure.get("message")
    assert "RuntimeError: boom" in failure.text and "import torch" in failure.text
    assert cases[("t2.5.1-py3.11", "training_step")].find("*") is None  # pass: no child
    assert cases[("t2.4.1-py3.12", "install")].find("skipped") is not None  # unsatisfiable is no failure
    assert cases[("t2.6.0-py3.11", "install_sanity")].find("error") is not None  # crash: error
    assert "\x00" not in cases[("t2.6.0-py3.11", "install_sanity")].find("error").get("message")
    assert cases[("t2.6.0-py3.11", "torch_compile")].find("skipped") is not None  # not required
    assert cases[("t2.6.0-py3.11", "torch_export")].find("error").get("type") == "missing"
    totals = {key: int(root.get(key)) for key in ("tests", "failures", "errors", "skipped")}
    assert totals == {"tests": 9, "failures": 1, "errors": 2, "skipped": 3}
    for suite in root.iter("testsuite"):
        assert int(suite.get("tests")) == len(suite.findall("testcase"))


def test_cli_writes_html_and_junit(tmp_path, capsys):
    from matrix.results import write_result

    cells = tmp_path / "run" / "cells"
    for result in _grid():
        write_result(result, cells)
    html, junit = tmp_path / "r.html", tmp_path / "j.xml"
    assert cli(["report", str(tmp_path / "run"), "--html", str(html), "--junit", str(junit)]) == 0
    assert 'data-verdict="incompatible"' in html.read_text(encoding="utf-8")
    assert ET.parse(junit).getroot().get("failures") == "1"
    assert cli(["report", str(tmp_path / "run"), "--html", str(html), "--previous", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "torch-matrix: error: --previous" in err and "Traceback" not in err
