"""A pytest plugin the probe runner loads into a command probe's pytest (``-p torch_matrix.probes.pytest_outcomes``).

It appends one JSON line per test outcome and per failed collection to the file named by
``$TORCH_MATRIX_PYTEST_OUT``, with pytest's own node ids
(``tests/test_resume.py::test_resume_from_checkpoint``), so the runner can say which tests
failed rather than only "the command exited with 1". Stdlib only; any pytest from 3.x on.
Without the variable it does nothing.
"""

import json
import os
import re

OUT_ENV = "TORCH_MATRIX_PYTEST_OUT"
NOW_ENV = "TORCH_MATRIX_PROBE_NOW"  # the runner's file naming the running probe; ours: <it>.test
MESSAGE_CHARS = 300


def _write(record):
    path = os.environ.get(OUT_ENV)
    if not path:
        return
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def _message(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = getattr(crash, "message", None)
    if not text:
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
            text = str(longrepr[2])
        else:
            text = str(longrepr or "")
            lines = [line for line in text.splitlines() if line.strip()]
            errors = [line for line in lines if line.startswith("E ")]
            text = (errors or lines or [""])[-1]
            if text.startswith("E "):
                text = text[2:]
    text = " ".join(str(text).split())
    return text[:MESSAGE_CHARS]


TEXT_CHARS = 2000  # the whole crash message where it is longer than the message: its advice
FRAMES_KEPT = 12
_LOCATION = re.compile(r"^([^\s:][^:]*):(\d+): (.*)$")


def _frames(report):
    """The traceback's frames as pytest printed them, innermost last: ``{"path", "line", "code"}``
    (``src/pkg/io.py``, 42, ``torch.load(path)``). Read from pytest's text (long and short styles,
    and a collection error's import traceback), so any pytest from 3.x on."""
    text = str(getattr(report, "longrepr", "") or "")
    frames = []
    marked = ""
    previous = ""
    for line in text.splitlines():
        if line.startswith(">"):
            marked = line[1:].strip()
        found = _LOCATION.match(line)
        if found:
            path, number, rest = found.groups()
            frame = {"path": path, "line": int(number), "code": marked}
            if rest.startswith("in "):  # short style: the code follows
                frame["function"] = rest[3:].strip()
                frame["code"] = ""
            frames.append(frame)
            marked = ""
        elif frames and not frames[-1]["code"] and line.startswith("    ") and previous:
            frames[-1]["code"] = line.strip()
        previous = line
    return frames[-FRAMES_KEPT:]


def _detail(report, record):
    """Adds a failure's frames and, where the message was cut, its whole text."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    full = " ".join(str(getattr(crash, "message", "") or "").split())
    if not full:
        text = str(getattr(report, "longrepr", "") or "")
        errors = [line[2:].strip() for line in text.splitlines() if line.startswith("E ")]
        full = " ".join(" ".join(errors).split())
    if len(full) > MESSAGE_CHARS:
        record["text"] = full[:TEXT_CHARS]
    frames = _frames(report)
    if frames:
        record["frames"] = frames
    return record


def pytest_runtest_logstart(nodeid, location):
    """The test starting now, for the cell's heartbeat (``--`` a test that hangs is named)."""
    path = os.environ.get(NOW_ENV)
    if not path:
        return
    try:
        with open(path + ".test", "w") as handle:
            handle.write(nodeid)
    except OSError:
        pass


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if getattr(report, "wasxfail", None) is not None:
            outcome = "xfailed" if report.skipped else "xpassed"
        record = {
            "nodeid": report.nodeid,
            "when": report.when,
            "outcome": outcome,
            "message": _message(report) if outcome not in ("passed", "xpassed") else "",
            "duration": round(float(getattr(report, "duration", 0.0) or 0.0), 4),
        }
        _write(_detail(report, record) if outcome in ("failed", "error") else record)


def pytest_collectreport(report):
    if report.outcome == "failed":
        record = {
            "nodeid": report.nodeid,
            "when": "collect",
            "outcome": "error",
            "message": _message(report),
        }
        _write(_detail(report, record))


def pytest_sessionfinish(session, exitstatus):
    _write({"event": "finish", "exitstatus": int(exitstatus)})


# ------------------------------------------------------------------ judging (in the runner)

# pytest's exit codes (pytest.ExitCode): 0 all passed, 1 some tests failed, 2 interrupted
# (a collection error, Ctrl-C), 3 internal error, 4 usage error, 5 no tests collected.
_NOT_A_TEST_RESULT = {
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest usage error (bad option or path)",
    5: "pytest collected no tests",
}
LISTED = 10
_PYTEST_WORD = re.compile(r"(^|[\s/;&|(])(py\.test|pytest)(\s|$)")


def runs_pytest(command):
    return bool(_PYTEST_WORD.search(command))


def read_records(path):
    records = []
    try:
        with open(path) as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return records


# pytest's own order for its summary line ("1 failed, 44 passed, 4 skipped").
_SUMMARY_ORDER = ("failed", "passed", "skipped", "xfailed", "xpassed", "error")
NO_EVIDENCE = "no evidence"


def per_test(records):
    """Each test's one outcome (node id -> outcome), as pytest counts them: a failing setup or
    teardown is an ``error``, a failing call ``failed``, else the call's outcome (or the skip)."""
    outcomes = {}
    for record in records:
        if "nodeid" not in record or record.get("when") == "collect":
            continue
        nodeid, when, outcome = record["nodeid"], record.get("when"), record.get("outcome")
        if outcome == "failed":
            outcome = "failed" if when == "call" else "error"
        previous = outcomes.get(nodeid)
        if previous in ("failed", "error") and outcome not in ("failed", "error"):
            continue  # a passing teardown after a failed call: still failed
        if previous == "failed" and outcome == "error":
            continue
        outcomes[nodeid] = outcome
    return outcomes


def counts_text(outcomes):
    """``44 passed, 4 skipped`` (``0 passed`` when nothing ran)."""
    counts = {}
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    shown = [
        "%d %s"
        % (counts[name], name if name != "error" else ("error" if counts[name] == 1 else "errors"))
        for name in _SUMMARY_ORDER
        if counts.get(name)
    ]
    if not counts.get("passed"):
        shown.insert(1 if counts.get("failed") else 0, "0 passed")
    return ", ".join(shown)


def failure_groups(records, cap=LISTED):
    """Failed tests grouped by message, largest group first: every failure counted, at most ``cap``
    node ids kept per group (``more`` says how many were left out)."""
    groups = {}
    order = []
    for record in records:
        if (
            record.get("outcome") != "failed"
            or "nodeid" not in record
            or record.get("when") == "collect"
        ):
            continue
        message = record.get("message") or "(no message)"
        name = record["nodeid"] + (
            "" if record.get("when") == "call" else " (%s)" % record.get("when")
        )
        if message not in groups:
            groups[message] = []
            order.append(message)
        if name not in groups[message]:
            groups[message].append(name)
    ranked = sorted(order, key=lambda m: (-len(groups[m]), order.index(m)))
    return [
        {
            "message": m,
            "count": len(groups[m]),
            "nodeids": groups[m][:cap],
            "more": max(0, len(groups[m]) - cap),
        }
        for m in ranked
    ]


# What one probe result keeps (the runner cuts evidence past 64,000 characters of JSON): the first
# failures in full, the largest groups with up to LISTED node ids each; the message names fewer.
KEPT_FAILURES = 20
KEPT_GROUPS = 20
SHOWN_GROUPS = 5
SHOWN_IDS = 3


def groups_text(groups, more_groups=0, more_failures=0, ids=SHOWN_IDS, shown=SHOWN_GROUPS):
    """``tests/a.py::t1 -- AssertionError: ...`` for one failure; with more, each group prefixed by its
    size: ``[168] tests/a.py::t1, tests/a.py::t2, +166 more -- AttributeError: ...; [1] ...``; past
    ``shown`` groups, ``+K more groups (N failures)``: every failure is counted."""
    parts = []
    for group in groups[:shown]:
        names = list(group["nodeids"][:ids])
        hidden = group["count"] - len(names)
        text = ", ".join(names) + (", +%d more" % hidden if hidden > 0 else "")
        size = (
            "[%d] " % group["count"] if len(groups) > 1 or more_groups or group["count"] > 1 else ""
        )
        parts.append("%s%s -- %s" % (size, text, group["message"]))
    rest = groups[shown:]
    more_groups += len(rest)
    more_failures += sum(group["count"] for group in rest)
    if more_groups:
        parts.append(
            "+%d more group%s (%d failure%s)"
            % (
                more_groups,
                "" if more_groups == 1 else "s",
                more_failures,
                "" if more_failures == 1 else "s",
            )
        )
    return "; ".join(parts)


def _kept(entry, record):
    """A failure as the evidence keeps it: its frames and whole text too, where recorded."""
    for key in ("text", "frames"):
        if record.get(key):
            entry[key] = record[key]
    return entry


def judge(code, records, output_tail=""):
    """(status, message, evidence) for a pytest command that exited with ``code``.

    Failed tests make the probe ``fail``; the message counts every test like pytest does
    (``1 failed, 44 passed, 4 skipped``) and groups the failures by message, largest group
    first, node ids capped per group. Skipped and xfailed tests are not failures. A run in
    which no test passed (every selected test skipped, or none collected) is ``skip`` with
    ``0 passed, N skipped: no evidence``: it says nothing about the versions, good or bad. A
    collection error, a usage error or an internal error is ``error``.
    """
    tests = [r for r in records if "nodeid" in r and r.get("when") != "collect"]
    counts = {}
    for record in tests:
        counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
    outcomes = per_test(records)
    summary = counts_text(outcomes)
    failed = [r for r in tests if r["outcome"] == "failed"]
    collect_errors = [r for r in records if r.get("when") == "collect"]
    evidence = {"pytest_exit": code, "tests": counts, "summary": summary}
    if failed:
        evidence["failed"] = [
            _kept({"nodeid": r["nodeid"], "when": r["when"], "message": r["message"]}, r)
            for r in failed[:KEPT_FAILURES]
        ]
        groups = failure_groups(records)
        evidence["failure_groups"] = groups[:KEPT_GROUPS]
        if len(groups) > KEPT_GROUPS:
            evidence["more_groups"] = {
                "groups": len(groups) - KEPT_GROUPS,
                "failures": sum(g["count"] for g in groups[KEPT_GROUPS:]),
            }
    if collect_errors:
        evidence["collection_errors"] = [
            _kept({"nodeid": r["nodeid"], "message": r["message"]}, r)
            for r in collect_errors[:KEPT_FAILURES]
        ]
    ran = sum(
        1 for outcome in outcomes.values() if outcome in ("passed", "xpassed", "failed", "error")
    )
    if code in (0, 5) and not ran:
        evidence["no_evidence"] = True
        return (
            "skip",
            "%s: %s%s"
            % (
                summary if outcomes else "0 passed, 0 skipped",
                NO_EVIDENCE,
                " (pytest collected no tests)" if code == 5 else "",
            ),
            evidence,
        )
    if code == 0:
        return "pass", summary, evidence
    if code in _NOT_A_TEST_RESULT:
        what = _NOT_A_TEST_RESULT[code]
        if collect_errors:
            first = collect_errors[0]
            what = "collection error in %s: %s" % (first["nodeid"] or "(session)", first["message"])
            if len(collect_errors) > 1:
                what += " (+%d more)" % (len(collect_errors) - 1)
        else:
            lines = [line for line in output_tail.splitlines() if line.strip()]
            errors = [line for line in lines if "error" in line.lower()]
            if (errors or lines) and code in (3, 4):
                what += ": " + " ".join((errors or lines)[-1].split())[:MESSAGE_CHARS]
        return "error", "%s (pytest exit %d): the tests did not run" % (what, code), evidence
    if failed:
        more = evidence.get("more_groups") or {}
        return (
            "fail",
            "%s: %s"
            % (
                summary,
                groups_text(
                    evidence["failure_groups"], more.get("groups", 0), more.get("failures", 0)
                ),
            ),
            evidence,
        )
    return "fail", "pytest exited with code %d (%s)" % (code, summary), evidence
