"""Render a results JSON (``benchmarks/results/latest.json``) as the Markdown kept in README.md.

``python -m benchmarks.markdown [FILE]`` prints it; pure apart from reading the file, so the
README's figures are copied from the run, never typed by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from .stats import human_bytes


def _s(summary: Mapping[str, Any] | None, digits: int = 2) -> str:
    if not summary:
        return "-"
    return f"{summary['median']:.{digits}f} s (median of {summary['n']})"


def _x(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def _warm(f: Mapping[str, Any]) -> list[str]:
    b = f["ours_breakdown_median_s"]
    return [
        f"cell `{' '.join(f['pins'])}`: ours {_s(f['ours_s'])}, floor {_s(f['floor_s'])}, "
        f"virtualenv+pip {_s(f['virtualenv_pip_s'], 1)}",
        f"ours / floor {_x(f['ours_over_floor'])}; virtualenv+pip / ours {_x(f['virtualenv_pip_over_ours'], 1)}",
        f"ours, medians: nox uv venv {b['venv_s']:.2f} s, run_cell {b['cellrun_s']:.2f} s ("
        + ", ".join(
            f"{name} {seconds:.2f}"
            for name, seconds in b.items()
            if name not in ("venv_s", "cellrun_s")
        )
        + ")",
    ]


def _cold(f: Mapping[str, Any]) -> list[str]:
    return [
        f"{len(f['cells'])} cells, {f['unique_wheel_files']} unique wheel files, "
        f"{human_bytes(f['unique_wheel_bytes'])}; downloaded {human_bytes(f['downloaded_bytes'])} "
        f"(median of {f['repeats']} cold runs) -> {_x(f['downloaded_over_unique'], 3)} "
        f"(raw counter {_x(f['raw_rx_over_unique'], 3)}, calibration {f['counter_calibration']:.4f})",
        f"bandwidth {human_bytes(f['bandwidth_Bps'])}/s; cold wall {_s(f['cold_wall_s'], 1)} against "
        f"{f['ideal_download_s']:.1f} s for the unique bytes at that bandwidth ({_x(f['wall_over_ideal'], 1)})",
    ]


def _disk(f: Mapping[str, Any]) -> list[str]:
    same, cross = f["same_filesystem"], f.get("cache_on_other_filesystem", {})
    lines = [
        f"cache {human_bytes(same['cache_bytes'])}; cache + {same['n_venvs']} venvs "
        f"{human_bytes(same['cache_plus_venvs_bytes'])} -> {_x(same['linked_ratio'], 3)}; "
        f"as {same['n_venvs']} full copies (pip) {_x(same['full_copies_ratio'])}"
    ]
    if "tmpfs_cache" in cross:
        tmp, usual = cross["tmpfs_cache"], cross["usual_cache"]
        lines.append(
            f"cache on tmpfs, venvs on {cross['venv_fs']}: 3 venvs add "
            f"{human_bytes(tmp['bytes_added_by_venvs'])} (usual cache: "
            f"{human_bytes(usual['bytes_added_by_venvs'])}); cell start to verified venv {_s(tmp['ready_venv_s'])} "
            f"vs {_s(usual['ready_venv_s'])} ({_x(cross.get('ready_venv_slowdown'), 1)}); uv printed: "
            f"`{(tmp['uv_output_about_linking'] or ['nothing'])[0]}`"
        )
        lines.append(f'the tool\'s check says: "{cross["tool_warning"]}"')
    elif cross.get("error"):
        lines.append(f"cache on another filesystem: not measured ({cross['error']})")
    return lines


def _probes(f: Mapping[str, Any]) -> list[str]:
    main, naive = f["suite_vs_floor"], f["naive_run"]
    return [
        f"{f['probes']} probes: suite {_s(main['suite_s'] | {'n': main['repeats']}, 1)}, floor "
        f"{_s(main['floor_s'] | {'n': main['repeats']}, 1)} (fresh import {main['import_s']['median']:.1f} s + "
        f"probe work {main['probe_work_s']['median']:.1f} s) -> {_x(f['suite_over_floor'])}",
        f"naive (one fresh interpreter per probe): {naive['naive_s']['median']:.1f} s "
        f"({naive['repeats']} run) = {_x(f['naive_over_suite'], 1)} the suite",
    ]


def _scale(f: Mapping[str, Any]) -> list[str]:
    listing, rep = f.get("listing", {}), f["reporting"]
    first = (
        f"`nox -l`: {listing['matrix_sessions']} cells, {_s(listing['seconds'])}"
        if "seconds" in listing
        else f"`nox -l`: not measured ({listing.get('error', '?')})"
    )
    if "report_pins_one_process_s" not in rep:  # a result file from before the one-load report
        return [
            first,
            f"{rep['results']} results: report {_s(rep['report_s'])} + pins {_s(rep['pins_s'])} = "
            f"{_s(rep['report_plus_pins_s'])}",
        ]
    return [
        first,
        f"{rep['results']} results: `report --pins` (one load) {_s(rep['report_pins_one_process_s'])}, cpu "
        f"{rep['report_pins_one_process_cpu_s']['median']:.2f} s; as two processes report "
        f"{_s(rep['report_s'])} + pins {_s(rep['pins_s'])} = {_s(rep['report_plus_pins_two_processes_s'])}, "
        f"cpu {rep['report_plus_pins_two_processes_cpu_s']['median']:.2f} s",
        f"`report --html`: {_s(rep['report_html_s'])}, cpu {rep['report_html_cpu_s']['median']:.2f} s, "
        f"{rep['html_bytes'] / 1e6:.1f} MB; a bare `python -c pass` takes "
        f"{rep['bare_python_startup_s']['median']:.2f} s",
    ]


def _parallel(f: Mapping[str, Any]) -> list[str]:
    return [
        f"{len(f['cells'])} cells: sequential {_s(f['sequential_s'], 1)}, `-j {f['jobs']}` "
        f"{_s(f['parallel_s'], 1)} on {f['cpu_count']} CPUs -> speed-up {_x(f['speedup'])}; "
        f"results identical: {'yes' if f['results_identical'] else 'NO'}"
    ]


def _ecosystem(f: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{name}: ecosystem run {_s(p['ours_s'], 1)}, plain venv + pytest {_s(p['plain_s'], 1)}"
        for name, p in f["per_project"].items()
    ]
    lines.append(
        f"per-run ratios {[round(r, 2) for r in f['project_ratios']]}; whole invocation / plain "
        f"{[round(r, 2) for r in f['invocation_ratios']]}; fixed cost {_s(f['fixed_s'], 1)}"
    )
    for label, shown in f["projections"].items():
        lines.append(
            f"1,000 projects ({label}): "
            + ", ".join(
                f"{runners} {p['wall_s'] / 60:.1f} min (ideal {p['ideal_s'] / 60:.1f})"
                for runners, p in shown.items()
            )
        )
    lines.append(f"forecast / real, the larger way: {[round(e, 2) for e in f['forecast_errors']]}")
    real = f.get("real_run")
    if real:
        lines.append(
            f"real run {real['projects']} projects, {real['sum_s']:.0f} s of project wall time; "
            f"forecast {real['forecast_s']} ({real['forecast_source']}) -> "
            f"{_x(f.get('real_forecast_error'))}"
        )
    return lines


DETAILS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "1_warm_env": _warm,
    "2_cold_matrix": _cold,
    "3_disk": _disk,
    "4_probe_suite": _probes,
    "5_scale": _scale,
    "6_parallel": _parallel,
    "13_ecosystem": _ecosystem,
}


def render(document: Mapping[str, Any]) -> str:
    machine = document["machine"]
    lines = [
        f"`{document['command']}`, {document['started_at']} to {document['finished_at']}"
        + (" (quick: not the real figures)" if document.get("quick") else ""),
        "",
        f"Machine: {machine.get('cpu_count')} CPUs ({machine.get('cpu_model')}), {machine.get('memory_gib')} GiB, "
        f"disk free {machine.get('disk_free_gib')}, filesystems {machine.get('filesystems')}, "
        f"load average at start {machine.get('load_average')}; Python {machine.get('python')}, "
        f"{machine.get('uv')}, nox {machine.get('nox')}, {machine.get('pip')}, {machine.get('virtualenv')}.",
        "",
        "| figure | target | measured | status |",
        "| --- | --- | --- | --- |",
    ]
    for target in document["targets"]:
        value = "-" if target["value"] is None else f"{target['value']:.3g}{target['unit']}"
        lines.append(
            f"| {target['figure']} | {target['name']} {target['op']} {target['limit']:g}{target['unit']} "
            f"| {value} | **{target['status']}** |"
        )
    for key, figure in document["figures"].items():
        lines += [
            "",
            f"**{key}**"
            + (f" ({figure['figure_wall_s']:.0f} s)" if "figure_wall_s" in figure else ""),
        ]
        if "error" in figure:
            lines.append(f"- not measured: {figure['error']}")
            continue
        try:
            lines += [f"- {line}" for line in DETAILS[key](figure)]
        except (KeyError, TypeError) as error:  # an older or partial document: say so, do not crash
            lines.append(f"- (cannot render: missing {error})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path(__file__).parent / "results" / "latest.json"
    sys.stdout.write(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
