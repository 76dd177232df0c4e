"""Issue 34 end to end, offline: ``torch-matrix ecosystem run`` over synthetic projects on the
synthetic index (torch 2.5.0 vs 2.6.0, whose torch.load defaults to weights_only=True), with real
uv venvs and the projects' real pytest; then ``ecosystem report`` and ``ecosystem diff``.

The projects, one per class:

- tinytrain (examples/tinytrain, a path): resuming a checkpoint breaks on 2.6.0: regressed, its
  failing test grouped with the catalogue's cause (changed default) and fix;
- steady (a git repository at a tag): passes on both sides: same-pass;
- netty (an sdist on the index): its test needs the network, which the run takes away: spurious (network), evidence quoted;
- slow: its test runs past the project's budget: spurious (timeout);
- wobbly: fails on 2.6.0's first run only: regressed, retried, flipped: flaky;
- gpuonly: the file says skip, with a reason: skipped, never installed.

And the 2-shard run, merged, gives the unsharded run's report (minus the measured seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.synthetic_wheels import build_index, downstream_wheels

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent

TEST_FILES = {
    "steady": "def test_adds():\n    import torch\n    assert torch.__version__\n",
    "netty": (
        "import socket\n\n\ndef test_downloads_weights():\n"
        "    socket.create_connection(('weights.example.invalid', 443), timeout=5)\n"
    ),
    "slow": "import time\n\n\ndef test_takes_long():\n    time.sleep(60)\n",
    "wobbly": (
        "import os\nimport torch\n\n\ndef test_sometimes():\n"
        "    marker = os.path.join(os.getcwd(), '..', 'wobbly-marker')  # the side's own tree\n"
        "    if torch.__version__.startswith('2.6') and not os.path.exists(marker):\n"
        "        open(marker, 'w').close()\n"
        "        raise AssertionError('a race in the data loader')\n"
    ),
}


def _project(root: Path, name: str) -> Path:
    tree = root / name
    (tree / name).mkdir(parents=True)
    (tree / name / "__init__.py").write_text('"""A synthetic project."""\n__version__ = "1.0"\n')
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["flit_core>=3.4,<5"]\nbuild-backend = "flit_core.buildapi"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\ndescription = "x"\n'
    )
    (tree / "tests").mkdir()
    (tree / "tests" / f"test_{name}.py").write_text(TEST_FILES[name])
    return tree


def _sdist_on_index(index_root: Path, tree: Path, name: str) -> None:
    """``tree`` as ``name``-1.0.tar.gz on the local index (a PEP 503 page of its own)."""
    import tarfile

    archive = index_root / "files" / f"{name}-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(tree, arcname=f"{name}-1.0")
    page = index_root / "simple" / name / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(
        f'<html><body><a href="../../files/{archive.name}">{archive.name}</a></body></html>'
    )


def _git_repo(tree: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v1")
    git("tag", "v1.0")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not shutil.which("git"):
        pytest.fail("git is needed for the git source of this test: install git")
    tmp = tmp_path_factory.mktemp("eco")
    # A checkout's pytest config above the run directory: pytest must not climb to it from a
    # project's tree that has none (its node ids would differ between the sides).
    (tmp / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-x"\n')
    index = build_index(tmp / "index", downstream_wheels())
    sources = tmp / "sources"
    for name in TEST_FILES:
        _project(sources, name)
    _git_repo(sources / "steady")
    _sdist_on_index(tmp / "index", sources / "netty", "netty")
    projects = tmp / "projects.toml"
    projects.write_text(
        f"""
[defaults]
budget = 120

[[project]]
name = "tinytrain"
path = "{REPO / "examples" / "tinytrain"}"

[[project]]
name = "steady"
git = "{(sources / "steady").as_uri()}"
ref = "v1.0"

[[project]]
name = "netty"
sdist = "netty==1.0"

[[project]]
name = "slow"
path = "{sources / "slow"}"
budget = 8

[[project]]
name = "wobbly"
path = "{sources / "wobbly"}"

[[project]]
name = "gpuonly"
path = "{sources / "steady"}"
skip = "needs a CUDA device"
"""
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "PIP_")) and k != "VIRTUAL_ENV"
    }
    env.update(UV_CACHE_DIR=str(tmp / "uv-cache"), TORCH_MATRIX_CACHE_DIR=str(tmp / "tm-cache"))
    return {"tmp": tmp, "index": index.url, "projects": projects, "env": env}


def _cli(world: dict[str, Any], *args: str, marker: str = "") -> subprocess.CompletedProcess:
    env = dict(world["env"], WOBBLY_MARKER=marker or str(world["tmp"] / "no-marker"))
    return subprocess.run(
        [sys.executable, "-m", "torch_matrix", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=world["tmp"],
        timeout=900,
    )


def _run(world: dict[str, Any], out: str, *extra: str) -> Path:
    marker = world["tmp"] / f"marker-{out}"
    done = _cli(
        world,
        "ecosystem",
        "run",
        str(world["projects"]),
        "--baseline",
        "2.5.0",
        "--candidate",
        "2.6.0",
        "--index",
        world["index"],
        "--out",
        str(world["tmp"] / out),
        "--quiet",
        *extra,
        marker=str(marker),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "estimate: 5 project(s) to run (1 skipped)" in done.stderr or "--shard" in extra
    return world["tmp"] / out


@pytest.fixture(scope="module")
def unsharded(world: dict[str, Any]) -> Path:
    return _run(world, "whole")


def _report(world: dict[str, Any], *dirs: Path, out: Path | None = None) -> dict[str, Any]:
    args = ["ecosystem", "report", *map(str, dirs)] + (["--out", str(out)] if out else [])
    done = _cli(world, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(((out or dirs[0]) / "ecosystem.json").read_text())


def test_each_synthetic_project_lands_in_its_class_with_its_evidence(
    world: dict[str, Any], unsharded: Path
) -> None:
    report = _report(world, unsharded)
    classes = {name: p["class"] for name, p in report["projects"].items()}
    assert classes == {
        "tinytrain": "regressed",
        "steady": "same-pass",
        "netty": "spurious",
        "slow": "spurious",
        "wobbly": "flaky",
        "gpuonly": "skipped",
    }
    tiny = report["projects"]["tinytrain"]
    assert tiny["new_failures"] == ["tests/test_checkpoint.py::test_resume_from_checkpoint"]
    (group,) = tiny["groups"]
    assert group["cause"]["kind"] == "changed-default"
    assert "add_safe_globals([argparse.Namespace])" in group["cause"]["fix"]
    assert report["projects"]["netty"]["spurious"] == "network"
    assert "name resolution" in report["projects"]["netty"]["evidence"] or (
        "not known" in report["projects"]["netty"]["evidence"]
    )
    assert report["projects"]["slow"]["spurious"] == "timeout"
    assert report["projects"]["wobbly"]["flipped"] == ["tests/test_wobbly.py::test_sometimes"]
    assert report["projects"]["gpuonly"]["evidence"] == "needs a CUDA device"
    # only the regressed list was retried, and only its tests
    retried = sorted(p.parent.name for p in (unsharded / "projects").glob("*/candidate-retry.json"))
    assert retried == ["tinytrain", "wobbly"]
    retry = json.loads((unsharded / "projects/tinytrain/candidate-retry.json").read_text())
    assert list(retry["tests"]) == ["tests/test_checkpoint.py::test_resume_from_checkpoint"]
    side = json.loads((unsharded / "projects/steady/candidate.json").read_text())
    assert side["resolved"]["torch"] == "2.6.0" and side["memory_limit"]
    assert (unsharded / side["log"]).is_file()
    assert not (unsharded / "work").exists(), "venvs are deleted when the results are written"
    summary = (unsharded / "summary.md").read_text()
    assert "| regressed | 1 |" in summary and "weights_only" in summary
    page = (unsharded / "report.html").read_text()
    assert 'href="projects/tinytrain/candidate.log"' in page


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the measured seconds and times (the only thing two runs may differ in)."""
    text = json.dumps(report, sort_keys=True)
    data = json.loads(text)
    assert data.pop("wall_time")["projects"] == len(data["projects"]) - 1  # all timed but gpuonly
    for project in data["projects"].values():
        project.pop("seconds"), project.pop("wall_seconds")
        for side in project["sides"].values():
            side.pop("seconds")
    return data


def _summary_stable(text: str) -> str:
    """summary.md without its measured wall times (the run's line, each project's cell)."""
    import re

    text = re.sub(r"\*\*Wall time\*\*: .*", "**Wall time**: (measured)", text)
    return re.sub(r"\| \d+ s \|$", "| (measured) |", text, flags=re.MULTILINE)


def test_two_shards_merged_equal_the_unsharded_run(world: dict[str, Any], unsharded: Path) -> None:
    whole = _report(world, unsharded, out=world["tmp"] / "report-whole")
    first = _run(world, "shard1", "--shard", "1/2")
    second = _run(world, "shard2", "--shard", "2/2")
    ran = {p.name for d in (first, second) for p in (d / "projects").iterdir()}
    assert len(ran) == 6
    assert not {p.name for p in (first / "projects").iterdir()} & {
        p.name for p in (second / "projects").iterdir()
    }
    merged = _report(world, first, second, out=world["tmp"] / "report-merged")
    assert _stable(merged) == _stable(whole)
    assert _summary_stable((world["tmp"] / "report-merged/summary.md").read_text()) == (
        _summary_stable((world["tmp"] / "report-whole/summary.md").read_text())
    )
    only_one = _report(world, first, out=world["tmp"] / "report-one")
    assert sorted(only_one["missing"]) == sorted(p.name for p in (second / "projects").iterdir()), (
        "a missing shard's projects are named, never silently absent"
    )
    done = _cli(
        world,
        "ecosystem",
        "diff",
        str(world["tmp"] / "report-one"),
        str(world["tmp"] / "report-merged"),
    )
    assert done.returncode == 0 and "changed class" in done.stdout
    for name in only_one["missing"]:
        assert f"{name}: absent ->" in done.stdout


def test_a_rerun_resumes_and_bad_input_is_one_line(world: dict[str, Any], unsharded: Path) -> None:
    again = _cli(
        world,
        "ecosystem",
        "run",
        str(world["projects"]),
        "--baseline",
        "2.5.0",
        "--candidate",
        "2.6.0",
        "--index",
        world["index"],
        "--out",
        str(unsharded),
        "--quiet",
    )
    assert again.returncode == 0 and again.stderr.count(": done before") == 6, again.stderr
    assert "6 done before)" in again.stderr  # the estimate's line says it too
    bad = _cli(
        world, "ecosystem", "run", str(world["projects"]), "--baseline", "2.5", "--candidate", "2.5"
    )
    assert bad.returncode == 2 and "hint:" in bad.stderr and "Traceback" not in bad.stderr
    missing = _cli(world, "ecosystem", "report", str(world["tmp"] / "nowhere"))
    assert missing.returncode == 2 and "no run.json" in missing.stderr


def test_bisect_finds_the_first_bad_release_and_the_proven_pin(world: dict[str, Any]) -> None:
    out = world["tmp"] / "bisect"
    done = _cli(
        world,
        "ecosystem",
        "run",
        str(world["projects"]),
        "--baseline",
        "2.4.0",
        "--candidate",
        "2.6.0",
        "--index",
        world["index"],
        "--out",
        str(out),
        "--only",
        "tinytrain",
        "--bisect",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((out / "projects/tinytrain/bisect.json").read_text())
    assert found["versions"] == ["2.4.0", "2.5.0", "2.6.0"]
    assert found["outcomes"] == {"2.4.0": "good", "2.5.0": "good", "2.6.0": "bad"}
    assert found["first_bad"] == "2.6.0" and found["pin"] == "torch<2.6.0"
    report = _report(world, out)
    assert report["projects"]["tinytrain"]["bisect"]["pin"] == "torch<2.6.0"
    assert "proven pin" in (out / "summary.md").read_text()
    # the project's wall time reaches the bisection's end: from the baseline's start
    baseline = json.loads((out / "projects/tinytrain/baseline.json").read_text())
    assert baseline["started"] < found["started"] <= found["ended"]
    wall = report["projects"]["tinytrain"]["wall_seconds"]
    assert wall >= round(found["ended"] - baseline["started"], 1) - 0.1
