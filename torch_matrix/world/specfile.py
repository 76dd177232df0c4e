"""Find and load the matrix spec (``matrix.toml`` or pyproject's ``[tool.torch-matrix]``): the edge.

The lookup order, reading the file and checking that ``install`` paths exist live here;
the records are ``torch_matrix.spec.model`` and the validation is ``torch_matrix.spec.parse`` (pure):
import each from its own module (``from torch_matrix.spec.model import Spec``); this one re-exports
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import SPEC_ENV
from torch_matrix.spec.model import DEFAULT_SPEC_PATH, PYPROJECT, PYPROJECT_TABLE, Spec
from torch_matrix.spec.parse import (
    TOML_ERRORS,
    derived_name,
    parse_pyproject,
    parse_spec,
)

from torch_matrix.spec.parse import tomllib  # the stdlib's, or tomli on Python 3.10


@dataclass(frozen=True)
class SpecSource:
    """Where the spec comes from: a matrix.toml-style file, or pyproject's ``[tool.torch-matrix]``."""

    path: Path
    pyproject: bool = False  # the keys live in [tool.torch-matrix] of this pyproject.toml
    builtin: bool = False

    @property
    def where(self) -> str:
        return f"{self.path} [{PYPROJECT_TABLE}]" if self.pyproject else str(self.path)


def _has_tool_table(pyproject: Path) -> bool:
    """True when ``pyproject`` holds ``[tool.torch-matrix]``, or may and cannot be read: a file
    that is not UTF-8 or not TOML but names torch-matrix is taken as the spec, so loading it says
    what is wrong (one line, exit 2) instead of silently running the built-in default."""
    try:
        raw = pyproject.read_bytes()
    except OSError:
        return False
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, *TOML_ERRORS):
        return b"torch-matrix" in raw  # without that name it cannot hold our table
    return isinstance(data.get("tool"), dict) and "torch-matrix" in data["tool"]


def find_spec(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] = os.environ,
    cwd: str | None = None,
) -> SpecSource:
    """The lookup order: ``--spec``, then ``$TORCH_MATRIX_SPEC``, then ``./matrix.toml``, then
    ``[tool.torch-matrix]`` in ``./pyproject.toml``, then the built-in default.

    An explicit file named ``pyproject.toml`` is read through its ``[tool.torch-matrix]`` table.
    """
    explicit = path or settings.read(environ, SPEC_ENV)
    if explicit:
        chosen = Path(explicit)
        return SpecSource(chosen, pyproject=chosen.name == PYPROJECT)
    here = Path(cwd or os.getcwd())
    if (here / "matrix.toml").is_file():
        return SpecSource(here / "matrix.toml")
    if (here / PYPROJECT).is_file() and _has_tool_table(here / PYPROJECT):
        return SpecSource(here / PYPROJECT, pyproject=True)
    return SpecSource(DEFAULT_SPEC_PATH, builtin=True)


LOOKED_FOR = "--spec, $TORCH_MATRIX_SPEC, ./matrix.toml, [tool.torch-matrix] in ./pyproject.toml"


def _near_misses(here: Path) -> str:
    """What looks like a spec here but is not one (a matrix.toml that is a directory, a
    [tool.torch_matrix] table), for the "no spec found" line."""
    notes = []
    if (here / "matrix.toml").exists() and not (here / "matrix.toml").is_file():
        notes.append("./matrix.toml is not a file")
    try:
        tool = tomllib.loads((here / PYPROJECT).read_text(encoding="utf-8")).get("tool")
    except (OSError, UnicodeDecodeError, *TOML_ERRORS):
        tool = None
    for key in tool if isinstance(tool, dict) else ():
        if key != "torch-matrix" and key.lower().replace("_", "-") == "torch-matrix":
            notes.append(f"./{PYPROJECT} has [tool.{key}], not [{PYPROJECT_TABLE}]")
    return "; ".join(notes)


def require_spec(
    path: str | os.PathLike[str] | None = None,
    default: bool = False,
    environ: Mapping[str, str] = os.environ,
    cwd: str | None = None,
) -> SpecSource:
    """``find_spec`` for ``plan`` and ``run``: where no spec is found here, a ``UserError`` unless
    ``default`` (``--default``) asks for the built-in matrix (three CUDA torch installs, GBs)."""
    source = find_spec(path, environ, cwd)
    if source.builtin and not default:
        near = _near_misses(Path(cwd or os.getcwd()))
        raise UserError(
            f"no spec found here (looked for {LOOKED_FOR})" + (f"; {near}" if near else ""),
            where=str(Path(cwd or os.getcwd())),
            hint="write a matrix.toml or a [tool.torch-matrix] table in pyproject.toml "
            "(`torch-matrix help spec`), pass --spec FILE, or --default for the built-in "
            "default matrix (the newest three torch minors with CUDA builds: several GB)",
        )
    return source


def spec_path(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] = os.environ,
    cwd: str | None = None,
) -> Path:
    """The file ``find_spec`` picks (see there for the order)."""
    return find_spec(path, environ, cwd).path


def load_spec(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] = os.environ,
    cwd: str | None = None,
) -> Spec:
    source = find_spec(path, environ, cwd)
    chosen = source.path
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(
            f"cannot read spec: {error.strerror or error}",
            where=str(chosen),
            hint=f"pass an existing file (--spec or ${SPEC_ENV}); with neither, "
            "./matrix.toml, [tool.torch-matrix] in ./pyproject.toml or the "
            "built-in default matrix is used",
        ) from None
    except UnicodeDecodeError as error:
        line = chosen.read_bytes()[: error.start].count(b"\n") + 1
        raise UserError(
            f"not valid UTF-8 (byte {error.object[error.start]:#04x} on line {line})",
            where=str(chosen),
            hint="TOML files are UTF-8: re-save the spec as UTF-8",
        ) from None
    base_dir = str(chosen.resolve().parent)
    if source.pyproject:
        spec = parse_pyproject(text, str(chosen), environ=environ, base_dir=base_dir)
    else:
        spec = parse_spec(
            text,
            str(chosen),
            environ=environ,
            base_dir=base_dir,
            default_name=None if source.builtin else derived_name(chosen),
        )
    return _check_install_files(spec)


def _check_install_files(spec: Spec) -> Spec:
    """The edge: install paths must exist; their files' digest joins the cells' fingerprint."""
    from dataclasses import replace

    from torch_matrix.spec.install_items import install_digest, missing_paths

    if not spec.install:
        return spec
    for i, text, path in missing_paths(spec.install, spec.base_dir):
        raise UserError(
            f"{text!r}: {path} does not exist",
            where=f"{spec.path}: install[{i}]",
            hint=f"paths are relative to the spec's directory {spec.base_dir}; "
            "fix the path or remove the entry",
        )
    return replace(spec, install_digest=install_digest(spec.install, spec.base_dir))


def project_dir(spec: Spec) -> str:
    """The project under test: the spec's directory; the current one for the built-in default."""
    if Path(spec.path).resolve() == DEFAULT_SPEC_PATH.resolve():
        return os.getcwd()
    return spec.base_dir


def declared_ranges(
    spec: Spec, packages: tuple[str, ...] = ("torch", "torchvision")
) -> dict[str, tuple[str, str]]:
    """What the project itself admits of ``packages``: package -> (specifier, where it is declared),
    read from the spec's ``install`` items (``-r requirements.txt`` lines, a project directory's
    ``[project] dependencies`` and the extras it installs, a plain requirement). Several declarations
    of one package are combined; a package the project does not constrain is absent."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from torch_matrix.spec.install_items import (
        PATH,
        REQUIREMENT,
        REQUIREMENTS_FILE,
        InstallItemError,
        parse_item,
    )
    from torch_matrix.spec.parse import tomllib

    wanted = {canonicalize_name(name): name for name in packages}
    found: dict[str, list[tuple[str, str]]] = {}

    def take(text: str, where: str) -> None:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            return
        name = canonicalize_name(requirement.name)
        if (
            name in wanted
            and str(requirement.specifier)
            and (requirement.marker is None or requirement.marker.evaluate({"extra": ""}))
        ):
            found.setdefault(wanted[name], []).append((str(requirement.specifier), where))

    def read_file(path: str, shown: str, depth: int = 0) -> None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return
        for number, raw in enumerate(lines, 1):
            line = raw.split(" #", 1)[0].strip()
            if line.startswith("-r ") and depth < 5:
                nested = os.path.join(os.path.dirname(path), line[3:].strip())
                read_file(nested, os.path.relpath(nested, spec.base_dir), depth + 1)
            elif line and not line.startswith(("-", "#")):
                take(line, f"{shown}:{number}")

    for text in spec.install:
        try:
            item = parse_item(text)
        except InstallItemError:
            continue
        if item.kind == REQUIREMENT:
            take(item.text, f"install: {item.text!r}")
        elif item.kind == REQUIREMENTS_FILE:
            read_file(item.absolute(spec.base_dir), item.target)
        elif item.kind == PATH:
            pyproject = Path(item.absolute(spec.base_dir)) / "pyproject.toml"
            try:
                project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project") or {}
            except (OSError, UnicodeDecodeError, *TOML_ERRORS):
                continue
            shown = os.path.relpath(pyproject, spec.base_dir)
            extras = [e.strip() for e in item.extras.strip("[]").split(",") if e.strip()]
            for text_ in project.get("dependencies") or ():
                take(str(text_), f"{shown}: [project] dependencies")
            for extra in extras:
                for text_ in (project.get("optional-dependencies") or {}).get(extra) or ():
                    take(str(text_), f"{shown}: [project.optional-dependencies] {extra}")
    return {
        name: (",".join(spec_ for spec_, _ in seen), "; ".join(where for _, where in seen))
        for name, seen in found.items()
    }
