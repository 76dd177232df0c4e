"""Suggested requirement pins from cell results: specifiers, interactions, pairs, reasons, coverage.

Pure: a function of ``CellResult``s (and, for coverage, of the released versions of each
package). May import ``vocab``, ``judge``, ``spec`` and ``plan``. Verdicts come from ``torch_matrix.judge.verdict`` so the report and the pins agree on what
"good" means. Only compatible and incompatible cells are evidence; an ``error`` cell yields
no pin, an ``unsatisfiable`` one is listed as such and never called incompatible.

How an answer is found (the search space is a handful of axes, so it is exhaustive enough):

1. Every value that only ever appears in bad cells (a *pure* failure such as torch 1.12.0) is
   excluded for free: no good cell is lost. When several axes could take the blame, the one
   explaining most cells wins, then the axis order torch, torchvision, ..., python.
2. The bad cells left are interactions (the value also has good cells). Candidate answers:
   blame one axis alone (``torch>=2.3``), one axis scoped by another (``torch!=2.4.1`` on
   Python 3.12 only, or "only with numpy>=2"), and a greedy cover over all of them.
3. Answers are ranked by good cells kept. The recommended one is the best that PEP 508 can
   express (conditions on Python become ``python_version`` markers; conditions on another
   package or on the CUDA variant cannot be written in a requirement and are shown as
   diagnoses only).
4. A torchvision release that only ever ran with an excluded torch is excluded with it.

At scale (thousands of cells, a few dozen distinct versions per axis) the search works on
distinct values, not cells: each version string is parsed once, each cell set is a bit mask
per (axis, value), and each specifier or marker is evaluated once per distinct value.
``tests/test_pins_scale.py`` checks the answers against a plain per-cell scan.

The package, one job per module:

- ``specifiers``: the specifier algebra (minimal specifiers, intersection, containment),
  also used by ``torch_matrix.world.apply``;
- ``vocabulary``: what the others share: axis names, values, observations, and conditions (where a
  pin applies, and its ``python_version`` marker);
- ``evidence``: cell results reduced to observations (installed versions, verdict, failing probes);
- ``model``: exclusions, pins, answers and their requirement lines;
- ``search``: the bit-mask grid and the search for answers;
- ``coverage``: released versions admitted or excluded without a test;
- ``suggest``: the ``Suggestion`` that ``torch-matrix pins`` prints;
- ``render``: its text forms (report, constraints.txt, requirements snippet, pins.json).

Its modules: `vocabulary`, `specifiers`, `evidence`, `model`, `masks` (the evidence as bit masks),
`search` (the covers, ``find_pins``), `answers` (atoms -> pins, ranked), `tradeoffs`, `coverage`,
`suggest`, `render`, `pr_body` (the nightly pull request's body), `windows` (each break's releases
and the proof of its edges), `untested` (releases after the evidence), `variants` (a failure held on some variants only: no line, a note), `targets` (pins per
hardware target), `wheelbounds` (a target's bounds from each release's wheel), `target_render`.
"""

from __future__ import annotations

from .vocabulary import PREFERRED_ORDER, PYTHON, VARIANT, CellNote, Condition, Observation
from .coverage import Coverage, coverage
from .evidence import (
    VersionEvidence,
    cell_values,
    effective_variant,
    observe,
    package_axes,
    package_pins,
    probe_summary,
    version_evidence,
)
from .model import Answer, Exclusion, Pin, RequirementLine, requirement_lines
from .masks import Atom, _Grid
from .search import _greedy, find_answers, varied_axes
from .specifiers import PinPolicy, build_specifiers, merge_specifiers, specifier_set
from .suggest import Suggestion, suggest_pins

__all__ = [
    "PREFERRED_ORDER",
    "PYTHON",
    "PinPolicy",
    "VARIANT",
    "Answer",
    "Atom",
    "CellNote",
    "Condition",
    "Coverage",
    "Exclusion",
    "Observation",
    "Pin",
    "RequirementLine",
    "Suggestion",
    "VersionEvidence",
    "_Grid",
    "_greedy",
    "build_specifiers",
    "cell_values",
    "coverage",
    "effective_variant",
    "find_answers",
    "merge_specifiers",
    "observe",
    "package_axes",
    "package_pins",
    "probe_summary",
    "requirement_lines",
    "specifier_set",
    "suggest_pins",
    "varied_axes",
    "version_evidence",
]
