"""What ``noxfile.py`` does, kept here so the noxfile stays a thin list of sessions.

Exit status of ``nox -s matrix`` (a deliberate choice):

- a cell session **fails** only when the cell produced no evidence because of trouble
  (install ``error`` after retries, a probe runner that died, a missing interpreter
  when ``CI`` is set). These are what a nightly job must go red on;
- an ``incompatible`` cell is a *finding*, not a failure of the run: the session
  succeeds with a loud ``INCOMPATIBLE`` line, and the table shows it. Gate on findings
  with the report (``torch-matrix report`` / pins), not with nox's exit code;
- an ``unsatisfiable`` cell (no wheel, no pairing, resolver says no) succeeds with a
  loud line too: it is a fact about the matrix, not trouble.

Resume: a cell whose result file is complete for the same fingerprint (cell + index
configuration, as ``torch-matrix plan --json`` prints it) is skipped with
``session.skip``; ``TORCH_MATRIX_REDO=1`` or ``nox -s matrix -- --redo`` reruns it. Each
cell's file is written the moment the cell ends, so Ctrl-C loses only the cell that
was running.

Parallel: ``nox -j N -s matrix report`` runs cells concurrently (``allow_parallel=True``;
each cell has its own venv, uv's cache is safe to share). ``session.notify`` is not
allowed under ``--parallel``, so there the report must be named on the command line;
it is ``allow_parallel=False``, so nox starts it only when no cell is running, i.e. last.
With ``TORCH_MATRIX_GPUS=0,1,...`` each running cell holds one device (a lock file per
device under the results root) and sees only it through ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.edges import console
from torch_matrix.edges.fileio import WriteFailed
from torch_matrix.vocab import layout
from torch_matrix.vocab import settings as env_settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.layout import (
    BACKOFF_ENV,
    GPUS_ENV,
    GRACE_ENV,
    REDO_ENV,
    FOLLOWUPS_SESSION,
    REPORT_SESSION,
)
from torch_matrix.vocab.records import Cell
from torch_matrix.run.matrixplan import (
    MatrixPlan,
    cell_failed,
    cell_started,
    envdir_of,
    fail_cleanly,
    is_complete,
    load_plan,
    redo_cells,
    redo_requested,
    refresh_targets,
)
# run.prefetch, run.disk and run.sizing (the prefetcher, the disk budget, the cells' sizes: with
# them world.environment, uv's output patterns, concurrent.futures) are imported by the sessions
# that run cells: `nox -l`, which imports this module to list them, never needs them.

if TYPE_CHECKING:
    from torch_matrix.run.cellrun import CellSettings


@contextlib.contextmanager
def claim_gpu(devices: Sequence[str], lock_dir: Path, position: int = 0) -> Iterator[str | None]:
    """Hold one of ``devices`` for the duration (an flock per device); None when none are listed."""
    if not devices:
        yield None
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        for device in devices:
            handle = stack.enter_context(open(lock_dir / f"gpu-{device}.lock", "w"))
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            yield device
            return
        # All busy: wait for one, spreading waiters over the devices.
        device = devices[position % len(devices)]
        with open(lock_dir / f"gpu-{device}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield device


def gpu_list(environ: Mapping[str, str] = os.environ) -> list[str]:
    return list(env_settings.read(environ, GPUS_ENV))


def _cell_settings(
    plan: MatrixPlan, cell: Cell, venv: Path, position: int, environ: Mapping[str, str]
) -> CellSettings:
    """What one matrix cell runs with: its spec's probes and index, the settings of the environment."""
    from torch_matrix.run.cellrun import CellSettings
    from torch_matrix.run.disk import keep_venvs
    from torch_matrix.world.specfile import project_dir

    return CellSettings(
        cells_dir=plan.cells_dir,
        work_dir=venv / "torch-matrix",
        index_config=plan.planned_spec.index,
        fingerprint=plan.fingerprint(cell),
        probe_dirs=tuple(plan.planned_spec.probes.dirs),
        probe_commands=dict(plan.planned_spec.probes.commands),
        probe_timeout_s=plan.planned_spec.probes.timeout,
        probe_command_timeout_s=plan.planned_spec.probes.command_timeout,
        probe_grace_s=env_settings.read(environ, GRACE_ENV),
        retry_backoff_s=env_settings.read(environ, BACKOFF_ENV),
        position=position,
        total=len(plan.cells),
        project_dir=project_dir(plan.planned_spec),
        probe_reruns=probe_reruns(environ),
        targets=plan.planned_spec.targets,
        venv_kept=keep_venvs(environ),
    )


def _say_verdict(session: Any, cell: Cell, result: Any) -> None:
    """The cell's verdict as nox's last line of the session: an error only for no evidence."""
    from torch_matrix.judge.verdict import (
        COMPATIBLE,
        ENVIRONMENT,
        INCOMPATIBLE,
        NO_EVIDENCE,
        TIMED_OUT,
        verdict_of,
    )

    verdict = verdict_of(result)
    # nox prints it as it is: a probe's message can hold anything
    reason = terminal(verdict.reason.strip())
    if verdict.kind == NO_EVIDENCE:
        session.error(f"{cell.id}: ERROR (no evidence): {reason}")
    if verdict.kind == TIMED_OUT:  # the run proved nothing about this cell: it fails
        session.error(f"{cell.id}: TIMEOUT (no evidence): {reason}")
    if verdict.kind == INCOMPATIBLE:
        session.warn(f"{cell.id}: INCOMPATIBLE: {reason}")
    elif verdict.kind == ENVIRONMENT:
        session.warn(f"{cell.id}: ENVIRONMENT (advice, not a version finding): {reason}")
    elif verdict.kind == COMPATIBLE:
        session.log(f"{cell.id}: compatible")
    else:
        session.warn(f"{cell.id}: UNSATISFIABLE (not a finding): {reason}")


def run_matrix_cell(
    session: Any, plan: MatrixPlan, cell: Cell, environ: Mapping[str, str] = os.environ
) -> None:
    """The body of one ``matrix(<cell-id>)`` session."""
    from torch_matrix.run.cellrun import run_cell
    from torch_matrix.run.disk import budgeted, disk_keeper, remove_venv
    from torch_matrix.run.prefetch import PREFETCHER, prefetch_steps, queued_cells

    if not getattr(session, "parallel", False):
        with contextlib.suppress(ValueError):  # --no-dependencies: the report is named explicitly
            session.notify(FOLLOWUPS_SESSION)  # queued before the report, so it runs first
            session.notify(REPORT_SESSION)
    if not redo_requested(session.posargs, environ) and is_complete(plan, cell):
        if refresh_targets(plan, cell):
            session.log(f"{cell.id}: hardware targets judged again from its recorded build")
        session.skip(
            f"already complete for this spec in {layout.cell_file(plan.cells_dir, cell.id)} "
            f"({REDO_ENV}=1 or `-- --redo` reruns it)"
        )
    cell_started(plan, cell)
    if not plan.has_interpreter(cell) and environ.get("CI"):
        why = f"{cell.id}: no Python {cell.python} interpreter found, and CI is set: "
        cell_failed(session, plan, cell, why + "install it or drop it from the spec")
    position = plan.cells.index(cell) + 1 if cell in plan.cells else 0
    venv = Path(session.virtualenv.location)
    warn_if_uv_cannot_hardlink(session, venv.parent, environ)
    settings = _cell_settings(plan, cell, venv, position, environ)
    venv_python = str(venv / "bin" / "python")
    with claim_gpu(gpu_list(environ), plan.results_root / layout.GPU_LOCKS_DIR, position) as device:
        if device is not None:
            settings = _with_env(settings, {"CUDA_VISIBLE_DEVICES": device})
            session.log(f"{cell.id}: using GPU {device}")
        try:
            steps = prefetch_steps(session, plan, venv.parent, environ)
            prefetcher = PREFETCHER[0] if PREFETCHER else None
            keeper, cost = disk_keeper(session, plan, venv.parent, environ, prefetcher)
            own = cost.cell(cell.id)
            running = getattr(session, "name", "")  # the cells nox runs after this one
            later = queued_cells(plan, running, session.posargs, environ=environ) or []
            cell_steps, why = budgeted(
                session, keeper, own, cost.wheels_of(c.id for c in later), steps(cell, ())
            )
            result = run_cell(cell, venv_python, settings, cell_steps)
            if not why:
                followed = run_counterfactuals(
                    session, plan, result, venv_python, settings, environ, steps
                )
                result, alone = in_light_of(result, followed)
                if alone:
                    session.log(
                        f"{cell.id}: judged beside its counterfactuals (its result, judged "
                        f"alone, says {alone})"
                    )
            if own is not None:
                keeper.record(own)
            remove_venv(venv, environ, lambda line: session.log(f"{cell.id}: {line}"))
        except UserError as error:
            cell_failed(session, plan, cell, error.render())
        except WriteFailed as error:  # the budget's ledger on a full results disk: one line
            cell_failed(session, plan, cell, error.user_error().render())
    _say_verdict(session, cell, result)


def in_light_of(result: Any, followed: Sequence[Any]) -> tuple[Any, str]:
    """``result`` judged beside its counterfactuals (one refuted its "add it" advice: a version
    finding now), so the session's line says what the report will; and the verdict its file
    stored when that differs ("" otherwise). The file keeps what the cell wrote (``judge.stored``)."""
    from torch_matrix.judge.stored import judge_run

    if not followed:
        return result, ""
    records, replaced = judge_run([result, *followed])
    was = next((item.was for item in replaced if item.cell == result.cell.id), "")
    return records[0], (was if was != records[0].verdict.get("kind") else "")


def stop_on_sigterm() -> None:
    """SIGTERM (``docker stop``, a cancelled CI job) unwinds like Ctrl-C, so a running cell kills
    its probe runner and everything it started instead of leaving them to init."""
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def probe_reruns(environ: Mapping[str, str] = os.environ) -> int:
    """At most how many more times a failing or crashing probe runs (``0``: never); default 2.
    ``torch_matrix.run.cellrun.rerun_failures`` decides which failures a rerun can change."""
    reruns: int = env_settings.read(environ, env_settings.RERUNS_ENV)
    return reruns


def run_counterfactuals(
    session: Any,
    plan: MatrixPlan,
    result: Any,
    venv_python: str,
    settings: Any,
    environ: Mapping[str, str] = os.environ,
    steps: Any = None,
) -> list[Any]:
    """Run the cells that isolate the blame for ``result`` (``torch_matrix.plan.counterfactual``) in the
    same venv, one requirement added, running only the probes its finding concerns (``probe_subset``;
    its other probe results are ``result``'s); each writes its own result file. Bounded by the cap."""
    import dataclasses

    from torch_matrix.run.cellrun import run_cell
    from torch_matrix.plan.counterfactual import plan_counterfactuals
    from torch_matrix.plan.followups import FOLLOWUPS_ENV, cap_from, is_followup_id, within_cap
    from torch_matrix.judge.verdict import verdict_of

    planned = plan_counterfactuals(result)
    if not planned:
        return []
    cap = cap_from(environ, plan.spec.followups if plan.spec is not None else None)
    mine = {c.id for c in planned}
    already = sum(
        1
        for path in Path(plan.cells_dir).glob("*.json")
        if is_followup_id(path.stem) and path.stem not in mine
    )
    run_now, dropped = within_cap(planned, already, cap)
    session.log(
        f"{result.cell.id}: counterfactual: {len(run_now)} cell(s) to isolate the blame "
        f"(follow-up cap {cap} per run, {already} used; {FOLLOWUPS_ENV}=0 switches them off)"
        + (f"; {dropped} dropped by the cap" if dropped else "")
    )
    results = []
    for position, cf in enumerate(run_now):
        cf_settings = dataclasses.replace(settings, fingerprint=plan.fingerprint(cf))
        # While this one runs its probes, the next follow-up cells' wheels are fetched first.
        cf_steps = steps(cf, run_now[position + 1 :]) if steps is not None else None
        cf_result = run_cell(cf, venv_python, cf_settings, cf_steps, base=result)
        session.log(f"{cf.id}: counterfactual verdict: {verdict_of(cf_result).kind}")
        results.append(cf_result)
    return results


def _checked_redo(session: Any, plan: MatrixPlan) -> list[str]:
    """The ``--redo`` ids, every one checked before anything is touched: a follow-up cell's, with a
    result to redo. A redone result is never deleted: the planner is shown the results without it
    (so it plans that cell again), and the rerun overwrites the file."""
    from torch_matrix.plan.followups import is_followup_id

    redo_ids = redo_cells(session.posargs)
    for cell_id in redo_ids:
        if not is_followup_id(cell_id):  # a matrix cell: the planner would never plan it again
            raise UserError(
                f"--redo {cell_id} is a matrix cell, not a follow-up cell",
                "posargs",
                hint=f"rerun it with `{layout.repro_command(cell_id)}`",
            )
        if not layout.cell_file(plan.cells_dir, cell_id).is_file():
            raise UserError(
                f"no result of the cell {cell_id} to redo",
                str(plan.cells_dir),
                hint="pass a follow-up cell's id as the report's rerun line prints it",
            )
    return redo_ids


class _Followups:
    """The follow-up session's state between the planner's calls: each cell run in a venv of its own
    (its wheels fetched ahead, held to the disk budget), the results the planner reads, the cells
    planned after the running one, and the ``--redo`` ids not yet rerun."""

    def __init__(
        self,
        session: Any,
        plan: MatrixPlan,
        base: CellSettings,
        suite: str,
        redo: Sequence[str],
        argv: Sequence[str],
        environ: Mapping[str, str],
    ) -> None:
        from torch_matrix.run.disk import followup_keeper
        from torch_matrix.run.pipeline import wanted_pythons
        from torch_matrix.run.prefetch import run_prefetcher
        from torch_matrix.world.interpreters import find_interpreters

        self.session = session
        self.plan = plan
        self.spec = plan.planned_spec
        self.base = base
        self.suite = suite
        self.environ = environ
        self.pending_redo = set(redo)
        self.following: list[Cell] = []
        self.no_evidence: list[str] = []  # follow-up cells run now that gave none: the run fails
        self.interpreters = find_interpreters(
            wanted_pythons(self.spec), self.spec.interpreters, environ
        )
        envdir = envdir_of(argv)
        # While a follow-up cell runs its probes, the wheels of those planned after it are fetched.
        self.prefetcher = run_prefetcher(session, self.spec.index, self.python_for, envdir, environ)
        self.keeper = followup_keeper(session, plan, envdir, environ)
        if self.prefetcher is not None:
            self.prefetcher.fits = self.fits

    def python_for(self, cell: Cell) -> str:
        interpreter = self.interpreters.get(cell.python)
        return interpreter.path if interpreter else sys.executable

    def fits(self, cell: Cell) -> str:
        from torch_matrix.run.sizing import followup_cost

        own = followup_cost(self.spec, cell, self.environ)
        return self.keeper.ahead(own) if own is not None else ""

    def upcoming(self, cells: Sequence[Cell]) -> None:
        self.following[:] = cells

    def load(self) -> list[Any]:
        """The results the planner reads. A follow-up result of older probes or another index (its
        fingerprint differs) is not evidence: left out, its cell is planned again and rerun, like
        a grid cell would be."""
        from torch_matrix.world.results import load_results

        index = self.spec.index.to_json()
        return [
            r
            for r in load_results(self.plan.run_dir).results
            if r.cell.id not in self.pending_redo
            and (not r.cell.is_followup or r.fingerprint == r.cell.fingerprint(index, self.suite))
        ]

    def run(self, cell: Cell, position: int) -> None:
        import dataclasses

        from torch_matrix.judge.verdict import NO_EVIDENCE, TIMED_OUT, verdict_of
        from torch_matrix.plan.counterfactual import parent_counterfactual
        from torch_matrix.run.cellrun import CellSteps
        from torch_matrix.run.disk import budgeted, remove_venv
        from torch_matrix.run.followups import run_in_own_venv
        from torch_matrix.run.sizing import cost_line, followup_cost
        from torch_matrix.vocab.records import ORIGIN_COUNTERFACTUAL
        from torch_matrix.world.results import has_complete_result, read_result

        cells_dir = self.plan.cells_dir
        settings = dataclasses.replace(
            self.base,
            fingerprint=cell.fingerprint(self.spec.index.to_json(), self.suite),
            position=position,
        )
        followed = None
        if cell.origin == ORIGIN_COUNTERFACTUAL:  # run here only when the cell's session could not
            followed = read_result(layout.cell_file(cells_dir, parent_counterfactual(cell.id)))
        steps = None
        if self.prefetcher is not None:
            self.prefetcher.claim(cell.id)
            after = list(self.following)
            prefetcher = self.prefetcher
            steps = CellSteps(probes_starting=lambda _running: prefetcher.ahead(after))
        own = followup_cost(self.spec, cell, self.environ)
        if own is not None and not has_complete_result(cells_dir, cell, settings.fingerprint):
            self.session.log(f"{cell.id}: {cell.origin} cell: {cost_line(own)}")
            steps, _why = budgeted(self.session, self.keeper, own, (), steps)
        venv = self.base.work_dir / f"followup-{cell.id}"
        result, resumed = run_in_own_venv(
            cell,
            settings,
            self.python_for(cell),
            venv,
            redo=cell.id in self.pending_redo,
            base=followed,
            steps=steps,
        )
        self.pending_redo.discard(cell.id)
        verdict = verdict_of(result)
        if verdict.kind in (NO_EVIDENCE, TIMED_OUT):  # the session fails once all have run
            self.no_evidence.append(f"{cell.id} ({verdict.kind}: {terminal(verdict.reason)[:200]})")
        if own is not None:
            self.keeper.record(own)
        remove_venv(venv, self.environ, lambda line: self.session.log(f"{cell.id}: {line}"))
        self.session.log(
            f"{cell.id}: {cell.origin} cell: {verdict_of(result).kind}"
            + (" [resumed]" if resumed else "")
        )


def run_followups_session(
    session: Any, argv: Sequence[str] = sys.argv, environ: Mapping[str, str] = os.environ
) -> Any:
    """The body of ``nox -s followups`` (queued by every matrix cell, before the report): the
    follow-up cells the run's results call for (``torch_matrix.plan.followups``), each in a venv of its
    own under the env dir, until none is left or the cap is spent; prints what they cost."""
    from torch_matrix.plan.followups import cap_from
    from torch_matrix.run.cellrun import CellSettings
    from torch_matrix.run.disk import keep_venvs
    from torch_matrix.run.followups import IndexView, run_followups
    from torch_matrix.world.probesuite import suite_digest
    from torch_matrix.world.specfile import project_dir

    try:
        plan = load_plan(environ, plan=False)
        spec = plan.planned_spec
        if not plan.cells_dir.is_dir():
            session.skip(f"no results in {plan.cells_dir}: nothing to follow up")
        # One run per results directory and env dir, this session too (a matrix run in this
        # process holds them already; `nox -s followups` alone takes them here).
        from torch_matrix.edges import locks

        held_env = environ if isinstance(environ, MutableMapping) else dict(environ)
        locks.hold(plan.run_dir, "results directory", held_env)
        locks.hold(envdir_of(argv), "nox env dir (--envdir)", held_env)
        # One the planner does not plan again keeps its result, and says so.
        redo_ids = _checked_redo(session, plan)
        cap = cap_from(environ, spec.followups)
        base = CellSettings(
            cells_dir=plan.cells_dir,
            work_dir=envdir_of(argv),
            index_config=spec.index,
            probe_dirs=tuple(spec.probes.dirs),
            probe_commands=dict(spec.probes.commands),
            probe_timeout_s=spec.probes.timeout,
            probe_command_timeout_s=spec.probes.command_timeout,
            probe_grace_s=env_settings.read(environ, GRACE_ENV),
            retry_backoff_s=env_settings.read(environ, BACKOFF_ENV),
            total=cap,
            project_dir=project_dir(spec),
            probe_reruns=probe_reruns(environ),
            venv_kept=keep_venvs(environ),
        )
        runs = _Followups(session, plan, base, suite_digest(spec), redo_ids, argv, environ)
        spent = run_followups(
            runs.load, IndexView(spec, environ), runs.run, cap, session.log, runs.upcoming
        )
        for cell_id in sorted(runs.pending_redo):
            session.warn(
                console.warning_line(
                    f"--redo {cell_id}: the follow-up planner did not plan this cell again (the "
                    "results no longer call for it, or the cap is spent); its result is kept as it was"
                )
            )
        if runs.no_evidence:
            session.error(
                f"{len(runs.no_evidence)} follow-up cell(s) without evidence: "
                + "; ".join(runs.no_evidence)
                + " (the next run tries them again)"
            )
        return spent
    except UserError as error:
        session.error(error.render())
    except WriteFailed as error:  # the budget's ledger on a full results disk: one line
        session.error(error.user_error().render())


_LINK_CHECKED: list[bool] = []


def warn_if_uv_cannot_hardlink(
    session: Any, venvs_dir: Path, environ: Mapping[str, str] = os.environ
) -> str | None:
    """Once per run: a uv cache on another filesystem turns every cell into a full copy of torch."""
    if _LINK_CHECKED:
        return None
    _LINK_CHECKED.append(True)
    from torch_matrix.world.environment import link_mode_warning, uv_cache_dir

    warning = link_mode_warning(uv_cache_dir(environ), venvs_dir, environ)
    if warning:
        session.warn(console.warning_line(warning))
    return warning


def _with_env(settings: CellSettings, extra: Mapping[str, str]) -> CellSettings:
    import dataclasses

    return dataclasses.replace(settings, env={**settings.env, **extra})


def check_settings(environ: Mapping[str, str] = os.environ) -> None:
    """Parse every ``TORCH_MATRIX_*`` variable as the noxfile loads: a bad value is one error line
    and exit 2 before any session runs, never a traceback inside one."""
    try:
        env_settings.parse(environ)
    except UserError as error:
        fail_cleanly(error)
