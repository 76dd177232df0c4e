"""The specifier algebra: minimal specifiers for good/bad versions, intersection, containment.

Shared by the pins and by ``torch_matrix.world.apply`` (which intersects a file's specifiers with the pins).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from torch_matrix.vocab.records import StrEnum, public_version
from typing import Any

from packaging.specifiers import Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version


@lru_cache(maxsize=8192)
def _public(raw: str) -> Version | None:
    """``records.public_version`` as a ``Version``, parsed once per distinct string (a 2,000-cell
    grid repeats a few dozen versions)."""
    public = public_version(raw)
    return Version(public) if public else None


# ----------------------------------------------------------------------------- specifiers


def _prefix_bound(low: Version | None, high: Version, *, strict_low: bool) -> Version:
    """The shortest prefix B of ``high``'s release with low < B <= high (``<2`` over ``<2.0.2``)."""
    release = high.release
    for length in range(1, len(release) + 1):
        candidate = Version(".".join(str(part) for part in release[:length]))
        if candidate > high:
            break
        if low is None or (candidate > low if strict_low else candidate >= low):
            return candidate
    return Version(high.base_version)


def _text(version: Version, python: bool) -> str:
    text = str(version)
    if python:
        return text
    release = list(version.release)
    while len(release) > 2 and release[-1] == 0:
        release.pop()
    return (
        ".".join(str(part) for part in release)
        if Version(".".join(map(str, release))) == version
        else text
    )


class PinPolicy(StrEnum):
    """How far an exclusion may reach beyond the versions that were tested.

    ``proven`` (the default): each break is a window of releases [first bad, last bad] whose
    edges follow-up cells proved (``pins.windows``): the window is excluded whole (``<2.6``,
    ``>=2.4``, ``!=2.0.*``), untested releases inside it included; a window with an edge not
    found falls back to ``!=`` of its tested bad releases. Without the index's releases (offline)
    it is ``admit-untested``: only tested bad versions are excluded (``!=X``); a release nobody
    tested stays admitted and is listed as untested. ``tested-only``: bounds may also exclude
    untested releases beyond a tested bad one (``>=1.12.1``, ``<2``, ``!=1.12.*``) without a
    proof, for a maintainer who admits nothing the matrix has not vouched for.
    """

    PROVEN = "proven"
    ADMIT_UNTESTED = "admit-untested"
    TESTED_ONLY = "tested-only"


def build_specifiers(
    good: Iterable[Version],
    bad: Iterable[Version],
    *,
    python: bool = False,
    policy: PinPolicy = PinPolicy.ADMIT_UNTESTED,
) -> tuple[str, ...]:
    """Readable specifiers that admit every ``good`` version and exclude every ``bad`` one.

    By default (``PinPolicy.ADMIT_UNTESTED``) every bad version is excluded on its own
    (``!=X``; Python versions ``3.12`` as a series, ``!=3.12.*``, as Requires-Python needs),
    so no bound covers a release that was not tested. With ``PinPolicy.TESTED_ONLY`` bad
    versions below every good one become a lower bound, above every good one an upper
    bound (rounded to the shortest prefix, ``<2`` rather than ``<2.0.2``), the rest
    ``!=X`` (``!=X.Y.*`` when every tested version of a series is bad).
    """
    good_set = set(good)
    goods = sorted(good_set)
    bads = sorted(set(bad) - good_set)
    if not bads:
        return ()
    if policy != PinPolicy.TESTED_ONLY:
        if python:
            return tuple(f"!={v}.*" if len(v.release) == 2 else f"!={v}" for v in bads)
        return tuple(f"!={v}" for v in bads)
    lower: list[str] = []
    upper: list[str] = []
    middle = bads
    if goods:
        below = [v for v in bads if v < goods[0]]
        above = [v for v in bads if v > goods[-1]]
        middle = [v for v in bads if goods[0] < v < goods[-1]]
        if below:
            bound = _prefix_bound(below[-1], goods[0], strict_low=True)
            lower.append(">=" + _text(bound, python))
        if above:
            bound = _prefix_bound(goods[-1], above[0], strict_low=True)
            upper.append("<" + _text(bound, python))
    excluded: list[str] = []
    series: dict[tuple[int, ...], list[Version]] = {}
    for version in middle:
        series.setdefault(version.release[:2], []).append(version)
    good_series = {v.release[:2] for v in goods}
    for key in sorted(series):
        members = series[key]
        if python:
            excluded.extend(f"!={v}.*" if len(v.release) == 2 else f"!={v}" for v in members)
        elif len(members) >= 2 and key not in good_series:
            excluded.append("!=" + ".".join(map(str, key)) + ".*")
        else:
            excluded.extend(f"!={v}" for v in members)
    return tuple(lower + excluded + upper)


def _spec_key(spec: Specifier) -> tuple[int, Any, str]:
    order = {">=": 0, ">": 0, "~=": 1, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}
    try:
        version: Any = Version(spec.version.rstrip(".*").rstrip("."))
    except InvalidVersion:
        version = Version("0")
    return (order.get(spec.operator, 1), version, str(spec))


def merge_specifiers(existing: Iterable[str], added: Iterable[str]) -> tuple[str, ...]:
    """Intersect two specifier lists and drop what became redundant (``>=1.7,>=1.8`` -> ``>=1.8``).

    Other operators (``==``, ``~=``, ``===``) are kept as written; ``!=`` outside the bounds go.
    An inclusive bound excluded at its own version is the exclusive one (``>=2.1,!=2.1.0`` ->
    ``>2.1``, ``<=2.0,!=2.0`` -> ``<2.0``), never both printed for one version; the exclusive
    bound also refuses that version's post-releases (``>``) or pre-releases (``<``), the same
    release line's rebuilds of a version the pin excludes.
    """
    specs: list[Specifier] = []
    for text in list(existing) + list(added):
        spec = Specifier(text.strip())
        if all(str(spec) != str(other) for other in specs):
            specs.append(spec)
    lowers = [s for s in specs if s.operator in (">=", ">")]
    uppers = [s for s in specs if s.operator in ("<", "<=")]
    lower = max(lowers, key=lambda s: (Version(s.version), s.operator == ">"), default=None)
    upper = min(uppers, key=lambda s: (Version(s.version), s.operator == "<="), default=None)
    excluded = {
        Version(s.version) for s in specs if s.operator == "!=" and not s.version.endswith(".*")
    }
    if lower is not None and lower.operator == ">=" and Version(lower.version) in excluded:
        lower = Specifier(">" + lower.version)
    if upper is not None and upper.operator == "<=" and Version(upper.version) in excluded:
        upper = Specifier("<" + upper.version)
    kept = [bound for bound in (lower, upper) if bound is not None]
    for spec in specs:
        if spec.operator in (">=", ">", "<", "<="):
            continue
        if spec.operator == "!=" and not spec.version.endswith(".*"):
            version = Version(spec.version)
            if (lower is not None and not lower.contains(version, prereleases=True)) or (
                upper is not None and not upper.contains(version, prereleases=True)
            ):
                continue
        kept.append(spec)
    return tuple(str(s) for s in sorted(kept, key=_spec_key))


def specifier_set(specifiers: Iterable[str]) -> SpecifierSet:
    return _specifier_set(tuple(specifiers))


@lru_cache(maxsize=4096)
def _specifier_set(specifiers: tuple[str, ...]) -> SpecifierSet:
    return SpecifierSet(",".join(specifiers))


@lru_cache(maxsize=65536)
def _contains(specifiers: tuple[str, ...], version: Version) -> bool:
    """``SpecifierSet.contains`` once per distinct (specifiers, version), not once per cell."""
    return _specifier_set(specifiers).contains(version, prereleases=True)
