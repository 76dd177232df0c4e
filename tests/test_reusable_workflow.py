"""The reusable workflow (.github/workflows/torch-matrix.yml) and the caller docs/downstream.md
shows: a caller of at most 15 lines that is a valid workflow using only the declared inputs,
``torch-matrix run`` invocations nox accepts, and the plan job's script run by bash on the
example project. (Schema validity of every workflow file: tests/test_workflows.py.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from tests.synthetic_wheels import build_index, downstream_wheels
from tests.test_workflows import _invocations, _run_scripts

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "torch-matrix.yml"
DOCS = REPO / "docs" / "downstream.md"


def _load(text: str) -> dict:
    return YAML(typ="safe").load(text)


def caller_workflow() -> str:
    text = DOCS.read_text()
    block = re.search(
        r"<!-- caller-workflow -->\s*```yaml\n(.*?)```\s*<!-- /caller-workflow -->", text, re.S
    )
    assert block, "docs/downstream.md lost its caller workflow block"
    return block.group(1)


def test_the_workflow_is_callable_with_declared_inputs():
    workflow = _load(WORKFLOW.read_text())
    call = workflow["on"]["workflow_call"]
    assert {"spec", "apply-to", "working-directory", "shards", "gpu-runner-labels"} <= set(
        call["inputs"]
    )
    assert set(workflow["jobs"]) == {"plan", "shard", "merge"}
    assert workflow["jobs"]["shard"]["strategy"]["fail-fast"] is False
    merge = workflow["jobs"]["merge"]
    assert merge["if"].startswith("always()")
    assert any(
        step.get("uses", "").startswith("peter-evans/create-pull-request")
        for step in merge["steps"]
    )


def test_the_documented_caller_is_short_valid_and_uses_only_declared_inputs(tmp_path):
    text = caller_workflow()
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) <= 15, f"the caller takes {len(lines)} lines"
    caller = tmp_path / "caller.yml"
    caller.write_text(text)
    checked = subprocess.run(
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(caller)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    job = next(iter(_load(text)["jobs"].values()))
    assert job["uses"].split("@")[0].endswith("/.github/workflows/torch-matrix.yml")
    declared = _load(WORKFLOW.read_text())["on"]["workflow_call"]["inputs"]
    assert set(job.get("with", {})) <= set(declared)
    permissions = _load(text)["permissions"]
    assert permissions == {"contents": "write", "pull-requests": "write"}  # what the merge job asks


def _example_project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    index = build_index(tmp_path / "index", downstream_wheels())
    project = tmp_path / "tinytrain"
    shutil.copytree(
        REPO / "examples" / "tinytrain",
        project,
        ignore=shutil.ignore_patterns("results", ".nox", "__pycache__"),
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TORCH_MATRIX_", "PIP_", "NOX"))
    }
    env.update(
        PIP_INDEX_URL=index.url,
        PIP_EXTRA_INDEX_URL="",
        PIP_FIND_LINKS="",
        PYTHONPATH=str(REPO),
        TORCH_MATRIX_CACHE_DIR=str(tmp_path / "index-cache"),
    )
    return project, env


def test_every_torch_matrix_run_invocation_selects_cells_nox_knows(tmp_path):
    project, env = _example_project(tmp_path)
    scripts = _run_scripts(_load(WORKFLOW.read_text()))
    runs = [
        args
        for script in scripts
        for args in _invocations("torch-matrix", script)
        if args[0] == "run"
    ]
    assert runs
    for args in runs:
        nox_args = [word for word in args[1:] if word not in ("-l", "--list", "--json")]
        listed = subprocess.run(
            [sys.executable, "-m", "torch_matrix.cli", "run", "-l", "--json", *nox_args],
            cwd=project,
            env={**env, "TORCH_MATRIX_SHARD": "1/2"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert listed.returncode == 0, f"torch-matrix {shlex.join(args)}: {listed.stderr}"
        sessions = json.loads(listed.stdout)
        assert any(s["name"] == "matrix" for s in sessions)


def test_the_plan_job_script_plans_the_example_from_its_pyproject(tmp_path):
    project, env = _example_project(tmp_path)
    outputs = tmp_path / "github-output"
    outputs.touch()
    env.update(
        SHARD_COUNT="2",
        GITHUB_OUTPUT=str(outputs),
        SPEC="",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    plan_step = next(
        step["run"]
        for step in _load(WORKFLOW.read_text())["jobs"]["plan"]["steps"]
        if step.get("name") == "Plan the cells and the shards"
    )
    tool = tmp_path / "bin"
    tool.mkdir()
    (tool / "torch-matrix").write_text(
        f'#!/bin/sh\nexec {sys.executable} -m torch_matrix.cli "$@"\n'
    )
    (tool / "torch-matrix").chmod(0o755)
    env["PATH"] = f"{tool}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", plan_step],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    shards = json.loads(written["shards"])
    cells = sorted(cell for entry in shards for cell in entry["cells"])
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert cells == [f"t{torch}-py{py}" for torch in ("2.3.0", "2.4.0", "2.5.0", "2.6.0")]
    planned = json.loads((project / "plan" / "cells.json").read_text())
    assert all(cell["install"] == ["-r requirements.txt", ".[test]", "pytest"] for cell in planned)
    assert "run 'tinytrain'" in done.stdout  # the project's own results name
