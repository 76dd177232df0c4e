"""Render a ``torch_matrix.report.diff.Diff`` and a run history: text, GitHub Markdown, JSON, issue drafts (pure)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torch_matrix.judge.catalogue import diagnose
from torch_matrix.report.diff import CellChange, Diff, NewFailure, ProbeChange
from torch_matrix.judge.snapshot import PassRate, RunRef
from torch_matrix.report.markdown import md_table
from torch_matrix.vocab.escaping import (
    md_code,
    md_fence,
    md_html,
    md_prose,
    md_text,
    md_title,
    shell_line,
    terminal,
)
from torch_matrix.plan.followups import is_followup_id
from torch_matrix.vocab.layout import followup_repro_command, repro_command

ISSUE_LABEL = "torch-matrix-break"


def _short(text: str, width: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip()
        for row in rows
    ]


def _verdict_pair(change: CellChange) -> str:
    return f"{change.old or '-'} -> {change.new or '-'}"


def _sections(diff: Diff) -> list[tuple[str, list[list[str]]]]:
    def cells(changes: Iterable[CellChange]) -> list[list[str]]:
        return [[c.cell, _verdict_pair(c), _short(c.reason, 100)] for c in changes]

    def probes(changes: Iterable[ProbeChange]) -> list[list[str]]:
        return [
            [c.cell, c.probe, f"{c.old or '-'} -> {c.new or '-'}", _short(c.message, 80)]
            for c in changes
        ]

    def failures(items: Iterable[NewFailure]) -> list[list[str]]:
        return [
            [
                f.cell,
                f.probe,
                f.status,
                f.first_run.label() if f.first_run else "-",
                _short(f.message, 80),
            ]
            for f in items
        ]

    return [
        ("newly broken", cells(diff.broken)),
        ("fixed", cells(diff.fixed)),
        ("appeared", cells(diff.appeared)),
        ("vanished", cells(diff.vanished)),
        ("other verdict changes", cells(diff.other)),
        ("changed probe statuses", probes(diff.probe_changes)),
        (
            "new failures (cell, probe, status, first failing run, message)",
            failures(diff.new_failures),
        ),
    ]


def headline(diff: Diff) -> str:
    old = diff.old.label() if diff.old else "nothing (first run)"
    return (
        f"{old} -> {diff.new.label()}: {len(diff.broken)} newly broken, {len(diff.fixed)} fixed, "
        f"{len(diff.appeared)} appeared, {len(diff.vanished)} vanished, "
        f"{len(diff.probe_changes)} probe status change(s), {len(diff.new_failures)} new failure(s)"
    )


def render_text(diff: Diff) -> str:
    lines = [f"diff {headline(diff)}"]
    for title, rows in _sections(diff):
        if rows:
            lines.append(f"{title} ({len(rows)}):")
            lines += _columns(rows)
    if diff.quiet:
        lines.append("no change")
    return terminal("\n".join(lines)) + "\n"


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return md_table(headers, rows).split("\n")


_HEADERS = {
    "changed probe statuses": ("cell", "probe", "status", "message"),
    "new failures (cell, probe, status, first failing run, message)": (
        "cell",
        "probe",
        "status",
        "first failing run",
        "message",
    ),
}


def render_markdown(diff: Diff, max_rows: int = 200) -> str:
    lines = ["## What changed since the last run", "", headline(diff), ""]
    if diff.quiet:
        lines += ["No change.", ""]
    for title, rows in _sections(diff):
        if not rows:
            continue
        heading = title.split(" (")[0]
        lines += [f"### {heading[0].upper() + heading[1:]} ({len(rows)})", ""]
        lines += _md_table(_HEADERS.get(title, ("cell", "verdict", "reason")), rows[:max_rows])
        if len(rows) > max_rows:
            lines.append(f"\n... and {len(rows) - max_rows} more (`torch-matrix diff` shows all)")
        lines.append("")
    return "\n".join(lines) + "\n"


def to_json(diff: Diff) -> dict[str, Any]:
    data = dataclasses.asdict(diff)
    data["passing"] = [list(pair) for pair in diff.passing]
    return data


def render_json(diff: Diff) -> str:
    data = to_json(diff)
    data.pop("passing")  # thousands of pairs: they are in the --issues file, where they are used
    return json.dumps(data, indent=2) + "\n"


# ---------------------------------------------------------------------------- issues

GITHUB_BODY_CHARS = 65_536  # GitHub refuses a longer issue body or comment
ISSUE_BODY_CHARS = 60_000  # what the nightly writes: below the limit, with room to spare
REPRO_CHARS = 8_000  # the probe's own snippet in the body; the bundle below has it whole


def issue_title(cell: str, probe: str) -> str:
    """Stable per cell+probe: the nightly finds its own issue again by this exact title (one line,
    as GitHub keeps it)."""
    return md_title(f"torch-matrix: {probe} fails in {cell}")


def bundle_file(cell: str, probe: str) -> str:
    """The file name of a failure's full repro bundle (in the nightly's ``history`` artifact)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{cell}--{probe}")[:200] + ".md"


def _reproduce_lines(failure: NewFailure) -> list[str]:
    """How to reproduce a new failure: the rerun command, the install by hand, the probe's repro."""
    lines: list[str] = []
    lines += [
        "### Reproduce",
        "",
        "From this repository, rerun just this cell:",
        "",
        md_fence(
            # a follow-up cell has no session of its own: the follow-up session reruns it
            followup_repro_command(failure.cell)
            if is_followup_id(failure.cell)
            else repro_command(failure.cell),
            "bash",
        ),
        "",
        "Or by hand, in a fresh environment:",
        "",
        md_fence(
            "\n".join(
                [
                    shell_line(["uv", "venv", "--python", failure.python or "3", "repro-venv"]),
                    shell_line(
                        [
                            "uv",
                            "pip",
                            "install",
                            "--python",
                            "repro-venv/bin/python",
                            *failure.requirements,
                        ]
                    ),
                ]
            ),
            "bash",
        ),
        "",
    ]
    if failure.repro:
        repro = failure.repro.strip()
        if len(repro) > REPRO_CHARS:
            repro = (
                repro[:REPRO_CHARS]
                + f"\n# ... {len(repro) - REPRO_CHARS} more characters: the bundle below has it whole"
            )
        lines += ["The probe's own repro:", "", md_fence(repro, "python"), ""]
    return lines


def issue_body(failure: NewFailure, run_url: str = "", fix: str = "") -> str:
    """The issue's head. ``fix``: the code fix the cell's stored verdict gives for the probe
    (``Verdict.fixes``: the user's own call site and the class the error names), else the
    catalogue's diagnosis of the message alone (a generic call)."""
    first = failure.first_run
    seen = (
        f"first failing run {md_code(first.id)} ({md_text(first.date or 'date unknown')}"
        if first
        else "first failing run unknown"
    )
    if first and first.commit:
        seen += f", commit {md_text(first.commit[:12])}"
    seen += ")" if first else ""
    pins = " ".join(failure.requirements)
    marker = f"cell={failure.cell} probe={failure.probe}"
    lines = [
        f"<!-- {ISSUE_LABEL} {md_html(marker)} -->",
        f"The nightly matrix found **{md_text(failure.probe)}** {md_code(failure.status)} in cell "
        f"{md_code(failure.cell)} (Python {md_text(failure.python or '?')}: {md_code(pins)}); {seen}.",
        "",
    ]
    if run_url:
        lines += [f"Run: {md_text(run_url)}", ""]
    if failure.message:
        lines += ["> " + md_text(_short(failure.message, 1000)), ""]
    finding = diagnose(failure.message) if not fix else None
    if fix or finding is not None:  # an API change with a known code fix: the answer to merge first
        lines += [
            "### Fix first",
            "",
            md_prose(fix or (finding.advice() if finding else "")),
            "",
            "Excluding the release is the alternative for code that cannot change.",
            "",
        ]
    lines += _reproduce_lines(failure)
    lines += [
        f"The nightly closes this issue when {md_code(failure.probe)} passes again in {md_code(failure.cell)}."
    ]
    return "\n".join(lines) + "\n"


def issue_text(
    head: str, bundle: str, cell: str, probe: str, run_url: str = "", limit: int = ISSUE_BODY_CHARS
) -> str:
    """The issue's body: ``head`` (``issue_body``) and the repro bundle in a ``<details>``, at most
    ``limit`` characters. A bundle that does not fit is cut, shown as text in a fence (nothing it
    opened is left open), and the body points to the whole bundle in the run's ``history`` artifact."""
    summary = f"<details><summary>{md_html(f'torch-matrix repro {cell} {probe}')}</summary>\n\n"
    whole = f"{head}\n{summary}{bundle.rstrip()}\n\n</details>\n"
    if len(whole) <= limit:
        return whole
    where = f"{md_code('bundles/' + bundle_file(cell, probe))} in the {md_code('history')} artifact of the run"
    pointer = (
        f"\n> [!NOTE]\n> Cut to fit GitHub's {GITHUB_BODY_CHARS:,} characters. The whole bundle is "
        f"{where}" + (f": {md_text(run_url)}" if run_url else "") + ".\n"
    )
    head = head if len(head) <= limit // 2 else md_fence(head[: limit // 2]) + "\n"
    room = limit - len(head) - len(summary) - len(pointer) - 200
    while (
        True
    ):  # the fence grows with the longest backtick run in what is kept: measure, then shrink
        kept = max(room, 0)
        cut = md_fence(bundle[:kept] + f"\n... ({len(bundle) - kept:,} more characters)")
        text = f"{head}\n{summary}{cut}\n\n</details>\n{pointer}"
        if len(text) <= limit or kept == 0:
            return text
        room = kept - (len(text) - limit)


def issue_plan(
    diff: Diff,
    run_url: str = "",
    bundles: Mapping[tuple[str, str], str] | None = None,
    fixes: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """What the nightly does on GitHub: open (or comment on) one issue per new failure; close
    the issue of every cell+probe that passes in this run. ``bundles``: each failure's repro bundle
    (``report.repro``), put in its issue's body (``issue_text``); ``fixes``: each failure's code
    fix from its cell's verdict (``issue_body``)."""
    bundles = bundles or {}
    fixes = fixes or {}

    def body(failure: NewFailure) -> str:
        bundle = bundles.get(
            (failure.cell, failure.probe), "(torch-matrix repro could not build it)"
        )
        head = issue_body(failure, run_url, fixes.get((failure.cell, failure.probe), ""))
        return issue_text(head, bundle, failure.cell, failure.probe, run_url)

    return {
        "label": ISSUE_LABEL,
        "run": diff.new.id,
        "open": [
            {
                "title": issue_title(f.cell, f.probe),
                "cell": f.cell,
                "probe": f.probe,
                "body": body(f),
                "bundle": bundle_file(f.cell, f.probe),
                "comment": f"Failing again in run {md_code(diff.new.id)} ({md_text(diff.new.date)})"
                + (f": {md_text(run_url)}" if run_url else "")
                + f"\n\n> {md_text(_short(f.message, 500))}",
            }
            for f in diff.new_failures
        ],
        "close": sorted(issue_title(cell, probe) for cell, probe in diff.passing),
        "close_comment": f"Passes again in run {md_code(diff.new.id)} ({md_text(diff.new.date)})"
        + (f": {md_text(run_url)}" if run_url else ""),
    }


# ---------------------------------------------------------------------------- history


def history_rows(runs: Sequence[Any]) -> list[list[str]]:
    return [
        [
            row.run.id,
            row.run.date[:16].replace("T", " "),
            row.run.spec,
            row.run.commit[:10] or "-",
            str(row.cells),
            str(row.counts.get("compatible", 0)),
            str(row.counts.get("incompatible", 0)),
            str(row.counts.get("unsatisfiable", 0)),
            str(row.counts.get("environment", 0)),
            str(row.counts.get("error", 0)),
        ]
        for row in runs
    ]


HISTORY_HEADERS = (
    "run",
    "date",
    "spec",
    "commit",
    "cells",
    "ok",
    "incompatible",
    "unsatisfiable",
    "environment",
    "error",
)
FLAKY_HEADERS = ("cell", "probe", "pass rate", "last status")


def flaky_rows(
    rates: Mapping[tuple[str, str], PassRate],
    last_status: Mapping[tuple[str, str], str],
    limit: int | None = None,
) -> list[list[str]]:
    """Cell+probe pairs that both passed and failed in the window, least reliable first."""
    flaky = sorted((rate.rate or 0.0, key) for key, rate in rates.items() if rate.flaky)
    rows = [
        [
            cell,
            probe,
            f"{rates[(cell, probe)].passed}/{rates[(cell, probe)].runs} ({100 * share:.0f}%)",
            last_status.get((cell, probe), "-"),
        ]
        for share, (cell, probe) in flaky
    ]
    return rows[:limit] if limit else rows


def render_history_text(
    runs_by_spec: Mapping[str, tuple[Sequence[Any], list[list[str]], int]],
) -> str:
    lines: list[str] = []
    for spec, (runs, flaky, window) in runs_by_spec.items():
        lines.append(f"spec {spec}: {len(runs)} run(s) shown")
        lines += _columns([list(HISTORY_HEADERS)] + history_rows(runs))
        if flaky:
            lines.append(
                f"flaky over the last {window} run(s): {len(flaky)} cell+probe pair(s) both passed and failed"
            )
            lines += _columns([list(FLAKY_HEADERS)] + flaky)
        else:
            lines.append(f"flaky over the last {window} run(s): none")
        lines.append("")
    return terminal("\n".join(lines)) if lines else "no runs in the history\n"


def render_history_markdown(
    runs_by_spec: Mapping[str, tuple[Sequence[Any], list[list[str]], int]],
) -> str:
    lines: list[str] = []
    for spec, (runs, flaky, window) in runs_by_spec.items():
        lines += (
            [f"## History of {md_code(spec)}", ""]
            + _md_table(HISTORY_HEADERS, history_rows(runs))
            + [""]
        )
        lines += [f"### Flaky over the last {window} run(s)", ""]
        lines += (_md_table(FLAKY_HEADERS, flaky) if flaky else ["None."]) + [""]
    return "\n".join(lines) + "\n" if lines else "No runs in the history.\n"


def runref_json(run: RunRef) -> dict[str, str]:
    return dataclasses.asdict(run)
