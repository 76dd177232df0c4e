"""Prefetch of the next cells' wheels while a cell runs its probes (torch_matrix.run.prefetch).

The unit tests drive the Prefetcher with a fake process starter and a fake free-space reading;
the end-to-end test runs `nox -s matrix` from an empty uv cache against the synthetic index and
checks that the second cell found its wheels already cached."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from torch_matrix.run.prefetch import (
    BUDGET_ENV,
    PREFETCH_ENV,
    PrefetchSettings,
    Prefetcher,
    fetch_command,
    hash_command,
    settings_from,
)
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.results import read_result
from tests.factories import make_cell


class FakeUv:
    """Stands in for a background ``uv pip install --target``: it creates its target, and runs
    until released (or stopped)."""

    def __init__(self, hold: bool = False, exit_status: int = 0) -> None:
        self.commands: list[list[str]] = []
        self.low: list[bool] = []  # started at the lowest priority, per command
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.stopped = 0
        self.exit_status = exit_status

    def fetches(self) -> list[list[str]]:
        return [c for c in self.commands if "--target" in c]

    def __call__(self, command, env=None, low=False):
        self.commands.append(list(command))
        self.low.append(low)
        if "--target" in command:
            target = Path(command[command.index("--target") + 1])
            (target / "torch").mkdir(parents=True)
        fake = self

        class Process:
            returncode = None

            def poll(self):
                if fake.release.is_set() and self.returncode is None:
                    self.returncode = (
                        fake.exit_status if not getattr(self, "killed", False) else -15
                    )
                return self.returncode

            def terminate(self):
                fake.stopped += 1
                self.killed = True
                fake.release.set()

            def wait(self, timeout=None):
                fake.release.wait(timeout)
                return self.poll()

            kill = terminate

        return Process()


def _prefetcher(tmp_path, uv, free=lambda path: 100 * 10**9, ahead=2, budget=10 * 10**9):
    return Prefetcher(
        PrefetchSettings(ahead=ahead, min_free_bytes=budget),
        cache_dir=str(tmp_path),
        scratch=tmp_path / "scratch",
        index_config={"default": "https://example.invalid/simple"},
        python_for=lambda cell: f"/py/{cell.python}",
        uv="uv",
        free=free,
        start=uv,
    )


def test_the_next_cells_pins_are_fetched_into_a_scratch_target_never_a_venv(tmp_path):
    cells = [make_cell(torch=v) for v in ("2.4.1", "2.5.1", "2.6.0")]
    uv = FakeUv()
    prefetcher = _prefetcher(tmp_path, uv)
    assert [c.id for c in prefetcher.ahead(cells)] == [cells[0].id, cells[1].id]  # at most 2 ahead
    prefetcher.wait(10)
    assert prefetcher.ahead(cells[:2]) == []  # each cell once per run
    assert prefetcher.done == {cells[0].id: "fetched", cells[1].id: "fetched"}
    first, hashing = uv.commands[:2]
    assert first[:5] == ["uv", "pip", "install", "--python", "/py/3.11"]
    target = str(tmp_path / "scratch" / cells[0].id)
    assert first[first.index("--target") + 1] == target
    assert "torch==2.4.1" in first and "--default-index" in first
    # Then the install check's hashing over the fetched files (it fills the memo the cell's check reads).
    assert (
        hashing[:2] == ["/py/3.11", "-I"]
        and hashing[2].endswith("facts.py")
        and hashing[3:] == ["record", target]
    )
    assert len(uv.commands) == 4 and all(uv.low), (
        "every background step runs at the lowest priority"
    )
    assert not any(
        Path(c[c.index("--target") + 1]).exists() for c in uv.fetches()
    )  # scratch removed
    prefetcher.close()
    assert not (tmp_path / "scratch").exists()


def test_the_disk_budget_is_checked_before_and_during_a_fetch(tmp_path):
    low = _prefetcher(tmp_path, FakeUv(), free=lambda path: 3 * 10**9)
    (cell,) = low.ahead([make_cell()])
    low.wait(10)
    assert (
        low.done[cell.id].startswith("skipped: less than 10 GB free") and low.start.commands == []
    )

    failing = _prefetcher(tmp_path, FakeUv(exit_status=2))
    (cell,) = failing.ahead([make_cell()])
    failing.wait(10)
    assert (
        failing.done[cell.id] == "failed (uv exited 2)" and len(failing.start.commands) == 1
    )  # nothing hashed

    readings = iter([50 * 10**9] + [10**9] * 1000)  # plenty at the start, then the disk fills up
    uv = FakeUv(hold=True)
    filling = _prefetcher(tmp_path, uv, free=lambda path: next(readings))
    (cell,) = filling.ahead([make_cell()])
    filling.wait(10)
    assert filling.done[cell.id].startswith("stopped: less than 10 GB free") and uv.stopped == 1
    assert not (tmp_path / "scratch" / cell.id).exists()


def test_close_stops_a_running_fetch_and_removes_its_scratch(tmp_path):
    uv = FakeUv(hold=True)
    prefetcher = _prefetcher(tmp_path, uv)
    cells = [make_cell(torch=v) for v in ("2.4.1", "2.5.1")]
    prefetcher.ahead(cells)
    while not uv.commands:
        threading.Event().wait(0.01)
    prefetcher.close()  # Ctrl-C / the end of the run
    assert uv.stopped == 1 and not (tmp_path / "scratch").exists()
    assert cells[1].id not in prefetcher.done  # the queue is dropped
    assert prefetcher.ahead([make_cell(torch="2.6.0")]) == []  # nothing starts after close


def test_a_cell_about_to_install_takes_its_own_fetch_over_or_leaves_the_queue(tmp_path):
    """A cell never waits behind its own low-priority fetch (issue #32: a cell waited 6-7 minutes,
    silent, on its prefetch): the fetch is stopped, said, and the cell's install fetches the rest."""
    uv = FakeUv(hold=True)
    lines: list[str] = []
    prefetcher = _prefetcher(tmp_path, uv)
    prefetcher.log = lines.append
    first, second = make_cell(torch="2.4.1"), make_cell(torch="2.5.1")
    prefetcher.ahead([first, second])
    while not uv.commands:
        threading.Event().wait(0.01)
    prefetcher.claim(second.id)  # queued, not started: it is dropped, its own install fetches it
    prefetcher.claim(first.id)  # under way: stopped, the cell takes it over
    assert uv.stopped == 1  # stopped, not waited for
    prefetcher.wait(10)
    assert prefetcher.done[first.id] == "handed over to the cell's own install"
    assert any("takes the fetch over at normal priority" in line for line in lines)
    assert second.id not in prefetcher.done and len(uv.fetches()) == 1


def test_a_cell_waits_for_its_own_fetch_only_once_it_runs_at_normal_priority(tmp_path):
    uv = FakeUv(hold=True)
    lines: list[str] = []
    raised: list[object] = []
    prefetcher = _prefetcher(tmp_path, uv)
    prefetcher.log = lines.append
    prefetcher.boost = lambda process: raised.append(process) or True
    first = make_cell(torch="2.4.1")
    prefetcher.ahead([first])
    while not uv.commands:
        threading.Event().wait(0.01)
    threading.Timer(0.3, uv.release.set).start()
    prefetcher.claim(first.id)  # raised to normal priority, then waited for
    assert raised and uv.release.is_set() and uv.stopped == 0
    assert any("the fetch goes on at normal priority" in line for line in lines)
    prefetcher.wait(10)
    # the waiting cell is not kept behind the hashing ahead (a head start only)
    assert prefetcher.done[first.id] == "fetched (not hashed ahead: its cell is installing)"
    assert len(uv.commands) == 1


def test_settings_come_from_the_environment_and_bad_values_are_one_error():
    assert settings_from({}) == PrefetchSettings()
    assert settings_from({PREFETCH_ENV: "0"}).ahead == 0
    assert settings_from({BUDGET_ENV: "2.5"}).min_free_bytes == 2_500_000_000
    for env in ({PREFETCH_ENV: "-1"}, {PREFETCH_ENV: "two"}, {BUDGET_ENV: "nan"}):
        with pytest.raises(UserError) as error:
            settings_from(env)
        assert error.value.hint
    override = make_cell()
    override = override.__class__(**{**override.__dict__, "tags": ("install-override",)})
    assert fetch_command(override, None, "/py", Path("/t"), "uv") is None


def test_a_cold_matrix_fetches_the_next_cell_while_the_first_runs_its_probes(tmp_path, monkeypatch):
    """Two cells from an empty uv cache: the second cell's install finds every wheel cached (uv
    prepares nothing), because the first cell's probe phase fetched them."""
    import shutil

    from torch_matrix.run.prefetch import DEFAULT_FREE_GB
    from tests.synthetic_wheels import build_index
    from tests.test_e2e import PY, nox_env, run_nox

    # The prefetch keeps DEFAULT_FREE_GB free on the uv cache's filesystem (here: tmp_path's) and
    # fetches nothing below it, by design: on a machine with less free space this test cannot
    # see a fetch. The space is the machine's, not the project's: a loud skip, under CI too.
    free_gb = shutil.disk_usage(tmp_path).free / 1e9
    if free_gb < DEFAULT_FREE_GB + 0.5:
        pytest.skip(
            f"PREFETCH NOT TESTED: {free_gb:.1f} GB free at {tmp_path}, under the "
            f"{DEFAULT_FREE_GB:g} GB the prefetch keeps free (+0.5 GB for this test): it would "
            "rightly fetch nothing; free some disk to run this check"
        )
    index = build_index(tmp_path / "index")
    spec = tmp_path / "matrix.toml"
    spec.write_text(
        f'name = "e2e"\npython = ["current"]\ntorch = ["2.1.0", "2.2.0"]\ntorchvision = "paired"\n'
        f'[probes]\nrun = ["install_sanity"]\n[index]\ndefault = "{index.url}"\nextra = []\n'
        f"find_links = []\n"
    )
    env = nox_env(tmp_path, spec, UV_CACHE_DIR=str(tmp_path / "fresh-cache"))
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"prefetch: fetching the wheels of t2.2.0-py{PY}" in output
    cells = tmp_path / "results" / "e2e" / "cells"
    first, second = (read_result(cells / f"t{v}-py{PY}.json") for v in ("2.1.0", "2.2.0"))
    assert "Prepared" in first.install.message, (
        first.install.message
    )  # downloaded by its own install
    assert "Prepared" not in second.install.message, second.install.message  # already in the cache
    assert not list(tmp_path.glob("nox/.torch-matrix-prefetch-*"))  # scratch removed at exit


def test_the_files_hashed_over_a_fetched_target_are_not_hashed_again_in_the_cells_venv(
    tmp_path, monkeypatch
):
    """The prefetch's hashing step (``hash_command``, a real ``python -I torch_matrix/probes/facts.py record DIR``)
    over a --target directory: the cell's venv, hardlinked from the same cache files, then finds
    every file in the memo and hashes nothing; rows outside the target (``../../bin``) are left out."""
    import base64
    import hashlib
    import os
    import subprocess
    import sys

    from torch_matrix.probes import installcheck

    def site_with(where: Path, data: bytes, link_from: Path | None = None) -> Path:
        (where / "pkg").mkdir(parents=True)
        (where / "pkg-1.0.dist-info").mkdir()
        lib = where / "pkg" / "lib.so"
        if link_from is None:
            lib.write_bytes(data)
        else:
            os.link(link_from, lib)  # what uv does: the venv's file is the cache's inode
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        (where / "pkg-1.0.dist-info" / "RECORD").write_text(
            f"pkg/lib.so,sha256={digest},{len(data)}\n../../../bin/pkg-tool,sha256=AAAA,5\n"
            "pkg-1.0.dist-info/RECORD,,\n"
        )
        return lib

    data = os.urandom(64 * 1024)
    memo = tmp_path / "memo.sqlite3"
    monkeypatch.setenv("TORCH_MATRIX_VERIFIED_DB", str(memo))
    target = tmp_path / "scratch" / "cell"
    cached = site_with(target, data)
    done = subprocess.run(
        hash_command(sys.executable, target), capture_output=True, text=True, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert (
        json.loads(done.stdout) == []
    )  # whole, and the ../../../bin row outside the target not looked for

    venv_site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site_with(venv_site, data, link_from=cached)
    hashed = []
    real = installcheck._digests
    monkeypatch.setattr(
        installcheck,
        "_digests",
        lambda path, algorithm: hashed.append(path) or real(path, algorithm),
    )
    assert installcheck.incomplete_installs([str(venv_site)]) == []
    assert hashed == [], "the cell's check hashed again what the prefetch had hashed"
    # Damaged bytes in the target are never remembered: the cell's check still hashes and finds them.
    other = tmp_path / "scratch" / "other"
    site_with(other, data)
    (other / "pkg" / "lib.so").write_bytes(bytes(len(data)))
    subprocess.run(
        hash_command(sys.executable, other), capture_output=True, env=os.environ, check=True
    )
    fresh = tmp_path / "venv2"
    site_with(fresh, data, link_from=other / "pkg" / "lib.so")
    assert "other bytes" in " ".join(installcheck.incomplete_installs([str(fresh)])) and hashed


def test_a_background_step_runs_at_the_lowest_cpu_priority_in_a_session_that_yields():
    """nice 19 alone does not make a fetch yield to the probe runner: the runner has a session of
    its own, and where the kernel groups by session (autogroup) the two sessions share the cores
    equally whatever the nice values. The step gets its own session, its group the lowest weight."""
    import os
    import shutil

    from torch_matrix.edges import proc

    if not shutil.which("nice") or not Path("/proc/self/comm").exists():
        pytest.skip(
            "no `nice` or no /proc on this machine: the prefetch runs at normal priority here"
        )
    process = proc.background(["sleep", "30"], low=True)
    group = Path(f"/proc/{process.pid}/autogroup")
    try:
        deadline = time.monotonic() + 10
        while (
            Path(f"/proc/{process.pid}/comm").read_text().strip() != "sleep"
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)  # nice, ionice (and setpriv) exec the command: the same process id
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == 19
        has_group = group.exists()
        if proc.dies_with_us():
            assert os.getsid(process.pid) == process.pid != os.getsid(0)  # a session of its own
            if has_group:  # Linux with autogroup (this project's machines): the group yields
                assert group.read_text().split()[-1] == "19", group.read_text()
    finally:
        proc.stop(process)
    assert process.returncode is not None
    if not proc.dies_with_us():
        pytest.skip(
            "no `setpriv --pdeathsig` here: only nice was checked; the fetch stays in the run's session"
        )
    if not has_group:
        pytest.skip("no /proc/PID/autogroup here: the session's weight was not checked")


_HOLDER = """
import atexit, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's foreground job has it
from torch_matrix.run.sessions import stop_on_sigterm
from torch_matrix.run.prefetch import PrefetchSettings, Prefetcher
from tests.factories import make_cell
stop_on_sigterm()
tmp = Path(sys.argv[1])
prefetcher = Prefetcher(PrefetchSettings(ahead=1, min_free_bytes=0), cache_dir=str(tmp), scratch=tmp / "scratch",
                        index_config=None, python_for=lambda cell: sys.executable, uv=str(tmp / "uv"))
atexit.register(prefetcher.close)  # as torch_matrix.run.prefetch.run_prefetcher does
prefetcher.ahead([make_cell()])
print("holding", flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_to_the_run_stops_a_fetch_running_in_its_own_session(tmp_path, signame):
    """The fetch is in a session of its own (above), so Ctrl-C at the terminal (SIGINT to the
    run's process group) or ``docker stop`` (SIGTERM) does not reach it: the run stops it as it
    unwinds; ``kill -9`` of the run (nothing unwinds) leaves it to the kernel (parent-death
    signal). A real process, a real signal; the fetch is a stand-in uv that would hold 300 s."""
    import os
    import signal
    import subprocess
    import sys

    from torch_matrix.edges import proc

    if not Path("/proc/self/comm").exists() or not proc.dies_with_us():
        pytest.skip(
            "no /proc or no `setpriv` on this machine: the fetch stays in the run's own group here"
        )
    uv = tmp_path / "uv"
    # the pid file appears whole (written aside, then renamed): under load the test once read it
    # between the shell's open and its write, an empty file
    pid, part = tmp_path / "uv.pid", tmp_path / "uv.pid.part"
    uv.write_text(f"#!/bin/sh\necho $$ > {part} && mv {part} {pid}\nexec sleep 300\n")
    uv.chmod(0o755)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        deadline = time.monotonic() + 30
        while (
            not (tmp_path / "uv.pid").exists()
            and time.monotonic() < deadline
            and holder.poll() is None
        ):
            time.sleep(0.05)
        assert (tmp_path / "uv.pid").exists(), holder.communicate(timeout=10)
        fetch = int((tmp_path / "uv.pid").read_text())
        assert (
            os.getsid(fetch) == fetch != holder.pid
        )  # out of the run's session: the signal misses it
        os.killpg(holder.pid, getattr(signal, signame))
        holder.communicate(timeout=30)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
    assert holder.returncode != 0
    deadline = time.monotonic() + 10
    while Path(f"/proc/{fetch}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{fetch}").exists(), f"the fetch (pid {fetch}) outlived the run"
    if (
        signame != "SIGKILL"
    ):  # killed outright, the run cannot tidy up: the next run's scratch is its own
        assert not (tmp_path / "scratch").exists()


def test_a_background_fetch_can_be_raised_to_normal_priority_or_says_it_cannot():
    from torch_matrix.edges import proc

    process = proc.background(["sleep", "30"], low=True)
    try:
        deadline = time.monotonic() + 10
        while os.getpriority(os.PRIO_PROCESS, process.pid) != 19 and time.monotonic() < deadline:
            time.sleep(0.05)  # nice execs sleep: its nice value is set once it has
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == 19
        if proc.normal_priority(process):
            assert os.getpriority(os.PRIO_PROCESS, process.pid) == 0
        else:  # unprivileged: lowering a nice value is refused, and the caller stops it instead
            assert os.geteuid() != 0
    finally:
        proc.stop(process)
