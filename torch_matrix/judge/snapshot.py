"""A run reduced to what history and diffs compare (pure records): ``RunRef`` (which run),
``Snapshot`` (per cell its verdict, ``CellState``, and each probe's ``ProbeState``), ``PassRate``
(how a cell+probe fared over many runs). ``report.diff`` compares them; ``world.history`` stores
them; both import them from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from torch_matrix.vocab.records import CRASH, ERROR, FAIL, PASS, TIMEOUT, CellResult
from torch_matrix.judge.verdict import INCOMPATIBLE, verdict_of

# Probe statuses that are evidence either way; unsupported / skip are neither (not counted).
BAD_STATUSES = (FAIL, ERROR, TIMEOUT, CRASH)
EVIDENCE_STATUSES = (PASS,) + BAD_STATUSES


@dataclass(frozen=True)
class RunRef:
    """One run as the history knows it. ``id`` is content-derived (see ``run_id``)."""

    id: str
    date: str = ""  # ISO 8601 UTC: when its last cell finished
    spec: str = ""
    commit: str = ""
    source: str = ""  # the results directory it was read from

    def label(self) -> str:
        day = self.date[:16].replace("T", " ")
        return f"{self.id} ({day})" if day else self.id


@dataclass(frozen=True)
class ProbeState:
    status: str
    message: str = ""
    repro: str = ""


@dataclass(frozen=True)
class CellState:
    cell: str
    verdict: str
    reason: str = ""
    failing: tuple[str, ...] = ()  # required probes that made it incompatible
    requirements: tuple[str, ...] = ()
    python: str = ""
    probes: Mapping[str, ProbeState] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    run: RunRef
    cells: Mapping[str, CellState]


def run_id(results: Iterable[CellResult]) -> str:
    """Same results, same id: importing a run twice adds nothing. Hash of (cell, fingerprint, finished)."""
    import hashlib

    lines = sorted(f"{r.cell.id}\t{r.fingerprint}\t{r.finished_at}" for r in results)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def cell_state(result: CellResult) -> CellState:
    verdict = verdict_of(result)
    return CellState(
        cell=result.cell.id,
        verdict=verdict.kind,
        reason=verdict.reason,
        failing=verdict.failing if verdict.kind == INCOMPATIBLE else (),
        requirements=tuple(result.cell.requirements),
        python=result.cell.python,
        probes={
            p.name: ProbeState(p.status, p.message, p.repro)
            if p.message or p.repro
            else _BARE_STATES.get(p.status) or _bare_state(p.status)
            for p in result.probes
        },
    )


_BARE_STATES: dict[str, ProbeState] = {}  # status -> its state with no message: a few at most


def _bare_state(status: str) -> ProbeState:
    """ProbeStates are frozen: one shared per status when there is no message or repro. A night
    of 2,500 cells holds ~40,000 probes, nearly all of them a pass with nothing to say."""
    found = _BARE_STATES[status] = ProbeState(status)
    return found


def snapshot_of(results: Iterable[CellResult], run: RunRef) -> Snapshot:
    return Snapshot(run=run, cells={r.cell.id: cell_state(r) for r in results})


@dataclass(frozen=True)
class PassRate:
    passed: int
    runs: int  # runs with evidence (pass or a failure status)
    nights: int  # runs looked at, evidence or not

    @property
    def rate(self) -> float | None:
        return self.passed / self.runs if self.runs else None

    @property
    def flaky(self) -> bool:
        return 0 < self.passed < self.runs

    def text(self) -> str:
        if not self.runs:
            return f"no evidence in {self.nights} night(s)"
        return f"passed {self.passed}/{self.runs} night(s)"


def pass_rate(statuses: Sequence[str | None], last: int | None = None) -> PassRate:
    """Pass rate of one cell+probe over its last ``last`` runs (oldest first; None = absent).

    Only ``pass`` and the failure statuses are evidence; ``skip`` / ``unsupported`` / absent
    count as nights but not as runs. The pins can quote it like a merge confidence."""
    window = list(statuses)[-last:] if last else list(statuses)
    passed = sum(1 for status in window if status == PASS)
    evidence = sum(1 for status in window if status in EVIDENCE_STATUSES)
    return PassRate(passed=passed, runs=evidence, nights=len(window))
