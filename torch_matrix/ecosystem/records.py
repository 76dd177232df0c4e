"""The records of an ecosystem run (issue 34): one project's tests on one side (baseline or
candidate torch), the retry of its regressed tests, and the classes a project ends in.

Pure and stdlib only. ``SideRun`` is what the runner writes, one JSON file per project per side
(``ecosystem/<run>/<project>/<side>.json``); ``ECOSYSTEM_SCHEMA`` is its version: a file of an
older version still loads (missing keys take their defaults), a newer one is refused by the
loader with a hint.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Mapping

from torch_matrix.vocab.records import StrEnum

ECOSYSTEM_SCHEMA = 1


class Role(StrEnum):
    """Which side of the comparison a run is on."""

    BASELINE = "baseline"
    CANDIDATE = "candidate"


# A regressed project's regressed tests are retried on both sides up to this many times, until one
# flips (flaky). Once let a test failing about one run in four through as regressed in a real run
# (zuko's unseeded test_multivariate_transforms, 2.6.0 -> 2.7.1): a few per cent per such test.
RETRIES = 3


def retry_key(role: str, attempt: int) -> str:
    """A retry's result name: ``baseline-retry`` (the first), ``baseline-retry2``, ..."""
    return f"{role}-retry" + (str(attempt) if attempt > 1 else "")


class SideStatus(StrEnum):
    """How one side's tests ended, before the two sides are compared."""

    PASSED = "passed"  # the tests ran, none failed
    FAILED = "failed"  # the tests ran, some failed
    BROKEN = "broken"  # the tests did not run: install failed, collection error, no tests
    TIMEOUT = "timeout"  # past the project's time budget
    SKIPPED = "skipped"  # not run (the projects file's skip reason)


class EcoClass(StrEnum):
    """A project's class in an ecosystem run (crater's classes, and ours)."""

    REGRESSED = "regressed"  # fails with the candidate where it passed with the baseline
    FIXED = "fixed"  # the reverse
    SAME_PASS = "same-pass"
    SAME_FAIL = "same-fail"  # broken on both sides, the same way
    SPURIOUS = "spurious"  # network, timeout, out of memory, full disk, a harness fault
    FLAKY = "flaky"  # regressed, but the retry of the regressed tests flipped
    SKIPPED = "skipped"  # the projects file says why


# Report order: what needs a human first.
CLASS_ORDER = (
    EcoClass.REGRESSED,
    EcoClass.FLAKY,
    EcoClass.SPURIOUS,
    EcoClass.FIXED,
    EcoClass.SAME_FAIL,
    EcoClass.SAME_PASS,
    EcoClass.SKIPPED,
)


class SpuriousKind(StrEnum):
    NETWORK = "network"
    TIMEOUT = "timeout"
    OOM = "out-of-memory"
    DISK = "full-disk"
    HARNESS = "harness-fault"
    INSTALL = "not-installed"  # the side's torch, the project or its source could not be had


# A side's ``detail`` when it never reached its tests for want of an install: no evidence about
# torch, whatever the other side did (a typo'd --candidate once filed every project regressed).
NOT_INSTALLED = ("install failed", "uv venv failed", "source:")


def not_installed(side: SideRun) -> bool:
    return side.status == SideStatus.BROKEN and side.detail.startswith(NOT_INSTALLED)


@dataclass(frozen=True)
class SideRun:
    """One project's tests on one side: what the runner saw, nothing judged across sides.

    ``tests`` maps each pytest node id to its outcome (``passed``, ``failed``, ``error``,
    ``skipped``, ...; ``torch_matrix.probes.pytest_outcomes.per_test``); ``messages`` the failure
    message of each failed test. A command that is not pytest has no ``tests``: its exit code
    decides. ``output_tail`` is the end of the log, for the evidence of a spurious failure.
    """

    project: str
    role: Role
    torch: str
    status: SideStatus
    torchvision: str = ""
    exit_code: int | None = None
    tests: Mapping[str, str] = field(default_factory=dict)
    messages: Mapping[str, str] = field(default_factory=dict)
    # a failed test's whole text where its message was cut (the global a checkpoint holds), and
    # its frames in the project's own code, innermost last ({"path", "line", "code"}): the
    # cause's fix names the project's call site
    texts: Mapping[str, str] = field(default_factory=dict)
    frames: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    summary: str = ""
    detail: str = ""  # why BROKEN / TIMEOUT / SKIPPED, one line
    output_tail: str = ""
    seconds: float = 0.0
    install_seconds: float = 0.0
    log: str = ""  # the side's log, relative to the run directory
    network: str = ""  # "off (unshare -n)" or why it stayed on
    memory_limit: str = ""  # "8 GiB (RLIMIT_AS)" or why none
    # what confined the side's install and tests: "bwrap: ..." (edges/sandbox.py) or
    # "none: <why>"; "" in files written before the sandbox
    confinement: str = ""
    resolved: Mapping[str, str] = field(default_factory=dict)  # distribution -> version
    retry_of: tuple[str, ...] = ()  # a retry: the node ids it reran
    # when the side began (its venv) and ended, seconds since the epoch: a project's wall time
    # spans its sides, retries and bisection; None in files written before they were recorded
    started: float | None = None
    ended: float | None = None
    # a regressed candidate: its torch.load fixes rerun with each applied
    # (``torch_matrix.ecosystem.fixproofs``; ``probes.fixproof``'s shape); {} where none ran
    fix_proofs: Mapping[str, Any] = field(default_factory=dict)

    def failing(self) -> set[str]:
        return {node for node, outcome in self.tests.items() if outcome in ("failed", "error")}

    def passing(self) -> set[str]:
        return {node for node, outcome in self.tests.items() if outcome in ("passed", "xpassed")}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ECOSYSTEM_SCHEMA,
            "project": self.project,
            "role": str(self.role),
            "torch": self.torch,
            "torchvision": self.torchvision,
            "status": str(self.status),
            "exit_code": self.exit_code,
            "tests": dict(sorted(self.tests.items())),
            "messages": dict(sorted(self.messages.items())),
            "texts": dict(sorted(self.texts.items())),
            "frames": {k: [dict(f) for f in v] for k, v in sorted(self.frames.items())},
            "summary": self.summary,
            "detail": self.detail,
            "output_tail": self.output_tail,
            "seconds": round(self.seconds, 3),
            "install_seconds": round(self.install_seconds, 3),
            "log": self.log,
            "network": self.network,
            "memory_limit": self.memory_limit,
            "confinement": self.confinement,
            "resolved": dict(sorted(self.resolved.items())),
            "retry_of": list(self.retry_of),
            "started": self.started,
            "ended": self.ended,
            # only when a rerun made them: earlier side files stay byte-identical
            **({"fix_proofs": dict(self.fix_proofs)} if self.fix_proofs else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SideRun:
        """Raises ``ValueError`` (with the key) for a file that is not a side run."""
        schema = data.get("schema", 1)
        if not isinstance(schema, int) or schema > ECOSYSTEM_SCHEMA:
            raise ValueError(
                f"schema {schema!r} is newer than this torch-matrix reads ({ECOSYSTEM_SCHEMA})"
            )
        try:
            exit_code = data.get("exit_code")
            return cls(
                project=str(data["project"]),
                role=Role(data["role"]),
                torch=str(data["torch"]),
                torchvision=str(data.get("torchvision") or ""),
                status=SideStatus(data["status"]),
                exit_code=int(exit_code) if exit_code is not None else None,
                tests={str(k): str(v) for k, v in dict(data.get("tests") or {}).items()},
                messages={str(k): str(v) for k, v in dict(data.get("messages") or {}).items()},
                texts={str(k): str(v) for k, v in dict(data.get("texts") or {}).items()},
                frames={
                    str(k): tuple(dict(f) for f in v)
                    for k, v in dict(data.get("frames") or {}).items()
                },
                summary=str(data.get("summary") or ""),
                detail=str(data.get("detail") or ""),
                output_tail=str(data.get("output_tail") or ""),
                seconds=_duration(data, "seconds"),
                install_seconds=_duration(data, "install_seconds"),
                log=str(data.get("log") or ""),
                network=str(data.get("network") or ""),
                memory_limit=str(data.get("memory_limit") or ""),
                confinement=str(data.get("confinement") or ""),
                resolved={str(k): str(v) for k, v in dict(data.get("resolved") or {}).items()},
                retry_of=tuple(str(x) for x in data.get("retry_of") or ()),
                started=_moment(data.get("started")),
                ended=_moment(data.get("ended")),
                fix_proofs=dict(data.get("fix_proofs") or {}),
            )
        except KeyError as error:
            raise ValueError(f"missing key {error.args[0]!r}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(str(error)) from None


def _moment(value: Any) -> float | None:
    """A recorded time (seconds since the epoch), None where absent; a number or it is refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"a time must be seconds since the epoch, not {value!r}")
    return float(value)


def _duration(data: Mapping[str, Any], key: str) -> float:
    """A recorded duration, 0 where absent; a finite number of seconds >= 0 or it is refused
    (``json`` reads ``NaN`` and ``Infinity``, which would print as "nan s")."""
    value = data.get(key) or 0.0
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"{key!r} must be a number of seconds >= 0, not {value!r}")
    return float(value)
