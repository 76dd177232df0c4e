"""Per-target bounds over torch 2.3.1 .. 2.15.0 read from PyPI's own wheels by range requests
(``run.targetplan.release_reads`` + ``pins.wheelbounds``): a GTX 1080 gets ``torch<2.8.0`` because
every release from 2.8.0 on was read and lacks sm_6x code, not because one release was tested.
Reads about a megabyte per release from PyPI; offline it skips, loudly (tests/conftest.py)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

import pytest

from torch_matrix.judge.gpus import targets_of
from torch_matrix.pins.wheelbounds import bound_for, releases_in_range
from torch_matrix.run.targetplan import release_reads
from torch_matrix.spec.model import IndexConfig, TorchSelection
from torch_matrix.world.index import open_index

pytestmark = pytest.mark.realwheels

PYPI = "https://pypi.org/simple"
X86_64_LINUX = [
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]


def _reachable() -> None:
    try:
        urllib.request.urlopen(f"{PYPI}/torch/", timeout=20).close()
    except (urllib.error.URLError, OSError) as error:
        pytest.skip(
            f"PYPI NOT REACHABLE: the per-target bounds were not read from real wheels: {error}"
        )


def test_the_bounds_of_four_cards_over_torch_2_3_1_to_2_15_0_read_from_pypi(tmp_path):
    _reachable()
    config = IndexConfig(default=PYPI)
    environ = {"TORCH_MATRIX_CACHE_DIR": os.environ.get("TORCH_MATRIX_BOUNDS_CACHE", str(tmp_path))}
    listed = [str(v) for v in open_index(config, environ=environ).versions("torch")]
    releases = releases_in_range(listed, TorchSelection(explicit=("2.3.1", "2.15.0")))
    assert releases[0] == "2.3.1" and releases[-1] == "2.15.0" and "2.8.0" in releases
    reads = release_reads(config, releases, ["3.11"], environ=environ, platforms=X86_64_LINUX)
    unread = {r: [x.why_not for x in rs if not x.read] for r, rs in reads.by_release.items()}
    assert not any(unread.values()), unread
    targets = targets_of(["GTX 1080", "V100", "A100", "H100"], [])
    bounds = {t.label: bound_for(t, reads.by_release) for t in targets}
    print(
        f"\n{len(releases)} releases ({releases[0]} .. {releases[-1]}), {len(reads.reads)} wheels: "
        f"{reads.bytes_fetched:,} bytes in {reads.requests} requests, {reads.seconds:.1f} s"
    )
    for label, bound in bounds.items():
        print(f"{label}: torch{','.join(bound.specifiers) or ' (no bound)'}")
        for line in bound.proof:
            print(f"    {line}")
    assert bounds["GTX 1080 (sm_61)"].specifiers == ("<2.8.0",)
    assert "(not tested" in bounds["GTX 1080 (sm_61)"].proof[0]
    assert bounds["V100 (sm_70)"].specifiers == ("<2.11.0",)  # Volta left with CUDA 13 (2.11.0)
    assert bounds["A100 (sm_80)"].specifiers == () and bounds["H100 (sm_90)"].specifiers == ()
    cold = reads.bytes_fetched
    if cold:  # a second read is the cache's: no byte fetched
        again = release_reads(config, releases, ["3.11"], environ=environ, platforms=X86_64_LINUX)
        assert again.bytes_fetched == 0
        assert {t.label: bound_for(t, again.by_release) for t in targets} == bounds
