"""An ecosystem run (issue 34): each project of a projects file (or of one shard of it) on the
baseline and the candidate torch, its regressed tests retried once on both sides, one JSON result
per project per side.

The run directory::

    run.json                          the sides, the projects file's projects, the shard, the estimate
    projects/<name>/baseline.json     a SideRun (ecosystem/records.py)
    projects/<name>/candidate.json
    projects/<name>/<side>-retry.json only for a regressed project: its regressed tests, rerun
    projects/<name>/<side>.log        uv's install output and the test command's output
    projects/<name>/discovery.json    a zero-config project: the tests, needs and command found
    projects/<name>/bisect.json       with --bisect, a regressed project: its first bad torch, its pin

A project whose two results exist is not run again (resume after an interruption); ``redo`` runs
it again. Venvs and source copies live under ``work/`` and are deleted when a project's results
are written.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from torch_matrix.edges import console, proc
from torch_matrix.edges.fileio import atomic_write
from packaging.version import Version

from torch_matrix.ecosystem.bisection import bisect_estimate, bisect_project
from torch_matrix.ecosystem.classify import Classified, classify, to_retry
from torch_matrix.ecosystem.plan import estimate, recorded_durations, shard_projects
from torch_matrix.spec.model import IndexConfig
from torch_matrix.ecosystem.projects import Project, Side
from torch_matrix.ecosystem.records import RETRIES, EcoClass, Role, SideRun, SideStatus, retry_key
from torch_matrix.vocab.errors import UserError
from torch_matrix.ecosystem import fixproofs, sides
from torch_matrix.ecosystem.results import load, read_meta
from torch_matrix.ecosystem.source import SourceError, fetch, torch_wheels, with_discovery
from torch_matrix.world.environment import uv_cache_dir
from torch_matrix.world.index import IndexUnavailable, PackageIndex
from torch_matrix.world.wheelset import cached_wheels

RUN_FILE = "run.json"
BISECT_FILE = "bisect.json"
DISCOVERY_FILE = "discovery.json"  # a zero-config project: what its sdist implied, and why


@dataclass
class EcosystemRun:
    projects: Sequence[Project]  # the whole file's (a shard runs its part)
    baseline: Side
    candidate: Side
    out: Path
    index: IndexConfig = field(default_factory=IndexConfig)
    python: str = sys.executable
    shard: tuple[int, int] = (1, 1)
    network_off: bool = True
    confine: bool = True  # bubblewrap around every side (edges/sandbox.py); False: --no-sandbox
    redo: bool = False
    keep_venvs: bool = False
    bisect: bool = False  # a regressed project: its first bad torch between the sides, and its pin
    parallel_sides: bool = True  # the two sides of a project at once
    echo: Callable[[str], None] | None = None  # each test output line (None: quiet)
    durations_from: Sequence[Path] = ()  # earlier runs whose recorded durations forecast this one
    tail_lines: int = 0  # after each project: the last lines of each side that did not pass
    # the projects file's entries --only left out: their recorded durations forecast this run too
    unselected: Sequence[Project] = ()


def result_path(out: Path, project: str, role: str, retry: int = 0) -> Path:
    """A side's result file; ``retry``: the retry's number (1, 2, ...), 0 for the run itself."""
    name = retry_key(role, retry) if retry else role
    return out / "projects" / project / f"{name}.json"


def _side_for(run: EcosystemRun, role: Role) -> Side:
    return run.baseline if role == Role.BASELINE else run.candidate


Staged = dict[Path, str]  # a project's result files, path -> text, written once all are known


def _write(staged: Staged, path: Path, result: SideRun) -> None:
    staged[path] = json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n"


def _skipped(project: Project, side: Side) -> SideRun:
    return SideRun(
        project=project.name,
        role=Role(side.role),
        torch=side.torch,
        status=SideStatus.SKIPPED,
        detail=project.skip,
    )


def _recorded(run: EcosystemRun) -> dict[str, float]:
    """The projects' wall times recorded by earlier runs (``durations_from``, then this run's own
    directory, a later record winning); a directory that cannot be read gives none."""
    found: dict[str, float] = {}
    for directory in [*run.durations_from, run.out]:
        if not (Path(directory) / RUN_FILE).exists():
            continue
        try:
            found.update(recorded_durations(load([Path(directory)]).sides))
        except (UserError, OSError, ValueError):
            continue
    return found


def plan_run(run: EcosystemRun, index: PackageIndex | None) -> list[Project]:
    """The shard's projects, and run.json with the estimate (printed before anything starts)."""
    mine = shard_projects(run.projects, *run.shard)
    if index is not None:
        check_listed(run, index)
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheels = {
        side.torch: (torch_wheels(index, side.torch, tag) if index is not None else None)
        for side in (run.baseline, run.candidate)
    }
    names = [name for files in wheels.values() for name, _size in files or ()]
    uv_cache = uv_cache_dir() if names else ""
    todo = [p for p in mine if run.redo or not _done(run.out, p)]  # a resumed run: the rest
    cost = estimate(
        todo,
        wheels,
        cached_wheels(uv_cache, names),
        uv_cache,
        recorded=_recorded(run),
        done=[p for p in mine if p not in todo],
        listed=[*run.unselected, *(p for p in run.projects if p not in mine)],
    )
    for line in cost.lines():
        console.note(line)
    if run.bisect and index is not None and mine:
        try:
            console.note(bisect_estimate(run, index, max(p.budget_s for p in mine)))
        except (IndexUnavailable, UserError, OSError, ValueError) as error:  # never stops a run
            console.note(f"estimate: --bisect: the versions between the sides are unknown: {error}")
    run.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "schema": 1,
        "baseline": run.baseline.to_json(),
        "candidate": run.candidate.to_json(),
        "projects": listed_projects(run),
        "shard": list(run.shard),
        "estimate": cost.to_json(),
    }
    atomic_write(run.out / RUN_FILE, json.dumps(meta, indent=1) + "\n")
    return mine


def _done(out: Path, project: Project) -> bool:
    """Whether ``out`` holds both of the project's results (``run_project`` skips it then)."""
    return all(result_path(out, project.name, str(role)).exists() for role in Role)


def check_listed(run: EcosystemRun, index: PackageIndex) -> None:
    """A side whose torch the index does not list is refused before anything is installed: a
    typo (``--candidate 9.9.9``) or a pre-release without its index filed every passing project
    regressed. An index that cannot be read leaves it to the install (said, never a verdict)."""
    try:
        listed = index.versions("torch")
    except (IndexUnavailable, UserError, OSError, ValueError) as error:
        console.note(f"estimate: cannot list torch's releases on the index ({error})")
        return
    public = {v.public for v in listed}
    for side in (run.baseline, run.candidate):
        try:
            wanted = Version(side.torch).public
        except ValueError:
            wanted = side.torch
        if wanted in public:
            continue
        newest = max((v for v in listed if not v.is_prerelease), default=None)
        raise UserError(
            f"torch {side.torch} is not on the index" + (f" ({side.index})" if side.index else ""),
            where=f"--{side.role}",
            hint=(
                f"give a release it lists (the newest: {newest})"
                if newest
                else "give a release it lists"
            )
            + f", or the index that has it with --{side.role}-index",
        )


# What decides a side's results: a directory holding another torch's results is not this run's.
_SIDE_KEYS = ("torch", "torchvision", "index")


def listed_projects(run: EcosystemRun) -> list[dict[str, object]]:
    """run.json's projects: those of the run already in ``run.out`` (a resumed run, or a redo of
    some of its projects with ``--only``) with this invocation's replacing theirs by name. The
    report reads each project's skip reason, and which projects have no result, from this list:
    narrowing it to one invocation's projects lost the rest of the run (a skipped project's stale
    results came back as a class). Refused where the directory holds another pair's results."""
    listed = [p.to_json() for p in run.projects]
    if not (run.out / RUN_FILE).exists():
        return listed
    earlier = read_meta(run.out)
    for role, side in (("baseline", run.baseline), ("candidate", run.candidate)):
        ours, theirs = side.to_json(), earlier.get(role) or {}
        for key in _SIDE_KEYS:
            if str(theirs.get(key, "")) != str(ours.get(key, "")):
                raise UserError(
                    f"it holds another run's results: its {role}'s {key} is "
                    f"{theirs.get(key, '')!r}, this run's {ours.get(key, '')!r}",
                    where=str(run.out / RUN_FILE),
                    hint="give this pair its own --out directory; "
                    "compare two runs with `torch-matrix ecosystem diff`",
                )
    mine = {str(p["name"]): p for p in listed}
    kept: list[dict[str, object]] = []
    for entry in earlier.get("projects") or ():
        if isinstance(entry, dict) and "name" in entry:
            kept.append(mine.pop(str(entry["name"]), entry))  # in place: the earlier order
    return kept + list(mine.values())  # then the projects new to this directory


def side_isolation(run: EcosystemRun) -> sides.Isolation:
    """What confines every side of the run: bubblewrap, hiding the run's directory (the records
    the harness alone writes), seeing the venvs' interpreter again, the build reaching only the
    run's indexes; or, with --no-sandbox, the old prefix."""
    if not run.confine:
        return sides.isolation(run.network_off)
    prefix = Path(
        proc.run_text([run.python, "-c", "import sys; print(sys.base_prefix)"], timeout=60)[
            1
        ].strip()
        or sys.base_prefix
    )
    urls = [run.index.default, *run.index.extra, run.baseline.index, run.candidate.index]
    return sides.isolation(
        run.network_off,
        confine=True,
        hidden=(run.out.resolve(),),
        readable=(prefix.resolve(), Path(run.python).resolve().parent, Path(run.python).parent),
        index_urls=tuple(u for u in urls if u),
    )


def run_project(run: EcosystemRun, project: Project, index: PackageIndex | None) -> str:
    """One project, both sides (and the retry): the class it ends in, for the progress line.

    Its result files are written together when the project ends, and only then are the earlier
    ones it did not rewrite removed: a redone project stopped halfway (Ctrl-C, a killed job, a time
    limit) keeps its earlier results, never none and never a mix of two runs' sides."""
    out = run.out.resolve()  # the tests run elsewhere: every path they are given is absolute
    paths = {role: result_path(out, project.name, str(role)) for role in Role}
    if not run.redo and all(p.exists() for p in paths.values()):
        return "done before"
    staged: Staged = {}
    outcome = _run_project(run, project, index, out, paths, staged)
    earlier = set((out / "projects" / project.name).glob("*.json"))
    for path, text in staged.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    for path in earlier - set(staged):
        path.unlink(missing_ok=True)
    return outcome


def _run_project(
    run: EcosystemRun,
    project: Project,
    index: PackageIndex | None,
    out: Path,
    paths: dict[Role, Path],
    staged: Staged,
) -> str:
    if project.skip:
        for role in Role:
            _write(staged, paths[role], _skipped(project, _side_for(run, role)))
        return "skipped"
    work = out / "work" / project.name
    if work.exists():
        shutil.rmtree(work)
    logs = out / "projects" / project.name
    logs.mkdir(parents=True, exist_ok=True)
    works: dict[Role, sides.SideWork] = {}
    try:
        try:
            tree = fetch(project, work / "source", index)
            project, discovered = with_discovery(project, tree)
            if discovered is not None:
                staged[logs / DISCOVERY_FILE] = json.dumps(discovered.to_json(), indent=1) + "\n"
        except (SourceError, OSError) as error:
            _no_source(run, project, paths, staged, error)
            return "no source"
        isolation = side_isolation(run)
        results: dict[Role, SideRun] = {}
        pythons: dict[Role, str] = {}
        works.update(_side_works(run, project, tree, work, out, isolation))

        def one_side(role: Role) -> tuple[SideRun, str]:
            began, started = time.time(), time.monotonic()
            broken, venv_python = sides.prepare(works[role])
            if broken is not None:
                return replace(broken, started=began, ended=time.time()), ""
            found = sides.run_tests(
                works[role],
                venv_python,
                install_seconds=time.monotonic() - started,
                echo=run.echo,
            )
            return replace(found, started=began, ended=time.time()), venv_python

        for role, (found, venv_python) in zip(Role, _both(run, works, one_side)):
            results[role] = found
            if venv_python:
                pythons[role] = venv_python
            _write(staged, paths[role], found)
        first = classify(results[Role.BASELINE], results[Role.CANDIDATE])
        again = to_retry(first)
        if again and len(pythons) == 2:
            final = _retry(run, project, works, pythons, results, first, staged)
            if final.eco_class == EcoClass.REGRESSED:
                _prove_fixes(run, works, pythons, results, final, paths, staged)
            if run.bisect and final.eco_class == EcoClass.REGRESSED and index is not None:
                began = time.time()
                bisected = bisect_project(run, project, tree, isolation, final.new_failures, index)
                bisected.update(started=began, ended=time.time())  # in the project's wall time
                staged[out / "projects" / project.name / BISECT_FILE] = (
                    json.dumps(bisected, indent=1) + "\n"
                )
            return str(final.eco_class)
        return str(first.eco_class)
    finally:
        if not run.keep_venvs:
            for item in works.values():
                item.cleanup()
            shutil.rmtree(work, ignore_errors=True)


COLLECT_ONLY = "--collect-only"  # appended to a project's pytest command: collect, run nothing


@dataclass(frozen=True)
class Collection:
    """A project's tests collected on the baseline (``collect_baseline``): the project as the run
    completes it (discovery applied), its side's result (pytest's exit and output, or BROKEN with
    the source's or the install's reason), and the tree pytest ran in (its paths in the output)."""

    project: Project
    side: SideRun
    tree: str


def collect_baseline(
    run: EcosystemRun, project: Project, index: PackageIndex | None, budget_s: float
) -> Collection:
    """One project's tests collected, not run, on ``run``'s baseline alone: the source, discovery,
    install and confinement of a run's baseline side, then its test command with pytest's
    ``--collect-only`` (at most ``budget_s``). The list generator's check
    (examples/ecosystem/build_list.py): an entry that cannot do this cannot give a class. Its
    log is ``projects/<name>/baseline.log`` in ``run.out``; its venv and copies are deleted."""
    out = run.out.resolve()
    work = out / "work" / project.name
    if work.exists():
        shutil.rmtree(work)
    (out / "projects" / project.name).mkdir(parents=True, exist_ok=True)
    works: dict[Role, sides.SideWork] = {}
    try:
        try:
            tree = fetch(project, work / "source", index)
            project, _found = with_discovery(project, tree)
        except (SourceError, OSError) as error:
            no_source = SideRun(
                project=project.name,
                role=Role.BASELINE,
                torch=run.baseline.torch,
                status=SideStatus.BROKEN,
                detail=f"source: {error}",
            )
            return Collection(project, no_source, "")
        collecting = replace(project, command=f"{project.command} {COLLECT_ONLY}")
        isolation = side_isolation(run)
        works.update(_side_works(run, collecting, tree, work, out, isolation, (Role.BASELINE,)))
        item = works[Role.BASELINE]
        broken, venv_python = sides.prepare(item)
        if broken is not None:
            return Collection(project, broken, "")
        found = sides.run_tests(item, venv_python, budget_s=budget_s)
        return Collection(project, found, str(item.box / "src"))
    finally:
        for item in works.values():
            item.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def _no_source(
    run: EcosystemRun, project: Project, paths: dict[Role, Path], staged: Staged, error: Exception
) -> None:
    """Both sides broken: the project's source could not be had."""
    for role in Role:
        side = _side_for(run, role)
        _write(
            staged,
            paths[role],
            SideRun(
                project=project.name,
                role=role,
                torch=side.torch,
                status=SideStatus.BROKEN,
                detail=f"source: {error}",
            ),
        )


def _side_works(
    run: EcosystemRun,
    project: Project,
    tree: Path,
    work: Path,
    out: Path,
    isolation: sides.Isolation,
    roles: Sequence[Role] = tuple(Role),
) -> dict[Role, sides.SideWork]:
    """Where each side of the project works, each with its log begun."""
    logs = out / "projects" / project.name
    works: dict[Role, sides.SideWork] = {}
    for role in roles:
        side = _side_for(run, role)
        log = logs / f"{role}.log"
        log.write_text(f"# {project.name} with torch {side.torch}\n", encoding="utf-8")
        works[role] = sides.SideWork(
            project=project,
            side=side,
            tree=tree,
            folder=work / str(role),
            log=log,
            log_name=str(log.relative_to(out)),
            python=run.python,
            index=run.index,
            isolation=isolation,
        )
    return works


def _retry(
    run: EcosystemRun,
    project: Project,
    works: dict[Role, sides.SideWork],
    pythons: dict[Role, str],
    results: dict[Role, SideRun],
    first: Classified,
    staged: Staged,
) -> Classified:
    """The regressed (or fixed) tests rerun on both sides, up to RETRIES times, until one flips;
    the class the retries give."""
    out = run.out.resolve()
    again = to_retry(first)
    retries: dict[Role, list[SideRun]] = {role: [] for role in Role}
    final = first
    for attempt in range(1, RETRIES + 1):  # until a regressed test flips
        retried = dict(
            zip(
                Role,
                _both(
                    run,
                    works,
                    lambda role: _timed(
                        lambda: sides.run_tests(
                            works[role], pythons[role], only=again, echo=run.echo
                        )
                    ),
                ),
            )
        )
        for role in Role:
            retries[role].append(retried[role])
            path = result_path(out, project.name, str(role), retry=attempt)
            _write(staged, path, retried[role])
        final = classify(
            results[Role.BASELINE],
            results[Role.CANDIDATE],
            retry_baseline=retries[Role.BASELINE],
            retry_candidate=retries[Role.CANDIDATE],
        )
        if final.eco_class != first.eco_class:
            break
    return final


def _prove_fixes(
    run: EcosystemRun,
    works: dict[Role, sides.SideWork],
    pythons: dict[Role, str],
    results: dict[Role, SideRun],
    final: Classified,
    paths: dict[Role, Path],
    staged: Staged,
) -> None:
    """A regression's torch.load fixes rerun on the candidate (``fixproofs``): the proofs go to
    its side file."""
    candidate = results[Role.CANDIDATE]
    began = time.time()
    proofs = fixproofs.prove(
        works[Role.CANDIDATE], pythons[Role.CANDIDATE], candidate, final.new_failures, run.echo
    )
    if proofs:
        ended = max(candidate.ended or 0.0, time.time())  # the project's wall time spans them
        found = replace(
            candidate, fix_proofs=proofs, started=candidate.started or began, ended=ended
        )
        results[Role.CANDIDATE] = found
        _write(staged, paths[Role.CANDIDATE], found)


T = TypeVar("T")


def _timed(job: Callable[[], SideRun]) -> SideRun:
    """``job``'s result with when it began and ended (the project's wall time spans them)."""
    began = time.time()
    found = job()
    return replace(found, started=began, ended=time.time())


def _both(
    run: EcosystemRun, works: dict[Role, sides.SideWork], job: Callable[[Role], T]
) -> list[T]:
    """``job`` for the baseline and the candidate: side by side (``parallel_sides``: both under
    the same load, in half the wall time), else one after the other. An interrupt stops both
    sides' processes (each side's marker) before it goes on."""
    if not run.parallel_sides:
        return [job(role) for role in Role]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(job, role) for role in Role]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for work in works.values():
                work.stopping.set()  # a side still installing starts no tests
                proc.kill_marked(work.marker)
            raise


def failing_tails(out: Path, project: str, lines: int) -> list[str]:
    """The last ``lines`` lines of the output of each side of ``project`` that did not pass (or
    its one-line reason where it has no output), indented under a header naming the side."""
    shown: list[str] = []
    for role in Role:
        path = result_path(out, project, str(role))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("status") in ("passed", "skipped"):
            continue
        tail = str(data.get("output_tail") or data.get("detail") or "").splitlines()[-lines:]
        shown.append(f"  {role} ({data.get('status')}, torch {data.get('torch')}):")
        shown += [f"    {line}" for line in tail]
    return shown


def run_all(run: EcosystemRun, index: PackageIndex | None) -> int:
    """Every project of the shard: one line each, its class and wall time (with ``echo``, a
    line when it starts too; with ``tail_lines``, the end of each side that did not pass)."""
    mine = plan_run(run, index)
    started = time.monotonic()
    for number, project in enumerate(mine, 1):
        began = time.monotonic()
        if run.echo is not None:
            console.note(f"[{number}/{len(mine)}] {project.name}: running")
        outcome = run_project(run, project, index)
        console.note(
            f"[{number}/{len(mine)}] {project.name}: {outcome} ({time.monotonic() - began:.0f} s)"
        )
        if run.tail_lines:
            for line in failing_tails(run.out, project.name, run.tail_lines):
                console.note(line)
    console.note(f"ecosystem: {len(mine)} project(s) in {time.monotonic() - started:.0f} s")
    if not run.keep_venvs:
        shutil.rmtree(run.out / "work", ignore_errors=True)
    return 0
