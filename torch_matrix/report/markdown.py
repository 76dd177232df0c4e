"""The Markdown summary (``summary.md``, ``$GITHUB_STEP_SUMMARY``) of judged results. Pure.

Shortened to fit a byte limit (GitHub's step summary takes 1 MiB) with a note saying
what was cut. The rows are ``torch_matrix.report.terminal``'s, so the terminal and Markdown agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from torch_matrix.vocab.records import Cell, CellResult
from torch_matrix.report.rows import (
    CELL_HEADERS,
    CHANGED_DEFAULT_HELP,
    CHANGED_DEFAULT_MARK,
    CODE_FIX_HELP,
    CODE_FIX_MARK,
    DETAIL_HEADERS,
    GRID_MAX_CELLS,
    MARKDOWN_SYMBOLS,
    MISSING,
    MISSING_HEADERS,
    Judged,
    cell_rows,
    changed_default_notes,
    code_fix_notes,
    counts_line,
    detail_rows,
    hardware_reasons,
    hardware_table,
    judge,
    missing_cells,
    missing_rows,
    pivot_table,
    probe_grid,
    repro_lines,
    unbisected_notes,
)
from torch_matrix.judge.verdict import COMPATIBLE, VERDICTS
from torch_matrix.vocab.escaping import md_code, md_fence, md_html, md_prose, md_text

GITHUB_SUMMARY_LIMIT = 1024 * 1024  # $GITHUB_STEP_SUMMARY: 1 MiB per step


class Code(str):
    """A table cell shown as inline code: backslashes stay literal, pipes are still escaped."""


def md_cell(value: object) -> str:
    """One table cell, through the Markdown rule (``vocab.escaping``): text, or inline code."""
    return md_code(value, in_table=True) if isinstance(value, Code) else md_text(value)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub pipe table. Unpadded on purpose: GitHub aligns it, and padding 2,000 rows through
    tabulate's wide-character measuring costs more than the rest of the report."""
    lines = [
        "| " + " | ".join(md_cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(md_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


INLINE_REPRO_CHARS = 120  # a longer or multi-line snippet goes below the table, whole


def _md_details(judged: Sequence[Judged], spec: str | None = None) -> str:
    """The details table; a repro is never cut: a short one-liner stays in the table, any other is
    printed whole below it (a table cell cannot hold a multi-line snippet)."""
    rows = []
    snippets: list[str] = []
    for row in detail_rows(judged, full_repro=True):
        repro = row[5].strip()
        if repro and ("\n" in repro or len(repro) > INLINE_REPRO_CHARS):
            snippets.append(
                f"<details><summary>{len(snippets) + 1}. <code>{md_html(row[0])}</code> · "
                f"<code>{md_html(row[1])}</code></summary>\n\n{md_fence(repro, 'python')}\n\n</details>"
            )
            cell: object = f"snippet {len(snippets)} below"
        else:
            cell = Code(repro)
        rows.append([row[0], row[1], row[2], row[3], row[4], cell])
    text = "### Cells that did not pass\n\n" + md_table(DETAIL_HEADERS, rows)
    if snippets:
        text += "\n\n#### Probe repro snippets\n\n" + "\n\n".join(snippets)
    repros = repro_lines(judged, spec)
    if repros:
        text += "\n\nRerun a cell:\n\n" + md_fence("\n".join(line for _, line in repros), "sh")
    return text


def _md_verdict_lists(judged: Sequence[Judged], missing: Sequence[Cell | str]) -> str:
    """The smallest useful form: which cells are in each non-compatible group."""
    groups: dict[str, list[str]] = {}
    for item in judged:
        groups.setdefault(item.verdict.kind, []).append(item.cell.id)
    if missing:
        groups[MISSING] = [cell if isinstance(cell, str) else cell.id for cell in missing]
    lines = []
    for kind in (*VERDICTS, MISSING):
        ids = groups.get(kind, [])
        if not ids:
            continue
        label = f"- {MARKDOWN_SYMBOLS[kind]} **{kind}**: {len(ids)}"
        if kind != COMPATIBLE:
            label += ": " + ", ".join(md_code(cell_id) for cell_id in ids)
        lines.append(label)
    return "\n".join(lines)


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_to_bytes(text: str, limit: int) -> str:
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


def _notes_section(heading: str, lines: Sequence[str], help_text: str = "") -> str:
    """A section of notes, one bullet a line ("" when there are none)."""
    if not lines:
        return ""
    intro = f"{help_text.capitalize()}:\n\n" if help_text else ""
    bullet = md_prose if help_text else md_cell
    return f"### {heading}\n\n{intro}" + "\n".join(f"- {bullet(line)}" for line in lines)


def _sections(
    judged: Sequence[Judged],
    missing: Sequence[Cell | str],
    missing_reasons: Mapping[str, str] | None,
    title: str,
    spec: str | None,
    unbisected: Sequence[str] | None,
) -> dict[str, str]:
    """Every section of the summary by name, "" where it has nothing to say."""
    sections = dict.fromkeys(("missing", "pivot", "cells", "details", "grid", "hardware"), "")
    sections["head"] = f"## {title}\n\n**{counts_line(judged, missing)}**"
    if missing:
        sections["missing"] = (
            f"### {MARKDOWN_SYMBOLS[MISSING]} Planned but missing ({len(missing)})\n\n"
            + md_table(MISSING_HEADERS, missing_rows(missing, missing_reasons))
        )
    if judged or missing:
        headers, rows = pivot_table(judged, MARKDOWN_SYMBOLS, missing_cells(missing))
        sections["pivot"] = "### Compatibility\n\n" + md_table(headers, rows)
    if judged:
        sections["cells"] = "### Cells\n\n" + md_table(
            CELL_HEADERS, cell_rows(judged, MARKDOWN_SYMBOLS)
        )
        if 0 < len(judged) <= GRID_MAX_CELLS:
            headers, rows = probe_grid(judged)
            sections["grid"] = "### Probe status per cell\n\n" + md_table(headers, rows)
    if any(item.verdict.kind != COMPATIBLE for item in judged):
        sections["details"] = _md_details(judged, spec)
    sections["fixes"] = _notes_section(
        f"{CODE_FIX_MARK} Fix first", code_fix_notes(judged), CODE_FIX_HELP
    )
    sections["notes"] = _notes_section(
        f"{CHANGED_DEFAULT_MARK} Changed defaults",
        changed_default_notes(judged),
        CHANGED_DEFAULT_HELP,
    )
    if unbisected is None:
        unbisected = unbisected_notes(judged)
    sections["unbisected"] = _notes_section("Breaks not bisected", unbisected)
    headers, rows = hardware_table(judged)
    if rows:
        why = hardware_reasons(judged, width=400)
        sections["hardware"] = (
            "### Hardware targets\n\nJudged from each build's own arch list and CUDA runtime "
            "(no GPU needed).\n\n"
            + md_table(headers, rows)
            + ("\n\n" + "\n".join(f"- {md_cell(line)}" for line in why) if why else "")
        )
    return sections


# What each level of shortening keeps (the note it adds, the sections by name), fullest first.
_LEVELS = (
    (
        "",
        (
            "head",
            "missing",
            "pivot",
            "fixes",
            "notes",
            "unbisected",
            "hardware",
            "cells",
            "details",
            "grid",
        ),
    ),
    (
        "per-probe details and the probe grid omitted",
        ("head", "missing", "pivot", "fixes", "notes", "unbisected", "hardware", "cells"),
    ),
    (
        "per-probe details, the probe grid and the per-cell table omitted",
        ("head", "missing", "pivot", "fixes", "notes", "hardware"),
    ),
    ("tables omitted; cells listed by verdict", ("head", "fixes", "lists")),
)


def _join(*sections: str) -> str:
    return "\n\n".join(section for section in sections if section) + "\n"


def render_markdown_summary(
    results: Iterable[CellResult | Judged],
    max_bytes: int | None = None,
    missing: Sequence[Cell | str] = (),
    title: str = "torch-matrix results",
    spec: str | None = None,
    missing_reasons: Mapping[str, str] | None = None,
    unbisected: Sequence[str] | None = None,
) -> str:
    """GitHub-flavoured Markdown for summary.md and $GITHUB_STEP_SUMMARY.

    ``unbisected``: ``rows.unbisected_notes`` of these results, where the caller has them already.

    When the full text exceeds ``max_bytes`` it degrades in steps, and says so: first the
    per-probe details and grid go, then the per-cell table, then the pivot is replaced by
    lists of cell ids per verdict; as a last resort the text is cut.
    """
    judged = judge(results)
    sections = _sections(judged, missing, missing_reasons, title, spec, unbisected)
    if max_bytes is None:
        return _join(*(sections[name] for name in _LEVELS[0][1]))
    sections["lists"] = _md_verdict_lists(judged, missing)
    limit = max_bytes
    for note, names in _LEVELS:
        chosen = [sections[name] for name in names]
        if note:
            chosen = [chosen[0], _shortened_note(note, limit), *chosen[1:]]
        text = _join(*chosen)
        if _byte_len(text) <= limit:
            return text
    note = _shortened_note("cut to fit", limit)
    marker = "\n\n…\n"
    body = _join(sections["head"], note, sections["lists"])
    room = limit - _byte_len(marker)
    return _cut_to_bytes(body, room) + marker if room > 0 else _cut_to_bytes(body, limit)


def _shortened_note(what: str, limit: int | None) -> str:
    return (
        f"> [!NOTE]\n> Summary shortened to fit {limit} bytes: {what}. "
        "The full report is in the uploaded summary.md and results.json."
    )
