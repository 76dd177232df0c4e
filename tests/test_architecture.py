"""The folders are the map: each layer of docs/ARCHITECTURE.md is a package under torch_matrix/, and a
module's layer is the folder it is saved in. These tests hold the code to that:

- every module sits in a layer package (only ``torch_matrix/__init__.py`` and the shipped
  ``torch_matrix/noxfile.py`` live at the top), and every package under torch_matrix/ is a layer;
- every import (lazy ones included) goes to the module's own package or to a layer above it,
  and the edges import nothing of ours but the vocabulary;
- the ecosystem mode is one package that only the commands (``cli/``, the shipped noxfile) import;
- no import circle inside a package;
- no module or package is named like a standard-library module or one of our dependencies
  (a folder on ``sys.path`` would shadow it: ``matrix/bisect.py`` once broke every downstream run);
- each layer's ``__init__.py`` says in its docstring what the layer holds and may import, and
  docs/ARCHITECTURE.md lists the layers in this order.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torch_matrix"

# The layers, bottom first: a module may import its own package and the packages before its own.
LAYERS = (
    "probes",
    "vocab",
    "judge",
    "spec",
    "plan",
    "pins",
    "report",
    "edges",
    "world",
    "run",
    "ecosystem",
    "cli",
)
# The edges do one I/O job each: of ours they may import the vocabulary only. The probe suite
# runs inside a cell's interpreter (stdlib only, Python 3.8+): it imports nothing else of ours.
NARROW = {"edges": ("vocab",), "probes": ()}
# The only modules at the top of torch_matrix/: the package itself, `python -m torch_matrix` and the
# shipped noxfile (commands).
TOP = {"torch_matrix": None, "noxfile": "cli", "__main__": "cli"}
# Names a folder on sys.path must not shadow: the standard library and what we depend on.
DEPENDENCIES = {
    "nox",
    "uv",
    "packaging",
    "tabulate",
    "jinja2",
    "jsonschema",
    "tomlkit",
    "tomli",
    "pytest",
    "hypothesis",
    "markupsafe",
}


def modules() -> dict[str, Path]:
    """Dotted names under torch_matrix/ ("report.terminal", "pins", "__init__" as "matrix")."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1] or ["torch_matrix"]
        found[".".join(parts)] = path
    return found


def layer_of(name: str) -> str | None:
    head = name.split(".")[0]
    if name in TOP:
        return TOP[name]
    return head if head in LAYERS and "." in name or name in LAYERS else None


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The matrix modules ``name`` imports, at module level or inside functions."""
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "torch_matrix":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [
                a.name.removeprefix("torch_matrix.")
                for a in node.names
                if a.name.startswith("torch_matrix.")
            ]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            stem = ".".join(base + ([node.module] if node.module else []))
            targets = (
                [f"{stem}.{a.name}".strip(".") for a in node.names] if not node.module else [stem]
            )
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "torch_matrix"
        ):
            stem = node.module.removeprefix("torch_matrix").strip(".")
            targets = [f"{stem}.{a.name}".strip(".") for a in node.names] + [stem or "torch_matrix"]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_every_module_sits_in_a_layer_package():
    stray = [name for name in modules() if layer_of(name) is None and name not in TOP]
    assert stray == [], (
        "these modules are not in a layer package: save each in the folder of its layer "
        f"({', '.join(LAYERS)}), or add a layer to LAYERS and docs/ARCHITECTURE.md"
    )


def test_every_package_under_matrix_is_a_layer_with_its_docstring():
    packages = {
        p.parent.relative_to(PACKAGE).parts[0]
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE
    }
    assert packages == set(LAYERS), (
        "a package under torch_matrix/ is a layer: add it to LAYERS and the map"
    )
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
        assert doc and "import" in doc, (
            f"torch_matrix/{layer}/__init__.py: say what it holds and may import"
        )


def _allowed(mine: str, theirs: str) -> bool:
    if mine == theirs:
        return True
    if mine in NARROW:
        return theirs in NARROW[mine]
    return LAYERS.index(theirs) < LAYERS.index(mine)


def test_imports_go_to_the_own_package_or_a_layer_above():
    known = modules()
    wrong = []
    for name, path in known.items():
        mine = layer_of(name)
        for target in sorted(imports_of(name, path, set(known))):
            theirs = layer_of(target)
            if name == "torch_matrix" or target == "torch_matrix" or mine is None or theirs is None:
                continue  # the package's own __version__; strays are named by the test above
            if not _allowed(mine, theirs):
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    assert wrong == [], "an import against the layers (docs/ARCHITECTURE.md): move the code"


# The ecosystem mode (torch_matrix/ecosystem/) is one package, like crater's: it may import every
# layer it needs, and only the commands (cli/, the shipped noxfile, `python -m torch_matrix`) import it.
MODE = "ecosystem"
MODE_IMPORTERS = {MODE, "cli"}


def foreign_imports_of_the_mode(known: dict[str, Path]) -> list[str]:
    """Each import of an ecosystem module by a module outside the ecosystem package and the
    commands, as "importer imports target"."""
    wrong = []
    for name, path in known.items():
        mine = layer_of(name) or name.split(".")[0]
        for target in sorted(imports_of(name, path, set(known))):
            if layer_of(target) == MODE and mine not in MODE_IMPORTERS:
                wrong.append(f"{name} imports {target}")
    return wrong


def test_only_the_commands_import_the_ecosystem_mode():
    known = modules()
    assert any(layer_of(name) == MODE for name in known)
    assert foreign_imports_of_the_mode(known) == [], (
        "only cli/ and the noxfile import torch_matrix.ecosystem: move the shared part to its layer"
    )


def test_the_ecosystem_check_names_a_foreign_import(tmp_path: Path):
    """The check above fails when another package imports the mode (lazily too)."""
    known = modules()
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f():\n    from torch_matrix.ecosystem.classify import classify\n    return classify\n"
    )
    known["report.planted"] = planted
    assert foreign_imports_of_the_mode(known) == ["report.planted imports ecosystem.classify"]
    known.pop("report.planted")
    known["cli.planted"] = planted
    assert foreign_imports_of_the_mode(known) == []


def test_no_import_circle_inside_a_package():
    known = modules()
    graph = {
        name: {
            t
            for t in imports_of(name, path, set(known))
            if t.split(".")[0] == name.split(".")[0] and "." in t and "." in name
        }
        for name, path in known.items()
    }
    circles = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in trail:
                circles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif len(trail) < 12:
                visit(nxt, trail + [nxt])

    for name in graph:
        visit(name, [name])
    assert circles == [], "modules of one package import each other: move the shared part down"


def test_no_module_shadows_the_standard_library_or_a_dependency():
    banned = set(sys.stdlib_module_names) | DEPENDENCIES
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {
        p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"
    }
    names |= {p.stem for p in (ROOT / "torch_matrix" / "probes").rglob("*.py")}
    names |= {
        p.name
        for p in (ROOT / "torch_matrix" / "probes").rglob("*")
        if p.is_dir() and p.name != "__pycache__"
    }
    assert sorted(names & banned) == [], "rename: a folder on sys.path would shadow these"


def test_the_map_lists_the_layers_in_order():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)/` \|", text, re.M)
    assert tuple(listed) == LAYERS, "docs/ARCHITECTURE.md: one row per layer, bottom first"
    assert len(text.splitlines()) <= 40
    long = [line[:60] + "..." for line in text.splitlines() if len(line) > 160]
    assert long == [], "docs/ARCHITECTURE.md: one short line a package, at most 160 characters"


def test_each_package_names_its_modules():
    """The map's rows stay short; a package's ``__init__.py`` names each of its modules (and
    sub-packages) and what it holds, so a newcomer finds every module from the map."""
    unnamed = []
    for layer in LAYERS:
        package = PACKAGE / layer
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
        names = [p.stem for p in package.glob("*.py") if not p.stem.startswith("_")]
        names += [p.parent.name for p in package.glob("*/__init__.py")]
        unnamed += [
            f"{layer}/{name}"
            for name in sorted(names)
            if not re.search(rf"`+{re.escape(name)}[`/]", doc or "")
        ]
    assert unnamed == [], "name each module in its package's docstring, with what it holds"


def test_every_warning_goes_through_the_console():
    """``torch-matrix: warning:`` is written in one place, edges/console.py (``warn``,
    ``warning_line`` for nox's ``session.warn``), which also escapes what it prints; seven were once
    printed by hand. The probe suite, which runs inside a cell's interpreter, has its own voice."""
    wrong = []
    for name, path in modules().items():
        if name == "edges.console" or layer_of(name) == "probes":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "warning: " in node.value and "torch-matrix" in node.value:
                    wrong.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.JoinedStr):
                text = "".join(
                    part.value
                    for part in node.values
                    if isinstance(part, ast.Constant) and isinstance(part.value, str)
                )
                if "torch-matrix: warning: " in text:
                    wrong.append(f"{name}:{node.lineno}")
    assert wrong == [], "print warnings with torch_matrix.edges.console.warn (or warning_line)"


MAX_LINES = 600
# Modules still over the limit, each held at its size when the limit came in (issue 31): split one by
# concept, then delete its line. The list only shrinks: a listed module under the limit fails too.
OVER_LIMIT: dict[str, int] = {}


def test_no_module_over_600_lines():
    """One module, one concept: a module past 600 lines holds two. Split by concept, not by count."""
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: lines for name, lines in sizes.items() if lines > OVER_LIMIT.get(name, MAX_LINES)}
    assert over == {}, f"over {MAX_LINES} lines (or grown past the size listed in OVER_LIMIT)"
    done = {name: sizes.get(name) for name in OVER_LIMIT if sizes.get(name, 0) <= MAX_LINES}
    assert done == {}, "under the limit now: delete these from OVER_LIMIT"


MAX_FUNCTION_LINES = 80
MAX_LONG_FUNCTIONS = 10
# A function over the limit says why, in a comment directly above it (or above its decorators):
#     # Over 80 lines: one table of the verdict's cases, read top to bottom; split, it hides the order.
LONG_REASON = re.compile(r"^\s*#\s*over 80 lines\b\W*(?P<why>.*)$", re.I)
# Long functions that do not say why yet, each held at its size when the rule came in (issue 41):
# split one, or write its reason above it, then delete its line. The list only shrinks.
UNEXPLAINED_LONG: dict[str, int] = {}


def long_functions(paths: dict[str, Path]) -> dict[str, tuple[int, str]]:
    """ "path:qualified.name" -> (its lines, decorators included; the reason written directly above
    it, '' when none), for each function over MAX_FUNCTION_LINES."""
    found: dict[str, tuple[int, str]] = {}
    for label, path in paths.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    size = (child.end_lineno or child.lineno) - start + 1
                    if size > MAX_FUNCTION_LINES:
                        found[f"{label}:{name}"] = (size, _reason_above(lines, start))
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(text), "")
    return found


def _reason_above(lines: list[str], start: int) -> str:
    """The reason in the comment block that ends on the line above line ``start`` (1-based)."""
    block: list[str] = []
    row = start - 2
    while row >= 0 and lines[row].strip().startswith("#"):
        block.insert(0, lines[row].strip())
        row -= 1
    if not block:
        return ""
    matched = LONG_REASON.match(block[0])
    if matched is None:
        return ""
    why = " ".join([matched.group("why")] + [line.lstrip("#").strip() for line in block[1:]])
    return why.strip() if len(why.strip()) >= 20 else ""


def _product_files() -> dict[str, Path]:
    return {p.relative_to(PACKAGE).as_posix(): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_function_over_80_lines_without_a_reason_above_it():
    """One function, one job a reader holds in mind: past 80 lines, split it by its steps, or write
    why it is better whole in a comment directly above it (``# Over 80 lines: ...``)."""
    found = long_functions(_product_files())
    unexplained = {
        name: size
        for name, (size, why) in found.items()
        if not why and size > UNEXPLAINED_LONG.get(name, MAX_FUNCTION_LINES)
    }
    assert unexplained == {}, (
        f"over {MAX_FUNCTION_LINES} lines with no reason above (or grown past its UNEXPLAINED_LONG "
        "size): split it, or write '# Over 80 lines: <why>' directly above it"
    )
    done = sorted(name for name in UNEXPLAINED_LONG if name not in found or found[name][1])
    assert done == [], "split or explained now: delete these from UNEXPLAINED_LONG"


def test_at_most_ten_functions_over_80_lines():
    found = long_functions(_product_files())
    assert len(found) <= MAX_LONG_FUNCTIONS, (
        f"{len(found)} functions over {MAX_FUNCTION_LINES} lines (at most {MAX_LONG_FUNCTIONS}): "
        + ", ".join(sorted(found))
    )


def test_the_function_check_finds_a_long_function_and_reads_its_reason(tmp_path: Path):
    """The checks above can fail: a planted long function is found (a nested one too), without a
    reason and with one."""
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    planted = tmp_path / "planted.py"
    planted.write_text(
        f"def bare():\n{body}\n\n"
        "# Over 80 lines: one table of cases, read top to bottom.\n"
        f"def explained():\n{body}\n\n"
        "# a comment that gives no reason\n"
        f"class Holder:\n    def method(self):\n    {body.replace(chr(10) + '    ', chr(10) + '        ')}\n"
    )
    found = long_functions({"planted.py": planted})
    assert found["planted.py:bare"] == (MAX_FUNCTION_LINES + 1, "")
    assert found["planted.py:explained"][1] == "one table of cases, read top to bottom."
    assert found["planted.py:Holder.method"][1] == ""
    assert "planted.py:short" not in found


MAX_COMMAND_LINES = 2400


def test_the_commands_stay_thin():
    """cli/ parses, calls one function, prints (issue 41: the bisect loop, the report's assembly
    moved to run/): under 2,400 lines in all, and no function there over 80 lines, reason or not."""
    files = {name: path for name, path in _product_files().items() if name.startswith("cli/")}
    total = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files.values())
    assert total < MAX_COMMAND_LINES, f"cli/ holds {total} lines: move the use case to run/"
    assert sorted(long_functions(files)) == [], "a command's function over 80 lines: move it"
