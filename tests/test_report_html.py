"""The HTML heatmap and the JUnit XML, as functions of results (the browser test is test_report_browser)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from torch_matrix.cli import main as cli
from torch_matrix.report.junit import render_junit
from torch_matrix.vocab.records import FAIL, SKIP, UNSATISFIABLE, UNSUPPORTED
from torch_matrix.report.rows import counts_line, judge, plural
from torch_matrix.report.html_page import build_page, cause_text, render_html
from tests.factories import make_cell, make_probe, make_result


def _grid():
    return [
        make_result(
            torch="2.5.1",
            python="3.11",
            probes=[make_probe("install_sanity"), make_probe("training_step")],
        ),
        make_result(
            torch="2.5.1",
            python="3.12",
            probes=[
                make_probe("install_sanity"),
                make_probe(
                    "training_step",
                    FAIL,
                    "loss is <NaN>",
                    observed="nan",
                    expected="finite",
                    traceback="Traceback ...\nRuntimeError: boom",
                    repro="import torch; torch.ones(1)",
                ),
            ],
        ),
        make_result(
            torch="2.4.1",
            torchvision="0.19.1",
            python="3.12",
            status=UNSATISFIABLE,
            message="no wheel for cp312",
        ),
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
    assert "torch-matrix run -s &#39;matrix(t2.5.1-py3.12)&#39; -- --redo" in text
    assert "no wheel for cp312" in text
    for kind in ("compatible", "incompatible", "unsatisfiable", "error", "planned but missing"):
        assert kind in text  # the legend


def test_changes_against_a_previous_run_are_marked():
    previous = {
        "t2.5.1-py3.11": "compatible",
        "t2.5.1-py3.12": "compatible",
        "t2.3.1-py3.11": "compatible",
    }
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


def test_each_probe_that_did_not_pass_shows_its_cause():
    mismatched = make_result(
        torch="2.13.0",
        torchvision="0.28.0",
        resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
        probes=[
            make_probe(
                "install_sanity", FAIL, "RuntimeError: operator torchvision::nms does not exist"
            )
        ],
    )
    assert cause_text(mismatched, mismatched.probes[0]).startswith(
        "environment (mismatched-build): torch"
    )
    grid = _grid()
    assert cause_text(grid[1], grid[1].probe("training_step")).startswith("version: ")
    assert cause_text(grid[1], grid[1].probe("install_sanity")) == ""
    text = render_html([mismatched])
    assert "<b>cause:</b> environment (mismatched-build)" in text


def test_plurals():
    assert (
        plural(1, "cell") == "1 cell"
        and plural(2, "cell") == "2 cells"
        and plural(0, "cell") == "0 cells"
    )
    assert counts_line(judge(_grid()[:1])).startswith("1 cell: ")


# ------------------------------------------------------------------------------ JUnit


def test_junit_has_one_testcase_per_cell_and_probe_with_statuses_mapped():
    crashed = make_result(
        make_cell(torch="2.6.0", required_probes=("install_sanity", "torch_export")),
        probes=[
            make_probe("install_sanity", "crash", "SIGSEGV\x00"),
            make_probe("torch_compile", UNSUPPORTED, "no"),
            make_probe("cuda_devices", SKIP, "no CUDA"),
        ],
    )
    results = _grid() + [crashed]
    root = ET.fromstring(render_junit(results))
    assert root.tag == "testsuites"
    cases = {(case.get("classname"), case.get("name")): case for case in root.iter("testcase")}
    assert len(cases) == 2 + 2 + 1 + 4  # 2 probes, 2 probes, one install case, 3 probes + 1 missing
    failure = cases[("t2.5.1-py3.12", "training_step")].find("failure")
    assert failure is not None and "loss is <NaN>" in failure.get("message")
    assert "RuntimeError: boom" in failure.text and "import torch" in failure.text
    assert cases[("t2.5.1-py3.11", "training_step")].find("*") is None  # pass: no child
    assert (
        cases[("t2.4.1-py3.12", "install")].find("skipped") is not None
    )  # unsatisfiable is no failure
    assert cases[("t2.6.0-py3.11", "install_sanity")].find("error") is not None  # crash: error
    assert "\x00" not in cases[("t2.6.0-py3.11", "install_sanity")].find("error").get("message")
    assert cases[("t2.6.0-py3.11", "torch_compile")].find("skipped") is not None  # not required
    assert cases[("t2.6.0-py3.11", "torch_export")].find("error").get("type") == "missing"
    totals = {key: int(root.get(key)) for key in ("tests", "failures", "errors", "skipped")}
    assert totals == {"tests": 9, "failures": 1, "errors": 2, "skipped": 3}
    for suite in root.iter("testsuite"):
        assert int(suite.get("tests")) == len(suite.findall("testcase"))


def test_junit_says_a_changed_default_failure_belongs_to_a_compatible_cell():
    advice = "load with weights_only=False (torch.load's default changed)"
    cell = make_cell(torch="2.6.0", probes=("install_sanity", "checkpoint_roundtrip"))
    flip = make_probe(
        "checkpoint_roundtrip",
        "fail",
        "changed default: torch.load(path) refuses this checkpoint",
        evidence={"advice": advice},
    )
    root = ET.fromstring(
        render_junit([make_result(cell, probes=[make_probe("install_sanity"), flip])])
    )
    failure = next(
        case for case in root.iter("testcase") if case.get("name") == "checkpoint_roundtrip"
    ).find("failure")
    assert failure.get("type") == "changed-default"
    assert failure.get("message") == f"⚑ changed default (the cell is compatible): {advice}"


def test_cli_writes_html_and_junit(tmp_path, capsys):
    from torch_matrix.world.results import write_result

    cells = tmp_path / "run" / "cells"
    for result in _grid():
        write_result(result, cells)
    html, junit = tmp_path / "r.html", tmp_path / "j.xml"
    assert cli(["report", str(tmp_path / "run"), "--html", str(html), "--junit", str(junit)]) == 0
    assert 'data-verdict="incompatible"' in html.read_text(encoding="utf-8")
    assert ET.parse(junit).getroot().get("failures") == "1"
    assert (
        cli(
            [
                "report",
                str(tmp_path / "run"),
                "--html",
                str(html),
                "--previous",
                str(tmp_path / "nope"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "torch-matrix: error: --previous" in err and "Traceback" not in err


# ------------------------------------------------------------------------------ terminal and summary.md

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from torch_matrix.report.rows import CELL_HEADERS, cell_rows  # noqa: E402
from torch_matrix.report.terminal import fit_to_width, render_text  # noqa: E402
from torch_matrix.report.markdown import render_markdown_summary  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.text(alphabet="abc xyz-_.", max_size=60), min_size=3, max_size=3),
        min_size=1,
        max_size=6,
    ),
    st.integers(min_value=30, max_value=200),
)
def test_fitted_tables_fit_and_keep_the_id_column(rows, width):
    headers = ("id", "message", "detail")
    names, fitted, _ = fit_to_width(rows, headers, width, drop=("detail",))
    natural_id = max([len("id") + 2] + [len(" ".join(row[0].split())) for row in rows])
    widths = [
        max([len(name) + 2] + [len(row[i]) for row in fitted]) for i, name in enumerate(names)
    ]
    if natural_id + 12 + 2 <= width:  # room for the id and a minimal message column
        assert sum(widths) + 2 * (len(names) - 1) <= width
    assert [row[0] for row in fitted] == [" ".join(row[0].split()) for row in rows]


def test_terminal_report_fits_and_says_where_the_full_text_is():
    text = render_text(_grid(), width=60)
    table = [line for line in text.splitlines()[1:] if line and not line.startswith(("  ", "("))]
    assert all(len(line) <= 60 for line in table), (
        table
    )  # (the counts line and rerun lines are not tables)
    assert "t2.5.1-py3.12" in text and "✗ incompatible" in text
    assert "narrowed to 60 columns" in text
    wide = render_text(_grid())  # a file or a pipe: nothing cut
    assert "narrowed" not in wide and len(cell_rows(judge(_grid()))[0]) == len(CELL_HEADERS)


def test_summary_never_cuts_a_repro():
    snippet = "import torch\n" + "\n".join(f"x{i} = torch.ones({i})  # line {i}" for i in range(30))
    result = make_result(
        torch="2.5.1", probes=[make_probe("install_sanity", FAIL, "bad", repro=snippet)]
    )
    text = render_markdown_summary([result])
    assert snippet in text  # whole, with its newlines, in a fenced block below the table
    assert "snippet 1 below" in text


def test_previous_run_from_the_history_database(tmp_path, monkeypatch, capsys):
    from torch_matrix.world.results import write_result

    monkeypatch.setenv("TORCH_MATRIX_HISTORY", str(tmp_path / "history.sqlite"))
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    old, new = tmp_path / "old" / "nightly", tmp_path / "new" / "nightly"
    was_fine = make_result(torch="2.5.1", python="3.12", finished_at="2026-11-20T08:00:10+00:00")
    for result in (_grid()[0], was_fine):
        write_result(result, old / "cells")
    for result in _grid():
        write_result(result, new / "cells")
    assert cli(["import", str(old)]) == 0
    assert cli(["import", str(new)]) == 0
    html = tmp_path / "r.html"
    assert (
        cli(
            [
                "report",
                str(new),
                "--out",
                str(tmp_path / "out"),
                "--html",
                str(html),
                "--previous",
                "last",
            ]
        )
        == 0
    )
    text = html.read_text(encoding="utf-8")
    assert 'data-cell="t2.5.1-py3.12" data-verdict="incompatible" ' in text
    assert (
        'data-change="compatible"' in text and 'data-change="new"' in text
    )  # was compatible; 2.4.1 is new
    assert "compared with run " in text
    assert cli(["report", str(new), "--html", str(html), "--previous", "nosuchrun"]) == 2
    assert "no such run in the history" in capsys.readouterr().err


def test_rerun_lines_in_every_output_carry_the_spec(tmp_path, monkeypatch, capsys):
    from torch_matrix.world.results import write_result

    for result in _grid():
        write_result(result, tmp_path / "run" / "cells")
    monkeypatch.setenv("TORCH_MATRIX_SPEC", "/specs/nightly.toml")
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    html = tmp_path / "r.html"
    assert cli(["report", str(tmp_path / "run"), "--html", str(html), "--github-summary"]) == 0
    line = "torch-matrix run --spec /specs/nightly.toml -s 'matrix(t2.5.1-py3.12)' -- --redo"
    assert line in capsys.readouterr().out
    assert line in (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert line in step.read_text(encoding="utf-8")
    assert line.replace("'", "&#39;") in html.read_text(encoding="utf-8")


def test_passing_probes_are_one_line_without_their_evidence_and_long_fields_are_capped(tmp_path):
    """A page of thousands of cells stays small: a passing probe's evidence stays in the cell's file
    (linked), and a 5 MB message, traceback or install log is cut with a way to the full text."""
    from torch_matrix.world.results import write_result

    huge = "x" * 5_000_000
    passing = make_result(
        torch="2.5.1",
        python="3.11",
        probes=[
            make_probe("install_sanity", evidence={"modules": "PASSING-EVIDENCE " * 50}),
            make_probe("cuda_devices", SKIP, "no CUDA device"),
            make_probe("mixed_precision", SKIP, "no CUDA device"),
        ],
    )
    failing = make_result(
        torch="2.5.1",
        python="3.12",
        probes=[
            make_probe("install_sanity"),
            make_probe(
                "training_step", FAIL, huge, traceback=huge, evidence={"FAILING-EVIDENCE": 1}
            ),
        ],
    )
    broken = make_result(torch="2.4.1", python="3.12", status="error", message=huge)
    run = tmp_path / "results" / "nightly"
    for result in (passing, failing, broken):
        write_result(result, run / "cells")
    page = run / "report.html"
    assert cli(["report", str(run), "--out", str(tmp_path / "out"), "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert len(text) < 100_000, len(text)  # three 5 MB fields, capped
    assert "PASSING-EVIDENCE" not in text and "FAILING-EVIDENCE" in text
    assert (
        "pass: install_sanity 0.5s" in text
        and "skip (no CUDA device): cuda_devices, mixed_precision" in text
    )
    assert (
        text.count("more characters: the full text is in cells/t2.5.1-py3.12.json") == 3
    )  # why, message, traceback
    assert (
        "more characters: the full text is in cells/t2.4.1-py3.12.json" in text
    )  # the install log
    links = set(re.findall(r'href="(cells/[^"]+)"', text))
    # Linked: the passing probes' evidence, and every cell with a field that may be cut (a failing
    # probe, an install log): the broken install's 5 MB log is one click from its whole text.
    assert links == {
        "cells/t2.5.1-py3.11.json",
        "cells/t2.5.1-py3.12.json",
        "cells/t2.4.1-py3.12.json",
    }
    assert all((page.parent / link).is_file() for link in links)
    assert re.search(r'<dt>full result</dt><dd><a href="cells/t2.4.1-py3.12.json">', text)
    assert (
        '<dt>full result</dt><dd><a href="cells/t2.5.1-py3.11.json">' not in text
    )  # all passed: "evidence"
    # From a merged results.json (an artifact: no cells folder beside it) the page names no cell file
    # that is not there: the full text is in the results.json the report writes, and the repro bundle.
    merged = tmp_path / "artifact" / "results.json"
    merged.parent.mkdir()
    merged.write_text(
        (tmp_path / "out" / "results.json").read_text(encoding="utf-8"), encoding="utf-8"
    )
    other = tmp_path / "artifact" / "report.html"
    assert cli(["report", str(merged), "--out", str(tmp_path / "out2"), "--html", str(other)]) == 0
    from_merged = other.read_text(encoding="utf-8")
    assert "cells/" not in from_merged
    assert (
        "more characters: the full text is in results.json; `torch-matrix repro t2.4.1-py3.12` bundles it"
        in from_merged
    )
    # The probe filter's statuses: one letter per probe, in the order of its options.
    options = re.findall(r'<option value="([a-z_]+)">probe:', text)
    assert options == ["install_sanity", "cuda_devices", "mixed_precision", "training_step"]
    assert 'data-cell="t2.5.1-py3.11" data-verdict="compatible" data-statuses="pss-"' in text


def test_a_page_over_several_runs_links_each_cell_to_its_own_file(tmp_path):
    """`report results/` (a root holding several runs, or downloaded shards): each cell's box links the
    file it was read from, wherever it lies, and the cut text names that file, not a cells/ folder
    beside the page that does not exist."""
    from torch_matrix.world.results import write_result

    long = "RuntimeError: " + "y" * 5000
    write_result(
        make_result(
            torch="2.5.1",
            python="3.11",
            probes=[make_probe("install_sanity"), make_probe("training_step", FAIL, long)],
        ),
        tmp_path / "results" / "nightly" / "cells",
    )
    write_result(
        make_result(torch="2.4.1", python="3.12", status="error", message=long),
        tmp_path / "results" / "shard 2" / "cells",
    )
    page = tmp_path / "site" / "report.html"
    assert (
        cli(
            [
                "report",
                str(tmp_path / "results"),
                "--out",
                str(tmp_path / "out"),
                "--html",
                str(page),
            ]
        )
        == 0
    )
    text = page.read_text(encoding="utf-8")
    links = re.findall(r'<dt>full result</dt><dd><a href="([^"]+)">', text)
    assert sorted(links) == [
        "../results/nightly/cells/t2.5.1-py3.11.json",
        "../results/shard%202/cells/t2.4.1-py3.12.json",
    ]
    assert "the full text is in ../results/nightly/cells/t2.5.1-py3.11.json;" in text
    assert "cells/t2.4.1-py3.12.json;" in text and "the full text is in cells/" not in text


def test_terminal_escapes_in_a_probe_message_never_reach_the_page_raw():
    """A probe message with terminal escapes (torch's bold markers, a window-title sequence) went
    into the HTML as raw ESC bytes. Now bold/colour is dropped and every other control character
    is shown as text, in every place the page prints the message."""
    result = make_result(
        torch="2.6.0",
        python="3.11",
        probes=[
            make_probe(
                "checkpoint_roundtrip",
                FAIL,
                "\x1b[1mWeights only load failed\x1b[0m \x1b]0;owned\x07 done",
                traceback="Traceback ...\n\x1b[31mUnpicklingError\x1b[0m: \x1b[2Jcleared",
            )
        ],
    )
    text = render_html([result])
    assert "\x1b" not in text and "\x07" not in text
    assert "Weights only load failed" in text
    assert "\\x1b]0;owned\\x07 done" in text  # shown, inert
    assert "UnpicklingError: \\x1b[2Jcleared" in text


def test_each_cell_links_to_its_own_file_relative_to_the_page(tmp_path):
    """``run.report.cell_files``: one relative path per folder, worked out once (issue 46: 2,000
    ``os.path.relpath`` calls were 2% of ``report --html``); the links are what they were."""
    import os
    from urllib.parse import quote

    from torch_matrix.run.report import cell_files

    sources = {
        "a": str(tmp_path / "run" / "cells" / "a.json"),
        "b b": str(tmp_path / "run" / "cells" / "b b.json"),
        "c": str(tmp_path / "other" / "cells" / "c.json"),
        "d": "results.json[3]",  # a merged copy has no file of its own
        "e": os.path.relpath(tmp_path / "run" / "e.json"),  # given relative to the cwd
    }
    for page in (tmp_path / "run" / "report.html", tmp_path / "out" / "deep" / "report.html"):
        where = os.path.dirname(os.path.abspath(page))
        expected = {
            cell: quote(os.path.relpath(os.path.abspath(source), where).replace(os.sep, "/"))
            for cell, source in sources.items()
            if source.endswith(".json")
        }
        assert cell_files(sources, page) == expected
    assert cell_files(sources, tmp_path / "run" / "report.html")["e"] == "e.json"
    assert cell_files(sources, tmp_path / "run" / "report.html")["b b"] == "cells/b%20b.json"


def test_the_template_is_compiled_once_and_kept_between_runs(tmp_path, monkeypatch):
    """``render_html(compiled_dir=...)``: Jinja's compiled template is kept on disk, so the next
    process does not compile it again (issue 46: 5% of ``report --html``); the page is the same,
    and a folder that cannot be written costs only the compile."""
    import jinja2

    from torch_matrix.report import html_page

    compiled = []
    real = jinja2.Environment.compile

    def counting(self, *args, **kwargs):
        compiled.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)

    def fresh_process(**kwargs):
        html_page._template.cache_clear()
        return render_html(_grid(), generated="now", **kwargs)

    try:
        plain = fresh_process()
        assert len(compiled) == 1
        first = fresh_process(compiled_dir=str(tmp_path / "templates"))
        second = fresh_process(compiled_dir=str(tmp_path / "templates"))
        assert plain == first == second
        assert len(compiled) == 2  # the second run read what the first kept
        assert list((tmp_path / "templates").rglob("*.cache"))
        blocked = tmp_path / "a-file"
        blocked.write_text("not a folder")
        assert fresh_process(compiled_dir=str(blocked)) == plain
        assert len(compiled) == 3
    finally:
        html_page._template.cache_clear()
