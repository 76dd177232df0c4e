"""The cause catalogue (torch_matrix.judge.causes) on real output: each fixture under
tests/fixtures/real-messages/ is a command probe's result as the runner wrote it for a tiny
downstream test file in a venv holding a real torch release (captured with capture.py there;
the versions are in each file). No venv is needed to judge them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torch_matrix.judge.catalogue import (
    CATALOGUE,
    CUDA_AMP,
    FUNCTIONAL_TENSOR,
    SCHEDULER_VERBOSE,
    TORCH_SIX,
    TORCH_SIX_SHIMS,
    WEIGHTS_ONLY,
)
from torch_matrix.judge.causes import Cause, EnvironmentKind, attribute, code_finding
from torch_matrix.judge.verdict import ENVIRONMENT, verdict_of
from torch_matrix.plan.counterfactual import plan_counterfactuals
from torch_matrix.pins import suggest_pins
from torch_matrix.pins.render import render_text
from torch_matrix.vocab.records import CellResult, ProbeResult
from tests.factories import make_cell, make_result

FIXTURES = Path(__file__).parent / "fixtures" / "real-messages"


def real_result(name: str) -> tuple[CellResult, dict[str, Any]]:
    """A cell result holding the real probe of fixture ``name``, with the versions it ran."""
    record = json.loads((FIXTURES / f"{name}.json").read_text())
    probe = ProbeResult.from_json(record["probe"])
    resolved = dict(record["resolved"])
    cell = make_cell(
        torch=resolved["torch"].split("+")[0],
        python=record["python"],
        torchvision="",
        probes=(probe.name,),
        required_probes=(probe.name,),
    )
    return make_result(cell, probes=[probe], resolved=resolved), record


def test_numpy_2_under_torch_1_12_at_collection_is_an_environment_finding_with_numpy_lt_2():
    """torch 1.12.0 (built against numpy 1) with numpy 2.0.2: a test module that converts an
    array at import cannot be collected (``Numpy is not available``). Nothing ran: the finding is
    the environment's, its fix and counterfactual ``numpy<2``, never "fix the test suite"."""
    result, record = real_result("torch1.12-numpy2_collection")
    assert record["resolved"]["numpy"].startswith("2.")
    assert record["probe"]["evidence"]["pytest_exit"] == 2
    attribution = attribute(result, result.probes[0])
    assert (attribution.cause, attribution.kind) == (Cause.ENVIRONMENT, EnvironmentKind.NUMPY_ABI)
    assert attribution.requirement == "numpy<2"
    verdict = verdict_of(result)
    assert verdict.kind == ENVIRONMENT and "`numpy<2`" in verdict.reason
    assert "fix the test suite" not in verdict.reason
    (counterfactual,) = plan_counterfactuals(result)
    assert counterfactual.requirements[-1] == "numpy<2"
    text = render_text(suggest_pins([result]))
    assert "add `numpy<2`" in text and "torch!=" not in text


def test_a_test_that_ran_and_failed_on_numpy_2_stays_evidence_for_the_interaction():
    """The same torch and numpy, a test that ran and failed (``torch.from_numpy``): evidence about
    the pair (the pins close the interaction with ``numpy<2``), not an environment finding."""
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    assert "Numpy is not available" in result.probes[0].message
    assert attribute(result, result.probes[0]).cause == Cause.VERSION


def test_the_same_tests_with_numpy_1_are_evidence_about_the_versions():
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    older = make_result(
        result.cell, probes=result.probes, resolved={**result.install.resolved, "numpy": "1.26.4"}
    )
    assert attribute(older, older.probes[0]).cause == Cause.VERSION


def test_a_collection_error_from_torch_importing_pkg_resources_gets_the_setuptools_advice():
    """torch 1.12.0's torch.utils.cpp_extension imports pkg_resources, which setuptools 82 removed:
    the tests could not be collected, and the finding is the environment's, not "fix the suite"."""
    result, record = real_result("torch1.12-pkg_resources_collection")
    assert record["probe"]["evidence"]["pytest_exit"] == 2
    assert int(record["resolved"]["setuptools"].split(".")[0]) >= 82
    attribution = attribute(result, result.probes[0])
    assert attribution.kind == EnvironmentKind.MISSING_DEPENDENCY
    assert attribution.requirement == "setuptools<82"
    assert "fix the test suite" not in attribution.advice
    assert verdict_of(result).kind == ENVIRONMENT


def test_a_collection_error_in_the_projects_own_module_is_still_the_suites_to_fix():
    result, _record = real_result("torch1.12-pkg_resources_collection")
    probe = result.probes[0]
    own = ProbeResult.from_json(
        {
            **probe.to_json(),
            "message": probe.message.replace("pkg_resources", "mypkg_helpers"),
            "output_tail": "",
            "evidence": {**probe.evidence, "collection_errors": []},
        }
    )
    mine = make_result(result.cell, probes=[own], resolved=result.install.resolved)
    assert attribute(mine, own).kind == EnvironmentKind.TESTS_DID_NOT_RUN


@pytest.mark.parametrize("message", ["Numpy is not available", "_ARRAY_API not found"])
def test_an_import_torch_that_fails_at_the_install_check_carries_the_numpy_advice(message):
    result, _record = real_result("torch1.12-numpy2_from_numpy")
    broken = make_result(
        result.cell,
        status="error",
        message=f"installed versions differ from the cell: torch: cannot read its __version__: "
        f"RuntimeError: {message}",
        resolved=result.install.resolved,
    )
    verdict = verdict_of(broken)
    assert verdict.kind == ENVIRONMENT and "`numpy<2`" in verdict.reason
    (counterfactual,) = plan_counterfactuals(broken)
    assert counterfactual.requirements[-1] == "numpy<2"
    assert counterfactual.probe_subset  # every probe of the cell: import torch itself failed


# ---------------------------------------------------------------- the catalogue (judge.catalogue)


def test_each_catalogue_entry_names_its_upstream_source_and_has_a_real_message_test():
    tested = {change.key for change, _name in REAL_CASES}
    for change in CATALOGUE:
        assert change.source.startswith("https://github.com/pytorch/"), change.key
        assert change.key in tested, f"{change.key}: no test on real output"


def _real_finding(name: str):
    result, record = real_result(name)
    return result, record, code_finding(result.probes[0])


def test_weights_only_on_torch_2_6_gives_the_code_fix_at_the_users_call_site_first():
    """A downstream test doing a plain ``torch.load`` of a checkpoint holding an
    ``argparse.Namespace``, on torch 2.6.0 (the release that flipped the default)."""
    result, record, finding = _real_finding("torch2.6-weights_only")
    assert record["resolved"]["torch"].startswith("2.6.0")
    assert finding is not None and finding.change.key == "torch.load-weights_only"
    assert (
        finding.site is not None
        and finding.site.text() == "src/pkg/io.py:9: return torch.load(path)"
    )
    assert "`return torch.load(path, weights_only=False)` if the file is trusted" in finding.fix
    # the class by its import path, from "Unsupported global: GLOBAL argparse.Namespace"
    assert "`torch.serialization.add_safe_globals([argparse.Namespace])`" in finding.fix
    assert finding.tests == ("tests/test_case.py::test_checkpoint_roundtrip",)
    verdict = verdict_of(result)
    assert verdict.kind == "incompatible"  # the tests fail: the window stands, as the alternative
    (fix,) = verdict.fixes.values()
    assert fix.advice.startswith(
        "torch 2.6.0: torch.load defaults to weights_only=True at src/pkg/io.py:9"
    )
    assert "pull/137602" in fix.advice


def test_weights_only_on_torch_2_13_names_the_full_class_path():
    _result, _record, finding = _real_finding("torch2.13-weights_only")
    assert finding is not None
    assert "add_safe_globals([argparse.Namespace])" in finding.fix


def test_the_fix_comes_before_the_window_in_the_pins_and_the_pr_body():
    from torch_matrix.pins.pr_body import render_pr_body
    from torch_matrix.pins.render import render_constraints, render_requirements

    broken, _record = real_result("torch2.6-weights_only")
    working = make_result(
        make_cell(torch="2.5.1", python="3.11", torchvision="", probes=("tests",)),
        resolved={"torch": "2.5.1"},
    )
    suggestion = suggest_pins([working, broken], {"torch": ["2.5.1", "2.6.0"]})
    text = render_text(suggestion)
    assert text.index("Fix first") < text.index("Suggested pins") < text.index("torch<2.6")
    assert "src/pkg/io.py:9: return torch.load(path)" in text.split("Suggested pins")[0]
    assert "Advice (" not in text  # the only advice is the fix, printed first: no empty section
    requirements = render_requirements(suggestion)
    assert requirements.index("# Fix first") < requirements.index("\ntorch<2.6")
    constraints = render_constraints(
        suggestion
    )  # `-c` reads only the pin; the fix is a comment before it
    assert constraints.index("# Fix first") < constraints.index("\ntorch<2.6")
    assert constraints.count("weights_only=True at src/pkg/io.py:9") == 1
    assert not any("weights_only" in x for x in constraints.splitlines() if not x.startswith("#"))
    # the fix once: under "Fix first", not again as an environment comment further down
    assert requirements.count("weights_only=True at src/pkg/io.py:9") == 1, requirements
    body = render_pr_body(suggestion)
    assert body.index("### Fix first") < body.index("### Pins (the alternative)")
    assert "weights_only=False" in body


REAL_CASES = [
    (WEIGHTS_ONLY, "torch2.6-weights_only"),
    (TORCH_SIX, "torch2.6-torch_six"),
    (TORCH_SIX_SHIMS, "torch1.9-torch_six_shims"),
    (FUNCTIONAL_TENSOR, "torch2.6-tv0.21-functional_tensor"),
    (SCHEDULER_VERBOSE, "torch2.13-scheduler_verbose"),  # removed in 2.7.0 (INTRODUCED below)
    (CUDA_AMP, "torch2.6-cuda_amp"),
]


@pytest.mark.parametrize("change, name", REAL_CASES, ids=[n for _c, n in REAL_CASES])
def test_each_entry_recognises_its_real_failure_and_names_the_replacement(change, name):
    result, _record, finding = _real_finding(name)
    assert finding is not None and finding.change == change
    assert finding.site is not None and not finding.site.path.startswith("/")  # the user's file
    verdict = verdict_of(result)
    assert verdict.kind == "incompatible"
    (fix,) = verdict.fixes.values()
    assert finding.fix in fix.advice and change.source in fix.advice


# Each entry on the release that introduced it (its ``since``: the first release whose real output
# shows the change) and on a release before it, where the same test file passes: captured with
# capture.py in a venv of that release (py3.11, PyPI wheels, numpy<2).
INTRODUCED = [
    (WEIGHTS_ONLY, "torch2.6-weights_only", "torch2.5-weights_only"),
    (TORCH_SIX, "torch2.0-torch_six", "torch1.13-torch_six"),
    (TORCH_SIX_SHIMS, "torch1.9-torch_six_shims", "torch1.8-torch_six_shims"),
    (FUNCTIONAL_TENSOR, "torch2.2-tv0.17-functional_tensor", "torch2.1-tv0.16-functional_tensor"),
    (SCHEDULER_VERBOSE, "torch2.7-scheduler_verbose", "torch2.6-scheduler_verbose"),
    (CUDA_AMP, "torch2.4-cuda_amp", "torch2.2-cuda_amp"),
]


def test_every_catalogue_entry_has_the_real_output_of_the_release_that_introduced_it():
    assert sorted(change.key for change, _at, _before in INTRODUCED) == sorted(
        change.key for change in CATALOGUE
    )


@pytest.mark.parametrize(
    "change, at, before", INTRODUCED, ids=[change.key for change, _a, _b in INTRODUCED]
)
def test_each_entry_on_the_release_that_introduced_it_and_the_release_before(change, at, before):
    from torch_matrix.vocab.versions import parse_version

    result, record, finding = _real_finding(at)
    installed = record["resolved"][change.package].split("+")[0]
    assert installed == change.since, (change.key, record["resolved"])
    assert finding is not None and finding.change == change
    assert finding.site is not None and finding.site.path.startswith(("tests/", "src/"))
    verdict = verdict_of(result)
    assert verdict.kind == "incompatible"
    (fix,) = verdict.fixes.values()
    assert finding.fix in fix.advice and change.source in fix.advice
    passing, earlier = real_result(before)
    assert earlier["test_file"] == record["test_file"]  # the same test file
    assert parse_version(earlier["resolved"][change.package].split("+")[0]) < parse_version(
        change.since
    )
    assert [p.status for p in passing.probes] == ["pass"] and verdict_of(
        passing
    ).kind == "compatible"


def test_removed_api_sites_are_the_users_lines():
    _r, _rec, six = _real_finding("torch2.6-torch_six")
    assert six.site.text() == "tests/test_case.py:1: from torch._six import string_classes"
    assert "`string_classes` -> `str`" in six.fix
    _r, _rec, verbose = _real_finding("torch2.13-scheduler_verbose")
    assert verbose.site.text().startswith("tests/test_case.py:5: return torch.optim.lr_scheduler")
    _r, _rec, amp = _real_finding("torch2.6-cuda_amp")
    assert "torch.amp.GradScaler('cuda', ...)" in amp.fix


def test_the_releases_before_each_change_pass_the_same_tests():
    """The same downstream tests on the release before the scheduler's verbose was removed pass."""
    result, _record = real_result("torch2.6-scheduler_verbose")
    assert result.probes[0].status == "pass"


def test_the_report_summary_and_the_issue_body_carry_the_fix_first():
    from torch_matrix.report.diff import NewFailure
    from torch_matrix.report.diff_render import issue_body
    from torch_matrix.report.markdown import render_markdown_summary
    from torch_matrix.report.rows import code_fix_notes, judge

    broken, _record = real_result("torch2.6-weights_only")
    judged = judge([broken])
    (note,) = code_fix_notes(judged)
    assert "src/pkg/io.py:9: return torch.load(path)" in note and "weights_only=False" in note
    summary = render_markdown_summary(judged)
    assert "### ✎ Fix first" in summary and "src/pkg/io.py:9" in summary
    probe = broken.probes[0]
    body = issue_body(
        NewFailure(
            broken.cell.id, probe.name, "fail", probe.message, "", ("torch==2.6.0",), "3.11", None
        )
    )
    assert body.index("### Fix first") < body.index("### Reproduce")
    assert "weights\\_only=False" in body or "weights_only=False" in body


def test_the_nightly_issue_names_the_users_call_site_from_the_stored_verdict(tmp_path):
    """`diff --issues` of two runs: the new failure's issue carries the fix its cell's verdict gives
    (the user's call site and the class the error names), not the catalogue's generic call."""
    from torch_matrix.cli import main as cli_main
    from torch_matrix.world.results import write_result

    broken, _record = real_result("torch2.6-weights_only")
    before = make_result(
        make_cell(torch="2.6.0", python="3.11", torchvision="", probes=("tests",)),
        resolved={"torch": "2.6.0"},
    )
    assert before.cell.id == broken.cell.id
    old, new = tmp_path / "old" / "ckpt", tmp_path / "new" / "ckpt"
    write_result(before, old / "cells")
    write_result(broken, new / "cells")
    issues = tmp_path / "issues.json"
    assert cli_main(["diff", str(old), str(new), "--issues", str(issues)]) == 0
    [opened] = json.loads(issues.read_text())["open"]
    fix = opened["body"].split("### Fix first", 1)[1].split("###", 1)[0]
    assert "src/pkg/io.py:9" in fix and "return torch.load(path, weights_only=False)" in fix
    assert "<the class named in the error>" not in fix


def test_pins_writes_the_pull_request_body_only_when_asked(tmp_path, monkeypatch):
    from torch_matrix.cli import main as cli_main
    from torch_matrix.world.results import write_result

    broken, _record = real_result("torch2.6-weights_only")
    working = make_result(
        make_cell(torch="2.5.1", python="3.11", torchvision="", probes=("tests",)),
        resolved={"torch": "2.5.1"},
    )
    results = tmp_path / "results" / "ckpt"
    for result in (working, broken):
        write_result(result, results / "cells")
    monkeypatch.setenv("TORCH_MATRIX_RUN_URL", "https://ci.example/runs/7")
    body = tmp_path / "pr-body.md"
    out = tmp_path / "constraints"
    assert (
        cli_main(["pins", str(results), "--out", str(out), "--no-coverage", "--pr-body", str(body)])
        == 0
    )
    text = body.read_text()
    assert text.startswith("Regenerated by the nightly matrix: https://ci.example/runs/7")
    assert text.index("### Fix first") < text.index("### Pins (the alternative)")
    assert "pr-body.md" not in {p.name for p in out.iterdir()}


def test_a_removed_api_no_tested_release_has_names_its_replacement_not_only_fix_the_suite():
    """torch._six in every cell of the run (the suite collects nowhere): no evidence about the
    versions, but the advice names the replacement at the user's line."""
    from torch_matrix.judge.causes import COLLECTED_NOWHERE

    result, _record = real_result("torch2.6-torch_six")
    probe = result.probes[0]
    nowhere = ProbeResult.from_json(
        {**probe.to_json(), "evidence": {**probe.evidence, COLLECTED_NOWHERE: True}}
    )
    attribution = attribute(make_result(result.cell, probes=[nowhere]), nowhere)
    assert attribution.kind == EnvironmentKind.TESTS_DID_NOT_RUN
    assert "tests/test_case.py:1: from torch._six import string_classes" in attribution.advice
    assert "`string_classes` -> `str`" in attribution.advice
