"""The rows every renderer shows: judged results (``Judged``, ``judge``), their order, the text of
each column, the per-cell, follow-up, detail, pivot, grid, missing and hardware rows.

Pure: a function of ``CellResult`` records (and planned-but-missing cells). Verdicts come from
``torch_matrix.judge.verdict.verdict_of``, so the report and the pins always agree. The terminal
tables (``report.terminal``), summary.md (``report.markdown``), the HTML page, JUnit and the repro
bundle all import their rows from here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from packaging.utils import canonicalize_name

from torch_matrix.vocab.layout import check_command, followup_repro_command, repro_command
from torch_matrix.vocab.versions import version_key
from torch_matrix.vocab.records import CORE_AXES, INSTALLED, PASS, Cell, CellResult, built_versions
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    INCOMPATIBLE,
    ENVIRONMENT,
    NO_EVIDENCE,
    TIMED_OUT,
    NOT_INSTALLABLE,
    VERDICTS,
    Verdict,
    probe_counts_as_failure,
    timeout_reason,
    verdict_of,
)

GRID_MAX_CELLS = 30  # beyond this a probe x cell grid is too wide to read
MISSING = "missing"

TEXT_SYMBOLS = {
    COMPATIBLE: "✓",
    INCOMPATIBLE: "✗",
    NOT_INSTALLABLE: "–",
    NO_EVIDENCE: "!",
    ENVIRONMENT: "⚙",
    TIMED_OUT: "⏱",
    MISSING: "?",
}
MARKDOWN_SYMBOLS = {
    COMPATIBLE: "✅",
    INCOMPATIBLE: "❌",
    NOT_INSTALLABLE: "➖",
    NO_EVIDENCE: "⚠️",
    ENVIRONMENT: "⚙️",
    TIMED_OUT: "⏱️",
    MISSING: "❔",
}
# A compatible cell whose probe failed on a changed default (torch.load's weights_only flip): the
# plain call users make breaks, the advice works. Marked wherever its verdict or that probe shows.
CHANGED_DEFAULT_MARK = "⚑"
CHANGED_DEFAULT_HELP = (
    "compatible, but the plain call fails and only the advice works (no pin follows)"
)
NOTE_CELLS = 4  # cells named per note line; the rest are counted
# An incompatible cell whose tests failed on an API change with a known code fix (judge.catalogue):
# the fix is the first answer, the pins' window the alternative for code that cannot change.
CODE_FIX_MARK = "✎"
CODE_FIX_HELP = (
    "the tests fail on an API change with a known code fix: fix the code first; the pins' "
    "window is the alternative for code that cannot change"
)
PROBE_MARKS = {
    PASS: "pass",
    "fail": "FAIL",
    "unsupported": "unsup",
    "skip": "skip",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "crash": "CRASH",
}


CELL_HEADERS = (
    "cell",
    "python",
    "torch",
    "torchvision",
    "variant",
    "extras",
    "installed",
    "verdict",
    "time",
)
DETAIL_HEADERS = ("cell", "probe", "status", "message", "observed vs expected", "probe repro")
MISSING_HEADERS = ("cell", "python", "torch", "torchvision", "variant", "extras", "why")
FOLLOWUP_HEADERS = ("follow-up cell", "origin", "torch", "installed", "verdict", "why it ran")


@dataclass(frozen=True)
class Judged:
    """A result with its verdict, computed once."""

    result: CellResult
    verdict: Verdict

    @property
    def cell(self) -> Cell:
        return self.result.cell

    @cached_property
    def sort_key(self) -> tuple[Any, ...]:
        """Computed once: one report sorts the same items for every view it renders."""
        return cell_sort_key(self.result.cell)

    # The row's texts, computed once: the terminal table and summary.md show the same cells.
    @cached_property
    def installed(self) -> str:
        return installed_text(self.result)

    @cached_property
    def extras(self) -> str:
        return extras_text(self.result.cell)

    @cached_property
    def tests(self) -> str:
        return test_counts(self.result)


@lru_cache(maxsize=1024)
def _variant_key(variant: str) -> tuple[Any, ...]:
    """default, cpu, then CUDA by number (cu92 < cu118), then the rest by name."""
    if variant == "default":
        return (0, 0, variant)
    if variant == "cpu":
        return (1, 0, variant)
    if variant.startswith("cu") and variant[2:].isdigit():
        return (2, int(variant[2:]), variant)
    return (3, 0, variant)


def extras_of(cell: Cell) -> dict[str, str]:
    return {name: value for name, value in cell.axes.items() if name not in CORE_AXES}


def cell_sort_key(cell: Cell) -> tuple[Any, ...]:
    return (
        version_key(cell.torch),
        version_key(cell.torchvision),
        _variant_key(cell.variant),
        version_key(cell.python),
        sorted(extras_of(cell).items()),
        cell.id,
    )


def judge(results: Iterable[CellResult | Judged]) -> list[Judged]:
    """Verdict per result, in report order (torch, torchvision, variant, python, extras).

    Already-judged items pass through, so a caller rendering several views judges once.
    """
    judged = [
        item if isinstance(item, Judged) else Judged(item, verdict_of(item)) for item in results
    ]
    return sorted(judged, key=lambda item: item.sort_key)


def count_verdicts(judged: Iterable[Judged]) -> dict[str, int]:
    counts = Counter(item.verdict.kind for item in judged)
    return {kind: counts.get(kind, 0) for kind in VERDICTS}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 cell``, ``2 cells`` (``many`` when the plural is not noun + s)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def counts_line(judged: Sequence[Judged], missing: Sequence[Cell | str] = ()) -> str:
    counts = count_verdicts(judged)
    # ``environment`` is named only when a cell has it, so the usual line keeps its four counts
    # (and ``timeout``), so the usual line keeps its four counts
    shown = [kind for kind in VERDICTS if kind not in (ENVIRONMENT, TIMED_OUT) or counts[kind]]
    line = (
        plural(len(judged), "cell") + ": " + ", ".join(f"{counts[kind]} {kind}" for kind in shown)
    )
    if missing:
        line += f"; {len(missing)} planned but missing"
    return line


# ------------------------------------------------------------------------------ text helpers

_BOX_DRAWING = str.maketrans(dict.fromkeys("×╰─▶│├┬┴┼╭╮╯", " "))  # uv's resolver output


def shorten(text: str, width: int = 200) -> str:
    """One line: resolver box-drawing removed, whitespace collapsed, cut with an ellipsis."""
    line = " ".join(str(text).translate(_BOX_DRAWING).split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def _total_seconds(result: CellResult) -> float | None:
    if "total" in result.timings:
        return result.timings["total"]
    return sum(result.timings.values()) if result.timings else None


def _requirement_text(name: str, value: str) -> str:
    if not value:
        return name
    return f"{name}{value}" if value[:1] in "<>=!~" else f"{name}=={value}"


def extras_text(cell: Cell) -> str:
    return " ".join(_requirement_text(name, value) for name, value in extras_of(cell).items())


_canonical_name = lru_cache(maxsize=4096)(
    canonicalize_name
)  # a few names, asked for thousands of times


def installed_text(result: CellResult) -> str:
    """The installed versions of the packages the cell is about (not the whole freeze), each with
    its build's local label (``torch 2.14.1+cu130, torchvision 0.29.2+cu132``: not a plain pair)."""
    resolved = {_canonical_name(name): version for name, version in built_versions(result).items()}
    names = ["torch", "torchvision", *extras_of(result.cell)]
    shown = []
    for name in names:
        version = resolved.get(_canonical_name(name))
        if version:
            shown.append(f"{name} {version}")
    return ", ".join(shown)


def verdict_text(
    verdict: Verdict, symbols: Mapping[str, str] = TEXT_SYMBOLS, detail: bool = True
) -> str:
    text = f"{symbols.get(verdict.kind, '')} {verdict.kind}".strip()
    if not detail:
        return text
    if verdict.failing:
        text += ": " + ", ".join(verdict.failing)
    elif verdict.kind == NO_EVIDENCE and verdict.missing:
        text += ": no result for " + ", ".join(verdict.missing)
    elif verdict.kind == NO_EVIDENCE and verdict.idle:
        text += ": no test ran in " + ", ".join(verdict.idle)
    if verdict.advice:
        text += f" {CHANGED_DEFAULT_MARK} changed default: " + ", ".join(sorted(verdict.advice))
    return text


def changed_default_notes(judged: Iterable[Judged]) -> list[str]:
    """One line per changed default found, with the cells it was found in and its advice:
    ``⚑ checkpoint_roundtrip in t2.14.1-py3.11, t2.15.0-py3.11: load with weights_only=False ...``.
    The same lines serve the terminal, ``check``, summary.md and the HTML."""
    return _grouped_notes(judged, "advice", CHANGED_DEFAULT_MARK, 400)


def code_fix_notes(judged: Iterable[Judged]) -> list[str]:
    """One line per code fix found, with the cells it was found in: ``✎ tests in t2.6.0-py3.11:
    torch 2.6.0: torch.load defaults to weights_only=True at src/pkg/io.py:9: ...``. The same lines
    serve the terminal, summary.md and the HTML."""
    return _grouped_notes(judged, "fixes", CODE_FIX_MARK, 600)


def _grouped_notes(judged: Iterable[Judged], kind: str, mark: str, width: int) -> list[str]:
    """One line per (probe, advice) of the verdicts' ``kind`` (``advice`` or ``fixes``), naming
    the first ``NOTE_CELLS`` cells it was found in and counting the rest."""
    groups: dict[tuple[str, str], list[str]] = {}
    for item in judged:
        for probe, attribution in sorted(getattr(item.verdict, kind).items()):
            groups.setdefault((probe, attribution.advice), []).append(item.cell.id)
    lines = []
    for (probe, advice), cells in groups.items():
        named = ", ".join(cells[:NOTE_CELLS]) + (
            f" and {len(cells) - NOTE_CELLS} more" if len(cells) > NOTE_CELLS else ""
        )
        lines.append(f"{mark} {probe} in {named}: {shorten(advice, width)}")
    return lines


def test_counts(result: CellResult) -> str:
    """What the cell's command probes counted (``tests: 44 passed, 4 skipped``), or ""."""
    parts = [
        f"{probe.name}: {probe.evidence['summary']}"
        for probe in result.probes
        if probe.isolation == "command" and probe.evidence.get("summary")
    ]
    return "; ".join(parts)


def cell_repro(cell: Cell, spec: str | None = None) -> str:
    """The rerun line; with the spec that planned the run (else nox plans another one: "Sessions not found")."""
    if cell.is_followup:
        return followup_repro_command(cell.id, spec)
    return repro_command(cell.id, spec)


def result_repro(result: CellResult, spec: str | None = None) -> str:
    """``cell_repro``, or for an existing environment the ``check`` that probed it."""
    if result.cell.is_existing_env:
        return check_command(str(result.interpreter.get("path") or "PATH/TO/python"))
    return cell_repro(result.cell, spec)


def _observed_vs_expected(observed: object, expected: object) -> str:
    if observed is None and expected is None:
        return ""
    return shorten(f"{observed!r} vs {expected!r}", 120)


# ------------------------------------------------------------------------------ tables (rows)


def split_followups(judged: Sequence[Judged]) -> tuple[list[Judged], list[Judged]]:
    """(the planned grid's cells, the follow-up cells planned from results: ``plan.followups``)."""
    return (
        [item for item in judged if not item.cell.is_followup],
        [item for item in judged if item.cell.is_followup],
    )


def unbisected_notes(judged: Sequence[Judged]) -> list[str]:
    """A break the edge search skipped though a release passes in its context (edited or rerun
    results): one line each (``plan.unbisected``). A context where nothing passes is no finding."""
    if not any(item.cell.is_followup for item in judged):  # no line without one: no search
        return []
    from torch_matrix.plan.unbisected import unbisected

    found = unbisected([item.result for item in judged])
    return [item.line() for item in found if item.passing]


def followup_rows(
    judged: Iterable[Judged], symbols: Mapping[str, str] = TEXT_SYMBOLS
) -> list[list[str]]:
    return [
        [
            item.cell.id,
            str(item.cell.origin),
            item.cell.torch,
            item.installed,
            verdict_text(item.verdict, symbols, detail=False),
            item.cell.reason,
        ]
        for item in judged
    ]


def cell_rows(
    judged: Iterable[Judged], symbols: Mapping[str, str] = TEXT_SYMBOLS
) -> list[list[str]]:
    rows = []
    for item in judged:
        cell = item.cell
        counted = item.tests
        rows.append(
            [
                cell.id,
                cell.python,
                cell.torch,
                cell.torchvision,
                cell.variant,
                item.extras,
                item.installed,
                verdict_text(item.verdict, symbols) + (f" ({counted})" if counted else ""),
                format_seconds(_total_seconds(item.result)),
            ]
        )
    return rows


def pivot_table(
    judged: Sequence[Judged],
    symbols: Mapping[str, str] = TEXT_SYMBOLS,
    missing: Sequence[Cell] = (),
) -> tuple[list[str], list[list[str]]]:
    """torch (with torchvision and extras) rows x variant/python columns."""
    entries: list[tuple[Cell, str]] = [(item.cell, item.verdict.kind) for item in judged]
    entries += [(cell, MISSING) for cell in missing]
    extra_names = sorted({name for cell, _ in entries for name in extras_of(cell)})
    with_torchvision = any(cell.torchvision for cell, _ in entries)
    variants = {cell.variant for cell, _ in entries}
    columns = sorted(
        {(cell.variant, cell.python) for cell, _ in entries},
        key=lambda key: (_variant_key(key[0]), version_key(key[1])),
    )

    def column_label(key: tuple[str, str]) -> str:
        return f"{key[0]} py{key[1]}" if len(variants) > 1 else f"py{key[1]}"

    def row_key(cell: Cell) -> tuple[Any, ...]:
        return (
            cell.torch,
            cell.torchvision if with_torchvision else "",
            tuple(cell.axes.get(name, "") for name in extra_names),
        )

    slots: dict[tuple[Any, ...], dict[tuple[str, str], list[str]]] = {}
    cells: dict[tuple[Any, ...], list[Cell]] = {}
    flagged = {item.cell.id for item in judged if item.verdict.advice}
    for cell, kind in entries:
        key = row_key(cell)
        slots.setdefault(key, {}).setdefault((cell.variant, cell.python), []).append(kind)
        cells.setdefault((key, (cell.variant, cell.python)), []).append(cell)

    headers = ["torch"] + (["torchvision"] if with_torchvision else []) + extra_names
    headers += [column_label(column) for column in columns]
    rows = []
    for key in sorted(slots, key=lambda k: (version_key(k[0]), version_key(k[1]), k[2])):
        row = [key[0]] + ([key[1]] if with_torchvision else []) + list(key[2])
        for column in columns:
            kinds = slots[key].get(column, [])
            row.append(" / ".join(f"{symbols.get(kind, '')} {kind}".strip() for kind in kinds))
            if any(cell.id in flagged for cell in cells.get((key, column), ())):
                row[-1] += f" {CHANGED_DEFAULT_MARK}"
        rows.append(row)
    return headers, rows


def detail_rows(judged: Iterable[Judged], full_repro: bool = False) -> list[list[str]]:
    """Why each cell that did not pass did not pass: failing probes, missing probes, install message.

    The repro column is one shortened line, or the probe's whole snippet with ``full_repro``."""
    rows = []
    for item in judged:
        verdict, result, cell = item.verdict, item.result, item.cell
        if verdict.kind == COMPATIBLE:
            continue
        if result.install.status != INSTALLED:
            rows.append(
                [
                    cell.id,
                    "(install)",
                    result.install.status,
                    shorten(result.install.message or verdict.reason or "no message"),
                    "",
                    "",
                ]
            )
            continue
        required = set(cell.required_probes or [p.name for p in result.probes])
        for probe in result.probes:
            if (
                not probe_counts_as_failure(probe.status, dict(cell.policy))
                and probe.name not in verdict.idle
            ):
                continue
            status = probe.status if probe.name in required else f"{probe.status} (not required)"
            message = probe.message
            if verdict.kind == TIMED_OUT and probe.name in verdict.failing:
                # the time it ran and the key to raise (``timeout_reason``), not only "killed"
                message = timeout_reason([probe])
            rows.append(
                [
                    cell.id,
                    probe.name,
                    status,
                    shorten(message, 240),
                    _observed_vs_expected(probe.observed, probe.expected),
                    probe.repro if full_repro else shorten(probe.repro, 160),
                ]
            )
        for name in verdict.missing:
            rows.append([cell.id, name, "missing", "required probe produced no result", "", ""])
    return rows


def repro_lines(judged: Iterable[Judged], spec: str | None = None) -> list[tuple[str, str]]:
    """(cell id, shell line) for each cell that did not pass; unsatisfiable cells have nothing to rerun."""
    lines = []
    for item in judged:
        if item.verdict.kind in (INCOMPATIBLE, NO_EVIDENCE, ENVIRONMENT, TIMED_OUT):
            lines.append((item.cell.id, result_repro(item.result, spec)))
    return lines


def probe_grid(judged: Sequence[Judged]) -> tuple[list[str], list[list[str]]]:
    """Probes as rows, cells as columns, each slot the probe's status (blank: not run)."""
    names: list[str] = []
    for item in judged:
        for name in (*item.cell.probes, *(p.name for p in item.result.probes)):
            if name not in names:
                names.append(name)
    headers = ["probe"] + [item.cell.id for item in judged]
    rows = []
    for name in names:
        row = [name]
        for item in judged:
            probe = item.result.probe(name)
            if probe is not None:
                mark = f" {CHANGED_DEFAULT_MARK}" if name in item.verdict.advice else ""
                row.append(PROBE_MARKS.get(probe.status, probe.status) + mark)
            elif item.result.install.status != INSTALLED:
                row.append(f"({item.result.install.status})")
            else:
                row.append("")
        rows.append(row)
    return headers, rows


def missing_rows(
    missing: Iterable[Cell | str], reasons: Mapping[str, str] | None = None
) -> list[list[str]]:
    """One row per planned cell without a result; ``reasons``: cell id -> why (the run's plan)."""
    rows = []
    why = reasons or {}
    for cell in missing:
        if isinstance(cell, str):
            rows.append([cell, "", "", "", "", "", why.get(cell, "")])
        else:
            rows.append(
                [
                    cell.id,
                    cell.python,
                    cell.torch,
                    cell.torchvision,
                    cell.variant,
                    extras_text(cell),
                    why.get(cell.id, ""),
                ]
            )
    return rows


def missing_cells(missing: Iterable[Cell | str]) -> list[Cell]:
    return [cell for cell in missing if isinstance(cell, Cell)]


HARDWARE_MARKS = {
    "native": "native",
    "ptx-jit": "ptx-jit",
    "no-kernel-image": "✗ no kernel image",
    "driver-too-old": "✗ driver too old",
    "no-cuda": "– no CUDA",
}
RUNS_ON_TARGET = ("native", "ptx-jit")


def hardware_columns(judged: Iterable[Judged]) -> list[str]:
    """The hardware targets the results were judged for, in the order first met."""
    seen: dict[str, None] = {}
    for item in judged:
        for target in item.result.targets:
            seen.setdefault(str(target["target"]), None)
    return list(seen)


def hardware_mark(target: Mapping[str, object]) -> str:
    text = HARDWARE_MARKS.get(str(target["verdict"]), str(target["verdict"]))
    return f"⚠ {text} (the device disagrees)" if target.get("agrees") is False else text


def hardware_table(judged: Sequence[Judged]) -> tuple[list[str], list[list[str]]]:
    """Cells × hardware targets: each cell's build (torch, its CUDA, its compiled arch list) and
    its verdict on each target (``torch_matrix.judge.hardware``); cells with no verdicts are left out."""
    columns = hardware_columns(judged)
    rows = []
    for item in sorted((j for j in judged if j.result.targets), key=lambda j: j.sort_key):
        build = item.result.gpu.get("build") or {}
        by_target = {str(t["target"]): t for t in item.result.targets}
        rows.append(
            [
                item.cell.id,
                str(built_versions(item.result).get("torch") or build.get("torch") or ""),
                str(build.get("torch_cuda") or "cpu"),
                str(build.get("arch_flags") or "—"),
                *(hardware_mark(by_target[c]) if c in by_target else "" for c in columns),
            ]
        )
    return ["cell", "torch", "CUDA", "arch list", *columns], rows


def hardware_reasons(judged: Sequence[Judged], width: int = 220) -> list[str]:
    """``cell on target: verdict: reason`` for every verdict under which the build does not run."""
    lines = []
    for item in sorted((j for j in judged if j.result.targets), key=lambda j: j.sort_key):
        for target in item.result.targets:
            if target["verdict"] not in RUNS_ON_TARGET or target.get("agrees") is False:
                lines.append(
                    shorten(
                        f"{item.cell.id} on {target['target']}: {target['verdict']}: "
                        f"{target['reason']}",
                        width,
                    )
                )
    return lines
