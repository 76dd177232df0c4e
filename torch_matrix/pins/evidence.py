"""Evidence: cell results reduced to the versions that decide pins (observations), per-axis tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from torch_matrix.vocab.records import INSTALLED, CellResult, local_label
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    INCOMPATIBLE,
    NO_EVIDENCE,
    NOT_INSTALLABLE,
    verdict_of,
)
from .specifiers import _public, build_specifiers
from torch_matrix.vocab.versions import version_key
from .vocabulary import (
    PREFERRED_ORDER,
    PYTHON,
    SUMMARY_WIDTH,
    VARIANT,
    CellNote,
    Condition,
    Observation,
    Value,
)


# ----------------------------------------------------------------------------- evidence


def _one_line(text: Any, width: int = SUMMARY_WIDTH) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def probe_summary(result: CellResult, name: str) -> str:
    """``lazy_cuda_init: fail: CUDA initialised at import (observed True, expected False)``."""
    probe = result.probe(name)
    if probe is None:
        return f"{name}: no result"
    text = f"{probe.name}: {probe.status}"
    if probe.message:
        text += f": {probe.message}"
    if probe.observed is not None or probe.expected is not None:
        text += f" (observed {probe.observed!r}, expected {probe.expected!r})"
    torch_build = result.install.resolved.get("torch", "")
    if effective_variant(result.cell.variant, torch_build) != result.cell.variant:
        text = f"[tested with torch {torch_build}] " + text
    return _one_line(text)


def package_axes(results: Iterable[CellResult]) -> tuple[str, ...]:
    """Every axis that names a package (not python, not variant), torch first."""
    names = {
        axis
        for result in results
        for axis, value in result.cell.axes.items()
        if value or result.install.resolved.get(axis)
    } - {PYTHON, VARIANT}
    return tuple(sorted(names, key=_axis_rank))


def _axis_rank(axis: str) -> tuple[int, str]:
    if axis in PREFERRED_ORDER:
        return (PREFERRED_ORDER.index(axis), axis)
    if axis == PYTHON:
        return (len(PREFERRED_ORDER) + 2, axis)
    if axis == VARIANT:
        return (len(PREFERRED_ORDER) + 3, axis)
    return (len(PREFERRED_ORDER) + 1, axis)


def cell_values(result: CellResult, packages: Sequence[str]) -> dict[str, Value]:
    """The installed public version of each package axis (axis value when not recorded)."""
    resolved = {_canonical(k): v for k, v in result.install.resolved.items()}
    values: dict[str, Value] = {
        PYTHON: _public(result.cell.axes.get(PYTHON, "")),
        VARIANT: effective_variant(
            result.cell.axes.get(VARIANT, "default"), resolved.get("torch", "")
        ),
    }
    for package in packages:
        raw = resolved.get(_canonical(package)) or result.cell.axes.get(package, "")
        values[package] = _public(raw)
    return values


def effective_variant(variant: str, installed_torch: str) -> str:
    """The build a "default" cell really got: a find-links or mirror wheel such as
    ``2.13.0+cpu`` is a different build from PyPI's, so a break seen only there must
    not be blamed on the torch release as a whole."""
    return (local_label(installed_torch) or variant) if variant == "default" else variant


@lru_cache(maxsize=1024)
def _canonical(name: str) -> str:
    return canonicalize_name(name)


class _CellValues:
    """``cell_values`` once per result, shared by the evidence and the torchvision pairs."""

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = packages
        self._seen: dict[int, tuple[CellResult, dict[str, Value]]] = {}

    def __call__(self, result: CellResult) -> dict[str, Value]:
        found = self._seen.get(id(result))
        if found is None or found[0] is not result:
            found = self._seen[id(result)] = (result, cell_values(result, self.packages))
        return found[1]


def observe(
    results: Sequence[CellResult],
) -> tuple[list[Observation], list[CellNote], list[CellNote]]:
    """Split results into evidence, unsatisfiable cells and cells without evidence."""
    evidence, unsatisfiable, no_evidence, _ = _observe(results, _CellValues(package_axes(results)))
    return evidence, unsatisfiable, no_evidence


NOT_PINNED = "not pinned"
EXISTING_ENV_NOTE = "seen in an existing environment (torch-matrix check), not in a matrix cell"


def _observe(
    results: Sequence[CellResult], values_of: _CellValues
) -> tuple[list[Observation], list[CellNote], list[CellNote], list[CellNote]]:
    """Evidence, unsatisfiable cells, cells without evidence, and incompatible cells not pinned.

    An existing environment (``cell.origin == existing-env``) that works is evidence like any
    cell: its versions worked, so no pin may exclude them. One that fails is not: what broke may
    be that environment's own state (a stray package, a local build, a stale library), which a
    pin would turn into an exclusion for everyone. It is listed as not pinned; a matrix cell of
    the same versions that fails is the evidence a pin needs.
    """
    evidence: list[Observation] = []
    unsatisfiable: list[CellNote] = []
    no_evidence: list[CellNote] = []
    not_pinned: list[CellNote] = []
    passed = _passed_somewhere(results)
    for result in sorted(results, key=lambda r: r.cell.id):
        verdict = verdict_of(result)
        hangs = _hangs_only(result, verdict.failing)
        if verdict.kind == NOT_INSTALLABLE:
            unsatisfiable.append(CellNote(result.cell.id, verdict.kind, _one_line(verdict.reason)))
        elif verdict.kind == NO_EVIDENCE or not verdict.is_evidence:
            no_evidence.append(CellNote(result.cell.id, NO_EVIDENCE, _one_line(verdict.reason)))
        elif verdict.kind == INCOMPATIBLE and result.cell.is_existing_env:
            summary = "; ".join(probe_summary(result, name) for name in verdict.failing)
            not_pinned.append(
                CellNote(result.cell.id, NOT_PINNED, f"{_one_line(summary)} ({EXISTING_ENV_NOTE})")
            )
        elif verdict.kind == INCOMPATIBLE and hangs and not set(verdict.failing) & passed:
            # A hang in a probe no cell ever passed: the test's or the machine's as likely as the
            # release's, and with nothing seen working a pin would only exclude what was tested.
            summary = "; ".join(probe_summary(result, name) for name in verdict.failing)
            not_pinned.append(
                CellNote(result.cell.id, NOT_PINNED, f"{_one_line(summary)} ({HANG_NOTE})")
            )
        else:
            evidence.append(
                Observation(
                    cell_id=result.cell.id,
                    good=verdict.kind == COMPATIBLE,
                    values=values_of(result),
                    failing=verdict.failing,
                    summaries={name: probe_summary(result, name) for name in verdict.failing},
                    named=_named_packages(result, verdict.failing),
                    flaky=tuple(n for n in verdict.failing if _flaky(result.probe(n))),
                )
            )
    return evidence, unsatisfiable, no_evidence, not_pinned


HANG_NOTE = (
    "timed out, and no cell passed this probe with any release: a hang no release is seen "
    "without is no evidence against this one"
)


def _passed_somewhere(results: Sequence[CellResult]) -> set[str]:
    """The probes some installed cell passed."""
    return {
        probe.name
        for result in results
        if result.install.status == INSTALLED
        for probe in result.probes
        if probe.status == "pass"
    }


def _hangs_only(result: CellResult, failing: Sequence[str]) -> bool:
    """Every failing probe of ``result`` timed out (it hung: no verdict of its own)."""
    probes = [result.probe(name) for name in failing]
    return bool(probes) and all(p is not None and p.status == "timeout" for p in probes)


def _flaky(probe: Any) -> bool:
    """Failed in some of its runs, passed in others (``run.cellrun.merge_reruns``: k of n)."""
    evidence = getattr(probe, "evidence", None)
    if not isinstance(evidence, Mapping):
        return False
    runs, failed = evidence.get("runs"), evidence.get("failed_runs")
    return type(runs) is int and type(failed) is int and 0 < failed < runs


def _named_packages(result: CellResult, failing: Sequence[str]) -> dict[str, str]:
    """Failing probe -> the axis package its error names (``judge.causes.axis_module_named``; a
    module the message quotes, not a frame: a traceback through a package does not blame it)."""
    from torch_matrix.judge.causes import axis_module_named

    named = {}
    for name in failing:
        probe = result.probe(name)
        module = axis_module_named(result.cell, probe, frames=False) if probe is not None else ""
        if module:
            named[name] = module.split(".")[0]
    return named


def _pairs(results: Iterable[CellResult], values_of: _CellValues) -> dict[Version, set[Version]]:
    if "torchvision" not in values_of.packages:
        return {}
    pairs: dict[Version, set[Version]] = {}
    for result in results:
        if result.install.status != INSTALLED:
            continue
        values = values_of(result)
        if values.get("torchvision") is not None and values.get("torch") is not None:
            pairs.setdefault(values["torchvision"], set()).add(values["torch"])
    return pairs


# ----------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class VersionEvidence:
    """Per axis: versions seen only in good cells, only in bad cells, and in both."""

    axis: str
    good: tuple[str, ...]
    bad: tuple[str, ...]
    mixed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"good": list(self.good), "bad": list(self.bad), "mixed": list(self.mixed)}


def version_evidence(
    observations: Sequence[Observation], axes: Sequence[str]
) -> dict[str, VersionEvidence]:
    table: dict[str, VersionEvidence] = {}
    for axis in axes:
        seen: dict[Value, set[bool]] = {}
        for o in observations:
            if o.value(axis) is not None:
                seen.setdefault(o.value(axis), set()).add(o.good)
        ordered = sorted(seen, key=version_key)
        table[axis] = VersionEvidence(
            axis,
            tuple(str(v) for v in ordered if seen[v] == {True}),
            tuple(str(v) for v in ordered if seen[v] == {False}),
            tuple(str(v) for v in ordered if len(seen[v]) == 2),
        )
    return table


def package_pins(
    observations: Sequence[Observation], axes: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """Each axis on its own: exclude versions seen only in bad cells, admit the rest tested."""
    pins: dict[str, tuple[str, ...]] = {}
    for axis, evidence in version_evidence(observations, axes).items():
        good = [Version(v) for v in evidence.good + evidence.mixed]
        pins[axis] = build_specifiers(
            good, [Version(v) for v in evidence.bad], python=axis == PYTHON
        )
    return pins


@dataclass(frozen=True)
class EnvironmentAdvice:
    """Failures the environment explains (``torch_matrix.judge.causes``), grouped by their fix.

    ``requirement`` is a positive requirement line when one fixes it (``setuptools;
    python_version < "3.12"``: only where the cells missed it); otherwise the advice says what
    to do (install torch and torchvision from the same index/variant).
    """

    kind: str
    advice: str
    requirement: str
    probes: tuple[str, ...]
    cells: tuple[str, ...]
    confirmed_by: tuple[str, ...] = ()  # counterfactual cells (the fix applied) that passed
    refuted_by: tuple[str, ...] = ()  # counterfactual cells that still failed

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": "version"
            if self.kind in ("changed-default", "code-fix", "import-break")
            else "environment",
            "kind": self.kind,
            "advice": self.advice,
            "requirement": self.requirement,
            "probes": list(self.probes),
            "cells": list(self.cells),
            "confirmed_by": list(self.confirmed_by),
            "refuted_by": list(self.refuted_by),
        }


def _fix_outcomes(results: Sequence[CellResult]) -> dict[str, list[tuple[str, bool]]]:
    """Cell id -> each counterfactual of it and whether it confirms the fix."""
    from torch_matrix.plan.counterfactual import (
        counterfactual_of,
        fixes_applied,
        is_counterfactual,
        parent_counterfactual,
        requirement_name,
    )

    # A counterfactual confirms the fix when the probes the environment broke now pass there
    # (the cell may still fail something else, for a reason of its own). One that fails them for
    # want of yet another module (numpy added, setuptools missing) neither confirms nor refutes:
    # its own counterfactual (both fixes) decides, for the original cell and for it.
    env_probes = {
        result.cell.id: set(verdict_of(result).environment)
        for result in results
        if result.install.status == INSTALLED
    }
    outcome_of_fix: dict[str, list[tuple[str, bool]]] = {}
    for result in results:
        if is_counterfactual(result.cell.id) and result.install.status == INSTALLED:
            applied = {
                requirement_name(r)
                for r in result.cell.requirements[-max(1, fixes_applied(result.cell)) :]
            }
            gaps = {
                name
                for name, found in verdict_of(result).environment.items()
                if found.requirement and requirement_name(found.requirement) not in applied
            }
            for before in dict.fromkeys(
                (counterfactual_of(result.cell.id), parent_counterfactual(result.cell.id))
            ):
                wanted = env_probes.get(before, ())
                probes = [p for p in map(result.probe, wanted) if p is not None]
                if not wanted or len(probes) != len(wanted):
                    continue
                passed = all(p.status == "pass" for p in probes)
                if not passed and {p.name for p in probes if p.status != "pass"} <= gaps:
                    continue  # another gap: the next counterfactual decides
                outcome_of_fix.setdefault(before, []).append((result.cell.id, passed))
    return outcome_of_fix


def environment_advice(results: Sequence[CellResult]) -> list[EnvironmentAdvice]:
    groups: dict[tuple[str, str, str], list[tuple[str, str, Any]]] = {}
    installed_pythons: set[Any] = set()
    # A mismatched pair is confirmed by the same torchvision passing with its own torch.
    vision_of: dict[str, Any] = {}
    good_with_vision: dict[Any, list[str]] = {}
    for result in results:
        verdict = verdict_of(result)
        if result.install.status != INSTALLED and not verdict.environment:
            continue  # (an install whose ``import torch`` the environment broke carries advice)
        python = _public(result.cell.axes.get(PYTHON, ""))
        if python is not None:
            installed_pythons.add(python)
        vision = _public(result.install.resolved.get("torchvision", ""))
        vision_of[result.cell.id] = vision
        if (
            verdict.kind == COMPATIBLE
            and vision is not None
            and "install-override" not in result.cell.tags
        ):
            good_with_vision.setdefault(vision, []).append(result.cell.id)
        for probe, attribution in [
            *verdict.environment.items(),
            *verdict.advice.items(),
            *verdict.fixes.items(),
        ]:
            key = (
                str(attribution.kind),
                attribution.requirement,
                attribution.advice if not attribution.requirement else "",
            )
            groups.setdefault(key, []).append((result.cell.id, probe, python))
    outcome_of_fix = _fix_outcomes(results)
    advice = []
    for (kind, requirement, text), seen in sorted(groups.items()):
        line = requirement
        if requirement:
            pythons = tuple(sorted({p for _, _, p in seen if p is not None}))
            tested = tuple(sorted(installed_pythons))
            marker = (
                Condition(PYTHON, pythons, tested).marker() if pythons and len(tested) > 1 else ""
            )
            line = f"{requirement}; {marker}" if marker else requirement
            failed = ", ".join(sorted({p for _, p, _ in seen}))
            text = (
                f"{failed} failed: numpy 2 under a torch built against numpy 1 (numpy 2 support "
                f"starts with torch 2.3.0): add `{line}`"
                if kind == "numpy-abi"
                else f"{failed} failed for want of `{requirement}`, "
                f"an undeclared runtime dependency: add `{line}`"
            )
        cells = tuple(sorted({c for c, _, _ in seen}))
        fixes = [fix for c in cells for fix in outcome_of_fix.get(c, [])]
        if kind == "mismatched-pair":
            fixes += [
                (good, True) for c in cells for good in good_with_vision.get(vision_of.get(c), [])
            ]
        advice.append(
            EnvironmentAdvice(
                kind,
                text,
                line,
                tuple(sorted({p for _, p, _ in seen})),
                cells,
                tuple(sorted(c for c, ok in fixes if ok)),
                tuple(sorted(c for c, ok in fixes if not ok)),
            )
        )
    return advice
