"""The project's build never sees the tool's files, whichever backend builds it (issue 42).

A run writes its results under ``.torch-matrix/`` and its venvs under ``.nox/`` in the project's
root. Real builds (``uv build --sdist --wheel``) of a tiny flat-layout project with each of
setuptools, hatchling, flit-core, poetry-core and pdm-backend, after the tool made its folder as
a run does:
neither the sdist nor the wheel holds a file of either. hatchling's sdist took
``.torch-matrix/`` whole (the folder's own ``.gitignore`` is never read: hatchling reads only the
root's), so for a hatchling project the tool adds the folder to the root ``.gitignore``.

The backends come from PyPI (uv's build isolation): offline, the build test skips loudly, as the
real-wheel tests do.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from torch_matrix.world.runplan import build_backend_of, keep_out_of_vcs, root_ignores_folder

BACKENDS = {
    "setuptools": ("setuptools>=61", "setuptools.build_meta"),
    "hatchling": ("hatchling", "hatchling.build"),
    "flit": ("flit_core>=3.4", "flit_core.buildapi"),
    "poetry": ("poetry-core>=2", "poetry.core.masonry.api"),
    "pdm": ("pdm-backend", "pdm.backend"),
}
NETWORK = ("Failed to fetch", "failed to lookup address", "Connection refused", "dns error")


def _project(root: Path, backend: str) -> Path:
    requires, api = BACKENDS[backend]
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["{requires}"]\nbuild-backend = "{api}"\n\n'
        '[project]\nname = "toy"\nversion = "0.1"\ndescription = "toy"\n'
        'authors = [{name = "x", email = "x@example.com"}]\n',
        encoding="utf-8",
    )
    (root / "toy").mkdir()
    (root / "toy" / "__init__.py").write_text('"""toy"""\n', encoding="utf-8")
    (root / ".gitignore").write_text("dist/\n*.pyc", encoding="utf-8")  # no newline at its end
    return root


def _members(archive: Path) -> list[str]:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as whl:
            return whl.namelist()
    with tarfile.open(archive) as sdist:
        return sdist.getnames()


@pytest.mark.realwheels
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_no_backend_packages_the_tools_results_or_venvs(tmp_path, backend):
    if shutil.which("uv") is None:
        pytest.skip("LOUD SKIP: no uv on PATH to build with")
    project = _project(tmp_path / backend, backend)
    added = keep_out_of_vcs(project / ".torch-matrix" / "results")  # as a run makes the folder
    run = project / ".torch-matrix" / "results" / "toy"
    (run / "cells").mkdir(parents=True)
    (run / "cells" / "t2.5.0-py3.12.json").write_text("{}", encoding="utf-8")
    (run / "report.py").write_text("x = 1\n", encoding="utf-8")  # a .py, as a package's would be
    venv = project / ".nox" / "toy" / "matrix-t2-5-0-py3-12"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    (venv / "lib" / "site.py").write_text("x = 1\n", encoding="utf-8")
    out = tmp_path / "dist"
    built = subprocess.run(
        ["uv", "build", "--sdist", "--wheel", "--out-dir", str(out), str(project)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if built.returncode != 0 and any(sign in built.stderr for sign in NETWORK):
        pytest.skip(f"LOUD SKIP: the {backend} backend cannot be fetched: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr
    archives = sorted(out.glob("toy-0.1*"))
    assert sorted(a.suffix for a in archives) == [".gz", ".whl"], archives
    for archive in archives:
        members = _members(archive)
        assert any(m.endswith("toy/__init__.py") for m in members), (archive.name, members)
        leaked = [m for m in members if ".torch-matrix" in m or ".nox" in m]
        assert leaked == [], (archive.name, leaked)
    root_ignore = (project / ".gitignore").read_text(encoding="utf-8")
    if backend == "hatchling":
        assert root_ignore.startswith("dist/\n*.pyc\n# torch-matrix")
        assert root_ignore.endswith("\n/.torch-matrix/\n")  # a comment is a line of its own
        assert added.startswith("added /.torch-matrix/ to ") and "hatchling.build" in added
        assert keep_out_of_vcs(project / ".torch-matrix" / "results") == ""  # once, not per run
        assert (project / ".gitignore").read_text(encoding="utf-8") == root_ignore
    else:  # the project's own files untouched where the backend never looks
        assert (added, root_ignore) == ("", "dist/\n*.pyc")


def test_a_root_gitignore_line_that_covers_the_folder_is_recognised():
    for covering in (".torch-matrix", ".torch-matrix/", "/.torch-matrix/", ".*", "  /.*/  "):
        assert root_ignores_folder(f"dist/\n{covering}\n", ".torch-matrix"), covering
    for narrower in ("", ".torch-matrix/results/", "torch-matrix", "*.json", "# .torch-matrix/"):
        assert not root_ignores_folder(f"dist/\n{narrower}\n", ".torch-matrix"), narrower
    assert not root_ignores_folder(".*\n!.torch-matrix/\n", ".torch-matrix")


def test_the_backend_is_read_from_pyproject_and_bad_text_is_none():
    assert build_backend_of('[build-system]\nbuild-backend = "hatchling.build"\n') == (
        "hatchling.build"
    )
    assert build_backend_of("[build-system]\nrequires = []\n") == ""
    assert build_backend_of("[build-system\n") == ""
    assert build_backend_of('build-system = "x"\n') == ""


def test_a_results_root_the_user_named_is_left_alone(tmp_path):
    project = _project(tmp_path / "p", "hatchling")
    assert keep_out_of_vcs(project / "out" / "results") == ""
    assert not (project / "out").exists()
    assert (project / ".gitignore").read_text(encoding="utf-8") == "dist/\n*.pyc"
