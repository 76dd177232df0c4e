"""Smoke tests of the benchmark's pure parts: statistics, target checks, output shape.

No timing asserts and no network: the measured figures themselves run only under
``python -m benchmarks.run`` (``nox -s bench``).
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from benchmarks import run as bench_run
from benchmarks.common import Context
from torch_matrix.world.environment import link_mode_warning
from benchmarks.markdown import render as render_markdown
from benchmarks.stats import (
    MET,
    MISSED,
    NOT_MEASURED,
    Target,
    paired_ratios,
    ratio,
    summarize,
    tally,
    targets_for,
)
from benchmarks.wheelsizes import InstalledWheel, pick_file, read_installed


def test_summarize_quotes_the_median_and_keeps_every_run():
    summary = summarize([3.0, 1.0, 2.0, 10.0])
    assert summary["median"] == 2.5
    assert (summary["min"], summary["max"], summary["n"]) == (1.0, 10.0, 4)
    assert summary["runs"] == [3.0, 1.0, 2.0, 10.0]
    with pytest.raises(ValueError):
        summarize([])


def test_ratio_is_none_when_a_side_is_missing():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None
    assert ratio(1.0, 0) is None
    assert paired_ratios([2.0, 9.0], [1.0, 3.0]) == [2.0, 3.0]
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    "op,value,status",
    [
        ("<=", 1.5, MET),
        ("<=", 1.5001, MISSED),
        ("<", 2.0, MISSED),
        ("<", 1.99, MET),
        (">=", 50.0, MET),
        (">=", 49.9, MISSED),
        ("<=", None, NOT_MEASURED),
    ],
)
def test_target_status_is_exact_at_the_limit(op, value, status):
    limit = {"<=": 1.5, "<": 2.0, ">=": 50.0}[op]
    target = Target("f", "x", op, limit, value, "x")
    assert target.status == status
    assert target.line().startswith(f"[{status}]")
    assert target.to_json()["status"] == status


def test_unknown_operator_is_refused():
    with pytest.raises(ValueError):
        Target("f", "x", "~", 1.0)


def test_targets_for_marks_missing_values_not_measured_and_tally_counts():
    goals = {"a": ("<=", 1.0, "x"), "b": (">=", 5.0, "x"), "c": ("<", 2.0, " s")}
    targets = targets_for("fig", goals, {"a": 0.5, "b": 1.0}, {"b": "why"})
    assert [t.status for t in targets] == [MET, MISSED, NOT_MEASURED]
    assert targets[1].note == "why"
    assert tally(targets) == {MET: 1, MISSED: 1, NOT_MEASURED: 1}


def test_pick_file_prefers_exact_tags_then_the_best_ranked_compatible_file():
    files = [
        {"filename": "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl", "size": 10},
        {"filename": "torch-2.4.1-cp311-none-macosx_11_0_arm64.whl", "size": 1},
        {"filename": "torch-2.4.1-cp310-cp310-manylinux1_x86_64.whl", "size": 2},
        {"filename": "torch-2.4.1.tar.gz", "size": 3},
    ]
    supported = [
        "cp311-cp311-manylinux_2_17_x86_64",
        "cp311-cp311-manylinux1_x86_64",
        "py3-none-any",
    ]
    # torch's WHEEL says linux_x86_64 although the file is named manylinux1
    retagged = InstalledWheel("torch", "2.4.1", frozenset({"cp311-cp311-linux_x86_64"}))
    assert pick_file(retagged, files, supported)["size"] == 10
    exact = InstalledWheel("torch", "2.4.1", frozenset({"cp310-cp310-manylinux1_x86_64"}))
    assert pick_file(exact, files, supported)["size"] == 2
    other = InstalledWheel("torch", "2.4.1", frozenset({"cp39-cp39-linux_x86_64"}))
    assert pick_file(other, files, supported) is None


def test_read_installed_takes_name_version_and_tags_from_dist_info(tmp_path: Path):
    info = tmp_path / "Pillow-11.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Pillow\nVersion: 11.0.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: cp311-cp311-manylinux_2_28_x86_64\n")
    (tmp_path / "broken.dist-info").mkdir()
    assert read_installed(tmp_path) == [
        InstalledWheel("pillow", "11.0.0", frozenset({"cp311-cp311-manylinux_2_28_x86_64"}))
    ]


def test_link_mode_warning(tmp_path: Path):
    cache, venvs = tmp_path / "cache", tmp_path / "venvs" / "not-yet-created"
    assert link_mode_warning(cache, venvs, environ={}) is None
    assert "UV_LINK_MODE=copy" in link_mode_warning(cache, venvs, environ={"UV_LINK_MODE": "copy"})
    shm = Path("/dev/shm")
    if shm.is_dir() and shm.stat().st_dev != tmp_path.stat().st_dev:
        warning = link_mode_warning(shm / "uv-cache", venvs, environ={})
        assert warning and "different filesystems" in warning and "UV_CACHE_DIR" in warning


def test_a_failing_figure_is_reported_not_measured_and_the_json_has_the_documented_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    good = types.SimpleNamespace(
        GOALS={"g": ("<=", 2.0, "x")},
        measure=lambda ctx: {
            "value": 1.0,
            "targets": targets_for("9_good", {"g": ("<=", 2.0, "x")}, {"g": 1.0}),
        },
    )

    def explode(ctx):
        raise RuntimeError("no network")

    bad = types.SimpleNamespace(GOALS={"b": (">=", 50.0, "x")}, measure=explode)
    modules = {"fake.good": good, "fake.bad": bad}
    monkeypatch.setattr(bench_run, "FIGURES", (("9_good", "fake.good"), ("8_bad", "fake.bad")))
    monkeypatch.setattr(
        "benchmarks.markdown.DETAILS", {"9_good": lambda figure: [figure["absent"]]}
    )
    monkeypatch.setattr(bench_run.importlib, "import_module", modules.__getitem__)
    monkeypatch.setattr(bench_run, "machine_facts", lambda work: {"cpu_count": 1})
    out = tmp_path / "latest.json"
    assert bench_run.main(["--quick", "--out", str(out), "--work", str(tmp_path / "work")]) == 0
    document = json.loads(out.read_text())
    assert document["schema"] == "torch-matrix/bench" and document["quick"] is True
    assert set(document["figures"]) == {"9_good", "8_bad"}
    assert "no network" in document["figures"]["8_bad"]["error"]
    statuses = {t["name"]: t["status"] for t in document["targets"]}
    assert statuses == {"g": MET, "b": NOT_MEASURED}
    assert document["tally"] == {MET: 1, MISSED: 0, NOT_MEASURED: 1}
    assert not (tmp_path / "work").exists()  # scratch space removed unless --keep

    text = render_markdown(document)
    assert "| 9_good | g <= 2x | 1x | **MET** |" in text
    assert "| 8_bad | b >= 50x | - | **NOT MEASURED** |" in text
    assert "- not measured: RuntimeError: no network" in text
    assert "(cannot render: missing" in text  # the fake figure lacks the real figure's keys


def test_only_selects_figures_by_number_and_rejects_unknown_ones():
    assert [key for key, _ in bench_run.selected_figures("1,3")] == ["1_warm_env", "3_disk"]
    assert len(bench_run.selected_figures("")) == len(bench_run.FIGURES)
    with pytest.raises(SystemExit):
        bench_run.selected_figures("99")


def test_context_dir_is_fresh(tmp_path: Path):
    ctx = Context(work=tmp_path, quick=True, log=lambda line: None)
    (ctx.dir("a") / "stale").write_text("x")
    assert not (ctx.dir("a") / "stale").exists()
