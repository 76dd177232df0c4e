"""Every ``torch-matrix`` command line the README and docs/ show parses with the real CLI (issue
45: docs and help texts that disagree with the tool). A command is taken from a code block line
or an inline code span that starts with ``torch-matrix``; usage synopses (``[--x]``, ``A | B``,
``...``) are left out, as are lines cut by a shell continuation. Each must get past argparse:
a renamed option, a removed command or a wrong argument count fails here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from torch_matrix.cli import parse_args

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_SPAN = re.compile(r"`(torch-matrix [^`]+)`")


def _commands(text: str) -> list[str]:
    found = [" ".join(match.group(1).split()) for match in _SPAN.finditer(text)]
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        stripped = line.strip().removeprefix("$ ")
        if in_block and stripped.startswith("torch-matrix ") and "   " not in stripped:
            found.append(stripped)
    return found


def _runnable(command: str) -> bool:
    synopsis = any(mark in command for mark in ("[", "...", "…", " | ", " / ", "/--", "{", "<"))
    return not synopsis and not command.rstrip().endswith("\\")


def _argv(command: str) -> list[str]:
    words = shlex.split(command.split(" #")[0], comments=False)
    for end in ("|", ">", ">>", "&&", ";", "2>&1"):
        if end in words:
            words = words[: words.index(end)]
    placeholders = {"N": "2", "k/N": "1/2", "K/N": "1/2"}
    return [placeholders.get(word, word) for word in words[1:]]


CASES = sorted(
    {(page.name, command) for page in PAGES for command in _commands(page.read_text("utf-8"))}
)


def test_the_pages_show_commands() -> None:
    assert len([c for c in CASES if _runnable(c[1])]) >= 40


@pytest.mark.parametrize(("page", "command"), [c for c in CASES if _runnable(c[1])])
def test_a_documented_command_parses(page: str, command: str) -> None:
    """A command line parses; a command named in prose (``torch-matrix repro``, ``torch-matrix
    ecosystem run``) exists, with its verb."""
    from torch_matrix.cli import COMMANDS

    argv = _argv(command)
    words = [word for word in argv if not word.startswith("-")]
    if argv and argv == words and len(argv) <= 2 and argv[0] in COMMANDS:
        argv = [*argv, "--help"]  # a reference to the command (and its verb): its help must print
    try:
        parse_args(argv)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            pytest.fail(f"{page}: `{command}` does not parse with torch-matrix ({exit_})")


def test_plan_help_says_what_plan_does_without_a_spec(tmp_path, monkeypatch, capsys) -> None:
    """Issue 45: `plan --help` promised the built-in default spec, while `plan` with no spec found
    is an error unless --default. The help says what the command does."""
    from torch_matrix.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    assert main(["plan"]) == 2
    assert "no spec found here" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["plan", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    spec_help = shown[shown.index("--spec SPEC") : shown.index("--default ")]
    assert "--default" in spec_help and "an error" in spec_help, spec_help


def test_the_readme_says_what_becomes_of_the_venvs() -> None:
    """Issue 45: the README said `.nox/` venvs are reused by the next run; each cell's venv is
    removed once its result is written (run/budget.py), unless TORCH_MATRIX_KEEP_VENVS=1."""
    from torch_matrix.vocab.settings import KEEP_VENVS_ENV, Settings

    assert Settings().keep_venvs is False  # the default removes them
    row = next(line for line in (REPO / "README.md").read_text().splitlines() if "`.nox/" in line)
    assert "removed" in row and KEEP_VENVS_ENV in row and "reused by the next run" not in row
