"""What the probe runner's isolation costs: the suite against its floor and against a naive runner.

- **suite**: ``python -m torch_matrix.probes`` as a cell runs it (zygote + forked children).
- **floor**: one fresh ``import torch, torchvision`` plus the probes' own measured work
  (the sum of their ``duration_s`` in that same suite run): no runner could do less.
- **naive**: ``python -m torch_matrix.probes --isolation pristine``: one fresh interpreter per probe,
  each paying the import itself.

Figures are medians over ``repeats`` runs; ratios are medians of per-run ratios.
Usage: ``python -m benchmarks.probe_suite /path/to/venv/bin/python [--repeats 3] [--json-out F]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
FLOOR_IMPORT = "import torch\ntry:\n    import torchvision\nexcept Exception:\n    pass\n"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _timed(cmd: Sequence[str], timeout: float) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        list(cmd),
        env=_env(),
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(
            "%s exited %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr.decode()[-2000:])
        )
    return elapsed


def _suite(venv_python: str, extra: Sequence[str], timeout: float) -> tuple[float, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
        out = os.path.join(tmp, "probes.json")
        wall = _timed(
            [venv_python, "-m", "torch_matrix.probes", "--out", out, "--quiet"] + list(extra),
            timeout,
        )
        with open(out) as handle:
            return wall, json.load(handle)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median": _median(values),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "runs": [round(v, 3) for v in values],
    }


def measure_probe_suite(
    venv_python: str,
    repeats: int = 3,
    select: Sequence[str] = (),
    naive: bool = True,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Run floor, suite and (optionally) naive ``repeats`` times each, interleaved; return the figures."""
    extra = ["--select", ",".join(select)] if select else []
    imports, suites, works, navs, ready, prewarms, per_probe = [], [], [], [], [], [], {}
    statuses: dict[str, str] = {}
    for _ in range(repeats):
        imports.append(_timed([venv_python, "-c", FLOOR_IMPORT], timeout))
        wall, data = _suite(venv_python, extra, timeout)
        suites.append(wall)
        works.append(sum(float(r.get("duration_s", 0.0)) for r in data["results"]))
        ready.append(float(data.get("zygote", {}).get("ready_s", 0.0)))
        prewarms.append(float((data.get("zygote", {}).get("prewarm") or {}).get("seconds", 0.0)))
        for result in data["results"]:
            per_probe.setdefault(result["name"], {"shared": [], "pristine": []})["shared"].append(
                float(result.get("duration_s", 0.0))
            )
            statuses[result["name"]] = result["status"]
        if naive:
            wall, data = _suite(venv_python, extra + ["--isolation", "pristine"], timeout)
            navs.append(wall)
            for result in data["results"]:
                per_probe.setdefault(result["name"], {"shared": [], "pristine": []})[
                    "pristine"
                ].append(float(result.get("duration_s", 0.0)))
    floors = [i + w for i, w in zip(imports, works)]
    report = {
        "venv_python": venv_python,
        "repeats": repeats,
        "probes": len(per_probe),
        "import_s": _summary(imports),
        "probe_work_s": _summary(works),
        "floor_s": _summary(floors),
        "suite_s": _summary(suites),
        "zygote_ready_s": _summary(ready),
        # Lazy imports (torch._dynamo) moved out of the probes into the zygote: part of the
        # probes' work that the suite pays once, so the fair floor includes it.
        "prewarm_s": _summary(prewarms),
        "floor_with_prewarm_s": _summary([f + p for f, p in zip(floors, prewarms)]),
        "suite_over_floor_with_prewarm": _median(
            [s / (f + p) for s, f, p in zip(suites, floors, prewarms) if f + p]
        ),
        "runner_overhead_s": _summary([s - r - w for s, r, w in zip(suites, ready, works)]),
        "naive_s": _summary(navs) if navs else None,
        "suite_over_floor": _median([s / f for s, f in zip(suites, floors) if f]),
        "suite_overhead_s": _median([s - f for s, f in zip(suites, floors)]),
        "naive_over_suite": _median([n / s for n, s in zip(navs, suites) if s]) if navs else None,
        "per_probe": {
            name: {
                "status": statuses.get(name),
                "shared_s": _median(v["shared"]),
                "pristine_s": _median(v["pristine"]),
            }
            for name, v in per_probe.items()
        },
    }
    return report


def format_table(report: dict[str, Any]) -> str:
    def cell(value: Any) -> str:
        return "-" if value is None else "%.2f" % value

    rows = [
        ("one fresh import torch, torchvision", report["import_s"]["median"]),
        ("probes' own work (sum of duration_s)", report["probe_work_s"]["median"]),
        ("floor = import + work", report["floor_s"]["median"]),
        ("suite: python -m torch_matrix.probes (zygote + fork)", report["suite_s"]["median"]),
        ("  of which zygote ready (import + prewarm)", report["zygote_ready_s"]["median"]),
        ("  of which prewarm (torch._dynamo, once)", report["prewarm_s"]["median"]),
        ("  runner overhead (suite - ready - work)", report["runner_overhead_s"]["median"]),
        ("floor + prewarm (lazy imports paid once)", report["floor_with_prewarm_s"]["median"]),
        ("naive: one fresh interpreter per probe", (report["naive_s"] or {}).get("median")),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [
        "probe suite, %s, %d probes, median of %d run(s)"
        % (report["venv_python"], report["probes"], report["repeats"]),
        "%-*s  %9s" % (width, "measure", "seconds"),
    ]
    lines += ["%-*s  %9s" % (width, name, cell(value)) for name, value in rows]
    lines.append(
        "suite / floor: %s   suite / (floor + prewarm): %s   suite - floor: %s s   naive / suite: %s"
        % (
            cell(report["suite_over_floor"]),
            cell(report["suite_over_floor_with_prewarm"]),
            cell(report["suite_overhead_s"]),
            cell(report["naive_over_suite"]),
        )
    )
    lines.append("")
    lines.append("%-24s %-11s %9s %9s" % ("probe", "status", "shared_s", "fresh_s"))
    for name, row in report["per_probe"].items():
        lines.append(
            "%-24s %-11s %9s %9s"
            % (name, row["status"], cell(row["shared_s"]), cell(row["pristine_s"]))
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.probe_suite", description=__doc__.splitlines()[0]
    )
    parser.add_argument("venv_python", help="the cell's interpreter, e.g. .venv/bin/python")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--select", default="", help="comma-separated probe names (default: all)")
    parser.add_argument(
        "--no-naive", action="store_true", help="skip the slow one-interpreter-per-probe runs"
    )
    parser.add_argument("--json-out", help="write the figures here")
    args = parser.parse_args(argv)
    report = measure_probe_suite(
        args.venv_python,
        args.repeats,
        [s for s in args.select.split(",") if s],
        naive=not args.no_naive,
    )
    print(format_table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
