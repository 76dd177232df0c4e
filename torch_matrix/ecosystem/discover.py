"""A zero-config ecosystem entry (issue 44): what a project's unpacked sdist implies about running its
tests. Pure: a function of the tree's file names and the text of its configuration files.

It finds, each with the reason it gives:

- **where the tests are**: pytest's own ``testpaths`` (pytest.ini, pyproject's
  ``[tool.pytest.ini_options]``, tox.ini's ``[pytest]``, setup.cfg's ``[tool:pytest]``, in pytest's
  order), else the test folder or files of a tox or nox test session, else a ``tests``/``test``
  folder at the top or inside the package;
- **what the tests need**: the project's test extras (``test``, ``tests``, ``testing``; ``dev`` when
  there are none), a PEP 735 test group, the requirement files a tox/nox test session installs
  or that are named like test requirements, and the pytest plugins the configured options need
  (``--cov`` needs pytest-cov, ``-n`` pytest-xdist, ...);
- **whether torchvision pairs with torch**: the project or its test needs require it;
- **the command**: ``python -m pytest`` with the test locations and the options a tox/nox test
  session passes (coverage and report flags dropped: they test nothing).

Hand keys in a projects file override each finding (``projects``); ``source``
reads the files this module asks for (``wanted``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from torch_matrix.ecosystem.projects import Project
from torch_matrix.ecosystem.testconfig import (
    PytestIni,
    Session,
    drop_reporting,
    nox_session,
    pytest_ini,
    tox_session,
)
from torch_matrix.ecosystem.testneeds import (
    EGG_REQUIRES_RE,
    REQUIREMENT_FILE_RE,
    SCANNED_FILE_RE,
    TORCH_FAMILY,
    dependencies,
    imported,
    name_of,
    needs,
    plugins,
    unique,
    unshipped,
)

PYTEST = "python -m pytest -q -p no:cacheprovider"
CONFIG_FILES = ("PKG-INFO", "pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini", "noxfile.py")
TEST_FILE_RE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")
MAX_SCANNED = 400  # test files whose imports are read


@dataclass(frozen=True)
class Discovery:
    """What a sdist's files imply: each finding, and the reasons, in the order they were found."""

    name: str
    tests: tuple[str, ...]  # the test locations (folders or files) the command runs
    command: str
    extras: tuple[str, ...]
    requires: tuple[str, ...]
    torchvision: bool
    reasons: tuple[str, ...]

    def lines(self) -> list[str]:
        return [
            f"tests:       {' '.join(self.tests) or '(none found)'}",
            f"command:     {self.command}",
            f"extras:      {', '.join(self.extras) or '(none)'}",
            f"requires:    {', '.join(self.requires) or '(none)'}",
            f"torchvision: {'yes' if self.torchvision else 'no'}",
            "why:",
            *(f"  - {reason}" for reason in self.reasons),
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tests": list(self.tests),
            "command": self.command,
            "extras": list(self.extras),
            "requires": list(self.requires),
            "torchvision": self.torchvision,
            "reasons": list(self.reasons),
        }


class NoTests(ValueError):
    """The sdist ships no tests: the message says what was looked for."""


def wanted(paths: Iterable[str]) -> list[str]:
    """Which of the tree's files ``discover`` reads: its configuration and requirement files."""
    found: list[str] = []
    scanned: list[str] = []
    for path in paths:
        if path in CONFIG_FILES or REQUIREMENT_FILE_RE.search(path) or EGG_REQUIRES_RE.match(path):
            found.append(path)
        elif SCANNED_FILE_RE.search(path):
            scanned.append(path)
    return sorted(found) + sorted(scanned)[:MAX_SCANNED]


def discover(name: str, paths: Sequence[str], texts: Mapping[str, str]) -> Discovery:
    """``paths``: every file of the tree, relative, with ``/``; ``texts``: the files ``wanted``
    names that were read. Raises ``NoTests`` when the tree has no tests to run."""
    files = set(paths)
    folders = _folders(files)
    reasons: list[str] = []
    ini = pytest_ini(texts)
    session = tox_session(texts) or nox_session(texts)
    tests = _test_locations(ini, session, files, folders, reasons)
    if not tests:
        raise NoTests(
            "no tests in the sdist: no pytest testpaths, no tox or nox test session, no tests/ or "
            "test/ folder, no test_*.py file"
        )
    extras, requires = needs(texts, session, files, reasons)
    args = [a for a in (session.args if session else ()) if not _is_location(a)]
    args = drop_reporting(args)
    requires = [*requires, *plugins(ini, args, requires, reasons)]
    own = dependencies(texts, extras)
    requires += imported(name, texts, [*requires, *own], extras, reasons)
    reasons += unshipped(name, paths, texts, [*requires, *own], extras)
    torchvision = any(name_of(r) == "torchvision" for r in [*requires, *own])
    if torchvision:
        reasons.append(
            "torchvision: the project or its tests require it (paired with each side's torch)"
        )
    requires = unique([r for r in requires if name_of(r) not in TORCH_FAMILY])
    if not any(name_of(r) == "pytest" for r in requires):
        requires.insert(0, "pytest")
    env = [f"{name}={shlex.quote(value)}" for name, value in (session.env if session else ())]
    if env:
        reasons.append(f"environment: what {session.where if session else ''} sets (setenv)")
    command = " ".join(
        [*env, PYTEST, *(shlex.quote(a) for a in args), *(shlex.quote(t) for t in tests)]
    )
    return Discovery(
        name=name,
        tests=tuple(tests),
        command=command,
        extras=tuple(extras),
        requires=tuple(requires),
        torchvision=torchvision,
        reasons=tuple(reasons),
    )


# -- where the tests are ------------------------------------------------------------------------


def _folders(files: set[str]) -> set[str]:
    found: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            found.add("/".join(parts[:i]))
    return found


def _is_location(arg: str) -> bool:
    return not arg.startswith("-") and (
        "/" in arg or arg.endswith(".py") or arg in ("tests", "test")
    )


def _has_tests(location: str, files: set[str], folders: set[str]) -> bool:
    location = location.strip("/").removeprefix("./")
    if location in files:
        return location.endswith(".py")
    if location not in folders:
        return False
    prefix = location + "/"
    return any(f.startswith(prefix) and TEST_FILE_RE.search(f) for f in files)


def _in_test_place(path: str) -> bool:
    """A test file of a package: directly in its folder, or in a folder named for tests."""
    parts = path.split("/")
    if parts[0] == "src":
        parts = parts[1:]
    return len(parts) == 2 or (len(parts) > 2 and parts[-2] in ("tests", "test", "testing"))


def _test_locations(
    ini: PytestIni | None,
    session: Session | None,
    files: set[str],
    folders: set[str],
    reasons: list[str],
) -> list[str]:
    if ini and ini.testpaths:
        kept = [
            p.strip("/").removeprefix("./") for p in ini.testpaths if _has_tests(p, files, folders)
        ]
        if kept:
            reasons.append(f"tests: testpaths in {ini.where}")
            return kept
        reasons.append(f"{ini.where} names testpaths {' '.join(ini.testpaths)}: not in the sdist")
    if session:
        kept = [
            a.strip("/").removeprefix("./")
            for a in session.args
            if _is_location(a) and _has_tests(a.split("::")[0], files, folders)
        ]
        if kept:
            reasons.append(f"tests: the pytest call of {session.where}")
            return kept
    for top in ("tests", "test", "testing"):
        if _has_tests(top, files, folders):
            reasons.append(f"tests: the {top}/ folder at the top of the sdist")
            return [top]
    inner = sorted(
        f
        for f in folders
        if f.count("/") == 1
        and f.split("/")[1] in ("tests", "test")
        and _has_tests(f, files, folders)
    )
    inner += sorted(
        f
        for f in folders
        if f.count("/") == 2
        and f.split("/")[0] == "src"
        and f.split("/")[2] in ("tests", "test")
        and _has_tests(f, files, folders)
    )
    if inner:
        reasons.append(f"tests: the test folder inside the package ({', '.join(inner)})")
        return inner
    loose = sorted(f for f in files if "/" not in f and TEST_FILE_RE.search(f))
    if loose:
        reasons.append("tests: test_*.py files at the top of the sdist")
        return loose
    packages = sorted(
        {
            "/".join(f.split("/")[:2] if f.startswith("src/") else f.split("/")[:1])
            for f in files
            if TEST_FILE_RE.search(f) and _in_test_place(f)
        }
        - {"docs", "doc", "examples", "example", "benchmarks", "benchmark", "scripts"}
    )
    if packages:
        reasons.append(f"tests: test_*.py files inside the package ({', '.join(packages)})")
    return packages


def applied(project: Project, found: Discovery) -> Project:
    """A zero-config project with what its sdist implies: the discovered command; the extras and
    torchvision unless the entry gives them (its own win); requires: the discovered, then the
    entry's own (an entry's requirement replaces a discovered one of the same name)."""
    if not project.discover:
        return project
    own = {name_of(r) for r in project.requires}
    requires = [r for r in found.requires if name_of(r) not in own] + list(project.requires)
    return replace(
        project,
        command=found.command,
        extras=project.extras if "extras" in project.given else found.extras,
        torchvision=project.torchvision if "torchvision" in project.given else found.torchvision,
        requires=tuple(unique(requires)),
    )
