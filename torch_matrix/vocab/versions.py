"""One version ordering, on ``packaging.version`` (PEP 440): every table, pin, advice and list that
orders versions orders them here, so a pre-release sorts before its release everywhere
(``2.0.0rc1 < 2.0.0``) and ``1.10`` after ``1.9``.

A text that is no PEP 440 version (a variant name, ``"current"``) sorts after every version, by
its text, instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from packaging.version import InvalidVersion, Version

_ZERO = Version("0")


@lru_cache(maxsize=8192)  # a report orders a few dozen distinct texts, thousands of times
def parse_version(text: str) -> Version | None:
    """``text`` as a PEP 440 version; None when it is none."""
    try:
        return Version(text)
    except InvalidVersion:
        return None


def version_key(value: str | Version | None) -> tuple[int, Version, str]:
    """The sort key: versions first, in PEP 440 order (ties by text), then other texts by text."""
    if isinstance(value, Version):
        return (0, value, str(value))
    text = "" if value is None else str(value)
    parsed = parse_version(text)
    return (0, parsed, text) if parsed is not None else (1, _ZERO, text)


def newest(texts: Iterable[str]) -> str | None:
    """The newest of ``texts`` by ``version_key``; None when there are none."""
    return max(texts, key=version_key, default=None)
