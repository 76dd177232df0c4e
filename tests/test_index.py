"""torch_matrix.world.index against local file:// indexes of tiny wheels, and its disk cache (fake HTTP)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.rangeserver import Ranges
from torch_matrix.edges import console
from torch_matrix.world import indexcache
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.index import IndexUnavailable, PackageIndex, Source, open_index
from torch_matrix.world.listings import parse_html_listing
from torch_matrix.world.wheeltarget import WheelTarget
from torch_matrix.spec.model import IndexConfig


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    tag: str = "py3-none-any",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-{tag}.whl"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", f"__version__ = {version!r}\n")
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(meta) + "\n")
    return path


@pytest.fixture()
def simple_index(tmp_path: Path) -> Path:
    """A PEP 503 directory: <project>/index.html with relative links, one yanked, one pre-release."""
    root = tmp_path / "simple"
    wheels = tmp_path / "files"
    links = {
        "torch": [
            (make_wheel(wheels, "torch", "2.4.1", tag="cp310-cp310-linux_x86_64"), ""),
            (make_wheel(wheels, "torch", "2.5.0"), ' data-yanked="broken"'),
            (make_wheel(wheels, "torch", "2.5.1"), ' data-requires-python="&gt;=3.9"'),
            (make_wheel(wheels, "torch", "2.6.0rc1"), ""),
        ],
        "torchvision": [
            (make_wheel(wheels, "torchvision", "0.20.1", ("torch==2.5.1", "numpy")), "")
        ],
    }
    for project, entries in links.items():
        page = root / project / "index.html"
        page.parent.mkdir(parents=True)
        anchors = "".join(
            f'<a href="../../files/{w.name}#sha256=00"{attrs}>{w.name}</a><br/>'
            for w, attrs in entries
        )
        page.write_text(f"<!DOCTYPE html><html><body>{anchors}</body></html>")
    return root


def local_index(tmp_path: Path, config: IndexConfig) -> PackageIndex:
    return open_index(config, cache_dir=tmp_path / "cache", ttl=3600, environ={})


def test_file_simple_index_lists_versions_skipping_yanked_and_prereleases(tmp_path, simple_index):
    index = local_index(tmp_path, IndexConfig(default=simple_index.as_uri()))
    assert [str(v) for v in index.versions("torch")] == ["2.4.1", "2.5.1"]
    assert [str(v) for v in index.versions("Torch")] == ["2.4.1", "2.5.1"]
    assert index.versions("numpy") == []
    (only,) = index.files("torch", "2.5.1")
    assert only.requires_python == ">=3.9" and only.tags == ("py3-none-any",)
    assert only.url.endswith("/files/torch-2.5.1-py3-none-any.whl") and "#" not in only.url
    assert index.files("torch", "2.4.1")[0].tags == ("cp310-cp310-linux_x86_64",)


def test_prereleases_on_request(tmp_path, simple_index):
    index = open_index(
        IndexConfig(default=simple_index.as_uri()),
        cache_dir=tmp_path / "c",
        environ={},
        prereleases=True,
    )
    assert "2.6.0rc1" in [str(v) for v in index.versions("torch")]


def test_requires_dist_read_from_the_wheel(tmp_path, simple_index):
    index = local_index(tmp_path, IndexConfig(default=simple_index.as_uri()))
    assert [str(r) for r in index.requires_dist("torchvision", "0.20.1")] == [
        "torch==2.5.1",
        "numpy",
    ]
    assert list(index.requires_dist_many("torchvision", ["0.20.1"])) == ["0.20.1"]


def test_find_links_and_extra_sources_combine_as_a_union(tmp_path, simple_index):
    flat = tmp_path / "flat"
    make_wheel(flat, "torch", "2.3.0")
    make_wheel(flat, "torch", "2.5.1+cpu", tag="cp311-cp311-linux_x86_64")
    make_wheel(flat, "numpy", "2.0.0")
    (flat / "README.txt").write_text("not a wheel")
    index = local_index(
        tmp_path, IndexConfig(default=simple_index.as_uri(), find_links=(str(flat),))
    )
    assert [str(v) for v in index.versions("torch")] == ["2.3.0", "2.4.1", "2.5.1", "2.5.1+cpu"]
    # A public version also finds its local-label builds; an exact local one only itself.
    assert len(index.files("torch", "2.5.1")) == 2
    assert [f.filename for f in index.files("torch", "2.5.1+cpu")] == [
        "torch-2.5.1+cpu-cp311-cp311-linux_x86_64.whl"
    ]


def test_missing_find_links_directory_is_a_user_error(tmp_path):
    index = local_index(
        tmp_path,
        IndexConfig(default=(tmp_path / "empty").as_uri(), find_links=(str(tmp_path / "gone"),)),
    )
    with pytest.raises(UserError) as caught:
        index.versions("torch")
    assert "gone" in caught.value.one_line()


def test_html_listing_reads_metadata_attributes():
    html = (
        '<a href="https://f/x/torchvision-0.20.1-py3-none-any.whl#sha256=1" '
        'data-core-metadata="sha256=2" data-requires-python="&gt;=3.8">t</a>'
        '<a href="/x/other-1.0-py3-none-any.whl">o</a>'
    )
    (item,) = parse_html_listing(html, "https://f/simple/torchvision/", "torchvision")
    assert item.has_metadata and item.requires_python == ">=3.8"
    assert item.url == "https://f/x/torchvision-0.20.1-py3-none-any.whl"


class FakeHttp:
    """Answers like PyPI's JSON simple API; counts requests; can be switched off."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.down = False

    def __call__(self, url: str, accept: str):
        self.calls.append(url)
        if self.down:
            raise IndexUnavailable(f"cannot reach {url}: offline")
        if url.endswith(".metadata"):
            return "application/octet-stream", b"Name: torchvision\nRequires-Dist: torch==2.5.1\n"
        if url.endswith("/torchvision/"):
            files = [
                {
                    "filename": "torchvision-0.20.1-cp311-cp311-linux_x86_64.whl",
                    "url": "../../files/torchvision-0.20.1-cp311-cp311-linux_x86_64.whl",
                    "requires-python": ">=3.9",
                    "core-metadata": {"sha256": "00"},
                },
                {
                    "filename": "torchvision-0.19.0-cp311-cp311-linux_x86_64.whl",
                    "url": "x.whl",
                    "yanked": "bad",
                },
            ]
            return "application/vnd.pypi.simple.v1+json", json.dumps({"files": files}).encode()
        return None  # 404: the project is not on this index


def remote(tmp_path: Path, http: FakeHttp, ttl: float = 3600, clock=None) -> PackageIndex:
    cache = DiskCache(tmp_path / "cache", ttl, clock=clock or (lambda: 1000.0))
    return PackageIndex([Source("https://pypi.example/simple", "simple")], cache, fetch=http)


def test_json_api_listing_and_pep658_metadata(tmp_path):
    http = FakeHttp()
    index = remote(tmp_path, http)
    assert list(index.requires_dist_many("torchvision", ["0.20.1"])) == ["0.20.1"]  # cold: fetched
    assert [str(v) for v in index.versions("torchvision")] == ["0.20.1"]
    (item,) = index.files("torchvision", "0.20.1")
    assert item.url == "https://pypi.example/files/torchvision-0.20.1-cp311-cp311-linux_x86_64.whl"
    assert [str(r) for r in index.requires_dist("torchvision", "0.20.1")] == ["torch==2.5.1"]
    assert http.calls[-1] == item.url + ".metadata"
    assert index.versions("nothing-here") == []


def test_warm_cache_makes_no_network_calls(tmp_path):
    http = FakeHttp()
    first = remote(tmp_path, http)
    first.versions("torchvision")
    first.requires_dist("torchvision", "0.20.1")
    cold_calls = len(http.calls)
    second = remote(tmp_path, http)  # a new process: only the disk cache is shared
    assert [str(v) for v in second.versions("torchvision")] == ["0.20.1"]
    assert [str(r) for r in second.requires_dist("torchvision", "0.20.1")] == ["torch==2.5.1"]
    assert [str(r) for r in second.requires_dist_many("torchvision", ["0.20.1"])["0.20.1"]] == [
        "torch==2.5.1"
    ]
    assert len(http.calls) == cold_calls


def test_expired_listing_is_refetched_but_metadata_is_kept_forever(tmp_path):
    http = FakeHttp()
    remote(tmp_path, http).requires_dist("torchvision", "0.20.1")
    later = remote(tmp_path, http, clock=lambda: 1000.0 + 7200)
    http.calls.clear()
    later.requires_dist("torchvision", "0.20.1")
    assert http.calls == ["https://pypi.example/simple/torchvision/"]
    http.calls.clear()
    remote(tmp_path, http, ttl=0).versions("torchvision")  # TTL 0 always refreshes
    assert len(http.calls) == 1


def test_stale_listing_is_used_with_one_warning_when_offline(tmp_path, capsys):
    console._warned.clear()
    http = FakeHttp()
    remote(tmp_path, http).versions("torchvision")
    http.down = True
    stale = remote(tmp_path, http, clock=lambda: 1000.0 + 7 * 3600)
    assert [str(v) for v in stale.versions("torchvision")] == ["0.20.1"]
    assert [str(v) for v in stale.versions("torchvision")] == ["0.20.1"]
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "cached listing of torchvision" in err


def test_nothing_available_names_index_and_project(tmp_path):
    http = FakeHttp()
    http.down = True
    with pytest.raises(UserError) as caught:
        remote(tmp_path, http).versions("torch")
    line = caught.value.one_line()
    assert "https://pypi.example/simple" in line and "'torch'" in line


def test_unreachable_variant_index_degrades_and_is_remembered(tmp_path, capsys):
    console._warned.clear()
    http = FakeHttp()
    http.down = True
    cache = DiskCache(tmp_path / "cache", 3600, clock=lambda: 1000.0)
    variant = PackageIndex(
        [Source("https://torch.example/whl/cu124/", "simple", optional=True)], cache, fetch=http
    )
    assert variant.versions("torch") == []
    assert "warning" in capsys.readouterr().err
    again = PackageIndex(variant.sources, cache, fetch=http)
    assert again.versions("torch") == []
    assert len(http.calls) == 1  # the failure is cached for the TTL: warm runs stay offline


def test_cache_dir_and_ttl_from_environment(tmp_path):
    assert indexcache.default_cache_dir({"TORCH_MATRIX_CACHE_DIR": "/c"}) == Path("/c")
    assert indexcache.default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/torch-matrix")
    assert indexcache.default_ttl({"TORCH_MATRIX_INDEX_TTL": "0"}) == 0
    assert indexcache.default_ttl({}) == 6 * 3600
    with pytest.raises(UserError) as caught:
        indexcache.default_ttl({"TORCH_MATRIX_INDEX_TTL": "soon"})
    assert caught.value.one_line() == (
        "torch-matrix: error: TORCH_MATRIX_INDEX_TTL: 'soon' is not accepted: expected a number "
        "of seconds from 0 to 31622400 (a year; 0 always refetches)"
    )


# ---------------------------------------------------------------- the wheel a cell installs


def test_pairing_reads_the_wheel_for_the_cells_platform_not_the_first_by_name(tmp_path):
    """torchvision 0.11.3 on PyPI: its aarch64 wheel (first by name) declares a bare ``torch``,
    its x86_64 wheels ``torch==1.10.2``. The x86_64 cell pairs by the x86_64 wheel."""
    flat = tmp_path / "flat"
    make_wheel(flat, "torchvision", "0.11.3", ("torch",), tag="cp39-cp39-manylinux2014_aarch64")
    make_wheel(flat, "torchvision", "0.11.3", ("torch==1.10.2",), tag="cp39-cp39-manylinux1_x86_64")
    make_wheel(flat, "torchvision", "0.11.3", ("torch==9.9.9",), tag="cp38-cp38-manylinux1_x86_64")
    cache = DiskCache(tmp_path / "cache", 3600)
    sources = [Source(str(flat), "find-links")]
    x86 = PackageIndex(sources, cache, target=WheelTarget("linux", "x86_64"))
    arm = PackageIndex(sources, cache, target=WheelTarget("linux", "aarch64"))
    mac = PackageIndex(sources, cache, target=WheelTarget("darwin", "arm64"))
    assert [str(r) for r in x86.requires_dist("torchvision", "0.11.3", pythons=["3.9"])] == [
        "torch==1.10.2"
    ]
    # The first of the cell's Pythons that has a wheel decides; another Python its own wheel.
    assert [
        str(r) for r in x86.requires_dist("torchvision", "0.11.3", pythons=["3.12", "3.8"])
    ] == ["torch==9.9.9"]
    assert [str(r) for r in arm.requires_dist("torchvision", "0.11.3")] == ["torch"]
    assert mac.requires_dist("torchvision", "0.11.3") == []  # no wheel it could install


def test_planning_pairs_by_the_x86_64_wheel(tmp_path):
    from torch_matrix.plan.grid import _pair
    from packaging.version import Version

    flat = tmp_path / "flat"
    make_wheel(flat, "torchvision", "0.11.3", ("torch",), tag="cp39-cp39-manylinux2014_aarch64")
    make_wheel(flat, "torchvision", "0.11.3", ("torch==1.10.2",), tag="cp39-cp39-manylinux1_x86_64")
    index = PackageIndex(
        [Source(str(flat), "find-links")],
        DiskCache(tmp_path / "cache", 3600),
        target=WheelTarget("linux", "x86_64"),
    )
    assert _pair(index, [Version("0.11.3")], {"1.10.2"}, 8, ("3.9",)) == {"1.10.2": "0.11.3"}


def _wheel_bytes(tmp_path: Path, requires: tuple[str, ...]) -> tuple[str, bytes]:
    path = make_wheel(tmp_path / "w", "torchvision", "0.11.3", requires, "cp39-cp39-linux_x86_64")
    # Padding after METADATA, as a real wheel's shared libraries are: the read must not need it.
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("torchvision/_C.so", bytes(300_000), zipfile.ZIP_STORED)
    return path.name, path.read_bytes()


def test_metadata_by_range_requests_when_the_index_serves_no_metadata_file(tmp_path):
    name, blob = _wheel_bytes(tmp_path, ("torch==1.10.2", "numpy"))
    url = f"https://files.example/{name}"

    def fetch(wanted: str, accept: str):
        if wanted.endswith("/torchvision/"):
            listing = {"files": [{"filename": name, "url": url}]}
            return "application/vnd.pypi.simple.v1+json", json.dumps(listing).encode()
        assert wanted == url + ".metadata", f"the whole wheel was fetched: {wanted}"
        return None

    fetch_range = Ranges(blob)

    index = PackageIndex(
        [Source("https://pypi.example/simple", "simple")],
        DiskCache(tmp_path / "cache", 3600),
        fetch=fetch,
        fetch_range=fetch_range,
        target=WheelTarget("linux", "x86_64"),
    )
    assert [str(r) for r in index.requires_dist("torchvision", "0.11.3")] == [
        "torch==1.10.2",
        "numpy",
    ]
    assert len(fetch_range.requests) <= 3 and fetch_range.sent < len(blob) / 2, fetch_range.requests


def refuse_ranges(url: str, _span: str):
    from torch_matrix.edges.ranges import RangesUnsupported

    raise RangesUnsupported(f"{url}: answered a range request with HTTP 200")


def test_whole_wheel_only_where_the_server_has_no_ranges(tmp_path):
    name, blob = _wheel_bytes(tmp_path, ("torch==1.10.2",))
    url = f"https://files.example/{name}"
    asked: list[str] = []

    def fetch(wanted: str, accept: str):
        asked.append(wanted)
        if wanted.endswith("/torchvision/"):
            listing = {"files": [{"filename": name, "url": url}]}
            return "application/vnd.pypi.simple.v1+json", json.dumps(listing).encode()
        return ("application/octet-stream", blob) if wanted == url else None

    index = PackageIndex(
        [Source("https://pypi.example/simple", "simple")],
        DiskCache(tmp_path / "cache", 3600),
        fetch=fetch,
        fetch_range=refuse_ranges,
        target=WheelTarget("linux", "x86_64"),
    )
    assert [str(r) for r in index.requires_dist("torchvision", "0.11.3")] == ["torch==1.10.2"]
    assert asked[-2:] == [url + ".metadata", url]


def test_a_cached_file_reads_back_whole_and_a_newer_tools_keys_are_left_out():
    """``DistFile.from_json`` reads a cached listing field by field (issue 46: thousands of files
    in a warm ``nox -l``): every field round-trips, so a field added to DistFile must be read too."""
    import dataclasses

    from torch_matrix.world.listings import DistFile

    values = {
        "filename": "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
        "url": "https://files.example/torch.whl",
        "version": "2.5.1",
        "requires_python": ">=3.9",
        "tags": ("cp311-cp311-manylinux1_x86_64",),
        "yanked": True,
        "has_metadata": True,
        "size": 906_000_000,
    }
    assert set(values) == {f.name for f in dataclasses.fields(DistFile)}
    original = DistFile(**values)
    assert DistFile.from_json({**original.to_json(), "added_later": 1}) == original
    minimal = DistFile.from_json({"filename": "a-1.tar.gz", "url": "u", "version": "1"})
    assert minimal == DistFile("a-1.tar.gz", "u", "1")
