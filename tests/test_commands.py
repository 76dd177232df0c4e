"""The command registry (``torch_matrix.cli.COMMANDS``, pip's ``commands/__init__.py`` as the model):
one line per command, one dispatch, ``--help`` and ``torch-matrix help`` built from it."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types

import pytest

from torch_matrix import cli


def test_a_new_command_is_one_registry_line(monkeypatch, capsys) -> None:
    module = types.ModuleType("torch_matrix_test_hello")

    def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
        parser.add_argument("--name", default="world")

    def main(args: argparse.Namespace) -> int:
        print(f"hello {args.name} from {args.command}")
        return 3

    module.add_arguments, module.main = add_arguments, main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # The one line: nothing else in torch_matrix/cli changes.
    monkeypatch.setitem(cli.COMMANDS, "hello", cli.CommandInfo(module.__name__, "say hello"))

    assert cli.main(["hello", "--name", "matrix"]) == 3
    assert capsys.readouterr().out == "hello matrix from hello\n"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "hello" in top and "say hello" in top
    assert cli.main(["help"]) == 0
    listed = capsys.readouterr().out
    assert any(line.split()[:3] == ["hello", "say", "hello"] for line in listed.splitlines())
    with pytest.raises(SystemExit):
        cli.main(["hello", "--colour"])  # its own options only
    assert "unrecognized arguments: --colour" in capsys.readouterr().err


def test_every_command_in_the_registry_has_its_options_and_its_work(capsys) -> None:
    assert cli.main(["help"]) == 0
    listed = capsys.readouterr().out
    for name, info in cli.COMMANDS.items():
        module = cli.command_module(name)
        assert module.__name__ == info.module
        assert callable(module.add_arguments) and callable(module.main), name
        assert f"  {name}" in listed and info.summary in listed


def test_parsing_a_command_line_imports_only_that_command() -> None:
    """pip's model: the chosen command's module alone; ``--help`` lists the rest from the registry."""
    code = (
        "import sys; from torch_matrix.cli import parse_args; parse_args(['plan', '--json']); "
        "print(sorted(m for m in sys.modules if m.startswith('torch_matrix.cli.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['torch_matrix.cli.plan']"
