"""Where the run stops saying anything: torch releases after the newest one with evidence whose
every cell was unsatisfiable or errored. "No pin needed" is only true up to that release: a break
there (an import that failed in 1.9.0 with 1.10.2 the only, unsatisfiable, cell after it) would
otherwise end the run with a false all-clear. Pure: a function of the results."""

from __future__ import annotations

from collections.abc import Sequence

from packaging.version import InvalidVersion, Version

from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, verdict_of
from torch_matrix.vocab.records import CellResult


def untested_beyond(results: Sequence[CellResult]) -> tuple[str, ...]:
    """One line per context (Python, variant) whose newest torch with evidence is followed only by
    cells without evidence: ``torch after 1.9.0 untested (py3.10): 1.10.2 unsatisfiable: no
    torchvision paired``. Empty when every context's newest cell is evidence."""
    contexts: dict[tuple[str, str], list[tuple[Version, CellResult]]] = {}
    for result in results:
        try:
            version = Version(result.cell.torch.split("+")[0])
        except InvalidVersion:
            continue
        key = (result.cell.python, result.cell.variant)
        contexts.setdefault(key, []).append((version, result))
    lines = []
    for (python, variant), cells in sorted(contexts.items()):
        judged = [(v, verdict_of(r)) for v, r in cells]
        evidence = [v for v, verdict in judged if verdict.kind in (COMPATIBLE, INCOMPATIBLE)]
        if not evidence:
            continue
        newest = max(evidence)
        after = sorted(((v, r) for v, r in cells if v > newest), key=lambda pair: pair[0])
        if not after:
            continue
        where = f"py{python}" + (f", {variant}" if variant != "default" else "")
        seen = []
        for version, result in after[:3]:
            verdict = verdict_of(result)
            why = " ".join(verdict.reason.split())[:120]
            seen.append(f"{version} {verdict.kind}" + (f": {why}" if why else ""))
        more = f" (+{len(after) - 3} more)" if len(after) > 3 else ""
        lines.append(
            f"torch after {newest} untested ({where}): every newer cell had no evidence: "
            + "; ".join(seen)
            + more
        )
    return tuple(lines)
