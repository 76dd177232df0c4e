"""Which files ``load_results`` reads under a folder: one walk (``world.resultfiles.candidate_files``)
that finds exactly what ``Path.rglob("cells/*.json")`` and ``rglob("results.json")`` find, on a
tree with the odd cases (symlinked folders and files, a folder named like a result file, a
broken link, a ``cells`` folder inside a ``cells`` folder, merged files beside cell files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix.world.resultfiles import candidate_files


def _tree(root: Path) -> None:
    for folder in ("a/run1/cells", "a/run2/cells/sub/cells", "real/cells", "c/cells/dir.json", "d"):
        (root / folder).mkdir(parents=True)
    for name in (
        "a/run1/cells/x.json",
        "a/run1/cells/.json",
        "a/run1/cells/y.JSON",  # not *.json: glob is case-sensitive here
        "a/run1/cells/notes.txt",
        "a/run2/cells/sub/cells/z.json",
        "a/run2/cells/sub/results.json",  # derived: cell files below its folder
        "a/results.json",  # derived: cell files below
        "real/cells/r.json",
        "d/results.json",  # a merged file with no cell files around it: read
    ):
        (root / name).write_text("{}")
    (root / "b").mkdir()
    (root / "b" / "results.json").write_text("{}")  # derived: b/cells is a folder (a symlink)
    (root / "b" / "cells").symlink_to(root / "real" / "cells")  # rglob lists a symlinked cells/
    (root / "linked").symlink_to(root / "a")  # rglob's ** does not walk into it
    (root / "c" / "cells" / "broken.json").symlink_to(root / "nowhere.json")
    (root / "c" / "cells" / "l.json").symlink_to(root / "real" / "cells" / "r.json")


def _by_glob(root: Path) -> set[Path]:
    """What the two globs find that is a file (before the derived merged files are left out)."""
    cells = set(root.rglob("cells/*.json"))
    if root.name == "cells":
        cells |= set(root.glob("*.json"))
    return {path for path in cells | set(root.rglob("results.json")) if path.is_file()}


@pytest.mark.parametrize(
    "start", ["", "a", "b", "c/cells", "a/run2/cells", "linked", "real/cells", "d", "nowhere"]
)
def test_one_walk_finds_what_the_globs_find(tmp_path: Path, start: str) -> None:
    _tree(tmp_path)
    root = tmp_path / start if start else tmp_path
    found = candidate_files(root)
    assert found == sorted(found, key=lambda path: path.parts)
    derived = {
        tmp_path / "a/results.json",
        tmp_path / "a/run2/cells/sub/results.json",
        tmp_path / "b/results.json",
        tmp_path / "linked/results.json",
        tmp_path / "linked/run2/cells/sub/results.json",
    }
    assert set(found) == _by_glob(root) - derived


def test_the_whole_tree(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert [path.relative_to(tmp_path).as_posix() for path in candidate_files(tmp_path)] == [
        "a/run1/cells/.json",
        "a/run1/cells/x.json",
        "a/run2/cells/sub/cells/z.json",
        "b/cells/r.json",
        "c/cells/l.json",
        "d/results.json",
        "real/cells/r.json",
    ]
