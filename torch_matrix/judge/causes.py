"""Why a probe failed: the versions under test, the environment the cell was built in, or
the tool's own machinery.

Pure: a function of one ``CellResult`` and one of its ``ProbeResult``s. Only a ``version``
cause is evidence about the versions a cell tests; an ``environment`` cause (an undeclared
runtime dependency missing from the venv, torch and a companion from different builds, a
broken install) produces advice instead, and ``infrastructure`` (the probe or its runner
broke) produces nothing. ``torch_matrix.judge.verdict`` applies this, so the report and the pins agree.

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
- ``numpy-abi``: numpy 2 under a torch built against numpy 1 (torch < 2.3: ``_ARRAY_API not
  found``, ``Numpy is not available``, ``numpy.core.multiarray failed to import``) where it left
  nothing to judge: the tests could not be collected, or ``import torch`` failed at the install
  check. The fix and the counterfactual: ``numpy<2``. A probe or test that ran and failed on it
  stays evidence (an interaction of torch and numpy, which the pins close with ``numpy<2``). Upstream: pytorch/pytorch#107302 (NumPy 2.0 support, first in
  torch 2.3.0; "PyTorch 2.3.0 is the first version that supports NumPy 2.0", pytorch/pytorch#132179).
- ``broken-install``: a shared library of an installed package cannot be loaded.
- ``tests-did-not-run``: a pytest command probe whose tests never ran: a collection error, a
  usage error, an internal error or no tests collected (pytest exit 2-5, as
  ``torch_matrix.probes.pytest_outcomes`` records it). The project's test suite has to be fixed first.
  Except ``import-break`` (a version cause): the error names a module of an axis under test
  (``No module named 'torch._six'``) and the suite collects in another cell of the run
  (``in_run_context``, applied when a run's results are loaded): the release broke the project.

Missing modules are mapped to the distribution that ships them (each cell records, from RECORD,
which top-level modules its distributions provide: ``interpreter.providers``). Seen across the
run (``in_run_context``):

- ``dropped-module`` (version): the module's provider is installed in this cell at a release that
  no longer ships it (``pkg_resources``: setuptools 80.9.0 ships it in another cell, 84.0.0 here):
  a finding about versions, with the two answers (cap the dependency, or raise torch's floor);
- ``refuted-advice`` (version): "add <module>" was tried by a counterfactual cell, which was
  unsatisfiable (no such distribution on the index): the advice is withdrawn, and the failure
  stands against the cell's versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from torch_matrix.vocab.records import StrEnum
from typing import TYPE_CHECKING, Any, Callable, Mapping

from torch_matrix.vocab.versions import newest as newest_version
from torch_matrix.vocab.records import (
    CRASH,
    ERROR,
    FAIL,
    PASS,
    PROBE_RUNNER,
    SKIP,
    TIMEOUT,
    UNSUPPORTED,
    CellResult,
    ProbeResult,
    local_label,
)

if TYPE_CHECKING:  # the catalogue itself is imported where it is asked (``code_finding``)
    from torch_matrix.judge.catalogue import Finding


class Cause(StrEnum):
    VERSION = "version"
    ENVIRONMENT = "environment"
    INFRASTRUCTURE = "infrastructure"


class VersionKind(StrEnum):
    CHANGED_DEFAULT = "changed-default"  # the plain call broke; a non-default argument works
    # the project's tests failed to import or collect, and the error names a module of an axis
    # under test (``No module named 'torch._six'``): the release broke the project at import time
    IMPORT_BREAK = "import-break"
    # a module the cell misses comes from a distribution installed here at a release that no longer
    # ships it (seen providing it in another cell): a version finding on that dependency
    DROPPED_MODULE = "dropped-module"
    # the environment advice ("add X") was tried and refuted: its counterfactual cell was unsatisfiable
    REFUTED_ADVICE = "refuted-advice"
    # the user's tests fail on an API change the catalogue knows (``judge.catalogue``): a finding
    # about the versions (the window stands), whose first answer is the code fix
    CODE_FIX = "code-fix"


class EnvironmentKind(StrEnum):
    MISSING_DEPENDENCY = "missing-dependency"
    MISMATCHED_BUILD = "mismatched-build"
    MISMATCHED_PAIR = "mismatched-pair"  # an [[include]] with install = "override"
    NUMPY_ABI = "numpy-abi"  # numpy 2 under a torch built against numpy 1
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
    fix: str = ""  # a code fix the catalogue knows (``judge.catalogue``), with the call site

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cause": str(self.cause)}
        for key in ("kind", "advice", "requirement", "detail", "fix"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Attribution":
        """The inverse of ``to_json`` (a stored verdict's attributions, ``judge.stored``)."""
        return cls(
            Cause(data["cause"]),
            **{
                k: str(data[k])
                for k in ("kind", "advice", "requirement", "detail", "fix")
                if k in data
            },
        )


VERSION_CAUSE = Attribution(Cause.VERSION)
_MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
# torch warns on every numpy bridge it sets up when numpy is absent, then goes on: a line of the
# output, never the failure (torch 2.3.1 on Python 3.12: dynamo unsupported, and this warning).
_NUMPY_WARNING = re.compile(r"^.*Failed to initialize NumPy: No module named 'numpy'.*$", re.M)


def _missed(text: str) -> re.Match[str] | None:
    """The first ``No module named 'x'`` of a failure's text that is not torch's numpy warning."""
    return _MISSING_MODULE.search(_NUMPY_WARNING.sub("", text))


# Modules a cell's own axes provide: missing, they are a version finding (e.g. torchvision
# without its ops), not a dependency the environment forgot. Any other module (numpy where no
# axis pins it, setuptools, onnxscript, ...) that is not installed is an environment gap, whatever
# probe or test missed it: the counterfactual adds it, all else equal (numpy is under test only
# where the cell varies it: ``axis_modules``).
_UNDER_TEST = {"torch", "torchvision", "torchaudio"}
# Modules whose distribution has another name: the requirement that brings them. torch 2.1's
# torch.compile imports pkg_resources (seen on real wheels, Python 3.11), which setuptools provided
# until 82.0.0 removed it (checked: 81.0.0 has it, 82.0.0 does not).
DISTRIBUTION_OF = {
    "pkg_resources": "setuptools<82",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
}
_BUILD_MISMATCH = (
    "does not exist",
    "undefined symbol",
    "Couldn't load custom C++ ops",
    "operator torchvision::",
    "torchvision::nms",
)
_BROKEN = ("cannot open shared object file", "ELF load command", "invalid ELF header")
# numpy 2 under a torch compiled against numpy 1's C API (every torch before 2.3.0): the import
# warns, then each torch <-> numpy bridge fails with one of these.
_NUMPY_ABI = (
    "_ARRAY_API not found",
    "Numpy is not available",
    "numpy.core.multiarray failed to import",
    "numpy.core._multiarray_umath failed to import",
    "compiled using NumPy 1.x cannot be run in",
)
NUMPY_FIX = "numpy<2"
FAILING = (FAIL, ERROR, TIMEOUT, CRASH, UNSUPPORTED)
_PYTEST_NOT_RUN = (2, 3, 4, 5)  # interrupted (collection error), internal, usage, no tests


def _text(probe: ProbeResult) -> str:
    return "\n".join(
        str(part)
        for part in (probe.message, probe.observed, probe.traceback, probe.output_tail)
        if part
    )


# The probes' own classes (``torch_matrix.probes.standard.checkpoint_roundtrip.RunConfig``) stand in for a
# user's; results written before the probe said so name them in the allowlist it advises.
_PROBE_CLASS = re.compile(r"(?:, )?'(?:torch_matrix\.)?probes\.[\w.]+'")
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


# Set by ``in_run_context`` on a command probe whose tests collect in no cell of the run: its
# import errors are the suite's to fix, whatever module they name.
COLLECTED_NOWHERE = "collected_nowhere"


def axis_modules(cell: Any) -> tuple[str, ...]:
    """Top-level modules of the packages the cell varies: torch, torchvision, its extras."""
    names = {"torch", "torchvision", "torchaudio"}
    names |= {
        name.lower().replace("-", "_").replace(".", "_")
        for name in cell.axes
        if name not in ("python", "variant")
    }
    return tuple(sorted(names))


def axis_module_named(cell: Any, probe: ProbeResult, frames: bool = True) -> str:
    """The module of an axis under test that a failed import/collection names (``torch._six`` in
    ``No module named 'torch._six'``, ``cannot import name 'x' from 'torch.optim'``, ``module
    'torch' has no attribute 'x'``, or, with ``frames``, a frame inside the package), or ""."""
    text = "\n".join(
        [
            probe.message,
            *(str(e.get("message", "")) for e in probe.evidence.get("collection_errors") or ()),
            probe.output_tail or "",
        ]
    )
    mods = "|".join(re.escape(m) for m in axis_modules(cell))
    quoted = re.search(
        r"(?:No module named|cannot import name '[\w.]+' from|module) '((?:%s)(?:\.[\w.]+)?)'"
        % mods,
        text,
    )
    if quoted:
        return quoted.group(1)
    frame = re.search(r"/site-packages/(%s)/" % mods, text) if frames else None
    return frame.group(1) if frame else ""


def import_broken(cell: Any, probe: ProbeResult) -> bool:
    """The probe's tests failed to import/collect and the error names an axis module."""
    return (
        probe.status == ERROR
        and probe.evidence.get("pytest_exit") in _PYTEST_NOT_RUN
        and bool(axis_module_named(cell, probe))
    )


MODULE_PROVIDER = "module_provider"
REFUTED_BY = "refuted_by"


def missing_module(result: CellResult, probe: ProbeResult) -> str:
    """The top-level module a failing probe missed (``No module named 'pkg_resources'``) when it is
    no axis under test and no distribution of that name is installed: the case whose advice would
    be "add it"; else ""."""
    if probe.status not in FAILING or result.install.status != "installed":
        return ""
    found = _missed(_text(probe))
    if not found:
        return ""
    module = found.group(1).split(".")[0]
    return module if _environment_gap(result, module, probe.name) else ""


def requirement_name(text: str) -> str:
    return re.split(r"[<>=!~;\[ ]", text, maxsplit=1)[0].strip().lower().replace("_", "-")


def public_torch(version: str) -> str:
    return version.split("+", 1)[0]


def dropped_advice(found: Mapping[str, Any]) -> str:
    module, dist, here = found.get("module"), found.get("distribution"), found.get("installed")
    seen = found.get("provided_in") or [{}]
    newest = newest_version(str(s.get("version", "")) for s in seen)
    cell = next((s.get("cell", "?") for s in seen if str(s.get("version", "")) == newest), "?")
    torch = found.get("torch") or "this torch"
    return (
        f"`{module}` comes from {dist}: {dist} {newest} ships it (cell {cell}), "
        f"{dist} {here} installed here does not. Either cap {dist}<={newest} (keeps torch {torch}), "
        f"or raise torch's floor above {torch} (keeps {dist} {here})"
    )


def refuted_advice(found: Mapping[str, Any]) -> str:
    module, requirement = found.get("module"), found.get("requirement") or found.get("module")
    return (
        f"refuted: `add {requirement}` (its counterfactual cell {found.get('cell')} is unsatisfiable: "
        f"the index has no `{requirement}`); no cell of this run shows which distribution ships `{module}`"
    )


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


def numpy_abi(resolved: Mapping[str, str], text: str) -> Attribution | None:
    """numpy 2 installed under a torch built against numpy 1, when ``text`` shows the bridge
    failing: an environment finding whose fix is ``numpy<2``."""
    numpy = resolved.get("numpy", "")
    if not numpy or not any(marker in text for marker in _NUMPY_ABI):
        return None
    major = re.match(r"\d+", numpy)
    if major is None or int(major.group(0)) < 2:
        return None
    torch = public_torch(resolved.get("torch", "")) or "this torch"
    return Attribution(
        Cause.ENVIRONMENT,
        EnvironmentKind.NUMPY_ABI,
        f"torch {torch} was built against numpy 1 and numpy {numpy} is installed (numpy 2 "
        f"support starts with torch 2.3.0): add `{NUMPY_FIX}` to your requirements",
        requirement=NUMPY_FIX,
        detail=f"numpy {numpy}",
    )


def install_attribution(result: CellResult) -> Attribution | None:
    """The environment finding an install whose check failed shows (``import torch`` raised while
    its version was read: numpy 2 under an old torch, a module its wheel does not declare), or
    None: the install step's own failures are no finding."""
    if result.install.status != ERROR:
        return None
    text = result.install.message
    found = numpy_abi(result.install.resolved, text)
    if found is not None:
        return found
    missing = _missed(text)
    if missing:
        module = missing.group(1).split(".")[0]
        if _environment_gap(result, module):
            return _missing_dependency("import torch", module)
    return None


def _environment_gap(result: CellResult, module: str, probe: str = "") -> bool:
    """``module``, missed by ``probe``, is an environment gap: no axis of the cell provides it, the
    probe is not about it, and no distribution that ships it is installed."""
    return not (
        module in _UNDER_TEST
        or module in axis_modules(result.cell)
        or (probe and probe.startswith(module))
        or _satisfied(result.install.resolved, DISTRIBUTION_OF.get(module, module))
    )


def _missing_dependency(who: str, module: str) -> Attribution:
    distribution = DISTRIBUTION_OF.get(module, module)
    needs = f"`{module}`" + (f" (from {distribution})" if distribution != module else "")
    return Attribution(
        Cause.ENVIRONMENT,
        EnvironmentKind.MISSING_DEPENDENCY,
        f"{who} needs {needs} in the environment, which these wheels do not "
        f"declare (uv venvs contain no {module}): add `{distribution}` to your requirements",
        requirement=distribution,
        detail=module,
    )


def _environment_before_collection(result: CellResult, probe: ProbeResult) -> Attribution | None:
    """A collection error the environment explains (the tests could not import torch: numpy 2 under
    a torch built for numpy 1, ``pkg_resources`` gone from setuptools): the finding, not "fix the
    test suite". Only ``pkg_resources`` (torch <= 2.1 imports it) or a module torch's own code
    missed: any other module is the suite's to fix (its own, a plugin, a test dependency)."""
    text = _text(probe)
    found = numpy_abi(result.install.resolved, text)
    if found is not None:
        return found
    module = missing_module(result, probe)
    if module and (module == "pkg_resources" or "/site-packages/torch/" in text):
        return _missing_dependency(probe.name, module)
    return None


def code_finding(probe: ProbeResult) -> Finding | None:
    """The catalogue's finding for a failing probe (``catalogue.probe_finding``)."""
    if probe.status not in FAILING:
        return None
    # Imported here: the catalogue is large, and a run that fails nowhere never asks it.
    from torch_matrix.judge.catalogue import probe_finding

    return probe_finding(probe.evidence, _text(probe))


def _recorded_cause(probe: ProbeResult) -> Attribution | None:
    """A cause the probe's own record states: a changed default, the runner that died, a module
    another release shipped, an advice a counterfactual refuted (both seen across the run)."""
    if "changed default:" in probe.message:
        # The release changed a default: the plain call users make fails, a workaround works. A
        # finding about the version, whose answer is the workaround, not an exclusion.
        advice = user_advice(str(probe.evidence.get("advice") or probe.message))
        return Attribution(Cause.VERSION, VersionKind.CHANGED_DEFAULT, advice, detail=probe.name)
    if probe.name == PROBE_RUNNER:
        return Attribution(Cause.INFRASTRUCTURE, advice="the probe runner died; rerun the cell")
    # Seen across the run (in_run_context): a version finding, wherever the module was missed.
    dropped = probe.evidence.get(MODULE_PROVIDER)
    if isinstance(dropped, dict):
        return Attribution(
            Cause.VERSION,
            VersionKind.DROPPED_MODULE,
            dropped_advice(dropped),
            detail=str(dropped.get("module", "")),
        )
    refuted = probe.evidence.get(REFUTED_BY)
    if isinstance(refuted, dict):
        return Attribution(
            Cause.VERSION,
            VersionKind.REFUTED_ADVICE,
            refuted_advice(refuted),
            detail=str(refuted.get("module", "")),
        )
    return None


_UNDECLARED_EXTRA = re.compile(r"does not have an extra named `([^`]+)`")


def _undeclared_extra(result: CellResult, probe: ProbeResult) -> Attribution | None:
    """pytest refused the command's options (exit 4) and uv warned, installing the cell, that the
    project declares no such extra: the tools the command needs (pytest-cov for ``--cov``) were
    never installed. Seen on a real project (docs/corpus.md): ``install = [".[test]"]`` copied from
    a CI whose ``test`` extra had become a dependency group. The install's to fix, not the suite."""
    if probe.evidence.get("pytest_exit") != 4:
        return None
    found = _UNDECLARED_EXTRA.search(result.install.message or "")
    if found is None:
        return None
    return Attribution(
        Cause.ENVIRONMENT,
        EnvironmentKind.TESTS_DID_NOT_RUN,
        f"{probe.name}: the tests did not run (pytest exit 4): the install asks for the extra "
        f"`{found.group(1)}`, which the project does not declare (uv: {found.group(0)}), so what "
        "the command needs was not installed: name its packages in `install`; "
        + probe.message.split(" (exit ")[0].split(" (pytest exit ")[0][:160],
        detail=probe.message[:120],
    )


def _tests_not_run(result: CellResult, probe: ProbeResult) -> Attribution | None:
    """A command probe whose pytest ran no test: the environment before collection, an import the
    axis under test broke, an extra the install named that the project lacks, or the suite."""
    if not (probe.status == ERROR and probe.evidence.get("pytest_exit") in _PYTEST_NOT_RUN):
        return None
    environment = _environment_before_collection(result, probe) or _undeclared_extra(result, probe)
    if environment is not None:
        return environment
    if not probe.evidence.get(COLLECTED_NOWHERE):
        module = axis_module_named(result.cell, probe)
        if module:
            finding = code_finding(probe)
            advice = (
                f"{probe.name}: the tests cannot be imported with this {module.split('.')[0]} "
                f"({module} in the error)"
            )
            return Attribution(
                Cause.VERSION,
                VersionKind.IMPORT_BREAK,
                detail=module,
                advice=f"{advice}; {finding.advice()}" if finding else advice,
                fix=finding.fix if finding else "",
            )
    finding = code_finding(probe)  # collected nowhere, on an API every tested release lacks
    return Attribution(
        Cause.ENVIRONMENT,
        EnvironmentKind.TESTS_DID_NOT_RUN,
        f"{probe.name}: the tests did not run (pytest exit {probe.evidence['pytest_exit']}): "
        + (
            f"fix the test suite: {finding.advice()}"
            if finding
            else f"fix the test suite; {probe.message.split(' (exit ')[0][:160]}"
        ),
        detail=probe.message[:120],
    )


def _read_from_message(result: CellResult, probe: ProbeResult) -> Attribution | None:
    """A cause read from the failure's text and the install: an API change the catalogue knows, a
    missing undeclared dependency, a mismatched pair or build, a broken install."""
    text = _text(probe)
    resolved = result.install.resolved
    if probe.isolation == "command":  # the user's own tests: an API change the catalogue knows
        finding = code_finding(probe)
        if finding is not None:
            return Attribution(
                Cause.VERSION,
                VersionKind.CODE_FIX,
                finding.advice(),
                detail=finding.change.key,
                fix=finding.fix,
            )
    missing = _missed(text)
    if missing:
        module = missing.group(1).split(".")[0]
        if _environment_gap(result, module, probe.name):
            return _missing_dependency(probe.name, module)
    torch = resolved.get("torch", "")
    vision = resolved.get("torchvision", "")
    if "install-override" in result.cell.tags and vision:
        # The spec asked for this pair against torchvision's own torch requirement: the advice is
        # about the pair (keep them paired), never a bound on either release.
        return Attribution(
            Cause.ENVIRONMENT,
            EnvironmentKind.MISMATCHED_PAIR,
            f"torchvision {vision} installed with torch {torch} over its own torch requirement "
            f"(--no-deps / override): install torchvision {vision} only with the torch it requires; "
            f"no bound on either release follows from this pair",
            detail=f"torch {torch} / torchvision {vision}",
        )
    if (
        torch
        and vision
        and local_label(torch) != local_label(vision)
        and any(marker in text for marker in _BUILD_MISMATCH)
    ):
        return Attribution(
            Cause.ENVIRONMENT,
            EnvironmentKind.MISMATCHED_BUILD,
            f"torch {torch} and torchvision {vision} are different builds: install torch and "
            f"torchvision from the same index/variant",
            detail=f"torch {torch} / torchvision {vision}",
        )
    if any(marker in text for marker in _BROKEN):
        return Attribution(
            Cause.ENVIRONMENT,
            EnvironmentKind.BROKEN_INSTALL,
            "a shared library of an installed package cannot be loaded: reinstall the environment",
            detail=probe.message[:120],
        )
    return None


def attribute(result: CellResult, probe: ProbeResult) -> Attribution:
    """The cause of ``probe``'s outcome in ``result`` (``version`` for a pass or skip too)."""
    if probe.status in (PASS, SKIP):
        return VERSION_CAUSE
    return (
        _recorded_cause(probe)
        or _tests_not_run(result, probe)
        or _read_from_message(result, probe)
        or VERSION_CAUSE
    )


def code_fixes(result: CellResult, names: tuple[str, ...]) -> dict[str, Attribution]:
    """The failing probes among ``names`` whose failure has a code fix the catalogue knows (they
    stay failures: the fix comes first, the window second)."""
    return _failures_where(result, names, lambda a: bool(a.fix))


def environment_failures(result: CellResult, names: tuple[str, ...]) -> dict[str, Attribution]:
    """The probes among ``names`` whose failure the environment explains."""
    return _failures_where(result, names, lambda a: a.cause == Cause.ENVIRONMENT)


def changed_defaults(result: CellResult, names: tuple[str, ...]) -> dict[str, Attribution]:
    """The probes among ``names`` that failed only because the release changed a default."""
    return _failures_where(result, names, lambda a: a.kind == VersionKind.CHANGED_DEFAULT)


def _failures_where(
    result: CellResult, names: tuple[str, ...], wanted: Callable[[Attribution], bool]
) -> dict[str, Attribution]:
    found = {}
    for name in names:
        probe = result.probe(name)
        if probe is not None and probe.status in FAILING:
            attribution = attribute(result, probe)
            if wanted(attribution):
                found[name] = attribution
    return found
