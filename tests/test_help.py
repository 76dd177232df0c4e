"""What a user who installed the package has: ``--version``, plain-text ``--help``, and the spec
reference (``torch-matrix help spec [TOPIC]``) that every error hint points to.

A hint names the shipped reference or a URL, never a repository path (``docs/spec.md``) that
an installed copy does not have; every ``torch-matrix help spec TOPIC`` a hint names has its
section; every spec key and every environment variable the code reads is in the reference.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix import __version__
from torch_matrix.cli import _build_parser, main
from torch_matrix.cli.reference import reference_text, topic, topics
from torch_matrix.spec.parse import _Parser
from torch_matrix.spec.reader import spec_hint

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "torch_matrix"


def _string_constants(path: Path) -> list[str]:
    """Every string literal of a module except docstrings (f-strings by their literal parts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_message_names_a_repository_path() -> None:
    found = [
        (path.relative_to(REPO), text)
        for path in _modules()
        for text in _string_constants(path)
        if re.search(r"\bdocs/|\bREADME\b|\bexamples/", text)
    ]
    assert found == [], (
        "a message names a file only a checkout has; name `torch-matrix help spec ...`"
    )


def test_every_reference_a_message_names_exists() -> None:
    text = reference_text()
    named = {
        (path.relative_to(REPO), match)
        for path in _modules()
        for literal in _string_constants(path)
        for match in re.findall(r"torch-matrix help spec ([A-Za-z_][\w.]*)", literal)
    }
    assert named, "no hint names the shipped reference"
    missing = [(where, name) for where, name in sorted(named) if topic(text, name) is None]
    assert missing == []


@pytest.mark.parametrize("key", _Parser.TOP_KEYS)
def test_every_spec_key_has_its_section_and_its_hint_points_there(key: str) -> None:
    text = reference_text()
    assert f"### `{key}`" in text
    assert f"`torch-matrix help spec {key}`" in spec_hint(key)
    assert f"### `{key}`" in topic(text, key)


def test_every_environment_variable_the_code_reads_is_in_the_reference() -> None:
    read = {
        name
        for path in _modules()
        for name in re.findall(
            r"\b(TORCH_MATRIX_[A-Z][A-Z_]*[A-Z]|PIP_[A-Z_]+[A-Z])\b", path.read_text()
        )
    }
    section = topic(reference_text(), "environment")
    assert section and read
    assert sorted(name for name in read if f"`{name}`" not in section) == []


def test_help_prints_the_reference_and_its_topics(capsys) -> None:
    assert main(["help"]) == 0
    listed = capsys.readouterr().out
    assert all(title in listed for title in topics(reference_text()))
    assert main(["help", "spec", "interpreters"]) == 0
    assert "### `interpreters`" in capsys.readouterr().out
    assert main(["help", "env"]) == 0
    assert "TORCH_MATRIX_RESULTS" in capsys.readouterr().out
    assert main(["help", "spec", "colour"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("torch-matrix: error: ") and err[1].startswith("  hint: ")


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"torch-matrix {__version__}"


def _all_help() -> dict[str, str]:
    parser = _build_parser()
    texts = {"torch-matrix": parser.format_help()}
    for action in parser._subparsers._group_actions:  # the subcommands
        for name, sub in action.choices.items():
            texts[name] = sub.format_help()
    return texts


def test_help_is_plain_text() -> None:
    """No reST (``literal``, :role:`x`, `link`_) and no contributor vocabulary in ``--help``."""
    texts = _all_help()
    assert len(texts) > 8
    for name, text in texts.items():
        assert "``" not in text, name
        assert not re.search(r":[a-z]+:`|`_\b", text), name
    top = " ".join(texts["torch-matrix"].split())
    assert "torch-matrix help spec" in top and "dispatches" not in top
