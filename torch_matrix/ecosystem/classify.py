"""One project's class in an ecosystem run: its baseline side against its candidate side, test by
test, and the retry of the regressed tests. Pure: a function of ``SideRun`` records.

The rule, crater's with pytest's granularity:

- a skip reason in the projects file: ``skipped``;
- ``new`` = tests that fail on the candidate and passed on the baseline (a candidate whose tests
  did not run at all, where the baseline's did, counts as all of them); ``gone`` = the reverse;
- ``new`` non-empty: ``regressed``; else ``gone`` non-empty: ``fixed`` (tests that failed with
  the baseline pass with the candidate, none the other way); else both pass: ``same-pass``; else
  ``same-fail``;
- ``spurious`` instead, when a side timed out with nothing changed in the tests it reached (a
  test that passed on the baseline and failed on the candidate before the budget ran out still
  makes it ``regressed``), or every failure that decided the class matches
  a spurious pattern (network, out of memory, full disk, a harness fault such as a bare
  ``python`` or missing test data): the class says nothing about torch, the evidence says why;
- ``flaky`` instead of ``regressed``, when a retry of the regressed tests (only those, on both
  sides; up to ``RETRIES`` times) flips every one of them: each passes on a candidate's retry, or
  fails on a baseline's. Where only some flip, the rest stay ``regressed`` (the flipped ones named).
  The same for ``fixed``, sides swapped: a fixed test that passes on a baseline's retry, or fails
  on a candidate's, flipped (tntorch 1.1.2's unseeded ``test_cp_tensor`` failed once on 2.5.1 and
  read as fixed; it passed on 2.5.1 five times of five by hand).

Swapping the sides swaps ``regressed`` and ``fixed`` (a tested property), except where tests
both broke and got fixed (``regressed`` wins: a human must look).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from torch_matrix.ecosystem.testneeds import KNOWN_IMPORTS, name_of
from torch_matrix.ecosystem.records import (
    EcoClass,
    SideRun,
    SideStatus,
    SpuriousKind,
    not_installed,
)

# The whole command, when the command is not pytest (no per-test outcomes).
WHOLE = "(the test command)"

# Each spurious kind and the text that proves it (in a failure message or the log's tail).
SPURIOUS_PATTERNS: tuple[tuple[SpuriousKind, re.Pattern[str]], ...] = (
    (
        SpuriousKind.DISK,
        re.compile(r"No space left on device|ENOSPC|Disk quota exceeded"),
    ),
    (
        SpuriousKind.OOM,
        re.compile(
            r"\bMemoryError\b|std::bad_alloc|DefaultCPUAllocator: (?:can't|not enough memory)"
            r"|Cannot allocate memory|[Oo]ut of memory|OutOfMemoryError"
            # a limit too small to start the interpreter or the shell at all
            r"|failed to map segment from shared object|xmalloc: cannot allocate"
        ),
    ),
    (
        SpuriousKind.NETWORK,
        re.compile(
            r"Temporary failure in name resolution|Name or service not known|Network is unreachable"
            r"|Connection refused|ConnectionError|URLError|getaddrinfo failed|nodename nor servname"
            r"|Failed to establish a new connection|HTTPSConnectionPool|MaxRetryError"
            r"|We couldn't connect to|LocalEntryNotFoundError|OfflineModeIsEnabled"
        ),
    ),
    (
        SpuriousKind.HARNESS,
        re.compile(
            r"No such file or directory: '(?:python|python3|pip)'|(?:^|\s)python3?: (?:command )?not found"
            r"|fixture '[^']+' not found|No such file or directory: '[^']*(?:data|fixtures?|assets)/"
            r"|FileNotFoundError: [^\n]*(?:data|fixtures?|assets)/"
            # the test command itself is wrong: a path the source lacks, an option of a plugin
            # the projects file does not install (setup.cfg's addopts = --cov=...)
            r"|pytest usage error|ERROR: file or directory not found|error: unrecognized arguments"
            # a configuration file today's pytest refuses (sparse_autoencoder 1.10.0's pyproject has
            # both [tool.pytest] and [tool.pytest.ini_options]: pytest 9 stops, exit 4)
            r"|(?:^|\n)ERROR: \S*(?:pyproject\.toml|setup\.cfg|tox\.ini|pytest\.ini): "
        ),
    ),
)
# Broken the same way on both sides for want of a module torch does not provide: the projects
# file's requires lack a test dependency (a harness fault, never a finding about torch).
_MISSING_TEST_DEPENDENCY = re.compile(
    r"No module named '(?!torch\b|torchvision\b|conftest'|tests?\.)[A-Za-z0-9_.]+'"
)
# ... or a module of the project's own test tree that its source (an sdist) does not ship.
_MISSING_TEST_FILE = re.compile(r"No module named '(?:conftest|tests?(?:\.[A-Za-z0-9_]+)+)'")
# A harness gap seen on both sides: (pattern, what is missing, the fix), tried in this order.
_HARNESS_GAPS = (
    (
        _MISSING_TEST_FILE,
        "the project's source lacks a test module its tests import",
        "choose tests that do not import it",
    ),
    (_MISSING_TEST_DEPENDENCY, "a test dependency is missing", "add it to the project's requires"),
)
# pytest's exit status when the command selected no test: no evidence on that side.
_NO_TESTS_COLLECTED = 5
# A side killed by the kernel's OOM killer or our RLIMIT_AS: SIGKILL (-9, 137) with no other word.
_KILLED_CODES = (-9, 137)


def _provider_fix(missing: str, fix: str) -> str:
    """A missing module another distribution provides names that one: ``pkg_resources`` comes
    from ``setuptools<82``, which no plain "add it" says (no index has a pkg_resources)."""
    module = missing.split("'")[1].split(".")[0]
    provider = KNOWN_IMPORTS.get(module, module)
    if name_of(provider) == module.lower():
        return fix
    return f"add {provider} to the project's requires ({module} comes from it)"


def spurious_kind(text: str) -> SpuriousKind | None:
    for kind, pattern in SPURIOUS_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def _evidence_line(text: str, kind: SpuriousKind) -> str:
    pattern = dict(SPURIOUS_PATTERNS)[kind]
    for line in text.splitlines():
        if pattern.search(line):
            return " ".join(line.split())[:300]
    return " ".join(text.split())[:300]


@dataclass(frozen=True)
class Classified:
    """A project's class and the evidence for it (the report shows ``evidence`` verbatim)."""

    project: str
    eco_class: EcoClass
    evidence: str
    new_failures: tuple[str, ...] = ()  # regressed tests (sorted)
    fixed_tests: tuple[str, ...] = ()
    spurious: SpuriousKind | None = None
    flipped: tuple[str, ...] = ()  # flaky: the tests whose retry flipped
    messages: dict[str, str] = field(default_factory=dict)  # new failure -> candidate message

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "class": str(self.eco_class),
            "evidence": self.evidence,
            "new_failures": list(self.new_failures),
            "fixed_tests": list(self.fixed_tests),
            "spurious": str(self.spurious) if self.spurious else None,
            "flipped": list(self.flipped),
            "messages": dict(sorted(self.messages.items())),
        }


def _ran(side: SideRun) -> bool:
    """Its tests ran (a side stopped at its budget ran those it reached)."""
    return side.status in (SideStatus.PASSED, SideStatus.FAILED, SideStatus.TIMEOUT)


def _outcomes(side: SideRun) -> dict[str, str]:
    """Per-test outcomes; a non-pytest command is one test, ``WHOLE``."""
    if side.tests:
        return dict(side.tests)
    if side.status == SideStatus.PASSED:
        return {WHOLE: "passed"}
    if side.status == SideStatus.FAILED:
        return {WHOLE: "failed"}
    return {}


def newly_failing(before: SideRun, after: SideRun) -> set[str]:
    """Tests that pass on ``before`` and fail (or did not run at all) on ``after``."""
    was = _outcomes(before)
    now = _outcomes(after)
    passed = {t for t, o in was.items() if o in ("passed", "xpassed")}
    if not _ran(after):
        return passed or ({WHOLE} if _ran(before) else set())
    failed = {t for t, o in now.items() if o in ("failed", "error")}
    return passed & failed


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torch's own messages carry terminal bold


def _message(side: SideRun, test: str) -> str:
    if test == WHOLE or test not in side.messages:
        text = side.detail or side.summary or side.output_tail[-300:]
    else:
        text = side.messages[test]
    return _ANSI.sub("", text)


def _failure_texts(side: SideRun, tests: set[str]) -> list[str]:
    if not _ran(side):
        return [f"{side.detail}\n{side.output_tail}"]
    return [_message(side, t) for t in sorted(tests)] or [side.output_tail]


def _spurious(
    side: SideRun, texts: list[str], timeout: bool = True
) -> tuple[SpuriousKind, str] | None:
    if timeout and side.status == SideStatus.TIMEOUT:
        return SpuriousKind.TIMEOUT, f"{side.role}: {side.detail or 'past its time budget'}"
    if side.exit_code in _KILLED_CODES and not side.tests:
        return SpuriousKind.OOM, f"{side.role}: killed (exit {side.exit_code}), {side.memory_limit}"
    kinds = [spurious_kind(text) for text in texts]
    if texts and all(kinds):
        kind = kinds[0]
        assert kind is not None
        return kind, f"{side.role}: {_evidence_line(texts[0], kind)}"
    return None


def classify(
    baseline: SideRun,
    candidate: SideRun,
    *,
    skip_reason: str = "",
    retry_baseline: Retries = None,
    retry_candidate: Retries = None,
) -> Classified:
    """The class of one project (module docstring)."""
    project = candidate.project or baseline.project
    if (
        skip_reason
        or baseline.status == SideStatus.SKIPPED
        or candidate.status == SideStatus.SKIPPED
    ):
        reason = skip_reason or candidate.detail or baseline.detail or "skipped"
        return Classified(project, EcoClass.SKIPPED, reason)
    unmade = [side for side in (candidate, baseline) if not_installed(side)]
    if unmade:  # never evidence: a side that was not installed says nothing about torch
        said = "; ".join(f"{side.role}: {side.detail}" for side in unmade)
        return Classified(project, EcoClass.SPURIOUS, said[:600], spurious=SpuriousKind.INSTALL)
    timed_out = [side for side in (baseline, candidate) if side.status == SideStatus.TIMEOUT]
    budget = " (in the tests that ran before the budget ran out)" if timed_out else ""
    new = newly_failing(baseline, candidate)
    gone = newly_failing(candidate, baseline)
    if new:
        flipped = _flips(new, retry_baseline, retry_candidate)
        return _new_failures(project, candidate, new, gone, budget, flipped)
    if gone:
        found = _spurious(baseline, _failure_texts(baseline, gone), timeout=False)
        if found:
            return Classified(project, EcoClass.SPURIOUS, found[1], spurious=found[0])
        # a fixed test flips when it passes on a baseline's retry or fails on a candidate's
        flipped = _flips(gone, retry_candidate, retry_baseline)
        steady = gone - set(flipped)
        if not steady:
            return Classified(
                project,
                EcoClass.FLAKY,
                f"{len(flipped)} of {len(gone)} fixed test(s) flipped on retry: "
                + ", ".join(flipped[:3]),
                fixed_tests=tuple(sorted(gone)),
                flipped=tuple(flipped),
            )
        also = f" ({len(flipped)} more flipped on retry: flaky)" if flipped else ""
        first = sorted(steady)[0]
        return Classified(
            project,
            EcoClass.FIXED,
            f"{len(steady)} test(s) fail only with torch {baseline.torch}{budget}{also}: "
            f"{first} -- {_message(baseline, first)}"[:600],
            fixed_tests=tuple(sorted(steady)),
            flipped=tuple(flipped),
        )
    if timed_out:  # nothing changed in what ran: the budget, not torch, ended it
        found = _spurious(timed_out[0], [])
        assert found is not None
        return Classified(project, EcoClass.SPURIOUS, found[1], spurious=found[0])
    return _unchanged(project, baseline, candidate)


def _new_failures(
    project: str,
    candidate: SideRun,
    new: set[str],
    gone: set[str],
    budget: str,
    flipped: list[str],
) -> Classified:
    """Tests that fail only on the candidate side: spurious (the machine, not torch), flaky (each
    flipped on retry) or regressed."""
    messages = {t: _message(candidate, t) for t in sorted(new)}
    found = _spurious(candidate, _failure_texts(candidate, new), timeout=False)
    if found:
        return Classified(project, EcoClass.SPURIOUS, found[1], spurious=found[0])
    steady = new - set(flipped)
    if flipped and not steady:
        return Classified(
            project,
            EcoClass.FLAKY,
            f"{len(flipped)} of {len(new)} regressed test(s) flipped on retry: "
            + ", ".join(flipped[:3]),
            new_failures=tuple(sorted(new)),
            fixed_tests=tuple(sorted(gone)),
            flipped=tuple(flipped),
            messages=messages,
        )
    # Tests that failed on every retry stay regressed beside one that flipped: a flaky test
    # must not hide a project's real regressions (zuko 2.5.1 -> 2.6.0: 6 weights_only
    # failures and one unseeded test that flipped read as "flaky").
    also = f" ({len(flipped)} more flipped on retry: flaky)" if flipped else ""
    first = sorted(steady)[0]
    return Classified(
        project,
        EcoClass.REGRESSED,
        f"{len(steady)} test(s) fail only with torch {candidate.torch}{budget}{also}: "
        f"{first} -- {messages[first]}"[:600],
        new_failures=tuple(sorted(steady)),
        fixed_tests=tuple(sorted(gone)),
        flipped=tuple(flipped),
        messages={t: messages[t] for t in sorted(steady)},
    )


def _unchanged(project: str, baseline: SideRun, candidate: SideRun) -> Classified:
    """No test changed between the sides: both pass, or both fail for the same reason (the
    machine's or the project's harness: spurious), or both fail."""
    candidate_passes = candidate.status == SideStatus.PASSED
    if baseline.status == SideStatus.PASSED and candidate_passes:
        return Classified(
            project, EcoClass.SAME_PASS, f"{candidate.summary or 'passed'} on both sides"
        )
    if all(s.exit_code == _NO_TESTS_COLLECTED and not s.tests for s in (baseline, candidate)):
        return Classified(
            project,
            EcoClass.SPURIOUS,
            "both sides: pytest collected no tests (the harness, not torch: choose a command "
            "that selects the project's tests)",
            spurious=SpuriousKind.HARNESS,
        )
    texts = _failure_texts(baseline, baseline.failing()) + _failure_texts(
        candidate, candidate.failing()
    )
    for side in (candidate, baseline):
        found = _spurious(side, texts)
        if found:
            return Classified(project, EcoClass.SPURIOUS, found[1], spurious=found[0])
    broken = _collection_errors(baseline, candidate)
    shown = f"; {broken}" if broken else ""  # the collection error itself, as the evidence
    for pattern, what, fix in _HARNESS_GAPS:
        found_all = [pattern.search(text) for text in texts]
        if texts and all(found_all):
            first = found_all[0]
            assert first is not None  # all() above
            if pattern is _MISSING_TEST_DEPENDENCY:
                fix = _provider_fix(first.group(0), fix)
            return Classified(
                project,
                EcoClass.SPURIOUS,
                f"both sides: {what} ({first.group(0)}): {fix}{shown}"[:600],
                spurious=SpuriousKind.HARNESS,
            )
    if broken:
        return Classified(
            project,
            EcoClass.SPURIOUS,
            f"both sides: {broken} (the harness, not torch: choose tests that collect)",
            spurious=SpuriousKind.HARNESS,
        )
    worst = candidate if not candidate_passes else baseline
    return Classified(
        project,
        EcoClass.SAME_FAIL,
        f"fails on both sides: {worst.summary or worst.detail or 'exit %s' % worst.exit_code}"[
            :600
        ],
    )


Retries = SideRun | Sequence[SideRun] | None


def _collection_errors(baseline: SideRun, candidate: SideRun) -> str:
    """The first collection error, where neither side ran a test for it (a test module importing
    a helper the source does not ship): the error itself, as the evidence; "" otherwise. Either
    both sides stopped at collection (pytest exit 2: their ``detail`` says so) or both failed
    only to collect the same modules, no test passing."""
    sides = (baseline, candidate)
    if all(
        s.status == SideStatus.BROKEN and s.detail.startswith("collection error") for s in sides
    ):
        return " ".join(candidate.detail.split())[:400]
    failing = [side.failing() for side in sides]
    if not failing[0] or failing[0] != failing[1] or any(side.passing() for side in sides):
        return ""
    if any("::" in node or not node.endswith((".py", "/")) for node in failing[0]):
        return ""  # a test's own failure, not a module that did not collect
    first = sorted(failing[0])[0]
    said = " ".join(_message(candidate, first).split())
    return f"collection error in {first}: {said}"[:400]


def _runs(retries: Retries) -> list[SideRun]:
    if retries is None:
        return []
    return [retries] if isinstance(retries, SideRun) else list(retries)


def _flips(new: set[str], retry_baseline: Retries, retry_candidate: Retries) -> list[str]:
    """The regressed tests whose retries say otherwise: passed on any of the candidate's retries,
    or failed on any of the baseline's (the fixed tests: the sides given swapped). No retry:
    nothing flipped. A retry that could not run proves nothing either way."""
    flipped: set[str] = set()
    for again in _runs(retry_candidate):
        if _ran(again):
            outcomes = _outcomes(again)
            flipped |= {t for t in new if outcomes.get(t) in ("passed", "xpassed")}
    for again in _runs(retry_baseline):
        if _ran(again):
            outcomes = _outcomes(again)
            flipped |= {t for t in new if outcomes.get(t) in ("failed", "error")}
    return sorted(flipped)


def to_retry(classified: Classified) -> tuple[str, ...]:
    """What the runner reruns: only a regressed project's regressed tests, or a fixed project's
    fixed tests."""
    if classified.eco_class == EcoClass.REGRESSED:
        return classified.new_failures
    if classified.eco_class == EcoClass.FIXED:
        return classified.fixed_tests
    return ()


def bisect_outcome(result: SideRun, tests: Sequence[str]) -> tuple[str, str]:
    """One release's run of a regressed project's regressed tests, in a bisection: ``"bad"`` when
    one of them failed, ``"good"`` only when every one of them passed, else ``"skip"`` (no
    evidence either way: the tests did not run, were skipped, or the module holding them failed to
    import), each with the line that says why. Calling a release good because none of the tests
    *failed* put a release whose tests never ran on the good side, and with it a wrong pin."""
    wanted = set(tests)
    if result.status not in (SideStatus.PASSED, SideStatus.FAILED):
        return "skip", result.detail or str(result.status)
    outcomes = _outcomes(result)  # a command that is not pytest: one test, WHOLE, its exit code
    summary = result.summary or f"the test command {result.status}"
    if {t for t, o in outcomes.items() if o in ("failed", "error")} & wanted:
        return "bad", summary
    missing = sorted(wanted - {t for t, o in outcomes.items() if o in ("passed", "xpassed")})
    if missing:
        seen = ", ".join(f"{t}: {outcomes.get(t, 'not run')}" for t in missing[:3])
        more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
        return (
            "skip",
            f"{len(missing)} regressed test(s) did not pass or fail ({seen}{more}); {summary}",
        )
    return "good", summary
