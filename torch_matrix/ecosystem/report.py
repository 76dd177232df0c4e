"""An ecosystem run's reports (issue 34): the JSON, a Markdown summary that fits a GitHub issue, the
HTML page, and the difference between two runs. Pure: functions of the run's side results.

The report is built from the side results alone (``build``), so the shards of one run, merged,
give the same report as the run unsharded: every project's class, evidence and tests come from
its own two result files. Only the measured seconds differ between two runs of the same thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from torch_matrix.judge.catalogue import Cause, cause_key, cause_of, with_fix_proofs
from torch_matrix.ecosystem.classify import Classified, classify
from torch_matrix.ecosystem.records import CLASS_ORDER, RETRIES, EcoClass, Role, SideRun, retry_key
from torch_matrix.vocab.escaping import md_code, md_prose, md_text, shell_line

GITHUB_ISSUE_CHARS = 65_536
REPORT_SCHEMA = 1
SHOWN_IDS = 5


# What differs between two runs of the same failure and says nothing about it, replaced in the
# key a regression's failures are grouped by (the report shows one real message verbatim, and the
# cause is read from it, never from the key): memory addresses (``object at 0x7fcc1d3a8fa0``),
# temporary paths (pytest's ``/tmp/pytest-of-root/pytest-12/test_x0``, tempfile's ``tmpk3j_a9x1``,
# the run's own ``.../work/<project>/<side>``), process ids and random seeds.
_PATH_HEAD = r"(?:/[^\s'\"/:]+)*"
_NOISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]"), ""),
    (re.compile(_PATH_HEAD + r"/pytest-of-[^\s'\"/]+/pytest-\d+/[^\s'\"/:]+"), "<tmp>"),
    (
        re.compile(_PATH_HEAD + r"/work/[^\s'\"/]+/(?:baseline|candidate|bisect/[^\s'\"/]+)(?=/)"),
        "<work>",
    ),
    (re.compile(_PATH_HEAD + r"/tmp[a-z0-9_]{8}(?![A-Za-z0-9_])"), "<tmp>"),
    (re.compile(r"\bat 0x[0-9a-fA-F]+\b"), "at 0x?"),
    (re.compile(r"\b0x[0-9a-fA-F]{9,16}\b"), "0x?"),
    (re.compile(r"\b(pid|PID|process|Process)(\s*[=:]?\s*)\d+\b"), r"\1\2<n>"),
    (re.compile(r"@seed\(\d+\)"), "@seed(<n>)"),
    (re.compile(r"\b(seed|randomly-seed)(\s*[=:]\s*)\d+\b"), r"\1\2<n>"),
    (re.compile(r"@reproduce_failure\([^)]*\)"), "@reproduce_failure(...)"),
)


def message_key(message: str) -> str:
    """``message`` without what differs between runs of the same failure (``_NOISE``), its
    whitespace collapsed: what a regression's failing tests are grouped by."""
    for pattern, replacement in _NOISE:
        message = pattern.sub(replacement, message)
    return " ".join(message.split())


@dataclass(frozen=True)
class FailureGroup:
    """Failing tests whose messages differ at most in run-specific noise (``message_key``):
    ``message`` is the first test's own, verbatim; ``variants`` how many different messages the
    group's tests have (1: all the same)."""

    message: str
    tests: tuple[str, ...]
    cause: Cause
    variants: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "key": message_key(self.message),
            "variants": self.variants,
            "tests": list(self.tests),
            "cause": self.cause.to_json(),
        }


@dataclass(frozen=True)
class Row:
    """One project in the report."""

    name: str
    classified: Classified
    sides: Mapping[str, SideRun]  # "baseline", "candidate", "baseline-retry", ... (retry_key)
    groups: tuple[FailureGroup, ...] = ()
    bisect: Mapping[str, Any] = field(default_factory=dict)  # first bad, pin, proof
    project: Mapping[str, Any] = field(default_factory=dict)  # its entry in run.json

    @property
    def eco_class(self) -> EcoClass:
        return self.classified.eco_class

    def seconds(self) -> float:
        """Side time: every side's install and tests, added up (two sides at once count twice)."""
        return sum(s.seconds + s.install_seconds for s in self.sides.values())

    def span(self) -> tuple[float, float] | None:
        """When the project's first side began and its last ended (retries and bisection
        included); None where a part of it has no recorded times (files from before they were
        recorded), or nothing ran (skipped)."""
        if self.eco_class == EcoClass.SKIPPED or not self.sides:
            return None
        spans: list[tuple[Any, Any]] = [(s.started, s.ended) for s in self.sides.values()]
        if self.bisect:
            spans.append((self.bisect.get("started"), self.bisect.get("ended")))
        numbers = (int, float)
        if not all(isinstance(a, numbers) and isinstance(b, numbers) for a, b in spans):
            return None
        return float(min(a for a, _ in spans)), float(max(b for _, b in spans))

    def wall_seconds(self) -> float | None:
        """Wall time: from the start of the first side to the end of the last."""
        span = self.span()
        return span[1] - span[0] if span else None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.classified.to_json(),
            "groups": [g.to_json() for g in self.groups],
            "sides": {
                key: {
                    "torch": side.torch,
                    "status": str(side.status),
                    "summary": side.summary,
                    "detail": side.detail,
                    "log": side.log,
                    "seconds": round(side.seconds + side.install_seconds, 1),
                    "network": side.network,
                    "memory_limit": side.memory_limit,
                    "confinement": side.confinement,
                }
                for key, side in sorted(self.sides.items())
            },
            "bisect": dict(self.bisect),
            "seconds": round(self.seconds(), 1),
            "wall_seconds": _rounded(self.wall_seconds()),
        }


@dataclass(frozen=True)
class Report:
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]
    rows: tuple[Row, ...]
    missing: tuple[str, ...] = ()  # listed in the projects file, no result in any shard

    def counts(self) -> dict[str, int]:
        counts = {str(c): 0 for c in CLASS_ORDER}
        for row in self.rows:
            counts[str(row.eco_class)] += 1
        return counts

    def wall_time(self) -> dict[str, Any]:
        """The run's wall time: its projects' wall times added up (``seconds``: each project runs
        after the one before; None where none was recorded), the projects it covers and those
        with no recorded times, and the first start and the last end (UTC)."""
        spans = {row.name: row.span() for row in self.rows if row.eco_class != EcoClass.SKIPPED}
        known = [span for span in spans.values() if span is not None]
        return {
            "seconds": round(sum(end - start for start, end in known), 1) if known else None,
            "projects": len(known),
            "not_recorded": sorted((n for n, span in spans.items() if span is None), key=str.lower),
            "first_start": _utc(min(start for start, _ in known)) if known else None,
            "last_end": _utc(max(end for _, end in known)) if known else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "baseline": dict(self.baseline),
            "candidate": dict(self.candidate),
            "counts": self.counts(),
            "missing": list(self.missing),
            "wall_time": self.wall_time(),
            "projects": {row.name: row.to_json() for row in self.rows},
        }


def _rounded(seconds: float | None) -> float | None:
    return round(seconds, 1) if seconds is not None else None


def _utc(moment: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(moment, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


NOT_RECORDED = "not recorded"


def wall_text(seconds: float | None, skipped: bool = False) -> str:
    """A wall time as the reports show it: ``177 s``, ``not run`` (skipped) or ``not recorded``
    (results from before the times were recorded): never a 0 that was not measured."""
    if skipped:
        return "not run"
    return f"{seconds:.0f} s" if seconds is not None else NOT_RECORDED


def total_wall_text(report: Report) -> str:
    """The run's wall time in one sentence (Markdown, HTML, the terminal)."""
    wall = report.wall_time()
    if wall["seconds"] is None:
        return f"wall time {NOT_RECORDED} (results written before the times were recorded)"
    text = (
        f"wall time {wall['seconds']:.0f} s in all ({wall['projects']} project(s), each from its "
        f"first side's start to its last side's end, retries and bisection included; "
        f"first start {wall['first_start']}, last end {wall['last_end']})"
    )
    if wall["not_recorded"]:
        text += f"; {NOT_RECORDED} for {', '.join(wall['not_recorded'])}"
    return text


def groups_of(
    classified: Classified, context: str = "", candidate: SideRun | None = None
) -> tuple[FailureGroup, ...]:
    """A regression's failing tests grouped by their message less its run-specific noise
    (``message_key``), largest group first, each with its cause from the catalogue, read from the
    group's first test's own message (``context``: the candidate's log tail; ``candidate``: its
    side, whose first failing test of a group gives the cause its whole text and its call site)."""
    by_key: dict[str, list[str]] = {}
    for test in classified.new_failures:
        message = classified.messages.get(test, "") or "(no message)"
        text = candidate.texts.get(test, "") if candidate else ""
        frames = candidate.frames.get(test, ()) if candidate else ()
        by_key.setdefault(message_key(message) + cause_key(message, text, frames), []).append(test)
    ranked = sorted(by_key.items(), key=lambda item: (-len(item[1]), item[0]))
    groups = []
    for _, tests in ranked:
        first = sorted(tests)[0]
        message = classified.messages.get(first, "") or "(no message)"
        variants = len({classified.messages.get(t, "") or "(no message)" for t in tests})
        text = candidate.texts.get(first, "") if candidate else ""
        frames = candidate.frames.get(first, ()) if candidate else ()
        cause = cause_of(message, f"{text}\n{context}" if text else context, frames)
        if candidate is not None and candidate.fix_proofs:  # rerun with the fix (``fixproofs``)
            cause = with_fix_proofs(cause, [{"nodeid": t} for t in tests], candidate.fix_proofs)
        groups.append(FailureGroup(message, tuple(sorted(tests)), cause, variants))
    return tuple(groups)


def _retries(found: Mapping[str, SideRun], role: Role) -> list[SideRun]:
    keys = (retry_key(str(role), attempt) for attempt in range(1, RETRIES + 1))
    return [found[key] for key in keys if key in found]


def build(
    meta: Mapping[str, Any],
    sides: Mapping[str, Mapping[str, SideRun]],
    bisections: Mapping[str, Mapping[str, Any]] | None = None,
) -> Report:
    """The report of one run: ``meta`` is run.json, ``sides`` each project's side results."""
    skip = {p["name"]: p.get("skip", "") for p in meta.get("projects", ())}
    entries = {p["name"]: p for p in meta.get("projects", ())}
    rows = []
    for name in sorted(sides, key=str.lower):
        found = sides[name]
        baseline, candidate = found.get(str(Role.BASELINE)), found.get(str(Role.CANDIDATE))
        if baseline is None or candidate is None:
            continue
        classified = classify(
            baseline,
            candidate,
            skip_reason=skip.get(name, ""),
            retry_baseline=_retries(found, Role.BASELINE),
            retry_candidate=_retries(found, Role.CANDIDATE),
        )
        groups: tuple[FailureGroup, ...] = ()
        if classified.eco_class == EcoClass.REGRESSED:
            groups = groups_of(classified, candidate.output_tail, candidate)
        elif classified.eco_class == EcoClass.SAME_FAIL and candidate.failing():
            # broken on both sides: why, for its maintainer (the candidate's messages)
            failing = tuple(sorted(candidate.failing()))
            messages = {t: _NOISE[0][0].sub("", candidate.messages.get(t, "")) for t in failing}
            both = replace(classified, new_failures=failing, messages=messages)
            groups = groups_of(both, candidate.output_tail, candidate)
        # a skipped project ran nothing in this run: side files left from before its skip reason
        # are not its results (they showed a stale 'broken' and added to the side time)
        kept = {} if classified.eco_class == EcoClass.SKIPPED else dict(found)
        bisect = (bisections or {}).get(name, {})
        rows.append(Row(name, classified, kept, groups, bisect, entries.get(name, {})))
    done = {row.name for row in rows}
    missing = tuple(sorted(n for n in skip if n not in done))
    rows.sort(key=lambda r: (CLASS_ORDER.index(r.eco_class), r.name.lower()))
    return Report(meta.get("baseline", {}), meta.get("candidate", {}), tuple(rows), missing)


# ------------------------------------------------------------------ Markdown


def _torch(side: Mapping[str, Any]) -> str:
    return str(side.get("label") or side.get("torch") or "?")


def markdown(report: Report, *, limit: int = GITHUB_ISSUE_CHARS, link: str = "") -> str:
    """The summary for a GitHub issue: counts, then each project needing a human (regressed,
    flaky, spurious, fixed) with its evidence, then the rest in one line each. Cut to ``limit``
    characters at a row's end, with the number of rows left out and ``link`` to the full report."""
    head = [
        f"# Ecosystem run: torch {_torch(report.baseline)} -> {_torch(report.candidate)}",
        "",
        "| class | projects |",
        "| --- | ---: |",
        *[f"| {name} | {count} |" for name, count in report.counts().items()],
        "",
        f"**Wall time**: {md_text(total_wall_text(report).removeprefix('wall time '))}",
        "",
    ]
    if report.missing:
        head += [
            f"**No result** (not run yet, or a shard is missing): {', '.join(report.missing)}",
            "",
        ]
    blocks = [_project_block(row, report) for row in report.rows]
    table = [
        "## All projects",
        "",
        "| project | class | baseline | candidate | wall time |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report.rows:
        before, after = row.sides.get("baseline"), row.sides.get("candidate")
        skipped = row.eco_class == EcoClass.SKIPPED
        wall = wall_text(row.wall_seconds(), skipped)
        if skipped:  # never run: its reason, not a side file left from before it was skipped
            before_text, after_text = f"not run: {row.classified.evidence}"[:200], "not run"
        else:
            before_text, after_text = _side_text(before), _side_text(after)
        table.append(
            f"| {md_text(row.name)} | {row.eco_class} | "
            f"{md_text(before_text)} | {md_text(after_text)} | {wall} |"
        )
    needs_human = [
        b
        for b, row in zip(blocks, report.rows)
        if row.eco_class not in (EcoClass.SAME_PASS, EcoClass.SKIPPED)
    ]
    parts = ["\n".join(head), "## Needs a look", "", *needs_human, "\n".join(table) + "\n"]
    text = "\n".join(parts)
    if len(text) <= limit:
        return text
    return _cut(head, needs_human, table, limit, link)


def _project_block(row: Row, report: Report) -> str:
    """One project's block under "Needs a look": its class, what was tested, the evidence, the
    failing tests grouped by message with each group's cause, the reproduction, the bisection."""
    c = row.classified
    lines = [f"### {row.name}: {c.eco_class}", ""]
    if row.project.get("command"):
        lines += [
            f"tested: {source_text(row.project) or md_text(row.name)} with "
            f"{md_code(row.project.get('command', ''))}",
            "",
        ]
    lines += [md_text(c.evidence), ""]
    if row.groups and c.eco_class == EcoClass.SAME_FAIL:
        lines += ["Failing on both sides (not the candidate's doing), by message:", ""]
    for group in row.groups:
        shown = ", ".join(md_code(t) for t in group.tests[:SHOWN_IDS])
        more = (
            f" +{len(group.tests) - SHOWN_IDS} more (all in report.html and ecosystem.json)"
            if len(group.tests) > SHOWN_IDS
            else ""
        )
        lines += [
            f"- **{len(group.tests)} test(s)**: {shown}{more}",
            f"  - {_message_label(group)}: {md_text(group.message[:300])}",
        ]
        if c.eco_class == EcoClass.REGRESSED or group.cause.kind != "unknown":
            lines += [
                f"  - cause: {group.cause.kind}: {md_prose(group.cause.what)}; "
                f"fix: {md_prose(group.cause.fix)}"
                + (f" ({md_text(group.cause.source)})" if group.cause.source else "")
            ]
    if c.flipped and c.eco_class in (EcoClass.REGRESSED, EcoClass.FIXED):
        lines += [
            f"- flipped on retry (flaky, not counted): {', '.join(md_code(t) for t in c.flipped)}"
        ]
    steps = reproduce(row, report)
    lines += [_reproduce_line(steps)] if steps else []
    if row.bisect:
        lines += [f"- bisection: {md_text(str(row.bisect.get('sentence', '')))}"]
        if row.bisect.get("pin"):
            lines += [
                f"- proven pin: {md_code(row.bisect['pin'])} "
                f"({md_text(row.bisect.get('proof', ''))})"
            ]
    return "\n".join(lines) + "\n"


def source_text(project: Mapping[str, Any]) -> str:
    """Where the project's tested source came from (run.json's entry): the maintainer's version."""
    source = project.get("source") or {}
    kind, where, ref = source.get("kind"), source.get("location", ""), source.get("ref", "")
    if kind == "sdist":
        return f"the PyPI sdist {md_code(where)}"
    if kind == "git":
        return f"{md_code(where)} at {md_code(ref)}" if ref else md_code(where)
    return f"the tree at {md_code(where)}" if where else ""


def _pins(project: Mapping[str, Any], side: Mapping[str, Any]) -> list[str]:
    pins = [f"torch=={side.get('torch', '?')}"]
    if project.get("torchvision") and side.get("torchvision"):
        pins.append(f"torchvision=={side['torchvision']}")
    return pins


def reproduce(row: Row, report: Report) -> dict[str, str]:
    """How the project's maintainer runs a regression's first test outside the tool: ``fetch``
    the source, ``install`` the candidate in its tree, run ``command``; it passes with
    ``baseline``'s pins. Empty where the project did not regress."""
    project, tests = row.project, row.classified.new_failures
    if not project.get("command") or not tests or row.eco_class != EcoClass.REGRESSED:
        return {}
    source = project.get("source") or {}
    fetch = {
        "sdist": f"pip download --no-deps --no-binary :all: {source.get('location', '')}",
        "git": f"git clone {source.get('location', '')}"
        + (f" && git checkout {source['ref']}" if source.get("ref") else ""),
    }.get(str(source.get("kind")), "")
    extras = f"[{','.join(project.get('extras') or ())}]" if project.get("extras") else ""
    index = report.candidate.get("index")
    install = shell_line(
        [
            "pip",
            "install",
            *(["--extra-index-url", index] if index else []),
            *_pins(project, report.candidate),
            f".{extras}",
            *(project.get("requires") or ()),
        ]
    )
    command = str(project.get("command", ""))
    if "pytest" in command and tests[0] != "(the test command)":
        command = shell_line(["python", "-m", "pytest", "-p", "no:cacheprovider", tests[0]])
    return {
        "fetch": fetch,
        "install": install,
        "command": command,
        "baseline": " ".join(_pins(project, report.baseline)),
    }


def _reproduce_line(steps: Mapping[str, str]) -> str:
    where = f" ({md_code(steps['fetch'])}, unpacked)" if steps["fetch"] else ""
    return (
        f"- reproduce in the project's tree{where}: {md_code(steps['install'])}, then "
        f"{md_code(steps['command'])}: fails; with {md_code(steps['baseline'])} it passes"
    )


def _message_label(group: FailureGroup) -> str:
    """``message``, or where the group's tests' messages differ only in run-specific noise
    (addresses, temporary paths, ids), which of them is shown."""
    if group.variants <= 1:
        return "message"
    return (
        f"message of the first ({group.variants} different messages, the same but for "
        "addresses, temporary paths, process ids or seeds)"
    )


def _cut(head: list[str], blocks: list[str], table: list[str], limit: int, link: str) -> str:
    where = f"the full report: {link}" if link else "the full report: report.html next to this file"
    kept: list[str] = ["\n".join(head), "## Needs a look", ""]

    def note(left: int) -> str:
        return f"\n**{left} more row(s) left out to fit GitHub's {limit:,} characters**; {where}\n"

    reserve = len(note(10**6)) + 2
    size = sum(len(k) + 1 for k in kept)
    rows = [*blocks, *table]
    left = len(rows)
    for piece in rows:
        if size + len(piece) + 1 + reserve > limit:
            break
        kept.append(piece)
        size += len(piece) + 1
        left -= 1
    return "\n".join(kept) + note(left)


def _side_text(side: SideRun | None) -> str:
    if side is None:
        return "no result"
    text = side.summary or side.detail or str(side.status)
    return f"{side.status}: {text}"[:200]


# ------------------------------------------------------------------ HTML


def html_page(report: Report) -> str:
    """One self-contained page: counts per class, one row per project with its evidence, each
    side's result and a link to each side's log."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torch_matrix.ecosystem", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    template = env.get_template("ecosystem.html.j2")
    rows = []
    for row in report.rows:
        rows.append(
            {
                "name": row.name,
                "cls": str(row.eco_class),
                "evidence": row.classified.evidence,
                "groups": [
                    {
                        "count": len(g.tests),
                        "tests": list(g.tests[:SHOWN_IDS]),
                        "rest": list(g.tests[SHOWN_IDS:]),  # folded: a maintainer sees them all
                        "message": g.message,
                        "label": _message_label(g),
                        "cause": g.cause,
                    }
                    for g in row.groups
                ],
                "sides": [
                    {
                        "key": key,
                        "text": _side_text(side),
                        "log": side.log,
                        "seconds": f"{side.seconds + side.install_seconds:.0f}",
                    }
                    for key, side in sorted(row.sides.items())
                ],
                "bisect": dict(row.bisect),
                "flipped": list(row.classified.flipped)
                if row.eco_class == EcoClass.REGRESSED
                else [],
                "source": row.project.get("source") or {},
                "command": row.project.get("command", ""),
                "reproduce": reproduce(row, report),
                "seconds": f"{row.seconds():.0f}",
                "wall": wall_text(row.wall_seconds(), row.eco_class == EcoClass.SKIPPED),
            }
        )
    return template.render(
        baseline=_torch(report.baseline),
        candidate=_torch(report.candidate),
        counts=report.counts(),
        rows=rows,
        missing=list(report.missing),
        wall=total_wall_text(report),
    )


# ------------------------------------------------------------------ two runs


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each project whose class changed between two runs' ecosystem.json (added and removed too)."""
    before = {n: p["class"] for n, p in old.get("projects", {}).items()}
    after = {n: p["class"] for n, p in new.get("projects", {}).items()}
    changes = []
    for name in sorted(set(before) | set(after), key=str.lower):
        was, now = before.get(name, "absent"), after.get(name, "absent")
        if was != now:
            evidence = new.get("projects", {}).get(name, {}).get("evidence", "")
            changes.append({"project": name, "old": was, "new": now, "evidence": evidence})
    return changes


def diff_text(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    changes = diff(old, new)
    title = (
        f"torch {_torch(old.get('baseline', {}))} -> {_torch(old.get('candidate', {}))} vs "
        f"torch {_torch(new.get('baseline', {}))} -> {_torch(new.get('candidate', {}))}"
    )
    if not changes:
        return f"{title}: no project changed class\n"
    lines = [f"{title}: {len(changes)} project(s) changed class"]
    for change in changes:
        lines.append(f"  {change['project']}: {change['old']} -> {change['new']}")
        if change["evidence"]:
            lines.append(f"    {change['evidence'][:200]}")
    return "\n".join(lines) + "\n"
