"""The spec's top-level ``install`` list: what goes into every cell besides the axis pins.

Items take the forms ``uv pip install`` takes, written relative to the spec's directory
(the project under test):

- a local path, with extras: ``.``, ``.[test]``, ``./libs/core``, ``-e ../other[dev]``;
  a directory that holds a ``pyproject.toml``, ``setup.py`` or ``setup.cfg`` is installed
  editable, so the cell tests the working tree; a wheel or archive path is installed as is;
- a requirements or constraints file: ``-r requirements.txt``, ``-c constraints.txt``;
- a PEP 508 requirement: ``pytest>=8``, ``numpy<2; python_version<'3.12'``.

Parsing and argument building are pure; ``install_digest`` and ``missing_paths`` read
files (the spec loader calls them, at the edge).

The cell's own pins (``torch==2.3.1``) go into the same resolution as the project's
requirements: the resolver may not move them, so they win over any looser requirement
of the project, and a project requirement that excludes them makes the cell
``unsatisfiable`` (see ``environment.install``), never an incompatibility.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

PATH = "path"
REQUIREMENTS_FILE = "requirements"
CONSTRAINTS_FILE = "constraints"
REQUIREMENT = "requirement"

PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
_FILE_OPTIONS = {
    "-r": REQUIREMENTS_FILE,
    "--requirement": REQUIREMENTS_FILE,
    "-c": CONSTRAINTS_FILE,
    "--constraint": CONSTRAINTS_FILE,
}
_EXTRAS = re.compile(r"^(?P<path>.*?)(?P<extras>\[[A-Za-z0-9_.,\s-]*\])?$")
_PYTEST = re.compile(r"(^|[\s/;&|(])(py\.test|pytest)(\s|$)")


@dataclass(frozen=True)
class InstallItem:
    text: str  # as written in the spec
    kind: str  # PATH | REQUIREMENTS_FILE | CONSTRAINTS_FILE | REQUIREMENT
    target: str = ""  # the path (for PATH and the file kinds), as written, without extras
    extras: str = ""  # "[test]" for PATH items
    editable: bool | None = None  # PATH: True when written with -e; None = decide from the path

    def absolute(self, base_dir: str) -> str:
        target = os.path.expanduser(self.target)
        return os.path.normpath(os.path.join(base_dir, target))


class InstallItemError(ValueError):
    """Why an install item is not one of the accepted forms (the spec turns it into a UserError)."""


def _looks_like_path(text: str) -> bool:
    if text.startswith((".", "/", "~")):
        return True
    head = text.split("[", 1)[0]
    return os.sep in head and "@" not in text and "://" not in text and ";" not in text


def parse_item(text: str) -> InstallItem:
    """Classify one ``install`` entry; raises ``InstallItemError`` with the fix."""
    item = text.strip()
    if not item:
        raise InstallItemError("empty entry")
    option, _, rest = item.partition(" ")
    if option in _FILE_OPTIONS or re.match(r"^-[rc]\S", item):
        if option not in _FILE_OPTIONS:  # "-rrequirements.txt"
            option, rest = item[:2], item[2:]
        target = rest.strip()
        if not target:
            raise InstallItemError(f"{option} needs a file name, e.g. '{option} requirements.txt'")
        return InstallItem(item, _FILE_OPTIONS[option], target=target)
    editable = None
    if option in ("-e", "--editable"):
        item, editable = rest.strip(), True
        if not item:
            raise InstallItemError("-e needs a path, e.g. '-e .[test]'")
        if not _looks_like_path(item):
            raise InstallItemError(
                f"-e {item!r}: only local paths can be editable (write './{item}')"
            )
    elif item.startswith("-"):
        raise InstallItemError(
            f"unsupported option {option!r} (accepted: a path such as '.[test]', "
            "'-e PATH', '-r FILE', '-c FILE' or a PEP 508 requirement)"
        )
    if _looks_like_path(item):
        match = _EXTRAS.match(item)
        assert match is not None
        path, extras = match.group("path").strip(), (match.group("extras") or "").replace(" ", "")
        if not path:
            raise InstallItemError(f"{item!r}: no path before the extras")
        if "[" in path or "]" in path:
            raise InstallItemError(
                f"{item!r}: malformed extras (expected PATH[extra1,extra2], e.g. '.[test]')"
            )
        return InstallItem(text.strip(), PATH, target=path, extras=extras, editable=editable)
    try:
        Requirement(item)
    except InvalidRequirement as error:
        raise InstallItemError(
            f"{item!r} is neither a path ('.[test]'), '-r FILE' nor a PEP 508 requirement: {error}"
        ) from None
    return InstallItem(item, REQUIREMENT)


def is_project_dir(path: str) -> bool:
    return os.path.isdir(path) and any(
        os.path.isfile(os.path.join(path, name)) for name in PROJECT_FILES
    )


def uv_args(items: Sequence[str], base_dir: str) -> list[str]:
    """The ``uv pip install`` arguments for ``items`` (absolute paths, editable where possible)."""
    args: list[str] = []
    for text in items:
        item = parse_item(text)
        if item.kind == REQUIREMENT:
            args.append(item.text)
        elif item.kind == REQUIREMENTS_FILE:
            args += ["-r", item.absolute(base_dir)]
        elif item.kind == CONSTRAINTS_FILE:
            args += ["-c", item.absolute(base_dir)]
        else:
            path = item.absolute(base_dir)
            editable = item.editable if item.editable is not None else is_project_dir(path)
            args += (["-e"] if editable else []) + [path + item.extras]
    return args


def requirement_names(items: Sequence[str]) -> set[str]:
    """Canonical names of the plain PEP 508 requirements among ``items``."""
    names: set[str] = set()
    for text in items:
        item = parse_item(text)
        if item.kind == REQUIREMENT:
            names.add(canonicalize_name(Requirement(item.text).name))
    return names


def runs_pytest(command: str) -> bool:
    """True when a command probe runs pytest (``pytest -q tests``, ``python -m pytest``, ``cd x && pytest``)."""
    return bool(_PYTEST.search(command))


def missing_paths(items: Sequence[str], base_dir: str) -> list[tuple[int, str, str]]:
    """(index, item, absolute path) for each path or file item that does not exist."""
    missing = []
    for i, text in enumerate(items):
        item = parse_item(text)
        if item.kind == REQUIREMENT:
            continue
        path = item.absolute(base_dir)
        if not os.path.exists(path):
            missing.append((i, text, path))
    return missing


def install_digest(items: Sequence[str], base_dir: str) -> str:
    """A digest of what the items declare: the requirement files' bytes and each local project's
    metadata files, so an edited requirements.txt or pyproject.toml reruns the cells ("" if none)."""
    digest = hashlib.sha256()
    found = False
    for text in items:
        item = parse_item(text)
        if item.kind == REQUIREMENT:
            continue
        path = item.absolute(base_dir)
        files = (
            [os.path.join(path, name) for name in PROJECT_FILES] if os.path.isdir(path) else [path]
        )
        for file in files:
            try:
                with open(file, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            found = True
            digest.update(f"{text}\0{os.path.basename(file)}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()[:16] if found else ""
