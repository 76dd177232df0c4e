"""Proving a ``torch.load`` fix where the tests failed (runs in the cell's interpreter; stdlib only).

A command probe's tests that failed on torch.load's ``weights_only`` default (torch >= 2.6) are
grouped by call site (the user's frame that called ``torch.load``), each group with the classes
its errors refused. Each group is then rerun, only its failing tests, with its allow-list applied
(``torch_matrix.probes.safe_globals``): an ``UnpicklingError`` names one refused global at a
time, so a rerun that still fails on a new class adds it and reruns, until the tests pass (the
allow-list is complete and proven) or nothing new is named (not proven). Then every such test is
rerun with the old default (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``). The outcomes go to the
probe's evidence (``fix_proofs``); ``torch_matrix.judge.catalogue`` writes the fix from them.
"""

import os
import re
import time

from torch_matrix.probes import pytest_outcomes, pytest_select, safe_globals

WEIGHTS_ONLY = re.compile(r"Weights only load failed|WeightsUnpickler error")
GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")
OLD_DEFAULT_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
MAX_ROUNDS = 6  # reruns per call site: one more refused class each
_NOT_USER = ("/site-packages/", "/dist-packages/", "<frozen ", "/lib/python")


def _text(record):
    return "%s %s" % (record.get("message") or "", record.get("text") or "")


def _site(record):
    """The user's frame that called ``torch.load`` (else the innermost user frame), or {}."""
    frames = [
        f
        for f in record.get("frames") or ()
        if not any(part in str(f.get("path", "")) for part in _NOT_USER)
    ]
    for frame in reversed(frames):
        if "torch.load(" in str(frame.get("code") or ""):
            return frame
    return frames[-1] if frames else {}


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def load_failures(records):
    """The failing tests whose error is torch.load's weights_only refusal, grouped by call site:
    ``[{"site": "pkg/io.py:11", "code": ..., "tests": [...], "globals": [...]}]``, by site."""
    groups = {}
    for record in records:
        if record.get("outcome") not in ("failed", "error") or record.get("when") == "collect":
            continue
        text = _text(record)
        if not WEIGHTS_ONLY.search(text):
            continue
        site = _site(record)
        key = "%s:%s" % (site.get("path", "?"), site.get("line", 0))
        group = groups.setdefault(
            key, {"site": key, "code": site.get("code", ""), "tests": [], "globals": []}
        )
        group["tests"] = _unique(group["tests"] + [record["nodeid"]])
        group["globals"] = _unique(group["globals"] + GLOBAL.findall(text))
    return [groups[key] for key in sorted(groups)]


def _rerun(command, cwd, tests, extra, base, timeout, env_of, run):
    """Rerun only ``tests`` with ``extra`` in the environment: (node id -> outcome, records)."""
    only, out = base + ".only", base + ".jsonl"
    with open(only, "w") as handle:
        handle.write("\n".join(tests) + "\n")
    if os.path.exists(out):
        os.remove(out)
    env = env_of(out)
    env[pytest_select.ONLY_ENV] = only
    env["PYTEST_ADDOPTS"] += (
        " -p torch_matrix.probes.pytest_select -p torch_matrix.probes.safe_globals"
    )
    env.update(extra)
    run(command, cwd, env, base + ".out", timeout)
    records = pytest_outcomes.read_records(out)
    return pytest_outcomes.per_test(records), records


def _split(tests, outcomes):
    passed = [t for t in tests if outcomes.get(t) == "passed"]
    return passed, [t for t in tests if t not in passed]


def prove(command, cwd, records, base, timeout, env_of, run):
    """The proofs for the weights_only failures among ``records`` (None when there are none):
    ``{"load_fixes": [group + allowed, rounds, passed, failed], "old_default": {...}}``. Bounded
    by ``timeout`` seconds in all (a group left unproven when it runs out says so)."""

    def rerun(tests, extra, label, seconds):
        return _rerun(command, cwd, tests, extra, base + label, seconds, env_of, run)

    return prove_by(records, rerun, timeout)


def prove_by(records, rerun, timeout):
    """``prove`` with the rerun given: ``rerun(tests, extra_env, label, seconds)`` runs only
    ``tests`` with ``extra_env`` and returns (node id -> outcome, the rerun's failure records). The
    ecosystem run reruns a project's tests in its side's sandbox this way
    (``torch_matrix.ecosystem.fixproofs``)."""
    groups = load_failures(records)
    if not groups:
        return None
    deadline = time.time() + timeout
    for index, group in enumerate(groups):
        allowed = list(group["globals"])
        rounds, passed, failed = 0, [], list(group["tests"])
        while rounds < MAX_ROUNDS and time.time() < deadline:
            rounds += 1
            outcomes, found = rerun(
                group["tests"],
                {safe_globals.GLOBALS_ENV: ",".join(allowed)},
                "-fix%d-%d" % (index, rounds),
                max(1.0, deadline - time.time()),
            )
            passed, failed = _split(group["tests"], outcomes)
            if not failed:
                break
            new = [
                name
                for record in found
                if record.get("nodeid") in failed
                for name in GLOBAL.findall(_text(record))
                if name not in allowed
            ]
            if not new:
                break
            allowed = _unique(allowed + new)
        group.update(allowed=allowed, rounds=rounds, passed=passed, failed=failed)
    every = _unique([t for group in groups for t in group["tests"]])
    old = {"env": "%s=1" % OLD_DEFAULT_ENV, "tests": every, "passed": [], "failed": every}
    if time.time() < deadline:
        outcomes, _found = rerun(
            every, {OLD_DEFAULT_ENV: "1"}, "-old-default", max(1.0, deadline - time.time())
        )
        old["passed"], old["failed"] = _split(every, outcomes)
        old["ran"] = True
    return {"load_fixes": groups, "old_default": old}
