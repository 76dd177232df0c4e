"""The docs a user reads: the index splits them into the user's guide and the contributor docs,
every relative link resolves, and every error message troubleshooting.md quotes is one the
code still prints."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def _markdown_files() -> list[Path]:
    return [
        REPO / "README.md",
        *sorted(DOCS.glob("*.md")),
        *sorted((REPO / "examples").rglob("README.md")),
    ]


def test_the_index_lists_every_page_in_one_of_its_two_parts() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    user, contributor = index.split("## User's guide", 1)[1].split("## Contributor docs", 1)
    listed_user = set(re.findall(r"\]\(([\w.-]+\.md)", user))
    listed_contributor = set(re.findall(r"\]\(([\w.-]+\.md)", contributor))
    pages = {path.name for path in DOCS.glob("*.md")} - {"README.md"}
    assert listed_user & listed_contributor == set()
    assert sorted(pages - listed_user - listed_contributor) == []
    assert {
        "guide.md",
        "spec.md",
        "troubleshooting.md",
        "downstream.md",
        "nightly.md",
        "pins.md",
    } <= listed_user
    assert {"ARCHITECTURE.md", "contracts.md", "history-internals.md"} <= listed_contributor


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in _markdown_files():
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def _source_text() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8") for path in sorted((REPO / "torch_matrix").rglob("*.py"))
    )


def test_every_message_troubleshooting_quotes_is_printed_by_the_code() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    ours = text.split("## Not an error", 1)[0]
    messages = re.findall(r"^### `(.+)`$", ours, re.M)
    assert len(messages) >= 12
    source = _source_text()
    missing = []
    for message in messages:
        pieces = [piece.strip(" '\"") for piece in re.split(r"<[^>]+>|\.\.\.", message)]
        for piece in pieces:
            if len(piece) >= 8 and piece not in source:
                missing.append(f"{message!r}: {piece!r}")
    assert missing == []
