"""Issue 34, the reports: JSON, the Markdown summary within GitHub's issue limit, the HTML page (in a
real browser), the diff of two runs, the cause of each regression group."""

from __future__ import annotations

import os
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.browser import dump_dom, find_browser, png_size, screenshot
from torch_matrix.judge.catalogue import cause_of
from torch_matrix.ecosystem.report import (
    GITHUB_ISSUE_CHARS,
    build,
    diff,
    html_page,
    markdown,
    message_key,
)
from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

META: dict[str, Any] = {
    "baseline": {"torch": "2.5.1", "label": "2.5.1"},
    "candidate": {"torch": "2.6.0", "label": "2.6.0"},
    "projects": [],
}


def _side(name: str, role: Role, status: SideStatus, tests: dict[str, str], **kw: Any) -> SideRun:
    return SideRun(
        project=name,
        role=role,
        torch="2.5.1" if role == Role.BASELINE else "2.6.0",
        status=status,
        tests=tests,
        summary=f"{len(tests)} tests",
        log=f"projects/{name}/{role}.log",
        **kw,
    )


def _world(projects: int, failing: int = 3) -> tuple[dict[str, Any], dict[str, dict[str, SideRun]]]:
    """``projects`` projects: every third regressed (``failing`` tests each, two messages), every
    third fixed, the rest same-pass; one skipped."""
    sides: dict[str, dict[str, SideRun]] = {}
    meta = dict(META, projects=[{"name": f"p{i:04d}"} for i in range(projects)])
    meta["projects"].append({"name": "gpu", "skip": "needs a GPU"})
    for i in range(projects):
        name = f"p{i:04d}"
        ids = [f"tests/test_{name}.py::test_{j}" for j in range(failing)]
        good = {t: "passed" for t in ids}
        bad = {t: "failed" for t in ids}
        messages = {
            t: (
                "_pickle.UnpicklingError: Weights only load failed. Unsupported global: "
                "GLOBAL argparse.Namespace was not an allowed global by default."
                if j % 2
                else "ModuleNotFoundError: No module named 'torch._six'"
            )
            for j, t in enumerate(ids)
        }
        if i % 3 == 0:
            b = _side(name, Role.BASELINE, SideStatus.PASSED, good)
            c = _side(name, Role.CANDIDATE, SideStatus.FAILED, bad, messages=messages)
        elif i % 3 == 1:
            b = _side(name, Role.BASELINE, SideStatus.FAILED, bad, messages=messages)
            c = _side(name, Role.CANDIDATE, SideStatus.PASSED, good)
        else:
            b = _side(name, Role.BASELINE, SideStatus.PASSED, good)
            c = _side(name, Role.CANDIDATE, SideStatus.PASSED, good)
        sides[name] = {"baseline": b, "candidate": c}
    sides["gpu"] = {
        "baseline": _side("gpu", Role.BASELINE, SideStatus.SKIPPED, {}, detail="needs a GPU"),
        "candidate": _side("gpu", Role.CANDIDATE, SideStatus.SKIPPED, {}, detail="needs a GPU"),
    }
    return meta, sides


def test_the_report_counts_classes_groups_failures_and_names_their_cause() -> None:
    meta, sides = _world(6, failing=4)
    report = build(meta, sides)
    assert report.counts() == {
        "regressed": 2,
        "flaky": 0,
        "spurious": 0,
        "fixed": 2,
        "same-fail": 0,
        "same-pass": 2,
        "skipped": 1,
    }
    first = report.rows[0]
    assert first.eco_class == "regressed"
    assert [len(g.tests) for g in first.groups] == [2, 2]
    kinds = {g.cause.kind for g in first.groups}
    assert kinds == {"changed-default", "removed-api"}  # weights_only, torch._six
    data = report.to_json()
    assert data["projects"]["p0000"]["groups"][0]["cause"]["fix"]
    assert data["projects"]["p0000"]["sides"]["candidate"]["log"] == "projects/p0000/candidate.log"


def test_a_project_without_results_is_named_missing() -> None:
    meta, sides = _world(3)
    del sides["p0001"]
    report = build(meta, sides)
    assert report.missing == ("p0001",)
    assert "p0001" in markdown(report)


def test_the_markdown_summary_fits_a_github_issue_and_links_the_rest() -> None:
    meta, sides = _world(3000, failing=8)
    report = build(meta, sides)
    text = markdown(report, link="https://example.org/run/report.html")
    assert len(text) <= GITHUB_ISSUE_CHARS
    assert "more row(s) left out" in text and "https://example.org/run/report.html" in text
    assert text.startswith("# Ecosystem run: torch 2.5.1 -> 2.6.0")
    assert "| regressed | 1000 |" in text
    small = markdown(build(*_world(3)))
    assert "left out" not in small


@pytest.mark.parametrize(
    "message, kind",
    [
        ("Weights only load failed ... Unsupported global: GLOBAL foo.Bar", "changed-default"),
        ("ModuleNotFoundError: No module named 'torch._six'", "removed-api"),
        ("ModuleNotFoundError: No module named 'torch.utils._gone'", "import-break"),
        ("ImportError: cannot import name 'container_abcs' from 'torch._six'", "removed-api"),
        ("AttributeError: module 'torch.nn.utils' has no attribute 'weight_norm'", "removed-api"),
        ("assert 1 == 2", "unknown"),
    ],
)
def test_the_cause_catalogue(message: str, kind: str) -> None:
    cause = cause_of(message)
    assert cause.kind == kind and cause.fix
    if kind == "changed-default":
        assert "add_safe_globals([foo.Bar])" in cause.fix
        assert "weights_only=False" in cause.fix and "pull/137602" in cause.source
    if "_six" in message and "cannot import" not in message:  # the main catalogue's own entry
        assert "math.inf" in cause.fix and "pull/94709" in cause.source


def test_terminal_bold_is_dropped_and_the_log_names_the_global_a_cut_message_lost() -> None:
    cut = "Weights only load failed. \x1b[1mdo those steps only if you trust\x1b[0m. (1) In"
    meta, sides = _world(1)
    ids = list(sides["p0000"]["candidate"].tests)
    sides["p0000"]["candidate"] = _side(
        "p0000",
        Role.CANDIDATE,
        SideStatus.FAILED,
        dict.fromkeys(ids, "failed"),
        messages=dict.fromkeys(ids, cut),
        output_tail="E   WeightsUnpickler error: Unsupported global: GLOBAL tp.Model was not allowed",
    )
    (row,) = [r for r in build(meta, sides).rows if r.name == "p0000"]
    assert "\x1b" not in row.classified.evidence and "\x1b" not in row.groups[0].message
    assert "add_safe_globals([tp.Model])" in row.groups[0].cause.fix


def test_diff_names_each_project_that_changed_class() -> None:
    meta, sides = _world(6)
    old = build(meta, sides).to_json()
    sides["p0002"]["candidate"] = _side(
        "p0002", Role.CANDIDATE, SideStatus.FAILED, {"tests/test_p0002.py::test_0": "failed"}
    )
    del sides["p0005"]
    new = build(meta, sides).to_json()
    changes = {c["project"]: (c["old"], c["new"]) for c in diff(old, new)}
    assert changes == {"p0002": ("same-pass", "regressed"), "p0005": ("same-pass", "absent")}
    assert diff(old, old) == []


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.counts: dict[str, str] = {}
        self.links: list[str] = []
        self._count: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "tr" and "data-project" in values:
            self.rows[values["data-project"]] = values.get("class", "")
        if tag == "td" and "data-class" in values:
            self._count = values["data-class"]
        if tag == "a" and values.get("class") == "log":
            self.links.append(values["href"])

    def handle_data(self, data: str) -> None:
        if self._count is not None and data.strip():
            self.counts[self._count] = data.strip()
            self._count = None


def test_the_html_page_in_a_real_browser(tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        message = "no Chromium found: run `bash tests/install-browser.sh`; the page was not opened"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    meta, sides = _world(9)
    for role in Role:  # a same-pass project whose test id carries markup
        sides["p0002"][str(role)] = _side(
            "p0002", role, SideStatus.PASSED, {"t<script>alert(1)</script>": "passed"}
        )
    page = tmp_path / "report.html"
    page.write_text(html_page(build(meta, sides)), encoding="utf-8")
    dom = dump_dom(browser, page.as_uri())
    parsed = _Rows()
    parsed.feed(dom)
    assert parsed.counts["regressed"] == "3" and parsed.counts["skipped"] == "1"
    assert len(parsed.rows) == 10 and parsed.rows["p0000"] == "regressed"
    assert parsed.rows["gpu"] == "skipped"
    assert "projects/p0000/candidate.log" in parsed.links
    assert "<script>alert" not in dom, "a test id is text, never markup"
    shot = tmp_path / "report.png"
    screenshot(browser, page.as_uri(), shot, 1280, 900)
    assert png_size(shot) == (1280, 900)


def test_the_cause_names_the_global_and_the_call_site_from_the_failure_s_whole_text() -> None:
    """Real run (opacus 1.5.2, torch 2.6.0): the message was cut before the global and the log's
    tail, from later tests, did not name it, so the fix read `add_safe_globals([<the class named
    in the error>])` and named no call site. The failure's whole text and its frames in the
    project's own code, kept from the pytest records, give both."""
    from torch_matrix.ecosystem.sides import failure_details

    node = "opacus/tests/module_validator_test.py::ModuleValidator_test::test_fix"
    cut = "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded"
    records = [
        {"nodeid": "tests/test_ok.py::test_ok", "when": "call", "outcome": "passed"},
        {
            "nodeid": node,
            "when": "call",
            "outcome": "failed",
            "message": cut,
            "text": cut + " ... WeightsUnpickler error: Unsupported global: GLOBAL "
            "torchvision.models.mobilenetv3.MobileNetV3 was not an allowed global by default.",
            "frames": [
                {"path": "opacus/tests/module_validator_test.py", "line": 29, "code": "fix(m)"},
                {"path": "opacus/utils/module_utils.py", "line": 102, "code": "c = torch.load(b)"},
                {"path": "/v/lib/python3.11/site-packages/torch/serialization.py", "line": 1470},
            ],
        },
    ]
    messages, texts, frames = failure_details(records)
    assert list(messages) == [node] and list(texts) == [node]
    assert [f["path"] for f in frames[node]] == [
        "opacus/tests/module_validator_test.py",
        "opacus/utils/module_utils.py",
    ]
    meta, sides = _world(1)
    ids = list(sides["p0000"]["candidate"].tests)
    candidate = _side(
        "p0000",
        Role.CANDIDATE,
        SideStatus.TIMEOUT,
        dict.fromkeys(ids, "failed"),
        messages=dict.fromkeys(ids, messages[node]),
        output_tail="later tests' output",
    )
    # the round trip through the result file keeps them
    sides["p0000"]["candidate"] = SideRun.from_json(
        replace(
            candidate,
            texts=dict.fromkeys(ids, texts[node]),
            frames=dict.fromkeys(ids, frames[node]),
        ).to_json()
    )
    (row,) = [r for r in build(meta, sides).rows if r.name == "p0000"]
    fix = row.groups[0].cause.fix
    assert fix.startswith("at opacus/utils/module_utils.py:102: `c = torch.load(b)` -> ")
    assert "torch.load(b, weights_only=False)" in fix
    assert "add_safe_globals([torchvision.models.mobilenetv3.MobileNetV3])" in fix


def test_a_weights_only_fix_rerun_on_the_candidate_says_proven_or_how_many_still_fail() -> None:
    """The ecosystem report said "not proven" for every weights_only fix: the run never reran one.
    The candidate's side file now carries the reruns (``fix_proofs``, ecosystem/fixproofs.py): the
    fix names every class the reruns found and says what they showed; without them, not proven."""
    meta, sides = _world(1)
    ids = sorted(sides["p0000"]["candidate"].tests)
    refused = "Weights only load failed. WeightsUnpickler error: Unsupported global: GLOBAL pkg.A"
    frames = ({"path": "pkg/io.py", "line": 7, "code": "s = torch.load(p)"},)
    candidate = replace(
        _side(
            "p0000",
            Role.CANDIDATE,
            SideStatus.FAILED,
            dict.fromkeys(ids, "failed"),
            messages=dict.fromkeys(ids, refused),
        ),
        frames=dict.fromkeys(ids, frames),
    )
    site = {"site": "pkg/io.py:7", "code": "s = torch.load(p)", "tests": ids, "globals": ["pkg.A"]}
    proofs = {
        "load_fixes": [{**site, "allowed": ["pkg.A", "pkg.B"], "rounds": 2, "passed": ids[1:],
                        "failed": ids[:1]}],
        "old_default": {"env": "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1", "tests": ids, "passed": ids,
                        "failed": [], "ran": True},
    }  # fmt: skip

    def fix_of(side: SideRun) -> str:
        sides["p0000"]["candidate"] = SideRun.from_json(side.to_json())  # via its file
        (row,) = [r for r in build(meta, sides).rows if r.name == "p0000"]
        (group,) = row.groups
        return group.cause.fix

    assert "(not proven: no rerun with it applied" in fix_of(candidate)
    fix = fix_of(replace(candidate, fix_proofs=proofs))
    assert fix.startswith("at pkg/io.py:7: `s = torch.load(p)` -> "), fix
    assert "add_safe_globals([pkg.A, pkg.B])" in fix
    n = len(ids)
    assert f"(NOT proven: with it, 1 of {n} tests still fail on a rerun: {ids[0]})" in fix
    assert f"proven: the {n} failing tests pass with it on a rerun" in fix
    assert "not proven: no rerun" not in fix


@pytest.mark.parametrize(
    "one, other",
    [
        (  # a memory address (zuko's real message, two processes)
            "AssertionError: assert False + where False = <built-in method allclose of type "
            "object at 0x7ff7d4f9ef00>(tensor([-5.0000]))",
            "AssertionError: assert False + where False = <built-in method allclose of type "
            "object at 0x7f5b673a8fa0>(tensor([-5.0000]))",
        ),
        ("ValueError: <Flow object at 0x7fcc1d3a8fa0>", "ValueError: <Flow object at 0x55d0c2a1>"),
        (  # pytest's tmp_path: one folder per test and per session
            "FileNotFoundError: '/tmp/pytest-of-root/pytest-12/test_flows_MAF_0/flow.pth'",
            "FileNotFoundError: '/tmp/pytest-of-root/pytest-13/test_flows_NICE_0/flow.pth'",
        ),
        (  # tempfile's names
            "OSError: cannot open /tmp/tmpk3j_a9x1/model.pt",
            "OSError: cannot open /var/tmp/tmpzz81qq0w/model.pt",
        ),
        (  # the run's own work folder, either side or a bisection step
            "ImportError: /runs/a/work/opacus/candidate/venv/lib/x.so: undefined symbol",
            "ImportError: /other/out/work/opacus/bisect/2.6.0/venv/lib/x.so: undefined symbol",
        ),
        ("RuntimeError: worker pid 4121 died", "RuntimeError: worker pid 977 died"),
        (
            "Falsifying example: test_x(seed=1234) @seed(98765432123)",
            "Falsifying example: test_x(seed=7) @seed(1)",
        ),
        ("E   AssertionError: \x1b[1mbold\x1b[0m  text", "E AssertionError: bold text"),
    ],
)
def test_run_specific_noise_leaves_the_grouping_key(one: str, other: str) -> None:
    assert one != other and message_key(one) == message_key(other)


@pytest.mark.parametrize(
    "one, other",
    [
        ("AssertionError: expected 3, got 4", "AssertionError: expected 3, got 5"),
        ("ValueError: flag 0x1F not allowed", "ValueError: flag 0x2F not allowed"),
        ("FileNotFoundError: data/a.csv", "FileNotFoundError: data/b.csv"),
        ("RuntimeError: shape [2, 3] != [2, 4]", "RuntimeError: shape [2, 3] != [2, 5]"),
        ("OSError: /tmp/mydata/model.pt", "OSError: /tmp/yourdata/model.pt"),
    ],
)
def test_real_differences_stay_in_the_grouping_key(one: str, other: str) -> None:
    assert message_key(one) != message_key(other)


def test_failures_differing_only_in_noise_are_one_group_shown_by_one_real_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four tests fail on the same assertion, each message with its own object address and tmp
    folder; a fifth fails otherwise: two groups, the first told by its first test's own message
    (verbatim), the cause read from that raw message, never from the key."""
    ids = [f"tests/test_flow.py::test_{j}" for j in range(5)]
    messages = {
        t: f"AssertionError: <Flow object at 0x7fcc1d3a8f{j:02x}> differs, see "
        f"/tmp/pytest-of-root/pytest-{j}/test_{j}0/out.pt"
        for j, t in enumerate(ids[:4])
    }
    messages[ids[4]] = "RuntimeError: expected scalar type Float but found Double"
    meta = dict(META, projects=[{"name": "flows"}])
    sides = {
        "flows": {
            "baseline": _side(
                "flows", Role.BASELINE, SideStatus.PASSED, dict.fromkeys(ids, "passed")
            ),
            "candidate": _side(
                "flows",
                Role.CANDIDATE,
                SideStatus.FAILED,
                dict.fromkeys(ids, "failed"),
                messages=messages,
            ),
        }
    }
    seen: list[str] = []
    real_cause_of = cause_of

    def spy(message: str, *args: Any) -> Any:
        seen.append(message)
        return real_cause_of(message, *args)

    monkeypatch.setattr("torch_matrix.ecosystem.report.cause_of", spy)
    report = build(meta, sides)
    (row,) = report.rows
    assert [len(g.tests) for g in row.groups] == [4, 1]
    big = row.groups[0]
    assert big.message == messages[ids[0]] and big.variants == 4
    assert sorted(seen) == sorted([messages[ids[0]], messages[ids[4]]])  # raw, not the key
    data = report.to_json()["projects"]["flows"]["groups"][0]
    assert data["message"] == messages[ids[0]] and data["variants"] == 4
    assert "0x?" in data["key"] and "<tmp>" in data["key"]
    text = markdown(report)
    assert "**4 test(s)**" in text and "0x7fcc1d3a8f00" in text
    assert "message of the first (4 different messages" in text
    assert "message of the first (4 different messages" in html_page(report)


def test_a_bisection_without_a_pin_renders() -> None:
    """A bisection that proves no pin (not exact, non-monotone, a release that would not install)
    writes bisect.json without 'pin' or 'proof': the HTML page raised jinja2's UndefinedError
    (StrictUndefined) and `ecosystem report` stopped with a traceback."""
    meta, sides = _world(1)
    sentence = "first bad between 2.5.1 and 2.6.0 (2.5.2 did not install)"
    report = build(meta, sides, {"p0000": {"sentence": sentence, "last_good": "2.5.1"}})
    page = html_page(report)
    assert sentence in page and "proven pin" not in page
    assert sentence in markdown(report)
    pinned = build(meta, sides, {"p0000": {"sentence": "x", "pin": "torch<2.6.0", "proof": "p"}})
    assert "proven pin <code>torch&lt;2.6.0</code> (p)" in html_page(pinned)


def test_wall_time_per_project_and_in_total_and_not_recorded_where_absent() -> None:
    """A project's wall time runs from its first side's start to its last side's end, retries and
    bisection included (not the side time, which adds two sides at once twice); a project whose
    files predate the times says 'not recorded', never 0; a skipped one 'not run'."""
    meta, sides = _world(3)  # p0000 regressed, p0001 fixed, p0002 same-pass, gpu skipped
    t0 = 1_764_000_000.0
    timed = {
        "baseline": (t0 + 0, t0 + 150),
        "candidate": (t0 + 1, t0 + 160),
        "baseline-retry": (t0 + 170, t0 + 200),
        "candidate-retry": (t0 + 170, t0 + 210),
    }
    for key, (start, end) in timed.items():
        source = sides["p0000"]["candidate" if key.startswith("candidate") else "baseline"]
        sides["p0000"][key] = replace(source, started=start, ended=end, seconds=end - start)
    for key in ("baseline", "candidate"):
        sides["p0002"][key] = replace(sides["p0002"][key], started=t0 + 400, ended=t0 + 430)
    bisections = {"p0000": {"sentence": "first bad: 2.6.0", "started": t0 + 220, "ended": t0 + 300}}
    report = build(meta, sides, bisections)
    rows = {row.name: row for row in report.rows}
    assert rows["p0000"].wall_seconds() == 300.0  # the bisection's end - the baseline's start
    assert rows["p0000"].seconds() > 300  # side time: both sides at once, counted twice
    assert rows["p0002"].wall_seconds() == 30.0
    assert rows["p0001"].wall_seconds() is None  # its files have no times
    assert rows["gpu"].wall_seconds() is None
    data = report.to_json()
    assert data["projects"]["p0000"]["wall_seconds"] == 300.0
    assert data["projects"]["p0001"]["wall_seconds"] is None
    assert data["wall_time"] == {
        "seconds": 330.0,
        "projects": 2,
        "not_recorded": ["p0001"],
        "first_start": "2025-11-24 16:00:00 UTC",
        "last_end": "2025-11-24 16:07:10 UTC",
    }
    text = markdown(report)
    assert "**Wall time**: 330 s in all (2 project(s)" in text
    assert "not recorded for p0001" in text
    table = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| p")}
    assert table["| p0000"].endswith("| 300 s |") and table["| p0001"].endswith("| not recorded |")
    assert "| gpu | skipped |" in text and text.split("| gpu | skipped |")[1].split("\n")[
        0
    ].endswith("| not run |")
    page = html_page(report)
    assert "Wall time 330 s in all" in page and "not recorded" in page and "not run" in page


def test_a_report_of_results_without_times_says_not_recorded_never_zero() -> None:
    meta, sides = _world(3)
    report = build(meta, sides)
    wall = report.to_json()["wall_time"]
    assert wall["seconds"] is None and wall["projects"] == 0
    assert wall["not_recorded"] == ["p0000", "p0001", "p0002"]
    text = markdown(report)
    assert "**Wall time**: not recorded" in text and "| 0 s |" not in text


def test_a_side_s_times_round_trip_and_older_files_load() -> None:
    side = _side("p", Role.BASELINE, SideStatus.PASSED, {"t": "passed"}, started=1.5, ended=9.0)
    again = SideRun.from_json(side.to_json())
    assert (again.started, again.ended) == (1.5, 9.0)
    older = side.to_json()
    del older["started"], older["ended"]
    assert SideRun.from_json(older).started is None
    with pytest.raises(ValueError, match="seconds since the epoch"):
        SideRun.from_json({**side.to_json(), "ended": "yesterday"})


def test_a_skipped_project_shows_its_reason_not_side_files_from_before_its_skip() -> None:
    """The real run's pytorch-msssim: skipped in run.json, with side files from an earlier run
    before its skip reason; the table showed 'broken: 0 passed' on both sides (a maintainer reads
    'the tests broke') and its stale seconds counted in the run's side time."""
    meta, sides = _world(1)
    meta["projects"].append({"name": "msssim", "skip": "the sdist's tests are scripts"})
    sides["msssim"] = {
        str(role): _side("msssim", role, SideStatus.BROKEN, {}, detail="no tests ran")
        for role in Role
    }
    sides["msssim"]["baseline"] = replace(sides["msssim"]["baseline"], seconds=44.0)
    report = build(meta, sides)
    (row,) = [r for r in report.rows if r.name == "msssim"]
    assert row.eco_class == "skipped" and row.seconds() == 0 and row.sides == {}
    line = [x for x in markdown(report).splitlines() if x.startswith("| msssim |")][0]
    assert line == (
        "| msssim | skipped | not run: the sdist's tests are scripts | not run | not run |"
    )
    assert "broken" not in line
    assert report.to_json()["projects"]["msssim"]["sides"] == {}
    page = html_page(report)
    assert "no tests ran" not in page and "the sdist&#39;s tests are scripts" in page


def test_a_regression_says_what_was_tested_and_how_to_reproduce_it_outside_the_tool() -> None:
    """Read as the project's maintainer: which release of theirs was tested with which command,
    and the commands that show the failure without torch-matrix (the hand check's steps)."""
    meta, sides = _world(1)  # p0000 regressed
    meta["projects"][0] = {
        "name": "p0000",
        "source": {"kind": "sdist", "location": "p0000==1.5.2"},
        "command": "python -m pytest -q tests",
        "extras": ["test"],
        "requires": ["pytest", "numpy<2"],
        "torchvision": True,
    }
    meta["baseline"] = {"torch": "2.5.1", "torchvision": "0.20.1", "label": "2.5.1"}
    meta["candidate"] = {"torch": "2.6.0", "torchvision": "0.21.0", "label": "2.6.0"}
    report = build(meta, sides)
    text = markdown(report)
    assert "tested: the PyPI sdist `p0000==1.5.2` with `python -m pytest -q tests`" in text
    assert (
        "- reproduce in the project's tree (`pip download --no-deps --no-binary :all: "
        "p0000==1.5.2`, unpacked): `pip install torch==2.6.0 torchvision==0.21.0 '.[test]' "
        "pytest 'numpy<2'`, then `python -m pytest -p no:cacheprovider "
        "tests/test_p0000.py::test_0`: fails; with `torch==2.5.1 torchvision==0.20.1` it passes"
    ) in text
    page = html_page(report)
    assert "<code>pip download --no-deps --no-binary :all: p0000==1.5.2</code>" in page
    assert "with <code>torch==2.5.1 torchvision==0.20.1</code> it passes" in page
    git = dict(meta["projects"][0], source={"kind": "git", "location": "https://g/p", "ref": "v1"})
    meta["projects"][0] = git
    assert "(`git clone https://g/p && git checkout v1`, unpacked)" in markdown(build(meta, sides))
    two, sides = _world(2)  # p0000 regressed, p0001 fixed: only the regression has the line
    two["projects"] = [{"name": n, "command": "python -m pytest"} for n in ("p0000", "p0001")]
    assert markdown(build(two, sides)).count("- reproduce in the project's tree") == 1
    assert "reproduce" not in markdown(build(*_world(2)))  # no command known: nothing made up


def test_every_failing_test_and_the_flipped_ones_are_named_for_the_maintainer() -> None:
    """The HTML page showed 5 of a group's tests and '+6 more' with no way to see them (only
    ecosystem.json had them); a regressed project's test that flipped on retry was a count in the
    evidence, never named (zuko 2.5.1 -> 2.6.0: '1 more flipped on retry: flaky')."""
    meta, sides = _world(1, failing=16)  # p0000: 16 regressed tests, two messages (8 each)
    report = build(meta, sides)
    (row,) = [r for r in report.rows if r.name == "p0000"]
    row = replace(row, classified=replace(row.classified, flipped=("tests/test_x.py::test_seed",)))
    report = replace(report, rows=(row,))
    page = html_page(report)
    for test in row.groups[0].tests:
        assert f"<code>{test}</code>" in page
    assert "<summary>+3 more</summary>" in page
    assert "flipped on retry (flaky, not counted): <code>tests/test_x.py::test_seed</code>" in page
    text = markdown(report)
    assert "+3 more (all in report.html and ecosystem.json)" in text
    assert "- flipped on retry (flaky, not counted): `tests/test_x.py::test_seed`" in text


def test_a_same_fail_project_says_why_its_tests_fail_on_both_sides() -> None:
    """The real run's torch-optimizer read only 'fails on both sides: 175 failed, 103 passed':
    its maintainer could not tell why. Now its failures are grouped by message as a
    regression's are (the cause only where the catalogue knows one)."""
    meta, sides = _world(1, failing=4)
    ids = list(sides["p0000"]["baseline"].tests)
    messages = {
        t: "AttributeError: 'Lookahead' object has no attribute '_optimizer_state_dict_pre_hooks'"
        if j < 3
        else "\x1b[1mFailed: DID NOT RAISE RuntimeError\x1b[0m"
        for j, t in enumerate(ids)
    }
    for role in Role:
        sides["p0000"][str(role)] = _side(
            "p0000", role, SideStatus.FAILED, dict.fromkeys(ids, "failed"), messages=messages
        )
    report = build(meta, sides)
    (row,) = [r for r in report.rows if r.name == "p0000"]
    assert row.eco_class == "same-fail"
    assert [len(g.tests) for g in row.groups] == [3, 1]
    assert row.groups[1].message == "Failed: DID NOT RAISE RuntimeError"
    text = markdown(report)
    assert "Failing on both sides (not the candidate's doing), by message:" in text
    assert "_optimizer_state_dict_pre_hooks" in text and "cause: unknown" not in text
    page = html_page(report)
    assert "_optimizer_state_dict_pre_hooks" in page and "cause: unknown" not in page
    assert report.to_json()["projects"]["p0000"]["groups"][0]["tests"] == ids[:3]


def test_the_fix_lines_render_their_code_as_code_on_github() -> None:
    """The catalogue writes its fixes with `code` spans; summary.md escaped their backticks, so
    GitHub showed them as literal backticks ("\\`torch.load(...)\\`") in each cause's fix line."""
    from tests.test_markdown_rendered import rendered

    text = markdown(build(*_world(6, failing=4)))
    fixes = [line for line in text.splitlines() if "fix: " in line]
    assert fixes
    html = rendered("\n".join(fixes))
    assert "<code>" in html
    assert "\\`" not in "\n".join(fixes) and "`" not in html.replace("<code>", "")
