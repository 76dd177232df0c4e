"""Why a probe failed: the versions under test, the environment the cell was built in, or
the tool's own machinery.

Pure: a function of one ``CellResult`` and one of its ``ProbeResult``s. Only a ``version``
cause is evidence about the versions a cell tests; an ``environment`` cause (an undeclared
runtime dependency missing from the venv, torch and a companion from different builds, a
broken install) produces advice instead, and ``infrastructure`` (the probe or its runner
broke) produces nothing. ``matrix.judge.verdict`` applies this, so the report and the pins agree.

Recognised environment causes:

- ``missing-dependency``: ``No module named 'setuptools'`` raised from inside torch (the
  inductor of torch 2.2-2.4 imports setuptools, which a uv venv does not contain and only
  some wheels declare). The fix is a requirement line: ``setuptools``.
- ``mismatched-build``: torch and torchvision carry different local labels (``2.13.0+cpu``
  from a find-links directory next to PyPI's CUDA-built ``0.28.0``), and torchvision's
  compiled ops fail to load (``operator torchvision::nms does not exist``, an undefined
  symbol). The fix: install both from the same index and variant.
- ``mismatched-pair``: a cell the spec deliberately installed as a mismatched pair
  (``[[include]]`` with ``install = "override"``): pairing advice scoped to that pair.
- ``broken-install``: a shared library of an installed package cannot be loaded.
- ``tests-did-not-run``: a pytest command probe whose tests never ran: a collection error, a
  usage error, an internal error or no tests collected (pytest exit 2-5, as
  ``probes.pytest_outcomes`` records it). The project's test suite has to be fixed first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from matrix.vocab.records import StrEnum
from typing import Any, Mapping

from matrix.vocab.records import CRASH, ERROR, FAIL, PASS, PROBE_RUNNER, SKIP, TIMEOUT, UNSUPPORTED, CellResult, ProbeResult


class Cause(StrEnum):
    VERSION = "version"
    ENVIRONMENT = "environment"
    INFRASTRUCTURE = "infrastructure"


class VersionKind(StrEnum):
    CHANGED_DEFAULT = "changed-default"  # the plain call broke; a non-default argument works


class EnvironmentKind(StrEnum):
    MISSING_DEPENDENCY = "missing-dependency"
    MISMATCHED_BUILD = "mismatched-build"
    MISMATCHED_PAIR = "mismatched-pair"  # an [[include]] with install = "override"
    BROKEN_INSTALL = "broken-install"
    TESTS_DID_NOT_RUN = "tests-did-not-run"


@dataclass(frozen=True)
class Attribution:
    """The cause of one probe's failure, with the advice that follows from it."""

    cause: Cause
    kind: str = ""  # an EnvironmentKind for environment causes
    advice: str = ""  # one line for the report, summary.md and pins.json
    requirement: str = ""  # a positive requirement that fixes it (``setuptools``), or ""
    detail: str = ""  # the module, or "torch 2.13.0+cpu / torchvision 0.28.0"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cause": str(self.cause)}
        for key in ("kind", "advice", "requirement", "detail"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data


VERSION_CAUSE = Attribution(Cause.VERSION)
_MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
# Modules a cell's own axes provide: missing, they are a version finding (e.g. torchvision
# without its ops), not a dependency the environment forgot.
_UNDER_TEST = {"torch", "torchvision", "torchaudio", "numpy"}
# Modules whose distribution has another name: the requirement that brings them. torch 2.1's
# torch.compile imports pkg_resources (seen on real wheels, Python 3.11), which setuptools provided
# until 82.0.0 removed it (checked: 81.0.0 has it, 82.0.0 does not).
_DISTRIBUTION_OF = {"pkg_resources": "setuptools<82", "yaml": "pyyaml", "PIL": "pillow",
                    "cv2": "opencv-python", "sklearn": "scikit-learn"}
_BUILD_MISMATCH = ("does not exist", "undefined symbol", "Couldn't load custom C++ ops",
                   "operator torchvision::", "torchvision::nms")
_BROKEN = ("cannot open shared object file", "ELF load command", "invalid ELF header")
_FAILING = (FAIL, ERROR, TIMEOUT, CRASH, UNSUPPORTED)
_PYTEST_NOT_RUN = (2, 3, 4, 5)  # interrupted (collection error), internal, usage, no tests


def _text(probe: ProbeResult) -> str:
    return "\n".join(str(part) for part in (probe.message, probe.observed, probe.traceback,
                                             probe.output_tail) if part)


# The probes' own classes (``probes.standard.checkpoint_roundtrip.RunConfig``) stand in for a
# user's; results written before the probe said so name them in the allowlist it advises.
_PROBE_CLASS = re.compile(r"(?:, )?'probes\.[\w.]+'")
_OWN_CLASSES = " + your own classes pickled in the checkpoint"


def user_advice(text: str) -> str:
    """``text`` naming only the user's types: the probes' own classes leave the allowlist, which
    then says the user adds their own classes instead."""
    cleaned, removed = _PROBE_CLASS.subn("", text)
    if not removed:
        return text
    cleaned = cleaned.replace("([, ", "([")
    if _OWN_CLASSES in cleaned:
        return cleaned
    return re.sub(r"\[([^\]]*)\]", lambda m: m.group(0) + _OWN_CLASSES, cleaned, count=1)


def _local(version: str) -> str:
    return version.split("+", 1)[1] if "+" in version else ""


def _installed(resolved: Mapping[str, str], module: str) -> bool:
    names = {name.lower().replace("-", "_") for name in resolved}
    return module.lower().replace("-", "_") in names


def _satisfied(resolved: Mapping[str, str], requirement: str) -> bool:
    """``requirement`` (a name, or ``setuptools<82``) is installed in a version it admits."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        wanted = Requirement(requirement)
    except InvalidRequirement:
        return _installed(resolved, requirement)
    key = wanted.name.lower().replace("-", "_")
    for name, version in resolved.items():
        if name.lower().replace("-", "_") == key:
            return not wanted.specifier or wanted.specifier.contains(version, prereleases=True)
    return False


def attribute(result: CellResult, probe: ProbeResult) -> Attribution:
    """The cause of ``probe``'s outcome in ``result`` (``version`` for a pass or skip too)."""
    if probe.status in (PASS, SKIP):
        return VERSION_CAUSE
    if "changed default:" in probe.message:
        # The release changed a default: the plain call users make fails, a workaround works. A
        # finding about the version, whose answer is the workaround, not an exclusion.
        advice = user_advice(str(probe.evidence.get("advice") or probe.message))
        return Attribution(Cause.VERSION, VersionKind.CHANGED_DEFAULT, advice, detail=probe.name)
    if probe.name == PROBE_RUNNER:
        return Attribution(Cause.INFRASTRUCTURE, advice="the probe runner died; rerun the cell")
    if probe.status == ERROR and probe.evidence.get("pytest_exit") in _PYTEST_NOT_RUN:
        return Attribution(
            Cause.ENVIRONMENT, EnvironmentKind.TESTS_DID_NOT_RUN,
            f"{probe.name}: the tests did not run (pytest exit {probe.evidence['pytest_exit']}): "
            f"fix the test suite; {probe.message.split(' (exit ')[0][:160]}",
            detail=probe.message[:120])
    text = _text(probe)
    resolved = result.install.resolved
    missing = _MISSING_MODULE.search(text)
    if missing:
        module = missing.group(1).split(".")[0]
        distribution = _DISTRIBUTION_OF.get(module, module)
        if module not in _UNDER_TEST and not _satisfied(resolved, distribution) \
                and not probe.name.startswith(module):
            needs = f"`{module}`" + (f" (from {distribution})" if distribution != module else "")
            return Attribution(
                Cause.ENVIRONMENT, EnvironmentKind.MISSING_DEPENDENCY,
                f"{probe.name} needs {needs} in the environment, which these wheels do not "
                f"declare (uv venvs contain no {module}): add `{distribution}` to your requirements",
                requirement=distribution, detail=module)
    torch = resolved.get("torch", "")
    vision = resolved.get("torchvision", "")
    if "install-override" in result.cell.tags and vision:
        # The spec asked for this pair against torchvision's own torch requirement: the advice is
        # about the pair (keep them paired), never a bound on either release.
        return Attribution(
            Cause.ENVIRONMENT, EnvironmentKind.MISMATCHED_PAIR,
            f"torchvision {vision} installed with torch {torch} over its own torch requirement "
            f"(--no-deps / override): install torchvision {vision} only with the torch it requires; "
            f"no bound on either release follows from this pair",
            detail=f"torch {torch} / torchvision {vision}")
    if torch and vision and _local(torch) != _local(vision) \
            and any(marker in text for marker in _BUILD_MISMATCH):
        return Attribution(
            Cause.ENVIRONMENT, EnvironmentKind.MISMATCHED_BUILD,
            f"torch {torch} and torchvision {vision} are different builds: install torch and "
            f"torchvision from the same index/variant",
            detail=f"torch {torch} / torchvision {vision}")
    if any(marker in text for marker in _BROKEN):
        return Attribution(Cause.ENVIRONMENT, EnvironmentKind.BROKEN_INSTALL,
                           "a shared library of an installed package cannot be loaded: reinstall "
                           "the environment", detail=probe.message[:120])
    return VERSION_CAUSE


def environment_failures(result: CellResult, names: tuple[str, ...]) -> dict[str, Attribution]:
    """The probes among ``names`` whose failure the environment explains."""
    return _failures_where(result, names, lambda a: a.cause == Cause.ENVIRONMENT)


def changed_defaults(result: CellResult, names: tuple[str, ...]) -> dict[str, Attribution]:
    """The probes among ``names`` that failed only because the release changed a default."""
    return _failures_where(result, names, lambda a: a.kind == VersionKind.CHANGED_DEFAULT)


def _failures_where(result: CellResult, names: tuple[str, ...], wanted) -> dict[str, Attribution]:
    found = {}
    for name in names:
        probe = result.probe(name)
        if probe is not None and probe.status in _FAILING:
            attribution = attribute(result, probe)
            if wanted(attribution):
                found[name] = attribution
    return found
