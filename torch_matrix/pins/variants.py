"""A failure held on some variants only (cpu, cu124, ...): which exclusions, and the files' note.

A requirement cannot name a variant, so an exclusion whose every proving cell ran on some of the
run's variants (and on the others the release passed or no cell ran it) is no line: its cells stay
unresolved, and each pins file names it with its variant and cells. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import Answer, Pin
from .vocabulary import VARIANT

VARIANT_ONLY = (
    "Held on a variant only (a requirement cannot name a variant, and on the others these releases "
    "passed or no cell ran them: no line above excludes them; where you install that variant, "
    "add the line):"
)
MAX_CELLS = 8


def held_on_variants(diagnosis: Answer | None, recommended: Answer) -> list[Pin]:
    """The diagnosis's pins scoped by a variant whose failing cells the recommended answer leaves
    unresolved (none excluded by a line)."""
    if diagnosis is None:
        return []
    open_cells = set(recommended.unresolved)
    return [
        pin
        for pin in diagnosis.pins
        if pin.condition is not None
        and pin.condition.axis == VARIANT
        and all(set(e.cells) <= open_cells for e in pin.exclusions)
    ]


def variant_only_lines(pins: Sequence[Pin], prefix: str, lead: Sequence[str] = ()) -> list[str]:
    """The note: ``lead``, a heading, then each exclusion with its variant and its cells."""
    if not pins:
        return []
    out = [*lead, prefix + VARIANT_ONLY]
    for pin in pins:
        cells = sorted({cell for e in pin.exclusions for cell in e.cells})
        listed = ", ".join(cells[:MAX_CELLS])
        if len(cells) > MAX_CELLS:
            listed += f", ... (+{len(cells) - MAX_CELLS} more)"
        out.append(f"{prefix}  {pin.describe()} [{listed}]")
    return out


def held_heading(pins: Sequence[Pin], unresolved: Sequence[str]) -> str:
    """The unresolved cells' heading when every one of them is held on a variant (below): not
    "without excluding a version seen working", which may not be why; "" otherwise."""
    held = {cell for pin in pins for e in pin.exclusions for cell in e.cells}
    if not unresolved or not set(unresolved) <= held:
        return ""
    return "Unresolved (incompatible cells held on a variant only, below):"
