"""An ecosystem regression's ``torch.load`` fixes, proven by a rerun in the candidate's sandbox
(issue 42), offline: ``torch-matrix ecosystem run`` over one synthetic sdist on the local index of
tiny wheels (torch 2.5.0 vs 2.6.0, whose torch.load defaults to ``weights_only=True``, allows
what ``add_safe_globals`` names, and reads ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``), with real uv
venvs and the project's real pytest.

The project loads checkpoints at two call sites: one holds two classes torch refuses one at a
time (Config, then Meta), the other one (Bag); one of Bag's tests also breaks on another 2.6
change. The report said "not proven" for each fix; now each is rerun with it applied: the first
site's allow-list grows to both classes and its test passes (proven), the second site's repairs
1 of its 2 tests (NOT proven, naming the one that still fails), and the old default likewise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.synthetic_wheels import build_index, downstream_wheels

pytestmark = pytest.mark.e2e

IO = """\
import torch


class Config:
    pass


class Meta:
    pass


class Bag:
    value = 1


def load_state(path):
    return torch.load(path)


def load_bag(path):
    return torch.load(path)
"""
TESTS = """\
import torch

from ckpt.io import Bag, Config, Meta, load_bag, load_state


def test_state_roundtrip(tmp_path):
    torch.save({"config": Config(), "meta": Meta()}, str(tmp_path / "s.pt"))
    assert set(load_state(str(tmp_path / "s.pt"))) == {"config", "meta"}


def test_bag_roundtrip(tmp_path):
    torch.save(Bag(), str(tmp_path / "b.pt"))
    assert load_bag(str(tmp_path / "b.pt")).value == 1


def test_bag_on_this_release(tmp_path):
    torch.save(Bag(), str(tmp_path / "b.pt"))
    assert load_bag(str(tmp_path / "b.pt")).value == 1
    assert not torch.__version__.startswith("2.6"), "another change of 2.6"
"""


def _sdist(index_root: Path, tmp: Path) -> None:
    tree = tmp / "ckpt-1.0"
    (tree / "ckpt").mkdir(parents=True)
    (tree / "ckpt" / "__init__.py").write_text('"""Checkpoints."""\n__version__ = "1.0"\n')
    (tree / "ckpt" / "io.py").write_text(IO)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_ckpt.py").write_text(TESTS)
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["flit_core>=3.4,<5"]\nbuild-backend = "flit_core.buildapi"\n'
        '[project]\nname = "ckpt"\nversion = "1.0"\ndescription = "x"\n'
    )
    archive = index_root / "files" / "ckpt-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(tree, arcname="ckpt-1.0")
    page = index_root / "simple" / "ckpt" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(
        f'<html><body><a href="../../files/{archive.name}">{archive.name}</a></body></html>'
    )


def test_each_weights_only_fix_is_proven_by_a_rerun_with_it_applied(tmp_path):
    index = build_index(tmp_path / "index", downstream_wheels())
    _sdist(tmp_path / "index", tmp_path)
    projects = tmp_path / "projects.toml"
    projects.write_text(
        '[defaults]\nbudget = 120\n\n[[project]]\nname = "ckpt"\nsdist = "ckpt==1.0"\n'
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "PIP_")) and k != "VIRTUAL_ENV"
    }
    env.update(
        UV_CACHE_DIR=str(tmp_path / "uv-cache"), TORCH_MATRIX_CACHE_DIR=str(tmp_path / "tm-cache")
    )
    out = tmp_path / "out"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "torch_matrix", "ecosystem", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=900,
        )

    ran = cli(
        "run", str(projects), "--baseline", "2.5.0", "--candidate", "2.6.0",
        "--index", index.url, "--out", str(out), "--quiet",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    side = json.loads((out / "projects" / "ckpt" / "candidate.json").read_text())
    proofs = side["fix_proofs"]
    # two call sites in ckpt/io.py, each its own group (by line), the earlier one load_state's
    state, bag = sorted(proofs["load_fixes"], key=lambda g: int(g["site"].rsplit(":", 1)[1]))
    assert all(g["site"].rsplit(":", 1)[0].endswith("ckpt/io.py") for g in (state, bag)), proofs
    assert state["allowed"] == ["ckpt.io.Config", "ckpt.io.Meta"], state  # the second by a rerun
    assert state["failed"] == [] and state["passed"] == ["tests/test_ckpt.py::test_state_roundtrip"]
    assert bag["allowed"] == ["ckpt.io.Bag"]
    assert bag["passed"] == ["tests/test_ckpt.py::test_bag_roundtrip"]
    assert bag["failed"] == ["tests/test_ckpt.py::test_bag_on_this_release"]
    assert proofs["old_default"]["ran"] and proofs["old_default"]["failed"] == [
        "tests/test_ckpt.py::test_bag_on_this_release"
    ]
    log = (out / "projects" / "ckpt" / "candidate.log").read_text()
    assert "TORCH_MATRIX_SAFE_GLOBALS=ckpt.io.Config,ckpt.io.Meta" in log  # the rerun, in its log

    reported = cli("report", str(out))
    assert reported.returncode == 0, reported.stderr[-3000:]
    report = json.loads((out / "ecosystem.json").read_text())
    project = report["projects"]["ckpt"]
    assert project["class"] == "regressed"
    fixes = {tuple(g["tests"]): g["cause"]["fix"] for g in project["groups"]}
    (state_fix,) = [f for tests, f in fixes.items() if "test_state_roundtrip" in " ".join(tests)]
    assert "add_safe_globals([ckpt.io.Config, ckpt.io.Meta])" in state_fix, state_fix
    assert "(proven: with it, the 1 failing test pass on a rerun; 1 more class found" in state_fix
    assert "not proven" not in state_fix
    bag_fixes = [f for tests, f in fixes.items() if "test_bag" in " ".join(tests)]
    assert bag_fixes and all(
        "NOT proven: with it, 1 of 2 tests still fail" in f for f in bag_fixes
    ), bag_fixes
    summary = (out / "summary.md").read_text()
    assert "1 more class found by rerunning" in summary and "NOT proven" in summary
