"""Bisect: the pure choice of the next version (torch_matrix/plan/bisection.py) and real bisects on the synthetic index.

The end-to-end tests build a synthetic torch whose ``Tensor.sum`` goes wrong from one
release (or one nightly date) on, and a probe file that notices; ``torch-matrix bisect``
then installs and probes real venvs through the cell machinery, offline.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix.plan.bisection import (
    BAD,
    GOOD,
    SKIP,
    compare_url,
    conclude,
    max_cells,
    next_version,
    nightly_candidates,
    outcome_of,
    release_candidates,
)
from torch_matrix.vocab.records import FAIL, PASS, UNSATISFIABLE
from torch_matrix.world.results import load_results
from tests.factories import make_cell, make_probe, make_result
from tests.synthetic_wheels import (
    TORCH_TENSOR,
    build_index,
    numpy_wheel,
    torch_wheel,
    torchvision_wheel,
)

REPO = Path(__file__).resolve().parent.parent
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def simulate(versions: list[str], first_bad: int, skipped: frozenset[int] = frozenset()) -> tuple:
    outcomes: dict[str, str] = {}
    limit = max_cells(len(versions))
    while len(outcomes) < limit:
        version = next_version(versions, outcomes)
        if version is None:
            break
        index = versions.index(version)
        outcomes[version] = SKIP if index in skipped else (BAD if index >= first_bad else GOOD)
    return outcomes, conclude(
        versions, outcomes, budget_left=next_version(versions, outcomes) is None
    )


@given(st.integers(min_value=2, max_value=200), st.data())
def test_a_monotone_break_is_found_within_log2_plus_two_cells(count, data):
    versions = [f"1.{i}.0" for i in range(count)]
    first_bad = data.draw(st.integers(min_value=1, max_value=count - 1))
    outcomes, conclusion = simulate(versions, first_bad)
    assert len(outcomes) <= max_cells(count)
    assert (conclusion.last_good, conclusion.first_bad, conclusion.exact) == (
        versions[first_bad - 1],
        versions[first_bad],
        True,
    )
    assert (
        conclusion.sentence()
        == f"last good {versions[first_bad - 1]}, first bad {versions[first_bad]}"
    )


def test_eight_releases_take_at_most_five_cells():
    assert max_cells(8) == 5
    versions = [f"2.{i}.0" for i in range(8)]
    for first_bad in range(1, 8):
        outcomes, conclusion = simulate(versions, first_bad)
        assert len(outcomes) <= 5 and conclusion.first_bad == versions[first_bad]


def test_a_version_without_evidence_is_never_called_good_or_bad():
    versions = [f"2.{i}.0" for i in range(8)]
    outcomes = {"2.0.0": GOOD, "2.7.0": BAD, "2.3.0": GOOD, "2.5.0": BAD, "2.4.0": SKIP}
    assert next_version(versions, outcomes) is None
    conclusion = conclude(versions, outcomes)
    assert (conclusion.last_good, conclusion.first_bad, conclusion.exact) == (
        "2.3.0",
        "2.5.0",
        False,
    )
    assert "first bad one of 2.4.0 or 2.5.0" in conclusion.sentence()


def test_wrong_endpoints_stop_the_bisect_with_a_reason():
    versions = ["2.0.0", "2.1.0", "2.2.0"]
    assert next_version(versions, {"2.0.0": BAD}) is None
    assert "the good end 2.0.0 is bad too" in conclude(versions, {"2.0.0": BAD}).sentence()
    assert next_version(versions, {"2.0.0": GOOD, "2.2.0": GOOD}) is None
    assert "nothing to bisect" in conclude(versions, {"2.0.0": GOOD, "2.2.0": GOOD}).sentence()
    assert "no evidence at the good end" in conclude(versions, {"2.0.0": SKIP}).sentence()


def test_outcomes_follow_the_probe_or_the_verdict():
    cell = make_cell(probes=("install_sanity", "training_step"))
    broken = make_result(
        cell, probes=[make_probe("install_sanity"), make_probe("training_step", FAIL, "nan")]
    )
    assert outcome_of(broken, "install_sanity").kind == GOOD
    assert outcome_of(broken, "training_step").kind == BAD
    assert outcome_of(broken, "training_step").evidence == "training_step: fail: nan"
    assert outcome_of(broken).kind == BAD
    assert outcome_of(broken, "torch_compile").kind == SKIP
    assert outcome_of(make_result(cell, status=UNSATISFIABLE, message="no wheel")).kind == SKIP
    bold = make_result(
        cell,
        probes=[make_probe("training_step", FAIL, "two options, \x1b[1mdo those\x1b[0m steps\n")],
    )
    assert (
        outcome_of(bold, "training_step").evidence
        == "training_step: fail: two options, do those steps"
    )


def test_candidates_and_links():
    listed = ["2.3.0", "2.3.1", "2.4.0", "2.4.1+cpu", "2.5.0rc1", "2.5.1", "2.6.0", "2.7.0"]
    assert release_candidates(listed, "2.3.1", "2.6.0") == [
        "2.3.1",
        "2.4.0",
        "2.4.1",
        "2.5.1",
        "2.6.0",
    ]
    nightlies = [
        "2.6.0.dev20241001",
        "2.6.0.dev20241002",
        "2.6.0.dev20241002+cpu",
        "2.6.0.dev20241009",
        "2.5.1",
    ]
    assert nightly_candidates(nightlies, dt.date(2024, 10, 1), dt.date(2024, 10, 5)) == [
        "2.6.0.dev20241001",
        "2.6.0.dev20241002",
    ]
    assert (
        compare_url("2.5.1", "2.6.0")
        == "https://github.com/pytorch/pytorch/compare/v2.5.1...v2.6.0"
    )
    assert compare_url("2.6.0.dev20241001", "2.6.0.dev20241002") == (
        "https://github.com/pytorch/pytorch/compare/main@{2024-10-01}...main@{2024-10-02}"
    )


# ---------------------------------------------------------------------------- on the synthetic index

SUM_PROBE = """\
from torch_matrix.probes.api import Fail, probe


@probe("sum_ok", doc="Tensor.sum adds up")
def sum_ok(ctx):
    import torch

    total = torch.tensor([1, 2, 3]).sum()
    if total != 6:
        raise Fail("sum of [1, 2, 3] is %r" % (total,), observed=total, expected=6,
                   repro="import torch; print(torch.tensor([1, 2, 3]).sum())")
"""


def broken_torch(version: str):
    wheel = torch_wheel(version)
    wheel.files["torch/_tensor.py"] = TORCH_TENSOR.replace(
        "return sum(sum(row) if isinstance(row, list) else row for row in self.data)",
        "return 1 + sum(sum(row) if isinstance(row, list) else row for row in self.data)",
    )
    assert wheel.files["torch/_tensor.py"] != TORCH_TENSOR
    return wheel


def world(tmp: Path, torch_versions: list[str], vision_versions: list[str], first_bad: str):
    wheels = [
        broken_torch(v)
        if v in torch_versions[torch_versions.index(first_bad) :]
        else torch_wheel(v)
        for v in torch_versions
    ]
    wheels += [torchvision_wheel(tv, t) for t, tv in zip(torch_versions, vision_versions)]
    wheels.append(numpy_wheel("1.26.4"))
    index = build_index(tmp / "index", wheels)
    probe_dir = tmp / "probe_dir"
    probe_dir.mkdir()
    (probe_dir / "sum_probe.py").write_text(SUM_PROBE)
    spec = tmp / "matrix.toml"
    spec.write_text(f"""\
name = "bisect"
python = ["current"]
torch = ["{torch_versions[0]}"]
torchvision = "paired"

[probes]
run = ["install_sanity", "sum_ok"]
dirs = ["{probe_dir}"]

[index]
default = "{index.url}"
extra = []
find_links = []
""")
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
    return index, env


def bisect(tmp: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "bisect", "--envdir", str(tmp / "venvs"), *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.e2e
def test_a_break_at_one_release_among_eight_is_bisected_in_at_most_five_cells(tmp_path):
    torch_versions = [f"2.{i}.0" for i in range(8)]
    vision_versions = [f"0.{15 + i}.0" for i in range(8)]
    _, env = world(tmp_path, torch_versions, vision_versions, first_bad="2.5.0")
    done = bisect(tmp_path, env, "--good", "2.0.0", "--bad", "2.7.0", "--probe", "sum_ok", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["last_good"], answer["first_bad"]) == ("2.4.0", "2.5.0")
    assert answer["compare_url"] == "https://github.com/pytorch/pytorch/compare/v2.4.0...v2.5.0"
    assert len(answer["tested"]) <= 5
    for item in answer["tested"]:
        expected_kind = BAD if item["version"] >= "2.5.0" else GOOD
        assert item["outcome"] == expected_kind, item
        assert (
            item["installed"]["torchvision"]
            == vision_versions[torch_versions.index(item["version"])]
        )
        # A failing probe is rerun once; the same message again ends its reruns: k of n in its message.
        assert item["evidence"].startswith(
            "sum_ok: "
            + (
                "fail: fails in 2 of 2 runs: sum of [1, 2, 3] is 7"
                if expected_kind == BAD
                else PASS
            )
        )
        assert not item["resumed"]

    # The cells are ordinary results with origin `bisect`, apart from the run's own cells (their own
    # run directory and ids): the report reads them; a second bisect resumes them all.
    cells_dir = tmp_path / "results" / "bisect-bisect" / "cells"
    assert not (tmp_path / "results" / "bisect" / "cells").exists()
    before = {p.name: p.read_bytes() for p in cells_dir.glob("*.json")}
    assert sorted(before) == sorted(
        f"bisect-t{item['version']}-py{PY}.json" for item in answer["tested"]
    )
    loaded = load_results(cells_dir.parent)
    assert loaded.problems == [] and len(loaded.results) == len(answer["tested"])
    assert {r.cell.origin for r in loaded.results} == {"bisect"}
    assert {r.cell.reason for r in loaded.results} == {
        "torch-matrix bisect, judged by probe sum_ok"
    }
    from torch_matrix.pins import suggest_pins  # never evidence for the pins

    assert suggest_pins(loaded.results).counts.get("incompatible", 0) == 0
    again = bisect(tmp_path, env, "--good", "2.0.0", "--bad", "2.7.0", "--probe", "sum_ok")
    assert again.returncode == 0, again.stderr
    assert "last good 2.4.0, first bad 2.5.0" in again.stdout
    assert again.stdout.count("[resumed]") == len(answer["tested"])
    assert {p.name: p.read_bytes() for p in cells_dir.glob("*.json")} == before
    report = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "report", str(cells_dir.parent)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        report.returncode == 0
        and f"bisect-t2.5.0-py{PY}" in report.stdout
        and "sum_ok" in report.stdout
    )
    # Judged by another probe, no stored result counts: the judge is part of what a resume matches.
    other = bisect(tmp_path, env, "--good", "2.0.0", "--bad", "2.7.0")
    assert "[resumed]" not in other.stdout


@pytest.mark.e2e
def test_nightlies_are_bisected_by_date_from_a_dated_index(tmp_path):
    days = [f"202410{d:02d}" for d in range(1, 9)]
    torch_versions = [f"2.6.0.dev{d}" for d in days]
    vision_versions = [f"0.21.0.dev{d}" for d in days]
    index, env = world(tmp_path, torch_versions, vision_versions, first_bad="2.6.0.dev20241006")
    done = bisect(
        tmp_path,
        env,
        "--nightly",
        "--nightly-index",
        index.url,
        "--good",
        "2024-10-01",
        "--bad",
        "2024-10-08",
        "--probe",
        "sum_ok",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["versions"] == torch_versions
    assert (answer["last_good"], answer["first_bad"]) == ("2.6.0.dev20241005", "2.6.0.dev20241006")
    assert answer["compare_url"].endswith("compare/main@{2024-10-05}...main@{2024-10-06}")
    assert len(answer["tested"]) <= 5
    assert all(
        item["installed"]["torchvision"] == item["version"].replace("2.6.0", "0.21.0")
        for item in answer["tested"]
    )


@pytest.mark.e2e
def test_bad_bisect_input_gets_one_line(tmp_path):
    _, env = world(tmp_path, ["2.0.0", "2.1.0"], ["0.15.0", "0.16.0"], first_bad="2.1.0")
    for args, words in (
        (["--good", "2.0.0", "--bad", "9.9.9"], "--bad: torch 9.9.9 is not a release on"),
        (["--good", "2.1.0", "--bad", "2.0.0"], "is not older than --bad"),
        (["--good", "x!", "--bad", "2.0.0"], "not a version"),
        (["--good", "2.0.0", "--bad", "2.1.0", "--set", "numpy=<2"], "no extra axis named numpy"),
    ):
        done = bisect(tmp_path, env, *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("torch-matrix: error: ") and words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_test_nodeid_becomes_a_command_probe_and_other_axes_are_held(tmp_path):
    from torch_matrix.run.bisection import TEST_PROBE, BisectRequest, held_spec
    from torch_matrix.vocab.errors import UserError
    from torch_matrix.spec.parse import parse_spec

    spec = parse_spec(
        'name = "x"\npython = ["3.11", "3.12"]\ntorch = ["2.5.1"]\nvariant = ["cpu", "cu124"]\n'
        '[extras]\nnumpy = ["<2", ">=2"]\n[probes]\nrun = ["install_sanity"]\n',
        "m.toml",
    )
    args = BisectRequest(
        "2.4.1", "2.5.1", set_axes=("numpy=>=2",), test="tests/test_io.py::test_load"
    )
    held = held_spec(spec, args, ["2.4.1", "2.5.1"], spec.index)
    assert held.python == ("3.11",) and held.variants == ("cpu",)
    assert [axis.values for axis in held.extras] == [(">=2",)]
    assert held.torch.explicit == ("2.4.1", "2.5.1")
    assert held.probes.commands[TEST_PROBE] == "python -m pytest -x -q tests/test_io.py::test_load"
    assert held.probes.run == (TEST_PROBE,) and held.probes.required == (
        TEST_PROBE,
    )  # the test alone
    with pytest.raises(UserError, match="not one of the spec's values"):
        held_spec(
            spec, BisectRequest("2.4.1", "2.5.1", set_axes=("numpy=3",)), ["2.5.1"], spec.index
        )
    with pytest.raises(UserError, match="not in the spec's probes.run"):
        held_spec(
            spec, BisectRequest("2.4.1", "2.5.1", probe="torch_compile"), ["2.5.1"], spec.index
        )
