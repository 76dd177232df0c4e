"""The nightly workflow's history and issue steps, run as bash here with a stand-in ``gh``.

The steps' own ``run:`` scripts are taken from .github/workflows/nightly.yml and executed
the way GitHub runs them (``bash -eo pipefail``), with the real ``torch-matrix`` and ``jq``;
only ``gh`` is a stub that records what it was asked and answers ``issue list`` with a
fixed set of open issues. So a broken script fails here, not at 02:17 on a runner.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.test_history import night, write_night

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"

pytestmark = pytest.mark.skipif(
    shutil.which("jq") is None, reason="the workflow's issue step needs jq"
)

FAKE_GH = """#!/bin/bash
# Stand-in for the GitHub CLI: log every call (and any body on stdin), answer `issue list`.
echo "gh $*" >> "$GH_LOG"
case "$1 $2" in
  "issue list") cat "$GH_OPEN" ;;
  "label create") exit 1 ;;  # the label exists already
  *) if [ ! -t 0 ]; then sed 's/^/  | /' >> "$GH_LOG"; fi ;;
esac
"""


def step_script(name: str) -> str:
    workflow = YAML(typ="safe").load(WORKFLOW.read_text())
    for step in workflow["jobs"]["merge"]["steps"]:
        if step.get("name", "").startswith(name):
            return step["run"]
    raise AssertionError(f"no step {name!r} in the merge job")


def run_step(name: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = cwd / "step.sh"
    script.write_text(step_script(name))
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_import_diff_and_issue_steps(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "torch-matrix"
    tool.write_text(
        f'#!/bin/bash\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m torch_matrix.cli "$@"\n'
    )
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH)
    for path in (tool, gh):
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    work = tmp_path / "workspace"
    (work / "history").mkdir(parents=True)
    last_night = write_night(tmp_path / "n21", night(21, {"2.6.0": "numpy_interop"}))
    db = work / "history" / "history.sqlite"
    done = subprocess.run(
        [str(tool), "import", str(last_night), "--db", str(db)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Tonight: 2.6.0 is fixed, 2.4.1 breaks training_step, 2.7.0 appears failing install_sanity.
    write_night(
        work / "merged",
        night(
            22,
            {"2.4.1": "training_step", "2.7.0": "install_sanity"},
            cells=("2.4.1", "2.6.0", "2.7.0"),
        ),
    )
    summary, output, log = tmp_path / "summary.md", tmp_path / "output.txt", tmp_path / "gh.log"
    open_issues = tmp_path / "open.json"
    open_issues.write_text(
        json.dumps(
            [
                {
                    "number": 1,
                    "title": "torch-matrix: numpy_interop fails in t2.6.0-py3.11",
                },  # passes tonight: close
                {
                    "number": 2,
                    "title": "torch-matrix: training_step fails in t2.4.1-py3.11",
                },  # open already: comment
                {
                    "number": 3,
                    "title": "torch-matrix: torch_compile fails in t2.0.0-py3.11",
                },  # not in tonight's run
            ]
        )
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CLEAN": "true",
        "CELL_FILTER": "",
        "CELL_TAGS": "",
        "HISTORY_DB": "history/history.sqlite",
        "RUN_URL": "https://github.com/o/r/actions/runs/9",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "MAX_NEW_ISSUES": "20",
        "GH_LOG": str(log),
        "GH_OPEN": str(open_issues),
        "GITHUB_SHA": "f" * 40,
    }
    env.pop("TORCH_MATRIX_HISTORY", None)

    step = run_step("Import tonight's run", work, env)
    assert step.returncode == 0, step.stdout + step.stderr
    assert "imported=true" in output.read_text()
    text = summary.read_text()
    assert "## What changed since the last run" in text and "### Fixed (1)" in text
    assert "| t2.7.0-py3.11 | install_sanity | fail |" in text
    assert "## History of `nightly`" in text  # filed under the spec name: merged/<name>/cells
    plan = json.loads((work / "history" / "issues.json").read_text())
    assert sorted(item["title"] for item in plan["open"]) == [
        "torch-matrix: install_sanity fails in t2.7.0-py3.11",
        "torch-matrix: training_step fails in t2.4.1-py3.11",
    ]

    step = run_step("Open, comment on and close breakage issues", work, env)
    assert step.returncode == 0, step.stdout + step.stderr
    calls = [line for line in log.read_text().splitlines() if line.startswith("gh ")]
    assert (
        "gh issue create --title torch-matrix: install_sanity fails in t2.7.0-py3.11 --label torch-matrix-break "
        "--body-file history/issue-body.md" in calls
    )
    assert "gh issue comment 2 --body-file -" in calls
    assert any(call.startswith("gh issue close 1 --comment Passes again in run") for call in calls)
    assert not any(call.startswith(("gh issue close 2", "gh issue close 3")) for call in calls)
    assert sum(call.startswith("gh issue create") for call in calls) == 1
    body = (work / "history" / "issue-body.md").read_text()  # the last issue created: 2.7.0's
    assert (
        "torch-matrix run -s 'matrix(t2.7.0-py3.11)' -- --redo" in body and "torch==2.7.0" in body
    )
    assert "<summary>torch-matrix repro t2.7.0-py3.11 install_sanity</summary>" in body
    assert "could not build it" not in body and "import torch  # install_sanity" in body

    # A subset run writes the diff but never becomes history, and opens nothing.
    output.write_text("")
    step = run_step("Import tonight's run", work, {**env, "CELL_TAGS": "py3.11"})
    assert step.returncode == 0, step.stderr
    assert "imported=false" in output.read_text()


@pytest.mark.e2e
def test_three_nights_of_the_real_matrix_on_the_synthetic_index_give_the_right_diff(tmp_path):
    """Night 1: the index has torch 2.0-2.3 (the spec takes the newest 3). Night 2: torch 2.4.0
    appears with a broken Tensor.sum, so 2.1 leaves the matrix. Night 3: nothing changes."""
    from tests.test_bisect import SUM_PROBE, broken_torch
    from tests.synthetic_wheels import build_index, numpy_wheel, torch_wheel, torchvision_wheel

    probe_dir = tmp_path / "probe_dir"
    probe_dir.mkdir()
    (probe_dir / "sum_probe.py").write_text(SUM_PROBE)
    db = tmp_path / "history.sqlite"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX")) and k != "VIRTUAL_ENV"
    }
    env.update(UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_HTTP_RETRIES="0", PYTHONPATH=str(REPO))
    for night_no, torches in (
        (1, ["2.0.0", "2.1.0", "2.2.0", "2.3.0"]),
        (2, ["2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0"]),
        (3, ["2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0"]),
    ):
        wheels = [broken_torch(t) if t == "2.4.0" else torch_wheel(t) for t in torches]
        wheels += [torchvision_wheel(f"0.{15 + i}.0", t) for i, t in enumerate(torches)] + [
            numpy_wheel("1.26.4")
        ]
        index = build_index(tmp_path / f"index{night_no}", wheels)
        spec = tmp_path / f"matrix{night_no}.toml"
        spec.write_text(
            f'name = "nightly"\npython = ["current"]\ntorch = {{ versions = ">=2.0", newest = 3 }}\n'
            f'torchvision = "paired"\n[probes]\nrun = ["install_sanity", "sum_ok"]\n'
            f'dirs = ["{probe_dir}"]\n[index]\ndefault = "{index.url}"\nextra = []\nfind_links = []\n'
        )
        night_env = {
            **env,
            "TORCH_MATRIX_SPEC": str(spec),
            "TORCH_MATRIX_RESULTS": str(tmp_path / f"night{night_no}"),
            "TORCH_MATRIX_CACHE_DIR": str(tmp_path / f"index-cache{night_no}"),
        }
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "nox",
                "-f",
                str(REPO / "noxfile.py"),
                "--envdir",
                str(tmp_path / f"nox{night_no}"),
                "-s",
                "matrix",
            ],
            cwd=tmp_path,
            env=night_env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        imported = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch_matrix.cli",
                "import",
                str(tmp_path / f"night{night_no}"),
                "--db",
                str(db),
                "--commit",
                f"night{night_no}",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert imported.returncode == 0 and "imported run" in imported.stdout, imported.stderr

    def diff(*refs: str) -> dict:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch_matrix.cli",
                "diff",
                *refs,
                "--db",
                str(db),
                "--format",
                "json",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    py = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    second = diff(str(tmp_path / "night1"), str(tmp_path / "night2"))
    assert [c["cell"] for c in second["appeared"]] == [f"t2.4.0-{py}"]
    assert second["appeared"][0]["new"] == "incompatible"
    assert [c["cell"] for c in second["vanished"]] == [f"t2.1.0-{py}"]
    assert second["broken"] == [] and second["fixed"] == []
    assert [(f["cell"], f["probe"], f["first_run"]["commit"]) for f in second["new_failures"]] == [
        (f"t2.4.0-{py}", "sum_ok", "night2")
    ]
    assert "sum of [1, 2, 3] is 7" in second["new_failures"][0]["message"]

    third = diff()  # the default: the newest stored night against the one before
    assert (third["old"]["commit"], third["new"]["commit"]) == ("night2", "night3")
    assert not (
        third["appeared"]
        or third["vanished"]
        or third["broken"]
        or third["fixed"]
        or third["new_failures"]
    )

    with_ids = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "history", "--db", str(db), "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    runs = json.loads(with_ids.stdout)["nightly"]["runs"]
    assert [run["commit"] for run in runs] == ["night1", "night2", "night3"]
    first_to_last = diff(runs[0]["id"], runs[2]["id"])
    assert [(f["cell"], f["first_run"]["commit"]) for f in first_to_last["new_failures"]] == [
        (f"t2.4.0-{py}", "night2")
    ]
