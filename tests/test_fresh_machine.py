"""The README's two commands on a fresh machine, as a newcomer types them.

Each command makes its own virtual environment (``.venv`` in the checkout) before anything is
installed, so it never runs in the machine's global interpreter (whose start-up may import
modules that hide a defect: a module of ours named like the standard library's, say) and it
works where the system Python refuses ``pip install`` (PEP 668). ``.ci/run`` and the GitHub
workflow run exactly the README's test command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CI_RUN = REPO / ".ci" / "run"
CI_WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def readme_command(heading: str) -> str:
    """The one-line bash block under a README heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert block, f"no bash block under README's '## {heading}'"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(lines) == 1, f"README's '{heading}' should be one command, got {lines}"
    return lines[0]


SETUP = "Set up and run the default matrix"
TESTS = "Run the tests"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    command = readme_command(TESTS)
    ci = CI_RUN.read_text(encoding="utf-8").splitlines()
    assert command in ci, f".ci/run does not run the README's test command {command!r}"
    assert "export TORCH_MATRIX_REQUIRE_REALWHEELS=1" in ci
    # Nothing else: a step the README lacks (unsetting variables, say) would give CI what a new user
    # following the README does not get.
    steps = [line for line in ci if line.strip() and not line.startswith("#")]
    assert steps == [
        "set -euo pipefail",
        'cd "$(dirname "$0")/.."',
        "export TORCH_MATRIX_REQUIRE_REALWHEELS=1",
        command,
    ], steps
    assert "bash tests/install-browser.sh" in command and command.endswith("python -m pytest")
    assert f"run: {command}" in CI_WORKFLOW.read_text(encoding="utf-8")


def test_both_commands_make_their_own_venv_before_installing() -> None:
    for heading in (SETUP, TESTS):
        steps = readme_command(heading).split(" && ")
        assert re.fullmatch(r"python3 -m venv( --clear)? \.venv", steps[0]), (heading, steps)
        assert steps[1] == ". .venv/bin/activate", (heading, steps)


def _externally_managed_python() -> str | None:
    """A system Python that refuses ``pip install`` (PEP 668), if this machine has one."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.access(candidate, os.X_OK):
            continue
        stdlib = subprocess.run(
            [candidate, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        has_venv = (
            subprocess.run(
                [candidate, "-c", "import venv, ensurepip"], capture_output=True
            ).returncode
            == 0
        )
        if stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").is_file() and has_venv:
            return candidate
    return None


def _fresh_checkout(dest: Path) -> Path:
    """The tracked files only, as ``git clone`` would give them (no .venv, no build output)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    )
    for name in filter(None, listed.stdout.split("\0")):
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def test_readme_setup_command_works_where_the_system_pip_refuses(tmp_path: Path) -> None:
    """On PATH: a ``pip`` that refuses like PEP 668's, and ``python3`` the system's (externally
    managed where this machine has one, else the base interpreter of the one running the tests).
    The README's setup command, up to its installing step, must leave torch-matrix, nox and uv
    in the checkout's own ``.venv``."""
    checkout = _fresh_checkout(tmp_path / "torch-matrix")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = _externally_managed_python() or getattr(sys, "_base_executable", sys.executable)
    (bin_dir / "python3").symlink_to(python)
    for name in ("pip", "pip3"):
        refusing = bin_dir / name
        refusing.write_text("#!/bin/sh\necho 'error: externally-managed-environment' >&2\nexit 1\n")
        refusing.chmod(0o755)
    steps = readme_command(SETUP).split(" && ")
    assert steps[-1] == "nox -s matrix", steps  # the matrix itself is the e2e tests' job
    probe = (
        "python -c 'import sys, torch_matrix; print(sys.prefix); print(torch_matrix.__file__)' && "
        "command -v nox uv torch-matrix"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
        and not key.startswith("PIP_REQUIRE")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    done = subprocess.run(
        ["bash", "-c", " && ".join(steps[:-1]) + " && " + probe],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    venv = checkout / ".venv"
    prefix, module, *tools = done.stdout.strip().splitlines()[-5:]
    assert Path(prefix) == venv
    assert Path(module).is_relative_to(checkout / "torch_matrix")
    assert [Path(tool).parent for tool in tools] == [venv / "bin"] * 3, tools
