"""Apply suggested pins to a downstream requirements.txt or pyproject.toml, in place.

Only the specifiers of packages the pins name are changed; comments, order, extras,
markers, options (``-r``, ``--index-url``, ``--hash``), URL and path requirements and the
file's formatting stay as they were. An exact pin (``==``) is never rewritten: if the
evidence excludes it, a note says so. A Python-scoped pin splits one requirement into
lines with complementary ``python_version`` markers. Writes are atomic (temp file +
rename), so a failure never leaves half a file; a symlinked file is written through to its
target, with its mode, line endings and byte-order mark kept. A requirement continued over
lines (``\\``) is read as pip reads it (joined); if it changes, it is written on one line.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, Specifier
from packaging.utils import canonicalize_name

from torch_matrix.vocab.errors import UserError
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.pins.model import RequirementLine
from torch_matrix.pins.specifiers import merge_specifiers, specifier_set

REQUIREMENT_HINT = (
    "fix that line (PEP 508: a name, then specifiers such as `torch>=2.1,!=2.3.0`); "
    "nothing was written"
)

_NAME_AND_EXTRAS = re.compile(
    r"^(\s*[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\s*(?:\[[^\]]*\])?\s*)"
)
_COMMENT = re.compile(r"(^|\s)#")
_OPTION = re.compile(r"\s--?[A-Za-z]")
_PATHLIKE = re.compile(r"(://|^\.|^/|^~|[\\/]|\.(whl|zip|tar\.gz|tgz|tar\.bz2)$)")


@dataclass(frozen=True)
class ApplyResult:
    path: Path
    old: str
    new: str
    changes: tuple[str, ...]  # "line 3: torch>=1.7.0 -> torch>=1.7.0,!=1.12.0"
    notes: tuple[str, ...]  # things the user must look at (conflicts, packages not in the file)
    edited: bool = (
        True  # False: a file torch-matrix never edits (setup.py); ``notes`` say what to paste
    )

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        name = self.path.name
        return "".join(
            difflib.unified_diff(
                self.old.splitlines(keepends=True),
                self.new.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )


def _existing_specifiers(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return tuple(str(Specifier(part.strip())) for part in text.split(",") if part.strip())


def _same(left: Sequence[str], right: Sequence[str]) -> bool:
    return {str(Specifier(s)) for s in left} == {str(Specifier(s)) for s in right}


def _join_markers(existing: str, added: str) -> str:
    if not existing:
        return added
    if not added:
        return existing
    return f"{_parenthesise_or(existing)} and {_parenthesise_or(added)}"


def _parenthesise_or(marker: str) -> str:
    """``a or b`` must stay one clause when joined with ``and``."""
    return f"({marker})" if " or " in marker else marker


_PYTHONS = tuple(f"3.{minor}" for minor in range(31))


def _python_overlap(existing: Marker | None, added: str) -> str:
    """How the Pythons of ``added`` meet an existing marker: "implied", "none" or "some".

    Judged on Python 3.0-3.30 with the rest of this machine's environment; a marker that
    is false here for every Python (another platform) counts as "some", so both are kept.
    """
    if not added:
        return "implied"
    scoped = Marker(added)

    def env(version: str) -> dict[str, str]:
        return {"python_version": version, "python_full_version": f"{version}.0"}

    here = [v for v in _PYTHONS if existing is None or existing.evaluate(env(v))]
    if not here:
        return "some"
    inside = [v for v in here if scoped.evaluate(env(v))]
    if not inside:
        return "none"
    return "implied" if len(inside) == len(here) and existing is not None else "some"


EXCLUDED_NOTE = "the evidence excludes"  # in a note: a requirement left as written installs that


def _note_excluded_url(
    requirement: Requirement, mine: Sequence[RequirementLine], notes: list[str], where: str
) -> None:
    """``torch @ https://.../torch-2.0.0%2Bcu118-cp311-...whl``: the wheel's file name says which
    release it installs; one the pins exclude gets a note (the line is left as written)."""
    from urllib.parse import unquote, urlsplit

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    filename = unquote(urlsplit(requirement.url or "").path.rsplit("/", 1)[-1])
    try:
        version = parse_wheel_filename(filename)[1]
    except (InvalidWheelFilename, ValueError):
        return  # an sdist, a VCS URL, a directory: the release is not in the name
    for line in mine:
        if line.specifiers and not specifier_set(line.specifiers).contains(
            version.public, prereleases=True
        ):
            notes.append(
                f"{where}: {requirement.name} @ {filename} installs {requirement.name} "
                f"{version}, a release {EXCLUDED_NOTE} ({line.text()}); left as written: "
                "point it at a wheel of an admitted release"
            )
            return


def update_requirement(
    text: str,
    pins: Sequence[RequirementLine],
    notes: list[str],
    where: str,
    seen: set[str] | None = None,
) -> list[str] | None:
    """The requirement(s) replacing ``text``, or None when it stays as written.

    ``text`` is one requirement without comment or options; raises InvalidRequirement.
    """
    requirement = Requirement(text.strip())
    name = canonicalize_name(requirement.name)
    if seen is not None:
        seen.add(name)
    mine = [line for line in pins if canonicalize_name(line.package) == name]
    if not mine or all(not line.specifiers for line in mine):
        return None
    if requirement.url:  # not ours to rewrite; but a wheel URL names its release: check it
        _note_excluded_url(requirement, mine, notes, where)
        return None
    head, _, marker_text = text.partition(";")
    match = _NAME_AND_EXTRAS.match(head)
    if match is None:
        return None
    prefix = match.group(1)
    spec_text = head[len(prefix) :]
    trailing = spec_text[len(spec_text.rstrip()) :]
    if not spec_text.strip():  # "torch ; marker": the specifier goes right after the name
        trailing = prefix[len(prefix.rstrip()) :]
        prefix = prefix.rstrip()
    existing = _existing_specifiers(spec_text)
    exact = [s for s in existing if Specifier(s).operator in ("==", "===")]
    if exact:
        for line in mine:
            if line.specifiers and not specifier_set(line.specifiers).contains(
                Specifier(exact[0]).version.rstrip(".*") or "0", prereleases=True
            ):
                notes.append(
                    f"{where}: {requirement.name}{exact[0]} is an exact pin {EXCLUDED_NOTE} "
                    f"({line.text()}); left as written"
                )
                break
        return None
    existing_marker = str(requirement.marker) if requirement.marker else ""
    replaced = []
    for line in mine:
        overlap = _python_overlap(requirement.marker, line.marker)
        if overlap == "none":
            continue  # this line's Pythons never meet the requirement's own marker
        replaced.append(
            (
                merge_specifiers(existing, line.specifiers),
                "" if overlap == "implied" else line.marker,
            )
        )
    if all(_same(specs, existing) for specs, _ in replaced):
        return None
    if len(replaced) == 1 and not replaced[0][1]:
        marker_part = ";" + marker_text if marker_text else ""
        return [prefix + ",".join(replaced[0][0]) + trailing + marker_part]
    out = []
    for specs, marker in replaced:
        combined = _join_markers(existing_marker, marker)
        text = prefix.rstrip() + ",".join(specs) + (f"; {combined}" if combined else "")
        Requirement(text)  # our own output must parse
        out.append(text)
    return out


# ----------------------------------------------------------------------------- requirements.txt


def _split_comment(content: str) -> tuple[str, str]:
    match = _COMMENT.search(content)
    if match is None:
        return content, ""
    start = match.start() + len(match.group(1))
    body = content[:start]
    return body, content[start:]


def _joined(group: Sequence[str]) -> str:
    """The logical line pip reads from physical lines joined by trailing backslashes."""
    pieces = []
    for line in group:
        line = line.rstrip("\r\n")
        pieces.append(line[:-1] if line.endswith("\\") else line)
    return "".join(pieces)


def _requirement_continues(group: Sequence[str], first: str) -> bool:
    """Whether the requirement (not just its options, such as `--hash`) goes on past the first line."""
    body, comment = _split_comment(_joined(group))
    if comment and not _split_comment(first)[1]:
        return True  # the first line's text ends before the comment: the requirement goes on
    option = _OPTION.search(body)
    requirement = (body[: option.start()] if option else body).rstrip()
    return len(requirement) > len(first.rstrip())


def update_requirements_txt(
    text: str,
    pins: Sequence[RequirementLine],
    where: str,
    notes: list[str] | None = None,
    seen: set[str] | None = None,
) -> tuple[str, list[str]]:
    """New text of a requirements file and the one-line changes made."""
    notes = notes if notes is not None else []
    physical = text.splitlines(keepends=True)
    out: list[str] = []
    changes: list[str] = []
    index = 0
    while index < len(physical):
        start = index
        while physical[index].rstrip("\r\n").endswith("\\") and index + 1 < len(physical):
            index += 1
        group = physical[start : index + 1]
        index += 1
        first = group[0]
        newline = first[len(first.rstrip("\r\n")) :]
        content = first[: len(first) - len(newline)]
        continued = content.endswith("\\")
        if continued:
            content = content[:-1]
        if continued and _requirement_continues(group, content):
            # The requirement itself goes on after a backslash (`torch>=2.0,\` then `    <3`): pip joins
            # the lines; so do we, and a changed requirement is written whole on its first line.
            content, group_rest = _joined(group), []
            continued = False
        else:
            group_rest = group[1:]
        body, comment = _split_comment(content)
        stripped = body.strip()
        if not stripped or stripped.startswith("-"):
            out.extend(group)
            continue
        option = _OPTION.search(body)
        requirement_text = body[: option.start()] if option else body
        rest = body[len(requirement_text) :] + comment + ("\\" if continued else "")
        lineno = start + 1
        try:
            replacement = update_requirement(
                requirement_text, pins, notes, f"{where}:{lineno}", seen
            )
        except (InvalidRequirement, InvalidSpecifier, InvalidMarker) as error:
            if _PATHLIKE.search(requirement_text.strip()):
                out.extend(group)  # a path or URL requirement: not ours to change
                continue
            raise UserError(
                f"cannot parse requirement {requirement_text.strip()!r}: "
                f"{' '.join(str(error).split())}",
                f"{where}:{lineno}",
                hint=REQUIREMENT_HINT,
            ) from None
        if replacement is None:
            out.extend(group)
            continue
        if len(replacement) > 1 and (continued or option):
            notes.append(
                f"{where}:{lineno}: {requirement_text.strip()} needs a Python-scoped split "
                f"but carries options or continuation lines; left as written"
            )
            out.extend(group)
            continue
        if len(replacement) == 1:
            out.append(replacement[0] + rest + newline)
        else:
            head_ws = requirement_text[: len(requirement_text) - len(requirement_text.lstrip())]
            tail = ("  " + rest.strip()) if rest.strip() else ""
            out.append(head_ws + replacement[0].strip() + tail + newline)
            out.extend(head_ws + extra.strip() + newline for extra in replacement[1:])
        out.extend(group_rest)
        changes.append(
            f"{where}:{lineno}: {requirement_text.strip()} -> "
            + " | ".join(r.strip() for r in replacement)
        )
    return "".join(out), changes


# ----------------------------------------------------------------------------- pyproject.toml


def _toml_string(value: str):
    if '"' in value and "'" not in value:
        return tomlkit.string(value, literal=True)
    return tomlkit.string(value)


def _update_array(
    array,
    pins: Sequence[RequirementLine],
    where: str,
    notes: list[str],
    changes: list[str],
    seen: set[str] | None = None,
) -> None:
    for position in reversed(range(len(array))):
        item = array[position]
        if not isinstance(item, str):
            raise UserError(
                "dependency is not a string",
                f"{where}[{position}]",
                hint='each dependency is a PEP 508 string such as "torch>=2.1"',
            )
        try:
            replacement = update_requirement(str(item), pins, notes, f"{where}[{position}]", seen)
        except (InvalidRequirement, InvalidSpecifier, InvalidMarker) as error:
            raise UserError(
                f"cannot parse requirement {str(item)!r}: {' '.join(str(error).split())}",
                f"{where}[{position}]",
                hint=REQUIREMENT_HINT,
            ) from None
        if replacement is None:
            continue
        array[position] = _toml_string(replacement[0])
        for offset, extra in enumerate(replacement[1:], 1):
            array.insert(position + offset, _toml_string(extra))
        changes.append(f"{where}[{position}]: {item} -> " + " | ".join(replacement))


def update_pyproject(
    text: str,
    pins: Sequence[RequirementLine],
    where: str,
    notes: list[str] | None = None,
    seen: set[str] | None = None,
) -> tuple[str, list[str]]:
    """New text of a pyproject.toml ([project] dependencies and optional-dependencies)."""
    notes = notes if notes is not None else []
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as error:
        raise UserError(
            f"invalid TOML: {error}",
            f"{where}:{getattr(error, 'line', '?')}",
            hint="fix the TOML syntax at that line; nothing was written",
        ) from None
    project = document.get("project")
    if project is None or "dependencies" not in project:
        notes.append(f"{where}: no [project] dependencies to update")
        return text, []
    changes: list[str] = []
    _update_array(
        project["dependencies"], pins, f"{where}: project.dependencies", notes, changes, seen
    )
    optional = project.get("optional-dependencies") or {}
    for group in optional:
        _update_array(
            optional[group],
            pins,
            f"{where}: project.optional-dependencies.{group}",
            notes,
            changes,
            seen,
        )
    changes.reverse()
    return (tomlkit.dumps(document) if changes else text), changes


# ----------------------------------------------------------------------------- setup.py

_QUOTED = re.compile(r"""(["'])([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]"']*\])?\s*[^"'\n]*)\1""")


def paste_advice(text: str, pins: Sequence[RequirementLine], where: str) -> list[str]:
    """What to paste into a file torch-matrix does not edit (``setup.py``): for each pinned package,
    its requirement as the file writes it (a quoted PEP 508 string) merged with the pins."""
    wanted = sorted({canonicalize_name(line.package) for line in pins if line.specifiers})
    notes = [
        f"{where}: torch-matrix does not edit {Path(where).name} (it is code); paste the merged "
        f"requirement(s) yourself:"
    ]
    found: set[str] = set()
    for match in _QUOTED.finditer(text):
        candidate = match.group(2).strip()
        try:
            name = canonicalize_name(Requirement(candidate).name)
        except InvalidRequirement:
            continue
        if name not in wanted or name in found:
            continue
        found.add(name)
        try:
            merged = update_requirement(candidate, pins, notes, where)
        except InvalidRequirement:
            continue
        lines = merged if merged is not None else [candidate]
        notes.append(
            f"  {candidate!r} -> "
            + " | ".join(repr(line) for line in lines)
            + ("" if merged is not None else " (already right)")
        )
    for name in wanted:
        if name not in found:
            line = " | ".join(
                line.text()
                for line in pins
                if canonicalize_name(line.package) == name and line.specifiers
            )
            notes.append(
                f"  {name} is not required there as a string torch-matrix can read; "
                f"constrain it with: {line}"
            )
    return notes


# ----------------------------------------------------------------------------- files

APPLY_HINT = (
    "--apply takes an existing requirements*.txt or pyproject.toml (UTF-8 text); "
    "for setup.py it prints the merged requirement to paste"
)


def apply_pins(
    path: str | os.PathLike[str], pins: Sequence[RequirementLine], *, dry_run: bool = False
) -> ApplyResult:
    """Update ``path`` (requirements*.txt or pyproject.toml) unless ``dry_run``."""
    target = Path(path)
    try:
        with open(target, encoding="utf-8", newline="") as handle:
            old = handle.read()
    except OSError as error:
        raise UserError(
            f"cannot read: {error.strerror or error}", str(target), hint=APPLY_HINT
        ) from None
    except UnicodeDecodeError:
        raise UserError("not a UTF-8 text file", str(target), hint=APPLY_HINT) from None
    notes: list[str] = []
    present: set[str] = set()
    bom = (
        "\ufeff" if old.startswith("\ufeff") else ""
    )  # a UTF-8 byte-order mark: kept, not a requirement
    if target.suffix not in (".txt", ".in", ".toml") and target.name != "requirements":
        # setup.py, setup.cfg: code or free-form config, never edited; say what to paste instead.
        return ApplyResult(
            target, old, old, (), tuple(paste_advice(old, pins, str(target))), edited=False
        )
    if target.name == "pyproject.toml" or target.suffix == ".toml":
        new, changes = update_pyproject(old[len(bom) :], pins, str(target), notes, present)
    else:
        new, changes = update_requirements_txt(old[len(bom) :], pins, str(target), notes, present)
    new = bom + new
    for name in sorted({line.package for line in pins if line.specifiers}):
        if canonicalize_name(name) not in present:
            wanted = " | ".join(
                line.text() for line in pins if line.package == name and line.specifiers
            )
            notes.append(
                f"{target}: {name} is not a direct dependency here (not added); "
                f"constrain it with constraints.txt: {wanted}"
            )
    result = ApplyResult(target, old, new, tuple(changes), tuple(notes))
    if result.changed and not dry_run:
        atomic_write(target, new)
    return result
