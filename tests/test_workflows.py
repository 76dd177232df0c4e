"""The GitHub workflows are valid, and every command they run exists and accepts its arguments.

A workflow that only breaks at 02:17 on a GPU runner is expensive to debug, so the checks
that can run on a laptop run here: the GitHub workflow schema (check-jsonschema's vendored
copy, offline), every ``nox`` invocation against the real noxfile (listed with ``-l`` over a
tiny offline spec, so no network and no install), and every ``torch-matrix`` invocation
against the CLI's own argparse parser.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML  # check-jsonschema's own YAML library: YAML 1.2, `on` stays a key

from torch_matrix.cli import parse_args

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
NOXFILE = REPO / "noxfile.py"

# Values that stand in for shell variables when an invocation is parsed (by name; others: "x").
SAMPLE_VALUES = {
    "SHARD_COUNT": "3",
    "TORCH_MATRIX_SPEC": "matrix.toml",
    "CELL_FILTER": "py3",
    "CELL_TAGS": "cpu",
    "TAGS": "cpu",
    "GPU_COUNT": "2",
}
# Where a command ends inside a shell line.
_COMMAND_END = re.compile(r"(\|\||&&|[;|)>]|\s2>|$)")


def _load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def _run_scripts(workflow: dict) -> list[str]:
    scripts = []
    for job in workflow.get("jobs", {}).values():
        for step in job.get("steps", []):
            if "run" in step:
                scripts.append(step["run"])
    return scripts


def _invocations(program: str, script: str) -> list[list[str]]:
    """The argument lists ``program`` is called with in ``script``.

    Shell variables become sample values; a bash array ``"${name[@]}"`` expands to every word
    the script ever adds to it, so optional flags (``filters+=(-k "$X")``) are checked too.
    """
    arrays: dict[str, list[str]] = {}
    found = []
    for line in script.splitlines():
        if line.strip().startswith("#"):
            continue
        for match in re.finditer(r"\b([A-Za-z_]\w*)\+?=\((.*?)\)(?:;|$|\s)", line):
            arrays.setdefault(match.group(1), []).extend(
                _expand(shlex.split(match.group(2)), arrays)
            )
        for match in re.finditer(rf"(?:^|[\s\"'(]){re.escape(program)}\s+(.*)", line):
            rest = match.group(1)
            end = _COMMAND_END.search(rest)
            found.append(_expand(shlex.split(rest[: end.start()] if end else rest), arrays))
    return found


def _expand(words: list[str], arrays: dict[str, list[str]]) -> list[str]:
    expanded = []
    for word in words:
        array = re.fullmatch(r"\$\{(\w+)\[@\]\}", word)
        if array:
            expanded += arrays.get(array.group(1), [SAMPLE_VALUES.get(array.group(1).upper(), "x")])
        else:
            expanded.append(_substitute(word))
    return expanded


def _substitute(word: str) -> str:
    def value(match: re.Match) -> str:
        return SAMPLE_VALUES.get(match.group(1), "x")

    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}?", value, word)


def _all_invocations(program: str) -> list[tuple[str, list[str]]]:
    return [
        (path.name, args)
        for path in WORKFLOWS
        for script in _run_scripts(_load(path))
        for args in _invocations(program, script)
    ]


def test_there_are_workflows_to_check():
    assert {path.name for path in WORKFLOWS} >= {"ci.yml", "nightly.yml"}


def test_workflows_match_the_github_workflow_schema():
    result = subprocess.run(
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  build:\n    steps:\n      - run: echo no runs-on\n")
    result = subprocess.run(
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0


def test_invocations_are_found_in_a_script():
    script = (
        'extra=()\nif [ -n "$CELL_FILTER" ]; then extra+=(-k "$CELL_FILTER"); fi\n'
        'selected="$(nox -l --json -s matrix "${extra[@]}")"\n'
        "  # nox runs the cells; not an invocation\n"
        "torch-matrix report merged --strict > report.md\n"
        "nox -s report pins\n"
    )
    assert _invocations("nox", script) == [
        ["-l", "--json", "-s", "matrix", "-k", "py3"],
        ["-s", "report", "pins"],
    ]
    assert _invocations("torch-matrix", script) == [["report", "merged", "--strict"]]


def test_every_torch_matrix_invocation_parses():
    invocations = _all_invocations("torch-matrix")
    assert {args[0] for _, args in invocations} >= {"plan", "report", "pins"}
    for workflow, args in invocations:
        try:
            parse_args(args)
        except SystemExit as exit_:  # argparse's way of saying "bad arguments"
            pytest.fail(f"{workflow}: torch-matrix {shlex.join(args)} does not parse ({exit_})")


def test_shell_never_interpolates_user_input():
    """Inputs reach the shell as environment variables, never as ${{ }} text (injection)."""
    for path in WORKFLOWS:
        for script in _run_scripts(_load(path)):
            assert "${{" not in script, f"{path.name}: use env: instead of ${{{{ }}}} in run:"


def test_shards_run_the_matrix_session_selected_by_index():
    nightly = _load(REPO / ".github" / "workflows" / "nightly.yml")
    shard = nightly["jobs"]["shard"]
    assert shard["strategy"]["fail-fast"] is False
    assert shard["env"]["TORCH_MATRIX_SHARD"] == "${{ matrix.shard }}"
    default_labels = re.search(r"\|\|\s*'(\[.*?\])'", shard["runs-on"]).group(1)
    assert json.loads(default_labels) == ["self-hosted", "linux", "x64", "gpu"]
    uploads = [s for s in shard["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and all(s.get("if") == "always()" for s in uploads)
    merge = nightly["jobs"]["merge"]
    assert merge["if"].startswith("always()")
    assert merge["permissions"] == {"contents": "write", "issues": "write"}
    pr = nightly["jobs"]["constraints-pr"]  # the one job with the PR token, behind an environment
    assert pr["environment"] and pr["needs"] == "merge"
    assert pr["permissions"] == {"contents": "write", "pull-requests": "write"}
    sessions = {session for _, args in _all_invocations("nox") for session in _sessions(args)}
    assert "matrix" in sessions


def test_nightly_triggers_and_concurrency():
    nightly = _load(REPO / ".github" / "workflows" / "nightly.yml")
    for entry in nightly["on"]["schedule"]:
        minute = entry["cron"].split()[0]
        assert minute.isdigit() and int(minute) != 0, entry  # minute 0 is GitHub's busiest
    assert {"spec", "cells", "tags"} <= set(nightly["on"]["workflow_dispatch"]["inputs"])
    assert nightly["concurrency"]["cancel-in-progress"] is False
    assert "${{" not in nightly["concurrency"]["group"]  # one group for every run


def _sessions(args: list[str]) -> list[str]:
    names, taking = [], False
    for word in args:
        if word in ("-s", "--session", "--sessions", "-e"):
            taking = True
        elif word.startswith("-"):
            taking = False
        elif taking:
            names.append(word)
    return names


@pytest.fixture(scope="module")
def offline_spec(tmp_path_factory) -> Path:
    """A two-cell spec whose index is a local directory of tiny wheels: planning needs no network."""
    sys.path.insert(0, str(Path(__file__).parent))
    from synthetic_wheels import build_index

    root = tmp_path_factory.mktemp("wf-index")
    index = build_index(root / "index")
    spec = root / "matrix.toml"
    spec.write_text(
        'name = "workflows"\npython = ["current"]\ntorch = ["2.1.0", "2.2.0"]\n'
        f'torchvision = "paired"\nvariant = ["default"]\n\n[index]\ndefault = "{index.url}"\n'
    )
    return spec


def test_every_nox_invocation_selects_existing_sessions(offline_spec, tmp_path):
    invocations = _all_invocations("nox")
    assert invocations
    env = {
        **os.environ,
        "TORCH_MATRIX_SPEC": str(offline_spec),
        "TORCH_MATRIX_RESULTS": str(tmp_path / "results"),
    }
    env.pop("TORCH_MATRIX_SHARD", None)

    def nox_list(*args: str, shard: str = "") -> subprocess.CompletedProcess:
        extra = {"TORCH_MATRIX_SHARD": shard} if shard else {}
        return subprocess.run(
            [sys.executable, "-m", "nox", "-f", str(NOXFILE), "-l", "--json", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**env, **extra},
            check=False,
        )

    for session in sorted({s for _, args in invocations for s in _sessions(args)}):
        listed = nox_list("-s", session)
        assert listed.returncode == 0, f"nox session {session!r} does not exist: {listed.stderr}"
        assert session in {entry["name"] for entry in json.loads(listed.stdout)}
    for workflow, args in invocations:
        # The exact flags, listed instead of run: nox rejects unknown options and sessions.
        listing = [word for word in args if word not in ("-l", "--list", "--json")]
        checked = nox_list(*listing, shard="1/2")
        assert checked.returncode == 0, f"{workflow}: nox {shlex.join(args)}: {checked.stderr}"
        assert isinstance(json.loads(checked.stdout), list)


def _step(job: str, name: str) -> str:
    nightly = _load(REPO / ".github" / "workflows" / "nightly.yml")
    return next(s["run"] for s in nightly["jobs"][job]["steps"] if s.get("name") == name)


@pytest.mark.parametrize(
    "tags, expected",
    [
        ("", {"t2.1.0", "t2.2.0"}),
        ("torch2.2", {"t2.2.0"}),
    ],
)
def test_the_plan_step_outputs_shards_and_expected_cells(offline_spec, tmp_path, tags, expected):
    """The plan job's own script, run by bash: job outputs for the matrix, the cells to expect."""
    outputs = tmp_path / "github-output"
    outputs.touch()
    env = {
        **os.environ,
        "TORCH_MATRIX_SPEC": str(offline_spec),
        "SHARD_COUNT": "2",
        "CELL_FILTER": "",
        "CELL_TAGS": tags,
        "GITHUB_OUTPUT": str(outputs),
        "TORCH_MATRIX_CACHE_DIR": str(tmp_path / "index-cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TORCH_MATRIX_SHARD", None)
    (tmp_path / "noxfile.py").symlink_to(NOXFILE)  # the step runs in the checkout
    done = subprocess.run(
        [
            "bash",
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            _step("plan", "Plan the cells and the shards"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    shards = json.loads(written["shards"])
    assert [entry["shard"] for entry in shards] == ["1/2", "2/2"]
    assert sorted(c for entry in shards for c in entry["cells"]) == sorted(
        f"{torch}-py{sys.version_info[0]}.{sys.version_info[1]}" for torch in ("t2.1.0", "t2.2.0")
    )
    assert written["pythons"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    planned = json.loads((tmp_path / "plan" / "expected.json").read_text())
    ids = {cell if isinstance(cell, str) else cell["id"] for cell in planned}
    assert {cell.split("-")[0] for cell in ids} == expected


# ---------------------------------------------------------------- supply chain (issue 35)

_USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")
_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _zizmor() -> str | None:
    """The zizmor of this environment (the `test` extra installs it next to python), else PATH's."""
    import shutil
    import sysconfig

    here = Path(sysconfig.get_path("scripts")) / "zizmor"
    return str(here) if here.is_file() else shutil.which("zizmor")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_sha_with_its_tag_beside_it(workflow: Path) -> None:
    """Workflows meant for self-hosted GPU runners run third-party code: a tag can be moved to
    other code, a full commit SHA cannot. The tag stays in a comment, for people and Dependabot."""
    found = 0
    for number, line in enumerate(workflow.read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        match = _USES.match(line)
        if not match or match.group(1).startswith("./"):
            continue
        found += 1
        ref, rest = match.group(1), match.group(2)
        assert _PINNED.match(ref), f"{workflow.name}:{number}: {ref} is not pinned by commit SHA"
        assert re.fullmatch(r"\s+# v\d+(\.\d+)*(\s+# zizmor: ignore\[[\w-]+\] \S.*)?\s*", rest), (
            f"{workflow.name}:{number}: the pinned tag belongs in a comment beside the SHA"
        )
    assert found, f"{workflow.name}: no action found (the pattern is out of date?)"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_checkout_leaves_its_token_in_the_workspace(workflow: Path) -> None:
    """A checkout persists its token in .git/config unless told not to; a later upload of the
    workspace (or any later step) can then carry it off."""
    data = YAML(typ="safe").load(workflow.read_text())
    checkouts = [
        step
        for job in data["jobs"].values()
        for step in job.get("steps", ())
        if str(step.get("uses", "")).startswith("actions/checkout@")
    ]
    for step in checkouts:
        assert (step.get("with") or {}).get("persist-credentials") is False, (workflow.name, step)


def test_the_workflow_audit_is_clean() -> None:
    """zizmor (pinned in the `test` extra), offline, with its auditor persona (every audit, low
    confidence too): no finding. A finding that must stay is justified in a comment beside it
    (`# zizmor: ignore[...]` with the reason)."""
    zizmor = _zizmor()
    if zizmor is None:
        message = (
            "zizmor not found: install the test extra (pip install -e '.[test]'); "
            "the workflow audit did not run"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run(
        [zizmor, "--offline", "--no-progress", "--persona", "auditor", str(REPO / ".github")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr, done.stdout + done.stderr


def test_no_input_is_written_to_the_github_env_file():
    """Issue 45: `echo "TORCH_MATRIX_SPEC=$SPEC" >> "$GITHUB_ENV"` let a newline in a dispatch
    input set any variable for the later steps. An input reaches a step through `env:`; the one
    value still written there (a repository variable's cache path) is checked for line breaks."""
    for path in WORKFLOWS:
        for script in _run_scripts(_load(path)):
            for line in script.splitlines():
                if "GITHUB_ENV" not in line:
                    continue
                assert "SPEC" not in line and "inputs" not in line, f"{path.name}: {line}"
                assert "\\n'" in script, f"{path.name}: {line} writes an unchecked value"


def test_a_secret_is_read_only_in_a_job_with_its_own_environment():
    """Issue 45 (zizmor secrets-outside-env): the nightly's CONSTRAINTS_PR_TOKEN is read by one
    job, whose `environment:` holds it behind that environment's protection rules."""
    nightly = REPO / ".github" / "workflows" / "nightly.yml"
    for name, job in _load(nightly)["jobs"].items():
        if "secrets." in json.dumps(job):
            assert job.get("environment"), f"nightly.yml job {name} reads a secret outside one"
