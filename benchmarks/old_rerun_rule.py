"""The rerun rule before issue 24, for figure 8(b)'s side-by-side: every failing probe rerun the
full ``TORCH_MATRIX_PROBE_RERUNS`` count, even a steady or an explained failure.

The product has no switch for it: the benchmark runs ``nox -s matrix`` through
``benchmarks/old_rule_noxfile.py``, which calls ``install()`` and then loads the shipped sessions,
so the old rule is the same code with two decisions of ``rerun_failures`` answered the old way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch_matrix.run import cellrun
from torch_matrix.vocab.records import ProbeResult


def nothing_explained(cell: Any, install: Any, probes: Sequence[ProbeResult]) -> set[str]:
    """The old rule reran an explained failure (a changed default, the environment) too."""
    return set()


def never_the_same(first: ProbeResult, rerun: ProbeResult | None) -> bool:
    """The old rule reran a failure the full count even when each rerun said the same."""
    return False


def install() -> None:
    """Answer ``rerun_failures``'s two decisions the old way in this process."""
    cellrun.explained_failures = nothing_explained
    cellrun._same_failure = never_the_same
