"""Cell result files on disk: writing, schema-validated loading and merging, reading one back for resume.

Result files come from many machines (CI shards, artifacts downloaded into one folder),
so loading is defensive: a corrupt, truncated, foreign or newer file is reported by
name and skipped, never raised. Writes go through ``fileio.atomic_write`` so a Ctrl-C
never leaves half a file; paths come from ``layout``; the resume rule itself is
``verdict.is_complete``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from torch_matrix.vocab import layout
from torch_matrix.judge.stored import Rejudged, holds, judge_run, judged, judged_before_timeouts
from torch_matrix.judge.verdict import Verdict, fresh_verdict
from torch_matrix import __version__ as TOOL_VERSION
from torch_matrix.vocab.errors import UserError
from torch_matrix.edges.fileio import atomic_write as atomic_write_text  # noqa: F401 - the name callers import
from torch_matrix.edges.fileio import cyclic_gc_paused
from torch_matrix.vocab.layout import MERGED_NAME
from torch_matrix.vocab.records import (
    SCHEMA_ID,
    SCHEMA_VERSION,
    Cell,
    CellResult,
)
from torch_matrix.judge.verdict import is_complete
from torch_matrix.world.shardvalues import (
    check_numbers,
    check_targets,
    check_values,
    may_need_checking,
)
from torch_matrix.world.resultfiles import candidate_files
from torch_matrix.world.resultschema import (
    cell_file_text,
    describe_schema_error,
    is_canonical_json,
    stored_verdict_problem,
    written_with_verdict,
)

MERGED_SCHEMA_ID = "torch-matrix/results"
MERGED_SCHEMA_VERSION = 1
NO_RESULTS_HINT = (
    "run `nox -s matrix` first (it writes results/<run>/cells/), or pass the directory "
    "that holds the cell results"
)


def no_results_hint(cwd: str | os.PathLike[str] | None = None) -> str:
    """The hint that names the command the user has: ``nox -s matrix`` where a noxfile.py is,
    ``torch-matrix run`` in a project without one (a downstream repository)."""
    here = Path(cwd or os.getcwd())
    if (here / "noxfile.py").is_file():
        return NO_RESULTS_HINT
    return (
        "run `torch-matrix run` first (it writes results/<run>/cells/), or pass the directory "
        "that holds the cell results"
    )


@dataclass
class LoadedResults:
    results: list[CellResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each, naming the file
    skipped: list[str] = field(default_factory=list)  # files (or merged entries) not loaded at all
    sources: dict[str, str] = field(
        default_factory=dict, repr=False
    )  # cell id -> file it came from
    # cell id -> (result, the validated dict it was read from, its compact JSON text if already made):
    # lets write_merged skip to_json() and json.dumps()
    loaded_json: dict[str, tuple[CellResult, dict[str, Any], str | None]] = field(
        default_factory=dict, repr=False
    )
    # Cells whose stored verdict did not stand in the context read (``judge.stored.judge_run``):
    # the report names those whose verdict differs (``rejudged_lines``).
    rejudged: list[Rejudged] = field(default_factory=list)
    # Results the run's plan no longer plans (``plan.stale``): cell id -> why; never counted.
    stale: dict[str, str] = field(default_factory=dict)

    def skip(self, where: str, why: str) -> None:
        self.problems.append(f"{where}: {why}")
        self.skipped.append(where)

    def json_of(self, result: CellResult) -> dict[str, Any] | None:
        """The dict ``result`` was loaded from, when it is exactly what ``result.to_json()`` gives."""
        found = self.loaded_json.get(result.cell.id)
        if found is None or found[0] is not result or not is_canonical_json(found[1]):
            return None
        return found[1]

    def merged_line_of(self, result: CellResult) -> str | None:
        """``result``'s line in a merged results.json, when loading already made it (same bytes)."""
        found = self.loaded_json.get(result.cell.id)
        if found is None or found[2] is None or self.json_of(result) is None:
            return None
        return found[2]


def cells_dir(results_root: str | os.PathLike[str], run_name: str) -> Path:
    return layout.cells_dir(layout.run_dir(results_root, run_name))


# ---------------------------------------------------------------------------- writing


def file_digest(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's bytes, "" when it cannot be read (the identity ``replaces`` names)."""
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def write_result(result: CellResult, directory: str | os.PathLike[str]) -> Path:
    """Write ``<directory>/<cell-id>.json`` atomically and return its path. A result that
    overwrites an earlier one names it (``replaces``: that file's digest), so a merge of copies
    from several machines knows which is the rerun without trusting their clocks."""
    path = layout.cell_file(directory, result.cell.id)
    previous = file_digest(path) if path.exists() else ""
    if previous and not result.replaces:
        # ``replaces`` is not part of what a verdict judges: the stored one stays
        result = dataclasses.replace(result, replaces=previous).with_verdict(result.verdict)
    result = judged(result)  # judged once, here, unless it carries its verdict (judge.stored)
    data = result.to_json()
    # The file's own digest (``text``) vouches that the loader may skip the record's schema check
    # and digest: written only for a valid record whose verdict is its own. Any other is written
    # without one and checked in full when it is read (refused, or judged again), as before.
    certified = describe_schema_error(data) is None and holds(data, result)
    atomic_write_text(path, cell_file_text(data, digest=certified))
    return path


def write_merged(
    results: Iterable[CellResult], path: str | os.PathLike[str], loaded: LoadedResults | None = None
) -> Path:
    """One ``results.json`` holding every cell, for artifacts and later merges.

    With ``loaded`` (where ``results`` came from), a result whose file already held exactly
    its ``to_json()`` is written from that dict: same bytes, no second conversion.
    """

    def line(result: CellResult) -> str:
        if loaded is not None:
            known = loaded.merged_line_of(result)
            if known is not None:
                return known
            data = loaded.json_of(result)
            if data is not None:
                return _compact(data)
        return _compact(result.to_json())

    target = Path(path)
    # One cell per line: compact (the C encoder; indent= is 10x slower) yet diffable.
    lines = [line(result) for result in results]
    atomic_write_text(target, _merged_head() + ",\n".join(lines) + _MERGED_TAIL)
    return target


def _compact(data: Any) -> str:
    return _COMPACT(data)


# One encoder for every line (json.dumps builds one per call). No circular check: what it encodes
# was parsed from JSON or made by to_json(), neither of which can hold a cycle.
_COMPACT = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


_MERGED_TAIL = "\n]}\n"


@lru_cache(maxsize=1)
def _merged_head() -> str:
    """What write_merged puts before the first cell line."""
    head = _compact({"schema": MERGED_SCHEMA_ID, "schema_version": MERGED_SCHEMA_VERSION})[:-1]
    return head + ',"cells":[\n'


@lru_cache(maxsize=1)
def _cell_line_prefix() -> str:
    """How a line of write_merged starts, up to the cell id's opening quote."""
    text = _compact({"schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "cell": {"id": ""}})
    return text[: -len('""}}')]


# ---------------------------------------------------------------------------- reading


def _read_bytes(path: Path) -> bytes:
    """``path.read_bytes()`` without the buffered file object around the descriptor: a third
    less CPU over 2,500 small result files (each read whole either way)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read_json(path: Path) -> tuple[Any, str | None, str]:
    """(data, why not, the text): the text tells ``shardvalues.may_need_checking`` whether to look closer."""
    try:
        # Bytes then one decode: a quarter cheaper than read_text's newline-translating reader, and
        # the same JSON (a CR or LF inside a JSON string is invalid either way).
        text = _read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text", ""
    except OSError as error:
        return None, f"cannot read ({error.strerror or error})", ""
    if not text.strip():
        return None, "empty file", ""
    try:
        return json.loads(text), None, text
    except json.JSONDecodeError:
        text = text.replace("\r\n", "\n").replace(
            "\r", "\n"
        )  # place errors as an editor counts lines
    except RecursionError:
        return None, "not JSON (nested too deeply)", text
    except ValueError:  # an integer of more digits than Python converts (4,300)
        return None, "not JSON that Python reads (a number with too many digits)", text
    try:
        return json.loads(text), None, text
    except json.JSONDecodeError as error:
        return None, f"not JSON (line {error.lineno} column {error.colno})", text
    except RecursionError:
        return None, "not JSON (nested too deeply)", text


@dataclass
class _Entry:
    result: CellResult
    source: str  # "results/x/cells/a.json" or "results/results.json[3]"
    merged: bool  # came from a merged results.json (a derived copy)
    data: dict[str, Any]
    line: str | None = None  # _compact(data), made when a merged file is compared with it
    path: Path | None = None  # the cell file it was read from (None for a merged copy)

    def compact(self) -> str:
        if self.line is None:
            self.line = _compact(self.data)
        return self.line


def _cell_id_of(item: Any) -> Any:
    cell = item.get("cell") if isinstance(item, dict) else None
    return cell.get("id") if isinstance(cell, dict) else None


def _merged_items_by_line(
    path: Path, known: dict[str, _Entry]
) -> list[tuple[int, Any, str]] | None:
    """The items of a merged file laid out as write_merged writes it, with their positions, leaving
    out each line that is byte for byte the compact JSON of a result already loaded (a report run in
    place reads its own results.json back: no need to parse 2,000 copies). None when the file is
    laid out otherwise or does not parse line by line: the caller then reads it whole, as before."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    head, prefix = _merged_head(), _cell_line_prefix()
    if (
        not text.startswith(head)
        or not text.endswith(_MERGED_TAIL)
        or len(text) < len(head) + len(_MERGED_TAIL)
    ):
        return None
    middle = text[len(head) : -len(_MERGED_TAIL)]
    if not middle:
        return []
    lines = middle.split("\n")  # json.dumps escapes newlines inside strings: one line, one cell
    items: list[tuple[int, Any, str]] = []
    for position, line in enumerate(lines):
        if position < len(lines) - 1:
            if not line.endswith(","):
                return None
            line = line[:-1]
        if line.startswith(prefix) and line[len(prefix) : len(prefix) + 1] == '"':
            entry = known.get(line[len(prefix) + 1 : line.find('"', len(prefix) + 1)])
            if entry is not None and entry.compact() == line:
                continue
        try:
            items.append((position, json.loads(line), line))
        except (ValueError, RecursionError):
            return None
    return items


def _entries_from_file(
    path: Path, shown: str, out: LoadedResults, known: dict[str, _Entry] | None = None
) -> Iterator[_Entry]:
    if known and path.name == MERGED_NAME:
        items = _merged_items_by_line(path, known)
        if items is not None:
            for position, item, line in items:
                entry = _entry_from_data(
                    item,
                    f"{shown}[{position}]",
                    out,
                    merged=True,
                    suspicious=may_need_checking(line),
                )
                if entry:
                    yield entry
            return
    data, problem, text = _read_json(path)
    if problem:
        out.skip(shown, problem)
        return
    suspicious = may_need_checking(text)
    if isinstance(data, dict) and data.get("schema") == MERGED_SCHEMA_ID:
        version = data.get("schema_version")
        if isinstance(version, int) and version > MERGED_SCHEMA_VERSION:
            out.skip(
                shown,
                f"schema_version {version} is newer than this tool "
                f"understands ({MERGED_SCHEMA_VERSION})",
            )
            return
        cells = data.get("cells")
        if version != MERGED_SCHEMA_VERSION or not isinstance(cells, list):
            out.skip(shown, "not a torch-matrix merged results file")
            return
        for position, item in enumerate(cells):
            if (
                known is not None
                and _cell_id_of(item) in known
                and known[_cell_id_of(item)].data == item
            ):
                continue  # an exact copy of a result already loaded: nothing to validate
            entry = _entry_from_data(
                item, f"{shown}[{position}]", out, merged=True, suspicious=suspicious
            )
            if entry:
                yield entry
        return
    if path.name == MERGED_NAME and not (
        isinstance(data, dict) and data.get("schema") == SCHEMA_ID
    ):
        out.skip(shown, "not a torch-matrix results file")
        return
    entry = _entry_from_data(data, shown, out, merged=False, suspicious=suspicious, text=text)
    if entry:
        entry.path = path
        yield entry


_AT = "invalid cell result at "  # how describe_schema_error places an error
_AT_VERDICT = _AT + "verdict"


def _entry_from_data(
    data: Any,
    shown: str,
    out: LoadedResults,
    merged: bool,
    suspicious: bool = True,
    text: str | None = None,
) -> _Entry | None:
    # Values first (shardvalues): a NaN duration or a lone surrogate costs that field, not the cell.
    notes = check_numbers(data) + check_targets(data) + (check_values(data) if suspicious else [])
    # A cell file unchanged since it was written with its verdict needs only the verdict checked.
    written = text is not None and not notes and written_with_verdict(text, data)
    problem = stored_verdict_problem(data) if written else describe_schema_error(data)
    if problem and written:
        written, problem = False, describe_schema_error(data)
    if problem and problem.startswith(_AT_VERDICT) and isinstance(data, dict):
        # The stored verdict is derived from the record: a damaged one costs the verdict (judged
        # again), never the cell's evidence.
        bare = {key: value for key, value in data.items() if key != "verdict"}
        if describe_schema_error(bare) is None:
            notes.append(f"its stored verdict is not valid ({problem[len(_AT) :]}); judged again")
            data, problem = bare, None
    if problem:
        out.skip(shown, problem)
        return None
    stored = data.get("verdict")
    digested = isinstance(stored, dict) and "text" in stored
    if digested:  # the file's own digest: checked above, meaningless in memory or results.json
        data = {**data, "verdict": {k: v for k, v in stored.items() if k != "text"}}
    try:
        result = CellResult.from_json(data)
    except (KeyError, TypeError, ValueError) as error:  # schema and records out of step
        out.skip(shown, f"cannot read cell result ({type(error).__name__}: {error})")
        return None
    if notes:
        out.problems.append(f"{shown}: {'; '.join(notes)}")
    if result.verdict and not written and not holds(data, result):
        if not notes:  # a repaired value (said above) is no edit
            out.problems.append(
                f"{shown}: the record changed after its verdict ({result.verdict.get('kind')}) "
                "was stored; judged again (rerun the cell to store a new result)"
            )
        result = result.with_verdict({})
    elif result.verdict and judged_before_timeouts(data, result):
        result = result.with_verdict({})  # judged again: a probe past its limit is no evidence now
    elif (
        result.verdict
        and not written
        and text is not None
        and data.get("schema_version") == SCHEMA_VERSION
        and result.verdict.get("judged_by") == TOOL_VERSION
    ):
        # A cell file of this version whose own digest is gone or no longer fits, while the
        # record's (``of``) holds: its layout changed, or the verdict itself. Judged by these same
        # rules, a verdict that differs from the record's can only be an edit. (A verdict another
        # version stored is kept: its rules may differ; ``report --rejudge`` judges it again.)
        now = fresh_verdict(result)
        was = Verdict.from_json(result.verdict)
        if now != was:
            differs = (
                f"{was.kind}, not {now.kind}"
                if now.kind != was.kind
                else f"{was.kind}, with another reason or cause"
            )
            out.problems.append(
                f"{shown}: its stored verdict ({differs}) is not what its record judges: the "
                "file was edited after it was written; judged again"
            )
            result = result.with_verdict({})
    return _Entry(result, shown, merged, data)


def _choose(first: _Entry, second: _Entry) -> tuple[_Entry, _Entry, str]:
    """(kept, dropped, what to say) for two different copies of one cell ("" says nothing).

    A cell file beats a merged copy (cells are the truth; a merged file is derived). Between
    two cell files, a rerun names the file it overwrote (``replaces``): that decides, whatever
    the clocks. Only when neither names the other are they independent runs, and the one that
    finished later by its own machine's clock is kept, saying so."""
    if first.merged != second.merged:
        cell, copy = (second, first) if first.merged else (first, second)
        return cell, copy, "a cell file beats a merged copy, whatever their finish times"
    if not first.merged:
        for keep, drop in ((second, first), (first, second)):
            if (
                keep.result.replaces
                and drop.path is not None
                and keep.result.replaces == file_digest(drop.path)
            ):
                return (
                    keep,
                    drop,
                    (
                        f"it is the rerun (it replaced that result, finished "
                        f"{drop.result.finished_at or '?'}; the rerun's clock says "
                        f"{keep.result.finished_at or '?'})"
                    ),
                )
    if _finished_key(first) == _finished_key(second):
        return (
            first,
            second,
            (
                f"same finish time ({first.result.finished_at or '?'}) but different content, "
                "and neither replaced the other; kept the one found first: rerun the cell to settle it"
            ),
        )
    keep, drop = (
        (second, first) if _finished_key(second) > _finished_key(first) else (first, second)
    )
    if keep.merged:
        return keep, drop, ""
    hosts = {str(e.result.platform.get("host", "")) for e in (keep, drop)}
    clocks = "two machines' clocks" if len(hosts) > 1 else "its clock"
    return (
        keep,
        drop,
        (
            f"independent runs (neither replaced the other): kept the newer by {clocks} "
            f"(finished {keep.result.finished_at or '?'} vs {drop.result.finished_at or '?'})"
        ),
    )


def _finished_key(entry: _Entry) -> tuple[int, Any]:
    stamp = entry.result.finished_at
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return (1, moment.timestamp())
    except ValueError:
        return (0, stamp)


def load_results(root: str | os.PathLike[str], rejudge: bool = False) -> LoadedResults:
    """Every cell result under ``root`` (a folder at any depth, or one file), one per cell id.

    Looks for ``**/cells/*.json`` and merged ``**/results.json`` (not a report's own, beside
    its ``cells/``: see ``resultfiles.candidate_files``). Bad files go to ``problems``. When one cell id
    has several different results, ``_choose`` decides (cell file over merged copy, rerun
    over what it replaced, else the later finish) and each choice is reported in ``problems``.

    Every result comes back carrying its verdict in the run's context (``judge.stored``): the
    stored one where it stands, else judged now (``rejudge``: every one judged again).
    """
    base = Path(root)
    if not base.exists():
        raise UserError("results directory does not exist", str(root), hint=no_results_hint())
    files = [base] if base.is_file() else candidate_files(base)
    with cyclic_gc_paused():
        loaded = _load_files(files)
    if base.is_dir():
        from torch_matrix.world.runplan import stale_in

        for cell_id, why in stale_in(base, loaded.results).items():
            loaded.stale[cell_id] = why
            loaded.problems.append(
                f"{loaded.sources.get(cell_id, cell_id)}: stale, not counted: {why}"
            )
        loaded.results[:] = [r for r in loaded.results if r.cell.id not in loaded.stale]
    loaded.results[:], loaded.rejudged = judge_run(loaded.results, rejudge=rejudge)
    return loaded


def rejudged_lines(loaded: LoadedResults) -> list[str]:
    """One line per cell whose verdict in the context read differs from the one its result stored
    (``judge.stored.judge_run``): the report says which verdict it shows, and why."""
    lines = []
    for item in loaded.rejudged:
        if item.was == item.now:
            continue
        because = (
            "judged again with this version's rules (--rejudge)"
            if item.why == "rejudge"
            else "judged in this run's context, which its result was judged without"
        )
        where = loaded.sources.get(item.cell, "its result")
        lines.append(f"{item.cell}: {item.now} ({where} stored {item.was}): {because}")
    return lines


def _load_files(files: list[Path]) -> LoadedResults:
    out = LoadedResults()
    chosen: dict[str, _Entry] = {}
    for path in files:
        shown = str(path)
        for entry in _entries_from_file(path, shown, out, chosen):
            cell_id = entry.result.cell.id
            if not entry.merged and path.stem != cell_id:
                out.problems.append(
                    f"{shown}: holds cell {cell_id!r}; file name does not match (loaded anyway)"
                )
            previous = chosen.get(cell_id)
            if previous is None:
                chosen[cell_id] = entry
                continue
            if previous.data == entry.data:
                if previous.merged and not entry.merged:
                    chosen[cell_id] = entry  # name the real cell file as the source
                continue
            keep, drop, why = _choose(previous, entry)
            chosen[cell_id] = keep
            if why:
                out.problems.append(
                    f"{drop.source}: duplicate result for cell {cell_id}; kept {keep.source}: {why}"
                )
    out.results = [chosen[key].result for key in sorted(chosen)]
    out.sources = {key: entry.source for key, entry in chosen.items()}
    out.loaded_json = {key: (entry.result, entry.data, entry.line) for key, entry in chosen.items()}
    return out


def read_result(path: str | os.PathLike[str]) -> CellResult | None:
    """One cell result file, or None if it is missing or not a valid current result."""
    file = Path(path)
    if not file.is_file():
        return None
    entries = list(_entries_from_file(file, str(file), LoadedResults()))
    return entries[0].result if len(entries) == 1 and not entries[0].merged else None


def has_complete_result(directory: str | os.PathLike[str], cell: Cell, fingerprint: str) -> bool:
    """True when resume may skip ``cell``: its stored result (read here) is complete (``verdict.is_complete``)."""
    return is_complete(read_result(layout.cell_file(directory, cell.id)), cell, fingerprint)
