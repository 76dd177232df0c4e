"""torch_matrix.plan.grid: selection, pairing from metadata, expansion, rules, ids, notes, shards, CLI."""

from __future__ import annotations

import argparse
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

from torch_matrix.cli import plan as plan_cli
from torch_matrix.vocab.errors import UserError
from torch_matrix.plan.grid import IndexFacts, gather_facts, plan_cells, value_token
from torch_matrix.plan.shards import parse_shard, select_shard, shards
from torch_matrix.vocab.records import Cell
from torch_matrix.spec.parse import parse_spec


@dataclass(frozen=True)
class Interp:
    path: str
    version: str


PYS = {
    "current": Interp("/usr/bin/python3", "3.11.7"),
    "3.10": Interp("/p/3.10", "3.10.13"),
    "3.11": Interp("/p/3.11", "3.11.7"),
    "3.8": Interp("/p/3.8", "3.8.18"),
    "3.9": None,
}
TORCH = ("1.13.1", "2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1")
PAIRING = {
    "1.13.1": "0.14.1",
    "2.3.1": "0.18.1",
    "2.4.1": "0.19.1",
    "2.5.1": "0.20.1",
    "2.5.0": "0.20.0",
}


def spec(text: str = ""):
    return parse_spec(text, "matrix.toml", base_dir="/proj")


def facts(**overrides) -> IndexFacts:
    values = {
        "torch_versions": {"default": TORCH},
        "pairing": PAIRING,
        "torchvision_versions": tuple(PAIRING.values()),
        "where": "https://pypi.example/simple",
    }
    values.update(overrides)
    return IndexFacts(**values)


def plan(text: str = "", **fact_overrides) -> list[Cell]:
    return plan_cells(spec(text), facts(**fact_overrides), PYS)


# ---------------------------------------------------------------- selection and expansion


def test_default_is_newest_three_minors_latest_patch_with_pairs_on_current_python():
    cells = plan('torch = { select = "latest-patch", newest = 3 }')
    assert [c.id for c in cells] == ["t2.5.1-py3.11", "t2.4.1-py3.11", "t2.3.1-py3.11"]
    assert cells[0].requirements == ("torch==2.5.1", "torchvision==0.20.1")
    assert cells[0].axes == {
        "python": "3.11",
        "torch": "2.5.1",
        "torchvision": "0.20.1",
        "variant": "default",
    }
    assert cells[0].tags == ("torch2.5", "py3.11", "variant-default")
    assert not any(c.plan_note for c in cells)


def test_select_all_within_a_range():
    cells = plan('torch = { versions = ">=2.4", select = "all" }\ntorchvision = "none"')
    assert [c.torch for c in cells] == ["2.5.1", "2.5.0", "2.4.1", "2.4.0"]
    assert all(c.requirements == (f"torch=={c.torch}",) and c.torchvision == "" for c in cells)


def test_explicit_versions_keep_their_order_and_unknown_ones_are_user_errors():
    assert [c.torch for c in plan('torch = ["2.3.1", "2.5.1"]')] == ["2.3.1", "2.5.1"]
    with pytest.raises(UserError) as caught:
        plan('torch = ["2.5.1", "2.9.9"]')
    assert caught.value.where == "matrix.toml: torch[1]" and "2.9.9" in caught.value.one_line()
    with pytest.raises(UserError) as caught:
        plan('torch = { versions = ">=9" }')
    assert "'>=9'" in caught.value.one_line()


def test_full_product_with_extras_ids_and_requirement_order():
    cells = plan(
        'python = ["3.10", "3.11"]\ntorch = ["2.5.1"]\nvariant = ["default", "cu124"]\n'
        '[extras]\nnumpy = { values = ["<2", ">=2"], label = "np" }'
    )
    assert len(cells) == 8
    ids = [c.id for c in cells]
    assert ids[:4] == [
        "t2.5.1-py3.10-nplt2",
        "t2.5.1-py3.10-npge2",
        "t2.5.1-py3.11-nplt2",
        "t2.5.1-py3.11-npge2",
    ]
    assert "t2.5.1-cu124-py3.11-npge2" in ids
    cell = cells[-1]
    assert cell.requirements == ("torch==2.5.1", "torchvision==0.20.1", "numpy>=2")
    assert cell.axes["numpy"] == ">=2" and "cu124" in cell.tags and "npge2" in cell.tags


def test_explicit_torchvision_is_an_axis_in_the_id():
    cells = plan('torch = ["2.5.1"]\ntorchvision = ["0.20.1", "0.20.0"]')
    assert [c.id for c in cells] == ["t2.5.1-tv0.20.1-py3.11", "t2.5.1-tv0.20.0-py3.11"]
    with pytest.raises(UserError) as caught:
        plan('torch = ["2.5.1"]\ntorchvision = ["0.99.0"]')
    assert caught.value.where == "matrix.toml: torchvision[0]"


def test_ids_are_unique_shell_safe_and_deterministic():
    text = (
        'python = ["3.8", "3.10", "current"]\ntorch = { select = "all" }\n'
        'variant = ["default", "cpu", "rocm6.2"]\n[extras]\nnumpy = ["<2", "~=1.26", "==1.26.*"]\n'
        'scipy = [">=1.10,<1.12", "1.11.4"]'
    )
    first, second = plan(text), plan(text)
    ids = [c.id for c in first]
    assert ids == [c.id for c in second]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", i) for i in ids)
    assert value_token("==1.26.*") == "1.26.x" and value_token(">=1.10,<1.12") == "ge1.10_lt1.12"


# ---------------------------------------------------------------- rules


def test_exclude_matches_versioned_axes_as_specifiers():
    cells = plan(
        'python = ["3.8", "3.11"]\ntorch = { select = "latest-patch" }\n'
        '[[exclude]]\npython = "3.8"\ntorch = ">=2.4"'
    )
    pairs = {(c.python, c.torch) for c in cells}
    assert ("3.8", "2.4.1") not in pairs and ("3.8", "2.5.1") not in pairs
    assert ("3.8", "2.3.1") in pairs and ("3.11", "2.5.1") in pairs


def test_exclude_by_bare_release_series_glob_and_extra_value():
    cells = plan(
        'torch = ["2.5.1", "2.4.1"]\nvariant = ["cpu", "cu121", "cu124"]\n'
        '[extras]\nnumpy = ["<2", ">=2"]\n'
        '[[exclude]]\ntorch = "2.5"\nvariant = "cu12*"\nnumpy = "< 2"'
    )
    removed = {
        (c.torch, c.variant, c.axes["numpy"])
        for c in plan(
            'torch = ["2.5.1", "2.4.1"]\nvariant = ["cpu", "cu121", "cu124"]\n'
            '[extras]\nnumpy = ["<2", ">=2"]'
        )
    } - {(c.torch, c.variant, c.axes["numpy"]) for c in cells}
    assert removed == {("2.5.1", "cu121", "<2"), ("2.5.1", "cu124", "<2")}


def test_exclude_by_a_bare_extras_version_matches_the_axis_value():
    # [extras] numpy = ["2.1.3"] means ==2.1.3; an exclude that names the same bare version matches it
    # (it matched nothing before: the rule kept "2.1.3", the axis "==2.1.3").
    text = 'torch = ["2.5.1", "2.4.1"]\n[extras]\nnumpy = ["2.1.3", "<2"]\n'
    cells = plan(text + '[[exclude]]\ntorch = "2.4.1"\nnumpy = "2.1.3"')
    removed = {(c.torch, c.axes["numpy"]) for c in plan(text)} - {
        (c.torch, c.axes["numpy"]) for c in cells
    }
    assert removed == {("2.4.1", "==2.1.3")}


def test_include_adds_a_cell_after_exclusion_and_duplicates_are_ignored():
    text = (
        'torch = ["2.5.1"]\n[[exclude]]\ntorch = "2.5.1"\n'
        '[[include]]\npython = "3.10"\ntorch = "2.4.1"\nvariant = "cu118"\n'
        '[[include]]\npython = "3.10"\ntorch = "2.4.1"\nvariant = "cu118"'
    )
    cells = plan(text)
    assert [c.id for c in cells] == ["t2.4.1-cu118-py3.10"]
    assert cells[0].requirements == ("torch==2.4.1", "torchvision==0.19.1")
    with pytest.raises(UserError) as caught:
        plan('[[include]]\npython = "3.10"\ntorch = "3.0.0"')
    assert caught.value.where == "matrix.toml: include[0].torch"


# ---------------------------------------------------------------- notes


def test_known_unsatisfiable_cells_are_planned_with_a_note():
    cells = plan(
        'python = ["3.9", "3.10", "3.8"]\ntorch = ["2.5.1", "2.4.0"]',
        torch_pythons={("default", "2.5.1"): frozenset({"3.9", "3.10", "3.11"})},
    )
    notes = {c.id: c.plan_note for c in cells}
    assert notes["t2.5.1-py3.9"].startswith("no Python 3.9 interpreter found (looked in: ")
    assert notes["t2.5.1-py3.10"] == ""
    assert notes["t2.5.1-py3.8"].startswith("no torch 2.5.1 wheel for Python 3.8")
    assert notes["t2.4.0-py3.10"] == "no torchvision release requires torch==2.4.0"
    assert all(("planned-unsatisfiable" in c.tags) == bool(c.plan_note) for c in cells)
    assert cells[-1].requirements == ("torch==2.4.0",)


def test_probes_required_and_policy_travel_with_every_cell():
    (cell,) = plan(
        'torch = ["2.5.1"]\n[probes]\nrun = ["install_sanity", "smoke"]\n'
        'required = ["install_sanity"]\nskip = "fail"'
    )
    assert cell.probes == ("install_sanity", "smoke") and cell.required_probes == (
        "install_sanity",
    )
    assert cell.policy == {"unsupported": "fail", "skip": "fail"}


# ---------------------------------------------------------------- facts from metadata


class FakeIndex:
    """In-memory index: torchvision metadata pins torch the way real releases do."""

    def __init__(self, torchvision_requires: dict[str, str], torch=TORCH) -> None:
        self.torchvision_requires = torchvision_requires
        self.torch = torch
        self.metadata_reads: list[str] = []

    def versions(self, project):
        names = self.torch if project == "torch" else self.torchvision_requires
        return sorted(Version(v) for v in names)

    def files(self, project, version):
        @dataclass
        class F:
            tags: tuple
            requires_python: str = ""

        if version == "2.3.1":
            return [F(("cp310-cp310-manylinux_2_28_x86_64", "cp311-cp311-win_amd64"))]
        return []

    def requires_dist(self, project, version):
        self.metadata_reads.append(version)
        requirement = self.torchvision_requires[version]
        return (
            [Requirement("numpy"), Requirement(requirement)]
            if requirement
            else [Requirement("numpy")]
        )


def test_pairing_is_read_from_torchvision_metadata_exact_pin_first_then_newest_range():
    index = FakeIndex(
        {
            "0.2.0": "torch",
            "0.17.0": "torch==2.2.0",
            "0.18.1": "torch==2.3.1",
            "0.19.1": "torch==2.4.1+cpu",
            "0.20.0": "torch==2.5.0",
            "0.20.1": "torch>=2.5.0",
            "0.20.2": "torch>=2.5.0",
        }
    )
    found = gather_facts(spec('torch = { select = "all", versions = ">=2.3" }'), index, batch=2)
    assert found.pairing == {
        "2.5.1": "0.20.2",
        "2.5.0": "0.20.0",
        "2.4.1": "0.19.1",
        "2.3.1": "0.18.1",
    }
    assert "0.2.0" not in index.metadata_reads  # stops once past the oldest torch needed
    assert found.torch_pythons == {("default", "2.3.1"): frozenset({"3.10", "3.11"})}
    cells = plan_cells(spec('torch = { select = "all", versions = ">=2.3" }'), found, PYS)
    assert {c.torch: c.plan_note for c in cells}[
        "2.4.0"
    ] == "no torchvision release requires torch==2.4.0"


def test_no_metadata_is_read_when_torchvision_is_none():
    index = FakeIndex({"0.20.1": "torch==2.5.1"})
    found = gather_facts(spec('torchvision = "none"'), index)
    assert found.pairing == {} and index.metadata_reads == []


def test_variant_facts_come_from_a_reachable_variant_index():
    default, cu = (
        FakeIndex({"0.20.1": "torch==2.5.1"}),
        FakeIndex({}, torch=("2.4.1", "2.5.1+cu118")),
    )
    found = gather_facts(
        spec('torch = { newest = 1 }\nvariant = ["default", "cu118", "cu124"]'),
        default,
        variant_indexes={"cu118": cu, "cu124": FakeIndex({}, torch=())},
    )
    assert found.torch_versions == {"default": TORCH, "cu118": ("2.4.1", "2.5.1")}
    cells = plan_cells(spec('torch = ["2.5.0"]\nvariant = ["cu118", "cu124"]'), found, PYS)
    assert [c.plan_note.split(";")[0] for c in cells] == [
        "torch 2.5.0 has no cu118 build on its index",
        "no torchvision release requires torch==2.5.0",
    ]


# ---------------------------------------------------------------- shards


def test_parse_shard():
    assert parse_shard("2/5") == (2, 5)
    for bad in ("0/3", "4/3", "1/0", "a/b", "1-3", ""):
        with pytest.raises(UserError) as caught:
            parse_shard(bad, "TORCH_MATRIX_SHARD")
        assert caught.value.where == "TORCH_MATRIX_SHARD"
        assert f"invalid shard {bad!r}" in caught.value.one_line()


def cell(variant: str, torch: str, n: int) -> Cell:
    return Cell(
        id=f"t{torch}-{variant}-{n}",
        axes={"python": "3.11", "torch": torch, "torchvision": "", "variant": variant},
        requirements=(f"torch=={torch}",),
    )


cells_strategy = st.lists(
    st.tuples(
        st.sampled_from(["default", "cpu", "cu124", "cu126"]),
        st.sampled_from(["2.3.1", "2.4.1", "2.5.1", "2.10.0"]),
    ),
    max_size=60,
).map(lambda pairs: [cell(v, t, i) for i, (v, t) in enumerate(pairs)])


@settings(max_examples=200, deadline=None)
@given(cells_strategy, st.integers(min_value=1, max_value=9))
def test_shards_partition_the_cells_deterministically_and_balanced(cells, n):
    parts = [select_shard(cells, k, n) for k in range(1, n + 1)]
    ids = [c.id for part in parts for c in part]
    assert sorted(ids) == sorted(c.id for c in cells)  # every cell exactly once
    assert parts == [select_shard(list(cells), k, n) for k in range(1, n + 1)]
    sizes = [len(p) for p in parts]
    slack = (len(cells) // n) // 4
    assert max(sizes) - min(sizes) <= 2 * slack + 1
    for part in parts:  # plan order is kept inside a shard
        positions = [cells.index(c) for c in part]
        assert positions == sorted(positions)


def test_shards_keep_variant_and_torch_groups_together():
    cells = [
        cell(v, t, i)
        for i, (v, t) in enumerate(
            (v, t)
            for t in ("2.5.1", "2.4.1")
            for v in ("cu124", "cpu", "default")
            for _ in range(4)
        )
    ]
    parts = [select_shard(cells, k, 3) for k in (1, 2, 3)]
    for part in parts:
        assert len({c.variant for c in part}) == 1 and len(part) == 8
    entries = shards(cells, 3)
    assert [e["shard"] for e in entries] == ["1/3", "2/3", "3/3"]
    assert [e["variants"] for e in entries] == [["cu124"], ["cpu"], ["default"]]
    assert shards(cells[:2], 5) == [e for e in shards(cells[:2], 5) if e["count"]]
    assert len(shards(cells[:2], 5)) == 2


# ---------------------------------------------------------------- CLI against a local index


def wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    meta = "\n".join(
        [f"Name: {name}", f"Version: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    )
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", meta + "\n")


@pytest.fixture()
def local_spec(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    for torch, tv in (("2.4.1", "0.19.1"), ("2.5.1", "0.20.1"), ("2.6.0", "")):
        wheel(wheels, "torch", torch)
        if tv:
            wheel(wheels, "torchvision", tv, (f"torch=={torch}",))
    path = tmp_path / "matrix.toml"
    path.write_text(
        f'name = "t"\ntorch = {{ newest = 3 }}\n[index]\ndefault = "{(tmp_path / "none").as_uri()}"\n'
        'find_links = ["wheels"]\n'
    )
    return path


def run_cli(path: Path, tmp_path: Path, **flags) -> str:
    args = argparse.Namespace(spec=str(path), json=False, shard=None, shards=None)
    for key, value in flags.items():
        setattr(args, key, value)
    out = io.StringIO()
    environ = {"TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}
    assert plan_cli.main(args, out=out, environ=environ) == 0
    return out.getvalue()


def test_plan_cli_table_json_and_shards(local_spec, tmp_path):
    text = run_cli(local_spec, tmp_path)
    assert "3 cells" in text and "torch==2.5.1 torchvision==0.20.1" in text
    assert "no torchvision release requires torch==2.6.0" in text
    data = json.loads(run_cli(local_spec, tmp_path, json=True))
    assert [d["axes"]["torch"] for d in data] == ["2.6.0", "2.5.1", "2.4.1"]
    assert all(len(d["fingerprint"]) == 16 for d in data)
    assert Cell.from_json(data[1]).requirements == ("torch==2.5.1", "torchvision==0.20.1")
    matrix = json.loads(run_cli(local_spec, tmp_path, json=True, shards=2))
    assert sorted(i for e in matrix for i in e["cells"]) == sorted(d["id"] for d in data)
    only = json.loads(run_cli(local_spec, tmp_path, json=True, shard=matrix[1]["shard"]))
    assert [d["id"] for d in only] == matrix[1]["cells"]


def test_human_table_keeps_python_versions_as_text():
    text = 'python = ["3.10"]\ntorch = ["2.5.1"]\n[extras]\nnumpy = ["<2"]'
    table = plan_cli.render_table(plan(text), spec(text))
    assert "t2.5.1-py3.10-numpylt2" in table and " 3.10 " in table and " 3.1 " not in table
    assert "torch==2.5.1 torchvision==0.20.1 numpy<2" in table


def test_plan_names_the_hardware_targets_and_they_change_no_cell(local_spec, tmp_path):
    before = json.loads(run_cli(local_spec, tmp_path, json=True))
    local_spec.write_text(
        local_spec.read_text() + '[targets]\ngpus = ["V100", "sm_120"]\ndrivers = ["535.104"]\n'
    )
    text = run_cli(local_spec, tmp_path)
    assert ("hardware targets (2): V100 (sm_70), driver 535.104; sm_120, driver 535.104") in text
    # These stand-in wheels hold only METADATA: no build facts to read before installing, so
    # each installable cell is named as judged from its installed build, with the reason.
    assert "judged from the installed build instead" in text
    assert "t2.5.1-py3.11: no torch/version.py in torch-2.5.1-py3-none-any.whl" in text
    after = json.loads(run_cli(local_spec, tmp_path, json=True))
    hardware = [entry.pop("hardware", None) for entry in after]
    assert after == before  # same cells, same fingerprints
    installable = [h for h in hardware if h is not None]
    assert installable and all(h["read_from"] == "installed build" for h in installable)
