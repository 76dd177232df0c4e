"""A hardware target's pins as files and lines: ``targets/<target>/constraints.txt`` (the same rules
as the main constraints, the bounds read from every release's wheel merged into its torch line,
their proof labelled as read, not tested) and what ``torch-matrix pins`` prints per target.

Pure: text from ``torch_matrix.pins.targets.TargetPins``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch_matrix.vocab.escaping import terminal

from .model import requirement_lines
from .render import _file_text, render_constraints

TARGETS_DIR = "targets"  # <pins>/targets/<target slug>/constraints.txt


def render_target_constraints(pins: Any) -> str:
    """One hardware target's constraints file (``torch_matrix.pins.targets.TargetPins``): the same rules as the
    main constraints, the bounds read from every release's wheel merged into the torch line (their
    proof as comments, labelled as read, not tested), the builds that do run there as comments."""
    lines = render_constraints(pins.suggestion).splitlines()
    head = [
        lines[0],
        f"# Hardware target: {pins.target} (PEP 508 cannot name a GPU: install with -c this file on "
        "that machine). The main constraints.txt never excludes a release for a target.",
    ]
    head += [f"# Advice: {line}" for line in pins.advice]
    body = lines[1:]
    bound = getattr(pins, "wheel_bound", None)
    if bound is not None:
        head += _wheel_bound_comments(bound)
        body = _with_wheel_bound(body, bound)
    return _file_text(head + body)  # each line one line: a label cannot start a requirement


def _wheel_bound_comments(bound: Any) -> list[str]:
    """The proof of a target's bounds read from the wheels, and the releases no bound crosses."""
    read = sum(1 for v in bound.verdicts if v.runs is not None)
    out = [
        f"# Read from the wheels (not tested): {read} of {len(bound.verdicts)} torch release(s) "
        "of the spec's range read for this target"
    ]
    out += [f"# Proof (read from the wheel): {line}" for line in bound.proof]
    if bound.none_runs:
        out.append(
            "# No release of the spec's range runs here (each wheel read): no torch bound can help;"
            " see the advice"
        )
    out += [f"# Unknown (no bound crosses it): {line}" for line in bound.unknown]
    return out


def _with_wheel_bound(body: list[str], bound: Any) -> list[str]:
    """The constraint lines with the wheels' torch bound merged into the unconditional torch line
    (added where the tested cells pinned none)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from torch_matrix.pins.wheelbounds import merged_specifiers

    if not bound.specifiers:
        return body
    out, merged = [], False
    for line in body:
        text = line.split("  #", 1)[0].strip()
        try:
            requirement = Requirement(text) if text and not text.startswith("#") else None
        except InvalidRequirement:
            requirement = None
        if requirement is None or requirement.name != "torch" or requirement.marker is not None:
            out.append(line)
            continue
        specs = merged_specifiers([str(s) for s in requirement.specifier], bound)
        reason = line.split("  #", 1)[1].strip() if "  #" in line else ""
        note = "bound read from the wheels" + (f"; {reason}" if reason else "")
        out.append(f"torch{','.join(sorted(specs, key=_spec_order))}  # {note}")
        merged = True
    if not merged:
        first = next((i for i, line in enumerate(out) if not line.startswith("#")), len(out))
        out.insert(
            first,
            f"torch{','.join(sorted(bound.specifiers, key=_spec_order))}  # bound read from the wheels",
        )
    return out


def _spec_order(spec: str) -> tuple[int, str]:
    return ({">": 0, "<": 1, "!": 2, "=": 3}.get(spec[:1], 4), spec)


def render_target_summary(per_target: Sequence[Any]) -> str:
    """What ``torch-matrix pins`` prints per hardware target: its requirement lines and advice."""
    out = ["Per hardware target (pins/targets/<target>/constraints.txt):"]
    for pins in per_target:
        lines = [
            line.text()
            for line in requirement_lines(pins.suggestion.recommended)
            if line.specifiers
        ]
        bound = getattr(pins, "wheel_bound", None)
        if bound is not None and bound.specifiers:
            lines = [
                line.split("  #", 1)[0]
                for line in _with_wheel_bound(lines or ["# none"], bound)
                if not line.startswith("#")
            ]
        out.append(
            f"  {terminal(pins.target, multiline=False)} -> {pins.slug}: "
            + ("; ".join(lines) if lines else "no bound needed")
        )
        if bound is not None:
            out += [
                f"    read from the wheels: {terminal(p, multiline=False)}" for p in bound.proof
            ]
            out += [f"    unknown: {terminal(u, multiline=False)}" for u in bound.unknown]
        out += [f"    advice: {terminal(line, multiline=False)}" for line in pins.advice]
    return "\n".join(out) + "\n"
