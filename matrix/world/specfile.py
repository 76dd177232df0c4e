"""Find and load the matrix spec (``matrix.toml`` or pyproject's ``[tool.torch-matrix]``): the edge.

The lookup order, reading the file and checking that ``install`` paths exist live here;
the records are ``matrix.spec.model`` and the validation is ``matrix.spec.parse`` (pure).
Import any of them from here: ``from matrix.world.specfile import Spec, load_spec, parse_spec``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from matrix.vocab.errors import UserError
from matrix.vocab.layout import SPEC_ENV
from matrix.spec.model import *  # noqa: F403 - re-exported: matrix.world.specfile is the public face
from matrix.spec.model import DEFAULT_SPEC_PATH, PYPROJECT, PYPROJECT_TABLE, Spec
from matrix.spec.parse import (  # noqa: F401 - re-exported
    CHECK_HINT,
    INSTALL_HINT,
    derived_name,
    parse_pyproject,
    parse_spec,
    spec_hint,
    version_matcher,
)

from matrix.spec.parse import tomllib  # the stdlib's, or tomli on Python 3.10


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
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # not ours to judge here: without our table it is not a spec
    return isinstance(data.get("tool"), dict) and "torch-matrix" in data["tool"]


def find_spec(path: str | os.PathLike[str] | None = None,
              environ: Mapping[str, str] = os.environ, cwd: str | None = None) -> SpecSource:
    """The lookup order: ``--spec``, then ``$TORCH_MATRIX_SPEC``, then ``./matrix.toml``, then
    ``[tool.torch-matrix]`` in ``./pyproject.toml``, then the built-in default.

    An explicit file named ``pyproject.toml`` is read through its ``[tool.torch-matrix]`` table.
    """
    explicit = path or environ.get(SPEC_ENV)
    if explicit:
        chosen = Path(explicit)
        return SpecSource(chosen, pyproject=chosen.name == PYPROJECT)
    here = Path(cwd or os.getcwd())
    if (here / "matrix.toml").is_file():
        return SpecSource(here / "matrix.toml")
    if (here / PYPROJECT).is_file() and _has_tool_table(here / PYPROJECT):
        return SpecSource(here / PYPROJECT, pyproject=True)
    return SpecSource(DEFAULT_SPEC_PATH, builtin=True)


def spec_path(path: str | os.PathLike[str] | None = None,
              environ: Mapping[str, str] = os.environ, cwd: str | None = None) -> Path:
    """The file ``find_spec`` picks (see there for the order)."""
    return find_spec(path, environ, cwd).path


def load_spec(path: str | os.PathLike[str] | None = None,
              environ: Mapping[str, str] = os.environ, cwd: str | None = None) -> Spec:
    source = find_spec(path, environ, cwd)
    chosen = source.path
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot read spec: {error.strerror or error}", where=str(chosen),
                        hint=f"pass an existing file (--spec or ${SPEC_ENV}); with neither, "
                             "./matrix.toml, [tool.torch-matrix] in ./pyproject.toml or the "
                             "built-in default matrix is used") from None
    except UnicodeDecodeError as error:
        line = chosen.read_bytes()[:error.start].count(b"\n") + 1
        raise UserError(f"not valid UTF-8 (byte {error.object[error.start]:#04x} on line {line})",
                        where=str(chosen), hint="TOML files are UTF-8: re-save the spec as UTF-8") from None
    base_dir = str(chosen.resolve().parent)
    if source.pyproject:
        spec = parse_pyproject(text, str(chosen), environ=environ, base_dir=base_dir)
    else:
        spec = parse_spec(text, str(chosen), environ=environ, base_dir=base_dir,
                          default_name=None if source.builtin else derived_name(chosen))
    return _check_install_files(spec)


def _check_install_files(spec: Spec) -> Spec:
    """The edge: install paths must exist; their files' digest joins the cells' fingerprint."""
    from dataclasses import replace

    from matrix.spec.install_items import install_digest, missing_paths

    if not spec.install:
        return spec
    for i, text, path in missing_paths(spec.install, spec.base_dir):
        raise UserError(f"{text!r}: {path} does not exist", where=f"{spec.path}: install[{i}]",
                        hint=f"paths are relative to the spec's directory {spec.base_dir}; "
                             "fix the path or remove the entry")
    return replace(spec, install_digest=install_digest(spec.install, spec.base_dir))


def project_dir(spec: Spec) -> str:
    """The project under test: the spec's directory; the current one for the built-in default."""
    if Path(spec.path).resolve() == DEFAULT_SPEC_PATH.resolve():
        return os.getcwd()
    return spec.base_dir
