"""An ecosystem run's bisection (``ecosystem run --bisect``): for a regressed project, the first
torch between the sides on which its regressed tests fail (each tested release a venv running only
those tests), the pin that follows and its proof; and the estimate's line for it.

The next release to try and the conclusion are the matrix's own (``plan.bisection``); a tested
release's outcome is ``classify.bisect_outcome``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Protocol, Sequence

from packaging.version import Version

from torch_matrix.ecosystem import sides
from torch_matrix.ecosystem.classify import bisect_outcome
from torch_matrix.ecosystem.projects import Project, Side, SideKind
from torch_matrix.plan.bisection import (
    BAD,
    GOOD,
    SKIP,
    compare_url,
    conclude,
    next_version,
    nightly_candidates,
    nightly_date,
    release_candidates,
)
from torch_matrix.spec.model import IndexConfig
from torch_matrix.world.index import PackageIndex


class RunSides(Protocol):
    """What a bisection reads of its run (``runner.EcosystemRun``)."""

    baseline: Side
    candidate: Side
    out: Path
    index: IndexConfig
    python: str


def _torch_versions(index: PackageIndex) -> list[str]:
    return [str(v) for v in index.versions("torch")]


def bisect_versions(run: RunSides, index: PackageIndex) -> tuple[list[str], SideKind]:
    """The torch versions a bisection chooses from, the sides' included, oldest first: the final
    releases between them, or where both sides are nightlies, one nightly a day between them."""
    good, bad = run.baseline.torch, run.candidate.torch
    good_day, bad_day = nightly_date(good), nightly_date(bad)
    if good_day and bad_day:  # two nightlies: every nightly between (one a day), not releases
        between = nightly_candidates(_torch_versions(index), good_day, bad_day)
    else:
        between = release_candidates(_torch_versions(index), good, bad)
    versions = sorted(set(between) | {good, bad}, key=Version)
    return versions, SideKind.NIGHTLY if good_day and bad_day else SideKind.RELEASE


def bisect_estimate(run: RunSides, index: PackageIndex, budget_s: float) -> str:
    """The estimate's line for ``--bisect``: the versions between the sides a regressed project's
    regressed tests may run on (a binary search: at most ceil(log2(n + 1)) of n), each a venv and,
    for a torch not yet in uv's cache, a download the size of a side's."""
    versions, kind = bisect_versions(run, index)
    between = versions[1:-1]
    what = "nightlies" if kind == SideKind.NIGHTLY else "releases"
    if not between:
        return f"estimate: --bisect: no {what} lie between the sides (a regression's first bad is the candidate)"
    steps = math.ceil(math.log2(len(between) + 1))
    shown = ", ".join(between[:6]) + (f", ... ({len(between)} in all)" if len(between) > 6 else "")
    return (
        f"estimate: --bisect: each regressed project runs its regressed tests on at most {steps} "
        f"of the {len(between)} {what} between the sides ({shown}): a venv each, a torch download "
        f"each the size of a side's where uv's cache lacks it, and at most "
        f"{steps * budget_s / 60:.0f} min of tests per regressed project; not in the figures above"
    )


def bisect_project(
    run: RunSides,
    project: Project,
    tree: Path,
    isolation: sides.Isolation,
    tests: Sequence[str],
    index: PackageIndex,
) -> dict[str, object]:
    """The first torch release between the sides on which the regressed tests fail (each tested
    release a venv running only those tests), and the pin that follows, with its proof. Where
    both sides are nightlies, the first bad nightly (one a day, from the candidate's index): a
    release list held none between two nightlies, and the run proved a first bad with no
    evidence for the days between."""
    good, bad = run.baseline.torch, run.candidate.torch
    versions, kind = bisect_versions(run, index)
    outcomes: dict[str, str] = {good: GOOD, bad: BAD}  # the run itself tested the ends
    evidence: dict[str, str] = {good: "passed (the baseline)", bad: "failed (the candidate)"}
    seconds: dict[str, float] = {}  # each release the bisection installed and ran
    work = run.out.resolve() / "work" / project.name / "bisect"
    log_dir = run.out.resolve() / "projects" / project.name
    while (version := next_version(versions, outcomes)) is not None:
        side = Side("candidate", version, kind, "", run.candidate.index, version)
        item = sides.SideWork(
            project=project,
            side=side,
            tree=tree,
            folder=work / version,
            log=log_dir / f"bisect-{version}.log",
            log_name=f"projects/{project.name}/bisect-{version}.log",
            python=run.python,
            index=run.index,
            isolation=isolation,
        )
        began = time.monotonic()
        broken, venv_python = sides.prepare(item)
        if broken is not None:
            outcomes[version], evidence[version] = SKIP, broken.detail
        else:
            result = sides.run_tests(item, venv_python, only=tests, purpose="bisection")
            outcomes[version], evidence[version] = bisect_outcome(result, tests)
        item.cleanup()  # its folder, and its venv in uv's cache under a sandbox
        seconds[version] = round(time.monotonic() - began, 1)  # the install and the tests
    conclusion = conclude(versions, outcomes)
    found: dict[str, object] = {
        "versions": versions,
        "outcomes": outcomes,
        "evidence": evidence,
        "sentence": conclusion.sentence(),
        "last_good": conclusion.last_good,
        "first_bad": conclusion.first_bad,
        "seconds": seconds,
    }
    if conclusion.exact and conclusion.first_bad and not conclusion.non_monotone:
        found["pin"] = f"torch<{conclusion.first_bad}"
        found["proof"] = (
            f"{len(tests)} regressed test(s) pass on torch {conclusion.last_good} and fail on "
            f"{conclusion.first_bad}; no {'nightly' if kind == SideKind.NIGHTLY else 'release'} "
            "lies between them"
        )
    if conclusion.exact and conclusion.last_good and conclusion.first_bad:
        found["changes"] = compare_url(conclusion.last_good, conclusion.first_bad)
    return found
