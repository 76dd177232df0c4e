"""The stored verdict: one per cell, computed once and kept in its result record (pure).

A cell is judged when its result is written (``world.results.write_result``): the verdict goes
into the record (``CellResult.verdict``: the ``Verdict``'s JSON, ``of``, the digest of the record
it judged, and ``context``, the run's marks it was judged with). Every reader (the table, the
HTML, results.json, repro, the pins, the history) asks ``verdict.verdict_of``, which returns the
stored verdict. A stored verdict counts only for the record and the context it judged:

- a record changed in memory (``dataclasses.replace``) carries none, and is judged again;
- a file edited after it was judged fails ``of`` when it is loaded (``holds``): judged again,
  and the loader says so by the file's name;
- when the run's context marks a probe (``judge.runcontext``: a counterfactual refuted an "add
  it" advice, a suite that collects nowhere, a module another cell's release shipped) and the
  stored verdict was judged without that mark, ``judge_run`` judges the cell again in the run's
  context and lists it (``Rejudged``); the report writes the new verdict back to the cell's file
  and says which verdicts changed. Later loads read it.

``report --rejudge`` judges every record again with this tool's rules (a newer catalogue).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_matrix import __version__ as TOOL_VERSION
from torch_matrix.judge.causes import COLLECTED_NOWHERE, MODULE_PROVIDER, REFUTED_BY
from torch_matrix.judge.runcontext import in_run_context
from torch_matrix.judge.verdict import fresh_verdict
from torch_matrix.vocab.records import CellResult

# Left out of the digest: the envelope, the verdict itself, which file a rerun replaced, and the
# hardware targets (judged apart, again when the spec's [targets] change: ``run.cellrun.rejudged``).
DIGEST_LEFT_OUT = frozenset({"schema", "schema_version", "verdict", "replaces", "targets"})
# The evidence keys ``judge.runcontext`` adds to a probe: the context a verdict was judged in.
CONTEXT_MARKS = (COLLECTED_NOWHERE, MODULE_PROVIDER, REFUTED_BY)


def record_digest(data: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a cell result's JSON (``to_json()`` or a loaded file) without
    ``DIGEST_LEFT_OUT``, in the order the keys come (``to_json``'s: ``holds`` compares a file
    written in another order as the record writes it)."""
    body = {key: value for key, value in data.items() if key not in DIGEST_LEFT_OUT}
    return "sha256:" + hashlib.sha256(_ENCODE(body).encode("utf-8", "surrogatepass")).hexdigest()


# One encoder (json.dumps builds one per call); no circular check: the data came from JSON or to_json.
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def holds(data: Mapping[str, Any], result: CellResult) -> bool:
    """Whether a loaded result file's stored verdict judged exactly this record (``result``, read
    from ``data``); True when it stores none: there is nothing to distrust. The file's own text is
    tried first (the common case: no conversion); a file written otherwise but meaning the same
    (``1.0`` for ``1``, another key order) is compared as the record writes it."""
    stored = data.get("verdict")
    if not stored:
        return True
    of: Any = stored.get("of")
    return bool(of == record_digest(data) or of == record_digest(result.to_json()))


def context_of(original: CellResult, in_context: CellResult) -> dict[str, dict[str, Any]]:
    """probe name -> the marks ``in_run_context`` added to it (empty: judged alone)."""
    if in_context is original:
        return {}
    before = {probe.name: probe.evidence for probe in original.probes}
    marks: dict[str, dict[str, Any]] = {}
    for probe in in_context.probes:
        added = {
            key: probe.evidence[key]
            for key in CONTEXT_MARKS
            if key in probe.evidence and key not in before.get(probe.name, {})
        }
        if added:
            marks[probe.name] = added
    return marks


def judged(
    result: CellResult, context: Mapping[str, Any] | None = None, record: CellResult | None = None
) -> CellResult:
    """``result`` carrying its verdict, judged now unless it carries one. ``record``: the record
    as written (``result`` without the run's marks, which ``context`` holds); the digest is of it."""
    if result.verdict:
        return result
    stored: dict[str, Any] = {
        **fresh_verdict(result).to_json(),
        "of": record_digest((record or result).to_json()),
    }
    if context:
        stored["context"] = dict(context)
    stored["judged_by"] = TOOL_VERSION
    return result.with_verdict(stored)


@dataclass(frozen=True)
class Rejudged:
    """A cell whose stored verdict did not stand, and what replaces it."""

    cell: str
    was: str  # the stored verdict's kind
    now: str  # the verdict's kind now
    why: str  # "context" (the run's marks changed) or "rejudge" (asked for)
    # The record to write back to the cell's file: as it was read, with the new verdict (the
    # run's marks stay out of the file; the verdict's ``context`` names them).
    record: CellResult


def judge_run(
    results: Sequence[CellResult], rejudge: bool = False
) -> tuple[list[CellResult], list[Rejudged]]:
    """The run's records in the run's context (``in_run_context``: the marks the report shows),
    each carrying its verdict: the stored one where it was judged in this same context, else
    judged now. Returns them in order, and the cells whose stored verdict was replaced."""
    records = list(results)
    marked = in_run_context(records)
    out: list[CellResult] = []
    replaced: list[Rejudged] = []
    for original, in_context in zip(records, marked):
        context = context_of(original, in_context)
        stored = original.verdict
        if stored and not rejudge and dict(stored.get("context") or {}) == context:
            out.append(in_context if in_context is original else in_context.with_verdict(stored))
            continue
        fresh = in_context if in_context is not original else original.with_verdict({})
        now = judged(fresh, context, record=original)
        out.append(now)
        if stored:
            replaced.append(
                Rejudged(
                    cell=original.cell.id,
                    was=str(stored.get("kind", "")),
                    now=str(now.verdict["kind"]),
                    why="rejudge" if rejudge else "context",
                    record=original.with_verdict(now.verdict),
                )
            )
    return out, replaced
