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
from benchmarks.markdown import DETAILS
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


def _uv_entry(folder: Path, name: str) -> None:
    """One wheel as uv's cache files it: the link to its archive, ``.http``, ``.lock``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).mkdir()
    for suffix in (".http", ".lock"):
        (folder / f"{name}{suffix}").write_text("")


def test_cached_wheel_files_names_the_files_in_uvs_cache(tmp_path: Path):
    from benchmarks.wheelsizes import cached_wheel_files, is_wheel_name

    cache = tmp_path / "uv"
    _uv_entry(
        cache / "wheels-v8" / "pypi" / "nvidia-cublas-cu12", "12.1.3.1-py3-none-manylinux1_x86_64"
    )
    _uv_entry(cache / "wheels-v8" / "pypi" / "numpy", "2.0.2-cp311-cp311-manylinux_2_17_x86_64")
    _uv_entry(cache / "wheels-v8" / "pypi" / "markupsafe", "3.0.4-516d0c2242d49034")  # digest name
    _uv_entry(
        cache / "wheels-v8" / "index" / "c4ce114a73359c17" / "torch",
        "2.5.1-cp311-cp311-linux_x86_64",
    )
    (cache / "wheels-v8" / "pypi" / "torch").mkdir()  # a fetch under way: its .lock only
    (
        cache / "wheels-v8" / "pypi" / "torch" / "2.4.1-cp311-cp311-manylinux1_x86_64.lock"
    ).write_text("")
    found = cached_wheel_files(cache)
    assert found == {
        "nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl",
        "numpy-2.0.2-cp311-cp311-manylinux_2_17_x86_64.whl",
        "markupsafe-3.0.4-516d0c2242d49034.whl",
        "torch-2.5.1-cp311-cp311-linux_x86_64.whl",
    }
    assert not is_wheel_name("markupsafe-3.0.4-516d0c2242d49034.whl")
    assert is_wheel_name("numpy-2.0.2-cp311-cp311-manylinux_2_17_x86_64.whl")


def test_unique_wheel_sizes_come_from_the_plan_with_the_caches_extra_files():
    from benchmarks.wheelsizes import not_planned, unique_wheel_sizes

    planned = {
        "nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl": 700,
        "numpy-2.0.2-cp311-cp311-manylinux_2_17_x86_64.whl": 20,
        "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl": None,  # the index gave no size
    }
    fetched = {
        "nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl",
        "Numpy-2.0.2-cp311-cp311-manylinux_2_17_x86_64.whl",  # another spelling, the same file
        "setuptools-80.0.0-py3-none-any.whl",  # the run fetched it, the plan does not name it
    }
    assert not_planned(planned, fetched) == ["setuptools-80.0.0-py3-none-any.whl"]
    sizes, unsized = unique_wheel_sizes(planned, fetched, {"setuptools-80.0.0-py3-none-any.whl": 1})
    assert sum(sizes.values()) == 721 and len(sizes) == 3
    assert unsized == ["torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"]


def test_figure_8_measures_a_run_that_keeps_no_venvs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A run deletes each cell's venv (issue 46): the wheel bytes come from the plan and uv's
    cache, and every figure is a number (it was ``unique wheel bytes 0 B`` and a TypeError)."""
    from benchmarks import cold_matrix, speed

    walls = {"cold": 120.0, "warm": 100.0}

    def fake_run_nox(ctx, label, env, noxfile=None):
        cache = Path(env["UV_CACHE_DIR"])
        if label == "cold":  # the cold run fills the fresh cache; the warm one finds it full
            _uv_entry(cache / "wheels-v8" / "pypi" / "torch", "2.5.1-cp311-cp311-manylinux1_x86_64")
            _uv_entry(cache / "wheels-v8" / "pypi" / "markupsafe", "3.0.4-516d0c2242d49034")
        cell = {
            "install_s": 30.0 if label == "cold" else 1.0,
            "probes_s": 50.0,
            "verify_s": 1.0,
            "total_s": 90.0,
        }
        return {"wall_s": walls[label], "cells": {"c1": cell}, "venvs": [], "nox_exit": 0}

    planned = {
        "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl": 900_000_000,
        "markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.whl": 100_000,
    }
    monkeypatch.setattr(speed, "NEEDED_FREE_GB", 0)
    monkeypatch.setattr(speed, "planned_wheels", lambda spec, env, cwd: planned)
    monkeypatch.setattr(speed, "run_nox", fake_run_nox)
    monkeypatch.setattr(speed, "settle", lambda: None)
    monkeypatch.setattr(cold_matrix, "probe_file_url", lambda *a: ("http://x", 100))
    monkeypatch.setattr(cold_matrix, "download_once", lambda url, size: {"bandwidth_Bps": 100e6})
    monkeypatch.setattr(cold_matrix, "install_matrix", lambda ctx, cache, root: ([root], 40.0))
    lines: list[str] = []
    ctx = Context(work=tmp_path, quick=False, log=lines.append)
    cold = speed.measure_cold(ctx)
    assert cold["unique_wheel_bytes"] == 900_100_000 and cold["unique_wheel_files"] == 2
    # the digest-named cache entry is the plan's markupsafe file: kept apart, not counted twice
    assert cold["wheels"]["cached_by_digest"] == ["markupsafe-3.0.4-516d0c2242d49034.whl"]
    assert cold["wheels"]["cached_not_planned"] == [] and cold["wheels"]["unsized"] == []
    assert cold["cold_over_warm"] == 1.2
    assert cold["download_at_link_speed_s"] == pytest.approx(9.001)
    assert cold["cold_over_bytes_and_warm"] == pytest.approx(120.0 / 109.001)
    assert cold["old_figure_cold_install_over_bytes"] == pytest.approx(40.0 / 9.001)
    assert cold["share_of_serial_downloads_hidden"] == pytest.approx(0.5)
    assert any("unique wheel bytes 858.4 MiB in 2 files" in line for line in lines), lines
    assert not (tmp_path / "speed-cold-cache").exists()  # the fresh cache deleted


def test_figure_8_lines_say_na_where_no_wheel_bytes_are_known():
    from benchmarks.speed import cold_figures, cold_lines

    figures = cold_figures(120.0, 100.0, 0, 100e6, 40.0, {"cold": 30.0})
    assert figures["cold_over_warm"] == 1.2
    assert figures["download_at_link_speed_s"] is None
    assert figures["old_figure_cold_install_over_bytes"] is None
    wheels = {
        "sizes": {},
        "unsized": ["torch-x.whl"],
        "planned_files": 1,
        "cached_files": 0,
        "cached_not_planned": [],
    }
    lines = cold_lines(figures, wheels, 120.0, 100.0, 40.0, {"cold": 30.0})
    assert "n/a at link speed" in lines[0] and "no size for torch-x.whl" in lines[0]


# ---- figure 13: an ecosystem run at scale (issue 44) ----


def test_projected_cycles_the_measured_times_over_the_tool_s_round_robin_shards():
    from benchmarks.ecosystem_scale import cycled, projected_wall, runner_loads

    assert cycled([10, 30], 5, seed=None) == [10.0, 30.0, 10.0, 30.0, 10.0]
    shuffled = cycled([1, 2, 3], 300)
    assert sorted(shuffled) == sorted(cycled([1, 2, 3], 300, seed=None))
    assert shuffled != cycled([1, 2, 3], 300, seed=None)
    with pytest.raises(ValueError):
        cycled([], 3)
    # runner 1 takes projects 1, 3, 5; runner 2 projects 2, 4; each pays its fixed cost once
    assert runner_loads([1, 2, 3, 4, 5], 2, setup_s=10) == [19.0, 16.0]
    assert runner_loads([1, 2, 3], 8) == [1.0, 2.0, 3.0]  # a runner with no project costs nothing
    got = projected_wall([10, 30], 4, 2, setup_s=5, seed=None)
    assert got == {
        "wall_s": 65.0,  # runner 2: 5 + 30 + 30, the slowest
        "mean_runner_s": 45.0,
        "ideal_s": 45.0,
        "runners_used": 2.0,
        "serial_s": 85.0,
    }
    wide = projected_wall([20, 40, 60], 1000, 256)
    assert wide["runners_used"] == 256.0 and wide["serial_s"] == pytest.approx(39_980.0)
    assert wide["ideal_s"] == pytest.approx(39_980.0 / 256) and wide["wall_s"] >= wide["ideal_s"]


def test_forecast_error_is_a_factor_either_way_and_fixed_cost_never_negative():
    from benchmarks.ecosystem_scale import fixed_cost, forecast_error

    assert forecast_error(50, 100) == 2.0 and forecast_error(300, 100) == 3.0
    assert forecast_error(100, 100) == 1.0
    assert forecast_error(None, 100) is None and forecast_error(0, 100) is None
    assert fixed_cost(100.0, 93.0) == 7.0 and fixed_cost(90.0, 93.0) == 0.0


def test_the_ecosystem_run_s_own_lines_give_each_project_s_time():
    from benchmarks.ecosystem_scale import parse_run_output

    text = (
        "estimate: about 2 min (forecast: 2 project(s) at their recorded wall time)\n"
        "[1/2] pytorch-warmup: same-pass (39 s)\n"
        "[2/2] torch-ppr: regressed (125 s)\n"
        "ecosystem: 2 project(s) in 171 s\n"
    )
    assert parse_run_output(text) == ({"pytorch-warmup": 39.0, "torch-ppr": 125.0}, 171.0)
    assert parse_run_output("[1/2] a: same-pass (3 s)\n") == ({"a": 3.0}, None)


def test_figure_13_is_listed_and_a_results_dir_without_run_json_is_refused(tmp_path, capsys):
    assert bench_run.selected_figures("13") == [("13_ecosystem", "benchmarks.ecosystem_scale")]
    code = bench_run.main(["--only", "13", "--ecosystem-results", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"--ecosystem-results {tmp_path}: no run.json" in err and "hint:" in err


def test_a_real_run_s_forecast_is_the_tool_s_own_for_its_finished_projects():
    from benchmarks.ecosystem_scale import forecast_of_finished

    def listed(name, budget=300.0, skip=""):
        source = {"kind": "sdist", "location": f"{name}==1"}
        return {"name": name, "source": source, "budget_s": budget, "skip": skip}

    run = [listed("a"), listed("b"), listed("c", budget=5.0), listed("d"), listed("e", skip="x")]
    finished = {"a": 50.0, "b": 70.0, "c": 30.0, "e": 1.0}  # d has not finished; e is skipped
    # a at its record (10), b at the mean of the records (10, 30: 20), c at its ceiling (4 x 5)
    assert forecast_of_finished(run, finished, {"a": 10.0, "c": 30.0, "x": 99.0}) == (50.0, 2)
    assert forecast_of_finished(run, finished, {}) == (None, 0)


def test_figure_13_renders_as_markdown():
    summary = {"median": 30.0, "n": 3}
    figure = {
        "per_project": {"torch-ppr": {"ours_s": summary, "plain_s": {"median": 25.0, "n": 3}}},
        "project_ratios": [1.2, 1.1],
        "invocation_ratios": [1.25, 1.15],
        "fixed_s": {"median": 2.0, "n": 3},
        "projections": {"bench projects": {"16 runners": {"wall_s": 1920.0, "ideal_s": 1875.0}}},
        "forecast_errors": [1.3],
        "real_run": None,
    }
    lines = DETAILS["13_ecosystem"](figure)
    assert lines[0] == (
        "torch-ppr: ecosystem run 30.0 s (median of 3), plain venv + pytest 25.0 s (median of 3)"
    )
    assert "1,000 projects (bench projects): 16 runners 32.0 min (ideal 31.2)" in lines


_TRACE = """\
import time: self [us] | cumulative | imported package
import time:        72 |         72 |   marshal
import time:       300 |        400 | encodings
import time:        50 |         50 |     torch_matrix.vocab.layout
import time:      1009 |       2158 |   torch_matrix.world.resultfiles
import time:     19612 |     457968 | torch_matrix.cli
50 cells: 48 compatible
import time:       120 |        120 | torch_matrix.cli.__main__
import time:       354 |        354 | json
import time:       354 |        354 | json
"""


def test_a_floor_imports_the_outermost_traced_modules_in_order_and_never_a_main():
    from benchmarks.floor import traced_modules

    assert traced_modules(_TRACE) == ["encodings", "torch_matrix.cli", "json"]


def _result_files(folder: Path, count: int, text: str = '{"ok": true}') -> Path:
    cells = folder / "run" / "cells"
    cells.mkdir(parents=True)
    for number in range(count):
        (cells / f"c{number}.json").write_text(text)
    return folder


def test_the_floor_script_reads_every_result_file_once_and_checks_their_number(tmp_path: Path):
    import subprocess
    import sys

    from benchmarks.floor import floor_script

    inputs = _result_files(tmp_path / "good", 3)
    (inputs / "run" / "notes.txt").write_text("not a result file")

    def floor(modules: list[str], folder: Path, files: int) -> subprocess.CompletedProcess[str]:
        script = floor_script(modules, folder, files)
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)

    done = floor(["json", "torch_matrix.vocab.layout"], inputs, 3)
    assert done.returncode == 0, done.stderr
    wrong_count = floor(["json"], inputs, 2000)
    assert wrong_count.returncode != 0
    assert "floor: 3 result files, expected 2000" in wrong_count.stderr
    # it decodes what it reads: a file that is not JSON stops it
    broken = floor(["json"], _result_files(tmp_path / "broken", 2, "{not json"), 2)
    assert broken.returncode != 0 and "JSONDecodeError" in broken.stderr
    # a module the command imported and this interpreter lacks stops it too
    missing = floor(["json", "no_such_module_for_a_floor"], inputs, 3)
    assert missing.returncode != 0 and "no_such_module_for_a_floor" in missing.stderr


def test_a_floor_is_stored_and_worded_as_seconds_and_a_ratio_to_python_c_pass():
    from benchmarks.floor import floor_phrase, floor_record

    floor = floor_record(2000, ["json"], [0.5, 0.4, 0.6], [0.3, 0.35, 0.4], [0.05] * 3, [0.02] * 3)
    assert floor["files"] == 2000 and floor["modules"] == 1
    assert floor["seconds"]["median"] == 0.5 and floor["cpu_seconds"]["median"] == 0.35
    assert floor["over_bare_python"] == pytest.approx(10.0)
    assert floor["cpu_over_bare_python"] == pytest.approx(17.5)
    assert floor_phrase(floor) == (
        "floor (interpreter + imports + one read of the 2,000 files) 0.500 s (cpu 0.350 s) = "
        "10.0x python -c pass"
    )
    assert floor_phrase({"error": "exited 1"}) == "floor NOT MEASURED: exited 1"
