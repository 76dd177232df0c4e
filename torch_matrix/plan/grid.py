"""Spec + index facts + interpreters -> cells (sharding them is ``torch_matrix.plan.shards``).

``plan_cells`` is a pure function of data. ``gather_facts`` only asks the index object
it is handed (see ``torch_matrix.world.index``; ``torch_matrix.run.pipeline`` wires the real one) for what exists:
torch releases, the torchvision release whose metadata pins each torch (never a
hand-kept table), and which Pythons each torch release has wheels for.
"""

from __future__ import annotations

import dataclasses

import fnmatch
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from packaging.specifiers import SpecifierSet
from packaging.tags import parse_tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_matrix.plan.cost import run_order
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.layout import ID_UNSAFE
from torch_matrix.vocab.records import Cell, public_version
from torch_matrix.spec.model import (
    CURRENT_PYTHON,
    DEFAULT_VARIANT,
    INTERPRETER_SEARCH,
    OVERRIDE_TAG,
    VERSIONED_AXES,
    Rule,
    Spec,
    TorchSelection,
)

_OPERATOR_WORDS = {
    "===": "",
    "==": "",
    "!=": "ne",
    "~=": "compat",
    "<=": "le",
    ">=": "ge",
    "<": "lt",
    ">": "gt",
}
_PY_MINORS = tuple(f"3.{minor}" for minor in range(31))


# ---------------------------------------------------------------- facts


@dataclass(frozen=True)
class IndexFacts:
    """What the indexes say, gathered once at the edge; plain data for the pure planner.

    ``torch_versions`` maps a variant to the public torch versions it offers, ascending;
    a variant whose index could not be read is absent (its cells use the default's list).
    ``torch_pythons`` maps (variant, torch version) to the Python X.Y values with a wheel;
    absent = unknown. ``pairing`` maps a torch version to its torchvision release.
    """

    torch_versions: Mapping[str, tuple[str, ...]]
    pairing: Mapping[str, str] = field(default_factory=dict)
    torchvision_versions: tuple[str, ...] = ()
    torch_pythons: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    where: str = "the index"  # for messages
    # an [extras] project -> the versions the index lists (absent: not read, not checked)
    extras_versions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def available(self, variant: str) -> tuple[str, ...]:
        if variant in self.torch_versions:
            return self.torch_versions[variant]
        return self.torch_versions.get(DEFAULT_VARIANT, ())

    def known_anywhere(self, version: str) -> bool:
        return any(version in versions for versions in self.torch_versions.values())

    def all_torch_versions(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(v for versions in self.torch_versions.values() for v in versions)
        )


def nearest_releases(version: str, available: Iterable[str], count: int = 2) -> list[str]:
    """Up to ``count`` releases just below ``version`` and ``count`` just above, ascending."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return []
    parsed = sorted({Version(v) for v in available if public_version(v)})
    below = [v for v in parsed if v < wanted][-count:]
    above = [v for v in parsed if v > wanted][:count]
    return [str(v) for v in below + above]


def nearest_hint(version: str, available: Iterable[str]) -> str:
    near = nearest_releases(version, available)
    if not near:
        return "check [index] in the spec: that index lists no release of it"
    return f"the nearest releases are {', '.join(near)}"


class IndexLike(Protocol):
    def versions(self, project: str) -> list[Version]: ...
    def files(self, project: str, version: str) -> list[Any]: ...
    def requires_dist(self, project: str, version: str) -> list[Any]: ...


def gather_facts(
    spec: Spec,
    index: IndexLike,
    *,
    variant_indexes: Mapping[str, IndexLike] | None = None,
    batch: int = 8,
) -> IndexFacts:
    """Read what planning needs. ``variant_indexes`` are the per-variant indexes (optional)."""
    torch_versions = {DEFAULT_VARIANT: _public_versions(index.versions("torch"))}
    sources = {DEFAULT_VARIANT: index}
    for variant in spec.variants:
        if variant == DEFAULT_VARIANT or not variant_indexes or variant not in variant_indexes:
            continue
        variant_list = _public_versions(variant_indexes[variant].versions("torch"))
        # An unreachable variant index answers nothing (with a warning): its cells then
        # plan from the default index, and the installer decides.
        if variant_list:
            torch_versions[variant] = variant_list
            sources[variant] = variant_indexes[variant]
    facts = IndexFacts(torch_versions=torch_versions, where=_where(index))
    needed: dict[str, set[str]] = {}
    for variant in spec.variants:
        for version in select_torch(spec, facts, variant):
            needed.setdefault(version, set()).add(variant)
    for rule in spec.include:
        needed.setdefault(rule.values["torch"][0], set()).add(
            rule.values.get("variant", ("default",))[0]
        )

    torch_pythons: dict[tuple[str, str], frozenset[str]] = {}
    for version, variants in needed.items():
        for variant in variants:
            source = sources.get(variant)
            if source is None:
                continue
            pythons = _wheel_pythons(source.files("torch", version))
            if pythons is not None:
                torch_pythons[(variant, version)] = pythons

    wants_pairing = spec.torchvision == "paired" or any(
        rule.values.get("torchvision", ("paired",))[0] == "paired" for rule in spec.include
    )
    wants_torchvision = spec.torchvision != "none" or any(
        rule.values.get("torchvision", ("none",))[0] != "none" for rule in spec.include
    )
    torchvision_versions: tuple[str, ...] = ()
    pairing: dict[str, str] = {}
    if wants_torchvision:
        listed = index.versions("torchvision")
        torchvision_versions = tuple(str(v) for v in listed)
        if wants_pairing and needed:
            pairing = _pair(index, listed, set(needed), batch, spec_pythons(spec))
    extras_versions = {
        axis.name: tuple(str(v) for v in index.versions(axis.name)) for axis in spec.extras
    }
    return IndexFacts(
        torch_versions=torch_versions,
        pairing=pairing,
        torchvision_versions=torchvision_versions,
        torch_pythons=torch_pythons,
        where=facts.where,
        extras_versions=extras_versions,
    )


def _where(index: Any) -> str:
    sources = getattr(index, "sources", ())
    return ", ".join(s.location for s in sources) or "the index"


def _public_versions(versions: Iterable[Version]) -> tuple[str, ...]:
    return tuple(str(v) for v in sorted({Version(v.public) for v in versions}))


def _wheel_pythons(files: Iterable[Any]) -> frozenset[str] | None:
    """Python X.Y values some wheel serves; None when there are no wheels to tell."""
    found: set[str] = set()
    saw_wheel = False
    for item in files:
        if not getattr(item, "tags", ()):
            continue
        saw_wheel = True
        for tag_text in item.tags:
            found |= _tag_pythons(tag_text, item.requires_python or "")
    return frozenset(found) if saw_wheel else None


@lru_cache(maxsize=4096)  # hundreds of (tag, Requires-Python) pairs: each half cached apart
def _tag_pythons(tag_text: str, requires_python: str) -> frozenset[str]:
    """The Python X.Y values one wheel tag serves within its Requires-Python."""
    found = _allowed_minors(requires_python)  # a few texts per package, dozens of tags
    return found & frozenset().union(*(_minors(t.interpreter, t.abi) for t in parse_tag(tag_text)))


@lru_cache(maxsize=1024)
def _minors(interpreter: str, abi: str) -> frozenset[str]:
    return frozenset(minor for minor in _PY_MINORS if _tag_serves(interpreter, abi, minor))


@lru_cache(maxsize=1024)
def _allowed_minors(requires_python: str) -> frozenset[str]:
    allowed = SpecifierSet(requires_python)
    return frozenset(m for m in _PY_MINORS if allowed.contains(m + ".0", prereleases=True))


def _tag_serves(interpreter: str, abi: str, minor: str) -> bool:
    digits = minor.replace(".", "")
    if interpreter in (f"cp{digits}", f"py{digits}", "py3"):
        return True
    if abi == "abi3" and interpreter.startswith("cp3"):
        return int(digits[1:]) >= int(interpreter[3:] or 0)
    return False


def spec_pythons(spec: Spec) -> tuple[str, ...]:
    """The spec's Python X.Y values, in its order (interpreter paths name none): whose wheel's
    metadata a pairing reads first."""
    return tuple(p for p in spec.python if p in _PY_MINORS)


def _pair(
    index: IndexLike,
    torchvision_versions: Sequence[Version],
    needed: set[str],
    batch: int,
    pythons: Sequence[str] = (),
) -> dict[str, str]:
    """torch version -> its torchvision, read from torchvision's Requires-Dist on torch, as the
    wheel a cell installs declares it (the index's platform, the first of ``pythons`` served).

    A release that pins ``torch==X`` exactly is X's pair. Newer torchvision releases built
    on torch's stable ABI declare a range (``torch>=2.14.0``): failing an exact pin, the
    newest release whose range contains X pairs with it. A bare ``torch`` pins nothing.
    """
    exact: dict[str, str] = {}
    ranged: dict[str, str] = {}
    oldest_needed = min(Version(v) for v in needed)
    newest_first = sorted({Version(v.public) for v in torchvision_versions}, reverse=True)
    many = getattr(index, "requires_dist_many", None)
    for start in range(0, len(newest_first), batch):
        chunk = [str(v) for v in newest_first[start : start + batch]]
        if many is not None:
            metadata = many("torchvision", chunk, pythons=pythons)
        else:
            metadata = {v: index.requires_dist("torchvision", v) for v in chunk}
        lowest: Version | None = None
        for tv in chunk:
            for specifiers in _torch_specifiers(metadata[tv]):
                for spec in specifiers:
                    if spec.operator in ("==", "===") and "*" not in spec.version:
                        exact.setdefault(public_version(spec.version) or spec.version, tv)
                    if spec.operator in ("==", "===", ">=", ">", "~="):
                        floor = spec.version.replace(".*", "")
                        bound = Version(public_version(floor) or floor)
                        lowest = bound if lowest is None else min(lowest, bound)
                for torch in needed:
                    if torch not in ranged and specifiers.contains(
                        Version(torch), prereleases=True
                    ):
                        ranged[torch] = tv
        if needed <= set(exact) or (lowest is not None and lowest < oldest_needed):
            break
    pairing = {}
    for torch in needed:
        paired = exact.get(torch) or ranged.get(torch)
        if paired:
            pairing[torch] = paired
    return pairing


def _torch_specifiers(requirements: Iterable[Any]) -> list[SpecifierSet]:
    """The non-empty torch specifiers among a release's unconditional Requires-Dist."""
    found = []
    for requirement in requirements:
        if canonicalize_name(requirement.name) != "torch" or not str(requirement.specifier):
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        try:
            for spec in requirement.specifier:
                Version(public_version(spec.version.replace(".*", "")) or "")
        except InvalidVersion:
            continue
        found.append(requirement.specifier)
    return found


# ---------------------------------------------------------------- torch selection


def select_torch(spec: Spec, facts: IndexFacts, variant: str) -> list[str]:
    """The torch versions a variant's cells use: explicit ones as given, else newest first."""
    selection: TorchSelection = spec.torch
    if selection.explicit:
        for i, wanted in enumerate(selection.explicit):
            if not facts.known_anywhere(wanted):
                raise UserError(
                    f"torch {wanted} does not exist on {facts.where}",
                    where=f"{spec.path}: torch[{i}]",
                    hint=nearest_hint(wanted, facts.all_torch_versions()),
                )
        return list(selection.explicit)
    available = [Version(v) for v in facts.available(variant)]
    allowed = [v for v in available if selection.specifier.contains(v) and not v.is_prerelease]
    if selection.select == "latest-patch":
        latest: dict[tuple[int, int], Version] = {}
        for version in allowed:
            key = (version.major, version.minor)
            latest[key] = max(version, latest.get(key, version))
        allowed = list(latest.values())
    if selection.newest:
        minors = sorted({(v.major, v.minor) for v in allowed}, reverse=True)[: selection.newest]
        allowed = [v for v in allowed if (v.major, v.minor) in minors]
    if not allowed:
        newest = [str(v) for v in sorted(available, reverse=True) if not v.is_prerelease][:3]
        hint = (
            f"the newest releases there are {', '.join(newest)}: widen torch.versions"
            if newest
            else "check [index] in the spec: that index lists no torch release"
        )
        raise UserError(
            f"no torch release on {facts.where} matches {selection.versions or 'any version'!r}",
            where=f"{spec.path}: torch",
            hint=hint,
        )
    return [str(v) for v in sorted(allowed, reverse=True)]


# ---------------------------------------------------------------- cells


def check_extras(spec: Spec, facts: IndexFacts) -> None:
    """Each [extras] value must match a release on the index, as an explicit torch must: a value
    that matches none (``numpy = ["9.9.9"]``) is a ``UserError`` naming the nearest releases."""
    for axis in spec.extras:
        listed = facts.extras_versions.get(axis.name)
        if listed is None:
            continue
        releases = [
            Version(v) for v in listed if public_version(v) and not Version(v).is_prerelease
        ]
        for i, value in enumerate(axis.values):
            specifier = SpecifierSet(value)
            if any(specifier.contains(v) for v in releases):
                continue
            exact = [
                s.version for s in specifier if s.operator in ("==", "===") and "*" not in s.version
            ]
            if not releases:
                hint = f"check [index] in the spec: {facts.where} lists no release of {axis.name}"
            elif exact:
                hint = nearest_hint(exact[0], [str(v) for v in releases])
            else:
                newest = ", ".join(str(v) for v in sorted(releases, reverse=True)[:3])
                hint = f"the newest releases there are {newest}"
            raise UserError(
                f"no {axis.name} release on {facts.where} matches {value!r}",
                where=f"{spec.path}: extras.{axis.name}[{i}]",
                hint=hint,
            )


def plan_cells(spec: Spec, facts: IndexFacts, interpreters: Mapping[str, Any]) -> list[Cell]:
    """Expand the spec into cells: product of the axes, minus excludes, plus includes."""
    check_extras(spec, facts)
    pythons = _resolve_pythons(spec.python, interpreters)
    torchvision_mode = spec.torchvision if isinstance(spec.torchvision, str) else "explicit"
    if torchvision_mode == "explicit":
        for i, version in enumerate(spec.torchvision):
            if facts.torchvision_versions and version not in facts.torchvision_versions:
                raise UserError(
                    f"torchvision {version} does not exist on {facts.where}",
                    where=f"{spec.path}: torchvision[{i}]",
                    hint=nearest_hint(version, facts.torchvision_versions),
                )

    planned: list[Cell] = []
    combos: list[tuple[tuple[Any, ...], str, str]] = []
    explicit_order = {v: i for i, v in enumerate(spec.torch.explicit)}
    for variant_index, variant in enumerate(spec.variants):
        for torch in select_torch(spec, facts, variant):
            order = explicit_order.get(torch, -1)
            key = (order,) if spec.torch.explicit else (tuple(-p for p in Version(torch).release),)
            combos.append((key + (variant_index,), variant, torch))
    combos.sort(key=lambda item: item[0])

    tv_values = list(spec.torchvision) if torchvision_mode == "explicit" else [torchvision_mode]
    extra_values = [axis.values for axis in spec.extras]
    for _key, variant, torch in combos:
        for python, interpreter in pythons:
            for tv in tv_values:
                for choice in itertools.product(*extra_values):
                    cell = _make_cell(
                        spec,
                        facts,
                        python,
                        interpreter,
                        torch,
                        variant,
                        tv,
                        dict(zip((e.name for e in spec.extras), choice)),
                    )
                    if not any(_rule_matches(rule, cell.axes, spec) for rule in spec.exclude):
                        planned.append(cell)

    for rule in spec.include:
        values = {axis: vals[0] for axis, vals in rule.values.items()}
        torch = values["torch"]
        if not facts.known_anywhere(torch):
            raise UserError(
                f"torch {torch} does not exist on {facts.where}",
                where=f"{spec.path}: {rule.where}.torch",
                hint=nearest_hint(torch, facts.all_torch_versions()),
            )
        python_name = values["python"]
        python, interpreter = _resolve_pythons((python_name,), interpreters)[0]
        tv = values.get(
            "torchvision", "paired" if torchvision_mode == "explicit" else torchvision_mode
        )
        extras = {e.name: values.get(e.name, "") for e in spec.extras}
        cell = _make_cell(
            spec,
            facts,
            python,
            interpreter,
            torch,
            values.get("variant", DEFAULT_VARIANT),
            tv,
            extras,
        )
        if rule.install == "override":
            # A deliberately mismatched pair (a user's --no-deps / override environment): its own
            # id and tag, so the install overrides torchvision's torch requirement.
            cell = dataclasses.replace(
                cell, id=cell.id + "-override", tags=(*cell.tags, OVERRIDE_TAG)
            )
            planned.append(cell)
            continue
        if all(existing.axes != cell.axes for existing in planned):
            planned.append(cell)
    return _unique_ids(run_order(planned))


def _resolve_pythons(
    requested: Sequence[str], interpreters: Mapping[str, Any]
) -> list[tuple[str, Any]]:
    """ "current" becomes the X.Y of the running interpreter; duplicates collapse."""
    resolved: list[tuple[str, Any]] = []
    for name in requested:
        interpreter = interpreters.get(name)
        python = name
        if name == CURRENT_PYTHON and interpreter is not None:
            python = ".".join(str(interpreter.version).split(".")[:2])
        if all(python != seen for seen, _ in resolved):
            resolved.append((python, interpreter))
    return resolved


def _make_cell(
    spec: Spec,
    facts: IndexFacts,
    python: str,
    interpreter: Any,
    torch: str,
    variant: str,
    tv_mode: str,
    extras: Mapping[str, str],
) -> Cell:
    notes = []
    if interpreter is None:
        notes.append(f"no Python {python} interpreter found (looked in: {INTERPRETER_SEARCH})")
    pythons = facts.torch_pythons.get((variant, torch))
    if pythons is not None and python in _PY_MINORS and python not in pythons:
        served = ", ".join(sorted(pythons, key=Version)) or "none"
        notes.append(
            f"no torch {torch} wheel for Python {python} on the index (wheels for: {served})"
        )
    if variant in facts.torch_versions and torch not in facts.torch_versions[variant]:
        notes.append(f"torch {torch} has no {variant} build on its index")
    torchvision = ""
    if tv_mode == "paired":
        torchvision = facts.pairing.get(torch, "")
        if not torchvision:
            notes.append(f"no torchvision release requires torch=={torch}")
    elif tv_mode != "none":
        torchvision = tv_mode

    axes = {"python": python, "torch": torch, "torchvision": torchvision, "variant": variant}
    axes.update(extras)
    requirements = [f"torch=={torch}"]
    if torchvision:
        requirements.append(f"torchvision=={torchvision}")
    requirements += [
        f"{axis.name}{extras[axis.name]}" for axis in spec.extras if extras.get(axis.name)
    ]

    tokens = [f"t{torch}"]
    if tv_mode not in ("paired", "none"):
        tokens.append(f"tv{torchvision}")
    elif tv_mode == "none" and spec.torchvision != "none":
        tokens.append("notv")
    if variant != DEFAULT_VARIANT:
        tokens.append(variant)
    tokens.append(f"py{python}")
    extra_tokens = [
        axis.label + value_token(extras[axis.name]) for axis in spec.extras if extras.get(axis.name)
    ]
    tokens += extra_tokens

    version = Version(torch)
    tags = [f"torch{version.major}.{version.minor}", f"py{python}", f"variant-{variant}"]
    if variant != DEFAULT_VARIANT:
        tags.append(variant)
    tags += extra_tokens
    if notes:
        tags.append("planned-unsatisfiable")
    return Cell(
        id=ID_UNSAFE.sub("_", "-".join(tokens)),
        axes=axes,
        requirements=tuple(requirements),
        probes=spec.probes.run,
        required_probes=spec.probes.required,
        plan_note="; ".join(notes[:1]),
        tags=tuple(tags),
        policy=spec.probes.policy,
        install=cell_install(spec),
        install_digest=spec.install_digest,
    )


def cell_install(spec: Spec) -> tuple[str, ...]:
    """The spec's ``install`` items, plus ``pytest`` when a command probe runs pytest and no item
    names it (an item such as ``.[test]`` may bring it too: the resolver reconciles both)."""
    from torch_matrix.spec.install_items import requirement_names, runs_pytest

    items = tuple(spec.install)
    if any(
        runs_pytest(command) for command in spec.probes.commands.values()
    ) and "pytest" not in requirement_names(items):
        items += ("pytest",)
    return items


def value_token(specifiers: str) -> str:
    """``<2`` -> ``lt2``, ``>=1.20,<2`` -> ``lt2_ge1.20``, ``==1.26.*`` -> ``1.26.x``."""
    parts = []
    for spec in SpecifierSet(specifiers):
        parts.append(_OPERATOR_WORDS.get(spec.operator, "") + spec.version.replace("*", "x"))
    return ID_UNSAFE.sub("_", "_".join(sorted(parts)))


def _unique_ids(cells: list[Cell]) -> list[Cell]:
    seen: dict[str, int] = {}
    unique = []
    for cell in cells:
        count = seen.get(cell.id, 0)
        seen[cell.id] = count + 1
        if count:
            cell = Cell(**{**cell.__dict__, "id": f"{cell.id}-{count + 1}"})
        unique.append(cell)
    return unique


def _rule_matches(rule: Rule, axes: Mapping[str, str], spec: Spec) -> bool:
    for axis, accepted in rule.values.items():
        value = axes.get(axis, "")
        if not any(_value_matches(axis, value, pattern) for pattern in accepted):
            return False
    return True


def _value_matches(axis: str, value: str, pattern: str) -> bool:
    if axis in VERSIONED_AXES:
        if not value:
            return False
        try:
            return SpecifierSet(pattern).contains(Version(value), prereleases=True)
        except InvalidVersion:
            return False
    return value == pattern or fnmatch.fnmatchcase(value, pattern)
