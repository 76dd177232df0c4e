"""What a project's own configuration says about running its tests (issue 44), for ``discover``:
pytest's configuration (the file pytest itself reads first) and the test session of tox or nox
(its pytest call and what it installs). Pure: functions of the files' texts; a file that cannot be
parsed reads as absent.
"""

from __future__ import annotations

import ast
import configparser
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from torch_matrix.spec.parse import TOML_ERRORS, tomllib

TEST_WORDS = ("test", "tests", "testing", "unit", "unittests", "pytest")
# options a run drops: they write reports or measure coverage, they test nothing
DROPPED_FLAGS = ("--cov", "--no-cov", "--junitxml", "--junit-xml", "--html", "--durations")

# -- pytest's configuration ---------------------------------------------------------------------


@dataclass(frozen=True)
class PytestIni:
    where: str
    testpaths: tuple[str, ...]
    addopts: tuple[str, ...]
    keys: frozenset[str]
    required_plugins: tuple[str, ...]


def pytest_ini(texts: Mapping[str, str]) -> PytestIni | None:
    """pytest's own configuration, from the file pytest itself would read first."""
    candidates: list[tuple[str, dict[str, Any] | None]] = [
        ("pytest.ini [pytest]", _ini_section(texts.get("pytest.ini"), "pytest")),
        ("pyproject.toml [tool.pytest.ini_options]", _pyproject_pytest(texts)),
        ("tox.ini [pytest]", _ini_section(texts.get("tox.ini"), "pytest")),
        ("setup.cfg [tool:pytest]", _ini_section(texts.get("setup.cfg"), "tool:pytest")),
    ]
    for where, table in candidates:
        if table is None:
            continue
        return PytestIni(
            where=where,
            testpaths=tuple(words(table.get("testpaths", ""))),
            addopts=tuple(words(table.get("addopts", ""))),
            keys=frozenset(table),
            required_plugins=tuple(words(table.get("required_plugins", ""))),
        )
    return None


def _pyproject_pytest(texts: Mapping[str, str]) -> dict[str, Any] | None:
    data = toml(texts.get("pyproject.toml"))
    tool = data.get("tool", {}).get("pytest", {}) if isinstance(data.get("tool"), dict) else {}
    table = tool.get("ini_options") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def _ini_section(text: str | None, section: str) -> dict[str, Any] | None:
    parser = ini(text)
    if parser is None or not parser.has_section(section):
        return None
    return dict(parser.items(section, raw=True))


def ini(text: str | None) -> configparser.ConfigParser | None:
    if not text:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def toml(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        return tomllib.loads(text)
    except TOML_ERRORS:
        return {}


def words(value: Any) -> list[str]:
    """An ini value (a string, split as a shell would) or a TOML list, as words."""
    if isinstance(value, list):
        return [str(v) for v in value]
    try:
        return shlex.split(str(value or ""))
    except ValueError:
        return str(value or "").split()


# -- the test session of tox or nox -------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    where: str
    args: tuple[str, ...]  # what follows "pytest" in its command
    deps: tuple[str, ...]  # requirements, "-r FILE", ".[extra]"
    extras: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # what it sets for the tests (tox's setenv)


def tox_session(texts: Mapping[str, str]) -> Session | None:
    parser = ini(texts.get("tox.ini"))
    if parser is None:
        return None
    for section in parser.sections():
        if section != "testenv" and not section.startswith("testenv:"):
            continue
        env = section.partition(":")[2]
        if env and not any(word in env.lower() for word in ("py", *TEST_WORDS)):
            continue  # lint, docs, ...
        values = dict(parser.items(section, raw=True))
        for line in values.get("commands", "").splitlines():
            args = _pytest_args(_substitute(line))
            if args is not None:
                return Session(
                    where=f"tox.ini [{section}]",
                    args=tuple(args),
                    deps=tuple(
                        _substitute(d).strip()
                        for d in values.get("deps", "").splitlines()
                        if d.strip() and not d.strip().startswith(("#", "{["))
                    ),
                    extras=tuple(words(values.get("extras", "").replace(",", " "))),
                    env=_setenv(values.get("setenv", "")),
                )
    return None


def _setenv(text: str) -> tuple[tuple[str, str], ...]:
    """tox's ``setenv`` lines ``NAME = value``, those with a plain value only (no ``{...}``
    substitution: a tox path means nothing outside tox)."""
    found = []
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and "{" not in value:
            found.append((name, value))
    return tuple(found)


def _substitute(text: str) -> str:
    text = re.sub(r"\{posargs:([^}]*)\}", r"\1", text)
    text = re.sub(r"\{(?:toxinidir|tox_root)\}/?", "", text)
    return re.sub(r"\{[^}]*\}", "", text)


def _pytest_args(line: str) -> list[str] | None:
    """The arguments of a pytest call in a command line, None where it calls no pytest."""
    found = words(line)
    for i, word in enumerate(found):
        if word in ("pytest", "py.test") or word.endswith("/pytest"):
            return found[i + 1 :]
        if word == "-m" and i + 1 < len(found) and found[i + 1] == "pytest":
            return found[i + 2 :]
    return None


def nox_session(texts: Mapping[str, str]) -> Session | None:
    text = texts.get("noxfile.py")
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any(word in node.name.lower() for word in TEST_WORDS):
            continue
        args: list[str] | None = None
        deps: list[str] = []
        for call in ast.walk(node):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
                continue
            strings = [
                a.value
                for a in call.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            if call.func.attr == "install":
                deps += _install_words(strings)
            elif call.func.attr == "run" and args is None:
                found = _pytest_args(" ".join(shlex.quote(s) for s in strings))
                if found is not None:
                    args = found
        if args is not None:
            return Session(f"noxfile.py session {node.name}", tuple(args), tuple(deps), ())
    return None


def _install_words(strings: Sequence[str]) -> list[str]:
    """``session.install("-e", ".[test]", "-r", "req.txt", "x")`` -> [".[test]", "-r req.txt", "x"]"""
    deps: list[str] = []
    follows_r = False
    for word in strings:
        if follows_r:
            deps.append(f"-r {word}")
            follows_r = False
        elif word in ("-r", "--requirement"):
            follows_r = True
        elif not word.startswith("-"):
            deps.append(word)
    return deps


def drop_reporting(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if any(
            arg == f or arg.startswith(f + "=") or arg.startswith(f + "-") for f in DROPPED_FLAGS
        ):
            skip_next = "=" not in arg and arg in (
                "--cov-report",
                "--junitxml",
                "--html",
                "--cov-config",
            )
            continue
        kept.append(arg)
    return kept
