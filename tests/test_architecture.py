"""docs/ARCHITECTURE.md is the map, and the code keeps to it: every module is on it, and every
import (lazy ones included) goes to a row above or to a module listed earlier in its own row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "matrix"


def rows() -> list[tuple[str, list[str]]]:
    """(layer, module tokens in order) for each table row of the map."""
    found = []
    for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---") or not line.startswith("|"):
            continue
        tokens = re.findall(r"`([^`]+)`", cells[1])
        found.append((cells[0], [t for t in tokens if re.fullmatch(r"[\w*]+/?|[\w]+\.py", t)]))
    return found


def modules() -> dict[str, Path]:
    """Dotted names under matrix/ ("report", "pins", "pins.search", "__init__" as "matrix")."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1] or ["matrix"]
        found[".".join(parts)] = path
    return found


def rank_of(name: str, table: list[tuple[str, list[str]]]) -> tuple[int, int, str] | None:
    """(row, position, row name) of a module on the map; the package's __init__ counts as vocabulary."""
    if name == "matrix":
        return (0, -1, table[0][0])
    for row, (layer, tokens) in enumerate(table):
        for position, token in enumerate(tokens):
            token = token.removesuffix(".py").rstrip("/")
            if token == name or name.startswith(token + ".") or (
                    token == "*_cli" and name.endswith("_cli")):
                return (row, position, layer)
    return None


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "matrix":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            stem = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{stem}.{a.name}".strip(".") for a in node.names] if not node.module else [stem]
        elif node.module and node.module.split(".")[0] == "matrix":
            targets = [node.module.removeprefix("matrix").strip(".") or "matrix"]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_every_module_is_on_the_map():
    table = rows()
    assert len(table) >= 8
    missing = [name for name in modules() if rank_of(name, table) is None]
    assert missing == [], "add these modules to docs/ARCHITECTURE.md (the row of their layer)"


def test_imports_follow_the_map():
    table = rows()
    known = modules()
    wrong = []
    for name, path in known.items():
        mine = rank_of(name, table)
        for target in sorted(imports_of(name, path, set(known))):
            theirs = rank_of(target, table)
            if mine is None or theirs is None:
                continue  # test_every_module_is_on_the_map names it
            same_unit = name.split(".")[0] == target.split(".")[0] == "pins"
            same_row_allowed = mine[0] == theirs[0] and "each other" in _may_import(mine[0])
            if same_unit or same_row_allowed or theirs[:2] < mine[:2]:
                continue
            wrong.append(f"{name} ({mine[2]}) imports {target} ({theirs[2]})")
    assert wrong == [], "an import against the map in docs/ARCHITECTURE.md: move the code, or the module"


def _may_import(row: int) -> str:
    for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] == rows()[row][0]:
            return cells[2]
    return ""


def test_the_map_fits_on_a_screen():
    assert len((ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()) <= 30
