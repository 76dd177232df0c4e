"""A pytest plugin the probe runner loads into a command probe's pytest (``-p probes.pytest_outcomes``).

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


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if getattr(report, "wasxfail", None) is not None:
            outcome = "xfailed" if report.skipped else "xpassed"
        _write({"nodeid": report.nodeid, "when": report.when, "outcome": outcome,
                "message": _message(report) if outcome not in ("passed", "xpassed") else "",
                "duration": round(float(getattr(report, "duration", 0.0) or 0.0), 4)})


def pytest_collectreport(report):
    if report.outcome == "failed":
        _write({"nodeid": report.nodeid, "when": "collect", "outcome": "error",
                "message": _message(report)})


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


def judge(code, records, output_tail=""):
    """(status, message, evidence) for a pytest command that exited with ``code``.

    Failed tests make the probe ``fail`` and are named by node id; skipped and xfailed
    tests are not failures; a collection error, a usage error, an internal error or no
    tests at all is ``error``: that is no evidence about the versions under test.
    """
    tests = [r for r in records if "nodeid" in r and r.get("when") != "collect"]
    counts = {}
    for record in tests:
        counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
    failed = [r for r in tests if r["outcome"] == "failed"]
    collect_errors = [r for r in records if r.get("when") == "collect"]
    evidence = {"pytest_exit": code, "tests": counts}
    if failed:
        evidence["failed"] = [{"nodeid": r["nodeid"], "when": r["when"], "message": r["message"]}
                              for r in failed[:50]]
    if collect_errors:
        evidence["collection_errors"] = [{"nodeid": r["nodeid"], "message": r["message"]}
                                         for r in collect_errors[:50]]
    if code == 0:
        return "pass", "", evidence
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
        return "error", "%s (exit %d): not evidence about this cell" % (what, code), evidence
    if failed:
        names = []
        for record in failed:
            name = record["nodeid"] + ("" if record["when"] == "call" else " (%s)" % record["when"])
            if name not in names:
                names.append(name)
        shown = ", ".join(names[:LISTED]) + (", ... (+%d more)" % (len(names) - LISTED)
                                              if len(names) > LISTED else "")
        total = sum(counts.values())
        message = "%d of %d tests failed: %s" % (len(names), total, shown)
        if failed[0].get("message"):
            message += " -- %s" % failed[0]["message"]
        return "fail", message, evidence
    return "fail", "pytest exited with code %d" % code, evidence
