"""What a run costs, said before it starts (issue #32): sizes as people write them, the wheels a
cell installs resolved from the index with their download and unpacked sizes, what uv's cache
holds already, the plan's totals and peak, the follow-up budget, the disk budget's refusal."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix import cli
from torch_matrix.plan.cost import (
    UNPACK_BOUND,
    VENV_OVERHEAD,
    PlanCost,
    Wheel,
    WheelSet,
    cell_cost,
    does_not_fit,
    order_by_line,
    summary_lines,
)
from torch_matrix.plan.followups import DEFAULT_CAP, cap_from
from torch_matrix.run.disk import BUDGET_ENV, budget_of, refuse_unless_fits
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.sizes import format_size, parse_size
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.index import PackageIndex, Source
from torch_matrix.spec.parse import parse_spec
from torch_matrix.world.wheelset import cached_wheels, cell_wheels, wheel_facts
from tests.factories import make_cell
from tests.synthetic_wheels import WheelSpec, build_index, torch_wheel

GB = 1000**3


# ---------------------------------------------------------------- sizes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15GB", 15 * GB),
        ("15 gb", 15 * GB),
        ("1.5GiB", int(1.5 * 1024**3)),
        ("500MB", 500 * 1000**2),
        ("2000000", 2_000_000),
        (12, 12),
        ("0", 0),
    ],
)
def test_sizes_are_read_as_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "15 parsecs", "-3GB", "nan", "1e400GB", True, "1e30"])
def test_a_bad_size_names_what_is_wrong(text):
    with pytest.raises(ValueError) as caught:
        parse_size(text)
    assert str(caught.value)


@given(st.integers(min_value=0, max_value=10**15))
def test_a_formatted_size_reads_back_within_its_rounding(count):
    text = format_size(count)
    back = parse_size(text.replace(" ", ""))
    assert abs(back - count) <= max(count * 0.05, 1)  # one decimal of two or three digits


def test_sizes_are_printed_short():
    assert format_size(4_100_000_000) == "4.1 GB"
    assert format_size(730_000_000) == "730 MB"
    assert format_size(512) == "512 B"


# ---------------------------------------------------------------- zip reading


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_the_unpacked_size_and_requires_dist_come_from_the_directory_and_metadata_alone(
    compression, tmp_path
):
    """Through the one range reader (edges/ranges): the directory and METADATA, never the
    300 KB member; a host without ranges leaves both unknown."""
    from tests.rangeserver import Ranges
    from torch_matrix.edges.ranges import RangesUnsupported
    from torch_matrix.world.listings import DistFile

    members = {
        "pkg/a.so": bytes(range(256)) * 1200,
        "pkg/b.py": b"x = 1\n" * 5000,
        "pkg-1.0.dist-info/METADATA": b"Name: pkg\nRequires-Dist: numpy>=1\n",
    }
    blob = _zip(members, compression)
    fetch = Ranges(blob)

    item = DistFile(
        "pkg-1.0-py3-none-any.whl", "https://files.example/pkg.whl", "1.0", size=len(blob)
    )
    index = PackageIndex([], DiskCache(tmp_path / "cache", 3600))
    unpacked, requires = wheel_facts(item, index, fetch)
    assert unpacked == sum(len(v) for v in members.values()) and requires == ["numpy>=1"]
    if compression == zipfile.ZIP_STORED:  # the 300 KB member itself was never fetched
        assert fetch.sent < len(blob) - 200_000 and len(blob) > 300_000

    def refuse(_url: str, _wanted: str) -> tuple[int, bytes, int]:
        raise RangesUnsupported("files.example answered a range request with HTTP 200")

    other = DistFile("pkg-1.0-py3-none-any.whl", "https://files.example/other.whl", "1.0", size=9)
    assert wheel_facts(other, index, refuse) == (None, None)


# ---------------------------------------------------------------- resolution


def _index(tmp_path: Path, specs: list[WheelSpec]) -> PackageIndex:
    built = build_index(tmp_path / "index", specs)
    return PackageIndex([Source(built.url, "simple")], DiskCache(tmp_path / "cache", 3600))


def _wheels() -> list[WheelSpec]:
    big = torch_wheel(
        "2.1.0",
        requires_dist=(
            "numpy>=1.20",
            'nvidia-fake-cu12==1.0; platform_system == "Linux"',
            'pywin-only; sys_platform == "win32"',
            "optional-thing; extra == 'opt'",
        ),
    )
    return [
        big,
        WheelSpec("numpy", "1.26.0", {"numpy/__init__.py": "x" * 1000}),
        WheelSpec("numpy", "2.0.0", {"numpy/__init__.py": "y" * 2000}),
        # newer, but not for Python 3.11: uv takes 2.0.0 (networkx 3.7 vs 3.6.1 on a real run)
        WheelSpec("numpy", "2.1.0", {"numpy/__init__.py": "z"}, requires_python=">=3.12"),
        WheelSpec("nvidia-fake-cu12", "1.0", {"nvidia/lib.so": "\0" * 50_000}),
        WheelSpec("nvidia-fake-cu12", "2.0", {"nvidia/lib.so": "\0" * 90_000}),
    ]


def test_a_cell_takes_the_newest_matching_wheels_with_their_dependencies(tmp_path):
    index = _index(tmp_path, _wheels())
    found = cell_wheels(["torch==2.1.0"], lambda _name: index, "3.11")
    names = {w.project: w for w in found.wheels}
    assert sorted(names) == ["numpy", "nvidia-fake-cu12", "torch"]  # markers evaluated here
    assert names["numpy"].version == "2.0.0"
    assert names["nvidia-fake-cu12"].version == "1.0"  # its pin, not the newest
    files = {p.name: p for p in (tmp_path / "index" / "files").glob("*.whl")}
    for wheel in found.wheels:
        assert wheel.size == files[wheel.filename].stat().st_size
        with zipfile.ZipFile(files[wheel.filename]) as archive:
            assert wheel.unpacked == sum(i.file_size for i in archive.infolist())
    assert found.unknown == ()


def test_what_cannot_be_resolved_is_named_not_guessed(tmp_path):
    specs = [w for w in _wheels() if w.name != "numpy"]
    index = _index(tmp_path, specs)
    found = cell_wheels(["torch==2.1.0"], lambda _name: index, "3.11")
    assert any(line.startswith("numpy>=1.20: no wheel") for line in found.unknown)
    cost = cell_cost("c", "default", found, ())
    assert not cost.exact and "+?" in __import__("torch_matrix.plan.cost").plan.cost.cell_note(cost)


def test_uvs_cache_entries_are_recognised_whichever_index_they_came_from(tmp_path):
    cache = tmp_path / "uv"
    (cache / "wheels-v8" / "pypi" / "numpy").mkdir(parents=True)
    (cache / "archive-v0" / "AB12").mkdir(parents=True)
    (cache / "wheels-v8" / "pypi" / "numpy" / "2.0.0-py3-none-any").symlink_to(
        "../../../archive-v0/AB12"
    )
    (cache / "wheels-v8" / "pypi" / "numpy" / "1.26.0-py3-none-any").symlink_to("../../gone")
    (cache / "wheels-v8" / "index" / "abc" / "nvidia-fake-cu12" / "1.0-py3-none-any").mkdir(
        parents=True
    )
    names = [
        "numpy-2.0.0-py3-none-any.whl",
        "numpy-1.26.0-py3-none-any.whl",
        "nvidia_fake_cu12-1.0-py3-none-any.whl",
    ]
    assert cached_wheels(cache, names) == {names[0], names[2]}  # a dangling link is not a wheel
    assert cached_wheels("", names) == set()
    assert cached_wheels(tmp_path / "nothing", names) == set()


# ---------------------------------------------------------------- the plan's cost


def _cost(budget: int = 100 * GB, cached: tuple[str, ...] = ()) -> PlanCost:
    shared = Wheel("numpy", "2.0", "numpy.whl", 10 * 1000**2, 30 * 1000**2)
    a = WheelSet((Wheel("torch", "2.3", "torch-a.whl", GB, 2 * GB), shared))
    b = WheelSet((Wheel("torch", "2.4", "torch-b.whl", 2 * GB, None), shared))
    return PlanCost(
        cells=(cell_cost("a", "default", a, cached), cell_cost("b", "default", b, cached)),
        followup_cap=3,
        budget=budget,
        budget_origin="the spec's disk_budget",
    )


def test_a_wheel_two_cells_share_is_downloaded_once_and_the_cache_is_subtracted():
    cost = _cost()
    assert cost.download == GB + 2 * GB + 10 * 1000**2
    assert _cost(cached=("torch-a.whl",)).download == 2 * GB + 10 * 1000**2
    assert cost.cells[0].download == GB + 10 * 1000**2
    # an unreadable directory is bounded, and the plan says it is a bound
    assert cost.cells[1].disk == int(2 * GB * UNPACK_BOUND) + 30 * 1000**2 + VENV_OVERHEAD
    assert not cost.exact
    assert "upper bound" in summary_lines(cost)[0]
    assert cost.peak == cost.cache_growth + VENV_OVERHEAD
    assert cost.peak_in_budget == cost.cells[1].new_disk
    assert cost.followup_bytes == 3 * cost.cells[1].size
    data = json.loads(json.dumps(cost.to_json()))
    assert data["download_bytes"] == cost.download and data["followups"]["cap"] == 3


def test_a_budget_smaller_than_the_largest_cell_refuses_with_the_figure_and_the_fix():
    refuse_unless_fits(_cost())
    with pytest.raises(UserError) as caught:
        refuse_unless_fits(_cost(budget=3 * GB))
    line = caught.value.one_line()
    assert "the largest cell, b, needs 6.1 GB of disk; the budget is 3.0 GB" in line
    assert 'disk_budget = "7.0 GB"' in caught.value.hint


def test_a_cell_that_cannot_fit_says_how_much_it_needs_and_what_is_left():
    assert does_not_fit("c1", 4_100_000_000, 2_300_000_000).startswith(
        "c1: not run: needs 4.1 GB of disk, budget 2.3 GB left"
    )


def test_cells_sharing_a_cuda_line_run_together():
    cells = [make_cell(torch=v, variant=x) for v, x in [("2.1.0", "cu121"), ("2.2.0", "cu118")]]
    cells.append(make_cell(torch="2.3.0", variant="cu121"))
    ordered = order_by_line(cells, lambda c: c.variant)
    assert [c.variant for c in ordered] == ["cu121", "cu121", "cu118"]


def test_the_planned_grid_runs_a_variants_cells_together_and_an_include_with_its_release():
    """Wired: the grid a run takes (``plan.grid.plan_cells``) is in ``run_order``. Without it,
    two CUDA variants alternate release by release (each switch fetches the other line again under
    a budget) and an ``include`` runs last, after its release's line was evicted."""
    from tests.test_plan import PYS, facts, spec

    from torch_matrix.plan.grid import plan_cells

    text = (
        'torch = ["2.5.1", "2.4.1"]\npython = ["3.10", "3.11"]\nvariant = ["cu118", "cu121"]\n'
        'torchvision = "none"\n'
        '[[include]]\npython = "3.8"\ntorch = "2.5.1"\nvariant = "cu118"\n'
    )
    versions = ("2.4.1", "2.5.1")
    found = facts(torch_versions={"default": versions, "cu118": versions, "cu121": versions})
    cells = plan_cells(spec(text), found, PYS)
    assert [(c.variant, c.torch, c.python) for c in cells] == [
        ("cu118", "2.5.1", "3.10"),
        ("cu118", "2.5.1", "3.11"),
        ("cu118", "2.5.1", "3.8"),
        ("cu118", "2.4.1", "3.10"),
        ("cu118", "2.4.1", "3.11"),
        ("cu121", "2.5.1", "3.10"),
        ("cu121", "2.5.1", "3.11"),
        ("cu121", "2.4.1", "3.10"),
        ("cu121", "2.4.1", "3.11"),
    ]


@given(
    st.lists(
        st.tuples(st.sampled_from(["default", "cu118", "cu121", "cpu"]), st.sampled_from("abc")),
        max_size=12,
    )
)
def test_run_order_is_a_permutation_keeping_each_line_and_release_contiguous(axes):
    from torch_matrix.plan.cost import run_order

    cells = [
        make_cell(torch=torch, variant=variant, id=f"c{n}")
        for n, (variant, torch) in enumerate(axes)
    ]
    ordered = run_order(cells)
    assert sorted(c.id for c in ordered) == sorted(c.id for c in cells)

    def contiguous(key) -> bool:
        keys = [key(c) for c in ordered]
        return all(
            keys.index(k) + keys.count(k) - 1 == len(keys) - 1 - keys[::-1].index(k) for k in keys
        )

    assert contiguous(lambda c: c.variant)
    assert contiguous(lambda c: (c.variant, c.torch))
    for key in {(c.variant, c.torch) for c in cells}:  # a release's cells keep their order
        assert [c.id for c in ordered if (c.variant, c.torch) == key] == [
            c.id for c in cells if (c.variant, c.torch) == key
        ]


# ---------------------------------------------------------------- settings


def test_followups_and_disk_budget_are_spec_keys_and_the_variables_win(tmp_path):
    spec = parse_spec('followups = 4\ndisk_budget = "15GB"\n')
    assert spec.followups == 4 and spec.disk_budget == 15 * GB
    assert cap_from({}, spec.followups) == 4
    assert cap_from({"TORCH_MATRIX_FOLLOWUPS": "7"}, spec.followups) == 7
    assert cap_from({}, None) == DEFAULT_CAP
    assert budget_of(spec, {}, tmp_path) == (15 * GB, "the spec's disk_budget")
    assert budget_of(spec, {BUDGET_ENV: "2GB"}, tmp_path)[0] == 2 * GB
    free = budget_of(parse_spec(""), {}, tmp_path, free=lambda _p: 80 * GB)
    assert free[0] == 75 * GB and "less 5.0 GB" in free[1]
    small = budget_of(parse_spec(""), {}, tmp_path, free=lambda _p: 14 * GB)
    assert small[0] == 14 * GB - 14 * GB // 10  # a small disk keeps a tenth free
    with pytest.raises(UserError) as caught:
        budget_of(spec, {BUDGET_ENV: "lots"}, tmp_path)
    assert caught.value.where == BUDGET_ENV


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("followups = -1", "followups"),
        ('followups = "4"', "followups"),
        ("followups = true", "followups"),
        ('disk_budget = "15 parsecs"', "disk_budget"),
        ("disk_budget = [1]", "disk_budget"),
    ],
)
def test_a_bad_followups_or_disk_budget_is_one_line_naming_the_key(text, key):
    with pytest.raises(UserError) as caught:
        parse_spec(text)
    assert key in caught.value.one_line()
    assert f"torch-matrix help spec {key}" in caught.value.hint


# ---------------------------------------------------------------- the command


def _project(tmp_path: Path, extra: str = "") -> Path:
    index = build_index(tmp_path / "index", _wheels())
    project = tmp_path / "project"
    project.mkdir()
    (project / "matrix.toml").write_text(
        f'torch = ["2.1.0"]\ntorchvision = "none"\nfollowups = 2\n{extra}\n'
        f'[index]\ndefault = "{index.url}"\nextra = []\nfind_links = []\n'
    )
    return project


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "TORCH_MATRIX_CACHE_DIR": str(tmp_path / "tmcache"),
        "UV_CACHE_DIR": str(tmp_path / "uvcache"),
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }


def test_plan_prints_each_cells_bytes_the_total_the_peak_and_the_followup_budget(
    tmp_path, monkeypatch, capsys
):
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    for name, value in _env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCH_MATRIX_FOLLOWUPS", raising=False)
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert cli.main(["plan"]) == 0
    out = capsys.readouterr().out
    assert "download" in out.splitlines()[1]
    assert "  download: " in out and "for 1 cell(s), each wheel once" in out
    assert "disk at the peak: " in out
    assert "follow-up cells: at most 2 " in out
    assert cli.main(["plan", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    files = sorted((tmp_path / "index" / "files").glob("*.whl"))
    wanted = {"torch", "numpy", "nvidia-fake-cu12"}
    sizes = {p.name: p.stat().st_size for p in files}
    assert entry["cost"]["download_bytes"] == sum(
        sizes[w["filename"]] for w in entry["cost"]["wheels"]
    )
    assert {w["project"] for w in entry["cost"]["wheels"]} == wanted
    assert entry["cost"]["exact"] is True


def test_plan_refuses_a_budget_that_cannot_hold_the_largest_cell(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path, 'disk_budget = "1kB"')
    monkeypatch.chdir(project)
    for name, value in _env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert cli.main(["plan"]) == 2
    captured = capsys.readouterr()
    assert "disk budget: 1.0 kB (the spec's disk_budget)" in captured.out
    assert "the disk budget cannot hold this run: the largest cell" in captured.err
    assert "hint:" in captured.err and "Traceback" not in captured.err
    assert cli.main(["plan", "--no-cost"]) == 0


# ---------------------------------------------------------------- keeping the budget


def _uv_cache(root: Path, filenames: list[str], size: int = 1000) -> None:
    """A uv cache holding ``filenames`` the way uv lays them out (link -> unpacked archive)."""
    first = len(list((root / "archive-v0").glob("A*")))  # a second call adds to the cache
    for number, filename in enumerate(filenames, start=first):
        name, _sep, rest = filename[: -len(".whl")].partition("-")
        archive = root / "archive-v0" / f"A{number}"
        archive.mkdir(parents=True)
        (archive / "payload.so").write_bytes(b"\0" * size)
        entry = root / "wheels-v8" / "pypi" / name.replace("_", "-") / rest
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(archive)
        entry.with_name(rest + ".msgpack").write_bytes(b"m")


def _keeper(tmp_path: Path, budget: int, free: int = 100 * GB):
    from torch_matrix.run.disk import Keeper, Ledger

    lines: list[str] = []
    keeper = Keeper(
        budget,
        "the spec's disk_budget",
        str(tmp_path / "uv"),
        Ledger(tmp_path / "results" / "ledger.json"),
        log=lines.append,
        free=lambda _p: free,
    )
    return keeper, lines


def _cell_cost(cell_id: str, *names: str, disk: int = 2 * GB):
    wheels = tuple(Wheel(n.split("-")[0], "1", n, disk // 2, disk) for n in names)
    return cell_cost(cell_id, "default", WheelSet(wheels), ())


def test_the_run_evicts_only_what_it_fetched_and_no_later_cell_needs(tmp_path):
    user = "userpkg-1.0-py3-none-any.whl"
    _uv_cache(tmp_path / "uv", [user])
    keeper, lines = _keeper(tmp_path, budget=5 * GB)
    keeper.start({n: 2 * GB for n in [user, "a-1-py3-none-any.whl", "b-1-py3-none-any.whl"]})
    first = _cell_cost("one", "a-1-py3-none-any.whl", "shared-1-py3-none-any.whl")
    assert keeper.room(first, {"shared-1-py3-none-any.whl"}) == ""
    # the install fetches its wheels:
    for number, name in enumerate(["a-1-py3-none-any.whl", "shared-1-py3-none-any.whl"]):
        archive = tmp_path / "uv" / "archive-v0" / f"N{number}"
        archive.mkdir(parents=True)
        entry = tmp_path / "uv" / "wheels-v8" / "pypi" / name.split("-")[0] / "1-py3-none-any"
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(archive)
    keeper.record(first)
    assert keeper.used() == 4 * GB
    second = _cell_cost("two", "b-1-py3-none-any.whl", "shared-1-py3-none-any.whl")
    # b needs 2 GB more: 4 + 2 > 5, so a (fetched by the run, needed by no later cell) goes
    assert keeper.room(second, set()) == ""
    assert "evicted 2.0 GB" in lines[-1]
    assert list((tmp_path / "uv" / "wheels-v8" / "pypi" / "a").iterdir()) == []
    assert not (tmp_path / "uv" / "archive-v0" / "N0").exists()
    assert (tmp_path / "uv" / "archive-v0" / "N1").exists()  # shared: this cell needs it
    assert (tmp_path / "uv" / "archive-v0" / "A0" / "payload.so").exists()  # the user's
    assert keeper.used() == 2 * GB
    # the prefetch fetches a cell ahead only where the budget holds it
    assert keeper.ahead(_cell_cost("three", "b-1-py3-none-any.whl")) == ""
    assert keeper.ahead(_cell_cost("four", "d-1-py3-none-any.whl", "e-1-py3-none-any.whl")) == (
        "not ahead of its turn: needs 4.0 GB, the disk budget has 3.0 GB left"
    )


def test_a_cell_that_cannot_fit_is_named_with_its_need_and_what_is_left(tmp_path):
    keeper, _lines = _keeper(tmp_path, budget=3 * GB)
    big = _cell_cost("big", "a-1-py3-none-any.whl", "b-1-py3-none-any.whl")
    why = keeper.room(big, set())
    assert why.startswith("big: not run: needs 4.0 GB of disk, budget 3.0 GB left (no evidence")
    full, _ = _keeper(tmp_path, budget=50 * GB, free=3 * GB)
    # a disk keeps a tenth of its free space (at most 1 GB) free beyond the cell's need
    short = full.room(big, set())
    assert "needs 4.0 GB of disk, the disk has 2.7 GB left (no evidence; raise disk_budget" in short
    assert _keeper(tmp_path, budget=50 * GB)[0].room(big, set()) == ""


@pytest.mark.parametrize(
    ("free", "floor"), [(100 * GB, GB), (10 * GB, GB), (3 * GB, 3 * GB // 10), (0, 0), (-1, 0)]
)
def test_a_small_disk_keeps_a_tenth_of_its_free_space_free_a_large_one_1_gb(free, floor):
    from torch_matrix.run.disk import free_floor

    assert free_floor(free) == floor


def test_a_disk_short_of_room_evicts_what_the_run_fetched_even_within_the_budget(tmp_path):
    keeper, lines = _keeper(tmp_path, budget=50 * GB, free=3 * GB)
    fetched = "a-1-py3-none-any.whl"
    keeper.start({fetched: 2 * GB})
    archive = tmp_path / "uv" / "archive-v0" / "N0"
    archive.mkdir(parents=True)
    entry = tmp_path / "uv" / "wheels-v8" / "pypi" / "a" / "1-py3-none-any"
    entry.parent.mkdir(parents=True)
    entry.symlink_to(archive)
    assert keeper.used() == 2 * GB  # well within the budget of 50 GB
    keeper.room(_cell_cost("next", "b-1-py3-none-any.whl", disk=4 * GB), set())
    assert "evicted 2.0 GB" in lines[-1] and keeper.used() == 0


def test_a_cells_venv_is_removed_once_written_unless_asked_to_keep(tmp_path):
    from torch_matrix.run.disk import KEEP_ENV, remove_venv

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    lines: list[str] = []
    remove_venv(venv, {KEEP_ENV: "1"}, lines.append)
    assert venv.is_dir() and lines == []
    remove_venv(venv, {}, lines.append)
    assert not venv.exists() and "KEEP_VENVS=1 keeps it" in lines[0]
    other = tmp_path / "not-a-venv"
    other.mkdir()
    remove_venv(other, {}, lines.append)
    assert other.is_dir()  # never a directory that is not a venv


# ---------------------------------------------------------------- the cause first

ENOSPC_OUTPUT = """\
Resolved 24 packages in 1.20s
   Building toyproj @ file:///home/me/toyproj
Downloading nvidia-cusolver-cu12 (191.6MiB)
Downloading torch (750.1MiB)
      Built toyproj @ file:///home/me/toyproj
error: Failed to install: nvidia_cusolver_cu12-11.4.5.107-py3-none-manylinux1_x86_64.whl
  Caused by: failed to write to file `/venv/lib/python3.11/site-packages/nvidia/libcusolver.so.11`: No space left on device (os error 28)
"""


def test_an_install_error_is_summarised_by_the_cause_not_by_uvs_first_lines():
    from torch_matrix.run.cellrun import headline
    from torch_matrix.world.uvoutput import cause_summary, classify_install_failure

    verdict = classify_install_failure(2, ENOSPC_OUTPUT)
    first = verdict.message.splitlines()[0]
    assert first.startswith("No space left on device: error: Failed to install: nvidia_cusolver")
    assert "cause: failed to write to file" in first and first.endswith("(os error 28)")
    assert headline(verdict.message).startswith("No space left on device")
    assert "Building toyproj" in verdict.message  # uv's whole output is kept below it
    assert cause_summary(
        "error: Request failed after 3 retries\n  Caused by: tcp connect error"
    ) == ("error: Request failed after 3 retries; cause: tcp connect error")
    assert cause_summary("nothing useful") == ""
    killed = classify_install_failure(-9, "Downloading torch\nKilled")
    assert killed.message.startswith("installer killed (exit -9)")


def test_each_install_retry_is_said_with_its_reason():
    from types import SimpleNamespace

    from torch_matrix.world.environment import install

    outputs = iter([(2, ENOSPC_OUTPUT), (2, ENOSPC_OUTPUT), (0, "Installed 3 packages in 1s")])

    def runner(command, **_kwargs):
        code, out = next(outputs)
        return SimpleNamespace(returncode=code, stdout=out)

    lines: list[str] = []
    outcome = install(
        make_cell(),
        None,
        "/v/bin/python",
        uv="uv",
        runner=runner,
        sleep=lambda s: None,
        log=lines.append,
    )
    assert outcome.attempts == 3 and len(lines) == 2
    assert lines[0].startswith("install attempt 1 of 3 failed (No space left on device: error:")
    assert lines[1].startswith("install attempt 2 of 3 failed") and "--reinstall" in lines[1]


def test_the_install_heartbeat_says_the_bytes_fetched_and_what_is_being_fetched(tmp_path):
    from torch_matrix.run.disk import install_watch

    wheels = (
        Wheel("torch", "2.3.1", "torch-2.3.1-py3-none-any.whl", 800 * 1000**2, GB),
        Wheel("nvidia-x", "1", "nvidia_x-1-py3-none-any.whl", 400 * 1000**2, GB),
        Wheel("numpy", "2", "numpy-2-py3-none-any.whl", 20 * 1000**2, GB),
    )
    cost = cell_cost("c", "default", WheelSet(wheels), ("numpy-2-py3-none-any.whl",))
    detail = install_watch(cost, str(tmp_path / "uv"))
    (tmp_path / "uv" / "wheels-v8").mkdir(parents=True)
    assert detail() == "fetched 0 B of 1.2 GB; fetching torch, nvidia-x"
    _uv_cache(tmp_path / "uv", ["nvidia_x-1-py3-none-any.whl"])
    assert detail() == "fetched 400 MB of 1.2 GB; fetching torch"
    # torch is arriving: uv has unpacked 250 MB of its 1 GB into a temporary directory of its
    # cache (800 MB to download: 200 MB of it have arrived).
    arriving = tmp_path / "uv" / ".tmpAbC123" / "torch" / "lib"
    arriving.mkdir(parents=True)
    with open(arriving / "libtorch_cpu.so", "wb") as handle:
        handle.truncate(250 * 1000**2)
    assert detail() == (
        "fetched 600 MB of 1.2 GB (200 MB of it in wheels still arriving); fetching torch"
    )
    (arriving / "libtorch_cpu.so").unlink()
    _uv_cache(tmp_path / "uv", ["torch-2.3.1-py3-none-any.whl"])
    assert detail() == "fetched 1.2 GB of 1.2 GB; linking into the venv"


@pytest.mark.parametrize(
    ("unpacked", "expected"), [(0, 0), (-5, 0), (500, 250), (2000, 1000), (10**9, 1000)]
)
def test_a_wheel_still_arriving_counts_by_what_is_unpacked_never_more_than_its_size(
    unpacked, expected
):
    from torch_matrix.run.disk import arriving_bytes

    left = [Wheel("torch", "1", "torch-1-py3-none-any.whl", 1000, 2000)]
    assert arriving_bytes(left, unpacked) == expected
    unsized = [Wheel("torch", "1", "torch-1-py3-none-any.whl", None, None)]
    assert arriving_bytes(unsized, unpacked) == 0


# ---------------------------------------------------------------- variant = "auto"


def test_variant_auto_is_the_default_build_with_a_gpu_and_the_cpu_build_without(tmp_path):
    from torch_matrix.run.pipeline import resolve_auto
    from tests.synthetic_wheels import build_index as build

    plain = build(tmp_path / "plain", [torch_wheel("2.1.0")])
    cpu = build(tmp_path / "cpu-build", [torch_wheel("2.1.0+cpu")])
    (tmp_path / "pytorch").mkdir()
    (tmp_path / "pytorch" / "cpu").symlink_to(cpu.simple_dir)  # <pytorch>/cpu/torch/index.html
    links = tmp_path / "links"
    links.mkdir()
    spec_text = (
        'variant = ["auto", "cu121"]\n[index]\n'
        f'default = "{plain.url}"\npytorch = "{(tmp_path / "nowhere").as_uri()}"\nextra = []\n'
        f'find_links = ["{links}"]\n'
    )
    spec = parse_spec(spec_text)
    env = {"TORCH_MATRIX_CACHE_DIR": str(tmp_path / "c")}
    with_gpu, note = resolve_auto(spec, env, gpu="1 NVIDIA GPU(s)")
    assert with_gpu.variants == ("default", "cu121") and "the default builds" in note
    without, note = resolve_auto(spec, env, gpu="")
    assert without.variants == ("default", "cu121")
    assert "cannot be read" in note and "find-links" not in note
    (links / "torch-2.1.0+cpu-py3-none-any.whl").write_bytes(b"")
    assert "(torch 2.1.0+cpu)" in resolve_auto(spec, env, gpu="")[1]
    readable = parse_spec(
        spec_text.replace((tmp_path / "nowhere").as_uri(), (tmp_path / "pytorch").as_uri())
    )
    chosen, note = resolve_auto(readable, env, gpu="")
    assert chosen.variants == ("cpu", "cu121") and "no CUDA wheels downloaded" in note
    assert resolve_auto(parse_spec(""), env, gpu="")[1] == ""


# ---------------------------------------------------------------- the project's own install items


def test_the_projects_own_install_items_are_in_the_cost_and_what_cannot_be_sized_is_unknown(
    tmp_path, monkeypatch, capsys
):
    """``.[test]`` brings the project's declared dependencies and its extra's, a requirements file
    its requirements, a local wheel its own size; the project itself is built from source: its
    size is said as unknown, never counted as 0."""
    from tests.synthetic_wheels import build_wheel

    extra = [
        WheelSpec("tqdm", "4.0", {"tqdm/__init__.py": "t" * 3000}),
        WheelSpec("rich", "13.0", {"rich/__init__.py": "r" * 4000}),
        WheelSpec("attrs", "23.0", {"attrs/__init__.py": "a" * 500}),
    ]
    index = build_index(tmp_path / "index", [*_wheels(), *extra])
    project = tmp_path / "project"
    (project / "dist").mkdir(parents=True)
    local = build_wheel(
        WheelSpec("localdep", "1.0", {"localdep/x.py": "l" * 7000}), project / "dist"
    )
    (project / "pyproject.toml").write_text(
        '[project]\nname = "toyproj"\nversion = "0"\ndependencies = ["tqdm"]\n'
        '[project.optional-dependencies]\ntest = ["rich>=13", "toyproj[other]"]\nother = []\n'
    )
    (project / "requirements.txt").write_text("# pinned\nattrs==23.0\n--index-url https://x\n")
    (project / "matrix.toml").write_text(
        'torch = ["2.1.0"]\ntorchvision = "none"\nfollowups = 0\n'
        f'install = [".[test]", "-r requirements.txt", "dist/{local.name}"]\n'
        f'[index]\ndefault = "{index.url}"\nextra = []\nfind_links = []\n'
    )
    monkeypatch.chdir(project)
    for name, value in _env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert cli.main(["plan", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    wheels = {w["project"]: w for w in entry["cost"]["wheels"]}
    assert {"tqdm", "rich", "attrs", "localdep", "torch"} <= set(wheels)
    assert wheels["localdep"]["size"] == local.stat().st_size
    with zipfile.ZipFile(local) as archive:
        assert wheels["localdep"]["unpacked"] == sum(i.file_size for i in archive.infolist())
    assert entry["cost"]["download_bytes"] == sum(w["size"] for w in wheels.values())
    (unknown,) = entry["cost"]["unknown"]
    assert unknown.startswith(".[test]: the project itself, built from ")
    assert unknown.endswith(": size unknown")
    assert entry["cost"]["exact"] is False
    assert cli.main(["plan"]) == 0
    out = capsys.readouterr().out
    assert " + 1 item(s) of unknown size for 1 cell(s)" in out
    assert "not sized (unknown, not counted as 0): .[test]: the project itself" in out
    assert "upper bound" not in out  # every wheel's unpacked size was read


def test_a_project_whose_dependencies_are_not_in_pyproject_says_so(tmp_path):
    from torch_matrix.run.sizing import install_items_cost

    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    (tmp_path / "req.txt").write_text("-r more.txt\nfoo @ https://example.org/foo.whl\n")
    (tmp_path / "more.txt").write_text("bar>=1  # comment\n")
    found = install_items_cost([".", "-r req.txt", "pytest>=8", "-c req.txt"], str(tmp_path))
    assert found.requirements == ("bar>=1", "pytest>=8")
    assert [u.split(":")[0] for u in found.unknown] == [".", ".", "-r req.txt"]
    assert "not declared in pyproject.toml" in found.unknown[1]
    assert "direct reference, size unknown" in found.unknown[2]


def test_a_budget_read_from_the_free_disk_counts_the_runs_own_wheels_already_in_the_cache(tmp_path):
    """A follow-up session (or a resumed run) measures the free disk with the run's wheels already
    in uv's cache: they belong to what the run may fill, or the follow-ups would evict everything
    the grid fetched though no budget was given (seen on the real 6-release run)."""
    from torch_matrix.run.disk import Keeper, Ledger

    spec = parse_spec('torch = ["2.1.0"]\n', "matrix.toml")
    budget, origin = budget_of(spec, {}, tmp_path, free=lambda _p: 20 * GB)
    assert budget == 18 * GB and origin.startswith("the free disk at")  # a tenth kept free
    ledger = Ledger(tmp_path / "results" / "ledger.json")
    first = Keeper(budget, origin, str(tmp_path / "uv"), ledger, free=lambda _p: 20 * GB)
    assert first.budget == 18 * GB  # a fresh run: nothing of its own in the cache yet
    fetched = "a-1-py3-none-any.whl"
    first.start({fetched: 6 * GB})
    _uv_cache(tmp_path / "uv", [fetched])
    later = Keeper(budget, origin, str(tmp_path / "uv"), ledger, free=lambda _p: 20 * GB)
    assert later.budget == 24 * GB
    given = Keeper(15 * GB, "the spec's disk_budget", str(tmp_path / "uv"), ledger)
    assert given.budget == 15 * GB  # a budget the user gave is kept as given
