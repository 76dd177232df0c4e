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


# A path of the machine a page was written on: a reader has none of them.
MACHINE_PATH = re.compile(r"/work/|/root/|/home/[A-Za-z0-9_.-]+/")
# Not pages: a checkout's own tools, and the goldens, which are rendered from a recorded run's
# data byte for byte (tests/test_report_golden.py).
NOT_PAGES = {".git", ".venv", ".nox", "node_modules", "build", "dist", "golden"}


def _every_page() -> list[Path]:
    return [
        path
        for path in sorted(REPO.rglob("*.md"))
        if not NOT_PAGES & set(path.relative_to(REPO).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


def test_no_page_names_a_machine_path() -> None:
    pages = _every_page()
    names = {path.relative_to(REPO).as_posix() for path in pages}
    assert {"README.md", "CONTRIBUTING.md", "docs/ecosystem.md", "benchmarks/README.md"} <= names
    assert any(name.startswith("examples/") for name in names)
    found = [
        f"{path.relative_to(REPO)}:{number}: {match.group()}"
        for path in pages
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in [MACHINE_PATH.search(line)]
        if match
    ]
    assert found == [], (
        "say it by role (~/.cache/uv, <venv>, the project), not by this machine's path"
    )


def test_the_machine_path_rule_sees_a_path() -> None:
    assert MACHINE_PATH.search("under `/work/locks/rw`") and MACHINE_PATH.search("/home/ann/x")
    assert not MACHINE_PATH.search("~/.cache/uv and /opt/python3.12/bin/python")


def test_the_benchmarks_readme_is_current_figures() -> None:
    text = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert "## Current figures" in text and "## Reproduce" in text
    assert "TORCH_MATRIX_RERUN_ALWAYS" not in text


def _code_names(text: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", text)


def test_the_docs_list_exactly_the_standard_probes() -> None:
    """One list of the standard probes (``probes.discovery.STANDARD_PROBES``, a module each in
    probes/standard/); the contracts name them in that order and the catalog (with probes.md for
    the two it leaves to that page) describes each: none missing, none extra."""
    from torch_matrix.probes.discovery import STANDARD_PROBES

    modules = {
        path.stem
        for path in (REPO / "torch_matrix" / "probes" / "standard").glob("*.py")
        if not path.stem.startswith("_")
    }
    assert set(STANDARD_PROBES) == modules and len(STANDARD_PROBES) == len(modules)
    contracts = (DOCS / "contracts.md").read_text(encoding="utf-8")
    section = contracts.split("### Standard probe names", 1)[1].split("\n### ", 1)[0]
    listed = [name for name in _code_names(section) if name != "torch_matrix"]
    assert listed[: len(STANDARD_PROBES)] == list(STANDARD_PROBES), "docs/contracts.md"
    assert not set(listed[len(STANDARD_PROBES) :]) & modules
    catalog = (DOCS / "probe-catalog.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)` \|", catalog, re.M)
    elsewhere = {"install_sanity", "lazy_cuda_init"}  # documented in probes.md, as the catalog says
    assert sorted(rows) == sorted(set(STANDARD_PROBES) - elsewhere), "docs/probe-catalog.md"
    probes_md = (DOCS / "probes.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in probes_md for name in elsewhere), "docs/probes.md"
