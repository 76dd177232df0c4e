"""A cell's verdict, derived from its result and the cell's own probe policy.

Shared by the report and the pins, so both always agree on what "good" means.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import (CRASH, ERROR, FAIL, INSTALL_ERROR, INSTALLED, PASS, PROBE_RUNNER, SKIP,
                      TIMEOUT, UNSATISFIABLE, UNSUPPORTED, CellResult)

COMPATIBLE = "compatible"
INCOMPATIBLE = "incompatible"
NOT_INSTALLABLE = "unsatisfiable"  # no evidence: never an incompatibility finding
NO_EVIDENCE = "error"  # install or probe-runner trouble: no evidence either way
VERDICTS = (COMPATIBLE, INCOMPATIBLE, NOT_INSTALLABLE, NO_EVIDENCE)

_BAD_PROBE_STATUSES = (FAIL, ERROR, TIMEOUT, CRASH)


@dataclass(frozen=True)
class Verdict:
    kind: str
    failing: tuple[str, ...] = ()  # required probes that made the cell incompatible
    missing: tuple[str, ...] = ()  # required probes with no result at all
    reason: str = ""

    @property
    def is_evidence(self) -> bool:
        """True when the cell says something about compatibility (good or bad)."""
        return self.kind in (COMPATIBLE, INCOMPATIBLE)


def probe_counts_as_failure(status: str, policy: dict | None = None) -> bool:
    policy = policy or {}
    if status in _BAD_PROBE_STATUSES:
        return True
    if status == UNSUPPORTED:
        return policy.get("unsupported", "fail") == "fail"
    if status == SKIP:
        return policy.get("skip", "pass") == "fail"
    return False


def verdict_of(result: CellResult) -> Verdict:
    if result.install.status == UNSATISFIABLE:
        return Verdict(NOT_INSTALLABLE, reason=result.install.message)
    if result.install.status == INSTALL_ERROR or result.install.status != INSTALLED:
        return Verdict(NO_EVIDENCE, reason=result.install.message or "install did not finish")
    runner = result.probe(PROBE_RUNNER)
    if runner is not None and runner.status != PASS:
        return Verdict(NO_EVIDENCE, reason=f"probe runner: {runner.message}")
    required = result.cell.required_probes or tuple(p.name for p in result.probes)
    by_name = {p.name: p for p in result.probes}
    missing = tuple(name for name in required if name not in by_name)
    failing = tuple(name for name in required if name in by_name
                    and probe_counts_as_failure(by_name[name].status, dict(result.cell.policy)))
    if failing:
        first = by_name[failing[0]]
        return Verdict(INCOMPATIBLE, failing=failing, missing=missing,
                       reason=f"{first.name}: {first.status}: {first.message}".strip())
    if missing:
        return Verdict(NO_EVIDENCE, missing=missing,
                       reason="no result for required probe(s): " + ", ".join(missing))
    return Verdict(COMPATIBLE)
