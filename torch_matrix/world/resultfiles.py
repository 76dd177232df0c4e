"""Which files under a folder hold cell results: the cell files of every ``cells/`` folder and the
merged ``results.json`` files that are not derived from cell files there, found in one walk.
Reading and checking them: ``world.results``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from torch_matrix.vocab import layout
from torch_matrix.vocab.layout import MERGED_NAME


def candidate_files(root: Path) -> list[Path]:
    """Cell files, and the merged ``results.json`` files that are not derived from cell files here.

    ``report`` writes ``results.json`` into the folder it read: one with a ``cells/`` folder
    beside it, or cell files anywhere below it, is derived from them and never evidence. Read
    back, it resurrected deleted cells and outvoted reruns whose machine's clock was behind
    (issue 25). A merged file with no cell files around it (a downloaded artifact, a copy
    passed by name) is read, and any cell file of the same cell beats its copy (``results._choose``).

    The files are those of ``root.rglob("cells/*.json")`` (and ``root.glob("*.json")`` when
    ``root`` is a ``cells`` folder) and ``root.rglob("results.json")`` that are files, found in
    one walk (``_folders_below``: each folder listed once, files told from their entries): the two
    globs walked the tree twice and stat'ed every cell file again, twice the CPU at 2,500 cells."""
    cell_files: set[Path] = set()
    holders: set[str] = set()  # folders that hold a cell file
    merged: list[Path] = []
    for folder, entries in _folders_below(root):
        if folder.name == layout.CELLS_DIR:  # root itself, or a folder's cells/ (walked)
            found = [folder / e.name for e in entries if e.name.endswith(".json") and _is_file(e)]
            if found:
                cell_files.update(found)
                holders.add(str(folder))
        for entry in entries:
            if entry.name == MERGED_NAME and _is_file(entry):
                merged.append(folder / entry.name)
            elif entry.name == layout.CELLS_DIR and _is_symlink_to_dir(entry):
                linked = (
                    folder / entry.name
                )  # a symlinked cells/: listed, as rglob does, not walked
                found = [linked / name for name in _json_files_in(linked)]
                if found:
                    cell_files.update(found)
                    holders.add(str(linked))

    def derived(merged: Path) -> bool:
        folder = str(merged.parent)
        return (merged.parent / layout.CELLS_DIR).is_dir() or any(
            holder == folder or holder.startswith(folder + os.sep) for holder in holders
        )

    files = cell_files | {path for path in merged if not derived(path)}
    return sorted(files, key=lambda path: path.parts)  # Path's order, 3x faster


def _folders_below(root: Path) -> Iterator[tuple[Path, list[os.DirEntry[str]]]]:
    """``root`` and every folder below it with their entries: the folders ``Path.rglob`` walks
    (not through symlinks; an unreadable folder is left out, as rglob leaves it)."""
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        yield folder, entries
        pending.extend(folder / entry.name for entry in entries if _is_dir_not_symlink(entry))


def _is_file(entry: os.DirEntry[str]) -> bool:
    """``Path.is_file()`` from a directory entry (follows a symlink; no stat for a plain file)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir_not_symlink(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _is_symlink_to_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:
        return False


def _json_files_in(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as scan:
            return [
                entry.name for entry in scan if entry.name.endswith(".json") and _is_file(entry)
            ]
    except OSError:
        return []
