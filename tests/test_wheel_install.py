"""Install without a registry: the wheel and sdist built from the project's own files, the wheel
installed into a fresh venv, and a downstream project's matrix run with it from a plain directory.

Offline (tests/fresh_install.py): the build backend, torch-matrix's dependencies and the cells'
wheels (the downstream world of tests/synthetic_wheels.py) come from a synthetic index. The
downstream project is a copy of examples/tinytrain outside the checkout; nothing of the
checkout is on ``sys.path``: what runs is what the wheel carries (the shipped noxfile, the
probes, the templates, the schema, the default matrix, the spec reference).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.fresh_install import (
    REPO,
    uv_env,
    build_distributions,
    fresh_venv,
    install,
    tool_index,
    user_env,
)
from tests.synthetic_wheels import downstream_wheels

pytestmark = pytest.mark.e2e


def _shipped_files() -> list[str]:
    """Every tracked file of the package: modules and package data alike."""
    listed = subprocess.run(
        ["git", "ls-files", "torch_matrix"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [name for name in listed if (REPO / name).is_file()]


def test_built_wheel_runs_a_downstream_matrix_from_a_plain_directory(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    index = tool_index(tmp_path / "index", downstream_wheels())
    wheel, sdist = build_distributions(tmp_path / "dist", index.url, cache)

    shipped = _shipped_files()
    assert "torch_matrix/noxfile.py" in shipped and "torch_matrix/probes/__main__.py" in shipped
    assert any(name.endswith(".html.j2") for name in shipped) and any(
        name.endswith(".json") for name in shipped
    )
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in shipped if name not in in_wheel] == []
    # one import name in the user's venv: nothing top-level a project's own `probes` or `matrix` meets
    assert {
        name.split("/")[0] for name in in_wheel if not name.split("/")[0].endswith(".dist-info")
    } == {"torch_matrix"}
    root = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = {name.removeprefix(root + "/") for name in archive.getnames()}
    assert [
        name for name in shipped + ["pyproject.toml", "README.md"] if name not in in_sdist
    ] == []

    venv = tmp_path / "venv"
    python = fresh_venv(venv, cache)
    install(python, index.url, cache, str(wheel))
    project = tmp_path / "plain" / "tinytrain"
    shutil.copytree(
        REPO / "examples" / "tinytrain",
        project,
        ignore=shutil.ignore_patterns("results", ".torch-matrix", ".nox", "__pycache__"),
    )
    env = user_env(tmp_path, venv, index.url)

    where = subprocess.run(
        [
            str(python),
            "-c",
            "import torch_matrix, torch_matrix.probes as p; print(torch_matrix.__file__); print(p.__file__)",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(venv) for path in where), where

    done = subprocess.run(
        [str(venv / "bin" / "torch-matrix"), "run"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    run_dir = project / ".torch-matrix" / "results" / "tinytrain"  # the README's default
    assert (run_dir / "report.html").stat().st_size > 0, log[-3000:]
    pins = json.loads((run_dir / "pins" / "pins.json").read_text())
    assert "torch" in json.dumps(pins), pins  # torch 2.6.0 breaks the project's checkpoint test
    assert "tests/test_checkpoint.py::test_resume_from_checkpoint" in done.stdout
    assert "your requirements exclude torch 2.3.0" in done.stdout
    assert str(REPO) not in log  # nothing ran from the checkout


def _install_lines() -> list[str]:
    text = (REPO / "docs" / "downstream.md").read_text(encoding="utf-8")
    block = re.search(
        r"<!-- install-lines -->\s*```bash\n(.*?)```\s*<!-- /install-lines -->", text, re.S
    )
    assert block, "docs/downstream.md lost its install-lines block"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_documented_install_lines_work(tmp_path: Path) -> None:
    """docs/downstream.md's install lines, run as written (the clone's URL: this checkout; the
    hosted repository's line needs the network and says what a user replaces), each into a
    fresh venv, from the synthetic index."""
    lines = _install_lines()
    hosted = [line for line in lines if "git+https://" in line]
    assert hosted and all("<owner>" in line and "<ref>" in line for line in hosted)
    assert not any("OWNER" in line for line in lines)
    cache = tmp_path / "uv-cache"
    index = tool_index(tmp_path / "index")
    env = {**uv_env(cache), "UV_DEFAULT_INDEX": index.url}
    work = tmp_path / "work"
    work.mkdir()
    installs = 0
    for line in lines:
        if line in hosted:
            continue
        command = line.replace("<url of the torch-matrix repository>", str(REPO))
        if command.startswith("uv pip install"):
            venv = tmp_path / f"venv{installs}"
            fresh_venv(venv, cache)
            installs += 1
            command += (
                " && python -c 'import torch_matrix, sys; assert torch_matrix.__file__.startswith(sys.prefix), torch_matrix.__file__'"
                " && torch-matrix --help >/dev/null"
            )
            env = {
                **env,
                "VIRTUAL_ENV": str(venv),
                "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            }
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert installs == 3
