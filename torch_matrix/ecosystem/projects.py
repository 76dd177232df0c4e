"""An ecosystem run's input (issue 34): the projects file (TOML) and the two sides. Pure.

A projects file::

    [[project]]
    sdist = "zuko==1.3.1"            # zero-config: the name, the tests, what they need and the
                                     # command are discovered from the sdist (``discover``)

    [defaults]                       # optional; every key a project may set
    budget = "20m"
    command = "python -m pytest -q -p no:cacheprovider tests"

    [[project]]
    name = "einops"
    sdist = "einops==0.8.1"          # or: git = "https://...", ref = "v0.8.1"; or: path = "../x"
    extras = ["test"]                # the project's own extras
    requires = ["pytest", "numpy"]   # extra requirements for its tests
    command = "python -m pytest -q einops/tests"
    budget = "10m"                   # seconds (600) or "10m" / "1h"
    torchvision = true               # install the torchvision paired with each side's torch
    skip = "needs a GPU"             # optional: listed, never run

A side is a torch release (``2.6.0``), a pre-release from an index (``2.7.0rc3`` with
``--candidate-index URL``) or a dated nightly (``nightly-2025-03-01`` = ``2.7.0.dev20250301``,
from the nightly index); its torchvision is the paired release unless given.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from torch_matrix.spec.parse import loads_toml
from torch_matrix.vocab.errors import UserError, did_you_mean
from torch_matrix.vocab.records import StrEnum

DEFAULT_BUDGET_S = 1200.0
DEFAULT_COMMAND = "python -m pytest -q -p no:cacheprovider tests"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PROJECT_KEYS = (
    "name",
    "sdist",
    "git",
    "ref",
    "path",
    "extras",
    "requires",
    "command",
    "budget",
    "torchvision",
    "skip",
    "memory",
)
DISCOVERED_KEYS = (
    "extras",
    "torchvision",
)  # a zero-config entry: the hand's win over the discovery's
DEFAULT_KEYS = ("budget", "command", "requires", "torchvision", "memory")
HINT = (
    'a [[project]] table has name, one source (sdist = "name==X.Y", git + ref, or path), '
    "and optionally command, budget, extras, requires, torchvision, memory, skip"
)


class SourceKind(StrEnum):
    SDIST = "sdist"
    GIT = "git"
    PATH = "path"


class SideKind(StrEnum):
    RELEASE = "release"
    PRERELEASE = "pre-release"
    NIGHTLY = "nightly"


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    location: str  # sdist: the requirement (einops==0.8.1); git: the URL; path: absolute path
    ref: str = ""  # git only

    def describe(self) -> str:
        return f"{self.location}@{self.ref}" if self.ref else self.location


@dataclass(frozen=True)
class Project:
    name: str
    source: Source
    command: str = DEFAULT_COMMAND
    extras: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    budget_s: float = DEFAULT_BUDGET_S
    torchvision: bool = False
    skip: str = ""
    memory_gib: float = 8.0
    # zero-config (no command in the table or [defaults]): the sdist's files fill command,
    # extras and torchvision where ``given`` lacks them, and add to requires (ecosystem.discover)
    discover: bool = False
    given: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": {"kind": str(self.source.kind), "location": self.source.location}
            | ({"ref": self.source.ref} if self.source.ref else {}),
            "command": self.command,
            "extras": list(self.extras),
            "requires": list(self.requires),
            "budget_s": self.budget_s,
            "torchvision": self.torchvision,
            "skip": self.skip,
            "memory_gib": self.memory_gib,
        } | ({"discover": True, "given": sorted(self.given)} if self.discover else {})


@dataclass(frozen=True)
class Side:
    """One torch (and its torchvision) a project's tests run against."""

    role: str  # "baseline" | "candidate"
    torch: str  # an exact version: 2.6.0, 2.7.0rc3, 2.7.0.dev20250301
    kind: SideKind
    torchvision: str = ""  # exact version, "" = the paired one (torchvision_for)
    index: str = ""  # extra index for pre-releases and nightlies
    label: str = field(default="")  # as the user wrote it

    def torchvision_version(self) -> str:
        return self.torchvision or torchvision_for(self.torch)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "torch": self.torch,
            "kind": str(self.kind),
            "torchvision": self.torchvision_version(),
            "index": self.index,
            "label": self.label or self.torch,
        }


def _torch2(torch: str) -> Version | None:
    """A torch 2.x.y version, the only line whose companions follow a rule; None otherwise."""
    try:
        version = Version(torch)
    except InvalidVersion:
        return None
    return version if version.major == 2 and len(version.release) >= 2 else None


def torchaudio_for(torch: str) -> str:
    """The torchaudio released with a torch: since 2.1 the same version (2.6.0 -> 2.6.0, a
    nightly or pre-release alike); 2.0.x -> 2.0.(x+1). "" when unknown (torch 1.x)."""
    version = _torch2(torch)
    if version is None:
        return ""
    if version.release[1] == 0 and version.pre is None and version.dev is None:
        patch = version.release[2] if len(version.release) > 2 else 0
        return f"2.0.{patch + 1}"
    return str(version)


def torchvision_for(torch: str) -> str:
    """The torchvision released with a torch: 2.x.y pairs with 0.(x+15).y (2.6.0 -> 0.21.0); a
    nightly with the nightly of the same date. "" when unknown (torch 1.x: give it)."""
    version = _torch2(torch)
    if version is None:
        return ""
    minor = version.release[1] + 15
    patch = version.release[2] if len(version.release) > 2 else 0
    base = f"0.{minor}.{patch}"
    if version.dev is not None:
        return f"{base}.dev{version.dev}"
    if version.pre is not None:
        return f"{base}{version.pre[0]}{version.pre[1]}"
    return base


NIGHTLY_RE = re.compile(r"nightly-(\d{4})-(\d{2})-(\d{2})(?::(\d+\.\d+\.\d+))?")


def parse_side(
    text: str, role: str, *, index: str = "", torchvision: str = "", next_release: str = ""
) -> Side:
    """``2.6.0`` | ``2.7.0rc3`` | ``2.7.0.dev20250301`` | ``nightly-2025-03-01[:2.7.0]``."""
    where = f"--{role}"
    raw = (text or "").strip()
    nightly = NIGHTLY_RE.fullmatch(raw)
    if nightly:
        year, month, day, base = nightly.groups()
        base = base or next_release
        if not base:
            raise UserError(
                f"nightly {raw!r} needs the release it leads to",
                where=where,
                hint=f"write nightly-{year}-{month}-{day}:2.7.0 or the exact 2.7.0.dev{year}{month}{day}",
            )
        try:
            date(int(year), int(month), int(day))
        except ValueError:  # no such day: no nightly was built on it
            raise UserError(
                f"nightly {raw!r}: {year}-{month}-{day} is not a date",
                where=where,
                hint="nightly-YYYY-MM-DD:2.7.0, e.g. nightly-2025-03-01:2.7.0",
            ) from None
        version = f"{base}.dev{year}{month}{day}"
    else:
        version = raw
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise UserError(
            f"{raw!r} is not a torch version",
            where=where,
            hint="a release (2.6.0), a pre-release (2.7.0rc3) or a nightly (nightly-2025-03-01:2.7.0)",
        ) from None
    if parsed.local:
        raise UserError(
            f"{raw!r} has a local label",
            where=where,
            hint="give the public version (2.6.0); the variant comes from the index",
        )
    kind = (
        SideKind.NIGHTLY
        if parsed.dev is not None
        else SideKind.PRERELEASE
        if parsed.pre is not None
        else SideKind.RELEASE
    )
    if torchvision:
        try:
            Version(torchvision)
        except InvalidVersion:
            raise UserError(
                f"{torchvision!r} is not a torchvision version",
                where=f"--{role}-torchvision",
                hint="an exact version such as 0.21.0",
            ) from None
    return Side(role, str(parsed), kind, torchvision, index, raw)


def _duration(value: Any, where: str) -> float:
    if isinstance(value, bool):
        value = None
    if isinstance(value, (int, float)) and 0 < value < 1e6:
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
        if match:
            seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
            if 0 < seconds < 1e6:
                return seconds
    raise UserError(
        f"invalid time budget {value!r}",
        where=where,
        hint='seconds as a number (600) or a string such as "10m" or "1h"',
    )


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(
            f"expected a list of strings, got {value!r}",
            where=where,
            hint='e.g. ["pytest", "scipy"]',
        )
    return tuple(v.strip() for v in value)


def _requirements(value: Any, where: str) -> tuple[str, ...]:
    found = _strings(value, where)
    for item in found:
        try:
            Requirement(item)
        except InvalidRequirement as error:
            raise UserError(
                f"invalid requirement {item!r}: {error}",
                where=where,
                hint="a PEP 508 requirement such as scipy>=1.10",
            ) from None
    return found


def _source(table: dict[str, Any], where: str, base_dir: str) -> Source:
    given = [key for key in ("sdist", "git", "path") if key in table]
    if len(given) != 1:
        raise UserError(
            "needs exactly one source: sdist, git or path"
            + (f" (got {', '.join(given)})" if given else ""),
            where=where,
            hint='sdist = "einops==0.8.1", or git = "https://github.com/o/r" with ref = "v1.0", '
            'or path = "../local-checkout"',
        )
    key = given[0]
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{key} must be a non-empty string", where=f"{where}.{key}", hint=HINT)
    value = value.strip()
    if key == "sdist":
        try:
            requirement = Requirement(value)
        except InvalidRequirement as error:
            raise UserError(
                f"invalid sdist requirement {value!r}: {error}",
                where=f"{where}.sdist",
                hint='pin the version: sdist = "einops==0.8.1"',
            ) from None
        pinned = [s for s in requirement.specifier if s.operator in ("==", "===")]
        if len(pinned) != 1 or "*" in pinned[0].version:
            raise UserError(
                f"sdist {value!r} is not pinned to one version",
                where=f"{where}.sdist",
                hint=f'pin it so both sides test the same code: sdist = "{requirement.name}==X.Y.Z"',
            )
        return Source(SourceKind.SDIST, f"{requirement.name}=={pinned[0].version}")
    if key == "git":
        ref = table.get("ref")
        if not isinstance(ref, str) or not ref.strip():
            raise UserError(
                "a git source needs a ref (a tag or a commit)",
                where=f"{where}.ref",
                hint='ref = "v1.2.0": both sides and every later run test the same code',
            )
        return Source(SourceKind.GIT, value, ref.strip())
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        path = os.path.normpath(os.path.join(base_dir, path))
    return Source(SourceKind.PATH, path)


def parse_projects(text: str, where: str = "projects.toml", base_dir: str = "") -> list[Project]:
    """The projects of a projects file, in file order; every error one ``UserError`` naming the key."""
    data = loads_toml(text, where, "fix the TOML syntax at that line")
    unknown = sorted(set(data) - {"defaults", "project"})
    if unknown:
        raise UserError(
            f"unknown table {unknown[0]!r}",
            where=where,
            hint="a projects file has [defaults] and [[project]] tables; "
            + did_you_mean(unknown[0], ("defaults", "project")),
        )
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UserError("[defaults] must be a table", where=where, hint=HINT)
    for key in defaults:
        if key not in DEFAULT_KEYS:
            raise UserError(
                f"unknown key {key!r}",
                where=f"{where} [defaults]",
                hint=f"known: {', '.join(DEFAULT_KEYS)}. {did_you_mean(key, DEFAULT_KEYS)}",
            )
    tables = data.get("project", [])
    if not isinstance(tables, list) or not tables:
        raise UserError(
            "no [[project]] tables", where=where, hint='add one: [[project]] name = "einops" ...'
        )
    projects: list[Project] = []
    seen: set[str] = set()
    for number, table in enumerate(tables, 1):
        here = f"{where} [[project]] #{number}"
        if not isinstance(table, dict):
            raise UserError("[[project]] must be a table", where=here, hint=HINT)
        name = table.get("name", _sdist_name(table.get("sdist")))
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise UserError(
                f"invalid or missing name {name!r}",
                where=here,
                hint="a short name of letters, digits, '.', '_', '-' (it names the result files); "
                'an sdist entry may leave it out: sdist = "zuko==1.3.1" is named zuko',
            )
        here = f"{where} [[project]] {name}"
        if name.lower() in seen:
            raise UserError(
                f"project {name!r} is listed twice", where=here, hint="keep one of the two"
            )
        seen.add(name.lower())
        projects.append(_project({"name": name, **table}, defaults, here, where, base_dir))
    return projects


def _project(
    table: dict[str, Any], defaults: dict[str, Any], here: str, where: str, base_dir: str
) -> Project:
    """One [[project]] table (its keys over [defaults]) as a ``Project``; ``here`` names it."""
    name = table["name"]
    for key in table:
        if key not in PROJECT_KEYS:
            raise UserError(
                f"unknown key {key!r}",
                where=here,
                hint=f"known: {', '.join(PROJECT_KEYS)}. {did_you_mean(key, PROJECT_KEYS)}",
            )
    merged = {**defaults, **table}
    zero_config = "command" not in merged
    command = merged.get("command", DEFAULT_COMMAND)
    if not isinstance(command, str) or not command.strip():
        raise UserError("command must be a non-empty string", where=f"{here}.command", hint=HINT)
    skip = table.get("skip", "")
    if not isinstance(skip, str) or ("skip" in table and not skip.strip()):
        raise UserError(  # an empty reason would run the project it was meant to skip
            "skip must be the reason, a non-empty string",
            where=f"{here}.skip",
            hint='skip = "needs a GPU"',
        )
    torchvision = merged.get("torchvision", False)
    if not isinstance(torchvision, bool):
        raise UserError("torchvision must be true or false", where=f"{here}.torchvision", hint=HINT)
    memory = merged.get("memory", 8)
    if isinstance(memory, bool) or not isinstance(memory, (int, float)) or not 0 < memory < 1024:
        raise UserError(
            f"invalid memory limit {memory!r}",
            where=f"{here}.memory",
            hint="GiB of address space for the tests, e.g. memory = 8",
        )
    requires = _requirements(defaults.get("requires", []), f"{where} [defaults].requires")
    requires += _requirements(table.get("requires", []), f"{here}.requires")
    return Project(
        name=name,
        source=_source(table, here, base_dir),
        command=command.strip(),
        extras=_strings(table.get("extras", []), f"{here}.extras"),
        requires=requires,
        budget_s=_duration(merged.get("budget", DEFAULT_BUDGET_S), f"{here}.budget"),
        torchvision=torchvision,
        skip=skip.strip(),
        memory_gib=float(memory),
        discover=zero_config,
        given=frozenset(k for k in DISCOVERED_KEYS if k in merged) if zero_config else frozenset(),
    )


def _sdist_name(value: Any) -> Any:
    """A zero-config entry's name: its sdist's (``zuko==1.3.1`` -> ``zuko``); None where there is
    no readable one (the name's own error then says what is missing)."""
    if not isinstance(value, str):
        return None
    try:
        return Requirement(value).name
    except InvalidRequirement:
        return None
