"""A cell's verdict, derived from its result and the cell's own probe policy; and the resume rule.

Shared by the report, the pins and the noxfile, so all agree on what "good" means and
on which stored results a rerun may keep. Pure: functions of records.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any
from dataclasses import dataclass, field

from torch_matrix.judge.causes import (
    Attribution,
    EnvironmentKind,
    changed_defaults,
    code_fixes,
    environment_failures,
    install_attribution,
)

from torch_matrix.vocab.records import (
    CRASH,
    DEFAULT_POLICY,
    ERROR,
    FAIL,
    INSTALL_ERROR,
    INSTALLED,
    ORIGIN_EDGE,
    PASS,
    PROBE_RUNNER,
    SKIP,
    TIMEOUT,
    UNSATISFIABLE,
    UNSUPPORTED,
    Cell,
    CellResult,
    ProbeResult,
    StrEnum,
)


class VerdictKind(StrEnum):
    """What a cell says about compatibility. The value ``error`` is the verdict's word for
    "no evidence" (install or probe-runner trouble); it is neither ``InstallStatus.ERROR``
    nor ``ProbeStatus.ERROR``, though it is written the same in tables and JSON."""

    COMPATIBLE = "compatible"
    INCOMPATIBLE = "incompatible"
    NOT_INSTALLABLE = "unsatisfiable"  # no evidence: never an incompatibility finding
    NO_EVIDENCE = "error"  # install or probe-runner trouble: no evidence either way
    # A finding about the environment, not the versions (a missing undeclared dependency, torch
    # and its companions from different builds, a pair installed over its own requirement): the
    # cell carries advice, is no evidence for the pins, and does not fail the run.
    ENVIRONMENT = "environment"
    # A required probe ran past its limit (``[probes] timeout``) and nothing else failed: the
    # limit is the machine's and the spec's, not the versions'. No evidence, and the run fails
    # with a hint naming the key and the time the probe ran (result files from version 9 on).
    TIMED_OUT = "timeout"


COMPATIBLE = VerdictKind.COMPATIBLE
INCOMPATIBLE = VerdictKind.INCOMPATIBLE
NOT_INSTALLABLE = VerdictKind.NOT_INSTALLABLE
NO_EVIDENCE = VerdictKind.NO_EVIDENCE
ENVIRONMENT = VerdictKind.ENVIRONMENT
TIMED_OUT = VerdictKind.TIMED_OUT
VERDICTS = tuple(VerdictKind)

_BAD_PROBE_STATUSES = (FAIL, ERROR, TIMEOUT, CRASH)
_NO_EVIDENCE_KINDS = (EnvironmentKind.BROKEN_INSTALL, EnvironmentKind.TESTS_DID_NOT_RUN)


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    failing: tuple[str, ...] = ()  # required probes that made the cell incompatible
    missing: tuple[str, ...] = ()  # required probes with no result at all
    reason: str = ""
    # Required probes whose failure the environment explains (torch_matrix.judge.causes): never evidence
    # about the versions; the cell carries their advice instead.
    environment: Mapping[str, Attribution] = field(default_factory=dict)
    # Required probes that failed because the release changed a default (the plain call breaks,
    # a non-default argument works): reported with their workaround, not an incompatibility.
    advice: Mapping[str, Attribution] = field(default_factory=dict)
    # Required command probes in which no test ran (every selected test skipped, or none was
    # collected): "0 passed, 4 skipped: no evidence". Never a pass, never a failure.
    idle: tuple[str, ...] = ()
    # Failing required probes whose failure is an API change with a known code fix (the user's
    # ``torch.load`` under the weights_only default): still failures, the fix comes first.
    fixes: Mapping[str, Attribution] = field(default_factory=dict)

    @property
    def is_evidence(self) -> bool:
        """True when the cell says something about compatibility (good or bad)."""
        return self.kind in (COMPATIBLE, INCOMPATIBLE)

    def to_json(self) -> dict[str, Any]:
        """The verdict as a result file stores it (``judge.stored``): empty fields left out."""
        data: dict[str, Any] = {"kind": str(self.kind)}
        if self.reason:
            data["reason"] = self.reason
        for key in ("failing", "missing", "idle"):
            if getattr(self, key):
                data[key] = list(getattr(self, key))
        for key in ("environment", "advice", "fixes"):
            found: Mapping[str, Attribution] = getattr(self, key)
            if found:
                data[key] = {name: attribution.to_json() for name, attribution in found.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """The inverse of ``to_json`` (a schema-valid stored verdict)."""
        return cls(
            _KINDS[data["kind"]],
            failing=tuple(data.get("failing", ())),
            missing=tuple(data.get("missing", ())),
            reason=str(data.get("reason", "")),
            environment=_attributions(data.get("environment")),
            advice=_attributions(data.get("advice")),
            idle=tuple(data.get("idle", ())),
            fixes=_attributions(data.get("fixes")),
        )


_KINDS = {str(kind): kind for kind in VerdictKind}  # a dict lookup: enum's __call__ is slower


def _attributions(data: Mapping[str, Any] | None) -> dict[str, Attribution]:
    if not data:
        return {}
    return {name: Attribution.from_json(value) for name, value in data.items()}


def probe_counts_as_failure(status: str, policy: Mapping[str, str] | None = None) -> bool:
    """Whether a required probe's status fails the cell under ``policy`` (``DEFAULT_POLICY`` fills gaps)."""
    policy = policy or {}
    if status in _BAD_PROBE_STATUSES:
        return True
    if status == UNSUPPORTED:
        return policy.get("unsupported", DEFAULT_POLICY["unsupported"]) == "fail"
    if status == SKIP:
        return policy.get("skip", DEFAULT_POLICY["skip"]) == "fail"
    return False


def ran_no_test(probe: ProbeResult) -> bool:
    """A command probe in which no test ran (``torch_matrix.probes.pytest_outcomes``: all skipped, none collected)."""
    return probe.status == SKIP and bool(probe.evidence.get("no_evidence"))


# result's id -> (a weak reference to it, its verdict). A verdict is a function of a frozen record,
# asked for by the report, the pins (three times per cell) and the HTML: judged once per record.
# Weak, so a record that goes away takes its entry with it; the identity check guards a reused id.
_JUDGED: dict[int, tuple[weakref.ref[CellResult], Verdict]] = {}


def asks_only_its_subset(cell: Cell) -> bool:
    """An edge cell with a ``probe_subset`` runs only those probes and claims nothing else (a
    counterfactual's subset is different: it inherits the rest from the cell it follows up)."""
    return bool(cell.probe_subset) and cell.origin == ORIGIN_EDGE


def asked(cell: Cell, names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as far as the cell asks them: all, or for a subset edge cell those in its subset
    (its subset itself when the grid required none)."""
    if not asks_only_its_subset(cell):
        return tuple(names)
    return tuple(n for n in names if n in cell.probe_subset) or tuple(cell.probe_subset)


def verdict_of(result: CellResult) -> Verdict:
    """The cell's verdict: the one its record stores (``judge.stored``: computed once, when the
    result was written, and checked against the record when it was loaded), else judged here, once
    per record (``_JUDGED``)."""
    known = _JUDGED.get(id(result))
    if known is not None and known[0]() is result:
        return known[1]
    verdict = Verdict.from_json(result.verdict) if result.verdict else fresh_verdict(result)
    key = id(result)

    def forget(_: weakref.ref[CellResult]) -> None:
        _JUDGED.pop(key, None)

    _JUDGED[key] = (weakref.ref(result, forget), verdict)
    return verdict


def _before_the_probes(result: CellResult) -> Verdict | None:
    """The verdict when the probes have nothing to say: no installable cell, an install that did
    not finish (its environment may explain why), a probe runner that died. None: judge the probes."""
    if result.install.status == UNSATISFIABLE:
        return Verdict(NOT_INSTALLABLE, reason=result.install.message)
    if result.install.status == INSTALL_ERROR or result.install.status != INSTALLED:
        found = install_attribution(result)
        if found is not None:  # ``import torch`` failed for a reason the environment explains
            return Verdict(
                ENVIRONMENT,
                environment={"install": found},
                reason="environment, not the versions: " + found.advice,
            )
        return Verdict(NO_EVIDENCE, reason=result.install.message or "install did not finish")
    runner = result.probe(PROBE_RUNNER)
    if runner is not None and runner.status != PASS:
        return Verdict(NO_EVIDENCE, reason=f"probe runner: {runner.message}")
    return None


def fresh_verdict(result: CellResult) -> Verdict:
    """Judge ``result`` from its probes and install, ignoring any stored verdict: what
    ``judge.stored`` stores, and what ``report --rejudge`` asks for."""
    before = _before_the_probes(result)
    if before is not None:
        return before
    required = asked(result.cell, result.cell.required_probes) or tuple(
        p.name for p in result.probes
    )
    by_name = {p.name: p for p in result.probes}
    missing = tuple(name for name in required if name not in by_name)
    idle = tuple(name for name in required if name in by_name and ran_no_test(by_name[name]))
    policy = result.cell.policy
    failing = tuple(
        name
        for name in required
        if name in by_name
        and name not in idle
        and probe_counts_as_failure(by_name[name].status, policy)
    )
    environment = environment_failures(result, failing)
    advice = changed_defaults(result, failing)
    failing = tuple(name for name in failing if name not in environment and name not in advice)
    timed_out = tuple(name for name in failing if by_name[name].status == TIMEOUT)
    if timed_out and len(timed_out) == len(failing):
        # Only a limit was reached: nothing about the versions was seen (a failure beside it still is).
        return Verdict(
            TIMED_OUT,
            failing=timed_out,
            missing=missing,
            idle=idle,
            reason=timeout_reason([by_name[name] for name in timed_out]),
        )
    if failing:
        first = by_name[failing[0]]
        return Verdict(
            INCOMPATIBLE,
            failing=failing,
            missing=missing,
            reason=f"{first.name}: {first.status}: {first.message}".strip(),
            environment=environment,
            advice=advice,
            idle=idle,
            fixes=code_fixes(result, failing),
        )
    return _nothing_failed(environment, missing, idle, advice, by_name)


def _nothing_failed(
    environment: dict[str, Attribution],
    missing: tuple[str, ...],
    idle: tuple[str, ...],
    advice: dict[str, Attribution],
    by_name: dict[str, ProbeResult],
) -> Verdict:
    """The verdict when no required probe failed for a version: what the environment explains, a
    required probe with no result, one that ran no test, a changed default, else compatible."""
    if environment:
        fixes = sorted({a.advice for a in environment.values()})
        # A broken install or tests that never ran leave nothing to judge: no evidence, and the
        # run fails. A missing undeclared dependency or a mismatched build is a finding with advice.
        kind = (
            NO_EVIDENCE
            if any(a.kind in _NO_EVIDENCE_KINDS for a in environment.values())
            else ENVIRONMENT
        )
        return Verdict(
            kind,
            missing=missing,
            environment=environment,
            reason="environment, not the versions: " + "; ".join(fixes),
        )
    if missing:
        return Verdict(
            NO_EVIDENCE,
            missing=missing,
            idle=idle,
            reason="no result for required probe(s): " + ", ".join(missing),
        )
    if idle:
        # Nothing ran, so nothing was seen working: no evidence for the pins either way.
        return Verdict(
            NO_EVIDENCE,
            idle=idle,
            advice=advice,
            reason="; ".join(f"{name}: {by_name[name].message}" for name in idle),
        )
    if advice:
        return Verdict(
            COMPATIBLE,
            advice=advice,
            reason="works with a changed default: "
            + "; ".join(sorted({a.advice for a in advice.values()})),
        )
    return Verdict(COMPATIBLE)


def timeout_reason(probes: Sequence[ProbeResult]) -> str:
    """What a timed-out cell's verdict says: each probe, the time it ran, and the key to raise."""
    ran = "; ".join(f"{p.name} ran {p.duration_s:.0f} s: {p.message}".strip() for p in probes)
    longest = max((p.duration_s for p in probes), default=0.0)
    return (
        f"past its limit, no evidence: {ran}; raise [probes] timeout in the spec "
        f"(e.g. timeout = {suggested_limit(longest):g}) and run the cell again"
    )


def suggested_limit(ran_s: float) -> float:
    """A limit that the probe which ran ``ran_s`` seconds before it was killed has room under:
    twice that, rounded up to ten minutes."""
    return max(600.0, -(-2 * ran_s // 600) * 600)


def is_complete(stored: CellResult | None, cell: Cell, fingerprint: str) -> bool:
    """True when resume may keep ``stored`` for ``cell``: same fingerprint, a final install
    outcome, every wanted probe present.

    ``error`` installs, a probe runner that died, any other cell without evidence (but for tests
    that all skipped) and a probe past its limit are no answer, so they are always retried (``results.has_complete_result`` reads the file and asks this).
    """
    if stored is None or stored.fingerprint != fingerprint or stored.cell.id != cell.id:
        return False
    if stored.install.status == UNSATISFIABLE:
        return True
    if stored.install.status != INSTALLED or stored.probe(PROBE_RUNNER) is not None:
        return False
    verdict = verdict_of(stored)
    if verdict.kind == TIMED_OUT:
        return False  # a limit reached is no answer: the next run tries again (a raised limit too)
    if verdict.kind == NO_EVIDENCE and not (verdict.idle and not verdict.environment):
        # No evidence (a broken install the probes found, a required probe with no result): the
        # next run tries again. Tests that all skipped stay: a rerun skips them again.
        return False
    have = {probe.name for probe in stored.probes}
    wanted = set(asked(cell, cell.probes)) | set(asked(cell, cell.required_probes))
    if not wanted:
        return bool(have)
    return wanted <= have
