"""Real-wheel tests that cannot run say so loudly.

A ``realwheels`` test that cannot build its environment (offline, no interpreter, no
wheel) is skipped, so an offline run stays usable; but it is never quiet about it:

- the terminal summary ends with one line per skipped real-wheel test and its reason,
  under a banner that says the real-torch checks did not run;
- with ``TORCH_MATRIX_REQUIRE_REALWHEELS=1`` (CI machines that have the wheels: ``.ci/run``
  sets it) such a skip is a failure.

Tests deselected with ``-m "not realwheels"`` were not asked for and are not reported.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

# The properties check what holds, not how fast: on a shared 2-core machine one example can take
# 300 ms under load, and hypothesis's default 200 ms deadline would fail a correct test.
settings.register_profile("any-machine", deadline=None)
settings.load_profile("any-machine")

REQUIRE_ENV = "TORCH_MATRIX_REQUIRE_REALWHEELS"
_SKIPPED: list[tuple[str, str]] = []


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or item.get_closest_marker("realwheels") is None:
        return
    reason = _reason(report)
    _SKIPPED.append((item.nodeid, reason))
    if os.environ.get(REQUIRE_ENV, "") == "1":
        report.outcome = "failed"
        report.longrepr = (
            f"{REQUIRE_ENV}=1: this real-wheel test must run here, but it was skipped: {reason}"
        )


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _SKIPPED:
        return
    try:
        _summary(terminalreporter)
    except OSError as error:
        # stdout on a full disk (ENOSPC): the run must still end with pytest's own last line, so
        # the hook never raises; the banner goes to stderr if that can be written at all.
        try:
            sys.stderr.write(
                f"REAL-WHEEL CHECKS DID NOT RUN: {len(_SKIPPED)} real-wheel test(s) skipped "
                f"(the summary could not be written to stdout: {error})\n"
            )
            sys.stderr.flush()
        except OSError:
            pass


def _summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    terminalreporter.section("REAL-WHEEL CHECKS DID NOT RUN", sep="!", red=True, bold=True)
    for nodeid, reason in _SKIPPED:
        write(f"realwheels skipped: {nodeid}: {reason}", red=True)
    required = os.environ.get(REQUIRE_ENV, "") == "1"
    write(
        f"{len(_SKIPPED)} real-wheel test(s) skipped: no real-torch check ran for them"
        + ("" if required else f"; set {REQUIRE_ENV}=1 to make this a failure"),
        red=True,
        bold=True,
    )
