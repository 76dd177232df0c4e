"""Text forms of a pins ``Suggestion``: the printed report, constraints.txt, a commented
requirements snippet and pins.json.

Every form is deterministic (sorted, no timestamps, no paths) so a nightly job can commit
the files and review the diff.
"""

from __future__ import annotations

import json
from typing import Any

from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, NO_EVIDENCE, NOT_INSTALLABLE
from torch_matrix.vocab.escaping import terminal
from .evidence import EnvironmentAdvice
from .model import Answer, Exclusion, RequirementLine, requirement_lines
from .tradeoffs import TRADEOFF_RULE
from .suggest import Suggestion
from .variants import held_heading, variant_only_lines
from .vocabulary import PYTHON
from .windows import LINE

PINS_SCHEMA_ID = "torch-matrix/pins"
PINS_SCHEMA_VERSION = 1
CONSTRAINTS_NAME = "constraints.txt"
REQUIREMENTS_NAME = "requirements-pins.txt"
JSON_NAME = "pins.json"
MAX_LISTED = 8


def _listing(items: Any, limit: int = MAX_LISTED) -> str:
    items = list(items)
    text = ", ".join(items[:limit])
    if len(items) > limit:
        text += f", ... (+{len(items) - limit} more)"
    return text


def _span(items: Any) -> str:
    """A long run of releases as a count and its ends; a short one in full."""
    items = list(items)
    if len(items) <= MAX_LISTED:
        return ", ".join(items)
    return f"{len(items)} releases, {items[0]} to {items[-1]}"


def _counts_line(suggestion: Suggestion) -> str:
    c = suggestion.counts
    evidence = c.get(COMPATIBLE, 0) + c.get(INCOMPATIBLE, 0)
    line = (
        f"{evidence} evidence cells ({c.get(COMPATIBLE, 0)} compatible, "
        f"{c.get(INCOMPATIBLE, 0)} incompatible), {c.get(NOT_INSTALLABLE, 0)} unsatisfiable, "
        f"{c.get(NO_EVIDENCE, 0)} without evidence (install, runner or environment)"
    )
    if suggestion.not_pinned:
        line += f", {len(suggestion.not_pinned)} incompatible existing environment(s) not pinned"
    return line


def _keeps(answer: Answer) -> str:
    text = f"keeps {answer.kept}/{answer.good_total} compatible cells"
    if answer.lost:
        text += "; gives up " + _listing(answer.lost, 4)
    if answer.unresolved:
        text += f"; leaves {len(answer.unresolved)} incompatible cell{'s' if len(answer.unresolved) != 1 else ''} open"
    return text


def _python_advice(answer: Answer) -> str:
    pins = [pin for pin in answer.pins if pin.package == PYTHON and pin.condition is None]
    return ",".join(spec for pin in pins for spec in pin.specifiers)


def _comment_lines(exclusions: tuple[Exclusion, ...], prefix: str = "# ") -> list[str]:
    return [prefix + "excluded " + exclusion.describe() for exclusion in exclusions]


def _window_lines(line: RequirementLine, prefix: str = "# ") -> list[str]:
    """The proof of each window the line excludes (or why it could not be proven)."""
    out = []
    for window in line.windows:
        span = (
            window.first_bad
            if window.first_bad == window.last_bad
            else f"{window.first_bad}..{window.last_bad}"
        )
        what = ",".join(window.specifiers) if window.proven else "not proven"
        out.append(
            f"{prefix}window {window.package} {span} ({window.kind}: {what}): {window.proof()}"
        )
    return out


def _gives_up_lines(line: RequirementLine, prefix: str = "# ") -> list[str]:
    """A trade-off line: the working pairs it gives up (no pin closes its interaction without)."""
    if not line.gives_up:
        return []
    count = len(line.gives_up)
    return [
        f"{prefix}trade-off: gives up {count} working pair{'s' if count != 1 else ''} "
        f"(no pin closes the interaction without giving one up; ranked alternatives: see trade-offs): "
        + "; ".join(line.gives_up)
    ]


def proof_lines(line: RequirementLine) -> list[str]:
    """Why a requirement line says what it says: what a trade-off gives up, each window's proof,
    then each exclusion's reason."""
    return _gives_up_lines(line, "") + _window_lines(line, "") + _comment_lines(line.exclusions, "")


def pinned_with_proof(suggestion: Suggestion) -> list[tuple[str, tuple[str, ...]]]:
    """(requirement line, its proof lines) for the report page: each pinned line, then each trade-off
    alternative that is not pinned, with what it would give up and its own proof."""
    out = [
        (line.text(), tuple(proof_lines(line)))
        for line in requirement_lines(suggestion.recommended)
        if line.specifiers
    ]
    for tradeoff in suggestion.tradeoffs:
        if not suggestion.pinned(tradeoff):
            line = RequirementLine(
                tradeoff.pin.package,
                tradeoff.pin.specifiers,
                "",
                tradeoff.pin.exclusions,
                tradeoff.pin.windows,
            )
            out.append(
                (
                    f"trade-off {tradeoff.rank} (not pinned: choose one): {tradeoff.line()}",
                    (
                        f"for the interaction {tradeoff.interaction}: {tradeoff.describe()}",
                        *_window_lines(line, ""),
                        *_comment_lines(line.exclusions, ""),
                    ),
                )
            )
    return out


def _tradeoff_lines(suggestion: Suggestion, prefix: str) -> list[str]:
    """Each interaction's ranked trade-offs, best first, each with its proof."""
    out: list[str] = []
    seen: list[str] = []
    for tradeoff in suggestion.tradeoffs:
        if tradeoff.interaction not in seen:
            seen.append(tradeoff.interaction)
            out.append(
                f"{prefix}interaction: {tradeoff.interaction}: no pin closes it without giving up a "
                f"working pair; ranked by the rule: {TRADEOFF_RULE}:"
            )
        state = "pinned" if suggestion.pinned(tradeoff) else "not pinned"
        out.append(f"{prefix}  {tradeoff.rank}. ({state}) {tradeoff.describe()}")
        line = RequirementLine(
            tradeoff.pin.package,
            tradeoff.pin.specifiers,
            "",
            tradeoff.pin.exclusions,
            tradeoff.pin.windows,
        )
        out.extend(_window_lines(line, prefix + "       "))
        out.extend(_comment_lines(line.exclusions, prefix + "       "))
    return out


def _inline_window(line: RequirementLine) -> str:
    parts = []
    for window in line.windows:
        span = (
            window.first_bad
            if window.first_bad == window.last_bad
            else f"{window.first_bad}..{window.last_bad}"
        )
        ends = []
        for edge in (window.start, window.end):
            if edge.index_end:
                ends.append(f"{edge.index_end} {edge.bad} fails")
            elif edge.proven:
                ends.append(f"{edge.good} passes")
        tested = f"{len(window.tested)}/{len(window.releases)} tested"
        if window.kind == LINE:
            major = window.line_label()
            lines = "line" if major.count(".x") == 1 else "lines"
            parts.append(
                f"window {span}: the {major} {lines} bounded whole, every {major} tested "
                f"{window.scope or 'there'} fails, {tested}"
            )
            continue
        parts.append(
            f"window {span}: "
            + ("proven: " + ", ".join(ends) if window.proven else "edge not found, tested bad only")
            + f", {tested}"
        )
    return "; ".join(parts)


def _inline_reason(line: RequirementLine) -> str:
    parts = (
        [
            f"trade-off, gives up {len(line.gives_up)} working pair{'s' if len(line.gives_up) != 1 else ''}: "
            + "; ".join(line.gives_up)
        ]
        if line.gives_up
        else []
    )
    parts += [_inline_window(line)] if line.windows else []
    for exclusion in line.exclusions:
        if exclusion.paired_with:
            parts.append(f"{exclusion.version}: paired with {exclusion.paired_with}")
        else:
            parts.append(
                f"{exclusion.version}: {'+'.join(exclusion.probes) or 'failed'} "
                f"({len(exclusion.cells)} cell{'s' if len(exclusion.cells) != 1 else ''}; "
                + (
                    f"{exclusion.passing_version} passes, all else equal)"
                    if exclusion.confirmed
                    else "unconfirmed)"
                )
            )
    return "; ".join(parts)


CODE_FIX_KINDS = ("code-fix", "import-break")
FIX_FIRST = (
    "Fix first (a code change the failing tests need: it keeps every release; the pins below are "
    "the alternative for code that cannot change):"
)


def code_fixes(suggestion: Suggestion) -> list[EnvironmentAdvice]:
    """The advice that is a code fix for the user's own tests (``judge.catalogue``)."""
    return [item for item in suggestion.environment if item.kind in CODE_FIX_KINDS]


def fix_first_lines(suggestion: Suggestion, indent: str) -> list[str]:
    """The code fixes, each with the cells it explains: printed before the pins they make optional."""
    fixes = code_fixes(suggestion)
    if not fixes:
        return []
    out = [FIX_FIRST]
    for item in fixes:
        out.append(f"{indent}{item.advice}")
        out.append(f"{indent}    seen in: {_listing(item.cells, 4)}")
    out.append("")
    return out


def _evidence_lines(suggestion: Suggestion) -> list[str]:
    """Each axis's tested versions: good, bad, in both."""
    out: list[str] = []
    out.append("Tested versions:")
    width = max((len(axis) for axis in suggestion.evidence), default=6)
    for axis, evidence in suggestion.evidence.items():
        parts = []
        if evidence.good:
            parts.append("good " + _listing(evidence.good))
        if evidence.bad:
            parts.append("bad " + _listing(evidence.bad))
        if evidence.mixed:
            parts.append("in good and bad cells " + _listing(evidence.mixed))
        out.append(f"  {axis:<{width}}  " + (" | ".join(parts) or "no evidence"))
    out.append("")
    return out


def _pin_lines(suggestion: Suggestion) -> list[str]:
    """The suggested pins, each with what it gives up and why, the code fixes first; what is
    untested beyond the evidence; the incompatible cells no pin excludes."""
    out: list[str] = []
    recommended = suggestion.recommended
    lines = [line for line in requirement_lines(recommended) if line.specifiers]
    advice = _python_advice(recommended)
    if recommended.good_total == 0 and suggestion.counts.get(INCOMPATIBLE, 0):
        out.append(
            "WARNING: no compatible cell at all: these pins only exclude what failed; "
            "nothing tested is known to work."
        )
    out.extend(fix_first_lines(suggestion, "  "))
    if not lines and not advice:
        out.append(
            "Suggested pins: none (no tested version needs excluding)."
            if not recommended.unresolved
            else "Suggested pins: none (every exclusion would exclude a version seen working)."
        )
    else:
        out.append(f"Suggested pins ({_keeps(recommended)}):")
        for line in lines:
            out.append("  " + line.text())
            out.extend(_gives_up_lines(line, "      # "))
            out.extend(_window_lines(line, "      # "))
            out.extend(_comment_lines(line.exclusions, "      # "))
        if advice:
            out.append(f"  Requires-Python advice: {advice}")
            for pin in recommended.pins_for(PYTHON):
                out.extend(_comment_lines(pin.exclusions, "      # "))
        must = suggestion.must_install()
        if must:
            out.append("  " + MUST_INSTALL.format(lines=", ".join(must)))
    if suggestion.untested:
        out.append("Untested beyond the evidence (a break there would go unseen; no pin says so):")
        out.extend("  " + line for line in suggestion.untested)
    if recommended.unresolved:
        out += [
            "",
            held_heading(suggestion.variant_only(), recommended.unresolved)
            or "Unresolved (incompatible cells no pin excludes without excluding a version "
            "seen working; see the interaction):",
            "  " + _listing(recommended.unresolved),
        ]
    out += variant_only_lines(suggestion.variant_only(), "", lead=("",))
    return out


def _choice_lines(suggestion: Suggestion) -> list[str]:
    """The interaction no requirement can say, its trade-offs, and the other answers ranked."""
    out: list[str] = []
    diagnosis = suggestion.diagnosis
    if diagnosis is not None:
        how = (
            "the pins above close it with a trade-off, ranked below"
            if suggestion.pin_tradeoffs and suggestion.traded is not None
            else "the pins above never exclude a working version, so they leave it open"
            + ("; choose one of the trade-offs below" if suggestion.tradeoffs else "")
        )
        out += [
            "",
            f"Interaction (no requirement can say this; {how}):",
            f"  {diagnosis.describe()}  ({_keeps(diagnosis)})",
        ]
        for pin in diagnosis.pins:
            if pin.condition is not None:
                out.extend(_comment_lines(pin.exclusions, "      # "))
    if suggestion.tradeoffs:
        out += [
            "",
            "Trade-offs (PEP 508 cannot condition a pin on another package's version: each answer "
            "pins one axis and gives up the working pairs it names):",
        ]
        out.extend(_tradeoff_lines(suggestion, "  "))
    if len(suggestion.answers) > 1:
        out += ["", "Alternatives, best first:"]
        for rank, answer in enumerate(suggestion.answers, 1):
            marker = "" if answer.expressible else " [not expressible in PEP 508]"
            out.append(f"  {rank}. {answer.describe()}  ({_keeps(answer)}){marker}")
    return out


def _advice_lines(suggestion: Suggestion) -> list[str]:
    """Failures an environment or a changed default explains, each confirmed, refuted or not."""
    if not any(item.kind not in CODE_FIX_KINDS for item in suggestion.environment):
        return []
    out: list[str] = []
    out += [
        "",
        "Advice (failures an environment or a changed default explains; no pin is derived "
        "from them):",
    ]
    for item in suggestion.environment:
        if item.kind in CODE_FIX_KINDS:
            continue  # printed first, above the pins
        out.append(f"  [{item.kind}] {item.advice}")
        if item.requirement:
            out.append(f"      requirement: {item.requirement}")
        out.append(f"      seen in: {_listing(item.cells, 4)}")
        if item.confirmed_by:
            what = (
                "the same torchvision with its own torch passes"
                if item.kind == "mismatched-pair"
                else "with the fix applied, all else equal, passes"
                if not any("-with-" in c.split("-cf-", 1)[-1] for c in item.confirmed_by)
                # a counterfactual chain (numpy, then setuptools): its cell stacks the fixes
                else "with the fix applied (and the other fixes its cell names), all else equal, passes"
            )
            out.append(f"      confirmed: {what}: {_listing(item.confirmed_by, 4)}")
        if item.refuted_by:
            out.append(
                f"      NOT confirmed: with the fix applied still fails: {_listing(item.refuted_by, 4)}"
            )
        if item.kind == "changed-default":
            out.append(
                "      confirmed in the cell itself: the plain call fails, the workaround works"
            )
        elif not item.confirmed_by and not item.refuted_by:
            out.append("      unconfirmed: no counterfactual cell was run")
    return out


def _cell_note_lines(suggestion: Suggestion) -> list[str]:
    """The cells no pin is derived from (unsatisfiable, no evidence, existing environments), then
    the coverage."""
    out: list[str] = []
    if suggestion.unsatisfiable:
        out += ["", "Unsatisfiable cells (nothing to install; not incompatibilities):"]
        out += [f"  {note.cell_id}: {note.reason}" for note in suggestion.unsatisfiable]
    if suggestion.no_evidence:
        out += ["", "Cells without evidence (no pins derived from them):"]
        out += [f"  {note.cell_id}: {note.reason}" for note in suggestion.no_evidence]
    if suggestion.not_pinned:
        out += ["", "Incompatible, not pinned (existing environments: reproduce in a matrix cell):"]
        out += [f"  {note.cell_id}: {note.reason}" for note in suggestion.not_pinned]
    out += ["", "Coverage (admitted but never tested; 'not excluded' is not 'verified'):"]
    out += ["  " + line for line in coverage_lines(suggestion)]
    return out


def render_text(suggestion: Suggestion) -> str:
    """The report ``torch-matrix pins`` prints."""
    out = ["torch-matrix pins: " + _counts_line(suggestion), ""]
    out += _evidence_lines(suggestion)
    out += _pin_lines(suggestion)
    out += _choice_lines(suggestion)
    out += _advice_lines(suggestion)
    out += _cell_note_lines(suggestion)
    return terminal("\n".join(out)) + "\n"


def coverage_lines(suggestion: Suggestion) -> list[str]:
    lines = []
    for package, cov in sorted(suggestion.coverage.items()):
        if not cov.known:
            lines.append(f"{package}: unknown (released versions not available)")
            continue
        parts = []
        if cov.older:
            parts.append("older than tested: " + _span(cov.older))
        if cov.untested:
            parts.append("between tested versions: " + _listing(cov.untested))
        if cov.newer:
            parts.append("newer than tested: " + _span(cov.newer))
        if cov.excluded_untested:
            parts.append("excluded by a bound but never tested: " + _span(cov.excluded_untested))
        lines.append(
            f"{package}: " + ("; ".join(parts) if parts else "every admitted release was tested")
        )
    return lines or ["no package axes"]


def _file_text(out: list[str]) -> str:
    """A requirements file's lines: each stays one line (a message in a comment cannot start a
    requirement on the next), with the terminal's rule (it is read with ``cat``)."""
    return "\n".join(terminal(line, multiline=False) for line in out) + "\n"


UNRESOLVED = "Unresolved (no pin excludes them without excluding a working version):"
# A pin on a dependency torch does not declare (setuptools for torch 2.1.2) takes effect only where
# it is installed: constraints restrict versions something else asks for, and install nothing.
MUST_INSTALL = (
    "Install, not only constrain: {lines} (a failing test needed it present, and torch does not "
    "declare it, so `-c constraints.txt` alone installs none): use `pip install -r "
    "requirements-pins.txt` (or add the line to your requirements)"
)


def render_constraints(suggestion: Suggestion) -> str:
    """A constraints file for ``pip install -c`` / ``uv pip install -c`` (no extras, names only)."""
    out = [
        "# Generated by `torch-matrix pins`; do not edit (regenerate from the results).",
        "# Use: pip install -c constraints.txt ...   or   uv pip install -c constraints.txt ...",
        "# " + _counts_line(suggestion),
    ]
    # The code fix first, as a comment: the pins below are its alternative for code that cannot change.
    out.extend("# " + line for line in fix_first_lines(suggestion, "  ") if line)
    recommended = suggestion.recommended
    advice = _python_advice(recommended)
    if advice:
        out.append(f"# Requires-Python advice: {advice}")
    must = suggestion.must_install()
    if must:
        out.append("# " + MUST_INSTALL.format(lines=", ".join(must)))
    for line in requirement_lines(recommended):
        if line.specifiers:
            reason = _inline_reason(line)
            out.append(line.text() + (f"  # {reason}" if reason else ""))
    out.extend(variant_only_lines(suggestion.variant_only(), "# "))
    if suggestion.tradeoffs and not suggestion.pin_tradeoffs:
        out.append(
            "# A break these pins leave open (no pin closes it without excluding a version seen working):"
            " choose one trade-off, uncomment its line (`torch-matrix pins` without `--tradeoffs show`"
            " pins the first by the rule)"
        )
    elif any(suggestion.pinned(t) for t in suggestion.tradeoffs):
        out.append(
            "# A trade-off above is pinned by the rule (no pin closes its break without excluding a"
            f" version seen working): {TRADEOFF_RULE}; to choose another, replace its line"
        )
    for tradeoff in suggestion.tradeoffs:
        if not suggestion.pinned(tradeoff):
            out.append(
                f"# {tradeoff.line()}  # trade-off {tradeoff.rank} (not pinned) for the interaction "
                f"{tradeoff.interaction}: {tradeoff.describe()}"
            )
    return _file_text(out)


def render_requirements(suggestion: Suggestion) -> str:
    """Requirement lines with the full reason of every exclusion above them."""
    recommended = suggestion.recommended
    out = ["# Suggested by `torch-matrix pins` (" + _keeps(recommended) + ")."]
    must = suggestion.must_install()
    if must:
        out.append("# " + MUST_INSTALL.format(lines=", ".join(must)))
    out.extend("# " + line if line else "#" for line in fix_first_lines(suggestion, "  ")[:-1])
    advice = _python_advice(recommended)
    if advice:
        out.append(f"# Requires-Python advice: {advice}")
        for pin in recommended.pins_for(PYTHON):
            out.extend(_comment_lines(pin.exclusions))
    for line in requirement_lines(recommended):
        if line.specifiers:
            out.extend(_gives_up_lines(line))
            out.extend(_window_lines(line))
            out.extend(_comment_lines(line.exclusions))
            out.append(line.text())
    if suggestion.tradeoffs:
        out.append(
            "# Trade-offs (the first of each interaction is pinned above by the rule; to choose another, "
            "replace its line with the alternative's):"
            if suggestion.pin_tradeoffs
            else "# Trade-offs (a break the pins above leave open: no pin closes it without excluding a version "
            "seen working; choose one and add its line):"
        )
        out.extend(_tradeoff_lines(suggestion, "# "))
    if recommended.unresolved:
        heading = held_heading(suggestion.variant_only(), recommended.unresolved) or UNRESOLVED
        out.append(f"# {heading} {_listing(recommended.unresolved)}")
    out.extend(variant_only_lines(suggestion.variant_only(), "# "))
    diagnosis = suggestion.diagnosis
    if diagnosis is not None:
        out.append(f"# Interaction: {diagnosis.describe()} ({_keeps(diagnosis)}).")
    for item in suggestion.environment:
        if item.kind in CODE_FIX_KINDS:
            continue  # printed once, under "Fix first" above the pins
        status = (
            "confirmed in the cell"
            if item.kind == "changed-default"
            else "confirmed by " + _listing(item.confirmed_by, 4)
            if item.confirmed_by
            else "refuted by " + _listing(item.refuted_by, 4)
            if item.refuted_by
            else "unconfirmed"
        )
        out.append(f"# environment ({item.kind}): {item.advice} [{status}]")
        if item.requirement:
            out.append(item.requirement)
    for cov in coverage_lines(suggestion):
        out.append("# coverage: " + cov)
    return _file_text(out)


def suggestion_to_json(suggestion: Suggestion) -> dict[str, Any]:
    recommended = suggestion.recommended
    data = {
        "schema": PINS_SCHEMA_ID,
        "schema_version": PINS_SCHEMA_VERSION,
        "counts": dict(sorted(suggestion.counts.items())),
        "evidence": {axis: ev.to_json() for axis, ev in suggestion.evidence.items()},
        "recommended": recommended.to_json(),
        "requires_python": _python_advice(recommended),
        "policy": str(suggestion.policy),
        "unresolved": list(recommended.unresolved),
        "constraints": [line.text() for line in requirement_lines(recommended) if line.specifiers],
        "diagnosis": suggestion.diagnosis.to_json() if suggestion.diagnosis else None,
        "alternatives": [answer.to_json() for answer in suggestion.answers],
        "unsatisfiable": [
            {"cell": n.cell_id, "reason": n.reason} for n in suggestion.unsatisfiable
        ],
        "no_evidence": [{"cell": n.cell_id, "reason": n.reason} for n in suggestion.no_evidence],
        "environment": [item.to_json() for item in suggestion.environment],
        "coverage": {
            package: cov.to_json() for package, cov in sorted(suggestion.coverage.items())
        },
    }
    if (
        suggestion.tradeoffs
    ):  # only when there are some: earlier pins.json files stay byte-identical
        data["tradeoffs"] = [
            tradeoff.to_json(pinned=suggestion.pinned(tradeoff))
            for tradeoff in suggestion.tradeoffs
        ]
        data["safe"] = suggestion.safe.to_json()
    if suggestion.untested:  # only when there are some: earlier pins.json files stay the same
        data["untested_beyond"] = list(suggestion.untested)
    must = suggestion.must_install()
    if must:  # only when there are some: earlier pins.json files stay the same
        data["must_install"] = must
    if suggestion.variant_only():  # only when there are some: earlier pins.json files stay the same
        data["variant_only"] = [pin.to_json() for pin in suggestion.variant_only()]
    if (
        suggestion.not_pinned
    ):  # only when there are some: earlier pins.json files stay byte-identical
        data["not_pinned"] = [
            {"cell": n.cell_id, "reason": n.reason} for n in suggestion.not_pinned
        ]
    return data


def render_json(suggestion: Suggestion) -> str:
    return json.dumps(suggestion_to_json(suggestion), indent=2, sort_keys=True) + "\n"
