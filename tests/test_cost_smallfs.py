"""A matrix bigger than the filesystem that holds uv's cache and the venvs (issue #32): a tmpfs in a
private mount namespace, synthetic torch wheels of 100 MB each, four releases (400 MB unpacked, on a
300 MB filesystem), no disk budget given (the default: the free space less a margin). The run must
end with every cell judged (or named as not fitting), "No space left on device" nowhere, and its
results readable by ``report`` and ``pins``. Where a private mount cannot be made, the test says so
(skip with the reason), never passes quietly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, verdict_of
from torch_matrix.world.results import read_result
from tests.synthetic_wheels import build_index, torch_wheel
from tests.test_faults import (
    assert_no_orphans,
    cli,
    env_for,
    in_namespace,
    needs_private_mounts,
    nox_command,
    run,
)

pytestmark = [pytest.mark.faults, pytest.mark.e2e]

RELEASES = ("2.0.0", "2.1.0", "2.2.0", "2.3.0")
PAYLOAD = 100 * 1000**2  # unpacked bytes each torch carries
FILESYSTEM = "300m"  # the tmpfs: smaller than the 4 releases together, larger than one


def _spec(tmp: Path, index_url: str) -> Path:
    path = tmp / "matrix.toml"
    path.write_text(
        f'name = "smallfs"\npython = ["current"]\ntorch = {json.dumps(list(RELEASES))}\n'
        'torchvision = "none"\nfollowups = 0\n[probes]\nrun = ["install_sanity"]\n\n'
        f'[index]\ndefault = "{index_url}"\nextra = []\nfind_links = []\n'
    )
    return path


def test_a_matrix_bigger_than_its_filesystem_judges_every_cell_without_filling_it(tmp_path):
    needs_private_mounts()
    wheels = []
    for number, version in enumerate(RELEASES):
        wheel = torch_wheel(version)
        # different bytes per release: uv's cache cannot share them
        wheel.files["torch/_weights.py"] = f"# {number}" + "x" * PAYLOAD + "\n"
        wheels.append(wheel)
    index = build_index(tmp_path / "index", wheels)
    spec = _spec(tmp_path, index.url)
    disk = tmp_path / "disk"
    disk.mkdir()
    env = env_for(
        tmp_path, spec, UV_CACHE_DIR=str(disk / "uv-cache"), TORCH_MATRIX_RETRY_BACKOFF="0.2"
    )
    done = run(
        in_namespace(
            f"mount -t tmpfs -o size={FILESYSTEM} tmpfs {disk}",
            nox_command(tmp_path, "-s", "matrix", envdir=disk / "nox"),
        ),
        tmp_path,
        env,
        timeout=600,
    )
    log = done.stdout + done.stderr
    assert "Traceback" not in log, log
    assert "No space left on device" not in log and "os error 28" not in log, log
    assert "cost: disk budget: " in log and "the free disk at" in log, log  # the default budget
    assert "evicted " in log, log  # the run made room by evicting what it fetched itself
    cells = tmp_path / "results" / "smallfs" / "cells"
    verdicts = {}
    for version in RELEASES:
        result = read_result(next(cells.glob(f"t{version}-*.json")))
        assert result is not None, log
        text = json.dumps(result.to_json())
        assert "No space left on device" not in text
        if result.install.status == "error":  # named as not fitting, never a finding
            assert "not run: needs " in result.install.message, result.install.message
        verdicts[version] = verdict_of(result).kind
    # Each release fits alone: every one is judged (2.2.0 is broken in the synthetic world only
    # through torchvision, absent here).
    assert set(verdicts.values()) <= {COMPATIBLE, INCOMPATIBLE}, verdicts
    assert done.returncode == 0, log
    for command in (
        ("report", str(tmp_path / "results" / "smallfs")),
        ("pins", str(tmp_path / "results" / "smallfs"), "--no-coverage"),
    ):
        shown = cli(tmp_path, env, *command)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "Traceback" not in shown.stderr
    assert_no_orphans(tmp_path)
