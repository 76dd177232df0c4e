"""torch-matrix installed the way a user installs it, into a fresh venv the test makes, offline.

Not the interpreter running pytest: a new venv of the same Python whose site-packages hold only
what the install put there, used from a plain directory with nothing of the checkout on
``sys.path``. Everything comes from a synthetic index (tests/synthetic_wheels.py): torch-matrix's
own runtime dependencies and setuptools (the build backend) repackaged from this interpreter,
plus whatever wheels the test's cells need.

- ``tool_index(root, cell_wheels)``: that index;
- ``build_distributions(out, index_url)``: the wheel and sdist built from the checkout's files
  (``uv build``: the sdist first, the wheel from the sdist, the backend installed from the index);
- ``fresh_venv(path)`` and ``install(python, index_url, *args)``: a new venv and ``uv pip install``
  into it;
- ``user_env(tmp, venv, index_url)``: the environment of a user's shell with that venv active.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.synthetic_wheels import LocalIndex, WheelSpec, build_index, installed_wheels

REPO = Path(__file__).resolve().parent.parent
BUILD_BACKEND = ("setuptools",)


def tool_requirements() -> tuple[str, ...]:
    """torch-matrix's runtime dependencies for this interpreter, by name (pyproject's list)."""
    names = []
    for text in metadata.requires("torch-matrix") or ():
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return tuple(names)


def tool_index(root: Path, cell_wheels: list[WheelSpec] = ()) -> LocalIndex:
    """A synthetic index with torch-matrix's dependencies, the build backend and ``cell_wheels``."""
    try:
        tool = installed_wheels(tool_requirements() + BUILD_BACKEND)
    except metadata.PackageNotFoundError as error:
        pytest.fail(
            f"cannot repackage torch-matrix's dependencies for an offline install (install "
            f"the test extra: `pip install -e '.[test]'`): {error!r}"
        )
    names = {spec.name.lower() for spec in cell_wheels}
    return build_index(
        root, [*cell_wheels, *(spec for spec in tool if spec.name.lower() not in names)]
    )


def _uv(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["uv", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def uv_env(cache: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UV_", "PIP_", "TORCH_MATRIX_"))
        and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(UV_CACHE_DIR=str(cache), UV_NO_CONFIG="1", UV_OFFLINE="0", UV_HTTP_RETRIES="0")
    return env


def build_distributions(out: Path, index_url: str, cache: Path) -> tuple[Path, Path]:
    """The checkout built as a user or a release job builds it: (wheel, sdist)."""
    _uv(
        "build",
        "--quiet",
        "--out-dir",
        str(out),
        "--default-index",
        index_url,
        str(REPO),
        env=uv_env(cache),
    )
    wheels, sdists = (
        sorted(out.glob("torch_matrix-*.whl")),
        sorted(out.glob("torch_matrix-*.tar.gz")),
    )
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return wheels[0], sdists[0]


def fresh_venv(path: Path, cache: Path) -> Path:
    """A new, empty venv of the Python running the tests; returns its interpreter."""
    _uv("venv", "--quiet", "--python", sys.executable, str(path), env=uv_env(cache))
    return path / "bin" / "python"


def install(python: Path, index_url: str, cache: Path, *args: str) -> None:
    """``uv pip install`` into ``python``'s venv, from the synthetic index only."""
    _uv(
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        "--default-index",
        index_url,
        *args,
        env=uv_env(cache),
    )


def user_env(tmp: Path, venv: Path, index_url: str) -> dict[str, str]:
    """A user's shell with ``venv`` activated: its bin first on PATH, nothing of the checkout on
    sys.path, no TORCH_MATRIX_/UV_/NOX/PIP_ settings of the test run; the cells' index is
    ``index_url`` (through PIP_INDEX_URL, as a user's pip configuration gives it)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX", "PIP_"))
        and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PIP_INDEX_URL=index_url,
        PIP_EXTRA_INDEX_URL="",
        PIP_FIND_LINKS="",
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_HTTP_RETRIES="0",
        UV_NO_CONFIG="1",
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
    )
    return env
