"""Figure 13: an ecosystem run at scale (issue 44): its cost per project against a plain venv +
pytest, the wall time of 1,000 projects on 16 and 256 runners, and its forecast against the
real wall time.

(a) Overhead. A few small real projects (zero-config sdists, torch 2.5.1 against 2.6.0, warm uv
    cache): ``torch-matrix ecosystem run`` (each side in its sandbox, both sides at once, as
    shipped) against the floor a user would script: per project the sdist from PyPI's JSON API,
    unpacked, then per side ``uv venv`` + ``uv pip install torch==X <the project with the extras
    and requirements the tool discovered>`` + the same test command in the tree, the two sides at
    once too. Runs alternate (ours first, then the floor first, ...). Per project: the tool's own
    ``[i/n] name: class (N s)`` line against the floor's time for that project; the run's fixed
    cost (start, index lookups, the estimate) = its wall time less its ``ecosystem: ... in N s``.
(b) Projection. 1,000 projects whose times cycle through the measured per-project times (the
    bench's own, and a real run's recorded project wall times with ``--ecosystem-results DIR``),
    in a shuffled order (seed 0: a list's order is not its projects' times), assigned to N runners by the tool's own shard rule (``ecosystem.plan.shard_projects``: round
    robin over the list); each runner pays the fixed cost once, then its projects one after the
    other; the run's wall time is its slowest runner's. Downloading torch onto a fresh runner
    (about 6 GB for both sides with a cold uv cache) is not in it: measured here with a warm cache.
(c) Forecast. From the second repeat on, each ``ecosystem run`` is given the previous repeat's
    directory (``--durations-from``): its forecast (run.json's ``estimate.forecast_seconds``)
    against the real wall time of that invocation; the target is the larger of forecast/real and
    real/forecast. With ``--ecosystem-results DIR`` whose run.json holds a forecast, the same for
    that run (its projects' wall times added up, as the forecast counts them).

Real torch wheels: run it through a real-wheel slot on a shared machine.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from .common import BenchError, Context, remove_tree, run_command
from .stats import paired_ratios, ratio, summarize, targets_for

FIGURE = "13_ecosystem"
GOALS = {
    "per project: ecosystem run / plain venv + pytest": ("<=", 1.2, "x"),
    "forecast vs real wall time, the larger way": ("<=", 2.0, "x"),
}
PROJECTS = ("pytorch-warmup==0.2.0", "torch-ppr==0.0.8")
SIDES = ("2.5.1", "2.6.0")
PROJECTED = 1000
RUNNERS = (16, 256)
PROJECT_LINE = re.compile(r"^\[\d+/\d+\] (\S+): (\S+).*\((\d+) s\)$", re.M)
RUN_LINE = re.compile(r"^ecosystem: \d+ project\(s\) in (\d+) s$", re.M)


# ---- pure: the projection and the ratios (tests/test_benchmarks.py) ----


def cycled(times: Sequence[float], count: int, seed: int | None = 0) -> list[float]:
    """``count`` project times: the measured ones repeated, then put in an order of their own
    (shuffled with ``seed``; None keeps the cycle): a real list's order says nothing about a
    project's time, where a plain cycle lined up with the round robin would put the same
    projects on the same runners."""
    if not times:
        raise ValueError("no measured project times to project from")
    listed = [float(times[i % len(times)]) for i in range(count)]
    if seed is not None:
        random.Random(seed).shuffle(listed)
    return listed


def runner_loads(times: Sequence[float], runners: int, setup_s: float = 0.0) -> list[float]:
    """Each runner's wall time: its fixed cost, then its projects one after the other, the
    projects assigned by the tool's own shard rule (runner K of N takes projects K, K+N, ...). A
    runner with no project costs nothing."""
    from torch_matrix.ecosystem.plan import shard_projects
    from torch_matrix.ecosystem.projects import Project, Source, SourceKind

    listed = [
        Project(name=str(i), source=Source(SourceKind.SDIST, f"p{i}==1")) for i in range(len(times))
    ]
    loads = []
    for k in range(1, runners + 1):
        mine = shard_projects(listed, k, runners)
        if mine:
            loads.append(setup_s + sum(times[int(p.name)] for p in mine))
    return loads


def projected_wall(
    times: Sequence[float], count: int, runners: int, setup_s: float = 0.0, seed: int | None = 0
) -> dict[str, float]:
    """``count`` projects (``cycled`` from ``times``) on ``runners``: the run's wall time (its
    slowest runner), the mean runner, and the ideal (all work spread evenly)."""
    projects = cycled(times, count, seed)
    loads = runner_loads(projects, runners, setup_s)
    return {
        "wall_s": max(loads),
        "mean_runner_s": sum(loads) / len(loads),
        "ideal_s": setup_s + sum(projects) / runners,
        "runners_used": float(len(loads)),
        "serial_s": setup_s + sum(projects),
    }


def fixed_cost(invocation_s: float, projects_s: float) -> float:
    """What an invocation costs besides its projects (never below 0: the tool's rounding)."""
    return max(0.0, invocation_s - projects_s)


def forecast_error(forecast_s: float | None, real_s: float | None) -> float | None:
    """How far a forecast is from the real time, as a factor >= 1 either way (2 = half or
    double); None where either is missing or not positive."""
    if forecast_s is None or real_s is None or forecast_s <= 0 or real_s <= 0:
        return None
    return max(forecast_s / real_s, real_s / forecast_s)


def parse_run_output(text: str) -> tuple[dict[str, float], float | None]:
    """The tool's own lines: each project's seconds (``[i/n] name: class (N s)``) and the run's
    (``ecosystem: n project(s) in N s``; None where it did not finish)."""
    projects = {m.group(1): float(m.group(3)) for m in PROJECT_LINE.finditer(text)}
    run = RUN_LINE.search(text)
    return projects, float(run.group(1)) if run else None


# ---- I/O: the runs ----


def _projects_file(path: Path, sdists: Sequence[str]) -> Path:
    body = '[defaults]\nbudget = "6m"\n' + "".join(
        f'\n[[project]]\nsdist = "{sdist}"\n' for sdist in sdists
    )
    path.write_text(body, encoding="utf-8")
    return path


def _ours(listing: Path, out: Path, previous: Path | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "torch_matrix", "ecosystem", "run", str(listing)]
    command += ["--baseline", SIDES[0], "--candidate", SIDES[1], "--out", str(out)]
    if previous is not None:
        command += ["--durations-from", str(previous)]
    started = time.perf_counter()
    done = run_command(command, check=False, timeout=1800)
    wall = time.perf_counter() - started
    projects, inside = parse_run_output(done.stdout)
    if done.returncode != 0 or inside is None:
        raise BenchError(f"ecosystem run exited {done.returncode}: {done.stdout[-1500:]}")
    estimate = json.loads((out / "run.json").read_text(encoding="utf-8")).get("estimate", {})
    classes = dict(re.findall(r"^\[\d+/\d+\] (\S+): (\S+) \(", done.stdout, re.M))
    return {
        "wall_s": wall,
        "projects_s": projects,
        "classes": classes,
        "inside_s": inside,
        "fixed_s": fixed_cost(wall, inside),
        "forecast_s": estimate.get("forecast_seconds"),
    }


def _sdist_tree(requirement: str, dest: Path) -> Path:
    """The sdist from PyPI's JSON API, unpacked (what a user does by hand)."""
    from torch_matrix.ecosystem.source import unpack

    name, version = requirement.split("==")
    with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as got:
        files = json.load(got)["releases"][version]
    item = next(f for f in files if f["packagetype"] == "sdist")
    archive = dest / item["filename"]
    with urllib.request.urlopen(item["url"], timeout=120) as got:
        archive.write_bytes(got.read())
    return unpack(archive, dest / "tree")


def _plain_side(tree: Path, venv: Path, torch: str, found: Mapping[str, Any]) -> None:
    run_command(["uv", "venv", "-q", "--python", sys.executable, str(venv)])
    extras = ",".join(found.get("extras") or [])
    project = f"{found['name']}[{extras}] @ {tree.as_uri()}" if extras else str(tree)
    wanted = [f"torch=={torch}", project, *(found.get("requires") or [])]
    run_command(["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *wanted])
    path = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    # the test command's exit is the project's result, not the floor's: any exit is timed; the
    # threads and writes the tool's sides have (sides.py), so both do the same work
    same = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    run_command(
        ["bash", "-c", found["command"]],
        env={"PATH": path, "VIRTUAL_ENV": str(venv), "PYTHONDONTWRITEBYTECODE": "1", **same},
        cwd=tree,
        check=False,
        timeout=900,
    )


def _plain(requirement: str, found: Mapping[str, Any], work: Path) -> float:
    """One project the plain way, both sides at once; its wall seconds."""
    started = time.perf_counter()
    remove_tree(work)
    work.mkdir(parents=True)
    errors: list[BaseException] = []
    tree = _sdist_tree(requirement, work)

    def side(torch: str) -> None:
        try:
            box = work / torch
            box.mkdir()
            copy = box / "tree"  # each side its own tree, as the tool's (a build writes into it)
            shutil.copytree(tree, copy, symlinks=True)
            _plain_side(copy, box / "venv", torch, found)
        except BaseException as error:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=side, args=(torch,)) for torch in SIDES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    remove_tree(work)
    if errors:
        raise BenchError(f"plain venv + pytest of {requirement}: {errors[0]}")
    return elapsed


def _discovered(out: Path, name: str) -> dict[str, Any]:
    path = out / "projects" / name / "discovery.json"
    if not path.exists():
        raise BenchError(f"the ecosystem run wrote no {path.name} for {name}")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def forecast_of_finished(
    listed: Sequence[Mapping[str, Any]],
    finished: Mapping[str, float],
    recorded: Mapping[str, float],
) -> tuple[float | None, int]:
    """The tool's own forecast (``ecosystem.plan.forecast_seconds``) for the projects of a run
    (run.json's ``projects``) that finished (``finished``: name -> its wall time), from durations
    recorded elsewhere; (seconds or None, how many had their own record)."""
    from torch_matrix.ecosystem.plan import forecast_seconds
    from torch_matrix.ecosystem.projects import Project, Source, SourceKind

    projects = [
        Project(
            name=str(p["name"]),
            source=Source(SourceKind(p["source"]["kind"]), str(p["source"]["location"])),
            budget_s=float(p["budget_s"]),
        )
        for p in listed
        if p.get("name") in finished and not p.get("skip")
    ]
    return forecast_seconds(projects, recorded)


def results_times(directory: Path, durations_from: Path | None = None) -> dict[str, Any]:
    """A real run's directory: each project's recorded wall time, the projects' sum, the span
    from the first start to the last end, and the forecast of the finished projects: from
    ``durations_from`` (an earlier run, as a user gives ``--durations-from``) where given, else
    the one its run.json holds where every listed project finished (a resumed run's last
    invocation forecasts from the run's own records too: said in the result)."""
    from torch_matrix.ecosystem.plan import recorded_durations
    from torch_matrix.ecosystem.results import load

    loaded = load([directory])
    times = recorded_durations(loaded.sides)
    starts = [r.started for runs in loaded.sides.values() for r in runs.values() if r.started]
    ends = [r.ended for runs in loaded.sides.values() for r in runs.values() if r.ended]
    meta = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    listed = [p for p in meta.get("projects", []) if not p.get("skip")]
    estimate = meta.get("estimate") or {}
    if durations_from is not None:
        recorded = recorded_durations(load([durations_from]).sides)
        forecast, known = forecast_of_finished(listed, times, recorded)
        source = f"the tool's forecast from {durations_from}'s recorded durations"
    elif estimate.get("forecast_seconds") is not None and estimate.get("projects") == len(times):
        forecast, known = estimate["forecast_seconds"], estimate.get("forecast_known", 0)
        source = "its run.json's forecast (its last invocation's: it reads the run's own records)"
    else:
        forecast, known = None, 0
        source = (
            f"none: its run.json's forecast is of {estimate.get('projects')} projects (its last "
            f"invocation's), {len(times)} finished"
            if estimate.get("forecast_seconds") is not None
            else "none: its run.json holds no forecast"
        )
    return {
        "directory": str(directory),
        "projects": len(times),
        "listed": len(listed),
        "times_s": times,
        "sum_s": sum(times.values()),
        "span_s": (max(ends) - min(starts)) if starts and ends else None,
        "forecast_s": forecast,
        "forecast_known": known,
        "forecast_source": source,
    }


def _projections(times: Sequence[float], setup_s: float) -> dict[str, dict[str, float]]:
    return {f"{n} runners": projected_wall(times, PROJECTED, n, setup_s) for n in RUNNERS}


def _log_projections(ctx: Context, label: str, shown: Mapping[str, Mapping[str, float]]) -> None:
    for runners, figures in shown.items():
        ctx.log(
            f"  {PROJECTED} projects on {runners} ({label}): {figures['wall_s'] / 60:.1f} min "
            f"(slowest runner; mean {figures['mean_runner_s'] / 60:.1f}, ideal "
            f"{figures['ideal_s'] / 60:.1f}; serial {figures['serial_s'] / 3600:.1f} h)"
        )


def measure(ctx: Context) -> dict[str, Any]:
    sdists = PROJECTS[:1] if ctx.quick else PROJECTS
    repeats = 2 if ctx.quick else 3
    names = [s.split("==")[0] for s in sdists]
    listing = _projects_file(ctx.dir("eco_list") / "projects.toml", sdists)
    ours: list[dict[str, Any]] = []
    plain: list[dict[str, float]] = []
    found: dict[str, dict[str, Any]] = {}
    for i in range(repeats):
        out = ctx.dir(f"eco_ours_{i}")
        previous = ctx.work / f"eco_ours_{i - 1}" if i else None
        order = ("ours", "plain") if i % 2 == 0 else ("plain", "ours")
        for which in order:
            if which == "ours":
                ours.append(_ours(listing, out, previous))
                if not found:
                    found = {n: _discovered(out, n) for n in names}
            else:
                if not found:  # the floor needs the tool's discovery: ours runs first in run 1
                    raise BenchError("no discovery to run the plain floor with")
                plain.append(
                    {n: _plain(s, found[n], ctx.work / "eco_plain") for n, s in zip(names, sdists)}
                )
        if i >= 2:
            remove_tree(ctx.work / f"eco_ours_{i - 2}")
        got = ours[-1]
        ctx.log(
            f"  run {i + 1}/{repeats}: ecosystem run {got['wall_s']:.1f} s (projects "
            + ", ".join(f"{n} {got['projects_s'].get(n, 0):.0f} s" for n in names)
            + f"; fixed {got['fixed_s']:.1f} s"
            + (
                f"; forecast {got['forecast_s']:.0f} s"
                if got["forecast_s"] is not None
                else "; no forecast"
            )
            + "), plain "
            + ", ".join(f"{n} {plain[-1][n]:.1f} s" for n in names)
        )
    per_run_ours = [sum(r["projects_s"].get(n, 0.0) for n in names) for r in ours]
    per_run_plain = [sum(p[n] for n in names) for p in plain]
    project_ratios = paired_ratios(per_run_ours, per_run_plain)
    whole_ratios = paired_ratios([r["wall_s"] for r in ours], per_run_plain)
    per_project = {
        n: {
            "ours_s": summarize([r["projects_s"].get(n, 0.0) for r in ours]),
            "plain_s": summarize([p[n] for p in plain]),
        }
        for n in names
    }
    fixed = summarize([r["fixed_s"] for r in ours])
    errors = [
        forecast_error(r["forecast_s"], r["wall_s"]) for r in ours if r["forecast_s"] is not None
    ]
    bench_error = statistics.median([e for e in errors if e is not None]) if errors else None
    own_times = [per_project[n]["ours_s"]["median"] for n in names]
    projections = {"bench projects": _projections(own_times, fixed["median"])}
    _log_projections(ctx, "the bench's projects", projections["bench projects"])

    real: dict[str, Any] | None = None
    given = ctx.facts.get("ecosystem_results")
    real_error = None
    if given:
        earlier = ctx.facts.get("ecosystem_durations_from")
        real = results_times(Path(given), Path(earlier) if earlier else None)
        if real["times_s"]:
            projections["real run"] = _projections(list(real["times_s"].values()), fixed["median"])
            _log_projections(
                ctx, f"{real['projects']} projects of {given}", projections["real run"]
            )
        real_error = forecast_error(real["forecast_s"], real["sum_s"])
        ctx.log(
            f"  {given}: {real['projects']} projects, their wall times add up to "
            f"{real['sum_s']:.0f} s (first start to last end {real['span_s'] or 0:.0f} s); "
            + (
                f"forecast {real['forecast_s']:.0f} s ({real['forecast_known']} with a record of "
                f"their own; {real['forecast_source']})"
                if real["forecast_s"] is not None
                else f"forecast: {real['forecast_source']}"
            )
        )
    value = statistics.median(project_ratios) if project_ratios else None
    note_overhead = (
        f"{len(names)} projects, median of {len(project_ratios)} per-run ratios; whole invocation "
        f"/ plain {statistics.median(whole_ratios):.2f}x (fixed cost {fixed['median']:.1f} s)"
        if whole_ratios
        else ""
    )
    shown_error = bench_error if real_error is None else max(bench_error or 0.0, real_error)
    note_forecast = f"bench runs {[round(e, 2) for e in errors if e is not None]}" + (
        f"; the real run {real_error:.2f}" if real_error is not None else ""
    )
    return {
        "projects": list(sdists),
        "sides": list(SIDES),
        "repeats": repeats,
        "ours": ours,
        "plain_s": plain,
        "per_project": per_project,
        "fixed_s": fixed,
        "project_ratios": project_ratios,
        "invocation_ratios": whole_ratios,
        "forecast_errors": errors,
        "real_run": real,
        "real_forecast_error": real_error,
        "projections": projections,
        "projection_model": (
            f"{PROJECTED} projects cycling through the measured times, shuffled (seed 0), "
            "round robin over the "
            "runners (the tool's shard rule), each runner its fixed cost once then its projects "
            "in turn; the slowest runner's time; warm uv cache (no torch download per runner)"
        ),
        "targets": targets_for(
            FIGURE,
            GOALS,
            {
                "per project: ecosystem run / plain venv + pytest": value,
                "forecast vs real wall time, the larger way": shown_error,
            },
            {
                "per project: ecosystem run / plain venv + pytest": note_overhead,
                "forecast vs real wall time, the larger way": note_forecast,
            },
        ),
        "overhead_ratio": ratio(sum(per_run_ours), sum(per_run_plain)),
    }
