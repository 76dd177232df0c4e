"""A regression's ``torch.load`` fix, proven by a rerun in the candidate's sandbox (issue 42).

The matrix proves a ``weights_only`` fix by rerunning the failing tests with it applied
(``torch_matrix.probes.fixproof``); an ecosystem run does the same on the candidate side of a
regressed project: its regressed tests that failed on torch.load's ``weights_only`` default,
grouped by call site, rerun (only them, in the same venv and sandbox as its side) with each
site's allow-list (``torch.serialization.add_safe_globals`` through the side's
``torch_matrix_safe_globals`` plugin; a class a rerun still refuses joins the list and it reruns),
then all of them with the old default (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``). The proofs go to
the candidate's side file (``SideRun.fix_proofs``); the report's fix says "proven" or "NOT
proven" from them, and "not proven" where no rerun was made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch_matrix.ecosystem import sides
from torch_matrix.ecosystem.records import SideRun
from torch_matrix.probes import fixproof


def failure_records(side: SideRun, tests: Sequence[str]) -> list[dict[str, Any]]:
    """``tests``' failures on ``side`` as pytest's records read them (``fixproof.load_failures``)."""
    return [
        {
            "nodeid": test,
            "outcome": "failed",
            "message": side.messages.get(test, ""),
            "text": side.texts.get(test, ""),
            "frames": [dict(frame) for frame in side.frames.get(test, ())],
        }
        for test in sorted(tests)
        if side.tests.get(test) in ("failed", "error")
    ]


def prove(
    work: sides.SideWork,
    venv_python: str,
    candidate: SideRun,
    tests: Sequence[str],
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """The proofs for the ``weights_only`` failures among ``tests`` on ``candidate`` (None: none of
    them is one), bounded by the project's budget in all."""

    def rerun(
        only: Sequence[str], extra: Mapping[str, str], label: str, seconds: float
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        found = sides.run_tests(
            work,
            venv_python,
            only=list(only),
            echo=echo,
            purpose=f"fix proof{label}",
            extra=dict(extra),
            budget_s=seconds,
        )
        return dict(found.tests), failure_records(found, sorted(found.failing()))

    return fixproof.prove_by(failure_records(candidate, tests), rerun, float(work.project.budget_s))
