"""What changed between two runs, and how a cell+probe fared over many (pure).

A run is reduced to a ``Snapshot``: per cell its verdict (``torch_matrix.judge.verdict``), the required
probes that made it incompatible, and every probe's status and message. Snapshots come from
result files (``snapshot_of``) or from the history database (``torch_matrix.world.history``); the diff
never knows which. Functions of data only: no files, no database, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch_matrix.vocab.records import PASS
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE
from torch_matrix.judge.snapshot import CellState, PassRate, ProbeState, RunRef, Snapshot

if TYPE_CHECKING:  # an annotation only: `diff` and `history` start without the pins package
    from torch_matrix.pins.model import Exclusion

# ---------------------------------------------------------------------------- the diff


@dataclass(frozen=True)
class CellChange:
    cell: str
    old: str  # verdict before ("" when the cell did not exist)
    new: str  # verdict now ("" when it vanished)
    reason: str = ""


@dataclass(frozen=True)
class ProbeChange:
    cell: str
    probe: str
    old: str  # status before ("" when absent)
    new: str
    message: str = ""


@dataclass(frozen=True)
class NewFailure:
    """A required probe that makes its cell incompatible now and did not in the old run."""

    cell: str
    probe: str
    status: str
    message: str
    repro: str
    requirements: tuple[str, ...]
    python: str
    first_run: RunRef | None  # earliest run of the unbroken failing streak that ends now


@dataclass(frozen=True)
class Diff:
    old: RunRef | None
    new: RunRef
    broken: tuple[CellChange, ...]  # now incompatible, before another verdict
    fixed: tuple[CellChange, ...]  # before incompatible, now compatible
    appeared: tuple[CellChange, ...]
    vanished: tuple[CellChange, ...]
    other: tuple[CellChange, ...]  # any other verdict change (e.g. compatible -> error)
    probe_changes: tuple[ProbeChange, ...]
    new_failures: tuple[NewFailure, ...]
    passing: tuple[tuple[str, str], ...]  # (cell, probe) that pass now: their issues may close

    @property
    def quiet(self) -> bool:
        return not (
            self.broken
            or self.fixed
            or self.appeared
            or self.vanished
            or self.other
            or self.probe_changes
        )


def failing_pairs(snapshot: Snapshot) -> set[tuple[str, str]]:
    return {(cell.cell, probe) for cell in snapshot.cells.values() for probe in cell.failing}


def diff_snapshots(
    old: Snapshot | None, new: Snapshot, first_runs: Mapping[tuple[str, str], RunRef] | None = None
) -> Diff:
    """``old`` None: everything in ``new`` appeared. ``first_runs`` maps a new failure's
    (cell, probe) to the run its streak began in (see ``streak_start``); absent = ``new``."""
    first_runs = first_runs or {}
    old_cells: Mapping[str, CellState] = old.cells if old is not None else {}
    broken, fixed, appeared, vanished, other = [], [], [], [], []
    changes: list[ProbeChange] = []
    for cell_id in sorted(set(old_cells) | set(new.cells)):
        before, now = old_cells.get(cell_id), new.cells.get(cell_id)
        if before is None or now is None:
            if now is not None:
                appeared.append(CellChange(cell_id, "", now.verdict, now.reason))
            elif before is not None:
                vanished.append(CellChange(cell_id, before.verdict, "", before.reason))
            continue
        if before.verdict != now.verdict:
            change = CellChange(cell_id, before.verdict, now.verdict, now.reason or before.reason)
            if now.verdict == INCOMPATIBLE:
                broken.append(change)
            elif before.verdict == INCOMPATIBLE and now.verdict == COMPATIBLE:
                fixed.append(change)
            else:
                other.append(change)
        for probe in sorted(set(before.probes) | set(now.probes)):
            was, is_ = before.probes.get(probe), now.probes.get(probe)
            if (was.status if was else "") != (is_.status if is_ else ""):
                changes.append(
                    ProbeChange(
                        cell_id,
                        probe,
                        was.status if was else "",
                        is_.status if is_ else "",
                        is_.message if is_ else "",
                    )
                )
    already = failing_pairs(old) if old is not None else set()
    failures = []
    for cell_id, probe in sorted(failing_pairs(new) - already):
        state = new.cells[cell_id]
        found = state.probes.get(probe, ProbeState("missing"))
        failures.append(
            NewFailure(
                cell_id,
                probe,
                found.status,
                found.message,
                found.repro,
                state.requirements,
                state.python,
                first_runs.get((cell_id, probe), new.run),
            )
        )
    passing = tuple(
        sorted(
            (cell.cell, name)
            for cell in new.cells.values()
            for name, probe in cell.probes.items()
            if probe.status == PASS
        )
    )
    return Diff(
        old=old.run if old is not None else None,
        new=new.run,
        broken=tuple(broken),
        fixed=tuple(fixed),
        appeared=tuple(appeared),
        vanished=tuple(vanished),
        other=tuple(other),
        probe_changes=tuple(changes),
        new_failures=tuple(failures),
        passing=passing,
    )


# ---------------------------------------------------------------------------- over many runs


def streak_start(history: Sequence[tuple[RunRef, bool | None]]) -> RunRef | None:
    """The first run of the failing streak that ends the sequence (oldest first).

    ``True`` = failing, ``False`` = passing (ends a streak), ``None`` = no evidence that
    night (absent, not installed, skipped): it neither breaks nor starts a streak.
    None when the last run with evidence is not failing.
    """
    start: RunRef | None = None
    for run, failing in history:
        if failing is None:
            continue
        if failing:
            start = start or run
        else:
            start = None
    return start


def exclusion_confidence(
    exclusions: Iterable[Exclusion], rates: Mapping[tuple[str, str], PassRate]
) -> list[tuple[str, str]]:
    """For each pin exclusion (``package``, ``version``, ``probes``, ``cells``), how steady its
    evidence was over the history: ``(label, text)`` such as ``("torch 1.12.0",
    "lazy_cuda_init failed 30/30 night(s)")``, with "flaky" when some of those nights passed,
    like Renovate's merge confidence. Exclusions with no history are left out."""
    lines = []
    for exclusion in exclusions:
        if getattr(exclusion, "paired_with", ""):
            continue
        failed = runs = 0
        for cell in exclusion.cells:
            for probe in exclusion.probes:
                rate = rates.get((cell, probe))
                if rate is not None and rate.runs:
                    failed += rate.runs - rate.passed
                    runs += rate.runs
        if not runs:
            continue
        probes = "+".join(exclusion.probes) or "its probes"
        text = f"{probes} failed {failed}/{runs} cell-night(s)"
        if failed < runs:
            text += f" (flaky: passed {runs - failed}; confidence {100 * failed / runs:.0f}%)"
        lines.append((f"{exclusion.package} {exclusion.version}", text))
    return lines
