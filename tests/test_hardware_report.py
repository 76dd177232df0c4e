"""Cells × hardware targets in the terminal report, summary.md, the HTML page and the repro bundle,
from results whose build facts are the real wheels' (tests/fixtures/wheel-builds, no GPU)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from torch_matrix import cli
from torch_matrix.judge.hardware import cell_verdicts
from torch_matrix.judge.gpus import targets_of
from torch_matrix.report.html_page import render_html
from torch_matrix.report.markdown import render_markdown_summary
from torch_matrix.report.repro import render_bundle
from torch_matrix.report.rows import hardware_table, judge
from torch_matrix.report.terminal import render_text
from torch_matrix.world.results import write_result
from tests.factories import make_result

FIXTURES = Path(__file__).parent / "fixtures" / "wheel-builds"
TARGETS = targets_of(["GTX 1080", "V100", "RTX 4090", "RTX 5090"], ["535.104", "580.82.07"])


def judged_result(version: str):
    facts = json.loads((FIXTURES / f"torch-{version.replace('+', '_')}.json").read_text())
    result = make_result(torch=version.split("+")[0], python="3.11")
    gpu = {"cuda_available": False, "devices": [], "driver": None, "build": facts}
    return dataclasses.replace(result, gpu=gpu, targets=cell_verdicts(gpu, TARGETS))


def results():
    return [judged_result(v) for v in ("2.4.1", "2.7.1", "2.13.0")]


def test_the_terminal_table_is_cells_by_targets_with_each_builds_arch_list():
    headers, rows = hardware_table(judge(results()))
    assert headers[:4] == ["cell", "torch", "CUDA", "arch list"] and len(headers) == 4 + 8
    assert (
        headers[4] == "GTX 1080 (sm_61), driver 535.104"
        and headers[-1] == "RTX 5090 (sm_120), driver 580.82.07"
    )
    by_torch = {row[1]: dict(zip(headers, row)) for row in rows}
    assert by_torch["2.13.0"]["arch list"] == "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
    assert by_torch["2.13.0"]["V100 (sm_70), driver 580.82.07"] == "✗ no kernel image"
    assert by_torch["2.13.0"]["V100 (sm_70), driver 535.104"] == "✗ driver too old"
    assert by_torch["2.13.0"]["RTX 5090 (sm_120), driver 580.82.07"] == "native"
    assert by_torch["2.7.1"]["RTX 5090 (sm_120), driver 580.82.07"] == "✗ no kernel image"
    assert by_torch["2.4.1"]["GTX 1080 (sm_61), driver 535.104"] == "native"
    text = render_text(results(), width=400)
    assert "Hardware targets (cells × targets" in text and "Why it does not run there:" in text
    assert re.search(
        r"t2\.13\.0-py3\.11 on V100 \(sm_70\), driver 580\.82\.07: no-kernel-image: no sm_70", text
    )


def test_summary_md_and_the_html_page_carry_the_same_table():
    markdown = render_markdown_summary(results())
    assert "### Hardware targets" in markdown and "| ✗ no kernel image |" in markdown
    html = render_html(results())
    assert (
        '<table class="hardware" id="hardware">' in html
        and "RTX 5090 (sm_120), driver 580.82.07" in html
    )
    assert "no kernel image is available for execution on the device" in html
    assert "Hardware targets" not in render_text([make_result()])  # nothing judged: no section


def test_the_repro_bundle_names_the_target(tmp_path, capsys):
    result = judged_result("2.7.1")
    bundle = render_bundle(result, [result], target="RTX 5090")
    assert bundle.startswith(
        "### torch 2.7.1 on RTX 5090 (sm_120), driver 535.104: driver-too-old"
    )  # and no sm_120
    assert (
        "torch._C._cuda_getArchFlags()" in bundle
        and "| `RTX 4090 (sm_89), driver 580.82.07` | native |" in bundle
    )
    write_result(result, tmp_path / "cells")
    assert (
        cli.main(["repro", result.cell.id, "--results", str(tmp_path), "--target", "sm_120"]) == 0
    )
    assert "on RTX 5090 (sm_120)" in capsys.readouterr().out
    assert cli.main(["repro", result.cell.id, "--results", str(tmp_path), "--target", "H100"]) == 2
    err = capsys.readouterr().err
    assert "no verdict for a target matching 'H100'" in err and "hint: its targets: GTX 1080" in err


def test_a_kept_result_is_judged_again_when_the_targets_change():
    from torch_matrix.run.cellrun import rejudged

    result = judged_result("2.13.0")
    assert rejudged(result, TARGETS) is None  # the same targets: nothing to rewrite
    again = rejudged(result, targets_of(["H100"], []))
    assert again is not None and [(t["target"], t["verdict"]) for t in again.targets] == [
        ("H100 (sm_90)", "native")
    ]
    assert again.gpu == result.gpu and again.probes == result.probes  # no rerun, only the verdicts
