"""Run a run's follow-up cells (``plan.followups``): read the index for the edges, run each cell
in a venv of its own, ask the planner again, until it plans nothing or the cap is spent.

The planning is pure (``plan.followups.plan_followups``); this module is its edge: it reads the
results directory and the index, creates venvs and runs cells through ``run.cellrun.run_cell``
(the same install, verify and probe path as a grid cell), one result file per cell. A cell whose
result is complete for the same fingerprint is never rerun, so an interrupted run resumes.
``torch-matrix bisect`` runs its cells through ``run_in_own_venv`` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from torch_matrix.edges import proc
from torch_matrix.plan import followups
from torch_matrix.plan import breaks
from torch_matrix.plan import bisection
from torch_matrix.plan.unbisected import unbisected
from torch_matrix.plan.grid import (
    IndexFacts,
    _torch_specifiers,
    _wheel_pythons,
    gather_facts,
    spec_pythons,
)
from torch_matrix.spec.model import DEFAULT_VARIANT, TorchSelection
from torch_matrix.vocab import layout
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell, CellResult


@dataclass
class Spent:
    """What the follow-ups of one run cost: printed at the end of the run."""

    cap: int
    spent: int = 0  # follow-up cells with a result in the run (earlier sessions included)
    ran: int = 0  # run now
    dropped: int = 0  # planned but over the cap

    def line(self) -> str:
        if self.cap == 0:
            return (
                f"follow-up cells: off ({followups.FOLLOWUPS_ENV}=0): no counterfactual or edge cells; "
                "pins fall back to the tested releases"
            )
        text = f"follow-up cells: {self.spent} spent of the cap {self.cap} ({self.ran} run now"
        if self.dropped:
            text += (
                f"; {self.dropped} more planned but over the cap: raise {followups.FOLLOWUPS_ENV}"
            )
        return text + f"; {followups.FOLLOWUPS_ENV}=0 switches them off)"


def run_in_own_venv(
    cell: Cell,
    settings: Any,
    interpreter: str,
    venv: Path,
    *,
    redo: bool = False,
    base: CellResult | None = None,
    steps: Any = None,
) -> tuple[CellResult, bool]:
    """``cell``'s result: the stored one when complete for ``settings.fingerprint``, else a fresh
    run in ``venv`` (created with uv). ``base``: the result a counterfactual follows up (its probe
    subset inherits the rest from it). ``steps``: ``run_cell``'s (the prefetch hook). Returns (result, resumed)."""
    from torch_matrix.run.cellrun import run_cell
    from torch_matrix.world.envdirs import clear_leftover
    from torch_matrix.world.environment import uv_executable
    from torch_matrix.world.results import has_complete_result, read_result

    if not redo and has_complete_result(settings.cells_dir, cell, settings.fingerprint):
        stored = read_result(layout.cell_file(settings.cells_dir, cell.id))
        if stored is not None:
            return stored, True
    if not cell.plan_note:
        blocked = clear_leftover(venv)  # a half-made venv of an earlier run: uv would refuse it
        if blocked:
            raise UserError(
                f"cannot create the cell's venv: {blocked}",
                str(venv),
                hint="move that directory away (torch-matrix removes only a half-made venv it made)",
            )
        uv = uv_executable()
        code, _out, err = proc.run_text(
            [uv, "venv", "--clear", "--quiet", "--python", interpreter, str(venv)], timeout=None
        )
        if code != 0:
            raise UserError(
                f"cannot create the cell's venv: {err.strip()[-300:] or f'{uv} exited {code}'}",
                str(venv),
                hint=f"`{uv} venv --python {interpreter} DIR` must work: check that uv runs, "
                f"that {interpreter} runs and that the env dir is writable",
            )
    settings = dataclasses.replace(settings, work_dir=venv / "torch-matrix")
    return run_cell(cell, str(venv / "bin" / "python"), settings, steps, base=base), False


class IndexView:
    """What the planner asks of the index: releases a context can install, pairing, wheel Pythons.
    Read lazily, once per variant; the pairing only for the releases an edge wants."""

    def __init__(self, spec: Any, environ: Mapping[str, str]) -> None:
        self.spec = spec
        self.environ = environ
        self._indexes: dict[str, Any] = {}
        self._pythons: dict[tuple[str, str], frozenset[str] | None] = {}
        self.pairing: dict[str, str] = {}  # torch -> its torchvision
        self.torch_of: dict[str, str] = {}  # torchvision -> the torch it requires

    @property
    def paired(self) -> bool:
        """torchvision moves with torch: paired, or listed explicitly (each torchvision release
        requires one torch, so holding it while torch moves installs nothing); "none": no torchvision."""
        return self.spec.torchvision != "none"

    @property
    def torchvision_axis(self) -> bool:
        """The spec lists torchvision releases: a break that is torchvision's is bisected over them."""
        return not isinstance(self.spec.torchvision, str)

    def index(self, variant: str) -> Any:
        if variant not in self._indexes:
            from torch_matrix.world.index import open_index, open_variant_index

            if variant == DEFAULT_VARIANT:
                self._indexes[variant] = open_index(self.spec.index, environ=self.environ)
            else:
                self._indexes[variant] = open_variant_index(
                    self.spec.index, variant, environ=self.environ
                )
        return self._indexes[variant]

    def pythons(self, variant: str, version: str, project: str = "torch") -> frozenset[str] | None:
        key = (variant if project == "torch" else DEFAULT_VARIANT, f"{project}=={version}")
        if key not in self._pythons:
            self._pythons[key] = _wheel_pythons(self.index(key[0]).files(project, version))
        return self._pythons[key]

    def releases_for(self, cell: Cell, axis: str = "torch") -> list[str]:
        """The final releases of ``axis`` (torch from the cell's variant index, an extras package from
        the default index) with a wheel for the cell's Python; a release without wheels (an sdist)
        only when the package ships no wheel for that Python at all (``pins.windows.admitted_releases``:
        the releases the windows admit, so an edge never lands on numpy 1.3.0's sdist)."""
        from torch_matrix.pins.windows import admitted_releases

        variant = cell.variant if axis == "torch" else DEFAULT_VARIANT
        listed = bisection.final_releases(str(v) for v in self.index(variant).versions(axis))
        served = {version: self.pythons(cell.variant, version, axis) for version in listed}
        return admitted_releases(listed, served, [cell.python])[0]

    def pythons_of(self, cell: Cell, version: str, axis: str = "torch") -> frozenset[str] | None:
        return self.pythons(cell.variant, version, axis)

    def read_pairing(self, versions: Sequence[str]) -> None:
        wanted = [v for v in versions if v not in self.pairing]
        if not wanted or not self.paired:
            return
        held = dataclasses.replace(
            self.spec,
            torch=TorchSelection(explicit=tuple(wanted)),
            exclude=(),
            include=(),
            variants=(DEFAULT_VARIANT,),
            torchvision="paired",
        )
        facts: IndexFacts = gather_facts(held, self.index(DEFAULT_VARIANT))
        self.pairing.update(facts.pairing)

    def read_torch_of(self, versions: Sequence[str]) -> None:
        """torchvision release -> the torch its Requires-Dist pins (``torch==2.2.0``); a release that
        declares a range (``torch>=2.14.0``) takes the newest torch release inside it."""
        wanted = [v for v in versions if v not in self.torch_of]
        if not wanted or not self.torchvision_axis:
            return
        index = self.index(DEFAULT_VARIANT)
        metadata = index.requires_dist_many("torchvision", wanted, pythons=spec_pythons(self.spec))
        torches: list[Version] | None = None
        for vision in wanted:
            for specifiers in _torch_specifiers(metadata[vision]):
                exact = [
                    s.version
                    for s in specifiers
                    if s.operator in ("==", "===") and "*" not in s.version
                ]
                if exact:
                    self.torch_of[vision] = str(Version(Version(exact[0]).public))
                    break
                if torches is None:
                    torches = [
                        Version(v) for v in bisection.final_releases(index.versions("torch"))
                    ]
                inside = [v for v in torches if specifiers.contains(v)]
                if inside:
                    self.torch_of[vision] = str(max(inside))
                    break


def run_followups(
    load: Callable[[], Sequence[CellResult]],
    view: IndexView,
    run: Callable[[Cell, int], None],
    cap: int,
    log: Callable[[str], None],
    upcoming: Callable[[Sequence[Cell]], None] | None = None,
) -> Spent:
    """Plan, run, plan again until nothing is left or the cap is spent. ``load()`` reads the
    run's results; ``run(cell, position)`` runs one cell (its result lands where ``load`` reads).
    ``upcoming(cells)``, before each run: the planned cells that follow it (what the prefetch
    fetches while its probes run)."""
    spent = Spent(cap)
    if cap == 0:
        log(spent.line())
        return spent
    while True:
        results = list(load())
        spent.spent = sum(1 for r in results if r.cell.is_followup)
        axis = view.torchvision_axis
        view.read_pairing(
            followups.edge_versions(results, view.releases_for, torchvision_axis=axis)
        )
        view.read_torch_of(
            followups.edge_versions(
                results, view.releases_for, breaks.TORCHVISION, torchvision_axis=axis
            )
        )
        planned = followups.plan_followups(
            results,
            view.releases_for,
            pythons_of=view.pythons_of,
            pairing=view.pairing if view.paired else None,
            torch_of=view.torch_of,
            torchvision_axis=axis,
        )
        if not planned:
            break
        now, spent.dropped = followups.within_cap(planned, spent.spent, cap)
        if not now:
            break
        for index, cell in enumerate(now):
            log(f"follow-up {cell.origin}: {cell.id}: {cell.reason}")
            if upcoming is not None:
                upcoming(now[index + 1 :])
            run(cell, spent.spent + 1)
            spent.ran += 1
            spent.spent += 1
    for item in unbisected(results, torchvision_axis=view.torchvision_axis):
        log(item.line())  # a break no edge is searched for is said, never silent
    log(spent.line())
    return spent
