"""The fault suite: every fault of issue 12, reproduced for real, and the cases that already held.

Each test makes the fault happen (a real full filesystem: a tmpfs in a private mount
namespace; real signals to real process groups; two real concurrent ``nox -s matrix``
runs against the synthetic wheel index) and asserts what must hold:

- no false verdict (a broken install or a dead runner is ``error``, never evidence);
- nothing already written is lost;
- bad input gets one line (``torch-matrix: error: ...`` and a hint), never a traceback;
- no process survives the run (checked by PID afterwards).

Where a fault cannot be made on this machine (no ``unshare -m``, not root) the test is
skipped with the reason, never passed quietly. Run it alone: ``python -m pytest -m faults``.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from torch_matrix.vocab.records import PROBE_RUNNER
from torch_matrix.world.results import load_results, read_result
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, NO_EVIDENCE, verdict_of
from tests.synthetic_wheels import build_index, torch_wheel, torchvision_wheel

pytestmark = [pytest.mark.faults, pytest.mark.e2e]

REPO = Path(__file__).resolve().parent.parent
NOXFILE = REPO / "noxfile.py"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
GOOD = f"t2.1.0-py{PY}"  # compatible in the synthetic world
BROKEN = f"t2.2.0-py{PY}"  # incompatible: torchvision's ops are broken


# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """One synthetic index for the whole module (building it is the slow part of setup)."""
    return build_index(tmp_path_factory.mktemp("index"))


def spec_text(
    index_url: str,
    *,
    torch=("2.1.0",),
    probes: str = 'run = ["install_sanity"]',
    top: str = "",
    index_extra: str = "",
    name: str = "faults",
    python: str = "current",
) -> str:
    return (
        f'name = "{name}"\npython = ["{python}"]\ntorch = {json.dumps(list(torch))}\n'
        f'torchvision = "paired"\n{top}\n[probes]\n{probes}\n\n'
        f'[index]\ndefault = "{index_url}"\nextra = []\nfind_links = []\n{index_extra}'
    )


def write_spec(tmp: Path, index_url: str, **kwargs) -> Path:
    path = tmp / "matrix.toml"
    path.write_text(spec_text(index_url, **kwargs))
    return path


def env_for(tmp: Path, spec: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX")) and k != "VIRTUAL_ENV"
    }
    env.update(
        TORCH_MATRIX_SPEC=str(spec),
        TORCH_MATRIX_RESULTS=str(tmp / "results"),
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_HTTP_RETRIES="0",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def nox_command(tmp: Path, *args: str, envdir: Path | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nox",
        "-f",
        str(NOXFILE),
        "--envdir",
        str(envdir or tmp / "nox"),
        "--no-color",
        *args,
    ]


def run(
    command: list[str], tmp: Path, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_nox(tmp: Path, env: dict[str, str], *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run(nox_command(tmp, *args, **kwargs), tmp, env)


def cli(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "torch_matrix.cli", *args], tmp, env)


def cells_dir(tmp: Path, name: str = "faults") -> Path:
    return tmp / "results" / name / "cells"


def one_error(text: str, *needles: str) -> str:
    """Exactly one ``torch-matrix: error:`` line (plus an optional hint line), no traceback."""
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if "torch-matrix: error:" in line]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def hint_of(text: str) -> str:
    hints = [line.strip() for line in text.splitlines() if line.strip().startswith("hint:")]
    assert hints, f"no hint line in:\n{text}"
    return hints[0]


def _is_zombie(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def survivors(tmp: Path) -> list[str]:
    """Live processes whose command line, environment or cwd mention ``tmp`` (the test's world)."""
    needle = str(tmp).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd").encode()
        except OSError:
            continue
        if (needle in cmdline or needle in environ or needle in cwd) and not _is_zombie(pid):
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
            found.append(f"{pid}: {shown}")
    return found


def assert_no_orphans(tmp: Path, pids=(), wait_s: float = 5.0) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        left = survivors(tmp) + [f"{pid}: listed" for pid in pids if alive(pid)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for line in left:  # clean up after a failure, so one failing test does not leak into others
        with_pid = int(line.split(":")[0])
        try:
            os.kill(with_pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes outlived the run:\n" + "\n".join(left)


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@functools.lru_cache(maxsize=1)
def private_mounts_reason() -> str:
    """Why a tmpfs in a private mount namespace cannot be made here ('' when it can)."""
    if not shutil.which("unshare"):
        return "unshare(1) is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a private mount namespace: {probe.stderr.strip()}"
    return ""


def needs_private_mounts() -> None:
    reason = private_mounts_reason()
    if reason:
        pytest.skip(f"FAULT NOT REPRODUCED on this machine: {reason}")


def in_namespace(setup: str, command: list[str]) -> list[str]:
    """``command`` run after ``setup`` (mount commands) inside a private mount namespace."""
    return ["unshare", "-m", "sh", "-ec", setup + '\nexec "$@"', "sh", *command]


def probe_dir(tmp: Path, source: str, name: str = "custom.py") -> Path:
    directory = tmp / "my_probes"
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(source)
    return directory


# ---------------------------------------------------------------- 1. full disk during install


def test_full_disk_during_install_is_error_never_a_pin(tmp_path):
    """A venv on a 1 MB tmpfs; torch carries a 2.4 MB file. The run is refused before any install
    (the venvs' disk cannot hold the plan's largest cell; before that check, uv failed with ENOSPC
    mid-install, an error cell): no evidence, the run goes red, the report names the cell and
    why, and no pin comes out of it. uv's own ENOSPC words are classified as a disk error in
    tests/test_environment.py (DISK_FULL)."""
    needs_private_mounts()
    big = torch_wheel("2.1.0")
    big.files["torch/_weights.py"] = "# " + "x" * 2_400_000 + "\n"
    index = build_index(tmp_path / "index", [big, torchvision_wheel("0.16.0", "2.1.0")])
    spec = write_spec(tmp_path, index.url)
    env = env_for(tmp_path, spec, TORCH_MATRIX_RETRY_BACKOFF="0.2")
    envdir = tmp_path / "nox"
    envdir.mkdir()
    done = run(
        in_namespace(
            f"mount -t tmpfs -o size=1m tmpfs {envdir}", nox_command(tmp_path, "-s", "matrix")
        ),
        tmp_path,
        env,
    )
    log = done.stdout + done.stderr
    assert "the venvs' disk cannot hold this run" in log, log
    assert done.returncode != 0, log  # no evidence: the run must go red
    assert read_result(cells_dir(tmp_path) / f"{GOOD}.json") is None, log
    assert "Traceback" not in log
    report = cli(tmp_path, env, "report", str(tmp_path / "results" / "faults"))
    assert "planned but missing" in report.stdout and GOOD in report.stdout, report.stdout
    # No pin comes out of it.
    pins = cli(tmp_path, env, "pins", str(tmp_path / "results" / "faults"), "--no-coverage")
    assert "torch!=2.1.0" not in pins.stdout and "!=" not in pins.stdout, pins.stdout
    assert_no_orphans(tmp_path)


def test_partial_install_is_caught_by_the_wheels_record(tmp_path, index):
    """A venv whose torch lost a file (what an interrupted install leaves) does not verify."""
    from torch_matrix.world import environment
    from torch_matrix.vocab.records import INSTALLED, Cell, InstallOutcome

    venv = tmp_path / "venv"
    uv = environment.uv_executable()
    subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--index-url",
            index.url,
            "torch==2.1.0",
        ],
        check=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    cell = Cell(id="t2.1.0", axes={"torch": "2.1.0"}, requirements=("torch==2.1.0",))
    ok = environment.verify(cell, str(python), InstallOutcome(INSTALLED, (), "", 1))
    assert ok.status == INSTALLED, ok.message
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "torch" / "_tensor.py").unlink()
    broken = environment.verify(cell, str(python), InstallOutcome(INSTALLED, (), "", 1))
    assert broken.status == "error"
    assert "torch/_tensor.py" in broken.message and "RECORD" in broken.message


# What a half-written install really looks like, against what publishers ship (issue 25). A
# killed or starved installer leaves files missing, empty, cut short or with other bytes, or
# no RECORD at all; PyPI's torch 1.x wheels had ``+cu102`` cut from METADATA's Version line
# after RECORD was written (22,902 bytes installed, RECORD says 22,908), and pip and uv
# install them without a word: that is not a partial install.

NATIVE_LIB = "torch/lib/libtorch_stub.so"  # a stand-in shared library: never imported, only checked


def _torch_with_native_lib(**kwargs):
    from tests.synthetic_wheels import WheelSpec

    spec = torch_wheel("2.1.0")
    files = {**spec.files, NATIVE_LIB: bytes(range(256)) * 256}
    return WheelSpec(spec.name, spec.version, files, **kwargs)


def _torch_cell():
    from torch_matrix.vocab.records import Cell

    return Cell(id="t2.1.0", axes={"torch": "2.1.0"}, requirements=("torch==2.1.0",))


def _verify(python: Path):
    from torch_matrix.vocab.records import INSTALLED, InstallOutcome
    from torch_matrix.world import environment

    return environment.verify(_torch_cell(), str(python), InstallOutcome(INSTALLED, (), "", 1))


def _venv_with_wheel(tmp: Path, wheel: Path, installer: str) -> tuple[Path, Path]:
    """A venv holding ``wheel`` (as from an index: not a direct URL), installed by uv or by pip;
    (its python, its site-packages)."""
    from torch_matrix.world import environment

    venv = tmp / f"venv-{installer}"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp / "uv-cache")}
    uv = environment.uv_executable()
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    if installer == "uv":
        command = [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--no-index",
            "--find-links",
            str(wheel.parent),
            "torch==2.1.0",
        ]
    else:
        pips = [
            exe
            for exe in dict.fromkeys([sys.executable, getattr(sys, "_base_executable", "")])
            if exe
            and subprocess.run([exe, "-m", "pip", "--version"], capture_output=True).returncode == 0
        ]
        if not pips:
            pytest.skip("NOT CHECKED WITH PIP: no interpreter here has pip (uv's case still runs)")
        command = [
            pips[0],
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--find-links",
            str(wheel.parent),
            "--disable-pip-version-check",
            "torch==2.1.0",
        ]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{installer} refused the wheel: {done.stderr}"
    return python, next(venv.glob("lib/python*/site-packages"))


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_metadata_a_publisher_edited_after_record_is_not_a_partial_install(tmp_path, installer):
    """The torch 1.x case, built here: RECORD hashes METADATA with ``Version: 2.1.0+cu102``; the
    wheel ships it with the label cut. Both installers take it; so must the check."""
    from tests.synthetic_wheels import build_wheel

    built = torch_wheel("2.1.0")
    shipped = built.metadata()
    spec = _torch_with_native_lib(
        metadata_text=shipped.replace("Version: 2.1.0\n", "Version: 2.1.0+cu102\n"),
        after_record={f"{built.dist_info}/METADATA": shipped},
    )
    wheel = build_wheel(spec, tmp_path / "wheels")
    python, site = _venv_with_wheel(tmp_path, wheel, installer)
    installed = (site / built.dist_info / "METADATA").stat().st_size
    recorded = [
        line
        for line in (site / built.dist_info / "RECORD").read_text().splitlines()
        if line.startswith(f"{built.dist_info}/METADATA,")
    ]
    assert recorded and recorded[0].endswith(f",{installed + len('+cu102')}"), (
        recorded
    )  # the edit is there
    ok = _verify(python)
    assert ok.status == "installed", ok.message
    assert ok.resolved["torch"] == "2.1.0"


def _cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # what a full disk leaves: a prefix


def _other_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096:8192] = bytes(4096)  # pages that never reached the disk: same size, zeros
    path.write_bytes(bytes(data))


DAMAGE = {  # name: (file, how, what the message says about it)
    "missing": ("torch/_tensor.py", Path.unlink, "missing"),
    "cut-short": ("torch/_tensor.py", _cut_short, "shorter"),
    "zero-bytes": ("torch/serialization.py", lambda p: p.write_bytes(b""), "empty"),
    "native-lib-other-bytes": (NATIVE_LIB, _other_bytes, "other bytes"),
    "native-lib-cut-short": (NATIVE_LIB, _cut_short, "shorter"),
    "metadata-without-version": (
        "torch-2.1.0.dist-info/WHEEL",
        lambda p: p.write_text("Generator: x\n"),
        "lacks Wheel-Version",
    ),
    "no-record": ("torch-2.1.0.dist-info/RECORD", Path.unlink, "no RECORD"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_half_written_install_is_an_install_error_naming_the_file(tmp_path, damage):
    from tests.synthetic_wheels import build_wheel

    python, site = _venv_with_wheel(
        tmp_path, build_wheel(_torch_with_native_lib(), tmp_path / "wheels"), "uv"
    )
    assert _verify(python).status == "installed"
    relative, harm, says = DAMAGE[damage]
    harm(site / relative)
    broken = _verify(python)
    assert broken.status == "error", (damage, broken)
    assert "partial install" in broken.message and says in broken.message, broken.message
    if damage != "no-record":
        assert relative in broken.message, broken.message


def test_a_file_hashed_once_is_not_hashed_again_until_it_changes(tmp_path, monkeypatch):
    """uv hardlinks every cell's files from its cache: the install check hashes an inode once,
    and again only when the file changed (its mtime moved); damaged bytes are never remembered."""
    import base64
    import hashlib

    from torch_matrix.probes import installcheck

    site = tmp_path / "venv1"
    (site / "pkg").mkdir(parents=True)
    lib = site / "pkg" / "lib.so"
    lib.write_bytes(os.urandom(3 * 4096))
    os.utime(lib, (time.time() - 3600, time.time() - 3600))  # written an hour ago, like uv's cache
    digest = (
        base64.urlsafe_b64encode(hashlib.sha256(lib.read_bytes()).digest()).rstrip(b"=").decode()
    )
    row = ["pkg/lib.so", f"sha256={digest}", str(lib.stat().st_size)]
    hashed = []
    real = installcheck._digests
    monkeypatch.setattr(
        installcheck,
        "_digests",
        lambda path, algorithm: hashed.append(path) or real(path, algorithm),
    )

    def check(where: Path, memo_path: str) -> str:
        status = (where / "pkg" / "lib.so").stat()
        memo = installcheck.VerifiedFiles(memo_path, {(status.st_dev, status.st_ino)})
        problem = installcheck._record_row_problem(
            str(where), "pkg-1.0.dist-info", row, verified=memo
        )
        memo.save()
        return problem

    memo_path = str(tmp_path / "cache" / "verified.sqlite3")
    assert check(site, memo_path) == "" and len(hashed) == 1
    other = tmp_path / "venv2"
    (other / "pkg").mkdir(parents=True)
    os.link(lib, other / "pkg" / "lib.so")  # the next cell: the same inode
    assert check(other, memo_path) == "" and len(hashed) == 1, "the same bytes were hashed twice"
    data = bytearray(lib.read_bytes())
    data[4096:8192] = bytes(4096)  # same size, other bytes: a write, so the mtime moves
    lib.write_bytes(bytes(data))
    assert "other bytes" in check(other, memo_path) and len(hashed) == 2
    assert "other bytes" in check(other, memo_path) and len(hashed) == 3, (
        "a damaged file was remembered"
    )
    # Without the memo (TORCH_MATRIX_VERIFIED_DB="") or with an unusable one, every file is hashed.
    assert "other bytes" in check(other, "") and len(hashed) == 4
    (tmp_path / "not-a-dir").write_text("")
    assert (
        "other bytes" in check(other, str(tmp_path / "not-a-dir" / "memo.sqlite3"))
        and len(hashed) == 5
    )


def test_the_memo_remembers_the_file_it_read_not_an_earlier_stat_of_its_path(tmp_path):
    """The check stats every file first, then hashes. A path replaced in between (same bytes,
    another inode) must not make the memo vouch for the old inode: a later cell hardlinked to
    the old one, damaged meanwhile, would pass unhashed."""
    import base64
    import hashlib

    from torch_matrix.probes import installcheck

    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    lib = site / "pkg" / "lib.so"
    data = os.urandom(4096)
    lib.write_bytes(data)
    old_status = lib.stat()
    old_keep = tmp_path / "old.so"
    os.link(lib, old_keep)  # the old inode lives on elsewhere
    replacement = tmp_path / "new.so"
    replacement.write_bytes(data)
    os.replace(replacement, lib)  # between the stat and the hashing
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    row = ["pkg/lib.so", f"sha256={digest}", str(len(data))]
    memo = installcheck.VerifiedFiles(str(tmp_path / "memo.sqlite3"), set())
    assert (
        installcheck._record_row_problem(
            str(site), "pkg-1.0.dist-info", row, verified=memo, status=old_status
        )
        == ""
    )
    assert [key[1] for key in memo.new] == [lib.stat().st_ino] != [old_status.st_ino]


def test_the_memo_of_hashed_files_keeps_its_newest_rows_up_to_its_limit(tmp_path, monkeypatch):
    """The memo is looked up file by file and trimmed from its oldest rows: a machine that tested
    many releases keeps the newest ``LIMIT`` rows, and a row trimmed away is only hashed again."""
    import sqlite3

    from torch_matrix.probes import installcheck

    monkeypatch.setattr(installcheck.VerifiedFiles, "LIMIT", 5)
    path = str(tmp_path / "memo.sqlite3")
    for batch in (range(0, 4), range(4, 8), range(5, 9)):  # the last repeats 5..7: only 8 is new
        memo = installcheck.VerifiedFiles(path, set())
        memo.new = [(1, ino, 10, 20, "sha256=x") for ino in batch]
        memo.save()
    rows = sqlite3.connect(path).execute("SELECT ino FROM verified ORDER BY rowid").fetchall()
    assert [ino for (ino,) in rows] == [4, 5, 6, 7, 8]
    # only these inodes' rows are read
    memo = installcheck.VerifiedFiles(path, {(1, 8), (1, 4), (1, 3)})
    assert memo.knows((1, 8, 10, 20, "sha256=x")) and memo.knows((1, 4, 10, 20, "sha256=x"))
    assert not memo.knows((1, 3, 10, 20, "sha256=x"))  # trimmed: it will be hashed again
    assert not memo.knows((1, 8, 10, 21, "sha256=x"))  # another mtime: other bytes may be there
    assert not memo.knows((1, 5, 10, 20, "sha256=x"))  # not asked for: not read


# The whole cell path (plan, install, verify, probes) on real PyPI wheels: the oldest torch the
# tests name (1.8.1, Python 3.8), the seed case's torch 1.12.0 (METADATA edited after RECORD),
# and the newest release the default matrix names. The machine's uv cache is used (downloaded once).
REAL_CELLS = [("3.8", "1.8.1", "0.9.1"), ("3.10", "1.12.0", "0.13.0"), ("3.11", "2.15.0", "0.29.2")]


@pytest.mark.realwheels
@pytest.mark.parametrize(
    ("python", "torch", "torchvision"), REAL_CELLS, ids=[c[1] for c in REAL_CELLS]
)
def test_real_wheels_install_verify_and_probe(tmp_path, python, torch, torchvision):
    from tests.realwheels import EnvUnavailable, find_python

    try:
        interpreter = find_python(python)
    except EnvUnavailable as why:
        pytest.skip(f"no real-wheel cell for torch {torch}: {why}")
    spec = tmp_path / "matrix.toml"
    spec.write_text(
        f'name = "real"\npython = ["{python}"]\ntorch = ["{torch}"]\ntorchvision = "paired"\n'
        '[probes]\nrun = ["install_sanity"]\n[index]\ndefault = "https://pypi.org/simple"\n'
        f'extra = []\nfind_links = []\n[interpreters]\n"{python}" = "{interpreter}"\n'
    )
    env = env_for(tmp_path, spec)
    env.pop("UV_CACHE_DIR")  # the machine's warm uv cache: each wheel is downloaded once
    env.pop("UV_HTTP_RETRIES")
    done = run(nox_command(tmp_path, "-s", "matrix"), tmp_path, env, timeout=1500)
    log = done.stdout + done.stderr
    if "UNSATISFIABLE" in log or "cannot reach" in log.lower():
        pytest.skip(
            f"no real-wheel cell for torch {torch} here (offline or no wheel): {log[-500:]}"
        )
    results = list(cells_dir(tmp_path, "real").glob("*.json"))
    assert len(results) == 1, log
    result = read_result(results[0])
    assert result.install.status == "installed", result.install.message
    assert result.install.resolved["torchvision"].split("+")[0] == torchvision
    assert "partial install" not in log
    sanity = result.probe("install_sanity")
    assert sanity is not None and sanity.status == "pass", sanity
    assert verdict_of(result).kind == COMPATIBLE, verdict_of(result).reason
    assert done.returncode == 0, log


# ---------------------------------------------------------------- 2. probe timeouts


TIMEOUT_PROBES = """
import os, time
from torch_matrix.probes.api import probe

@probe("quick")
def quick(ctx):
    return {"limit": ctx.timeout}

@probe("stuck")
def stuck(ctx):
    time.sleep(600)

@probe("stuck_declared", timeout=600)
def stuck_declared(ctx):
    time.sleep(600)
"""


def test_spec_timeout_reaches_each_probe(tmp_path, index):
    """`[probes] timeout = 2`: the hanging probe times out after 2 s; the cell keeps everything."""
    probes = probe_dir(tmp_path, TIMEOUT_PROBES)
    spec = write_spec(
        tmp_path,
        index.url,
        probes=f'run = ["install_sanity", "quick", "stuck"]\ndirs = ["{probes}"]\ntimeout = 2',
    )
    env = env_for(tmp_path, spec)
    started = time.monotonic()
    done = run_nox(tmp_path, env, "-s", "matrix")
    elapsed = time.monotonic() - started
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert result is not None, done.stderr
    statuses = {p.name: p.status for p in result.probes}
    assert statuses == {"install_sanity": "pass", "quick": "pass", "stuck": "timeout"}, statuses
    assert result.probe("quick").evidence["limit"] == 2.0
    assert elapsed < 60, f"the run took {elapsed:.0f} s: the 2 s limit did not reach the probe"
    assert "Traceback" not in done.stderr
    assert_no_orphans(tmp_path)


def test_spec_timeout_longer_than_the_runners_default(tmp_path, index):
    """`[probes] timeout = 300` must not be cut to the runner's 120 s default."""
    probes = probe_dir(tmp_path, TIMEOUT_PROBES)
    spec = write_spec(
        tmp_path, index.url, probes=f'run = ["quick"]\ndirs = ["{probes}"]\ntimeout = 300'
    )
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    assert done.returncode == 0, done.stderr
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert result.probe("quick").evidence["limit"] == 300.0  # the limit the probe really ran under
    assert_no_orphans(tmp_path)


def test_watchdog_keeps_finished_probes_and_orphans_nothing(tmp_path, index):
    """A probe that declares 600 s outlives the cell watchdog: finished probes' evidence stays."""
    probes = probe_dir(tmp_path, TIMEOUT_PROBES)
    spec = write_spec(
        tmp_path,
        index.url,
        probes=f'run = ["install_sanity", "quick", "stuck_declared"]\n'
        f'dirs = ["{probes}"]\ntimeout = 1',
    )
    env = env_for(tmp_path, spec, TORCH_MATRIX_PROBE_GRACE="3")
    done = run_nox(tmp_path, env, "-s", "matrix")
    assert done.returncode != 0, done.stderr  # a runner stopped by the watchdog: no evidence
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    statuses = {p.name: p.status for p in result.probes}
    assert statuses["install_sanity"] == "pass" and statuses["quick"] == "pass", statuses
    assert statuses[PROBE_RUNNER] == "error" and "ran past" in result.probe(PROBE_RUNNER).message
    assert verdict_of(result).kind == NO_EVIDENCE  # never incompatible
    assert "Traceback" not in done.stderr
    assert_no_orphans(tmp_path)


# ---------------------------------------------------------------- 3. concurrent runs


HANG_ONCE = "import os, sys, time\nwhile os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


# Ctrl-C in a terminal reaches a foreground job whose SIGINT is at its default. A shell that
# starts the suite as a background job without job control (`python -m pytest &` in a script,
# a CI step run that way) hands pytest SIGINT *ignored*, and every child inherits that: Python
# then installs no KeyboardInterrupt handler, so nox ignored the tests' Ctrl-C, ran on for the
# 60 s the tests wait, and was killed with its cell's processes still running (issue 25). What
# a test sends as Ctrl-C goes to a process started as a terminal starts a foreground job.
AS_FOREGROUND_JOB = [
    sys.executable,
    "-c",
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
    "os.execv(sys.argv[1], sys.argv[1:])",
]


def start_nox(
    tmp: Path, env: dict[str, str], *args: str, envdir: Path | None = None
) -> subprocess.Popen:
    return subprocess.Popen(
        [*AS_FOREGROUND_JOB, *nox_command(tmp, *args, envdir=envdir)],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@contextlib.contextmanager
def suite_started_with_sigint(disposition: str):
    """The suite as a terminal starts it ("default"), or as a script's background job does ("ignored")."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if disposition == "ignored" else None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


def read_until(proc: subprocess.Popen, marker: str, seen: list[str]) -> None:
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            return
    raise AssertionError("never saw " + marker + " in:\n" + "".join(seen))


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out, err


def test_second_concurrent_run_is_refused_naming_the_holder(tmp_path, index):
    gate = tmp_path / "gate"
    gate.touch()
    (tmp_path / "hang.py").write_text(HANG_ONCE)
    spec = write_spec(
        tmp_path,
        index.url,
        probes=f'run = ["install_sanity"]\n'
        f'[probes.commands]\nwait = "python {tmp_path / "hang.py"} {gate}"',
    )
    env = env_for(tmp_path, spec)
    first = start_nox(tmp_path, env, "-s", "matrix")
    seen: list[str] = []
    try:
        read_until(first, f"{GOOD} probes ...", seen)
        second = run_nox(tmp_path, env, "-s", "matrix")  # same results dir, same envdir
        other_envdir = run_nox(
            tmp_path,
            env_for(tmp_path, spec, TORCH_MATRIX_RESULTS=str(tmp_path / "r2")),
            "-s",
            "matrix",
        )
    finally:
        gate.unlink()
    out, err = finish(first)
    assert first.returncode == 0, "".join(seen) + err
    assert second.returncode != 0
    line = one_error(second.stderr, f"pid {first.pid}", str(tmp_path / "results" / "faults"))
    assert "hint:" in second.stderr, line
    assert other_envdir.returncode != 0
    one_error(other_envdir.stderr, f"pid {first.pid}", str(tmp_path / "nox"))
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert verdict_of(result).kind == COMPATIBLE  # the first run was not disturbed
    assert not (tmp_path / "r2" / "faults" / "cells").exists()
    assert_no_orphans(tmp_path)


def test_stale_lock_of_a_dead_run_is_taken_over(tmp_path, index):
    spec = write_spec(tmp_path, index.url)
    env = env_for(tmp_path, spec)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "results" / "faults"
    run_dir.mkdir(parents=True)
    (run_dir / ".torch-matrix.lock").write_text(f"{dead.pid}\n")
    (tmp_path / "nox").mkdir()
    (tmp_path / "nox" / ".torch-matrix.lock").write_text(f"{dead.pid}\n")
    done = run_nox(tmp_path, env, "-s", "matrix")
    assert done.returncode == 0, done.stderr
    assert verdict_of(read_result(cells_dir(tmp_path) / f"{GOOD}.json")).kind == COMPATIBLE


# ---------------------------------------------------------------- 4. signals leave no process


TREE_PROBE = """\
import os, subprocess, sys, time
pid_dir = sys.argv[1]
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
with open(os.path.join(pid_dir, "daemon.pid"), "w") as handle:
    handle.write(str(daemon.pid))
with open(os.path.join(pid_dir, "command.pid"), "w") as handle:
    handle.write(str(os.getpid()))
time.sleep(float(sys.argv[2]))
"""


def tree_spec(tmp: Path, index_url: str, hold_s: float) -> Path:
    pids = tmp / "pids"
    pids.mkdir()
    (tmp / "tree.py").write_text(TREE_PROBE)
    return write_spec(
        tmp,
        index_url,
        probes=f'run = ["install_sanity"]\n'
        f'[probes.commands]\ntree = "python {tmp / "tree.py"} {pids} {hold_s}"',
    )


def process_tree_pids(tmp: Path) -> list[int]:
    """The probe runner, the zygote (found by command line) and the pids the command probe wrote."""
    pids = [int((tmp / "pids" / name).read_text()) for name in ("daemon.pid", "command.pid")]
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"torch_matrix.probes" in cmdline or b"torch_matrix.probes.zygote" in cmdline:
                try:
                    if str(tmp).encode() in Path(f"/proc/{name}/environ").read_bytes():
                        pids.append(int(name))
                except OSError:
                    pass
    return pids


@pytest.mark.parametrize(
    ("signame", "suite_sigint"),
    [("SIGTERM", "default"), ("SIGINT", "default"), ("SIGINT", "ignored")],
)
def test_signal_to_the_run_leaves_no_process(tmp_path, index, signame, suite_sigint):
    """`docker stop` (SIGTERM) or Ctrl-C (SIGINT) to nox's process group mid-probe, whether the
    suite itself was started with SIGINT at its default or ignored."""
    spec = tree_spec(tmp_path, index.url, hold_s=300)
    env = env_for(tmp_path, spec)
    with suite_started_with_sigint(suite_sigint):
        proc = start_nox(tmp_path, env, "-s", "matrix")
    try:
        wait_for(lambda: (tmp_path / "pids" / "command.pid").exists(), 60, "the command probe")
        time.sleep(0.2)
        pids = process_tree_pids(tmp_path)
        assert len(pids) >= 4, pids  # daemon, command probe, runner, zygote
        os.killpg(proc.pid, getattr(signal, signame))
        out, err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert not (cells_dir(tmp_path) / f"{GOOD}.json").exists()  # interrupted: no half verdict
    assert_no_orphans(tmp_path, pids)


_CALLER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's foreground job has it
from torch_matrix.edges import proc
try:
    proc.call([sys.executable, "-c", sys.argv[2], sys.argv[1]])
except KeyboardInterrupt:
    sys.exit(130)
"""
_WINDS_DOWN = """
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
tmp = Path(sys.argv[1])
(tmp / "started").write_text("")
try:
    time.sleep(300)
except KeyboardInterrupt:
    time.sleep(1.5)  # nox stopping a cell's probe runner and its prefetch, keeping finished cells
    (tmp / "wound-down").write_text("")
"""


def test_ctrl_c_under_torch_matrix_run_lets_nox_wind_down(tmp_path):
    """``torch-matrix run`` runs nox in the foreground (``proc.call``). Ctrl-C reaches both; nox
    must get to finish its own clean-up, not be killed 0.25 s later as ``subprocess.call`` does."""
    caller = subprocess.Popen(
        [sys.executable, "-c", _CALLER, str(tmp_path), _WINDS_DOWN],
        cwd=REPO,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (tmp_path / "started").exists(), 30, "the child")
        os.killpg(caller.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        caller.wait(30)
    finally:
        if caller.poll() is None:
            os.killpg(caller.pid, signal.SIGKILL)
            caller.wait()
    assert caller.returncode == 130
    assert (tmp_path / "wound-down").exists(), "the child was killed before it wound down"


def test_a_probes_daemon_does_not_outlive_the_suite(tmp_path, index):
    spec = tree_spec(tmp_path, index.url, hold_s=0)
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    assert done.returncode == 0, done.stderr
    daemon = int((tmp_path / "pids" / "daemon.pid").read_text())
    assert_no_orphans(tmp_path, [daemon])


# ---------------------------------------------------------------- 5. spec mistakes at plan time


def assert_plan_time_error(tmp: Path, spec: Path, *needles: str) -> None:
    env = env_for(tmp, spec)
    for done in (cli(tmp, env, "plan"), run_nox(tmp, env, "-l")):
        assert done.returncode == 2, done.stdout + done.stderr
        one_error(done.stderr, str(spec), *needles)
        hint_of(done.stderr)
    assert not (tmp / "nox").exists() or not list(
        (tmp / "nox").glob("matrix*")
    )  # nothing installed


def test_unknown_probe_in_run_fails_at_plan_time(tmp_path, index):
    spec = write_spec(tmp_path, index.url, probes='run = ["install_sanity", "instal_sanity"]')
    assert_plan_time_error(tmp_path, spec, "probes.run", "instal_sanity")


def test_unknown_required_probe_fails_at_plan_time(tmp_path, index):
    spec = write_spec(tmp_path, index.url, probes='run = []\nrequired = ["no_such_probe"]')
    assert_plan_time_error(tmp_path, spec, "probes.required", "no_such_probe")


def test_missing_probe_dir_fails_at_plan_time(tmp_path, index):
    spec = write_spec(tmp_path, index.url, probes='run = ["install_sanity"]\ndirs = ["nowhere"]')
    assert_plan_time_error(tmp_path, spec, "probes.dirs", "nowhere")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_timeout_fails_at_plan_time(tmp_path, index, value):
    spec = write_spec(tmp_path, index.url, probes=f'run = ["install_sanity"]\ntimeout = {value}')
    assert_plan_time_error(tmp_path, spec, "probes.timeout", value)


# ---------------------------------------------------------------- 6. one line, not a traceback


def test_non_utf8_spec_is_one_line(tmp_path, index):
    spec = tmp_path / "matrix.toml"
    spec.write_bytes(spec_text(index.url).encode().replace(b'"faults"', b'"f\xffaults"'))
    env = env_for(tmp_path, spec)
    for done in (cli(tmp_path, env, "plan"), run_nox(tmp_path, env, "-l")):
        assert done.returncode == 2, done.stderr
        one_error(done.stderr, str(spec), "UTF-8")
        hint_of(done.stderr)


# Issue 35: a bad TORCH_MATRIX_FOLLOWUPS was silently the default ('x') or 0 ('-1'), and
# TORCH_MATRIX_PREFETCH_FREE_GB=1e300 was a traceback in every session. Each bad value is now one
# line naming the variable and what it accepts, in the session that reads it, before any cell.
@pytest.mark.parametrize(
    "name, value, session, accepts",
    [
        ("TORCH_MATRIX_FOLLOWUPS", "x", "followups", "a whole number from 0 to"),
        ("TORCH_MATRIX_FOLLOWUPS", "-1", "followups", "a whole number from 0 to"),
        ("TORCH_MATRIX_FOLLOWUPS", "-1", "matrix", "a whole number from 0 to"),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "1e300", "matrix", "a number of GB from 0 to"),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "1e300", "report", "a number of GB from 0 to"),
        ("TORCH_MATRIX_PROBE_RERUNS", "-1", "matrix", "a whole number from 0 to"),
        ("TORCH_MATRIX_REDO", "maybe", "matrix", "1, true, yes, on, or 0, false, no, off"),
        # issue 45: accepted, then a cell's watchdog died (OverflowError: timestamp out of range)
        # and an install retry ended in an OverflowError traceback, with no result
        ("TORCH_MATRIX_PROBE_GRACE", "1e300", "matrix", "a number of seconds from 0 to 86400"),
        ("TORCH_MATRIX_RETRY_BACKOFF", "1e300", "matrix", "a number of seconds from 0 to 3600"),
    ],
)
def test_a_bad_variable_is_one_line_in_the_session_that_reads_it(
    tmp_path, index, name, value, session, accepts
):
    spec = write_spec(tmp_path, index.url)
    done = run_nox(tmp_path, env_for(tmp_path, spec, **{name: value}), "-s", session)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error(done.stdout + done.stderr, name, repr(value), accepts)
    assert line.startswith(f"torch-matrix: error: {name}: "), line
    assert f"{name}=" in hint_of(done.stderr)
    assert not cells_dir(tmp_path).exists() or not list(cells_dir(tmp_path).glob("*.json"))


def test_a_bad_variable_is_one_line_from_every_command(tmp_path, index):
    spec = write_spec(tmp_path, index.url)
    env = env_for(tmp_path, spec, TORCH_MATRIX_PREFETCH_FREE_GB="1e300")
    for done in (cli(tmp_path, env, "plan"), cli(tmp_path, env, "report", str(tmp_path))):
        assert done.returncode == 2, done.stdout + done.stderr
        one_error(done.stderr, "TORCH_MATRIX_PREFETCH_FREE_GB", "'1e300'")
    listed = cli(tmp_path, env, "help", "env")  # the table of variables prints whatever they hold
    assert listed.returncode == 0 and "TORCH_MATRIX_PREFETCH_FREE_GB" in listed.stdout


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, index):
    """One finished run of two cells (compatible, incompatible), copied by the tests that need one
    (follow-up cells off: the two cells are the whole run)."""
    tmp = tmp_path_factory.mktemp("finished")
    spec = write_spec(tmp, index.url, torch=("2.1.0", "2.2.0"))
    done = run_nox(tmp, env_for(tmp, spec, TORCH_MATRIX_FOLLOWUPS="0"), "-s", "matrix")
    assert done.returncode == 0, done.stderr
    return tmp / "results" / "faults"


def copy_run(finished: Path, tmp: Path) -> Path:
    target = tmp / "results" / "faults"
    shutil.copytree(finished, target)
    return target


def test_read_only_results_dir_is_one_line(tmp_path, finished_run):
    needs_private_mounts()
    run_dir = copy_run(finished_run, tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    env = env_for(tmp_path, tmp_path / "none.toml")
    ro = f"mount --bind {run_dir} {run_dir}\nmount -o remount,bind,ro {run_dir}"
    for args in (["report", str(run_dir)], ["pins", str(run_dir), "--no-coverage"]):
        done = run(
            in_namespace(ro, [sys.executable, "-m", "torch_matrix.cli", *args]), tmp_path, env
        )
        assert done.returncode != 0, done.stdout + done.stderr
        one_error(done.stderr, str(run_dir))
        assert "--out" in hint_of(done.stderr)
        assert "incompatible" in done.stdout  # the table was still shown
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_full_results_filesystem_is_one_line_and_loses_nothing(tmp_path, index, finished_run):
    """Results on a full tmpfs: the cell and the report fail with one line; old files stay."""
    needs_private_mounts()
    spec = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    results = tmp_path / "results"
    results.mkdir()
    keep = (finished_run / "cells" / f"{GOOD}.json").read_bytes()
    setup = (
        f"mount -t tmpfs -o size=256k tmpfs {results}\n"
        f"mkdir -p {results}/faults/cells\n"
        f"cp {finished_run}/cells/{GOOD}.json {results}/faults/cells/\n"
        f"dd if=/dev/zero of={results}/filler bs=4k count=1000 2>/dev/null || true\n"
    )
    check = (
        f"; cmp {results}/faults/cells/{GOOD}.json {finished_run}/cells/{GOOD}.json"
        f" && echo KEPT; ls {results}/faults/cells"
    )
    env = env_for(tmp_path, spec)
    command = nox_command(tmp_path, "-s", "matrix", "report")
    done = run(
        ["unshare", "-m", "sh", "-c", setup + " ".join(map(shlex_quote, command)) + check],
        tmp_path,
        env,
    )
    log = done.stdout + done.stderr
    assert "Traceback" not in log, log
    assert "KEPT" in done.stdout, log  # the finished cell's file is intact
    assert f"{BROKEN}.json" not in done.stdout.split("KEPT")[-1]  # no half-written file either
    assert "No space left on device" in log, log
    errors = [line for line in log.splitlines() if "torch-matrix: error:" in line]
    assert errors and all("No space left on device" in line for line in errors), log
    assert len(keep) > 0
    assert_no_orphans(tmp_path)


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# ---------------------------------------------------------------- 7. stale or empty data


def test_report_does_not_resurrect_a_deleted_cell(tmp_path, finished_run):
    run_dir = copy_run(finished_run, tmp_path)
    env = env_for(tmp_path, tmp_path / "none.toml")
    assert cli(tmp_path, env, "report", str(run_dir)).returncode == 0
    (run_dir / "cells" / f"{BROKEN}.json").unlink()
    again = cli(tmp_path, env, "report", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert BROKEN not in again.stdout, again.stdout
    merged = json.loads((run_dir / "results.json").read_text())
    assert [c["cell"]["id"] for c in merged["cells"]] == [GOOD]
    assert {r.cell.id for r in load_results(run_dir).results} == {GOOD}


# Cell files are the single truth (issue 25): what the report writes back is never evidence,
# and between copies of one cell the rerun wins by what it replaced, not by its machine's clock.


def _pins_exclusions(tmp: Path, env: dict[str, str], where: Path) -> list[str]:
    done = cli(tmp, env, "pins", str(where), "--no-coverage")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "!=" in line]


def test_a_deleted_cell_does_not_come_back_from_a_report_of_the_results_root(
    tmp_path, finished_run
):
    copy_run(finished_run, tmp_path)
    root = tmp_path / "results"
    env = env_for(tmp_path, tmp_path / "none.toml")
    assert cli(tmp_path, env, "report", str(root)).returncode == 0  # writes results/results.json
    assert _pins_exclusions(
        tmp_path, env, root
    )  # the broken pair is excluded while its cell is there
    (root / "faults" / "cells" / f"{BROKEN}.json").unlink()
    for target in (root, root / "faults"):
        loaded = load_results(target)
        assert {r.cell.id for r in loaded.results} == {GOOD}, (target, loaded.sources)
        again = cli(tmp_path, env, "report", str(target))
        assert again.returncode == 0 and BROKEN not in again.stdout, again.stdout + again.stderr
        assert _pins_exclusions(tmp_path, env, target) == [], target


def _rerun_an_hour_behind(run_dir: Path, cell_id: str):
    """The cell rerun (now passing) on a machine whose clock is an hour behind, written as a run writes it."""
    import dataclasses
    from datetime import datetime, timedelta

    from torch_matrix.world.results import write_result

    first = read_result(run_dir / "cells" / f"{cell_id}.json")
    behind = (datetime.fromisoformat(first.finished_at) - timedelta(hours=1)).isoformat()
    rerun = dataclasses.replace(
        first,
        finished_at=behind,
        started_at=behind,
        probes=tuple(dataclasses.replace(p, status="pass", message="") for p in first.probes),
        platform={**first.platform, "host": "clock-behind"},
    )
    write_result(rerun, run_dir / "cells")
    return first, rerun


def test_a_rerun_whose_clock_is_behind_beats_the_stale_merged_copy(tmp_path, finished_run):
    run_dir = copy_run(finished_run, tmp_path)
    env = env_for(tmp_path, tmp_path / "none.toml")
    assert (
        cli(tmp_path, env, "report", str(run_dir)).returncode == 0
    )  # results.json holds the failing copy
    _rerun_an_hour_behind(run_dir, BROKEN)
    for target in (run_dir, tmp_path / "results"):
        loaded = load_results(target)
        assert verdict_of(next(r for r in loaded.results if r.cell.id == BROKEN)).kind == COMPATIBLE
        assert _pins_exclusions(tmp_path, env, target) == [], target


def test_between_two_shards_the_rerun_wins_by_what_it_replaced_and_says_so(tmp_path, finished_run):
    run_dir = copy_run(finished_run, tmp_path)
    original = (run_dir / "cells" / f"{BROKEN}.json").read_bytes()
    first, rerun = _rerun_an_hour_behind(run_dir, BROKEN)
    shards = tmp_path / "artifacts"
    for shard, data in (
        ("shard-a", original),
        ("shard-b", (run_dir / "cells" / f"{BROKEN}.json").read_bytes()),
    ):
        (shards / shard / "cells").mkdir(parents=True)
        (shards / shard / "cells" / f"{BROKEN}.json").write_bytes(data)
    for order in ("as found", "reversed"):
        if order == "reversed":
            (shards / "shard-a").rename(shards / "shard-c")  # now found after the rerun
        loaded = load_results(shards)
        (kept,) = loaded.results
        assert kept.finished_at == rerun.finished_at and verdict_of(kept).kind == COMPATIBLE, order
        (said,) = loaded.problems
        assert (
            "shard-b" in said.split("kept ", 1)[1] and "rerun" in said and first.finished_at in said
        ), said
    done = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(shards))
    assert done.returncode == 0 and "duplicate result" in done.stderr and "rerun" in done.stderr, (
        done.stderr
    )


def test_strict_report_of_an_empty_dir_fails(tmp_path):
    empty = tmp_path / "results" / "empty"
    empty.mkdir(parents=True)
    done = cli(
        tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", "--strict", str(empty)
    )
    assert done.returncode != 0
    one_error(done.stderr, str(empty), "no cell results")
    hint_of(done.stderr)


def test_excludes_removing_every_cell_fail_the_run(tmp_path, index):
    spec = write_spec(tmp_path, index.url, top='[[exclude]]\ntorch = ">=2"\n')
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    assert done.returncode != 0, done.stdout + done.stderr
    one_error(done.stderr, str(spec), "no cells")
    assert "exclude" in hint_of(done.stderr)


def test_resume_reruns_cells_after_the_probes_change(tmp_path, index):
    probes = probe_dir(
        tmp_path,
        "from torch_matrix.probes.api import probe\n\n@probe('mine')\n"
        "def mine(ctx):\n    return {'v': 1}\n",
    )
    spec = write_spec(tmp_path, index.url, probes=f'run = ["mine"]\ndirs = ["{probes}"]')
    env = env_for(tmp_path, spec)
    assert run_nox(tmp_path, env, "-s", "matrix").returncode == 0
    same = run_nox(tmp_path, env, "-s", "matrix")
    assert "skipped: already complete" in same.stderr  # resume still works
    (probes / "custom.py").write_text(
        (probes / "custom.py").read_text().replace("'v': 1", "'v': 2")
    )
    changed = run_nox(tmp_path, env, "-s", "matrix")
    assert changed.returncode == 0, changed.stderr
    assert "skipped" not in changed.stderr
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert result.probe("mine").evidence == {"v": 2}
    # The fingerprint `plan --json` prints is the one resume uses, and it names the suite.
    planned = json.loads(cli(tmp_path, env, "plan", "--json").stdout)
    cells = planned["cells"] if isinstance(planned, dict) else planned
    assert cells[0]["fingerprint"] == result.fingerprint


# ---------------------------------------------------------------- 8. low


def test_interpreter_error_names_the_spec_file(tmp_path, index):
    spec = write_spec(
        tmp_path,
        index.url,
        python=PY,
        index_extra=f'\n[interpreters]\n"{PY}" = "{tmp_path}/no-python"\n',
    )
    done = cli(tmp_path, env_for(tmp_path, spec), "plan")
    assert done.returncode == 2, done.stdout + done.stderr
    one_error(done.stderr, str(spec), "interpreters", "no-python")
    hint_of(done.stderr)


def test_result_files_are_world_readable(finished_run):
    files = list(finished_run.rglob("*.json")) + list(finished_run.rglob("*.md"))
    assert len(files) >= 3
    umask = os.umask(0)
    os.umask(umask)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path


def test_duplicate_shards_with_equal_timestamps_are_named_honestly(tmp_path, finished_run):
    shards = tmp_path / "merged"
    for shard in ("shard-1", "shard-2"):
        (shards / shard / "cells").mkdir(parents=True)
        data = json.loads((finished_run / "cells" / f"{GOOD}.json").read_text())
        data["timings"]["total"] = (
            1.0 if shard == "shard-1" else 2.0
        )  # different content, same time
        (shards / shard / "cells" / f"{GOOD}.json").write_text(json.dumps(data))
    done = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(shards))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "duplicate result" in line]
    assert len(warnings) == 1, done.stderr
    assert "newer" not in warnings[0] and "same finish time" in warnings[0], warnings[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_pytorch_index_fails_planning_fast_with_the_fix(tmp_path, index):
    mirror = f"http://127.0.0.1:{closed_port()}/whl"
    spec = write_spec(
        tmp_path, index.url, top='variant = ["cpu"]\n', index_extra=f'pytorch = "{mirror}"\n'
    )
    env = env_for(tmp_path, spec)
    started = time.monotonic()
    done = cli(tmp_path, env, "plan")
    assert time.monotonic() - started < 15
    assert done.returncode == 2, done.stdout + done.stderr
    one_error(done.stderr, mirror)
    hint = hint_of(done.stderr)
    assert "[index] pytorch" in hint and 'variant = "default"' in hint


# ---------------------------------------------------------------- already holding


def gated_hang(tmp_path, index):
    """A two-cell spec whose 2.2.0 cell hangs in a command probe while ``gate`` exists."""
    gate = tmp_path / "gate"
    gate.touch()
    hang = tmp_path / "hang.py"
    hang.write_text(
        "import os, sys, time, torch\n"
        "while torch.__version__ == '2.2.0' and os.path.exists(sys.argv[1]):\n"
        "    time.sleep(0.05)\n"
    )
    spec = write_spec(
        tmp_path,
        index.url,
        torch=("2.1.0", "2.2.0"),
        probes=f'run = ["install_sanity"]\n[probes.commands]\nhang = "python {hang} {gate}"',
    )
    return gate, env_for(tmp_path, spec)


def start_until_hanging(tmp_path, env):
    """``nox -s matrix`` started and waited on until the 2.2.0 cell's command probe hangs."""
    proc = start_nox(tmp_path, env, "-s", "matrix")
    try:
        read_until(proc, f"{BROKEN} probes ...", [])
        wait_for(lambda: any("hang.py" in s for s in survivors(tmp_path)), 30, "the command probe")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc


def test_ctrl_c_keeps_finished_cells_and_a_rerun_resumes(tmp_path, index):
    gate, env = gated_hang(tmp_path, index)
    proc = start_until_hanging(tmp_path, env)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        finish(proc, 60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    kept = (cells_dir(tmp_path) / f"{GOOD}.json").read_bytes()
    assert verdict_of(read_result(cells_dir(tmp_path) / f"{GOOD}.json")).kind == COMPATIBLE
    assert not (cells_dir(tmp_path) / f"{BROKEN}.json").exists()
    assert not list(cells_dir(tmp_path).glob(".*.tmp"))
    assert_no_orphans(tmp_path)
    gate.unlink()
    rerun = run_nox(tmp_path, env, "-s", "matrix")
    assert rerun.returncode == 0, rerun.stderr
    assert f"matrix({GOOD}) skipped: already complete" in rerun.stderr
    assert (cells_dir(tmp_path) / f"{GOOD}.json").read_bytes() == kept
    assert verdict_of(read_result(cells_dir(tmp_path) / f"{BROKEN}.json")).kind == INCOMPATIBLE


def test_kill_9_of_the_probe_runner_is_error_and_only_that_cell_reruns(tmp_path, index):
    gate, env = gated_hang(tmp_path, index)
    proc = start_until_hanging(tmp_path, env)
    try:
        runner = [
            int(s.split(":")[0])
            for s in survivors(tmp_path)
            if " -m torch_matrix.probes --out" in s
        ]
        assert len(runner) == 1, survivors(tmp_path)
        os.kill(runner[0], signal.SIGKILL)
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0  # no evidence for that cell: the run goes red
    dead = read_result(cells_dir(tmp_path) / f"{BROKEN}.json")
    assert verdict_of(dead).kind == NO_EVIDENCE and dead.probe(PROBE_RUNNER).status == "error"
    assert_no_orphans(tmp_path, runner)
    gate.unlink()
    rerun = run_nox(tmp_path, env, "-s", "matrix")
    assert rerun.returncode == 0, rerun.stderr
    assert (
        f"matrix({GOOD}) skipped" in rerun.stderr
        and f"matrix({BROKEN}) skipped" not in rerun.stderr
    )
    assert verdict_of(read_result(cells_dir(tmp_path) / f"{BROKEN}.json")).kind == INCOMPATIBLE


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_unreachable_index_during_install_is_retried_then_error(tmp_path, index):
    handler = functools.partial(_Quiet, directory=str(index.root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    spec = write_spec(tmp_path, url)
    env = env_for(tmp_path, spec, TORCH_MATRIX_RETRY_BACKOFF="0.2")
    try:
        listed = run_nox(tmp_path, env, "-l")  # planning reads the index (and caches it)
        assert listed.returncode == 0, listed.stderr
    finally:
        server.shutdown()
        server.server_close()
    done = run_nox(tmp_path, env, "-s", "matrix")  # the index is gone when uv needs it
    assert done.returncode != 0, done.stderr
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert result.install.status == "error" and result.install.attempts == 3, result.install
    assert verdict_of(result).kind == NO_EVIDENCE
    assert "Traceback" not in done.stderr
    assert_no_orphans(tmp_path)


MISBEHAVING = """
import ctypes, os, signal, sys, time
from torch_matrix.probes.api import probe

@probe("segfaults")
def segfaults(ctx):
    ctypes.string_at(0)

@probe("aborts")
def aborts(ctx):
    os.abort()

@probe("hangs", timeout=1)
def hangs(ctx):
    time.sleep(600)

@probe("poisons")
def poisons(ctx):
    import json
    json.dumps = None
    os.environ["PROBE_POISON"] = "1"
    os.chdir("/")

@probe("floods")
def floods(ctx):
    sys.stdout.write("x" * (10 * 1024 * 1024))
    sys.stdout.flush()

@probe("exits")
def exits(ctx):
    os._exit(3)

@probe("kills_zygote")
def kills_zygote(ctx):
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(5)

@probe("sys_exit")
def sys_exit(ctx):
    sys.exit(4)

@probe("zz_clean")
def zz_clean(ctx):
    import json
    assert json.dumps is not None and "PROBE_POISON" not in os.environ and os.getcwd() != "/"
    return {"clean": True}
"""


def test_misbehaving_probes_stay_isolated(tmp_path, index):
    probes = probe_dir(tmp_path, MISBEHAVING)
    (probes / "syntax_error.py").write_text("def broken(:\n")
    names = [
        "install_sanity",
        "segfaults",
        "aborts",
        "hangs",
        "poisons",
        "floods",
        "exits",
        "kills_zygote",
        "sys_exit",
        "zz_clean",
        "syntax_error",
    ]
    spec = write_spec(tmp_path, index.url, probes=f'run = {json.dumps(names)}\ndirs = ["{probes}"]')
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    assert done.returncode == 0, done.stderr  # probe failures are findings, not a broken run
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    statuses = {p.name: p.status for p in result.probes}
    assert PROBE_RUNNER not in statuses, statuses
    assert statuses["install_sanity"] == "pass" and statuses["zz_clean"] == "pass", statuses
    assert statuses["segfaults"] == "crash" and statuses["aborts"] == "crash"
    assert statuses["hangs"] == "timeout" and statuses["exits"] == "crash"
    assert statuses["syntax_error"] == "error" and statuses["floods"] == "pass"
    assert statuses["sys_exit"] in ("crash", "error") and statuses["kills_zygote"] in (
        "crash",
        "error",
    )
    assert verdict_of(result).kind == INCOMPATIBLE
    assert_no_orphans(tmp_path)


def test_bad_shard_files_are_named_and_skipped(tmp_path, finished_run):
    shards = tmp_path / "merged"
    good = (finished_run / "cells" / f"{GOOD}.json").read_text()
    files = {
        "truncated": good[: len(good) // 2],
        "foreign": json.dumps({"hello": "world"}),
        "newer": json.dumps({**json.loads(good), "schema_version": 999}),
    }
    for name, text in files.items():
        (shards / name / "cells").mkdir(parents=True)
        (shards / name / "cells" / f"{GOOD}.json").write_text(text)
    for name in ("dup-a", "dup-b"):
        (shards / name / "cells").mkdir(parents=True)
        (shards / name / "cells" / f"{BROKEN}.json").write_text(
            (finished_run / "cells" / f"{BROKEN}.json").read_text()
        )
    shutil.copy(finished_run / "cells" / f"{GOOD}.json", shards / "dup-a" / "cells")
    done = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(shards))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in files:
        assert any(name in line and "warning" in line for line in done.stderr.splitlines()), (
            name,
            done.stderr,
        )
    loaded = load_results(shards)
    assert sorted(r.cell.id for r in loaded.results) == sorted([GOOD, BROKEN])
    strict = cli(
        tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", "--strict", str(shards)
    )
    assert strict.returncode != 0  # unreadable shards are infrastructure trouble under --strict


# Every value read from a shard is checked where it is loaded (issue 25): a bad one costs that
# field one warning naming the file, never the run.


def _set_probe(field: str, value):
    return lambda data: data["probes"][0].__setitem__(field, value)


BAD_VALUES = {
    "timings-nan": lambda data: data["timings"].__setitem__("total", float("nan")),
    "timings-inf": lambda data: data["timings"].__setitem__("total", float("inf")),
    "timings-negative": lambda data: data["timings"].__setitem__("probes", -3.0),
    "timings-huge": lambda data: data["timings"].__setitem__("total", 1e300),
    "duration-nan": _set_probe("duration_s", float("nan")),
    "duration-inf": _set_probe("duration_s", float("-inf")),
    "message-lone-surrogate": _set_probe("message", "cannot open /data/ckpt-\udcff.pt"),
    "evidence-lone-surrogate": _set_probe("evidence", {"path": "/data/\udce9t\udce9.pt", "n": 1}),
    "observed-lone-surrogate": _set_probe("observed", "\ud800"),
    "message-8-MB": _set_probe("message", "x" * 8_000_000),
    "evidence-8-MB": _set_probe("evidence", {"log": ["y" * 1000] * 8000}),
}


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_one_bad_value_in_a_shard_costs_one_warning_never_the_run(tmp_path, finished_run, bad):
    run_dir = copy_run(finished_run, tmp_path)
    path = run_dir / "cells" / f"{BROKEN}.json"
    data = json.loads(path.read_text())
    BAD_VALUES[bad](data)
    path.write_text(json.dumps(data))  # as a foreign writer leaves it: NaN, \udcff escapes
    env = env_for(
        tmp_path, tmp_path / "none.toml", TORCH_MATRIX_HISTORY=str(tmp_path / "history.sqlite")
    )
    commands = {
        "report": ["report", str(run_dir), "--junit", str(tmp_path / "junit.xml")],
        "report --html": ["report", str(run_dir), "--html", str(tmp_path / "report.html")],
        "pins": ["pins", str(run_dir), "--no-coverage"],
        "import": ["import", str(run_dir), "--db", str(tmp_path / "history.sqlite")],
        "repro": ["repro", BROKEN, "--results", str(run_dir)],
    }
    wrong = []
    for name, args in commands.items():
        done = cli(tmp_path, env, *args)
        named = [line for line in done.stderr.splitlines() if str(path) in line]
        if "Traceback" in done.stderr or done.returncode != 0:
            wrong.append(
                f"{name}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1][:300]}"
            )
        elif len(named) != 1 or "skipped" in named[0] or "invalid cell result" in named[0]:
            wrong.append(f"{name}: not one warning about a field: {named}"[:600])
        elif len(done.stdout) > 1_000_000:
            wrong.append(f"{name}: {len(done.stdout)} characters of output")
    assert not wrong, "\n".join(wrong)
    assert BROKEN in cli(tmp_path, env, "report", str(run_dir)).stdout  # the cell is still there
    junit = (tmp_path / "junit.xml").read_text()
    assert 'time="nan"' not in junit and 'time="inf"' not in junit and 'time="-' not in junit
    assert (tmp_path / "report.html").stat().st_size < 2_000_000


HUGE_PROBES = """
from torch_matrix.probes.api import probe, Fail

@probe("huge_failure")
def huge_failure(ctx):
    raise Fail("cannot read /data/ckpt-\\udcff.pt: " + "x" * 8000000, observed=["o" * 1000] * 5000,
               expected=1, evidence={"log": "e" * 5000000})

@probe("huge_pass")
def huge_pass(ctx):
    return {"table": list(range(1000000))}

@probe("small")
def small(ctx):
    return {"ok": True}
"""


def test_the_probe_runner_caps_what_it_records_and_says_how_much(tmp_path, index):
    from torch_matrix.world.shardvalues import RUNNER_JSON_CHARS, RUNNER_TEXT_CHARS as TEXT_CHARS
    from torch_matrix.probes import execute

    assert (execute.TEXT_CHARS, execute.JSON_CHARS) == (
        TEXT_CHARS,
        RUNNER_JSON_CHARS,
    )  # one limit, two ends
    probes = probe_dir(tmp_path, HUGE_PROBES)
    spec = write_spec(
        tmp_path,
        index.url,
        probes=f'run = ["huge_failure", "huge_pass", "small"]\ndirs = ["{probes}"]',
    )
    env = env_for(tmp_path, spec)
    done = run_nox(tmp_path, env, "-s", "matrix")
    path = cells_dir(tmp_path) / f"{GOOD}.json"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert path.stat().st_size < 300_000, path.stat().st_size
    result = read_result(path)
    statuses = {p.name: p.status for p in result.probes}
    assert statuses == {"huge_failure": "fail", "huge_pass": "pass", "small": "pass"}, statuses
    failure = result.probe("huge_failure")
    assert (
        len(failure.message) < TEXT_CHARS + 200
        and "more characters cut by the probe runner" in failure.message
    )
    assert "cut when loading" not in failure.message  # the runner's cut is the only one
    assert "ckpt-\ufffd.pt" in failure.message  # a lone surrogate is not text: replaced, not fatal
    assert "cut by the probe runner" in failure.evidence["cut_by_runner"]
    assert "cut by the probe runner" in failure.observed and failure.expected == 1
    assert "cut by the probe runner" in result.probe("huge_pass").evidence["cut_by_runner"]
    assert result.probe("small").evidence == {"ok": True}
    assert len(done.stdout + done.stderr) < 200_000  # nox's log is not megabytes either


def test_junit_never_says_time_nan():
    import dataclasses

    from torch_matrix.report.junit import render_junit
    from tests.factories import make_probe, make_result

    for bad in (float("nan"), float("inf"), -1.0):
        result = make_result(probes=[dataclasses.replace(make_probe("p"), duration_s=bad)])
        text = render_junit([result])
        assert 'time="nan"' not in text and 'time="inf"' not in text and 'time="-' not in text, text


# The history database (issue 25): every SQLite failure is one line naming the file and the
# fix, and a failed write leaves the database as it was.


def _history_with_one_run(tmp: Path, finished: Path) -> tuple[Path, Path, dict[str, str]]:
    """A history database holding the finished run, and a second, different run to import."""
    db = tmp / "history" / "history.sqlite"
    env = env_for(tmp, tmp / "none.toml")
    done = cli(tmp, env, "import", str(finished), "--db", str(db))
    assert done.returncode == 0, done.stderr
    second = tmp / "second" / "faults"
    shutil.copytree(finished, second)
    for path in (second / "cells").glob("*.json"):
        data = json.loads(path.read_text())
        data["finished_at"] = "2026-12-01T00:00:00+00:00"
        data["probes"].extend(
            dict(p, name=f"{p['name']}_{n}") for n in range(40) for p in data["probes"][:1]
        )
        # another run, not an edit of this one: it stores no verdict (judged on load), or the
        # loader would rightly name each file as changed after its verdict was stored
        data.pop("verdict", None)
        path.write_text(json.dumps(data))
    return db, second, env


def _one_history_error(done: subprocess.CompletedProcess, db: Path, *needles: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error(done.stderr, str(db), *needles)
    hint = hint_of(done.stderr)
    assert len([x for x in done.stderr.splitlines() if x.strip()]) == 2, (
        done.stderr
    )  # the line and its fix
    return line, hint


def test_history_with_damaged_pages_is_one_line_with_the_fix(tmp_path, finished_run):
    db, second, env = _history_with_one_run(tmp_path, finished_run)
    data = bytearray(db.read_bytes())
    assert len(data) > 8192
    data[4096:] = b"\xab" * (len(data) - 4096)  # every page after the header and schema page
    db.write_bytes(bytes(data))
    run_dir = copy_run(finished_run, tmp_path)
    for args in (
        ["history", "--db", str(db)],
        ["import", str(second), "--db", str(db)],
        ["report", str(run_dir), "--previous", "last", "--html", str(tmp_path / "r.html")],
    ):
        done = cli(tmp_path, {**env, "TORCH_MATRIX_HISTORY": str(db)}, *args)
        if args[0] == "report":  # the report's own lines come first; then the one error, its fix
            assert done.returncode == 2, done.stderr
            one_error(done.stderr, str(db), "damaged")
            hint = hint_of(done.stderr)
        else:
            _, hint = _one_history_error(done, db, "damaged")
        assert "history branch" in hint and "reimport" in hint, hint
    assert db.read_bytes() == bytes(data)


def test_history_of_our_version_with_other_tables_is_one_line(tmp_path):
    import sqlite3

    from torch_matrix.world.history_schema import SCHEMA_VERSION

    db = tmp_path / "history.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE runs (id TEXT, when_ TEXT)")
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    before = db.read_bytes()
    env = env_for(tmp_path, tmp_path / "none.toml")
    for args in (["history", "--db", str(db)], ["diff", "a", "b", "--db", str(db)]):
        _, hint = _one_history_error(cli(tmp_path, env, *args), db, "tables")
        assert "history branch" in hint and "reimport" in hint, hint
    assert db.read_bytes() == before


def _history_in_namespace(tmp: Path, db: Path, setup: str, args: list[str], env: dict[str, str]):
    """``torch-matrix ARGS`` inside a private mount namespace after ``setup``; then the database's
    sha256 and `history` as seen there (the mount is gone afterwards)."""
    command = " ".join(map(shlex_quote, [sys.executable, "-m", "torch_matrix.cli", *args]))
    after = (
        f"; echo EXIT=$?; sha256sum {db}; "
        + " ".join(
            map(shlex_quote, [sys.executable, "-m", "torch_matrix.cli", "history", "--db", str(db)])
        )
        + "; echo HISTORY_EXIT=$?"
    )
    return run(
        ["unshare", "-m", "sh", "-c", setup + command + " 2>" + str(tmp / "err.txt") + after],
        tmp,
        env,
    )


def test_history_import_into_a_read_only_file_is_one_line_and_changes_nothing(
    tmp_path, finished_run
):
    needs_private_mounts()
    import hashlib

    db, second, env = _history_with_one_run(tmp_path, finished_run)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    setup = f"mount --bind {db.parent} {db.parent}\nmount -o remount,bind,ro {db.parent}\n"
    done = _history_in_namespace(tmp_path, db, setup, ["import", str(second), "--db", str(db)], env)
    err = (tmp_path / "err.txt").read_text()
    assert "EXIT=2" in done.stdout, done.stdout + err
    one_error(err, str(db), "read-only")
    assert "writable" in hint_of(err)
    assert digest in done.stdout and "HISTORY_EXIT=0" in done.stdout, (
        done.stdout
    )  # still readable, unchanged


def test_history_import_on_a_full_disk_is_one_line_and_changes_nothing(tmp_path, finished_run):
    needs_private_mounts()
    import hashlib

    db, second, env = _history_with_one_run(tmp_path, finished_run)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    saved = tmp_path / "saved.sqlite"
    shutil.copy(db, saved)
    setup = (
        f"mount -t tmpfs -o size=256k tmpfs {db.parent}\ncp {saved} {db}\n"
        f"dd if=/dev/zero of={db.parent}/filler bs=1k count=1000 2>/dev/null || true\n"
        f"rm -f {db.parent}/filler.small; dd if=/dev/zero of={db.parent}/filler.small bs=1k count=0 2>/dev/null\n"
    )
    done = _history_in_namespace(tmp_path, db, setup, ["import", str(second), "--db", str(db)], env)
    err = (tmp_path / "err.txt").read_text()
    assert "EXIT=2" in done.stdout, done.stdout + err
    one_error(err, str(db), "full")
    assert "free some space" in hint_of(err)
    assert digest in done.stdout and "HISTORY_EXIT=0" in done.stdout, done.stdout + err


# Every file the tool writes goes through the one atomic writer and fails as one line; --apply
# keeps what it does not change (issue 25).


def test_repro_out_on_a_full_or_read_only_disk_is_one_line(tmp_path, finished_run):
    needs_private_mounts()
    env = env_for(tmp_path, tmp_path / "none.toml")
    out = tmp_path / "out"
    out.mkdir()
    (out / "bundle.md").write_text("the bundle from before\n")
    command = " ".join(
        map(
            shlex_quote,
            [
                sys.executable,
                "-m",
                "torch_matrix.cli",
                "repro",
                BROKEN,
                "--results",
                str(finished_run),
                "--out",
                str(out / "bundle.md"),
            ],
        )
    )
    for setup, words, fix in (
        (f"mount --bind {out} {out}\nmount -o remount,bind,ro {out}\n", "Read-only", "writable"),
        (
            f"mount -t tmpfs -o size=64k tmpfs {out}\necho 'the bundle from before' > {out}/bundle.md\n"
            f"dd if=/dev/zero of={out}/filler bs=1k count=1000 2>/dev/null || true\n",
            "No space",
            "space",
        ),
    ):
        done = run(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                setup + command + f"; echo EXIT=$?; cat {out}/bundle.md; ls -a {out}",
            ],
            tmp_path,
            env,
        )
        assert "EXIT=2" in done.stdout, done.stdout + done.stderr
        one_error(done.stderr, str(out / "bundle.md"), words)
        assert fix in hint_of(done.stderr)
        assert "the bundle from before" in done.stdout and ".tmp" not in done.stdout, done.stdout


def _pins_to_apply(tmp: Path, finished: Path) -> tuple[Path, dict[str, str]]:
    """A run whose pins exclude torch 2.2.0 (its torchvision breaks), and the environment to apply them."""
    run_dir = copy_run(finished, tmp)
    return run_dir, env_for(tmp, tmp / "none.toml")


def test_pins_apply_in_a_read_only_folder_is_one_line(tmp_path, finished_run):
    needs_private_mounts()
    run_dir, env = _pins_to_apply(tmp_path, finished_run)
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("torch>=2.0\n")
    command = " ".join(
        map(
            shlex_quote,
            [
                sys.executable,
                "-m",
                "torch_matrix.cli",
                "pins",
                str(run_dir),
                "--no-coverage",
                "--out",
                str(tmp_path / "pins"),
                "--apply",
                str(project / "requirements.txt"),
            ],
        )
    )
    setup = f"mount --bind {project} {project}\nmount -o remount,bind,ro {project}\n"
    done = run(["unshare", "-m", "sh", "-c", setup + command + "; echo EXIT=$?"], tmp_path, env)
    assert "EXIT=2" in done.stdout, done.stdout + done.stderr
    one_error(done.stderr, str(project / "requirements.txt"), "Read-only")
    assert (project / "requirements.txt").read_text() == "torch>=2.0\n"


APPLY_CASES = {  # name: (file bytes, what the applied file must be)
    "continuation": (
        b"torch>=2.0,\\\n    <3\ntorchvision>=0.16\n",
        None,
    ),  # checked by parsing: pip reads the same requirements, plus the pin
    "bom-crlf": (
        b"\xef\xbb\xbftorch>=2.0\r\nnumpy\r\n",
        b"\xef\xbb\xbftorch>=2.0,!=2.2.0\r\nnumpy\r\n",
    ),
    "hash-continuation": (
        b"torch>=2.0 \\\n    --hash=sha256:abc\nnumpy\n",
        b"torch>=2.0,!=2.2.0 \\\n    --hash=sha256:abc\nnumpy\n",
    ),
}


def _requirements_of(text: str) -> list[str]:
    """The requirements pip reads from ``text``: continuation lines joined, comments and options dropped."""
    from packaging.requirements import Requirement

    logical = text.lstrip("\ufeff").replace("\\\r\n", "").replace("\\\n", "")
    found = []
    for line in logical.splitlines():
        body = line.split(" #")[0].split(" --")[0].strip()
        if body and not body.startswith(("#", "-")):
            found.append(str(Requirement(body)))
    return found


@pytest.mark.parametrize("case", sorted(APPLY_CASES))
def test_pins_apply_keeps_what_it_does_not_change(tmp_path, finished_run, case):
    run_dir, env = _pins_to_apply(tmp_path, finished_run)
    original, expected = APPLY_CASES[case]
    real = tmp_path / "real" / "requirements.txt"
    real.parent.mkdir()
    real.write_bytes(original)
    real.chmod(0o640)
    link = tmp_path / "requirements.txt"
    link.symlink_to(real)  # a requirements file kept elsewhere and linked in
    done = cli(
        tmp_path,
        env,
        "pins",
        str(run_dir),
        "--no-coverage",
        "--out",
        str(tmp_path / "pins"),
        "--apply",
        str(link),
    )
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == real  # written through the link, to its target
    assert real.stat().st_mode & 0o777 == 0o640
    written = real.read_bytes()
    if expected is not None:
        assert written == expected, written
    else:
        from packaging.requirements import Requirement

        before, after = _requirements_of(original.decode()), _requirements_of(written.decode())
        assert len(after) == len(before), (before, after)  # pip still reads every requirement
        for old, new in zip(
            map(Requirement, before), map(Requirement, after)
        ):  # each kept, plus the pin
            assert old.name == new.name and set(map(str, old.specifier)) < set(
                map(str, new.specifier)
            ), (old, new)
        assert not Requirement(after[0]).specifier.contains("2.2.0")
    again = cli(
        tmp_path,
        env,
        "pins",
        str(run_dir),
        "--no-coverage",
        "--out",
        str(tmp_path / "pins"),
        "--apply",
        str(link),
    )
    assert again.returncode == 0 and real.read_bytes() == written  # a second run changes nothing


def test_a_10000_cell_plan_is_planned_whole():
    """Correctness at scale; its speed (0.7 s on the fault table's machine) is in `nox -s bench`."""
    from torch_matrix.plan.grid import IndexFacts, plan_cells
    from torch_matrix.spec.parse import parse_spec
    from tests.test_plan import Interp

    torch = [f"2.{i}.0" for i in range(100)]
    spec = parse_spec(
        f'torch = {json.dumps(torch)}\ntorchvision = "none"\npython = ["3.10", "3.11"]\n'
        'variant = ["default", "cpu", "cu118", "cu121", "cu124"]\n'
        '[extras]\nnumpy = {{ values = [{}], label = "np" }}\n'.format(
            ", ".join(f'"==1.{i}"' for i in range(10))
        ),
        "big.toml",
        base_dir="/proj",
    )
    facts = IndexFacts(torch_versions={"default": tuple(torch)})
    interpreters = {"3.10": Interp("/p/3.10", "3.10.13"), "3.11": Interp("/p/3.11", "3.11.7")}
    started = time.monotonic()
    cells = plan_cells(spec, facts, interpreters)
    assert len(cells) == 10_000 and len({c.id for c in cells}) == 10_000
    assert time.monotonic() - started < 60, "planning 10,000 cells hung"


def test_no_shell_true_outside_command_probes():
    allowed = {("torch_matrix/probes/isolated.py", "run_shell")}
    found = []
    for folder in ("torch_matrix",):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
                for call in [n for n in ast.walk(func) if isinstance(n, ast.Call)]:
                    for keyword in call.keywords:
                        if keyword.arg == "shell" and not (
                            isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                        ):
                            found.append((str(path.relative_to(REPO)), func.name))
    assert found and set(found) <= allowed, found


def test_suite_helpers_detect_a_survivor(tmp_path):
    """The orphan check itself can fail: a process left in the test's world is found by PID."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", str(tmp_path)], start_new_session=True
    )
    try:
        with pytest.raises(AssertionError, match="outlived"):
            assert_no_orphans(tmp_path, [child.pid], wait_s=0.2)
    finally:
        child.kill()
        child.wait()


# ---------------------------------------------------------------- round 2 (issue 25): probes, sinks


def test_a_probe_name_that_is_not_a_name_is_refused_at_plan_time(tmp_path, index):
    """A name with a newline and HTML would break the --list table, the report's columns and an
    issue title: refused like a command name, in one line naming the file, before any install."""
    probes = probe_dir(
        tmp_path,
        'from torch_matrix.probes.api import probe\n\n@probe("bad\\n<b>x</b>")\n'
        "def bad(ctx):\n    pass\n",
    )
    spec = write_spec(tmp_path, index.url, probes=f'run = ["install_sanity"]\ndirs = ["{probes}"]')
    done = cli(tmp_path, env_for(tmp_path, spec), "plan")
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error(done.stderr, "custom.py", "'bad\\n<b>x</b>'", "refused")
    assert "rename the probe" in hint_of(done.stderr), done.stderr
    assert "<b>x</b>\n" not in line  # the name is shown quoted, on the error's one line


POISONED = """
import builtins, json, os
from torch_matrix.probes.api import probe

@probe("a_passes")
def a_passes(ctx):
    return {"ok": 1}

@probe("rebinds_open")
def rebinds_open(ctx):
    builtins.open = None

@probe("rebinds_print")
def rebinds_print(ctx):
    builtins.print = None

@probe("rebinds_json")
def rebinds_json(ctx):
    json.dumps = None
    json.JSONEncoder.encode = lambda self, o: '{"name": 5}'
    json.JSONEncoder.iterencode = lambda self, o, _one_shot=False: iter(['{"name": 5}'])

@probe("rebinds_isinstance_and_exit")
def rebinds_isinstance_and_exit(ctx):
    builtins.isinstance = lambda *args: True
    os._exit = lambda code: None

@probe("forges_its_report")
def forges_its_report(ctx):
    import sys, torch_matrix.probes.execute  # pristine: the runner's code is __main__
    for module in (torch_matrix.probes.execute, sys.modules["__main__"]):
        module.encode = lambda value: '{"name": "forges_its_report", "status": "pass!", "message": 5}'

@probe("z_passes")
def z_passes(ctx):
    return {"ok": 2}
"""


@pytest.mark.parametrize("isolation", ["shared", "pristine"])
def test_a_probe_that_rebinds_what_the_runner_uses_costs_only_itself(tmp_path, index, isolation):
    """Rebinding builtins.open, print, json.dumps / JSONEncoder, isinstance or os._exit used to end
    the runner ('unreadable probe output: status') and make the whole cell error, losing the passes
    recorded before; now each such probe's own outcome is recorded, and one that forges its own
    report costs that probe only."""
    source = (
        POISONED
        if isolation == "shared"
        else POISONED.replace('")\ndef', '", isolation="pristine")\ndef')
    )
    probes = probe_dir(tmp_path, source)
    names = [
        "install_sanity",
        "a_passes",
        "rebinds_open",
        "rebinds_print",
        "rebinds_json",
        "rebinds_isinstance_and_exit",
        "forges_its_report",
        "z_passes",
    ]
    spec = write_spec(tmp_path, index.url, probes=f'run = {json.dumps(names)}\ndirs = ["{probes}"]')
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    result = read_result(cells_dir(tmp_path) / f"{GOOD}.json")
    assert result is not None, done.stderr
    statuses = {p.name: p.status for p in result.probes}
    assert PROBE_RUNNER not in statuses, (statuses, done.stderr[-3000:])
    for name in names[:-2] + ["z_passes"]:
        assert statuses.get(name) == "pass", (name, statuses)
    forged = result.probe("forges_its_report")
    assert forged.status == "error" and "malformed result" in forged.message, forged
    assert verdict_of(result).kind == INCOMPATIBLE  # a required probe errored: the cell says so
    assert_no_orphans(tmp_path)


# What a probe's message (or a shard's field) can hold: terminal control sequences (clear screen,
# window title, an OSC 8 hyperlink, a C1 CSI), and Markdown that GitHub would render live.
ESCAPES = (
    "\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x9b31m"
)
MARKUP = "</details>\n# heading\n@octocat ![img](https://evil.example/pixel.png) <img src=x>"
HOSTILE_REPRO = "import torch\n```\n</details>\n# not a heading\n````\nprint('x')"
CONTROL = ("\x1b", "\x07", "\x9b")
HOSTILE_CELL = "t2.5.1-py3.11-numpylt2"


def hostile_run(
    root: Path,
    day: int = 21,
    message: str = f"loss diverged {ESCAPES} {MARKUP}",
    repro: str = HOSTILE_REPRO,
    failing: bool = True,
) -> Path:
    """A results directory ``root/hostile`` of two cells with extras ``numpy<2``; the 2.5.1 cell's
    training_step fails with ``message`` and ``repro`` (when ``failing``)."""
    from torch_matrix.world.results import write_result
    from tests.factories import make_cell, make_probe, make_result

    names = ("install_sanity", "training_step")
    for torch in ("2.5.1", "2.6.0"):
        cell = make_cell(torch=torch, extras={"numpy": "<2"}, probes=names, required_probes=names)
        bad = failing and torch == "2.5.1"
        probes = [
            make_probe("install_sanity"),
            make_probe(
                "training_step", "fail", message, repro=repro, observed=ESCAPES, expected=1.0
            )
            if bad
            else make_probe("training_step"),
        ]
        write_result(
            make_result(cell, probes=probes, finished_at=f"2026-11-{day:02d}T03:00:00+00:00"),
            root / "hostile" / "cells",
        )
    return root / "hostile"


def outside_fences(markdown: str) -> str:
    """The lines GitHub renders as Markdown: fenced code blocks left out (CommonMark: a fence closes
    on a line of the same character, at least as long, and nothing else)."""
    out, fence = [], ""
    for line in markdown.splitlines():
        found = re.match(r" {0,3}(`{3,}|~{3,})(.*)$", line)
        if not fence:
            if found and not (found.group(1)[0] == "`" and "`" in found.group(2)):
                fence = found.group(1)
            else:
                out.append(line)
        elif (
            found
            and found.group(1)[0] == fence[0]
            and len(found.group(1)) >= len(fence)
            and not found.group(2).strip()
        ):
            fence = ""
    return "\n".join(out)


def outside_code_spans(markdown: str) -> str:
    """The text with its inline code spans left out, line by line (CommonMark: a run of N
    backticks opens a span that the next run of exactly N backticks closes; an unmatched run is
    literal). A code span shows its characters as they are: HTML, mentions and images in it are
    inert on GitHub, so only what lies outside counts as rendered."""
    out = []
    for line in markdown.splitlines():
        kept, at = [], 0
        runs = list(re.finditer(r"`+", line))
        index = 0
        while index < len(runs):
            opener = runs[index]
            closer = next(
                (r for r in runs[index + 1 :] if len(r.group()) == len(opener.group())), None
            )
            if closer is None:
                index += 1
                continue
            kept.append(line[at : opener.start()])
            at = closer.end()
            index = runs.index(closer) + 1
        kept.append(line[at:])
        out.append("".join(kept))
    return "\n".join(out)


def test_outside_code_spans_keeps_only_what_renders_as_markdown():
    assert outside_code_spans("a `</details>` b") == "a  b"
    assert outside_code_spans("x ``a ` b`` y `open") == "x  y `open"  # unmatched: literal
    assert outside_code_spans("</details> `c`") == "</details> "


def assert_markdown_is_inert(text: str, what: str) -> None:
    """The hostile message renders as the same characters: no heading, no closed <details>, no
    image, no mention, no raw HTML, no control character; the repro stays inside its fence (a
    block or an inline code span)."""
    for char in CONTROL:
        assert char not in text, (what, char)
    rendered = outside_code_spans(outside_fences(text))
    assert not re.search(r"^(?:> ?)?\s{0,3}#{1,6} (?:heading|not a heading)", rendered, re.M), (
        what,
        rendered,
    )
    assert rendered.count("</details>") == rendered.count("<details>"), (what, rendered)
    for live in ("<img", "![img]", "@octocat"):
        assert live not in rendered, (what, live, rendered)
    assert not re.search(r"(?<!\\)\]\(https://evil", rendered), (what, rendered)  # a link or image


def test_markdown_for_github_renders_a_hostile_message_as_text(tmp_path):
    """summary.md (the step summary), the repro bundle and the nightly's issue body and comment: on
    main a triple backtick closed the fixed fence and the message's </details>, # heading,
    @mention and remote image rendered live."""
    env = env_for(tmp_path, tmp_path / "none.toml")
    old = hostile_run(tmp_path / "old", day=20, failing=False)
    new = hostile_run(tmp_path / "new")
    done = cli(tmp_path, env, "report", str(new), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert_markdown_is_inert((tmp_path / "report" / "summary.md").read_text(), "summary.md")
    done = cli(
        tmp_path,
        env,
        "repro",
        HOSTILE_CELL,
        "--results",
        str(new),
        "--out",
        str(tmp_path / "bundle.md"),
    )
    assert done.returncode == 0, done.stderr
    bundle = (tmp_path / "bundle.md").read_text()
    assert_markdown_is_inert(bundle, "repro bundle")
    assert "# not a heading" in bundle  # the snippet is whole, in a fence longer than its own
    done = cli(tmp_path, env, "diff", str(old), str(new), "--issues", str(tmp_path / "issues.json"))
    assert done.returncode == 0, done.stderr
    plan = json.loads((tmp_path / "issues.json").read_text())
    (item,) = plan["open"]
    assert_markdown_is_inert(item["body"], "issue body")
    assert_markdown_is_inert(item["comment"], "issue comment")
    assert "\n" not in item["title"] and all(
        len(title.splitlines()) == 1 for title in plan["close"]
    )


def test_the_issues_by_hand_install_line_is_shell_quoted(tmp_path):
    """On main the line read `uv pip install ... numpy<2`: pasted, the shell redirects from a file
    named 2. Run through bash with `uv` standing in, it must give the requirement as one word."""
    env = env_for(tmp_path, tmp_path / "none.toml")
    old = hostile_run(tmp_path / "old", day=20, failing=False)
    new = hostile_run(tmp_path / "new")
    done = cli(tmp_path, env, "diff", str(old), str(new), "--issues", str(tmp_path / "issues.json"))
    assert done.returncode == 0, done.stderr
    body = json.loads((tmp_path / "issues.json").read_text())["open"][0]["body"]
    lines = [line for line in body.splitlines() if line.startswith("uv pip install")]
    assert len(lines) == 2, body  # the body's own, and the repro bundle's
    for line in lines:
        shown = subprocess.run(
            ["bash", "-c", "uv() { printf '%s\\n' \"$@\"; }\n" + line],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert shown.returncode == 0 and shown.stderr == "", (line, shown.stderr)
        assert shown.stdout.splitlines()[-1] == "numpy<2", (line, shown.stdout)
    assert not (tmp_path / "2").exists()


def test_terminal_output_shows_control_characters(tmp_path):
    """From a shard: the report table, `repro` and the comments of constraints.txt (and
    requirements-pins.txt) printed the message's clear-screen, title and hyperlink sequences raw."""
    env = env_for(tmp_path, tmp_path / "none.toml")
    run_dir = hostile_run(tmp_path)
    outputs = {}
    done = cli(tmp_path, env, "report", str(run_dir), "--out", str(tmp_path / "report"))
    outputs["report"] = done.stdout + done.stderr
    done = cli(tmp_path, env, "repro", HOSTILE_CELL, "--results", str(run_dir))
    outputs["repro"] = done.stdout + done.stderr
    done = cli(
        tmp_path, env, "pins", str(run_dir), "--out", str(tmp_path / "pins"), "--no-coverage"
    )
    assert done.returncode == 0, done.stderr
    outputs["pins"] = done.stdout + done.stderr
    for name in ("constraints.txt", "requirements-pins.txt"):
        outputs[name] = (tmp_path / "pins" / name).read_text()
    for what, text in outputs.items():
        for char in CONTROL:
            assert char not in text, (what, repr(char), text[:2000])
    assert "\\x1b[2J" in outputs["report"] and "\\x1b[2J" in outputs["repro"]  # shown, not dropped
    assert "\\x1b]0;pwned" in outputs["requirements-pins.txt"]
    for line in outputs["requirements-pins.txt"].splitlines():  # a comment stays a comment
        assert line.startswith("#") or line.startswith(
            ("torch", "numpy", "torchvision", "python")
        ), line


ESCAPING_PROBE = """
from torch_matrix.probes.api import probe, Fail

@probe("escapes")
def escapes(ctx):
    raise Fail("diverged %s")
""" % ESCAPES.encode("unicode_escape").decode()


def test_the_nox_log_lines_show_control_characters(tmp_path, index):
    """nox's per-cell log line (``t...: INCOMPATIBLE: escapes: fail: ...``) and the echoed runner
    lines printed the probe's escape sequences raw."""
    probes = probe_dir(tmp_path, ESCAPING_PROBE)
    spec = write_spec(
        tmp_path, index.url, probes=f'run = ["install_sanity", "escapes"]\ndirs = ["{probes}"]'
    )
    done = run_nox(tmp_path, env_for(tmp_path, spec), "-s", "matrix")
    log = done.stdout + done.stderr
    assert "INCOMPATIBLE" in log, log[-3000:]
    for char in CONTROL:
        assert char not in log, (repr(char), log[-3000:])
    assert any("INCOMPATIBLE" in line and "\\x1b[2J" in line for line in log.splitlines()), log[
        -3000:
    ]
    assert_no_orphans(tmp_path)


GITHUB_GH = r"""#!/bin/bash
# GitHub, as the nightly's issue step meets it: refuses a body over 65,536 characters, and the
# title in $GH_FAIL_TITLE (an API error); logs every call; answers `issue list` with $GH_OPEN.
echo "gh $*" >> "$GH_LOG"
case "$1 $2" in
  "issue list") cat "$GH_OPEN" ;;
  "label create") exit 1 ;;
  "issue create")
    if [ "$4" = "$GH_FAIL_TITLE" ]; then echo "HTTP 502: Bad Gateway" >&2; exit 1; fi
    chars="$("$PYTHON" -c 'import sys; print(len(open(sys.argv[1], encoding="utf-8").read()))' "$8")"
    if [ "$chars" -gt 65536 ]; then echo "body is too long (maximum is 65536 characters)" >&2; exit 1; fi
    cp "$8" "$GH_BODIES/$(printf '%s' "$4" | md5sum | cut -c1-12).md" ;;
  *) cat > /dev/null ;;
esac
"""


def nightly_world(tmp: Path) -> tuple[Path, dict[str, str]]:
    """The merge job's workspace after the report: last night in the history database, tonight's
    results in merged/ (2.4.1 fails with a message, repro, traceback and output of megabytes each,
    2.5.1 fails, 2.6.0 passes again), `torch-matrix` and a strict `gh` on PATH."""
    from tests.test_nightly_history import REPO as _repo  # noqa: F401 - same repository
    from torch_matrix.world.results import write_result
    from tests.factories import make_cell, make_probe, make_result

    names = ("install_sanity", "training_step")

    def night(root: Path, day: int, failing: dict[str, str]) -> Path:
        for torch in ("2.4.1", "2.5.1", "2.6.0"):
            cell = make_cell(torch=torch, probes=names, required_probes=names)
            message = failing.get(torch)
            probes = [
                make_probe("install_sanity"),
                make_probe(
                    "training_step",
                    "fail",
                    message,
                    repro="import torch\n" + message,
                    traceback="Traceback:\n" + message,
                    output_tail=message,
                )
                if message
                else make_probe("training_step"),
            ]
            write_result(
                make_result(cell, probes=probes, finished_at=f"2026-11-{day:02d}T03:00:00+00:00"),
                root / "nightly" / "cells",
            )
        return root / "nightly"

    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "torch-matrix").write_text(
        f'#!/bin/bash\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m torch_matrix.cli "$@"\n'
    )
    (bin_dir / "gh").write_text(GITHUB_GH)
    for path in bin_dir.iterdir():
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    work = tmp / "workspace"
    (work / "history").mkdir(parents=True)
    last = night(tmp / "n20", 20, {"2.6.0": "loss diverged"})
    done = subprocess.run(
        [
            str(bin_dir / "torch-matrix"),
            "import",
            str(last),
            "--db",
            str(work / "history" / "history.sqlite"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    night(work / "merged", 21, {"2.4.1": "huge " + "x" * 1_500_000, "2.5.1": "loss diverged"})
    (tmp / "bodies").mkdir()
    (tmp / "open.json").write_text(
        json.dumps([{"number": 7, "title": f"torch-matrix: training_step fails in t2.6.0-py{PY}"}])
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CLEAN": "true",
        "CELL_FILTER": "",
        "CELL_TAGS": "",
        "HISTORY_DB": "history/history.sqlite",
        "RUN_URL": "https://github.com/o/r/actions/runs/9",
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "GITHUB_OUTPUT": str(tmp / "output.txt"),
        "MAX_NEW_ISSUES": "20",
        "GH_LOG": str(tmp / "gh.log"),
        "GH_OPEN": str(tmp / "open.json"),
        "GH_BODIES": str(tmp / "bodies"),
        "GH_FAIL_TITLE": "",
        "PYTHON": sys.executable,
        "GITHUB_SHA": "f" * 40,
    }
    env.pop("TORCH_MATRIX_HISTORY", None)
    return work, env


def test_issue_bodies_fit_github_and_one_refused_issue_never_stops_the_rest(tmp_path):
    """A probe message of megabytes made a body far past GitHub's 65,536 characters: `gh issue
    create` failed and, under `bash -e`, the step stopped before the remaining issues and the closes.
    Now each body is cut below the limit (the whole bundle in history/bundles/, named in the body);
    an issue GitHub refuses is a warning and the rest still happen."""
    if (
        shutil.which("jq") is None
    ):  # tests/install-browser.sh installs it; CI must not pass without it
        reason = "FAULT NOT REPRODUCED: the workflow's issue step needs jq (bash tests/install-browser.sh)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from tests.test_nightly_history import run_step

    work, env = nightly_world(tmp_path)
    huge, normal = (f"torch-matrix: training_step fails in t{v}-py{PY}" for v in ("2.4.1", "2.5.1"))
    step = run_step("Import tonight's run", work, env)
    assert step.returncode == 0, step.stdout + step.stderr
    step = run_step("Open, comment on and close breakage issues", work, env)
    assert step.returncode == 0, step.stdout + step.stderr
    calls = [
        line for line in (tmp_path / "gh.log").read_text().splitlines() if line.startswith("gh ")
    ]
    assert sum(call.startswith("gh issue create") for call in calls) == 2, calls
    assert any(call.startswith("gh issue close 7 ") for call in calls), calls
    bodies = sorted((tmp_path / "bodies").iterdir(), key=lambda path: path.stat().st_size)
    assert len(bodies) == 2, "GitHub refused a body: " + step.stderr[-2000:]
    cut = bodies[-1].read_text(encoding="utf-8")
    assert len(cut) < 65_536 and "bundles/" in cut and "history" in cut and "Cut to fit" in cut, (
        cut[-1500:]
    )
    assert_markdown_is_inert(cut, "a cut body")  # cutting left no fence or <details> open
    whole = list(
        (work / "history" / "bundles").glob(f"t2.4.1-py{PY}*")
    )  # as long as loading keeps it
    assert len(whole) == 1 and len(whole[0].read_text(encoding="utf-8")) > 65_536

    # Tonight GitHub refuses the first issue: the second is still opened and #7 still closed.
    (tmp_path / "gh.log").unlink()
    step = run_step(
        "Open, comment on and close breakage issues", work, {**env, "GH_FAIL_TITLE": huge}
    )
    assert step.returncode == 0, step.stdout + step.stderr
    calls = [
        line for line in (tmp_path / "gh.log").read_text().splitlines() if line.startswith("gh ")
    ]
    created = [call for call in calls if call.startswith("gh issue create")]
    assert len(created) == 2 and normal in created[-1], created
    assert any(call.startswith("gh issue close 7 ") for call in calls), calls
    assert "::warning::could not open an issue for" in step.stdout + step.stderr


def test_a_cut_issue_body_fits_even_when_the_bundle_is_backticks():
    """The fence around a cut bundle is longer than the longest backtick run it keeps: a bundle of
    backticks must still come out below GitHub's limit, with every fence closed."""
    from torch_matrix.report.diff_render import GITHUB_BODY_CHARS, issue_text

    for bundle in (
        "`" * 70_000,
        ("x" * 100 + "`" * 300 + "\n") * 400,
        "</details>\n# h\n" * 10_000,
    ):
        text = issue_text(
            "head\n",
            bundle,
            "t2.5.1-py3.11",
            "training_step",
            "https://github.com/o/r/actions/runs/9",
        )
        assert len(text) < GITHUB_BODY_CHARS, len(text)
        assert "bundles/t2.5.1-py3.11--training_step.md" in text
        rendered = outside_fences(text)
        assert rendered.count("<details>") == rendered.count("</details>") == 1, rendered[-500:]


def test_the_probe_runner_run_by_hand_shows_control_characters(tmp_path):
    """`python -m torch_matrix.probes --select NAME` is the rerun line every failing probe records; run in a
    terminal it printed the probe's message raw. Its rule is the tool's (one copy, probes/visible.py,
    which vocab.escaping.terminal applies): the same output for every code point."""
    probes = probe_dir(tmp_path, ESCAPING_PROBE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_matrix.probes",
            "--no-standard",
            "--probe-dir",
            str(probes),
            "--select",
            "escapes",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "escapes" in done.stderr and "\\x1b[2J" in done.stderr, done.stderr
    for char in CONTROL:
        assert char not in done.stderr, (repr(char), done.stderr)
    from torch_matrix.vocab.escaping import terminal
    from torch_matrix.probes.runner import visible

    assert [c for c in range(0x110000) if visible(chr(c)) != terminal(chr(c))] == []


# ---------------------------------------------------------------- round 3 (issue 35)

EVIL_LABEL = "RTX 4090 (sm_89)\ntorch==6.6.6\n--index-url http://127.0.0.1:9/evil"


def _add_targets(cell_file: Path, targets: list[dict[str, str]]) -> None:
    data = json.loads(cell_file.read_text())
    data["targets"] = targets
    cell_file.write_text(json.dumps(data, indent=2))


def _no_kernel(label: str) -> dict[str, str]:
    return {"target": label, "verdict": "no-kernel-image", "reason": "no sm_89 code"}


def test_a_target_label_from_a_shard_never_becomes_a_live_constraint_line(tmp_path, finished_run):
    """A shard's target label with newlines: left out when read (one warning naming the file), so
    no folder and no line of it; a `..` label gives no empty or parent folder; two spellings of one
    GPU get two folders; the terminal shows a label's escapes, never runs them."""
    run_dir = copy_run(finished_run, tmp_path)
    cells = run_dir / "cells"
    escape = "RTX 3090 (sm_86)\x1b]0;pwned\x07"
    _add_targets(
        cells / f"{BROKEN}.json",
        [
            _no_kernel(EVIL_LABEL),
            _no_kernel(".."),
            _no_kernel("RTX 4090 (sm_89)"),
            _no_kernel("rtx-4090 (SM_89)"),
            _no_kernel(escape),
        ],
    )
    _add_targets(cells / f"{GOOD}.json", [_no_kernel("RTX 4090 (sm_89)")])
    env = env_for(tmp_path, tmp_path / "none.toml")
    done = cli(tmp_path, env, "pins", str(run_dir), "--no-coverage")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "targets/" in line]
    assert any("targets/0/target" in w and f"{BROKEN}.json" in w for w in warnings), done.stderr
    assert any("targets/1/target" in w and "'..'" in w for w in warnings), done.stderr
    assert any("targets/4/target" in w for w in warnings), done.stderr  # an escape is not a name
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    folders = sorted(p.name for p in (run_dir / "pins" / "targets").iterdir())
    assert len(folders) == 2 and all(f.startswith("rtx-4090-sm_89-") for f in folders), folders
    for folder in folders:
        text = (run_dir / "pins" / "targets" / folder / "constraints.txt").read_text()
        live = [line for line in text.splitlines() if line and not line.startswith("#")]
        assert all(line.startswith("torch") and "6.6.6" not in line for line in live), text
        assert "--index-url" not in text and "evil" not in text, text
    # The renderer holds the line too, for a label that reached it some other way.
    from torch_matrix.pins.target_render import render_target_constraints
    from torch_matrix.pins.targets import target_pins

    loaded = load_results(run_dir)
    pins = target_pins(loaded.results)[0]
    import dataclasses

    text = render_target_constraints(dataclasses.replace(pins, target=EVIL_LABEL))
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        line for line in render_target_constraints(pins).splitlines() if not line.startswith("#")
    ], text


def _edge_result(run_dir: Path, edge_id: str) -> Path:
    """A follow-up (edge) result, as the follow-up session writes one, made from a grid cell's."""
    data = json.loads((run_dir / "cells" / f"{GOOD}.json").read_text())
    data["cell"]["id"] = edge_id
    data["cell"]["origin"] = "edge"
    data["cell"]["reason"] = "bisect: the edge of a break"
    path = run_dir / "cells" / f"{edge_id}.json"
    path.write_text(json.dumps(data, indent=2))
    assert read_result(path) is not None, "the edge result must load"
    return path


def test_redo_checks_every_id_before_it_touches_a_result(tmp_path, index, finished_run):
    """`-s followups -- --redo EDGE MATRIX`: refused for MATRIX before EDGE's result is touched; a
    valid `--redo EDGE` the planner does not plan again (follow-ups off here) keeps the result and
    says so (a result is deleted only by its replacement)."""
    run_dir = copy_run(finished_run, tmp_path)
    spec = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    edge_id = f"t2.0.0-py{PY}-edge"
    edge = _edge_result(run_dir, edge_id)
    before = edge.read_bytes()
    env = env_for(tmp_path, spec)
    done = run_nox(tmp_path, env, "-s", "followups", "--", "--redo", edge_id, GOOD)
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"--redo {GOOD} is a matrix cell" in done.stdout + done.stderr
    assert edge.read_bytes() == before
    done = run_nox(
        tmp_path,
        env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0"),
        "-s",
        "followups",
        "--",
        "--redo",
        edge_id,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert edge.read_bytes() == before
    assert f"--redo {edge_id}: the follow-up planner did not plan this cell again" in (
        done.stdout + done.stderr
    )


def test_a_half_made_venv_never_blocks_a_cell_and_a_blocked_cell_is_never_dropped(tmp_path, index):
    """A run killed while uv made a cell's venv left a directory `uv venv --clear` refuses: the next
    run removes it (only uv's and torch-matrix's entries in it) and the cell runs. A directory at a
    cell's venv path holding someone else's file is kept, and that cell appears as missing, with
    the reason, in the table, summary.md and the pins (also from `report DIR` run alone)."""
    from torch_matrix.run.matrixplan import nox_venv_of

    spec = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    envdir = tmp_path / "nox"
    half = nox_venv_of(envdir, GOOD)
    (half / "bin").mkdir(parents=True)
    (half / "bin" / "half-made").write_text("")  # gone once the cell's venv is made there
    (half / "lib" / f"python{PY}" / "site-packages").mkdir(parents=True)
    (half / ".gitignore").write_text("*\n")
    foreign = nox_venv_of(envdir, BROKEN)
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("mine\n")
    env = env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0")
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    run_dir = tmp_path / "results" / "faults"
    assert read_result(cells_dir(tmp_path) / f"{GOOD}.json") is not None, output[-3000:]
    assert not (half / "bin" / "half-made").exists()  # nox_venv_of named nox's own directory
    assert (foreign / "notes.txt").read_text() == "mine\n"
    assert f"{BROKEN}: cannot create its venv" in output and "notes.txt" in output, output[-3000:]
    summary = (run_dir / "summary.md").read_text()
    assert "Planned but missing (1)" in summary and BROKEN in summary, summary
    assert "notes.txt" in summary
    pins = json.loads((run_dir / "pins" / "pins.json").read_text())
    assert [m["cell"] for m in pins["missing"]] == [BROKEN], pins.get("missing")
    assert BROKEN in (run_dir / "pins" / "constraints.txt").read_text()
    alone = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(run_dir))
    assert alone.returncode == 0, alone.stderr
    assert "Planned but missing (1)" in alone.stdout and "notes.txt" in alone.stdout, alone.stdout
    pinned = cli(tmp_path, env, "pins", str(run_dir), "--no-coverage")
    assert "Planned but missing (1" in pinned.stdout and BROKEN in pinned.stdout, pinned.stdout


def test_report_dir_run_alone_keeps_the_spec_in_its_rerun_lines(tmp_path, finished_run):
    """`torch-matrix report DIR` on its own (no --spec, no $TORCH_MATRIX_SPEC, another directory)
    rewrote summary.md with rerun lines that lack `--spec`: the run's planned-cells.json names the spec."""
    run_dir = copy_run(finished_run, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = env_for(tmp_path, tmp_path / "none.toml")
    del env["TORCH_MATRIX_SPEC"]
    done = cli(elsewhere, env, "report", str(run_dir))
    assert done.returncode == 0, done.stderr
    summary = (run_dir / "summary.md").read_text()
    reruns = [line for line in summary.splitlines() if "torch-matrix run" in line]
    assert reruns and all("--spec" in line for line in reruns), reruns


def test_report_pins_takes_the_index_facts_the_run_read(tmp_path, finished_run):
    """`report --pins` read the spec and the index again for the pins' coverage. The run now keeps
    what it read as its cells started (index-facts.json beside planned-cells.json); the report and
    `pins` use it, and without it they read the index as before, and say so: same pins files."""
    run_dir = copy_run(finished_run, tmp_path)
    facts = json.loads((run_dir / "index-facts.json").read_text())
    assert facts["released"]["torch"][:2] == ["2.1.0", "2.2.0"], facts["released"]
    assert set(facts["wheel_pythons"]["torch"]) == set(facts["released"]["torch"])
    env = env_for(tmp_path, tmp_path / "none.toml")
    del env["TORCH_MATRIX_SPEC"]  # the report alone, as a CI merge job runs it
    kept = cli(tmp_path, env, "report", str(run_dir), "--pins", "--out", str(tmp_path / "kept"))
    assert kept.returncode == 0, kept.stderr
    assert "as the run read them" in kept.stderr and "index-facts.json" in kept.stderr, kept.stderr
    pins = cli(tmp_path, env, "pins", str(run_dir), "--out", str(tmp_path / "pins"))
    assert pins.returncode == 0 and "as the run read them" in pins.stderr, pins.stderr
    (run_dir / "index-facts.json").unlink()
    read = cli(tmp_path, env, "report", str(run_dir), "--pins", "--out", str(tmp_path / "read"))
    assert read.returncode == 0, read.stderr
    assert "no index-facts.json" in read.stderr and "read from the index" in read.stderr, (
        read.stderr
    )
    for name in ("constraints.txt", "requirements-pins.txt", "pins.json"):
        text = (tmp_path / "kept" / "pins" / name).read_text()
        assert text == (tmp_path / "read" / "pins" / name).read_text(), name
        assert text == (tmp_path / "pins" / name).read_text(), name
    assert json.loads((tmp_path / "kept" / "pins" / "pins.json").read_text()).get("coverage")


def test_the_real_wheel_summary_survives_a_full_disk(capsys):
    """tests/conftest.py's summary hook, its stdout on a full disk (write: ENOSPC): it crashed with
    OSError 28 and the run ended with no final line. Now it says it on stderr and returns."""
    import errno

    from tests import conftest

    class FullDisk:
        def section(self, *args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        write_line = section

    conftest._SKIPPED.append(("tests/x.py::test_real", "no wheel"))
    try:
        conftest.pytest_terminal_summary(FullDisk(), 0, None)
    finally:
        conftest._SKIPPED.pop()
    err = capsys.readouterr().err
    assert "REAL-WHEEL CHECKS DID NOT RUN" in err and "No space left" in err, err


def test_a_followups_session_takes_the_results_directory_lock(tmp_path, index, finished_run):
    """`nox -s followups` alone held no lock: two of them on one results directory both ran every
    follow-up cell. Now the second is refused with one line naming the holder's pid."""
    run_dir = copy_run(finished_run, tmp_path)
    spec = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom torch_matrix.edges import locks\n"
            "locks.hold(Path(sys.argv[1]), 'results directory')\nprint('held', flush=True)\n"
            "time.sleep(120)\n",
            str(run_dir),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done = run_nox(
            tmp_path, env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0"), "-s", "followups"
        )
        output = done.stdout + done.stderr
        assert done.returncode != 0, output
        assert f"another torch-matrix run (pid {holder.pid}) is using this results directory" in (
            output
        ), output
        assert "follow-up cells: off" not in output
    finally:
        holder.kill()
        holder.wait()


def test_a_follow_up_cell_finds_uv_like_a_matrix_cell_without_the_venv_on_path(
    tmp_path, monkeypatch
):
    """A pipx-style install (`<venv>/bin/torch-matrix run`, the venv's bin not on PATH): matrix cells
    used the uv installed with the package, the follow-up cells plain `uv` from PATH, so every
    follow-up aborted. Now both find it the same way; a half-made venv there is cleared first."""
    import dataclasses

    from torch_matrix.run import cellrun, followups
    from torch_matrix.vocab.records import Cell

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    ran: list[str] = []
    monkeypatch.setattr(
        cellrun, "run_cell", lambda cell, python, settings, steps, base=None: ran.append(python)
    )
    venv = tmp_path / "nox" / "followup-t2.1.0-edge"
    (venv / "bin").mkdir(parents=True)  # what a killed `uv venv` leaves: no pyvenv.cfg
    settings = cellrun.CellSettings(cells_dir=tmp_path / "cells", work_dir=tmp_path / "work")
    cell = Cell(id="t2.1.0-edge", axes={"torch": "2.1.0"}, requirements=("torch==2.1.0",))
    followups.run_in_own_venv(cell, dataclasses.replace(settings), sys.executable, venv, redo=True)
    assert (venv / "pyvenv.cfg").is_file() and ran == [str(venv / "bin" / "python")]


@pytest.mark.parametrize(
    "raw",
    [
        b'[tool.torch-matrix]\nname = "p"\ntorch = ["2.1.0"\n',  # not TOML
        b'[tool.torch-matrix]\nname = "caf\xe9"\n',  # not UTF-8
    ],
    ids=["not-toml", "not-utf8"],
)
def test_a_broken_pyproject_spec_is_one_error_line_not_the_builtin_default(tmp_path, raw):
    """`torch-matrix plan` (as `run` finds its spec) in a project whose pyproject.toml holds a
    [tool.torch-matrix] table but is not TOML or not UTF-8: it silently planned the built-in
    30-cell default. Now one error line naming the file, and exit 2."""
    (tmp_path / "pyproject.toml").write_bytes(raw)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TORCH_MATRIX_", "VIRTUAL_ENV"))
    }
    env["PYTHONPATH"] = str(REPO)
    done = run([sys.executable, "-m", "torch_matrix.cli", "plan"], tmp_path, env)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    one_error(done.stderr, "pyproject.toml")


def test_the_nightly_issue_reruns_a_follow_up_cell_through_the_follow_up_session():
    """The nightly issue's rerun line for a follow-up (edge) cell named `-s 'matrix(<edge id>)'`,
    a session that does not exist. It names the follow-up session and the cell's id."""
    from torch_matrix.report.diff import NewFailure
    from torch_matrix.report.diff_render import issue_body

    edge = f"t2.3.0-py{PY}-edge"
    failure = NewFailure(edge, "training_step", "fail", "boom", "", ("torch==2.3.0",), PY, None)
    body = issue_body(failure)
    assert f"-s followups -- --redo {edge}" in body, body
    assert f"matrix({edge})" not in body, body
    grid = issue_body(dataclasses_replace(failure, cell=f"t2.3.0-py{PY}"))
    assert f"-s 'matrix(t2.3.0-py{PY})' -- --redo" in grid, grid


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_a_four_digit_driver_is_a_driver():
    """Driver `1000.x` (NVIDIA's numbering past 999) was rejected as malformed; it is newer than
    every three-digit one. A CUDA version given as a driver is still refused."""
    from torch_matrix.judge.gpus import TargetError, parse_driver
    from torch_matrix.judge.drivers import at_least

    assert parse_driver("1000.12") == "1000.12" and parse_driver("1000.12.01") == "1000.12.01"
    assert at_least("1000.12", "580.65.06") and not at_least("580.65", "1000.12")
    with pytest.raises(TargetError):
        parse_driver("12.4")


def test_a_window_edge_that_failed_in_one_of_three_runs_is_not_proven():
    """The first bad release of a window found by bisection failed in 1 of 3 runs (it passed on
    both reruns): written up as a proven edge (`torch!=2.0.*`, assuming every release in between
    bad). A flaky failure marks no edge: the window is not proven, only the tested releases are
    excluded, and the proof says why."""
    import dataclasses

    from tests.factories import make_probe
    from tests.test_followups import run, torch_line, truth_of
    from torch_matrix.pins import requirement_lines, suggest_pins
    from tests.test_followups import RELEASES

    results = run(truth_of({"2.0.0", "2.0.1"}), ["1.13.1", "2.0.1", "2.4.1"])
    assert torch_line(results) == "torch!=2.0.*"  # the bisected edge, every run failing
    flaky = make_probe(
        "p",
        "fail",
        message="fails in 1 of 3 runs (flaky): it broke",
        evidence={"runs": 3, "failed_runs": 1, "run_statuses": ["fail", "pass", "pass"]},
    )
    edited = [
        dataclasses.replace(r, probes=(flaky,)) if r.cell.id.startswith("t2.0.0-") else r
        for r in results
    ]
    assert any(r.cell.id.startswith("t2.0.0-") for r in edited)
    window = requirement_lines(suggest_pins(edited, {"torch": list(RELEASES)}).recommended)[
        0
    ].windows[0]
    assert not window.proven and window.kind == "not-proven", window.proof()
    assert "first bad 2.0.0 not proven" in window.proof() and "1 of 3 runs" in window.proof()
    assert torch_line(edited) != "torch!=2.0.*"


def test_pins_apply_on_a_wheel_url_of_an_excluded_release_says_so(tmp_path, finished_run):
    """`torch @ <wheel URL>` installing a release the pins exclude: `pins --apply` said "no change
    needed". The URL is still not rewritten (not ours), but a note names the release and the pin,
    and the summary line does not say all is well."""
    run_dir, env = _pins_to_apply(tmp_path, finished_run)
    requirements = tmp_path / "requirements.txt"
    original = "torch @ https://files.example/whl/torch-2.2.0%2Bcpu-cp311-cp311-linux_x86_64.whl\n"
    requirements.write_text(original)
    done = cli(tmp_path, env, "pins", str(run_dir), "--no-coverage", "--apply", str(requirements))
    assert done.returncode == 0, done.stderr
    assert "no change needed" not in done.stdout, done.stdout
    assert "installs torch 2.2.0+cpu, a release the evidence excludes" in done.stdout, done.stdout
    assert requirements.read_text() == original


def test_a_hang_on_the_only_tested_release_is_no_pin():
    """The project's test hangs (a probe timeout) on torch 2.0.0, the only release tested: the
    pins said `torch!=2.0.0`, excluding the one release tried on the strength of a hang no release
    was seen without. Now it is listed as not pinned, with why. A hang is a limit reached, not a
    finding (#42): beside a release that passes, it is still no pin."""
    from tests.factories import make_cell, make_probe, make_result
    from torch_matrix.pins import requirement_lines, suggest_pins

    def cell(version: str, status: str):
        made = make_cell(
            torch=version,
            python="3.11",
            torchvision="",
            probes=("tests",),
            required_probes=("tests",),
        )
        return make_result(
            made, probes=[make_probe("tests", status, message="timed out after 300 s")]
        )

    def torch_lines(results) -> list[str]:
        suggestion = suggest_pins(results, {"torch": ["2.0.0", "2.1.0"]})
        return [
            line.text()
            for line in requirement_lines(suggestion.recommended)
            if line.package == "torch" and line.specifiers
        ], suggestion

    for results in ([cell("2.0.0", "timeout")], [cell("2.0.0", "timeout"), cell("2.1.0", "pass")]):
        lines, suggestion = torch_lines(results)
        assert lines == [], lines
        assert [n.cell_id for n in suggestion.no_evidence] == ["t2.0.0-py3.11"]
        assert "raise [probes] timeout" in suggestion.no_evidence[0].reason


def specifier_set_of(line: str):
    from packaging.requirements import Requirement

    return Requirement(line).specifier


UV_PLATFORM_REFUSAL = (
    "  \\u00d7 No solution found when resolving dependencies:\n"
    "  \\u2570\\u2500\\u25b6 Because torch==2.1.2 has no wheels with a matching platform tag (e.g.,\n"
    "      `manylinux_2_36_x86_64`) and you require torch==2.1.2, we can conclude that your\n"
    "      requirements are unsatisfiable.\n"
)


def test_a_cell_refused_for_want_of_its_pythons_wheel_says_so_not_the_platform():
    """uv refused torch 2.1.2 on Python 3.10 with "no wheels with a matching platform tag (e.g.,
    `manylinux_2_36_x86_64`)": the missing wheel was the Python's. The cell says it as the planner
    does: "no torch 2.1.2 wheel for Python 3.10 on the index (wheels for: ...)"."""
    from types import SimpleNamespace

    from tests.factories import make_cell
    from torch_matrix.vocab.records import UNSATISFIABLE
    from torch_matrix.world import environment
    from torch_matrix.world import uvoutput

    cell = make_cell(torch="2.1.2", python="3.10", torchvision="")
    served = frozenset({"3.8", "3.9", "3.11"})
    message = uvoutput.missing_wheel_message(cell, UV_PLATFORM_REFUSAL, lambda p, v: served)
    assert (
        message == "no torch 2.1.2 wheel for Python 3.10 on the index (wheels for: 3.8, 3.9, 3.11)"
    )
    # Through the install itself: uv's own hint names the ABI tags it found.
    hinted = UV_PLATFORM_REFUSAL + (
        "      hint: You require CPython 3.10 (`cp310`), but we only found wheels for `torch`\n"
        "      (v2.1.2) with the following Python ABI tags: `cp38`, `cp39`, `cp311`\n"
    )
    outcome = environment.install(
        cell,
        {"default": "https://example.invalid/simple", "extra": [], "find_links": []},
        "/nonexistent/python",
        runner=lambda *a, **k: SimpleNamespace(returncode=1, stdout=hinted),
        sleep=lambda s: None,
        uv="uv",
    )
    assert outcome.status == UNSATISFIABLE
    assert outcome.message == message, outcome.message
    assert "manylinux" not in outcome.message
    # Where the Python is served, the platform really is what is missing: uv's words stay.
    assert (
        uvoutput.missing_wheel_message(cell, UV_PLATFORM_REFUSAL, lambda p, v: served | {"3.10"})
        == ""
    )


# Every planned cell appears (issue 35): a cell that died before writing its result, for any
# reason, is listed as missing with why; a result deleted on purpose still does not come back.

_HOLD = """
import os, pathlib, sys, time
marks = pathlib.Path(sys.argv[1])
marks.mkdir(exist_ok=True)
n = len(list(marks.iterdir()))
(marks / str(n)).write_text(str(os.getpid()))
if n >= 1:  # the second cell's probe holds until it is killed
    time.sleep(300)
"""


def _kill_what_is_left(tmp: Path) -> None:
    """Processes of this test still alive after nox was killed (found by their environment)."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if str(tmp).encode() in Path(f"/proc/{name}/environ").read_bytes():
                os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass


def test_a_cell_killed_before_its_result_and_one_never_started_are_listed_with_why(tmp_path, index):
    """nox killed (SIGKILL: no handler runs, as when its interpreter crashes) while the second of
    three cells ran its probes: that cell and the third, queued and never started, had no result
    and vanished from the report, summary.md and the pins. Now each is listed with what the run's
    cell log says of it; the first cell's result is there."""
    third = f"t2.4.0-py{PY}"
    (tmp_path / "hold.py").write_text(_HOLD)
    spec = write_spec(
        tmp_path,
        index.url,
        torch=("2.1.0", "2.2.0", "2.4.0"),
        probes=f'run = ["install_sanity"]\n[probes.commands]\n'
        f'hold = "python {tmp_path / "hold.py"} {tmp_path / "marks"}"',
    )
    env = env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0")
    proc = start_nox(tmp_path, env, "-s", "matrix")
    try:
        wait_for(lambda: (tmp_path / "marks" / "1").exists(), 120, "the second cell's probe")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _kill_what_is_left(tmp_path)
    run_dir = tmp_path / "results" / "faults"
    assert read_result(cells_dir(tmp_path) / f"{GOOD}.json") is not None
    assert not (cells_dir(tmp_path) / f"{BROKEN}.json").exists()
    alone = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(run_dir))
    assert alone.returncode == 0, alone.stderr
    out = alone.stdout
    assert "Traceback" not in out + alone.stderr
    assert "2 planned but missing" in out, out
    broken_row = next(line for line in out.splitlines() if BROKEN in line and "started" in line)
    assert "ended without a result" in broken_row, out
    third_row = next(line for line in out.splitlines() if third in line and "queued" in line)
    assert "never started" in third_row, out
    summary = (run_dir / "summary.md").read_text()
    assert "Planned but missing (2)" in summary and "ended without a result" in summary, summary
    pinned = cli(tmp_path, env, "pins", str(run_dir), "--no-coverage")
    assert pinned.returncode == 0, pinned.stderr
    assert BROKEN in pinned.stdout and third in pinned.stdout, pinned.stdout
    constraints = (run_dir / "pins" / "constraints.txt").read_text()
    assert f"# planned but missing (no evidence from it in these pins): {BROKEN}: started" in (
        constraints
    ), constraints


def test_a_cell_whose_session_fails_before_its_result_is_listed_with_the_error(tmp_path, index):
    """A cell's session that stops with an error before its result file (here: the result's path
    is taken by a directory) left nothing the report could list. Now the run's cell log holds
    the error, and the table and the pins name the cell with it."""
    spec = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    (cells_dir(tmp_path) / f"{BROKEN}.json").mkdir(parents=True)
    env = env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0")
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output
    run_dir = tmp_path / "results" / "faults"
    alone = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(run_dir))
    assert alone.returncode == 0, alone.stderr
    row = next(line for line in alone.stdout.splitlines() if BROKEN in line and "failed" in line)
    assert "cannot write the cell's result" in row, alone.stdout
    pinned = cli(tmp_path, env, "pins", str(run_dir), "--no-coverage")
    assert "cannot write the cell's result" in pinned.stdout, pinned.stdout


def test_a_cell_nox_cannot_make_a_venv_for_is_listed_as_never_started(tmp_path, index):
    """uv fails before any result file: nox cannot create the cell's venv (a uv configuration it
    cannot read), so the session body never runs. The cell was queued by the run: it is listed
    as missing, never started, naming the venv."""
    spec = write_spec(tmp_path, index.url, torch=("2.1.0",))
    bad = tmp_path / "uv.toml"
    bad.write_text("this is = = not toml\n")
    env = env_for(tmp_path, spec, TORCH_MATRIX_FOLLOWUPS="0", UV_CONFIG_FILE=str(bad))
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    run_dir = tmp_path / "results" / "faults"
    assert not (cells_dir(tmp_path) / f"{GOOD}.json").exists(), output[-2000:]
    alone = cli(tmp_path, env_for(tmp_path, tmp_path / "none.toml"), "report", str(run_dir))
    assert alone.returncode == 0, alone.stderr
    row = next(line for line in alone.stdout.splitlines() if GOOD in line and "queued" in line)
    assert "never started" in row and "venv" in row, alone.stdout


def test_a_result_deleted_after_it_was_written_does_not_come_back_but_a_rerun_that_dies_does(
    tmp_path, finished_run
):
    """The run's cell log tells a result deleted on purpose (written, then removed: not listed)
    from a cell whose rerun died before its result (listed)."""
    from torch_matrix.vocab.records import Cell
    from torch_matrix.world.runplan import CellEvent, read_log, record

    run_dir = copy_run(finished_run, tmp_path)
    log = read_log(run_dir)
    assert log is not None and log[BROKEN].event == CellEvent.RESULT, log
    (run_dir / "cells" / f"{BROKEN}.json").unlink()
    env = env_for(tmp_path, tmp_path / "none.toml")
    again = cli(tmp_path, env, "report", str(run_dir))
    assert again.returncode == 0 and BROKEN not in again.stdout, again.stdout
    cell = Cell.from_json(json.loads((run_dir / "cells" / f"{GOOD}.json").read_text())["cell"])
    assert record(run_dir, CellEvent.STARTED, [BROKEN], cell=cell) == ""
    listed = cli(tmp_path, env, "report", str(run_dir))
    assert listed.returncode == 0
    assert BROKEN in listed.stdout and "ended without a result" in listed.stdout, listed.stdout


def test_a_new_break_in_edited_results_that_is_not_bisected_says_why(tmp_path, index, finished_run):
    """Results edited after a run: the only passing grid cell now fails, while an edge cell of the
    same context passes. `nox -s followups` planned nothing and said nothing (edges are searched
    from a passing grid cell only). Now the session and the report say, in one line, that the
    break is not bisected and why."""
    import dataclasses

    from torch_matrix.vocab.records import ORIGIN_EDGE
    from torch_matrix.world.probesuite import suite_digest
    from torch_matrix.world.results import write_result
    from torch_matrix.world.specfile import load_spec

    run_dir = copy_run(finished_run, tmp_path)
    spec_path = write_spec(tmp_path, index.url, torch=("2.1.0", "2.2.0"))
    spec = load_spec(spec_path)
    good = read_result(run_dir / "cells" / f"{GOOD}.json")
    edge_cell = dataclasses.replace(good.cell, id=f"{GOOD}-edge", origin=ORIGIN_EDGE)
    fingerprint = edge_cell.fingerprint(spec.index.to_json(), suite_digest(spec))
    write_result(
        dataclasses.replace(good, cell=edge_cell, fingerprint=fingerprint), run_dir / "cells"
    )
    edited = json.loads((run_dir / "cells" / f"{GOOD}.json").read_text())
    for probe in edited["probes"]:
        probe.update(status="fail", message="AssertionError: edited to fail")
    (run_dir / "cells" / f"{GOOD}.json").write_text(json.dumps(edited))

    done = run_nox(tmp_path, env_for(tmp_path, spec_path), "-s", "followups")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    said = [line for line in output.splitlines() if "not bisected:" in line]
    assert len(said) == 1, output
    assert "torch 2.2.0 fails in every grid cell" in said[0], said
    assert "follow-up cells pass at 2.1.0" in said[0] and "--redo" in said[0], said
    report = cli(tmp_path, env_for(tmp_path, spec_path), "report", str(run_dir))
    assert report.returncode == 0, report.stderr
    assert "Breaks not bisected:" in report.stdout and said[0].split("nox > ")[-1] in report.stdout
    assert "### Breaks not bisected" in (run_dir / "summary.md").read_text()


# Issue 45, round 4: `import RUN --name nightly` then `diff RUN` was a StopIteration traceback
# (run/diff.py `_previous`, then in cli/history.py, looked for the stored row among the runs of the layout's name).
def test_a_run_imported_under_another_name_diffs_against_its_own_history(tmp_path, finished_run):
    run_dir = copy_run(finished_run, tmp_path)
    env = env_for(tmp_path, tmp_path / "matrix.toml")
    db = tmp_path / "history.sqlite"
    imported = cli(tmp_path, env, "import", str(run_dir), "--name", "nightly", "--db", str(db))
    assert imported.returncode == 0, imported.stdout + imported.stderr
    done = cli(tmp_path, env, "diff", str(run_dir), "--db", str(db))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no earlier run of spec 'nightly'" in done.stderr, done.stderr


# Issue 45: a side file with `seconds: NaN` (json.loads reads it) printed "nan s" as a duration.
def test_a_side_file_with_a_non_finite_duration_is_named_never_printed_as_nan(tmp_path):
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    run = tmp_path / "eco"
    meta = {
        "baseline": {"torch": "2.5.1", "label": "2.5.1"},
        "candidate": {"torch": "2.6.0", "label": "2.6.0"},
        "projects": [{"name": "p"}, {"name": "q"}],
    }
    (run / "projects" / "p").mkdir(parents=True)
    (run / "projects" / "q").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(meta))
    for name in ("p", "q"):
        for role in Role:
            side = SideRun(
                project=name,
                role=role,
                torch=meta[role.value]["torch"],
                status=SideStatus.PASSED,
                tests={"t.py::test": "passed"},
                seconds=12.0,
            ).to_json()
            if name == "p" and role == Role.CANDIDATE:
                side["seconds"] = float("nan")
            (run / "projects" / name / f"{role.value}.json").write_text(json.dumps(side))
    env = env_for(tmp_path, tmp_path / "matrix.toml")
    done = cli(tmp_path, env, "ecosystem", "report", str(run), "--out", str(tmp_path / "out"))
    text = (
        done.stdout
        + done.stderr
        + "".join(
            p.read_text() for p in (tmp_path / "out").glob("*") if p.suffix in (".md", ".json")
        )
    )
    assert "Traceback" not in text, text
    assert "nan s" not in text.lower() and "NaN" not in text, text
    bad = run / "projects" / "p" / "candidate.json"
    named = [line for line in done.stderr.splitlines() if str(bad) in line]
    assert len(named) == 1 and "'seconds'" in named[0] and "nan" in named[0], done.stderr


# Issue 45: a driver given as the branch `580` was read as 580.0.0 and judged too old for CUDA
# 13.x, whose minor-version floor NVIDIA gives as `>= 580` (every public R580 Linux driver meets
# 580.65.06). A branch alone is "some 580 driver"; the verdict says what it assumed.
def test_a_driver_branch_alone_is_some_driver_of_that_branch_and_the_verdict_says_so():
    from torch_matrix.judge.gpus import targets_of
    from torch_matrix.judge.hardware import BuildFacts, Hardware, judge

    cuda13 = BuildFacts(
        torch="2.13.0+cu130", cuda="13.0", arch_list=("sm_80", "sm_90", "sm_100", "sm_120")
    )
    (target,) = targets_of(["RTX 4090"], ["580"])
    found = judge(cuda13, target)
    assert found is not None and found.verdict == Hardware.NATIVE, found
    assert "driver 580 read as some R580 driver, assumed >= 580.65.06" in found.reason
    for older in ("575", "580.65"):  # an older branch, or a driver written in full below the floor
        (target,) = targets_of(["RTX 4090"], [older])
        found = judge(cuda13, target)
        assert found is not None and found.verdict == Hardware.DRIVER_TOO_OLD, (older, found)
        assert "assumed" not in found.reason
    (target,) = targets_of(["RTX 4090"], ["590"])  # a newer branch: nothing assumed
    found = judge(cuda13, target)
    assert found is not None and found.verdict == Hardware.NATIVE and "assumed" not in found.reason


# Issue 45: a plain SIGINT to the `torch-matrix run` process (not its group: `kill -INT PID`, a
# supervisor, a CI runner's cancel) let the run finish and then exited 130; SIGTERM left nox
# running. Either now stops the run as a terminal's Ctrl-C does: nox winds down, no orphan.
@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_to_the_tool_process_alone_stops_the_run_as_ctrl_c_does(
    tmp_path, index, signame, code
):
    spec = tree_spec(tmp_path, index.url, hold_s=300)
    env = env_for(tmp_path, spec)
    tool = subprocess.Popen(
        [*AS_FOREGROUND_JOB, sys.executable, "-m", "torch_matrix.cli", "run", "-s", "matrix"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (tmp_path / "pids" / "command.pid").exists(), 90, "the command probe")
        time.sleep(0.2)
        pids = process_tree_pids(tmp_path)
        started = time.monotonic()
        os.kill(tool.pid, getattr(signal, signame))  # the process alone, not its group
        out, err = finish(tool, 60)
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, signal.SIGKILL)
    assert tool.returncode == code, (tool.returncode, err[-3000:])
    assert time.monotonic() - started < 45  # stopped, not run to the probe's end (300 s)
    assert "Traceback" not in err, err[-3000:]
    assert not (cells_dir(tmp_path) / f"{GOOD}.json").exists()  # interrupted: no half verdict
    assert_no_orphans(tmp_path, pids)


# Issue 45: `ecosystem run --python /nonexistent/python3` ran anyway and filed every project
# same-fail (each side's venv failed). The interpreter is checked first: one line, exit 2.
@pytest.mark.parametrize(
    "python", ["/nonexistent/python3", "python-that-is-not-on-path", "/bin/false"]
)
def test_ecosystem_run_with_a_missing_interpreter_is_one_line_before_any_work(tmp_path, python):
    projects = tmp_path / "projects.toml"
    (tmp_path / "src").mkdir()
    projects.write_text('[[project]]\nname = "a"\npath = "src"\ncommand = "true"\n')
    out = tmp_path / "eco"
    env = env_for(tmp_path, tmp_path / "matrix.toml")
    args = ["--baseline", "2.5.1", "--candidate", "2.6.0", "--python", python, "--out", str(out)]
    done = cli(tmp_path, env, "ecosystem", "run", *args, str(projects))
    assert done.returncode == 2, done.stdout + done.stderr
    one_error(done.stderr, f"--python {python}")
    assert "--python" in hint_of(done.stderr)
    assert not out.exists()  # nothing run, nothing filed
