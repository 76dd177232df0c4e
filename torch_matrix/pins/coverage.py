"""Coverage: released versions an answer admits (or excludes) that no evidence cell tested."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from .model import Answer, requirement_lines
from .specifiers import _public, specifier_set
from .vocabulary import Observation


@dataclass(frozen=True)
class Coverage:
    """Released versions the suggestion admits that no evidence cell tested."""

    package: str
    known: bool
    tested: tuple[str, ...] = ()
    untested: tuple[str, ...] = ()  # admitted, inside the tested span
    newer: tuple[str, ...] = ()  # admitted, newer than anything tested
    older: tuple[str, ...] = ()  # admitted, older than anything tested
    excluded_untested: tuple[str, ...] = ()  # excluded by a bound or series, never tested

    def to_json(self) -> dict[str, Any]:
        return {
            "known": self.known,
            "tested": list(self.tested),
            "untested": list(self.untested),
            "newer_than_tested": list(self.newer),
            "older_than_tested": list(self.older),
            "excluded_untested": list(self.excluded_untested),
        }


def coverage(
    answer: Answer,
    observations: Sequence[Observation],
    packages: Sequence[str],
    released: Mapping[str, Sequence[str]] | None,
) -> dict[str, Coverage]:
    result: dict[str, Coverage] = {}
    lines = requirement_lines(answer) if answer.expressible else []
    for package in packages:
        tested = sorted({o.value(package) for o in observations if o.value(package) is not None})
        names = {canonicalize_name(k): v for k, v in (released or {}).items()}
        versions = names.get(canonicalize_name(package))
        if versions is None:
            result[package] = Coverage(package, False, tuple(map(str, tested)))
            continue
        specs = [specifier_set(line.specifiers) for line in lines if line.package == package]
        admitted: set[Version] = set()
        excluded: set[Version] = set()
        for raw in versions:
            version = _public(raw)
            if (
                version is None
                or version.is_prerelease
                or version.is_devrelease
                or version in tested
            ):
                continue
            if not specs or any(s.contains(version) for s in specs):
                admitted.add(version)
            else:
                excluded.add(version)
        in_order = [str(v) for v in sorted(admitted)]
        if tested:
            low, high = tested[0], tested[-1]
            untested = tuple(str(v) for v in sorted(admitted) if low < v < high)
            newer = tuple(str(v) for v in sorted(admitted) if v > high)
            older = tuple(str(v) for v in sorted(admitted) if v < low)
        else:
            untested, newer, older = (), tuple(in_order), ()
        result[package] = Coverage(
            package,
            True,
            tuple(map(str, tested)),
            untested=untested,
            newer=newer,
            older=older,
            excluded_untested=tuple(str(v) for v in sorted(excluded)),
        )
    return result
