"""A probe's cause read against the whole run (pure): what one cell cannot show alone.

``in_run_context(results)`` marks, before the verdicts are taken: a test suite that collects in
no cell of the run (``collected_nowhere``: the suite's to fix), a missing module another cell's
distribution shipped at another version (``module_provider``: cap it, or raise torch's floor),
and an "add it" advice its counterfactual cell refuted (``refuted_by``: no such distribution on
the index). ``judge.causes`` turns each mark into its attribution."""

from __future__ import annotations

from typing import Any, Mapping

from torch_matrix.judge.causes import (
    DISTRIBUTION_OF,
    FAILING,
    COLLECTED_NOWHERE,
    MODULE_PROVIDER,
    REFUTED_BY,
    requirement_name,
    dropped_advice,
    import_broken,
    missing_module,
    public_torch,
    refuted_advice,
)
from torch_matrix.vocab.records import (
    FAIL,
    PASS,
    SKIP,
    CellResult,
)
from torch_matrix.vocab.versions import version_key


def in_run_context(results: list[CellResult]) -> list[CellResult]:
    """The run's results, each command probe whose tests fail to import in every installed cell
    of the run marked ``collected_nowhere``: a suite that collects nowhere is the suite's to fix
    (``tests-did-not-run``), even when its error names torch. Pure: new records, same order."""
    import dataclasses

    collected: set[str] = set()
    broken: set[str] = set()
    for result in results:
        for probe in result.probes:
            if probe.isolation != "command" or "pytest_exit" not in probe.evidence:
                continue
            if probe.evidence.get("pytest_exit") in (0, 1, 5) or probe.status in (PASS, FAIL, SKIP):
                collected.add(probe.name)
            elif import_broken(result.cell, probe):
                broken.add(probe.name)
    nowhere = broken - collected
    # Who ships which module, and which counterfactuals refuted an advice: read from the run only
    # when a probe misses a module (most runs have none).
    providers: dict[str, Any] | None = None
    refutations: dict[tuple[str, str], dict[str, str]] = {}
    out = []
    for result in results:
        if not nowhere and (
            result.install.status != "installed"
            or _FAILING.isdisjoint([p.status for p in result.probes])
        ):
            out.append(result)  # nothing below can apply (missing_module wants a failing probe)
            continue
        probes = []
        for p in result.probes:
            extra: dict[str, Any] = {}
            if p.name in nowhere and import_broken(result.cell, p):
                extra[COLLECTED_NOWHERE] = True
            module = missing_module(result, p)
            if module:
                if providers is None:
                    providers, refutations = (
                        _providers_in_run(results),
                        _refuted_counterfactuals(results),
                    )
                provider = dropped_provider(result, module, providers)
                if provider:
                    extra[MODULE_PROVIDER] = provider
                else:
                    key = (result.cell.id, requirement_name(DISTRIBUTION_OF.get(module, module)))
                    if key in refutations:
                        extra[REFUTED_BY] = {**refutations[key], "module": module}
            if extra:
                message = p.message
                if MODULE_PROVIDER in extra or REFUTED_BY in extra:
                    note = (
                        dropped_advice(extra[MODULE_PROVIDER])
                        if MODULE_PROVIDER in extra
                        else refuted_advice(extra[REFUTED_BY])
                    )
                    message = f"{p.message} [{note}]" if note not in p.message else p.message
                p = dataclasses.replace(p, message=message, evidence={**p.evidence, **extra})
            probes.append(p)
        changed = tuple(probes) != result.probes
        out.append(dataclasses.replace(result, probes=tuple(probes)) if changed else result)
    return out


_FAILING = frozenset(FAILING)
_COUNTERFACTUAL_OF = (
    "counterfactual-of-"  # the tag a counterfactual cell carries (torch_matrix.plan.counterfactual)
)


def _providers_in_run(results: list[CellResult]) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """module -> distribution -> [(version, cell id)] where that distribution shipped the module
    (the cells' ``interpreter.providers``, recorded by the probe runner)."""
    found: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for result in results:
        provides = (result.interpreter or {}).get("providers") or {}
        if not isinstance(provides, dict):
            continue
        versions = {
            name.lower().replace("_", "-"): v for name, v in result.install.resolved.items()
        }
        for dist, modules in provides.items():
            version = versions.get(str(dist).lower().replace("_", "-"))
            if version is None or not isinstance(modules, list):
                continue
            for module in modules:
                found.setdefault(str(module), {}).setdefault(str(dist), []).append(
                    (version, result.cell.id)
                )
    return found


def dropped_provider(
    result: CellResult, module: str, providers: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The distribution that shipped ``module`` in another cell and is installed here at another
    version (which no longer ships it), as the evidence of a ``dropped-module`` finding."""
    resolved = {name.lower().replace("_", "-"): v for name, v in result.install.resolved.items()}
    for dist, seen in sorted((providers.get(module) or {}).items()):
        here = resolved.get(dist.lower().replace("_", "-"))
        elsewhere = sorted(  # newest first: the advice caps at the newest release that ships it
            {(v, c) for v, c in seen if v != here and c != result.cell.id},
            key=lambda item: (version_key(item[0]), item[1]),
            reverse=True,
        )
        if here and elsewhere:
            return {
                "module": module,
                "distribution": dist,
                "installed": here,
                "provided_in": [{"version": v, "cell": c} for v, c in elsewhere[:5]],
                "torch": public_torch(result.install.resolved.get("torch", "")),
            }
    return None


def _refuted_counterfactuals(results: list[CellResult]) -> dict[tuple[str, str], dict[str, str]]:
    """(original cell id, module) -> the counterfactual cell that added the module as a requirement
    and was unsatisfiable (no such distribution on the index): the "add it" advice is refuted."""
    refuted: dict[tuple[str, str], dict[str, str]] = {}
    # A distribution some cell installed is on the index: a counterfactual adding it that could not
    # be installed (a contradiction, a Python without its wheel) refutes nothing, and the advice stays.
    on_index = {
        requirement_name(name)
        for result in results
        if result.install.status == "installed"
        for name in result.install.resolved
    }
    for result in results:
        if result.install.status != "unsatisfiable" or not result.cell.requirements:
            continue
        if requirement_name(result.cell.requirements[-1]) in on_index:
            continue
        originals = [
            t[len(_COUNTERFACTUAL_OF) :]
            for t in result.cell.tags
            if t.startswith(_COUNTERFACTUAL_OF)
        ]
        if not originals:
            continue
        added = result.cell.requirements[-1]
        why = " ".join(result.install.message.split())[:200]
        refuted[(originals[0], requirement_name(added))] = {
            "requirement": added,
            "cell": result.cell.id,
            "why": why,
        }
    return refuted
