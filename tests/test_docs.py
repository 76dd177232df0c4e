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
        REPO / "CONTRIBUTING.md",
        *sorted((REPO / "benchmarks").glob("*.md")),
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


def _prose(path: Path) -> str:
    return re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_is_for_users() -> None:
    """At most 150 lines; each term defined (in bold) where it first appears; every verdict in
    the table on one line; the contributor's material (the suite's parts, the fault suite, the
    browser) in CONTRIBUTING.md, not in the user's path."""
    from torch_matrix.judge.verdict import VERDICTS
    from torch_matrix.report.rows import MISSING, TEXT_SYMBOLS

    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 150
    prose = _prose(readme)
    for term in ("variant", "cell", "probe", "evidence", "counterfactual"):
        first = re.search(rf"\b{term}s?\b", prose, re.I)
        assert first, term
        assert prose[first.start() - 2 : first.start()] == "**", f"{term!r} used before defined"
    for kind in [*VERDICTS, MISSING]:
        row = f"| `{TEXT_SYMBOLS[kind]} {kind}` |"
        assert row in prose, row
    contributing = " ".join(_prose(REPO / "CONTRIBUTING.md").split())
    for detail in ("unshare -m", "tmpfs", "Chromium", "jq", "REAL-WHEEL CHECKS DID NOT RUN"):
        assert detail not in prose and detail in contributing, detail


def test_the_benchmarks_readme_is_current_figures_and_no_machine_paths() -> None:
    for page in sorted((REPO / "benchmarks").glob("*.md")):
        assert not re.search(r"/work/|/root/", page.read_text(encoding="utf-8")), page.name
    text = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert "## Current figures" in text and "## Reproduce" in text
    assert "TORCH_MATRIX_RERUN_ALWAYS" not in text
