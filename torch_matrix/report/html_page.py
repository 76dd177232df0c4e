"""The HTML heatmap: one self-contained file (inline CSS and JS, nothing fetched), rendered with Jinja2.

Pure: ``render_html(judged, ...)`` is a function of judged results (and, optionally, the verdicts of a
previous run, to highlight what changed). Rows are torch (and torchvision) versions, columns the
variant / Python / extras combinations; each slot links to the cell's probes with status, message,
observed vs expected, evidence, cause (when a probe result carries one) and repro.
The template is package data: ``torch_matrix/report/templates/report.html.j2``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when the page is rendered: the report's other outputs need no jinja2
    import jinja2

from torch_matrix.judge.causes import Cause, attribute
from torch_matrix.vocab.escaping import shell_line, terminal
from torch_matrix.vocab.versions import version_key
from torch_matrix.vocab.records import INSTALLED, PASS, SKIP, Cell
from torch_matrix.report.rows import (
    CHANGED_DEFAULT_HELP,
    CHANGED_DEFAULT_MARK,
    MISSING,
    TEXT_SYMBOLS,
    Judged,
    _variant_key,
    cell_repro,
    changed_default_notes,
    code_fix_notes,
    count_verdicts,
    extras_of,
    extras_text,
    format_seconds,
    hardware_reasons,
    hardware_table,
    judge,
    plural,
)
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    ENVIRONMENT,
    INCOMPATIBLE,
    NO_EVIDENCE,
    TIMED_OUT,
    NOT_INSTALLABLE,
    VERDICTS,
    probe_counts_as_failure,
)

TEMPLATE = "report.html.j2"
EVIDENCE_CHARS = 4000  # per probe that did not pass; the full evidence stays in the cell's file
TEXT_CHARS = (
    2000  # a message, traceback, repro or install log; the full text stays in the cell's file
)
# The probe filter reads each cell's statuses as one letter per probe, in the page's probe order.
STATUS_CODES = {
    "pass": "p",
    "fail": "f",
    "unsupported": "u",
    "skip": "s",
    "error": "e",
    "timeout": "t",
    "crash": "c",
}
QUIET = (
    PASS,
    SKIP,
)  # shown on one line per cell, without their evidence: most of a page of 2,000 cells
VERDICT_LABELS = {
    COMPATIBLE: "compatible",
    INCOMPATIBLE: "incompatible",
    NOT_INSTALLABLE: "unsatisfiable",
    NO_EVIDENCE: "error (no evidence)",
    ENVIRONMENT: "environment",
    TIMED_OUT: "timeout (no evidence)",
    MISSING: "planned but missing",
}
VERDICT_HELP = {
    COMPATIBLE: "every required probe passed",
    INCOMPATIBLE: "a required probe failed: a finding",
    NOT_INSTALLABLE: "no wheel / resolver said no: not a finding",
    NO_EVIDENCE: "install or probe-runner trouble: no evidence either way",
    ENVIRONMENT: "the environment explains the failure (advice, no pin)",
    TIMED_OUT: "a required probe ran past [probes] timeout: no evidence either way",
    MISSING: "planned, no result file",
}
NEW = "new"  # a cell the previous run did not have


@dataclass(frozen=True)
class ProbeView:
    name: str
    status: str
    counts: bool  # counts as a failure under the cell's policy
    required: bool
    message: str
    observed_expected: str
    evidence: str
    cause: str
    traceback: str
    repro: str
    duration: str


@dataclass(frozen=True)
class CellView:
    id: str
    verdict: str
    symbol: str
    reason: str
    failing: tuple[str, ...]
    installed: str
    time: str
    install_status: str
    install_message: str
    install_command: str
    rerun: str
    probes: tuple[ProbeView, ...]  # the probes that did not pass or skip, in full
    statuses: str  # one STATUS_CODES letter per probe of the page ("-": none), for the probe filter
    change: str = ""  # "", "new", or the previous verdict
    requirements: str = ""
    extras: str = ""
    changed_defaults: tuple[
        str, ...
    ] = ()  # probes that failed only on a changed default (marked ⚑)
    note: str = ""  # their advice, one line
    passed: str = (
        ""  # the passing probes, one line: names and durations (their evidence: the cell file)
    )
    skipped: tuple[tuple[str, str], ...] = ()  # (why, probe names) for the skipped probes
    file: str = (
        ""  # the cell's full result file, relative to the page ("" when the page does not know)
    )
    origin: str = ""  # a follow-up cell's origin (counterfactual, edge, bisect); "" for the grid's
    why: str = ""  # why a follow-up cell ran
    tests: str = ""  # what its command probes counted: "tests: 44 passed, 4 skipped"


@dataclass(frozen=True)
class Column:
    key: tuple[Any, ...]
    label: str
    sub: str


@dataclass(frozen=True)
class Row:
    torch: str
    torchvision: str
    slots: tuple[tuple[CellView, ...], ...]


@dataclass
class Page:
    title: str
    counts: list[tuple[str, str, int]]  # (kind, symbol, count)
    total: int
    columns: list[Column]
    column_groups: list[tuple[str, int]]  # (variant label, span)
    rows: list[Row]
    with_torchvision: bool
    cells: list[CellView]
    probe_names: list[str]
    legend: list[tuple[str, str, str, str]]  # (kind, symbol, label, help)
    previous: str | None
    changes: list[CellView] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    generated: str = ""
    # Cells × hardware targets (report.terminal.hardware_table) and why a build does not run there.
    hardware_headers: list[str] = field(default_factory=list)
    hardware_rows: list[list[str]] = field(default_factory=list)
    hardware_reasons: list[str] = field(default_factory=list)
    changed_default_notes: list[str] = field(
        default_factory=list
    )  # report.terminal.changed_default_notes
    code_fix_notes: list[str] = field(default_factory=list)  # report.terminal.code_fix_notes
    followups: list[CellView] = field(default_factory=list)  # shown apart from the grid
    pins: list[tuple[str, tuple[str, ...]]] = field(
        default_factory=list
    )  # (requirement line, its proof)


def capped(text: str, limit: int = TEXT_CHARS, where: str = "results.json") -> str:
    """``text``, or its first ``limit`` characters and how many more there are, and where."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters: the full text is in {where})"


def _json_text(value: Any, limit: int = EVIDENCE_CHARS, where: str = "results.json") -> str:
    if value is None or value == {} or value == "":
        return ""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, indent=1, sort_keys=True, default=str)
    )
    return capped(text, limit, where)


def cause_text(result: Any, probe: Any) -> str:
    """Why a probe that did not pass did not (``torch_matrix.judge.causes``): version / environment / infrastructure,
    with its kind and advice; "" for a pass or a skip."""
    if probe.status in (PASS, SKIP):
        return ""
    attribution = attribute(result, probe)
    text = str(attribution.cause)
    if attribution.kind:
        text += f" ({attribution.kind})"
    if attribution.advice:
        text += f": {attribution.advice}"
    elif attribution.cause == Cause.VERSION:
        text += ": nothing in the environment explains it; a finding about these versions"
    return text


def _probe_view(result: Any, probe: Any, cell: Cell, required: set[str], where: str) -> ProbeView:
    observed_expected = ""
    if probe.observed is not None or probe.expected is not None:
        observed_expected = (
            f"observed: {_json_text(probe.observed, 1000, where) or 'None'}\n"
            f"expected: {_json_text(probe.expected, 1000, where) or 'None'}"
        )
    return ProbeView(
        name=probe.name,
        status=probe.status,
        counts=probe_counts_as_failure(probe.status, dict(cell.policy)),
        required=probe.name in required,
        message=capped(probe.message, TEXT_CHARS, where),
        observed_expected=observed_expected,
        evidence=_json_text(dict(probe.evidence), EVIDENCE_CHARS, where) if probe.evidence else "",
        cause=cause_text(result, probe),
        traceback=capped(probe.traceback, TEXT_CHARS, where),
        repro=capped(probe.repro, TEXT_CHARS, where),
        duration=format_seconds(probe.duration_s),
    )


def status_codes(result: Any, probe_names: Sequence[str]) -> str:
    """One letter per probe of the page (``STATUS_CODES``; ``-`` for a probe this cell has no result of)."""
    by_name = {p.name: p.status for p in result.probes}
    return "".join(STATUS_CODES.get(by_name.get(name, ""), "-") for name in probe_names)


def _quiet_lines(probes: Sequence[Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The passing probes on one line (name and time), the skipped ones grouped by their reason."""
    passed = ", ".join(
        f"{p.name} {format_seconds(p.duration_s)}" for p in probes if p.status == PASS
    )
    reasons: dict[str, list[str]] = {}
    for probe in probes:
        if probe.status == SKIP:
            reasons.setdefault(capped(probe.message, 200, "the cell's file"), []).append(probe.name)
    return passed, tuple((why, ", ".join(names)) for why, names in reasons.items())


def cell_view(
    item: Judged,
    change: str = "",
    spec: str | None = None,
    probe_names: Sequence[str] = (),
    file: str = "",
) -> CellView:
    """One cell's slot and box. A probe that passed or skipped is one name on a line, without its
    evidence (in the cell's file); every other probe gets its row, each long field capped.
    ``file``: the cell's result file relative to the page (linked), "" when it has none (read from
    a merged results.json)."""
    result, cell, verdict = item.result, item.cell, item.verdict
    # The full text: the cell's own file when there is one, else the merged results.json the report
    # wrote beside summary.md; the repro bundle either way.
    where = f"{file or 'results.json'}; `torch-matrix repro {cell.id}` bundles it"
    required = set(cell.required_probes or [p.name for p in result.probes])
    probes = tuple(
        _probe_view(result, probe, cell, required, where)
        for probe in result.probes
        if probe.status not in QUIET
    )
    passed, skipped = _quiet_lines(result.probes)
    rerun = (
        cell_repro(cell, spec)
        if verdict.kind in (INCOMPATIBLE, NO_EVIDENCE, ENVIRONMENT, TIMED_OUT)
        else ""
    )
    return CellView(
        id=cell.id,
        verdict=verdict.kind,
        symbol=TEXT_SYMBOLS[verdict.kind],
        reason=capped(verdict.reason, TEXT_CHARS, where),
        failing=verdict.failing,
        installed=item.installed,  # each once per report (rows.Judged)
        time=format_seconds(result.timings.get("total")),
        install_status=result.install.status,
        install_message=capped(result.install.message, TEXT_CHARS, where)
        if result.install.status != INSTALLED
        else "",
        install_command=" ".join(result.install.command),
        rerun=rerun,
        probes=probes,
        tests=item.tests,
        statuses=status_codes(result, probe_names or [p.name for p in result.probes]),
        change=change,
        requirements=" ".join(cell.requirements),
        extras=item.extras,
        changed_defaults=tuple(sorted(verdict.advice)),
        note="; ".join(sorted({a.advice for a in verdict.advice.values()})),
        passed=passed,
        skipped=skipped,
        file=file,
        origin=str(cell.origin) if cell.is_followup else "",
        why=cell.reason,
    )


def _missing_view(cell: Cell, spec: str | None = None, probe_names: Sequence[str] = ()) -> CellView:
    return CellView(
        id=cell.id,
        verdict=MISSING,
        symbol=TEXT_SYMBOLS[MISSING],
        reason="no result file",
        failing=(),
        installed="",
        time="",
        install_status="",
        install_message="",
        install_command="",
        rerun=cell_repro(cell, spec),
        probes=(),
        statuses="-" * len(probe_names),
        requirements=" ".join(cell.requirements),
        extras=extras_text(cell),
    )


def _column_key(cell: Cell, extra_names: Sequence[str]) -> tuple[Any, ...]:
    return (cell.variant, cell.python, tuple(cell.axes.get(name, "") for name in extra_names))


def _column_sort(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return (_variant_key(key[0]), version_key(key[1]), key[2])


def _probe_names(judged: Sequence[Judged]) -> list[str]:
    """Every probe a cell planned or ran, in the order first seen."""
    probe_names: list[str] = []
    seen: set[str] = set()
    for item in judged:
        for name in (*item.cell.probes, *(p.name for p in item.result.probes)):
            if name not in seen:
                seen.add(name)
                probe_names.append(name)
    return probe_names


def _grid(
    views: Sequence[tuple[Cell, CellView]],
) -> tuple[list[Column], list[tuple[str, int]], list[Row], bool]:
    """The heatmap: its columns (variant, Python, extras), the variant groups over them (when
    there are several), its rows (torch, torchvision; newest first) and whether torchvision is a
    row key. Follow-up cells are listed apart: the grid shows what the spec planned."""
    extra_names = sorted({name for cell, _ in views for name in extras_of(cell)})
    with_torchvision = any(cell.torchvision for cell, _ in views)
    columns_keys = sorted({_column_key(cell, extra_names) for cell, _ in views}, key=_column_sort)
    variants = {key[0] for key in columns_keys}
    columns = []
    for key in columns_keys:
        sub = " ".join(
            f"{name}{value}" if value[:1] in "<>=!~" else f"{name}={value}"
            for name, value in zip(extra_names, key[2])
            if value
        )
        columns.append(Column(key=key, label=f"py{key[1]}", sub=sub))
    groups: list[tuple[str, int]] = []
    if len(variants) > 1:
        for key in columns_keys:
            if groups and groups[-1][0] == key[0]:
                groups[-1] = (key[0], groups[-1][1] + 1)
            else:
                groups.append((key[0], 1))
    slots: dict[tuple[str, str], dict[tuple[Any, ...], list[CellView]]] = {}
    for cell, view in views:
        if cell.is_followup:
            continue
        row_key = (cell.torch, cell.torchvision if with_torchvision else "")
        slots.setdefault(row_key, {}).setdefault(_column_key(cell, extra_names), []).append(view)
    rows = [
        Row(
            torch=row_key[0],
            torchvision=row_key[1],
            slots=tuple(tuple(slots[row_key].get(column.key, ())) for column in columns),
        )
        for row_key in sorted(
            slots, key=lambda k: (version_key(k[0]), version_key(k[1])), reverse=True
        )
    ]
    return columns, groups, rows, with_torchvision


def build_page(
    results: Iterable[Any],
    *,
    missing: Sequence[Cell | str] = (),
    previous: Mapping[str, str] | None = None,
    previous_label: str | None = None,
    title: str = "torch-matrix results",
    generated: str = "",
    spec: str | None = None,
    cell_files: Mapping[str, str] | None = None,
    pins: Sequence[tuple[str, Sequence[str]]] = (),
) -> Page:
    """The page's data. ``previous``: cell id -> verdict kind of an earlier run (highlights changes).
    ``cell_files``: cell id -> its result file relative to the page (the links to the full text).
    ``pins``: the suggested requirement lines, each with its proof lines (``pins.render``)."""
    judged = judge(results)
    probe_names = _probe_names(judged)
    views: list[tuple[Cell, CellView]] = []
    for item in judged:
        change = ""
        if previous is not None:
            before = previous.get(item.cell.id)
            change = NEW if before is None else ("" if before == item.verdict.kind else before)
        file = (cell_files or {}).get(item.cell.id, "")
        views.append((item.cell, cell_view(item, change, spec, probe_names, file)))
    views += [
        (cell, _missing_view(cell, spec, probe_names)) for cell in missing if isinstance(cell, Cell)
    ]
    columns, groups, rows, with_torchvision = _grid(views)
    counts = count_verdicts(judged)
    count_list = [(str(kind), TEXT_SYMBOLS[kind], counts[kind]) for kind in VERDICTS]
    if missing:
        count_list.append((MISSING, TEXT_SYMBOLS[MISSING], len(missing)))
    legend = [
        (kind, TEXT_SYMBOLS[kind], VERDICT_LABELS[kind], VERDICT_HELP[kind])
        for kind in (*VERDICTS, MISSING)
    ]
    cell_views = [view for _, view in views]
    present = {view.id for view in cell_views}
    hardware_headers, hardware_rows = hardware_table(judged)
    return Page(
        title=title,
        counts=count_list,
        total=len(judged),
        columns=columns,
        column_groups=groups,
        rows=rows,
        with_torchvision=with_torchvision,
        cells=cell_views,
        probe_names=probe_names,
        legend=legend,
        previous=previous_label if previous is not None else None,
        changes=[view for view in cell_views if view.change],
        gone=sorted(cell_id for cell_id in (previous or {}) if cell_id not in present),
        generated=generated,
        hardware_headers=hardware_headers,
        hardware_rows=hardware_rows,
        hardware_reasons=hardware_reasons(judged, width=600),
        changed_default_notes=changed_default_notes(judged),
        code_fix_notes=code_fix_notes(judged),
        followups=[view for view in cell_views if view.origin],
        pins=[(line, tuple(proof)) for line, proof in pins],
    )


def _inert(value: Any) -> Any:
    """Every text the page shows, before Jinja escapes its HTML: a probe's message can hold
    terminal escapes (torch's bold markers, a title or cursor sequence). Colour and bold dropped,
    every other control character shown as ``\\x1b`` (``vocab.escaping.terminal``): the page never
    carries a raw ESC. Markup the template made itself (``tojson``) is left as it is."""
    if type(value) is str:  # nearly every value (50,000 for 2,000 cells): plain text, no Markup
        return value if value.isprintable() else terminal(value)
    import markupsafe

    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return terminal(value)
    return value


@lru_cache(maxsize=4)
def _template(compiled_dir: str | None = None) -> jinja2.Template:
    """The page's template. ``compiled_dir``: where its compiled form is kept between runs (Jinja's
    bytecode cache; compiling it was 5% of ``report --html``, issue 46), in a folder named by this
    module's own digest, so that a changed environment (its options live here) never reads code
    compiled under the old one; Jinja checks the template's source and the Python version itself.
    A folder that cannot be read or written costs the compile, never the page."""
    import jinja2

    cache = None
    if compiled_dir:
        import hashlib
        import os

        with open(__file__, "rb") as handle:
            own = hashlib.sha256(handle.read()).hexdigest()[:16]
        cache = _bytecode_cache(os.path.join(compiled_dir, own))
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torch_matrix.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        finalize=_inert,
        bytecode_cache=cache,
    )
    env.filters["plural"] = plural
    env.filters["shell"] = lambda *args: shell_line(args)  # a command shown to paste: quoted
    return env.get_template(TEMPLATE)


def _bytecode_cache(directory: str) -> Any:
    """Jinja's file cache in ``directory``, which it makes, and which never fails the page (an
    ``OSError`` reading or writing it: the template is compiled as if there were no cache)."""
    import os

    import jinja2

    class QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except OSError:
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                os.makedirs(self.directory, exist_ok=True)
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return QuietBytecodeCache(directory)


def render_html(
    results: Iterable[Any],
    *,
    missing: Sequence[Cell | str] = (),
    previous: Mapping[str, str] | None = None,
    previous_label: str | None = None,
    title: str = "torch-matrix results",
    generated: str = "",
    spec: str | None = None,
    cell_files: Mapping[str, str] | None = None,
    pins: Sequence[tuple[str, Sequence[str]]] = (),
    compiled_dir: str | None = None,
) -> str:
    """The page. ``compiled_dir``: where the template's compiled form is kept between runs
    (``_template``); None compiles it each time."""
    page = build_page(
        results,
        missing=missing,
        previous=previous,
        previous_label=previous_label,
        title=title,
        generated=generated,
        spec=spec,
        cell_files=cell_files,
        pins=pins,
    )
    return _template(compiled_dir).render(
        page=page,
        PASS=PASS,
        MARK=CHANGED_DEFAULT_MARK,
        MARK_HELP=CHANGED_DEFAULT_HELP,
        CODE_STATUSES={code: status for status, code in STATUS_CODES.items()},
    )
