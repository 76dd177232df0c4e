"""Bisect a break over torch releases or nightlies (pure): which version to test next, and the answer.

The versions are ordered oldest first; the user names a good and a bad one. Each tested
version gets an ``Outcome``: ``good``, ``bad`` or ``skip`` (no evidence: not installable, an
install error, the probe skipped or absent). The endpoints are tested first, so a wrong
premise ("2.3.1 is good") is caught instead of bisected into a false answer; then the
untested version nearest the middle of the (last good, first bad) range. At most
``max_cells(N)`` = ceil(log2 N) + 2 cells are tested for N versions.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from torch_matrix.vocab.records import PASS, SKIP as PROBE_SKIP, CellResult, public_version
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, probe_counts_as_failure, verdict_of

GOOD = "good"
BAD = "bad"
SKIP = "skip"
PYTORCH_COMPARE = "https://github.com/pytorch/pytorch/compare/{old}...{new}"
_NIGHTLY_DATE = re.compile(r"\.dev(\d{8})")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torch's own messages carry terminal bold


@dataclass(frozen=True)
class Outcome:
    kind: str  # GOOD | BAD | SKIP
    evidence: str  # what the cell said, one line


def outcome_of(result: CellResult, probe: str | None = None) -> Outcome:
    """Good or bad by one probe (``probe``) or by the cell's verdict; skip when there is no evidence."""
    verdict = verdict_of(result)
    if not verdict.is_evidence:
        return Outcome(SKIP, f"{verdict.kind}: {verdict.reason}".strip())
    if probe is None:
        if verdict.kind == COMPATIBLE:
            return Outcome(GOOD, "compatible")
        return Outcome(BAD, f"{INCOMPATIBLE}: {verdict.reason}")
    found = result.probe(probe)
    if found is None:
        return Outcome(SKIP, f"{probe}: no result")
    message = " ".join(_ANSI.sub("", found.message).split())
    text = f"{probe}: {found.status}" + (f": {message}" if message else "")
    if found.status == PASS:
        return Outcome(GOOD, text)
    if found.status == PROBE_SKIP:
        return Outcome(SKIP, text)
    if probe_counts_as_failure(found.status, dict(result.cell.policy)):
        return Outcome(BAD, text)
    return Outcome(
        SKIP, text
    )  # unsupported under a policy that lets it pass: no evidence either way


# ---------------------------------------------------------------------------- the versions


def final_releases(versions: Iterable[object]) -> list[str]:
    """The final releases among ``versions`` (no pre-, dev- or local label), oldest first, each once."""
    found = {Version(Version(str(v)).public) for v in versions if public_version(str(v))}
    return [str(v) for v in sorted(found) if not v.is_prerelease and not v.is_devrelease]


def release_candidates(versions: Iterable[str], good: str, bad: str) -> list[str]:
    """Final releases from ``good`` to ``bad`` inclusive, oldest first (local labels dropped)."""
    low, high = Version(good), Version(bad)
    found = {Version(Version(v).public) for v in versions if public_version(v)}
    return [
        str(v)
        for v in sorted(found)
        if low <= v <= high and not v.is_prerelease and not v.is_devrelease
    ]


def nightly_date(version: str) -> dt.date | None:
    match = _NIGHTLY_DATE.search(version)
    if not match:
        return None
    try:
        return dt.datetime.strptime(match.group(1), "%Y%m%d").date()
    except ValueError:
        return None


def parse_day(text: str) -> dt.date | None:
    """``2024-10-01``, ``20241001`` or a nightly version ``2.6.0.dev20241001``; None otherwise."""
    for pattern in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(text, pattern).date()
        except ValueError:
            pass
    return nightly_date(text)


def nightly_candidates(versions: Iterable[str], good: dt.date, bad: dt.date) -> list[str]:
    """One nightly per date from ``good`` to ``bad`` inclusive (the highest version of a date), oldest first."""
    by_date: dict[dt.date, Version] = {}
    for text in versions:
        day = nightly_date(text)
        if day is None or not good <= day <= bad or not public_version(text):
            continue
        version = Version(Version(text).public)
        if day not in by_date or version > by_date[day]:
            by_date[day] = version
    return [str(by_date[day]) for day in sorted(by_date)]


def max_cells(count: int) -> int:
    """The most cells a bisect of ``count`` versions tests: ceil(log2 N) + 2."""
    return math.ceil(math.log2(count)) + 2 if count > 1 else count


# ---------------------------------------------------------------------------- choosing


def _bounds(versions: Sequence[str], outcomes: Mapping[str, str]) -> tuple[int, int] | None:
    bad = [i for i, v in enumerate(versions) if outcomes.get(v) == BAD]
    if not bad:
        return None
    high = bad[0]
    good = [i for i, v in enumerate(versions[:high]) if outcomes.get(v) == GOOD]
    if not good:
        return None
    return good[-1], high


def next_version(versions: Sequence[str], outcomes: Mapping[str, str]) -> str | None:
    """The next version to test, or None when the answer is known (or cannot be had).

    ``outcomes`` maps tested versions to GOOD / BAD / SKIP. The first and last versions
    (the user's good and bad) come first; a wrong endpoint stops the bisect."""
    if not versions:
        return None
    for endpoint, expected in ((versions[0], GOOD), (versions[-1], BAD)):
        if endpoint not in outcomes:
            return endpoint
        if outcomes[endpoint] != expected:
            return None
    bounds = _bounds(versions, outcomes)
    if bounds is None:
        return None
    low, high = bounds
    open_ = [i for i in range(low + 1, high) if versions[i] not in outcomes]
    if not open_:
        return None
    middle = (low + high) / 2
    return versions[min(open_, key=lambda i: (abs(i - middle), i))]


@dataclass(frozen=True)
class Conclusion:
    last_good: str | None
    first_bad: str | None
    exact: bool  # no untested or skipped version lies between them
    between: tuple[str, ...]  # versions between them that were skipped or not tested
    problem: str  # why there is no answer ("" when there is one)
    non_monotone: tuple[str, ...] = ()  # good versions after the first bad one

    def sentence(self) -> str:
        if self.problem:
            return self.problem
        if self.exact:
            return f"last good {self.last_good}, first bad {self.first_bad}"
        return (
            f"last good {self.last_good}, first bad one of {', '.join(self.between)} or {self.first_bad} "
            f"(no evidence for the versions in between)"
        )


def conclude(
    versions: Sequence[str], outcomes: Mapping[str, str], budget_left: bool = True
) -> Conclusion:
    if not versions:
        return Conclusion(None, None, False, (), "no versions to bisect")
    good, bad = versions[0], versions[-1]
    if outcomes.get(good) == SKIP:
        return Conclusion(
            None, None, False, (), f"no evidence at the good end {good} (see its cell)"
        )
    if outcomes.get(good) == BAD:
        return Conclusion(
            None, good, False, (), f"the good end {good} is bad too: the break is older"
        )
    if outcomes.get(bad) == SKIP:
        return Conclusion(None, None, False, (), f"no evidence at the bad end {bad} (see its cell)")
    if outcomes.get(bad) == GOOD:
        return Conclusion(good, None, False, (), f"the bad end {bad} is good: nothing to bisect")
    bounds = _bounds(versions, outcomes)
    if bounds is None:
        return Conclusion(None, None, False, (), "not tested yet")
    low, high = bounds
    between = tuple(versions[low + 1 : high])
    later_good = tuple(v for v in versions[high + 1 :] if outcomes.get(v) == GOOD)
    problem = ""
    if any(v not in outcomes for v in between) and not budget_left:
        problem = (
            f"stopped at the cell limit: the first bad version is one of {', '.join(between)} or "
            f"{versions[high]}; raise --max-cells"
        )
    return Conclusion(versions[low], versions[high], not between, between, problem, later_good)


def compare_url(last_good: str, first_bad: str) -> str:
    """GitHub's view of the upstream changes between two release tags, or two nightly dates."""
    old_day, new_day = nightly_date(last_good), nightly_date(first_bad)
    if old_day and new_day:
        # Nightlies are built from main each day: GitHub's time-based comparison of main.
        return PYTORCH_COMPARE.format(
            old=f"main@{{{old_day.isoformat()}}}", new=f"main@{{{new_day.isoformat()}}}"
        )
    return PYTORCH_COMPARE.format(old=f"v{last_good}", new=f"v{first_bad}")
