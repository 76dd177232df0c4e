"""The core records that flow spec -> plan -> cells -> results -> table and pins.

Everything here is plain data: frozen dataclasses with lossless JSON round-trips,
so that result files written by other machines (CI shards) can be merged.
The published JSON Schema for a cell result is ``torch_matrix/vocab/schema/cell-result.schema.json``;
bump ``SCHEMA_VERSION`` whenever the shape of ``CellResult.to_json()`` changes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

SCHEMA_ID = "torch-matrix/cell-result"
SCHEMA_VERSION = 9
# Versions this tool reads. 2 added the optional ``cell.origin`` and the cell's optional
# ``install`` / ``install_digest`` (what else went into the cell: the project under test);
# a version-1 file is a version-2 file without them, and loads unchanged. 3 added ``targets``:
# the build's verdict on each hardware target (``torch_matrix.judge.hardware``); older files have none.
# 4 added the optional ``cell.probe_subset`` (a follow-up cell that ran part of its suite).
# 5 added the optional ``replaces`` (the digest of the result file this run of the cell overwrote).
# 6 added the origins of follow-up cells (``counterfactual``, ``edge``, ``bisect``) and the optional
# ``cell.reason`` (why a follow-up cell exists); a version-5 file is a version-6 file without them.
# 7 added the optional ``verdict``: the cell's verdict, computed once when the result is written
# (``torch_matrix.judge.stored``) and read by every reader; a file without one is judged on load.
# 8 added the stored verdict's optional ``text``: the digest of the cell file's bytes before its
# verdict, as ``world.results.write_result`` wrote them (a loader that finds them unchanged trusts
# the record without encoding it again: ``world.resultschema.written_with_verdict``).
# 9 added the verdict kind ``timeout`` (a required probe ran past ``[probes] timeout``: no evidence,
# never ``incompatible``); a version-8 file is a version-9 file without it, and its stored verdict
# on a timed-out probe is judged again on load (``judge.stored``).
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9)

if sys.version_info >= (3, 11):
    from enum import StrEnum as StrEnum  # re-exported: the layers' status enums derive from it
else:  # pragma: no cover - Python 3.10
    from enum import Enum

    class StrEnum(str, Enum):
        """Members are their string values (``str(m) == m.value``), as in Python 3.11."""

        def __str__(self) -> str:
            return str(self.value)


class InstallStatus(StrEnum):
    """How a cell's install step ended. Only INSTALLED cells carry evidence about
    compatibility; UNSATISFIABLE and ERROR are never counted as incompatibility findings."""

    INSTALLED = "installed"
    UNSATISFIABLE = "unsatisfiable"  # the resolver said no: a fact about the cell
    ERROR = "error"  # the machine had trouble (network, disk, killed): no evidence


class ProbeStatus(StrEnum):
    """Probe outcomes, as written by ``python -m torch_matrix.probes``."""

    PASS = "pass"
    FAIL = "fail"
    UNSUPPORTED = "unsupported"  # the API does not exist in this version
    SKIP = "skip"  # e.g. "no CUDA device"
    ERROR = "error"  # the probe itself broke (a bug in the probe or its environment)
    TIMEOUT = "timeout"
    CRASH = "crash"  # the interpreter died: segfault, abort, os._exit


# The members are equal to their strings, so stored JSON and comparisons with plain
# strings are unchanged. Module-level names kept for callers that import them.
INSTALLED = InstallStatus.INSTALLED
UNSATISFIABLE = InstallStatus.UNSATISFIABLE
INSTALL_ERROR = InstallStatus.ERROR
INSTALL_STATUSES = tuple(InstallStatus)

PASS = ProbeStatus.PASS
FAIL = ProbeStatus.FAIL
UNSUPPORTED = ProbeStatus.UNSUPPORTED
SKIP = ProbeStatus.SKIP
ERROR = ProbeStatus.ERROR  # a probe's status; not an install error, not a verdict
TIMEOUT = ProbeStatus.TIMEOUT
CRASH = ProbeStatus.CRASH
PROBE_STATUSES = tuple(ProbeStatus)

# The name of the synthetic probe result a cell gets when ``python -m torch_matrix.probes`` itself died
# (no output file, timeout): status ``error``, never evidence about the cell (see verdict).
PROBE_RUNNER = "probe-runner"

# How a *required* probe's ``unsupported`` / ``skip`` counts, "fail" or "pass": the one
# place the defaults live (spec, cells and verdicts all read it). A probe the repo names
# as required must exist in the version under test (``unsupported`` fails the cell); when
# nothing is named, every probe counts but an API a version simply lacks (torch.compile
# before 2.0) is not a breakage. One skipped for lack of a GPU never fails the cell.
# The spec's [probes] table can change both.
DEFAULT_POLICY = {"unsupported": "fail", "skip": "pass"}


def public_version(text: str | None) -> str | None:
    """A version without its local label (``2.13.0+cpu`` -> ``2.13.0``); None when ``text`` is
    empty or no PEP 440 version. The one helper every module uses for "the release itself"."""
    return _public_version(text) if text else None


@lru_cache(maxsize=4096)  # a run holds a few dozen versions, asked for once per probe of every cell
def _public_version(text: str) -> str | None:
    try:
        return Version(text).public
    except InvalidVersion:
        return None


def local_label(text: str) -> str:
    """A version's local label (``2.13.0+cpu`` -> ``cpu``; ``2.5.1`` -> ``""``), read as written so a
    version PEP 440 cannot parse keeps its label. The build, not the release: the one helper for it."""
    return text.split("+", 1)[1] if "+" in text else ""


def built_versions(result: "CellResult") -> dict[str, str]:
    """Installed versions as the builds say they are: the freeze's (``install.resolved``), with the
    local label a probe saw at run time (``install_sanity``'s ``versions``) where the freeze's
    version lacks it: PyPI's CUDA wheels say ``2.14.1`` in their metadata and ``2.14.1+cu130`` in
    ``torch.__version__``. Every view of the installed versions reads them here."""
    versions = dict(result.install.resolved)
    for probe in result.probes:
        evidence = probe.evidence
        # ``type() is dict`` first: a loaded probe's evidence is one, and the ABC check costs
        # more than the rest of this loop over a report's 28,000 probes (issue 46).
        seen = (
            evidence.get("versions")
            if type(evidence) is dict or isinstance(evidence, Mapping)
            else None
        )
        if seen is None or not isinstance(seen, Mapping):
            continue
        for name, version in seen.items():
            if not isinstance(version, str) or not version:
                continue
            frozen = versions.get(name)
            if not frozen or public_version(frozen) == public_version(version):
                versions[name] = version
    return versions


def default_policy(names_required: bool = True) -> dict[str, str]:
    """The probe policy when the spec says nothing; ``names_required``: ``probes.required`` is set."""
    return {**DEFAULT_POLICY, "unsupported": "fail" if names_required else "pass"}


# Where a cell's environment came from. ``matrix``: planned from a spec and installed by us
# into a fresh venv (the default, never written). ``existing-env``: ``torch-matrix check``
# probed an interpreter as it was, installing nothing; its versions are read from it.
ORIGIN_MATRIX = "matrix"
ORIGIN_EXISTING = "existing-env"
# Follow-up cells (``plan.followups``): planned from a run's results, not from the spec's grid.
# ``counterfactual``: the same cell with the environment fixed; ``edge``: a release that moves a
# break's edge (the proof of a pin's window); ``bisect``: ``torch-matrix bisect``, judged by one
# probe or test, kept apart from the run's cells.
ORIGIN_COUNTERFACTUAL = "counterfactual"
ORIGIN_EDGE = "edge"
ORIGIN_BISECT = "bisect"
ORIGINS = (ORIGIN_MATRIX, ORIGIN_EXISTING, ORIGIN_COUNTERFACTUAL, ORIGIN_EDGE, ORIGIN_BISECT)
FOLLOWUP_ORIGINS = (ORIGIN_COUNTERFACTUAL, ORIGIN_EDGE, ORIGIN_BISECT)

# The axes every cell has; further axes (numpy, ...) come from the spec's extras.
CORE_AXES = ("python", "torch", "torchvision", "variant")


@dataclass(frozen=True)
class Cell:
    """One combination to install and probe.

    ``axes`` holds the value of every axis as the spec named it (``torch`` is an exact
    version such as ``2.5.1``, ``numpy`` may be a specifier such as ``<2``, a missing
    torchvision is ``""``). ``requirements`` are the PEP 508 strings handed to the
    installer, in order. ``plan_note`` is set when planning already knows the cell
    cannot be installed (no pairing, no interpreter): the runner records it as
    ``unsatisfiable`` without installing.
    """

    id: str
    axes: Mapping[str, str]
    requirements: tuple[str, ...]
    probes: tuple[str, ...] = ()
    required_probes: tuple[str, ...] = ()
    plan_note: str = ""
    tags: tuple[str, ...] = ()
    # How a *required* probe's "unsupported" / "skip" counts: "fail" or "pass".
    policy: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_POLICY))
    origin: str = ORIGIN_MATRIX  # see ORIGINS; written only when not ``matrix``

    @property
    def is_existing_env(self) -> bool:
        return self.origin == ORIGIN_EXISTING

    # What else the spec installs into every cell (``.[test]``, ``-r requirements.txt``, ...,
    # as written; torch_matrix.spec.install_items) and a digest of the files they name.
    install: tuple[str, ...] = ()
    install_digest: str = ""
    # A follow-up cell (a counterfactual, ...) that runs only these probes of its suite; its other
    # probe results are those of the cell it follows up (``torch_matrix.run.cellrun.run_cell``'s ``base``).
    # Empty: the whole suite runs (every planned cell).
    probe_subset: tuple[str, ...] = ()
    reason: str = ""  # why a follow-up cell exists (its origin's sentence); written only when set

    @property
    def is_followup(self) -> bool:
        return self.origin in FOLLOWUP_ORIGINS

    @property
    def python(self) -> str:
        return self.axes["python"]

    @property
    def variant(self) -> str:
        return self.axes.get("variant", "default")

    @property
    def torch(self) -> str:
        return self.axes["torch"]

    @property
    def torchvision(self) -> str:
        return self.axes.get("torchvision", "")

    def fingerprint(self, index_config: Mapping[str, Any] | None = None, suite: str = "") -> str:
        """Identity used for resume: same fingerprint, same work, so a stored result counts.

        ``suite`` is the probe suite's digest (``probesuite.suite_digest``: the tool's version
        and the probes' code), so results of older probes are not reused."""
        payload: dict[str, Any] = {"cell": self.to_json(), "index": dict(index_config or {})}
        if suite:
            payload["suite"] = suite
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "axes": dict(self.axes),
            "requirements": list(self.requirements),
            "probes": list(self.probes),
            "required_probes": list(self.required_probes),
            "plan_note": self.plan_note,
            "tags": list(self.tags),
            "policy": dict(self.policy),
            # Only when set: a cell without them keeps its version-1 shape and fingerprint.
            **({"install": list(self.install)} if self.install else {}),
            **({"install_digest": self.install_digest} if self.install_digest else {}),
            **({"probe_subset": list(self.probe_subset)} if self.probe_subset else {}),
        }
        if (
            self.origin != ORIGIN_MATRIX
        ):  # absent for planned cells: their fingerprints stay as they were
            data["origin"] = self.origin
        if self.reason:
            data["reason"] = self.reason
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Cell":
        return cls(
            id=data["id"],
            axes=dict(data["axes"]),
            requirements=tuple(data["requirements"]),
            probes=tuple(data.get("probes", ())),
            required_probes=tuple(data.get("required_probes", ())),
            plan_note=data.get("plan_note", ""),
            tags=tuple(data.get("tags", ())),
            policy=dict(data.get("policy", DEFAULT_POLICY)),
            origin=data.get("origin", ORIGIN_MATRIX),
            install=tuple(data.get("install", ())),
            install_digest=data.get("install_digest", ""),
            probe_subset=tuple(data.get("probe_subset", ())),
            reason=data.get("reason", ""),
        )


@dataclass(frozen=True)
class ProbeResult:
    """What one probe found in one cell, with enough evidence to act on."""

    name: str
    status: str
    message: str = ""
    duration_s: float = 0.0
    evidence: Mapping[str, Any] = field(default_factory=dict)
    observed: Any = None
    expected: Any = None
    traceback: str = ""
    repro: str = ""
    output_tail: str = ""
    isolation: str = "shared"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "status": str(self.status),
            "message": self.message,
            "duration_s": round(self.duration_s, 4),
            "isolation": self.isolation,
        }
        if self.evidence:
            data["evidence"] = dict(self.evidence)
        for key in ("observed", "expected"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        for key in ("traceback", "repro", "output_tail"):
            value = getattr(self, key)
            if value:
                data[key] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ProbeResult":
        # Every field set at once, not through the frozen __init__'s one object.__setattr__ per
        # field: a night of 2,500 results holds 36,000 probes. A schema-valid probe's keys are
        # field names (the schema allows no others): its values go in as they are, over the
        # defaults, in one C-level update. Equal to what __init__ makes (tests/test_results.py
        # holds the two together, field by field).
        if "name" not in data or "status" not in data:
            raise KeyError("name" if "name" not in data else "status")
        if not _PROBE_FIELDS.issuperset(data):
            raise ValueError(f"unknown probe keys: {sorted(set(data) - _PROBE_FIELDS)}")
        probe = object.__new__(cls)
        fields = probe.__dict__
        fields.update(_PROBE_DEFAULTS)
        fields.update(data)
        if type(fields["duration_s"]) is not float:
            fields["duration_s"] = float(fields["duration_s"])
        fields["evidence"] = dict(fields["evidence"])  # its own, never the parsed file's dict
        return probe


_PROBE_FIELDS = frozenset(item.name for item in dataclasses.fields(ProbeResult))
# ProbeResult's defaults, read from the dataclass (``from_json`` fills a probe over them).
_PROBE_DEFAULTS: dict[str, Any] = {
    item.name: item.default_factory() if callable(item.default_factory) else item.default
    for item in dataclasses.fields(ProbeResult)
    if item.default is not dataclasses.MISSING or callable(item.default_factory)
}


@dataclass(frozen=True)
class InstallOutcome:
    """How the cell's install step ended. ``message`` keeps the resolver's own words."""

    status: str
    command: tuple[str, ...] = ()
    message: str = ""
    attempts: int = 1
    resolved: Mapping[str, str] = field(default_factory=dict)  # name -> installed version

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "command": list(self.command),
            "message": self.message,
            "attempts": self.attempts,
            "resolved": dict(self.resolved),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "InstallOutcome":
        return cls(
            status=data["status"],
            command=tuple(data.get("command", ())),
            message=data.get("message", ""),
            attempts=int(data.get("attempts", 1)),
            resolved=dict(data.get("resolved", {})),
        )


@dataclass(frozen=True)
class CellResult:
    """Everything one cell produced; one JSON file per cell, merged across machines."""

    cell: Cell
    fingerprint: str
    install: InstallOutcome
    probes: tuple[ProbeResult, ...] = ()
    interpreter: Mapping[str, Any] = field(default_factory=dict)  # path, version, implementation
    platform: Mapping[str, Any] = field(default_factory=dict)  # system, machine, host, libc
    gpu: Mapping[str, Any] = field(default_factory=dict)  # driver, devices; empty when none
    timings: Mapping[str, float] = field(
        default_factory=dict
    )  # resolve/install/verify/probes/total
    started_at: str = ""
    finished_at: str = ""
    tool_version: str = ""
    # Per hardware target: {"target", "verdict", "reason"} (torch_matrix.judge.hardware.TargetVerdict),
    # plus "device" / "agrees" for the GPU this cell ran on, where there was one.
    targets: tuple[Mapping[str, Any], ...] = ()
    # "sha256:<hex>" of the result file this run overwrote ("" for a first run): which of two
    # copies of a cell is the rerun, whatever the machines' clocks say (``world.results``).
    replaces: str = ""
    # The stored verdict (``torch_matrix.judge.stored``: the Verdict's JSON, plus ``of``, the digest
    # of the record it judged). Not an __init__ field: ``dataclasses.replace`` makes a new record
    # without it, so a record changed in any way is judged again, never read with a stale verdict.
    verdict: Mapping[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def with_verdict(self, verdict: Mapping[str, Any]) -> "CellResult":
        """A copy of this record carrying ``verdict`` (``torch_matrix.judge.stored.judged``)."""
        import copy

        out = copy.copy(self)
        object.__setattr__(out, "verdict", dict(verdict))
        return out

    @property
    def installed(self) -> bool:
        return self.install.status == INSTALLED

    def probe(self, name: str) -> ProbeResult | None:
        for result in self.probes:
            if result.name == name:
                return result
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_ID,
            "schema_version": SCHEMA_VERSION,
            "cell": self.cell.to_json(),
            "fingerprint": self.fingerprint,
            "install": self.install.to_json(),
            "probes": [p.to_json() for p in self.probes],
            "interpreter": dict(self.interpreter),
            "platform": dict(self.platform),
            "gpu": dict(self.gpu),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "tool_version": self.tool_version,
            # Only when judged: a result without targets keeps its version-2 shape.
            **({"targets": [dict(t) for t in self.targets]} if self.targets else {}),
            **({"replaces": self.replaces} if self.replaces else {}),
            **({"verdict": dict(self.verdict)} if self.verdict else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CellResult":
        """Build from an already schema-validated mapping (see ``torch_matrix.world.results``)."""
        # Every field set at once, as ProbeResult.from_json does (tests/test_results.py holds it
        # to what __init__ makes).
        result = object.__new__(cls)
        result.__dict__.update(
            cell=Cell.from_json(data["cell"]),
            fingerprint=data["fingerprint"],
            install=InstallOutcome.from_json(data["install"]),
            probes=tuple(map(ProbeResult.from_json, data.get("probes", ()))),
            interpreter=dict(data.get("interpreter", {})),
            platform=dict(data.get("platform", {})),
            gpu=dict(data.get("gpu", {})),
            timings={k: float(v) for k, v in data.get("timings", {}).items()},
            started_at=data.get("started_at", ""),
            finished_at=data.get("finished_at", ""),
            tool_version=data.get("tool_version", ""),
            targets=tuple(dict(t) for t in data.get("targets", ())),
            replaces=data.get("replaces", ""),
            verdict=dict(data["verdict"]) if data.get("verdict") else {},
        )
        return result
