"""Cells -> CI shards: shard K of N keeps each (variant, torch) group together. Pure.

``TORCH_MATRIX_SHARD=K/N nox -s matrix`` and ``torch-matrix plan --shards N --json`` (a
GitHub Actions matrix) both cut here, so every cell lands in exactly one shard and a
runner reuses the wheels of its groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from packaging.version import Version

from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import Cell

SHARD_HINT = (
    "shards are numbered from 1: `--shard 2/5` or TORCH_MATRIX_SHARD=2/5 runs the second of five"
)


def parse_shard(text: str, where: str = "--shard") -> tuple[int, int]:
    """``--shard K/N`` or ``TORCH_MATRIX_SHARD``: the one parser (vocab/settings.py), this error."""
    try:
        return settings.parse_shard(text or "")
    except settings.BadValue:
        raise UserError(
            f"invalid shard {text!r} (expected K/N with 1 <= K <= N, such as 2/5)",
            where=where,
            hint=SHARD_HINT,
        ) from None


def shard_bounds(cells: Sequence[Cell], n: int) -> tuple[list[int], list[int]]:
    """The grouped order of cells and the n+1 cut points into it.

    Cells are ordered by variant, then torch (newest first), so each shard is a
    contiguous run that shares wheels; cuts are balanced by count and moved to a
    (variant, torch) group edge when one is close.
    """
    first_seen: dict[str, int] = {}
    for cell in cells:
        first_seen.setdefault(cell.variant, len(first_seen))
    order = sorted(
        range(len(cells)),
        key=lambda i: (
            first_seen[cells[i].variant],
            tuple(-p for p in Version(cells[i].torch).release),
            i,
        ),
    )
    total = len(order)
    group = [(cells[i].variant, cells[i].torch) for i in order]
    edges = {e for e in range(1, total) if group[e] != group[e - 1]}
    slack = (total // n) // 4 if n else 0
    # Each cut moves at most half the slack from its own even-split position, so
    # snapping to group edges can never pile up: shard sizes differ by <= 2 * slack + 1.
    reach = slack // 2
    cuts = [0]
    for j in range(1, n):
        ideal = round(j * total / n)
        low, high = cuts[-1] + (1 if total >= n else 0), total - (n - j if total >= n else 0)
        best = ideal
        for distance in range(reach + 1):
            options = [e for e in (ideal - distance, ideal + distance) if e in edges]
            if options:
                best = options[0]
                break
        cuts.append(min(max(best, low, cuts[-1]), max(high, cuts[-1])))
    cuts.append(total)
    return order, cuts


def select_shard(cells: Sequence[Cell], k: int, n: int) -> list[Cell]:
    """Shard K of N (1-based): every cell lands in exactly one shard; plan order is kept."""
    if n < 1 or not 1 <= k <= n:
        raise UserError(
            f"invalid shard {k}/{n} (K must be between 1 and N)", where="--shard", hint=SHARD_HINT
        )
    order, cuts = shard_bounds(cells, n)
    chosen = sorted(order[cuts[k - 1] : cuts[k]])
    return [cells[i] for i in chosen]


def shards(cells: Sequence[Cell], n: int) -> list[dict[str, Any]]:
    """A CI matrix: one entry per non-empty shard, ``{"shard": "k/n", "cells": [...], ...}``."""
    entries = []
    for k in range(1, n + 1):
        chosen = select_shard(cells, k, n)
        if not chosen:
            continue
        variants = list(dict.fromkeys(c.variant for c in chosen))
        torches = list(dict.fromkeys(c.torch for c in chosen))
        entries.append(
            {
                "shard": f"{k}/{n}",
                "cells": [c.id for c in chosen],
                "count": len(chosen),
                "variants": variants,
                "torch": torches,
            }
        )
    return entries
