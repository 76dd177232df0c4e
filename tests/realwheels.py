"""Build or reuse uv venvs that hold real torch wheels, and run probes inside them.

The venvs live outside the checkout (``TORCH_MATRIX_REALWHEELS_DIR``, default
``~/.cache/torch-matrix/realwheels``); uv's cache makes re-creating one take about a second
once its wheels were downloaded. A venv counts as ready only when its ``.ready`` marker says
it was built from the same requirements.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VENVS_DIR = Path(
    os.environ.get(
        "TORCH_MATRIX_REALWHEELS_DIR", Path.home() / ".cache" / "torch-matrix" / "realwheels"
    )
)
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


@dataclass(frozen=True)
class WheelEnv:
    """One real-wheel venv: a name, a Python X.Y, and what uv installs into it."""

    name: str
    python: str
    requirements: tuple[str, ...]
    find_links: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return VENVS_DIR / self.name

    @property
    def python_exe(self) -> Path:
        return self.path / "bin" / "python"


CPU_2_13 = WheelEnv("a-torch2.13-cpu", "3.11", ("torch==2.13.0+cpu", "numpy"), ("/opt/wheels",))
PYPI_2_4 = WheelEnv(
    "b-torch2.4.1", "3.11", ("torch==2.4.1", "torchvision==0.19.1", "numpy<2", "onnx")
)
PYPI_1_13 = WheelEnv("c-torch1.13.1", "3.10", ("torch==1.13.1", "torchvision==0.14.1", "numpy<2"))
# torch 1.13.1 was built against numpy 1: with numpy 2 it imports, warns, and from_numpy breaks.
NUMPY2_ON_1_13 = WheelEnv("d-torch1.13.1-numpy2", "3.10", ("torch==1.13.1", "numpy>=2"))
# The oldest torch the probes support, on the oldest Python they support.
OLDEST_1_8 = WheelEnv(
    "e-torch1.8.1-py38", "3.8", ("torch==1.8.1", "torchvision==0.9.1", "numpy<1.25")
)
# onnx without onnxscript: what a cell that only lists onnx gets.
CPU_2_13_ONNX = WheelEnv(
    "f-torch2.13-cpu-onnx", "3.11", ("torch==2.13.0+cpu", "numpy", "onnx"), ("/opt/wheels",)
)
ALL_ENVS = (CPU_2_13, PYPI_2_4, PYPI_1_13, NUMPY2_ON_1_13, OLDEST_1_8, CPU_2_13_ONNX)


class EnvUnavailable(Exception):
    """The venv could not be built here (no interpreter, no network, no wheel)."""


def find_python(version: str) -> str:
    """An absolute interpreter path for Python X.Y (pyenv shims fail under uv, so never use them)."""
    candidates = sorted(PYENV_VERSIONS.glob(version + ".*"), reverse=True)
    for candidate in candidates:
        exe = candidate / "bin" / "python"
        if exe.exists():
            return str(exe)
    found = shutil.which("python" + version)
    if found:
        return found
    raise EnvUnavailable("no Python %s interpreter" % version)


def ensure_env(env: WheelEnv, timeout: float = 1800) -> Path:
    """Create ``env`` with uv unless an identical one is ready; return its interpreter."""
    marker = env.path / ".ready"
    wanted = json.dumps(
        {"python": env.python, "requirements": env.requirements, "find_links": env.find_links}
    )
    if env.python_exe.exists() and marker.exists() and marker.read_text() == wanted:
        return env.python_exe
    uv = shutil.which("uv")
    if uv is None:
        raise EnvUnavailable("uv not found")
    if env.path.exists():
        shutil.rmtree(env.path)
    env.path.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [uv, "venv", "-q", "-p", find_python(env.python), str(env.path)],
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(env.python_exe),
            *[arg for link in env.find_links for arg in ("--find-links", link)],
            *env.requirements,
        ],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise EnvUnavailable("%s failed: %s" % (" ".join(step[:3]), done.stderr.strip()[-500:]))
    marker.write_text(wanted)
    return env.python_exe


def run_suite(python: Path, names: list[str], workdir: Path, timeout: float = 900) -> dict:
    """Run ``python -m torch_matrix.probes --select NAMES`` in the venv; the runner's JSON document (results keyed by name)."""
    out = workdir / "probes.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [
            str(python),
            "-m",
            "torch_matrix.probes",
            "--select",
            ",".join(names),
            "--out",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(workdir),
    )
    if not out.exists():
        raise AssertionError(
            "python -m torch_matrix.probes wrote no result (rc %s)\nstdout:\n%s\nstderr:\n%s"
            % (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
        )
    document = json.loads(out.read_text())
    document["by_name"] = {result["name"]: result for result in document["results"]}
    return document


if (
    __name__ == "__main__"
):  # python tests/realwheels.py [env-name] [probe,probe,...]: a quick look by hand
    chosen = [env for env in ALL_ENVS if len(sys.argv) < 2 or env.name == sys.argv[1]]
    for chosen_env in chosen:
        exe = ensure_env(chosen_env)
        names = (
            sys.argv[2].split(",")
            if len(sys.argv) > 2
            else sorted(
                path.stem
                for path in (REPO_ROOT / "torch_matrix" / "probes" / "standard").glob("[!_]*.py")
            )
        )
        import tempfile

        suite = run_suite(exe, names, Path(tempfile.mkdtemp(prefix="realwheels-")))
        for probe_name, result in suite["by_name"].items():
            print(
                chosen_env.name,
                probe_name,
                result["status"],
                result.get("message", ""),
                json.dumps(result.get("evidence"), default=repr)[:300],
            )
