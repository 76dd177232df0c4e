"""Hardware facts read from a wheel before installing: the zip directory parser (edges/zipdir), the
range reader (edges/ranges), the text parsers (judge/wheelbuild), the per-wheel cache and choice
(world/wheelfacts), and `torch-matrix plan`'s cells × targets table against a synthetic index served
over HTTP with (and without) range support."""

from __future__ import annotations

import argparse
import io
import os
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rangeserver import Ranges, serve
from tests.synthetic_wheels import build_index, cuda_config_h, torch_wheel
from torch_matrix.cli import plan as plan_cli
from torch_matrix.edges.ranges import LocalZip, RangeReadError, RemoteZip
from torch_matrix.edges.zipdir import (
    TAIL_BYTES,
    Directory,
    ZipFormatError,
    find_directory,
    member_data,
    parse_directory,
)
from torch_matrix.judge.hardware import Hardware, judge_all
from torch_matrix.judge.gpus import targets_of
from torch_matrix.judge.wheelbuild import arch_flags, torch_build_facts, version_literals
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.listings import DistFile
from torch_matrix.world.wheelfacts import choose_wheel, read_wheel

SEVEN = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"  # PyPI torch 2.2.2 .. 2.7.1
NEW = "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # PyPI torch 2.8.0, 2.9.1


def zip_bytes(
    entries: dict[str, bytes], comment: bytes = b"", method: int = zipfile.ZIP_DEFLATED
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        archive.comment = comment
    return buffer.getvalue()


def read_all(blob: bytes) -> dict[str, bytes]:
    reader = RemoteZip("https://files.example/x.whl", Ranges(blob))
    return {name: reader.read(name) or b"" for name in reader.members()}


# ---------------------------------------------------------------- the zip directory, pure


def test_the_directory_and_members_of_a_zip_as_zipfile_reads_them():
    entries = {"a/version.py": b"x = 1\n", "b/big.bin": bytes(range(256)) * 400, "empty": b""}
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
        blob = zip_bytes(entries, comment=b"a comment at the end", method=method)
        assert read_all(blob) == entries


def test_a_member_is_read_with_a_few_bytes_of_a_large_zip():
    blob = zip_bytes({"torch/version.py": b"cuda = '12.8'\n", "lib/huge.so": bytes(3_000_000)})
    fetch = Ranges(blob)
    reader = RemoteZip("https://files.example/t.whl", fetch)
    assert reader.read("torch/version.py") == b"cuda = '12.8'\n"
    assert reader.read("no/such/member") is None
    assert fetch.sent < TAIL_BYTES + 4096 and fetch.sent == reader.bytes_fetched
    assert fetch.requests[0] == f"bytes=-{TAIL_BYTES}"


def test_a_zip64_archive_is_read_through_its_zip64_end_records():
    entries = {f"f{i}": b"" for i in range(65_536)}  # more entries than a plain end record counts
    entries["torch/version.py"] = b"cuda = None\n"
    blob = zip_bytes(entries, method=zipfile.ZIP_STORED)
    found = find_directory(blob[-TAIL_BYTES:], len(blob) - len(blob[-TAIL_BYTES:]))
    assert isinstance(found, (Directory, int))
    reader = RemoteZip("https://files.example/z.whl", Ranges(blob))
    assert len(reader.members()) == 65_537
    assert reader.read("torch/version.py") == b"cuda = None\n"


def test_not_a_zip_a_truncated_directory_and_a_corrupt_member_say_so():
    with pytest.raises(ZipFormatError, match="end-of-central-directory"):
        find_directory(b"just some bytes" * 10, 0)
    blob = zip_bytes({"m": b"payload" * 50})
    found = find_directory(blob, 0)
    assert isinstance(found, Directory)
    with pytest.raises(ZipFormatError, match="truncated central directory"):
        parse_directory(blob[found.offset : found.offset + found.size - 5])
    with pytest.raises(ZipFormatError, match="corrupt central directory"):
        parse_directory(blob[found.offset : found.offset + found.size] + b"junk!")
    member = parse_directory(blob[found.offset : found.offset + found.size])["m"]
    start, length = member.span()
    assert member_data(member, blob[start : start + length], 10**6) == b"payload" * 50
    with pytest.raises(ZipFormatError, match="truncated"):
        member_data(member, blob[start : start + 40], 10**6)  # the header and a few bytes of data
    with pytest.raises(ZipFormatError, match="no local file header"):
        member_data(member, blob[start + 1 : start + length], 10**6)
    flipped = bytearray(zip_bytes({"m": b"payload" * 50}, method=zipfile.ZIP_STORED))
    flipped[40] ^= 0xFF  # a byte of the stored data: the CRC no longer matches
    with pytest.raises(RangeReadError, match="CRC-32"):
        read_all(bytes(flipped))


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=30),
        st.binary(max_size=3000),
        min_size=1,
        max_size=12,
    ),
    st.binary(max_size=200),
)
def test_any_zip_reads_the_same_by_ranges_as_with_zipfile(
    entries: dict[str, bytes], comment: bytes
):
    assert read_all(zip_bytes(entries, comment)) == entries


# ---------------------------------------------------------------- the build's files, pure


def test_version_py_is_read_without_running_it():
    text = (
        "from typing import Optional\n__version__ = '2.8.0+cu128'\ndebug = False\n"
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\nimport os\nx = os.getcwd()\n"
    )
    assert version_literals(text) == {
        "__version__": "2.8.0+cu128",
        "debug": False,
        "cuda": "12.8",
        "hip": None,
    }
    assert version_literals("def (") == {}


def test_the_gencode_flags_become_the_arch_list_as_torch_reports_it():
    real_2_8 = (
        '#define NVCC_FLAGS_EXTRA "-gencode;arch=compute_70,code=sm_70;-gencode;arch=compute_75,'
        "code=sm_75;-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_86,code=sm_86;"
        "-gencode;arch=compute_90,code=sm_90;-gencode;arch=compute_100,code=sm_100;"
        '-gencode;arch=compute_120,code=sm_120"'
    )
    assert arch_flags(real_2_8) == NEW
    ptx = '#define NVCC_FLAGS_EXTRA "-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_90,code=[sm_90,compute_90]"'
    assert arch_flags(ptx) == "sm_80 sm_90 compute_90"
    assert arch_flags(cuda_config_h(SEVEN)) == SEVEN
    assert arch_flags("#define AT_CUDNN_ENABLED() 1\n") is None
    assert arch_flags('#define NVCC_FLAGS_EXTRA ""') is None


def test_a_build_record_from_the_wheel_files_or_why_not():
    cuda = torch_build_facts("__version__ = '2.8.0+cu128'\ncuda = '12.8'\n", cuda_config_h(NEW))
    assert cuda["torch_cuda"] == "12.8" and cuda["arch_list"] == NEW.split() and "error" not in cuda
    cpu = torch_build_facts("__version__ = '2.13.0+cpu'\ncuda = None\n", None)
    assert cpu["torch_cuda"] is None and "error" not in cpu
    assert judge_all(cpu, targets_of(["V100"], []))[0].verdict == Hardware.NO_CUDA
    old = torch_build_facts("__version__ = '1.8.0'\ncuda = '11.1'\n", "#define X 1\n", "t.whl")
    assert "records no -gencode flags" in old["error"] and "t.whl" in old["error"]
    assert judge_all(old, targets_of(["V100"], [])) == ()  # nothing judged: the install reads it
    assert "no torch/version.py" in torch_build_facts(None, None)["error"]


# ---------------------------------------------------------------- choice and cache


def dist(filename: str, url: str = "") -> DistFile:
    name, version = filename.split("-")[:2]
    return DistFile(
        filename,
        url or f"https://files.example/{filename}",
        version,
        tags=(filename[:-4].split("-", 2)[2],),
    )


def test_the_wheel_an_installer_picks_for_the_python_and_platform():
    files = [
        dist("torch-2.8.0-cp310-cp310-manylinux_2_28_x86_64.whl"),
        dist("torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
        dist("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
        dist("torch-2.8.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"),
        dist("torch-2.8.0-cp311-none-macosx_11_0_arm64.whl"),
    ]
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "linux_x86_64"]
    assert choose_wheel(files, "3.11", platforms).filename == files[2].filename
    assert choose_wheel(files, "3.11", platforms, "cpu").filename == files[3].filename
    assert choose_wheel(files, "3.12", platforms) is None
    assert choose_wheel([dist("torch-2.1.0-py3-none-any.whl")], "3.11", platforms) is not None


def test_a_wheel_is_read_once_then_from_the_cache(tmp_path):
    wheel = torch_wheel("2.7.1", cuda="12.6", arch_flags=SEVEN, build_version="2.7.1+cu126")
    blob = (build_index(tmp_path / "i", [wheel]).wheels[0]).read_bytes()
    fetch = Ranges(blob)
    cache = DiskCache(tmp_path / "cache", ttl=0)
    item = dist("torch-2.7.1-py3-none-any.whl")
    first = read_wheel(item, cache, fetch)
    assert first.how == "range requests" and not first.fallback
    assert first.facts["arch_flags"] == SEVEN and first.facts["torch"] == "2.7.1+cu126"
    assert 0 < first.bytes_fetched == fetch.sent < len(blob) + 1
    again = read_wheel(item, cache, fetch)
    assert again.how == "cache" and again.facts == first.facts and fetch.sent == first.bytes_fetched


# ---------------------------------------------------------------- `torch-matrix plan`, served


@pytest.fixture(scope="module")
def hw_index(tmp_path_factory):
    """PyPI's shape: torch 2.7.1 (CUDA 12.6, sm_50..sm_90), 2.8.0 (12.8, sm_70..sm_120) and a CPU one."""
    root = tmp_path_factory.mktemp("hw-index")
    return build_index(
        root,
        [
            torch_wheel("2.7.1", cuda="12.6", arch_flags=SEVEN, build_version="2.7.1+cu126"),
            torch_wheel("2.8.0", cuda="12.8", arch_flags=NEW, build_version="2.8.0+cu128"),
            torch_wheel("2.9.0", build_version="2.9.0+cpu"),
        ],
    )


def plan_spec(tmp_path: Path, index_url: str) -> Path:
    spec = tmp_path / "matrix.toml"
    spec.write_text(
        f'name = "hw"\npython = ["current"]\ntorch = ["2.7.1", "2.8.0", "2.9.0"]\n'
        f'torchvision = "none"\n[index]\ndefault = "{index_url}"\n'
        '[targets]\ngpus = ["GTX 1080", "RTX 5090"]\ndrivers = ["580.82.07"]\n'
    )
    return spec


def run_plan(tmp_path: Path, spec: Path, as_json: bool = False) -> str:
    """``torch-matrix plan`` with a cache of this test's own and no find-links from the machine."""
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "TORCH_MATRIX"))
    }
    environ["TORCH_MATRIX_CACHE_DIR"] = str(tmp_path / "cache")
    out = io.StringIO()
    args = argparse.Namespace(spec=str(spec), json=as_json, shard=None, shards=None)
    assert plan_cli.main(args, out=out, environ=environ) == 0
    return out.getvalue()


def test_plan_prints_the_verdicts_read_from_the_wheels_by_range_requests(tmp_path, hw_index):
    with serve(hw_index.root) as served:
        spec = plan_spec(tmp_path, f"{served.url}/simple")
        out = run_plan(tmp_path, spec)
        wheel_bytes = served.sent(".whl")
        total = sum(p.stat().st_size for p in hw_index.wheels)
        assert all(
            r for p, r, _n in served.log if p.endswith(".whl")
        )  # every wheel read is a range
        assert 0 < wheel_bytes
        rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("t2.")}
        table = out.split("verdicts read from the wheels before installing", 1)[1]
        assert "3 wheel(s) read" in table
        by_cell = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
        line_271, line_280, line_290 = (by_cell[c] for c in rows)
        assert "2.7.1+cu126" in line_271 and SEVEN in line_271
        assert line_271.split(SEVEN)[1].split() == ["native", "✗", "no", "kernel", "image"]
        assert line_280.split(NEW)[1].split() == ["✗", "no", "kernel", "image", "native"]
        assert "– no CUDA" in line_290 and rows
        served.log.clear()
        again = run_plan(tmp_path, spec, as_json=True)
        assert served.sent(".whl") == 0  # the cache answers: no wheel byte fetched again
        entries = {e["id"].split("-")[0]: e["hardware"] for e in json.loads(again)}
        assert entries["t2.8.0"]["read_from"] == "wheel"
        assert [v["verdict"] for v in entries["t2.8.0"]["verdicts"]] == [
            "no-kernel-image",
            "native",
        ]
    assert wheel_bytes <= total  # (tiny synthetic wheels: a real one costs ~1 MB of its ~900)


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ({"ranges": False}, "does not serve ranges"),  # answers 200 with the whole file
        ({"refuse": True}, "refused a range request (HTTP 416)"),
    ],
)
def test_a_server_without_ranges_falls_back_to_the_installed_build_and_says_so(
    tmp_path, hw_index, mode, said
):
    with serve(hw_index.root, **mode) as served:
        out = run_plan(tmp_path, plan_spec(tmp_path, f"{served.url}/simple"))
        wheel_requests = [path for path, _r, _n in served.log if path.endswith(".whl")]
        assert wheel_requests and len(wheel_requests) == len(set(wheel_requests))
        # at most one request per wheel: its 200 answer is closed unread, never fetched again whole
    assert "judged from the installed build instead" in out
    assert said in out and "verdicts read from the wheels" not in out
    for cell in ("t2.7.1", "t2.8.0"):  # each cell named with the reason
        assert any(line.strip().startswith(cell) and said in line for line in out.splitlines())


def test_a_file_index_reads_the_member_directly(tmp_path, hw_index):
    out = run_plan(tmp_path, plan_spec(tmp_path, hw_index.url))
    assert "3 wheel(s) read, 0.0 MB fetched" in out and "native" in out
    local = LocalZip(hw_index.wheels[0])
    assert local.read("torch/version.py") is not None and local.bytes_fetched == 0


def test_the_other_builds_of_a_release_are_read_from_their_own_wheels_for_the_advice(tmp_path):
    """The pins' advice reads each CUDA build torch's table names from the variant index: the one
    that exists is read (its arch list from its wheel), the one that does not is left out."""
    import dataclasses

    from tests.factories import make_cell, make_result
    from torch_matrix.run.targetplan import sibling_builds
    from torch_matrix.spec.model import IndexConfig

    index = build_index(
        tmp_path / "pytorch",
        [torch_wheel("2.13.0+cu126", cuda="12.6", arch_flags=SEVEN)],
    )
    (index.root / "cu126").symlink_to(index.simple_dir)  # <pytorch>/cu126/torch/ -> the listing
    result = make_result(make_cell(torch="2.13.0", torchvision="", python="3.11"))
    build = {
        "torch": "2.13.0+cu130",
        "torch_cuda": "13.0",
        "arch_flags": "sm_75 sm_80",
        "release_variants_code_cc": {"12.6": {"any": [50, 60, 70]}, "12.8": {"any": [70, 80]}},
    }
    target = {"target": "V100 (sm_70)", "verdict": "no-kernel-image", "reason": "no sm_70"}
    result = dataclasses.replace(result, gpu={"build": build}, targets=(target,))
    with serve(index.root) as served:
        config = IndexConfig(pytorch=served.url)
        environ = {"TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache")}
        found = sibling_builds([result], config, environ, platforms=["any"])
        assert [p for p, r, _n in served.log if p.endswith(".whl") and not r] == []
    assert list(found) == ["2.13.0"] and list(found["2.13.0"]) == ["cu126"]  # no cu128 build
    assert found["2.13.0"]["cu126"]["arch_flags"] == SEVEN
    fine = dataclasses.replace(result, targets=({**target, "verdict": "native"},))
    assert sibling_builds([fine], IndexConfig(pytorch="http://127.0.0.1:9"), {}) == {}
