"""Run one cell end to end: install, verify, probe, record. The only place that knows the order.

Phases: ``resolve+install`` (one ``uv pip install``; uv's own resolve / prepare / install
times are kept in the timings), ``verify`` (what is really in the venv), ``probes``
(``python -m torch_matrix.probes`` inside the cell's interpreter, see ``probe_process``). The result
is written atomically as soon as the cell ends, so an interrupted run loses no
finished cell. The work of each phase lives elsewhere (``environment`` for uv,
``probe_process`` for the cell's Python); ``CellSteps`` names those edges so tests can
replace them.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix import __version__ as TOOL_VERSION
from torch_matrix.world import environment
from torch_matrix.world import uvoutput
from torch_matrix.world import probe_process
from torch_matrix.edges.console import Progress
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.probe_process import ProbeOptions, ProbeRun
from torch_matrix.vocab.records import (
    PROBE_RUNNER,
    INSTALLED,
    UNSATISFIABLE,
    Cell,
    CellResult,
    InstallOutcome,
    ProbeResult,
)
from torch_matrix.world.results import write_result
from torch_matrix.world.runplan import CellEvent, record
from torch_matrix.judge.causes import Cause, VersionKind, attribute, axis_module_named
from torch_matrix.judge.stored import judged as judged_alone
from torch_matrix.judge.verdict import asked, asks_only_its_subset, verdict_of
from torch_matrix.judge.hardware import DEVICE_PROBE, cell_verdicts, disagreements
from torch_matrix.judge.gpus import Target
from torch_matrix.edges.console import warn

if TYPE_CHECKING:
    from torch_matrix.spec.model import IndexConfig


@dataclass(frozen=True)
class CellSettings:
    """How to run a cell; the noxfile builds one per cell from the spec."""

    cells_dir: Path  # where the result file goes (results/<run>/cells)
    work_dir: Path  # scratch for this cell: staged probes, probe output
    index_config: IndexConfig | Mapping[str, Any] | None = None
    fingerprint: str = ""
    probe_dirs: tuple[str, ...] = ()
    probe_commands: Mapping[str, str] = field(default_factory=dict)
    probe_timeout_s: float = 300.0  # per probe; the runner as a whole gets a multiple of it
    probe_command_timeout_s: float | None = None  # per command probe; None: ``probe_timeout_s``
    probe_grace_s: float = 60.0  # on top: interpreter start, importing torch once
    install_retries: int = environment.DEFAULT_RETRIES
    retry_backoff_s: float = environment.DEFAULT_BACKOFF_S
    install_timeout_s: float | None = 3600.0
    position: int = 0
    total: int = 0
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables (CUDA_VISIBLE_DEVICES)
    probe_reruns: int = (
        2  # a failing or crashing probe runs at most this many more times (k of n recorded)
    )
    uv: str | None = None
    # The project under test (the spec's directory): install paths are relative to it, and
    # command probes (``pytest -q tests``) run from it. None: the current directory.
    project_dir: str | None = None
    # An existing environment (``torch-matrix check``) is probed as its user runs it, user
    # site-packages included; a cell's fresh venv never sees them.
    user_site: bool = False
    # Hardware targets ([targets], check --gpu/--driver) judged from the cell's build facts.
    targets: tuple[Target, ...] = ()
    # False: the session removes the cell's venv once its result is written (``run.disk.remove_venv``),
    # so a command probe's repro must not name it (it would not run as printed).
    venv_kept: bool = True

    @property
    def probe_options(self) -> ProbeOptions:
        return ProbeOptions(
            dirs=tuple(self.probe_dirs),
            commands=dict(self.probe_commands),
            timeout_s=self.probe_timeout_s,
            command_timeout_s=self.probe_command_timeout_s,
            grace_s=self.probe_grace_s,
            env=dict(self.env),
            command_dir=self.project_dir,
            user_site=self.user_site,
        )


@dataclass(frozen=True)
class CellSteps:
    """The edges ``run_cell`` drives, in order; None = the real one (looked up at call time)."""

    install: Callable[..., InstallOutcome] | None = None  # environment.install's signature
    verify: Callable[..., InstallOutcome] | None = None  # environment.verify's signature
    probes: Callable[..., ProbeRun] | None = None  # probe_process.run_probes's signature
    interpreter: Callable[[str, Mapping[str, str]], dict[str, Any]] | None = None
    gpu: Callable[[], dict[str, Any]] | None = None
    # Called as the cell's probes start (its downloads are over, the network idle until the next
    # cell): the run's prefetch of the next cells' wheels (``torch_matrix.run.prefetch``). None: nothing.
    probes_starting: Callable[[Cell], Any] | None = None
    # While the install runs: what the heartbeat adds (bytes fetched of bytes to fetch, the
    # packages still being fetched: ``run.disk.install_watch``). None: the time alone.
    install_progress: Callable[[], str] | None = None

    def resolved(self) -> "_Steps":
        return _Steps(
            install=self.install or environment.install,
            verify=self.verify or environment.verify,
            probes=self.probes or probe_process.run_probes,
            interpreter=self.interpreter or probe_process.interpreter_facts,
            gpu=self.gpu or probe_process.host_gpu,
            probes_starting=self.probes_starting,
            install_progress=self.install_progress,
        )


@dataclass(frozen=True)
class _Steps:
    """``CellSteps`` with every edge chosen: what ``run_cell`` calls."""

    install: Callable[..., InstallOutcome]
    verify: Callable[..., InstallOutcome]
    probes: Callable[..., ProbeRun]
    interpreter: Callable[[str, Mapping[str, str]], dict[str, Any]]
    gpu: Callable[[], dict[str, Any]]
    probes_starting: Callable[[Cell], Any] | None
    install_progress: Callable[[], str] | None = None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


_RERUN_STATUSES = ("fail", "crash", "timeout", "error")
_VERBS = {"fail": "fails", "crash": "crashes", "timeout": "times out", "error": "errors"}


def merge_reruns(first: ProbeResult, reruns: Sequence[ProbeResult | None]) -> ProbeResult:
    """One probe's result over its first run and its reruns: the first run's status and
    evidence, with ``k of n`` recorded (``evidence.runs``, ``evidence.failed_runs``) and said in
    the message (``crashes in 4 of 5 runs: ...``). A rerun with no result counts as failed."""
    statuses = [first.status] + [r.status if r is not None else "missing" for r in reruns]
    failed = sum(
        1 for status in statuses if status != "pass" and status not in ("skip", "unsupported")
    )
    total = len(statuses)
    verb = _VERBS.get(first.status, first.status)
    flaky = " (flaky)" if failed < total else ""
    evidence = {
        **dict(first.evidence),
        "runs": total,
        "failed_runs": failed,
        "run_statuses": statuses,
    }
    return dataclasses.replace(
        first,
        message=f"{verb} in {failed} of {total} runs{flaky}: {first.message}",
        evidence=evidence,
    )


# A crash or a timeout can go either way on the next run: always rerun. A plain failure is
# rerun once; if it repeats with the same message it is not rerun again.
_ALWAYS_RERUN = ("crash", "timeout")
_ADDRESS = re.compile(
    r"0x[0-9a-fA-F]{6,}"
)  # object addresses differ run to run, the failure does not


def _same_failure(first: ProbeResult, again: ProbeResult | None) -> bool:
    return (
        again is not None
        and again.status == first.status
        and _ADDRESS.sub("0x?", again.message) == _ADDRESS.sub("0x?", first.message)
    )


def explained_failures(
    cell: Cell, install: InstallOutcome | None, probes: Sequence[ProbeResult]
) -> set[str]:
    """The failing probes (fail / error) whose failure ``torch_matrix.judge.causes`` already explains:
    a changed default, the environment (a missing module, a mismatched build or pair, a broken
    install), or an import the release under test cannot satisfy (``No module named 'torch._six'``,
    ``cannot import name 'x' from 'torch.optim'``: the module is not in that release, every run).
    Rerunning them cannot change the answer."""
    if install is None:
        return set()
    partial = CellResult(cell=cell, fingerprint="", install=install, probes=tuple(probes))
    failed = [probe for probe in probes if probe.status in ("fail", "error")]
    causes = {probe.name: attribute(partial, probe) for probe in failed}
    return (
        {
            name
            for name, why in causes.items()
            if why.cause == Cause.ENVIRONMENT or why.kind == VersionKind.CHANGED_DEFAULT
        }
        # The message only: a flaky failure's output may mention a module in passing (a warning).
        | {
            probe.name
            for probe in failed
            if axis_module_named(cell, dataclasses.replace(probe, output_tail=""), frames=False)
        }
    )


def rerun_failures(
    cell: Cell,
    venv_python: str,
    settings: CellSettings,
    env: Mapping[str, str],
    run: ProbeRun,
    progress: Any = None,
    probes: Callable[..., ProbeRun] | None = None,
    install: InstallOutcome | None = None,
) -> ProbeRun:
    """Rerun the failing probes whose answer a rerun can change, at most ``settings.probe_reruns``
    times each, and record ``k of n`` for them (a flaky failure is reported with its rate):

    - a crash or a timeout is rerun every time;
    - a failure (or a probe error) is rerun once, and again only when the rerun's message differs
      (or it passed): the same message twice is a steady failure;
    - a failure ``explained_failures`` explains (changed default, environment) is not rerun: its
      message stays as the first run wrote it.

    The probe runner's own death is not rerun here: it is no evidence."""
    # Command probes (a project's own pytest run) are not rerun: a whole test suite three times
    # is the project's call (pytest's own rerun plugins), not the tool's.
    failing = [
        p
        for p in run.probes
        if p.status in _RERUN_STATUSES and p.name != PROBE_RUNNER and p.isolation != "command"
    ]
    if not failing or settings.probe_reruns <= 0 or any(p.name == PROBE_RUNNER for p in run.probes):
        return run
    explained = explained_failures(cell, install, run.probes)
    failing = [p for p in failing if p.name not in explained]
    first = {p.name: p for p in failing}
    reruns: dict[str, list[ProbeResult | None]] = {name: [] for name in first}
    open_names = tuple(first)
    for attempt in range(settings.probe_reruns):
        if not open_names:
            break
        if progress is not None:
            progress.line(
                f"  | rerun {attempt + 1}/{settings.probe_reruns} of failing probe(s): "
                f"{', '.join(open_names)}"
            )
        again = (probes or probe_process.run_probes)(
            dataclasses.replace(cell, probes=open_names, required_probes=()),
            venv_python,
            settings.work_dir,
            settings.probe_options,
            env,
        )
        by_name = {p.name: p for p in again.probes}
        for name in open_names:
            reruns[name].append(by_name.get(name))
        open_names = tuple(
            name
            for name in open_names
            if first[name].status in _ALWAYS_RERUN
            or not _same_failure(first[name], by_name.get(name))
        )
    merged = tuple(merge_reruns(p, reruns[p.name]) if reruns.get(p.name) else p for p in run.probes)
    return ProbeRun(merged, run.data)


def headline(message: str, limit: int = 200) -> str:
    """The informative line of a message: uv's ``cause: Because ...`` rather than ``error: ...``."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and lines[0].startswith(environment.EXCLUDED_BY_PROJECT):
        return lines[0] if len(lines[0]) <= limit else lines[0][: limit - 3] + "..."
    for line in lines:
        if "Because" in line:
            text = line.removeprefix("cause:").strip()
            return text if len(text) <= limit else text[: limit - 3] + "..."
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


_VENV_PATH = re.compile(r'PATH=\S+:"\$PATH" ')


def without_venv(probe: ProbeResult) -> ProbeResult:
    """A command probe's repro without the venv the session removes (``cd X && pytest -q tests``):
    run in the cell's environment, which the table's rerun line makes again."""
    if probe.isolation != "command" or not _VENV_PATH.search(probe.repro):
        return probe
    return dataclasses.replace(probe, repro=_VENV_PATH.sub("", probe.repro, count=1))


def _finish(
    cell: Cell,
    settings: CellSettings,
    progress: Progress,
    started: str,
    *,
    install: InstallOutcome,
    probes: Sequence[ProbeResult] = (),
    interpreter: Mapping[str, Any] | None = None,
    platform_facts: Mapping[str, Any] | None = None,
    gpu: Mapping[str, Any] | None = None,
    wall_start: float,
) -> CellResult:
    timings = dict(progress.timings)
    timings["total"] = progress.clock() - wall_start
    timings = {name: round(seconds, 3) for name, seconds in timings.items()}  # as stored
    if not settings.venv_kept:
        probes = tuple(without_venv(p) for p in probes)
    result = CellResult(
        cell=cell,
        fingerprint=settings.fingerprint,
        install=install,
        probes=tuple(probes),
        interpreter=dict(interpreter or {}),
        platform=dict(platform_facts or probe_process.host_platform()),
        gpu=dict(gpu or {}),
        timings=timings,
        started_at=started,
        finished_at=_now(),
        tool_version=TOOL_VERSION,
    )
    device_probe = next((p.to_json() for p in probes if p.name == DEVICE_PROBE), None)
    judged = cell_verdicts(gpu, settings.targets, device_probe)
    if judged:
        result = dataclasses.replace(result, targets=judged)
    for line in disagreements(judged):  # loudly: the static rules or the probe are wrong somewhere
        warn(f"{cell.id}: hardware verdict DISAGREES with the device: {line}")
    # The cell's verdict, computed once and stored with its result: the line below, the session's
    # and every reader of the file read this one (judge.stored).
    result = judged_alone(result)
    try:
        path = write_result(result, settings.cells_dir)
    except OSError as error:
        raise UserError(
            f"cannot write the cell's result: {error.strerror or error}",
            where=str(Path(settings.cells_dir) / f"{cell.id}.json"),
            hint="free some space or fix the permissions of the results directory "
            "(TORCH_MATRIX_RESULTS), then rerun: finished cells are kept",
        ) from None
    logged(settings, CellEvent.RESULT, cell)
    verdict = verdict_of(result)
    reason = f": {headline(verdict.reason)}" if verdict.reason else ""
    progress.line(f"done {verdict.kind}{reason} ({timings['total']:.1f}s) -> {path}")
    return result


def rejudged(result: CellResult, targets: Sequence[Target]) -> CellResult | None:
    """A stored result judged again for ``targets`` from its recorded build facts (the spec's
    [targets] changed since it ran: no reinstall needed); None when its verdicts are already these."""
    device_probe = next((p.to_json() for p in result.probes if p.name == DEVICE_PROBE), None)
    judged = cell_verdicts(result.gpu, targets, device_probe)
    if [dict(t) for t in judged] == [dict(t) for t in result.targets]:
        return None
    # the hardware targets are not part of what the cell's verdict judged: it stays (judge.stored)
    return dataclasses.replace(result, targets=judged).with_verdict(result.verdict)


def logged(settings: CellSettings, event: CellEvent, cell: Cell) -> None:
    """The run's cell log (``world.runplan``): which cells started and which wrote a result, so
    the report lists a cell that died in between. A log that cannot be written is said once per
    event; the cell runs on."""
    spec = cell if event == CellEvent.STARTED else None
    problem = record(Path(settings.cells_dir).parent, event, [cell.id], cell=spec)
    if problem:
        warn(f"{cell.id}: {problem}")


def run_cell(
    cell: Cell,
    venv_python: str,
    settings: CellSettings,
    steps: CellSteps | None = None,
    base: CellResult | None = None,
) -> CellResult:
    """Install, verify and probe ``cell`` in the venv of ``venv_python``; write and return its result.

    ``base``: the result of the cell a follow-up cell follows up. With ``cell.probe_subset`` set,
    only those probes run and every other probe result is ``base``'s (``inherited``)."""
    step = (steps or CellSteps()).resolved()
    logged(settings, CellEvent.STARTED, cell)
    progress = Progress(cell.id, settings.position, settings.total)
    wall_start = progress.clock()
    started = _now()
    env = environment.base_env()
    if cell.plan_note:
        outcome = InstallOutcome(UNSATISFIABLE, message=cell.plan_note, attempts=0)
        return _finish(cell, settings, progress, started, install=outcome, wall_start=wall_start)
    interpreter = step.interpreter(venv_python, env)
    common: dict[str, Any] = {
        "retries": settings.install_retries,
        "backoff_s": settings.retry_backoff_s,
        "timeout_s": settings.install_timeout_s,
        "env": env,
        "uv": settings.uv,
    }
    # One uv call resolves and installs: uv refuses before downloading anything when the
    # resolver says no, so a separate dry-run would only pay for a second resolution.
    with progress.phase("resolve+install") as note:
        note.detail = step.install_progress
        outcome = step.install(
            cell,
            settings.index_config,
            venv_python,
            project_dir=settings.project_dir,
            log=lambda line: progress.line(f"  | {line}"),
            **common,
        )
        steps_s = uvoutput.uv_step_seconds(outcome.message)
        progress.timings.update(steps_s)
        note.outcome = outcome.status + (
            f" (resolve {steps_s['resolve']:.1f}s)" if "resolve" in steps_s else ""
        )
    with progress.phase("verify") as note:
        outcome = step.verify(cell, venv_python, outcome, env=env, uv=settings.uv)
        note.outcome = "ok" if outcome.status == INSTALLED else outcome.status
    if outcome.status != INSTALLED:
        return _finish(
            cell,
            settings,
            progress,
            started,
            install=outcome,
            interpreter=interpreter,
            wall_start=wall_start,
        )
    return _probe_and_finish(
        cell,
        venv_python,
        settings,
        step,
        env,
        progress,
        started,
        install=outcome,
        interpreter=interpreter,
        wall_start=wall_start,
        base=base,
    )


def inherited(ran: Sequence[ProbeResult], base: CellResult) -> tuple[ProbeResult, ...]:
    """The probe results of a subset cell: ``ran`` (what this cell ran), and for every other probe
    ``base``'s result, marked ``evidence.inherited_from``; in ``base``'s order, then the rest."""
    fresh = {p.name: p for p in ran}
    merged = [
        fresh.pop(p.name)
        if p.name in fresh
        else dataclasses.replace(p, evidence={**dict(p.evidence), "inherited_from": base.cell.id})
        for p in base.probes
        if p.name != PROBE_RUNNER
    ]
    return tuple(merged) + tuple(fresh.values())


def _probe_and_finish(
    cell: Cell,
    venv_python: str,
    settings: CellSettings,
    step: _Steps,
    env: Mapping[str, str],
    progress: Progress,
    started: str,
    *,
    install: InstallOutcome,
    interpreter: Mapping[str, Any],
    wall_start: float,
    base: CellResult | None = None,
) -> CellResult:
    """The ``probes`` phase, then the result: the same for a planned cell and an existing environment."""
    subset = bool(cell.probe_subset) and base is not None and base.installed and bool(base.probes)
    only = asks_only_its_subset(cell)  # an edge cell: its question's probes, nothing claimed else
    runs = (
        dataclasses.replace(cell, probes=cell.probe_subset, required_probes=())
        if subset
        else dataclasses.replace(
            cell,
            probes=cell.probe_subset,
            required_probes=asked(cell, cell.required_probes),
        )
        if only
        else cell
    )
    with progress.phase("probes") as note:
        note.detail = lambda: probe_process.running_now(settings.work_dir)
        if step.probes_starting is not None:
            step.probes_starting(cell)
        if subset and base is not None:
            progress.line(
                f"  | only the probe(s) the finding concerns: {', '.join(cell.probe_subset)}; "
                f"the others are {base.cell.id}'s"
            )
        elif only:
            progress.line(
                f"  | only the probe(s) that decide its break: {', '.join(cell.probe_subset)}; "
                "its other results are not run and not claimed"
            )
        run = step.probes(
            runs,
            venv_python,
            settings.work_dir,
            settings.probe_options,
            env,
            echo=lambda line: progress.line(f"  | {line}"),
        )
        run = rerun_failures(runs, venv_python, settings, env, run, progress, step.probes, install)
        if subset and base is not None and not any(p.name == PROBE_RUNNER for p in run.probes):
            run = ProbeRun(inherited(run.probes, base), run.data)
        counts: dict[str, int] = {}
        for probe in run.probes:
            counts[probe.status] = counts.get(probe.status, 0) + 1
        note.outcome = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    python = run.data.get("python") or {}
    if python:
        interpreter = {**interpreter, **{k: v for k, v in python.items() if k != "executable"}}
    gpu = run.data.get("gpu") or step.gpu()
    return _finish(
        cell,
        settings,
        progress,
        started,
        install=install,
        probes=run.probes,
        interpreter=interpreter,
        platform_facts=run.data.get("platform"),
        gpu=gpu,
        wall_start=wall_start,
    )


def run_existing(
    cell: Cell,
    python: str,
    settings: CellSettings,
    install: InstallOutcome,
    interpreter: Mapping[str, Any],
    steps: CellSteps | None = None,
) -> CellResult:
    """Probe an environment as it is (``torch-matrix check``): no venv, no install, no verify.

    ``cell`` and ``install`` (status installed, nothing run, the versions found) come from
    ``torch_matrix.run.check``; the probe phase and the result file are exactly a planned cell's.
    """
    step = (steps or CellSteps()).resolved()
    logged(settings, CellEvent.STARTED, cell)
    progress = Progress(cell.id, settings.position, settings.total)
    wall_start = progress.clock()
    return _probe_and_finish(
        cell,
        python,
        settings,
        step,
        environment.base_env(),
        progress,
        _now(),
        install=install,
        interpreter=interpreter,
        wall_start=wall_start,
    )
