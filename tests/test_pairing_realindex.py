"""Pairing on the real index (PyPI): a companion's torch requirement is read from the wheel the
cell installs. Reads PyPI (a few dozen small .metadata files); offline it skips, loudly
(tests/conftest.py)."""

from __future__ import annotations

import email.parser
import io
import json
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from torch_matrix.plan.grid import _pair
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.index import PackageIndex, Source
from torch_matrix.world.wheeltarget import WheelTarget

pytestmark = pytest.mark.realwheels

PYPI = "https://pypi.org/simple"
X86_64 = WheelTarget("linux", "x86_64")


def _get(url: str, accept: str = "*/*") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as error:
        pytest.skip(f"PyPI is not reachable here: {error}")


def _x86_64_torch_requirement(files: list[dict], version: str, python: str) -> str | None:
    """What the x86_64 Linux wheel of ``version`` for ``python`` declares on torch, read straight
    from PyPI (not through torch_matrix): ``None`` when there is no such wheel."""
    digits = "cp" + python.replace(".", "")
    for entry in files:
        name = entry["filename"]
        if not name.endswith(".whl"):
            continue
        _, wheel_version, _, tags = parse_wheel_filename(name)
        if str(wheel_version) != version and wheel_version.public != version:
            continue
        if any(t.interpreter == digits and t.platform.endswith("x86_64") for t in tags) and any(
            t.platform.startswith(("manylinux", "linux")) for t in tags
        ):
            if entry.get("core-metadata") or entry.get("dist-info-metadata"):
                text = _get(entry["url"] + ".metadata").decode("utf-8", "replace")
            else:  # the whole wheel, read with zipfile: independent of the range reader
                with zipfile.ZipFile(io.BytesIO(_get(entry["url"]))) as archive:
                    member = next(
                        n for n in archive.namelist() if n.endswith(".dist-info/METADATA")
                    )
                    text = archive.read(member).decode("utf-8", "replace")
            message = email.parser.HeaderParser().parsestr(text)
            for line in message.get_all("Requires-Dist") or []:
                requirement = Requirement(line)
                if requirement.name == "torch" and not requirement.marker:
                    return str(requirement)
            return "torch"
    return None


def _index(tmp_path: Path) -> PackageIndex:
    cache = DiskCache(tmp_path / "cache", 3600)  # a fresh cache: every read goes to PyPI
    return PackageIndex([Source(PYPI, "simple")], cache, target=X86_64)


def test_torchvision_0_11_3_pairs_with_torch_1_10_2_for_an_x86_64_cell(tmp_path):
    _get(f"{PYPI}/torchvision/")  # skips offline
    index = _index(tmp_path)
    requirements = index.requires_dist("torchvision", "0.11.3", pythons=["3.9"])
    assert [str(r) for r in requirements if r.name == "torch"] == ["torch==1.10.2"]
    assert _pair(index, index.versions("torchvision"), {"1.10.2"}, 8, ("3.9",)) == {
        "1.10.2": "0.11.3"
    }


@pytest.mark.parametrize("python", ["3.11"])
def test_the_last_30_torchvision_releases_pair_as_their_x86_64_wheel_declares(tmp_path, python):
    listing = json.loads(_get(f"{PYPI}/torchvision/", "application/vnd.pypi.simple.v1+json"))
    files = [f for f in listing["files"] if not f.get("yanked")]
    index = _index(tmp_path)
    releases = [v for v in index.versions("torchvision") if not v.is_prerelease][-30:]
    assert len(releases) == 30
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = pool.map(lambda v: _x86_64_torch_requirement(files, str(v), python), releases)
        declared = dict(zip((str(v) for v in releases), found))
    compared = {v: d for v, d in declared.items() if d is not None}
    assert len(compared) >= 25, f"too few releases with a cp{python} x86_64 wheel: {declared}"
    read = index.requires_dist_many("torchvision", list(compared), pythons=[python])
    for version, requirement in compared.items():
        ours = [str(r) for r in read[version] if r.name == "torch" and not r.marker]
        assert ours == [requirement], f"torchvision {version}: {ours} != {requirement}"
    # The pairing planning builds: each torch pinned exactly pairs with the newest release
    # whose x86_64 wheel pins it.
    exact: dict[str, str] = {}
    for version in sorted(compared, key=Version, reverse=True):
        specifier = Requirement(compared[version]).specifier
        pins = [s.version for s in specifier if s.operator == "=="]
        if pins:
            exact.setdefault(str(Version(Version(pins[0]).public)), version)
    assert exact, compared
    pairing = _pair(index, releases, set(exact), 8, (python,))
    assert pairing == exact
