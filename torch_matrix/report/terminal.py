"""The terminal tables: the rows of ``torch_matrix.report.rows`` laid out to the terminal's width
(per cell, pivot, per-probe details, grid, hardware targets), as ``torch-matrix report`` prints them.

Pure: a function of ``CellResult`` records (and optionally planned-but-missing cells).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.records import Cell, CellResult

from torch_matrix.report.rows import (
    CELL_HEADERS,
    CHANGED_DEFAULT_HELP,
    CHANGED_DEFAULT_MARK,
    CODE_FIX_HELP,
    CODE_FIX_MARK,
    DETAIL_HEADERS,
    FOLLOWUP_HEADERS,
    Judged,
    MISSING_HEADERS,
    TEXT_SYMBOLS,
    cell_rows,
    changed_default_notes,
    code_fix_notes,
    counts_line,
    detail_rows,
    followup_rows,
    unbisected_notes,
    hardware_reasons,
    hardware_table,
    judge,
    missing_cells,
    missing_rows,
    pivot_table,
    probe_grid,
    repro_lines,
    split_followups,
)

# ------------------------------------------------------------------------------ terminal

# Characters tabulate measures as one column wide, like printable ASCII (our verdict symbols).
_NARROW_SYMBOLS = frozenset("".join(TEXT_SYMBOLS.values()) + "…" + CHANGED_DEFAULT_MARK)


def _narrow(text: str) -> bool:
    if text.isascii():
        return text.isprintable()
    return all(char in _NARROW_SYMBOLS or (char.isascii() and char.isprintable()) for char in text)


def _simple_table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str | None:
    """Exactly what ``tabulate(rows, headers, tablefmt="simple", disable_numparse=True)`` prints, for the
    common case (one-line strings of one-column-wide characters); None otherwise. tabulate measures every
    character with wcwidth, which makes a 2,000-cell table cost more than the rest of the report."""
    if not rows or not headers or not all(type(h) is str and _narrow(h) for h in headers):
        return None
    columns = len(headers)
    table: list[list[str]] = []
    for row in rows:
        if len(row) != columns:
            return None
        cells = []
        for value in row:
            if type(value) is not str or not _narrow(value):
                return None
            cells.append(value.strip())
        table.append(cells)
    widths = [len(header) + 2 for header in headers]  # tabulate's MIN_PADDING around a header
    for cells in table:
        for position, text in enumerate(cells):
            if len(text) > widths[position]:
                widths[position] = len(text)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(text.ljust(width) for text, width in zip(cells, widths)).rstrip()

    return "\n".join(
        [line(headers), line(["-" * width for width in widths]), *(line(cells) for cells in table)]
    )


def fit_to_width(
    rows: Sequence[Sequence[object]],
    headers: Sequence[str],
    width: int,
    keep: Sequence[int] = (0,),
    drop: Sequence[str] = (),
) -> tuple[list[str], list[list[str]], bool]:
    """A table whose simple rendering is at most ``width`` columns wide, and whether anything was left out.

    First the ``drop`` columns go, in order, while the table is too wide (what the cell id already says,
    or what only the files need); then the widest columns are cut (with "…") to a common cap. The
    ``keep`` columns (the cell id, to copy) and the headers are never cut. Best effort when even the
    narrowest form does not fit."""
    texts = [[" ".join(str(value).split()) for value in row] for row in rows]
    names = list(headers)

    def natural() -> list[int]:
        return [
            max([len(name) + 2] + [len(row[i]) for row in texts]) for i, name in enumerate(names)
        ]

    def room() -> int:
        return width - 2 * (len(names) - 1)

    changed = False
    for name in drop:
        if sum(natural()) <= room():
            break
        if name in names and names.index(name) not in keep:
            position = names.index(name)
            names.pop(position)
            texts = [row[:position] + row[position + 1 :] for row in texts]
            changed = True
    widths = natural()
    if sum(widths) <= room():
        return names, texts, changed
    kept = {i for i, name in enumerate(names) if name in {headers[k] for k in keep}}
    minimum = [
        widths[i] if i in kept else min(widths[i], max(len(names[i]) + 2, 10))
        for i in range(len(names))
    ]

    def total(cap: int) -> int:
        return sum(max(minimum[i], min(widths[i], cap)) for i in range(len(names)))

    low, high = 0, max(widths)
    while low < high:
        middle = (low + high + 1) // 2
        if total(middle) <= room():
            low = middle
        else:
            high = middle - 1
    caps = [max(minimum[i], min(widths[i], low)) for i in range(len(names))]
    cut = [
        [
            text if len(text) <= caps[i] else text[: caps[i] - 1].rstrip() + "…"
            for i, text in enumerate(row)
        ]
        for row in texts
    ]
    return names, cut, True


# Columns a narrow terminal drops first: the cell id already names torch / variant / python / extras,
# and the files keep everything.
DROP_FIRST = {
    CELL_HEADERS: ("time", "installed", "torchvision", "extras", "variant", "python", "torch"),
    DETAIL_HEADERS: ("probe repro", "observed vs expected"),
    MISSING_HEADERS: ("torchvision", "extras", "variant", "python", "torch"),
}


def _shown(rows: Sequence[Sequence[object]]) -> Sequence[Sequence[object]]:
    """The terminal's rule before measuring: an escape sequence is shown, so it is also counted.
    A row of printable text (nearly all) is checked in one call."""
    shown: list[Sequence[object]] = []
    for row in rows:
        try:
            if "".join(row).isprintable():  # type: ignore[arg-type]
                shown.append(row)
                continue
        except TypeError:  # not all text
            pass
        shown.append([terminal(value) if isinstance(value, str) else value for value in row])
    return shown


def _table(
    rows: Sequence[Sequence[object]],
    headers: Sequence[str],
    tablefmt: str,
    width: int | None = None,
    cuts: list[bool] | None = None,
) -> str:
    rows = _shown(rows)
    if width is not None and tablefmt == "simple" and rows:
        headers, rows, was_cut = fit_to_width(
            rows, headers, width, drop=DROP_FIRST.get(tuple(headers), ())
        )
        if cuts is not None and was_cut:
            cuts.append(True)
    fast = _simple_table(rows, headers) if tablefmt == "simple" else None
    if fast is not None:
        return fast
    from tabulate import tabulate  # the general case: other formats, wide or multi-line text

    return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def _note_parts(judged: Sequence[Judged], unbisected: Sequence[str] | None) -> list[str]:
    """The notes under the table: breaks not bisected, changed defaults, code fixes first."""
    parts: list[str] = []
    if unbisected is None:
        unbisected = unbisected_notes(judged)
    if unbisected:
        parts.append("Breaks not bisected:\n" + "\n".join(f"  {line}" for line in unbisected))
    notes = changed_default_notes(judged)
    if notes:
        parts.append(
            f"{CHANGED_DEFAULT_MARK} changed default: {CHANGED_DEFAULT_HELP}:\n"
            + "\n".join(f"  {line}" for line in notes)
        )
    fixes = code_fix_notes(judged)
    if fixes:
        parts.append(
            f"{CODE_FIX_MARK} fix first: {CODE_FIX_HELP}:\n"
            + "\n".join(f"  {line}" for line in fixes)
        )
    return parts


def render_text(
    results: Iterable[CellResult | Judged],
    *,
    pivot: bool = False,
    grid: bool = False,
    missing: Sequence[Cell | str] = (),
    tablefmt: str = "simple",
    width: int | None = None,
    spec: str | None = None,
    missing_reasons: Mapping[str, str] | None = None,
    unbisected: Sequence[str] | None = None,
) -> str:
    """What ``torch-matrix report`` prints: counts, the table (or pivot), then why cells did not pass.

    ``width``: the terminal's; tables are cut to fit it (the rerun lines never are), with a note
    that the full text is in the files. ``spec``: the spec the run was planned from, for the rerun lines.
    ``unbisected``: ``rows.unbisected_notes`` of these results, where the caller has them already."""
    judged = judge(results)
    cuts: list[bool] = []
    parts = [counts_line(judged, missing)]
    planned, followups = split_followups(judged)
    if planned or missing:
        if pivot:
            headers, rows = pivot_table(planned, missing=missing_cells(missing))
            parts.append(_table(rows, headers, tablefmt, width, cuts))
        elif planned:
            parts.append(_table(cell_rows(planned), CELL_HEADERS, tablefmt, width, cuts))
    if followups:
        parts.append(
            f"Follow-up cells ({len(followups)}; planned from the results, not from the spec's grid):\n"
            + _table(followup_rows(followups), FOLLOWUP_HEADERS, tablefmt, width, cuts)
        )
    parts += _note_parts(judged, unbisected)
    details = detail_rows(judged)
    if details:
        parts.append(
            "Cells that did not pass:\n" + _table(details, DETAIL_HEADERS, tablefmt, width, cuts)
        )
    repros = repro_lines(judged, spec)
    if repros:
        parts.append("Rerun a cell:\n" + "\n".join(f"  {line}" for _, line in repros))
    if missing:
        parts.append(
            f"Planned but missing ({len(missing)}):\n"
            + _table(missing_rows(missing, missing_reasons), MISSING_HEADERS, tablefmt, width, cuts)
        )
    if grid and judged:
        headers, rows = probe_grid(judged)
        parts.append("Probe status per cell:\n" + _table(rows, headers, tablefmt, width, cuts))
    headers, rows = hardware_table(judged)
    if rows:
        why = hardware_reasons(judged)
        parts.append(
            "Hardware targets (cells × targets, judged from each build's own arch list and CUDA):\n"
            + _table(rows, headers, tablefmt, width, cuts)
            + (
                "\n\nWhy it does not run there:\n" + "\n".join(f"  {line}" for line in why)
                if why
                else ""
            )
        )
    if cuts:
        parts.append(
            f"(narrowed to {width} columns; full text in summary.md, results.json, --html)"
        )
    return terminal("\n\n".join(parts)) + "\n"
