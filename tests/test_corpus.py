"""The real-project corpus (examples/corpus, docs/corpus.md; issue 42): every project's spec loads
with the real spec reader as a user's matrix.toml would, runs its maintainers' test command on the
three torch releases the table reports, names the release it was run on, and the table in
docs/corpus.md lists exactly the projects that have a spec, each at that release. A corpus
project is not one of the ecosystem list's (the corpus is projects the tool had never seen)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from torch_matrix.spec.install_items import runs_pytest
from torch_matrix.world.specfile import load_spec

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "examples" / "corpus"
TABLE = REPO / "docs" / "corpus.md"
RELEASES = ("2.4.1", "2.5.1", "2.6.0")

# examples/corpus/fetch.py: the script the README tells users to run
_LOADER = importlib.util.spec_from_file_location("corpus_fetch", CORPUS / "fetch.py")
assert _LOADER is not None and _LOADER.loader is not None
fetch = importlib.util.module_from_spec(_LOADER)
_LOADER.loader.exec_module(fetch)

PROJECTS = sorted(path.parent.name for path in CORPUS.glob("*/matrix.toml"))


def _table_rows() -> dict[str, str]:
    """project -> version, from docs/corpus.md's cell table (``| project | version | ...``)."""
    rows: dict[str, str] = {}
    for line in TABLE.read_text("utf-8").splitlines():
        found = re.match(r"\|\s*\[?([a-z0-9_.-]+)\]?(?:\([^)]*\))?\s*\|\s*(\d[\w.]*)\s*\|", line)
        if found and found.group(1) in PROJECTS:
            rows[found.group(1)] = found.group(2)
    return rows


def test_the_corpus_has_at_least_eight_projects() -> None:
    assert len(PROJECTS) >= 8, PROJECTS


@pytest.mark.parametrize("name", PROJECTS)
def test_a_corpus_spec_loads_and_runs_the_maintainers_tests(name: str, tmp_path: Path) -> None:
    project = tmp_path / name
    project.mkdir()
    shutil.copyfile(CORPUS / name / "matrix.toml", project / "matrix.toml")
    (project / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n', "utf-8")
    spec = load_spec(project / "matrix.toml", environ={})
    assert spec.torch.explicit == RELEASES
    assert spec.python == ("3.11",)
    assert spec.torchvision == "none"
    assert spec.probes.run == ("tests",)
    assert list(spec.probes.commands) == ["tests"]
    assert runs_pytest(spec.probes.commands["tests"])
    assert any(item == "." or item.startswith(".[") for item in spec.install)
    assert spec.followups is not None and spec.followups <= 3


def test_every_corpus_project_is_in_the_table_at_the_release_its_spec_names() -> None:
    assert _table_rows() == {name: fetch.spec_version(name) for name in PROJECTS}


def test_the_fetch_script_refuses_a_spec_that_names_no_release(tmp_path, monkeypatch) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "matrix.toml").write_text("# x, no version\n", "utf-8")
    monkeypatch.setattr(fetch, "HERE", tmp_path)
    with pytest.raises(SystemExit, match="does not name the release"):
        fetch.spec_version("x")


def test_no_corpus_project_is_in_the_ecosystem_lists() -> None:
    lists = "\n".join(
        path.read_text("utf-8").lower()
        for path in (REPO / "examples" / "ecosystem").iterdir()
        if path.suffix in (".txt", ".toml")
    )
    named = [
        name for name in PROJECTS if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", lists)
    ]
    assert named == []
