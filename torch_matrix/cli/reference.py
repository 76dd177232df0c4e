"""``torch-matrix help [spec [TOPIC]]``: the spec reference that ships in the package.

Error hints point here (``torch-matrix help spec index``) rather than at a repository path an
installed copy does not have. The text is docs/spec.md, packaged through the symlink
``torch_matrix/spec/reference.md`` (setuptools copies its target into the sdist and the wheel); a topic selects the
sections whose heading names it.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import resources
from typing import TextIO

from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError

TOPICS_HINT = (
    "`torch-matrix help spec` prints the whole reference; `torch-matrix help` lists the topics"
)


def reference_text() -> str:
    return resources.files("torch_matrix.spec").joinpath("reference.md").read_text(encoding="utf-8")


def sections(text: str) -> list[tuple[int, str, str]]:
    """(level, heading, text with the heading) of each ``##`` and ``###`` section."""
    found: list[tuple[int, str, list[str]]] = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else re.match(r"^(#{2,3}) (.+)$", line)
        if heading:
            found.append((len(heading.group(1)), heading.group(2).strip(), [line]))
        elif found:
            found[-1][2].append(line)
    return [(level, title, "\n".join(lines).strip() + "\n") for level, title, lines in found]


def _words(title: str) -> set[str]:
    return {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", title)}


def topic(text: str, name: str) -> str | None:
    """The sections whose heading names ``name`` (a key such as ``index``, ``probes.timeout`` or
    ``[index]``, or a word such as ``environment``), a ``##`` section with its subsections; None
    when no heading does."""
    wanted = name.strip().strip("[]`").lower().split(".")[0]
    forms = {wanted, wanted + "s", wanted + "es"}
    parts: list[str] = []
    parent_taken = False
    for level, title, body in sections(text):
        if level == 2:
            parent_taken = bool(forms & _words(title))
            if parent_taken:
                parts.append(body)
        elif parent_taken or forms & _words(title):
            parts.append(body)
    return "\n".join(parts) if parts else None


def topics(text: str) -> list[str]:
    return [title for level, title, _body in sections(text) if level == 2]


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    text = reference_text()
    subject, name = getattr(args, "subject", None), getattr(args, "topic", None)
    if subject is None:
        from torch_matrix.cli import command_list

        out.write("torch-matrix COMMAND (each command's options: torch-matrix COMMAND --help):\n")
        out.write(command_list())
        out.write(
            "torch-matrix help spec [TOPIC]: the spec reference (every key, every environment "
            "variable). Topics:\n"
        )
        out.writelines(f"  {title}\n" for title in topics(text))
        out.write("A key works as a topic too: torch-matrix help spec index\n")
        return 0
    if subject in ("env", "environment"):
        out.write(settings.render_table())
        return 0
    if subject != "spec":
        raise UserError(
            f"no help on {subject!r}",
            where="help",
            hint="`torch-matrix help spec [TOPIC]`; each command's options: `torch-matrix COMMAND --help`",
        )
    if not name:
        out.write(text)
        return 0
    found = topic(text, name)
    if found is None:
        raise UserError(
            f"the spec reference has no section on {name!r}", where="help spec", hint=TOPICS_HINT
        )
    out.write(found)
    return 0


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix help``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.add_argument(
        "subject",
        nargs="?",
        choices=("spec", "env", "environment"),
        help="spec: the spec reference; env: the environment variables",
    )
    parser.add_argument(
        "topic", nargs="?", help="a key or topic, e.g. index, extras, probes, interpreters"
    )
