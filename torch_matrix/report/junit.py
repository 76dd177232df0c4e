"""JUnit XML: one testcase per cell x probe, so CI dashboards show the matrix natively.

Pure: ``render_junit(results)`` is a function of results. One ``<testsuite>`` per cell (its id is the
suite name), one ``<testcase classname="<cell id>" name="<probe>">`` per probe result. Mapping, under
the cell's own probe policy (the same rule as the verdict):

- a probe that counts as a failure: ``fail`` -> ``<failure>``; ``error`` / ``timeout`` / ``crash`` ->
  ``<error>`` (the probe or the interpreter broke: no verdict either way);
- ``skip`` / ``unsupported`` that the policy lets pass -> ``<skipped>``;
- a probe that failed only on a changed default in a compatible cell (torch.load's weights_only
  flip): still a ``<failure>`` (the plain call users make breaks), of type ``changed-default``, its
  message marked ``⚑`` and saying the cell is compatible and what works instead;
- a cell that was not installed: one ``install`` testcase, ``<skipped>`` for unsatisfiable (a fact,
  not a failure) and ``<error>`` for an install error; a required probe with no result -> ``<error>``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

from torch_matrix.vocab.records import (
    CRASH,
    ERROR,
    FAIL,
    INSTALLED,
    PASS,
    ProbeResult,
    TIMEOUT,
    UNSATISFIABLE,
    CellResult,
)
from torch_matrix.report.rows import CHANGED_DEFAULT_MARK, Judged, judge
from torch_matrix.judge.verdict import probe_counts_as_failure

_ERRORS = (ERROR, TIMEOUT, CRASH)
_TEXT_LIMIT = 20000  # per element; the full text stays in results.json


def _clean(text: Any) -> str:
    """XML 1.0 allows neither most control characters nor lone surrogates: replace them."""
    out = []
    for char in str(text)[:_TEXT_LIMIT]:
        code = ord(char)
        if (
            code in (0x9, 0xA, 0xD)
            or 0x20 <= code <= 0xD7FF
            or 0xE000 <= code <= 0xFFFD
            or code > 0xFFFF
        ):
            out.append(char)
        else:
            out.append("\ufffd")
    return "".join(out)


def _body(probe: Any) -> str:
    parts = []
    if probe.observed is not None or probe.expected is not None:
        parts.append(f"observed: {probe.observed!r}\nexpected: {probe.expected!r}")
    if probe.traceback:
        parts.append(probe.traceback)
    if probe.repro:
        parts.append("repro:\n" + probe.repro)
    return "\n\n".join(parts)


def _seconds(value: float) -> float:
    """A duration JUnit readers accept: NaN, infinities and negatives (a foreign shard) count as 0."""
    return value if math.isfinite(value) and value > 0 else 0.0


def _testcase(suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(
        suite,
        "testcase",
        classname=_clean(classname),
        name=_clean(name),
        time=f"{_seconds(seconds):.3f}",
    )


def _add(parent: ET.Element, tag: str, message: str, kind: str, body: str = "") -> None:
    element = ET.SubElement(
        parent, tag, message=_clean(" ".join(message.split())[:1000]), type=_clean(kind)
    )
    if body:
        element.text = _clean(body)


def _install_case(suite: ET.Element, result: CellResult) -> str:
    """A testcase for an install that did not happen: skipped (unsatisfiable) or an error. Returns
    which count it adds to."""
    case = _testcase(suite, result.cell.id, "install", result.timings.get("total", 0.0))
    if result.install.status == UNSATISFIABLE:
        _add(case, "skipped", f"unsatisfiable: {result.install.message}", UNSATISFIABLE)
        return "skipped"
    _add(
        case,
        "error",
        f"install {result.install.status}: {result.install.message}",
        result.install.status,
        result.install.message,
    )
    return "errors"


def _probe_case(
    suite: ET.Element, item: Judged, probe: ProbeResult, required: set[str]
) -> str | None:
    """A probe's testcase: passed, an error, a failure (a changed default says so) or skipped (a
    probe the policy or the cell does not require). Returns which count it adds to (None: passed)."""
    case = _testcase(suite, item.cell.id, probe.name, probe.duration_s)
    counts_bad = (
        probe_counts_as_failure(probe.status, dict(item.cell.policy)) and probe.name in required
    )
    message = f"{probe.status}: {probe.message}" if probe.message else probe.status
    if probe.status == PASS:
        if probe.message:  # a command probe's counts: "44 passed, 4 skipped"
            ET.SubElement(case, "system-out").text = _clean(probe.message)
        return None
    if counts_bad and probe.status in _ERRORS:
        _add(case, "error", message, probe.status, _body(probe))
        return "errors"
    if counts_bad and probe.name in item.verdict.advice:
        _add(
            case,
            "failure",
            f"{CHANGED_DEFAULT_MARK} changed default (the cell is {item.verdict.kind}): "
            f"{item.verdict.advice[probe.name].advice}",
            "changed-default",
            _body(probe),
        )
        return "failures"
    if counts_bad:
        _add(
            case,
            "failure",
            message,
            probe.status if probe.status == FAIL else f"{probe.status} (policy: fail)",
            _body(probe),
        )
        return "failures"
    note = (
        "" if probe.name in required or probe.status not in (FAIL, *_ERRORS) else " (not required)"
    )
    _add(case, "skipped", message + note, probe.status)
    return "skipped"


def _suite(item: Judged, counts: dict[str, float]) -> ET.Element:
    result, cell = item.result, item.cell
    suite = ET.Element("testsuite", name=_clean(cell.id))
    tally = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    total = 0.0
    if result.install.status != INSTALLED:
        tally["tests"] += 1
        tally[_install_case(suite, result)] += 1
    required = set(cell.required_probes or [p.name for p in result.probes])
    for probe in result.probes:
        tally["tests"] += 1
        total += probe.duration_s
        outcome = _probe_case(suite, item, probe, required)
        if outcome is not None:
            tally[outcome] += 1
    if result.install.status == INSTALLED:
        present = {probe.name for probe in result.probes}
        for name in cell.required_probes:
            if name not in present:
                case = _testcase(suite, cell.id, name, 0.0)
                _add(case, "error", "required probe produced no result", "missing")
                tally["tests"] += 1
                tally["errors"] += 1
    for key, value in tally.items():
        suite.set(key, str(value))
        counts[key] += value
    total = _seconds(total)
    suite.set("time", f"{total:.3f}")
    if result.finished_at:
        suite.set("timestamp", result.finished_at[:19])
    counts["time"] += total
    return suite


def render_junit(results: Iterable[CellResult | Judged], name: str = "torch-matrix") -> str:
    judged = judge(results)
    counts: dict[str, float] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    suites = [_suite(item, counts) for item in judged]
    root = ET.Element(
        "testsuites",
        name=_clean(name),
        tests=str(counts["tests"]),
        failures=str(counts["failures"]),
        errors=str(counts["errors"]),
        skipped=str(counts["skipped"]),
        time=f"{counts['time']:.3f}",
    )
    root.extend(suites)
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
