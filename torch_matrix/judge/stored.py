"""The stored verdict: each cell judged once, the verdict kept with its record (pure).

A cell is judged when its result is written (``world.results.write_result``): the verdict goes
into the record (``CellResult.verdict``: the ``Verdict``'s JSON; ``of``, the digest of the record
that carries it; ``context``, the run's marks it was judged with, none for a cell judged alone).
The report judges the run's cells in the run's context once more where that context marks them
(``judge.runcontext``: a counterfactual refuted an "add it" advice, a suite that collects in no
cell, a module another cell's release shipped) and stores those verdicts, with their context, in
the run's results.json and its history. Every reader (the table, the HTML, results.json, repro,
the pins, the history) asks ``verdict.verdict_of``, which returns the stored verdict.

A stored verdict counts only for the record and the context it judged:

- a record changed in memory (``dataclasses.replace``) carries none, and is judged again;
- a file edited after it was judged fails ``of`` when it is loaded (``holds``): judged again,
  and the loader says so by the file's name;
- a context that differs from the stored one (the report's run has marks the cell's own file was
  judged without, or a subset of a run is read) is judged again in the context read
  (``judge_run``), and the report names each cell whose verdict differs from its file's.

Files are never rewritten by a reader: a cell's file keeps what its run wrote. ``report
--rejudge`` judges every record again with this version's rules, for that report.
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
from torch_matrix.vocab.records import TIMEOUT, CellResult

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


def context_of(result: CellResult) -> dict[str, dict[str, Any]]:
    """probe name -> the run's marks (``CONTEXT_MARKS``) its evidence holds: the context a
    verdict of ``result`` is judged in (empty: judged alone)."""
    marks: dict[str, dict[str, Any]] = {}
    for probe in result.probes:
        evidence = probe.evidence
        if evidence and not _MARKS.isdisjoint(evidence):  # nearly every probe: no mark
            marks[probe.name] = {key: evidence[key] for key in CONTEXT_MARKS if key in evidence}
    return marks


_MARKS = frozenset(CONTEXT_MARKS)


def judged(result: CellResult) -> CellResult:
    """``result`` carrying its verdict, judged now (in the context its marks hold) unless it
    carries one already."""
    if result.verdict:
        return result
    stored: dict[str, Any] = {
        **fresh_verdict(result).to_json(),
        "of": record_digest(result.to_json()),
    }
    context = context_of(result)
    if context:
        stored["context"] = context
    stored["judged_by"] = TOOL_VERSION
    return result.with_verdict(stored)


@dataclass(frozen=True)
class Rejudged:
    """A cell whose stored verdict did not stand in the context read, and what it is there."""

    cell: str
    was: str  # the stored verdict's kind
    now: str  # its verdict's kind in the context read
    why: str  # "context" (judged in another context) or "rejudge" (asked for)


def judge_run(
    results: Sequence[CellResult], rejudge: bool = False
) -> tuple[list[CellResult], list[Rejudged]]:
    """The run's records in the run's context (``in_run_context``: the marks the report shows),
    each carrying its verdict: the stored one where it was judged in this same context, else
    judged now. Returns them in order, and the cells whose stored verdict was not kept."""
    records = list(results)
    out: list[CellResult] = []
    replaced: list[Rejudged] = []
    for original, in_context in zip(records, in_run_context(records)):
        stored = original.verdict
        if (
            stored
            and not rejudge
            and in_context is original  # the run's context added no mark to it
            and dict(stored.get("context") or {}) == context_of(original)
        ):
            out.append(original)
            continue
        now = judged(in_context if in_context is not original else original.with_verdict({}))
        out.append(now)
        if stored:
            replaced.append(
                Rejudged(
                    cell=original.cell.id,
                    was=str(stored.get("kind", "")),
                    now=str(now.verdict["kind"]),
                    why="rejudge" if rejudge else "context",
                )
            )
    return out, replaced


# The first result schema whose verdicts know ``timeout`` (a probe past its limit: no evidence).
_TIMEOUT_KIND_SINCE = 9


def judged_before_timeouts(data: Mapping[str, Any], result: CellResult) -> bool:
    """A file an older version wrote whose stored verdict judged a timed-out probe (as a failure)."""
    version = data.get("schema_version")
    return (
        isinstance(version, int)
        and version < _TIMEOUT_KIND_SINCE
        and any(probe.status == TIMEOUT for probe in result.probes)
    )
