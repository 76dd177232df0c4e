"""Entry point: ``python -m benchmarks.run [--quick] [--out FILE] [--only 1,3]`` (``nox -s bench``).

Runs the figures in order, prints the machine facts, every figure and every target as
MET / MISSED / NOT MEASURED, and writes everything to a JSON file. A figure that cannot be
measured (a command failed, a module is missing) is reported as such; the others still run.
Exit status: 0 when the run completed (whatever the targets say), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from .common import REPO_ROOT, Context, remove_tree
from .machine import load_average, facts_lines, machine_facts
from .stats import Target, tally, targets_for

# (key, module): one module per figure, run in this order (later figures reuse earlier venvs).
FIGURES = (
    ("1_warm_env", "benchmarks.warm_env"),
    ("2_cold_matrix", "benchmarks.cold_matrix"),
    ("3_disk", "benchmarks.disk"),
    ("4_probe_suite", "benchmarks.probe_figure"),
    ("5_scale", "benchmarks.scale"),
    ("6_parallel", "benchmarks.parallel"),
    ("7_history", "benchmarks.history"),
    ("8_speed", "benchmarks.speed"),
    ("9_proof", "benchmarks.proof"),
    ("10_verify_memo", "benchmarks.verify_memo"),
    ("11_budget", "benchmarks.budget"),
    ("12_wheel_facts", "benchmarks.wheel_facts"),
    ("13_ecosystem", "benchmarks.ecosystem_scale"),
)
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "latest.json"
RESULTS_SCHEMA = "torch-matrix/bench"
RESULTS_VERSION = 1


def _default_work() -> Path:
    # Next to uv's cache by default, so venvs and cache share a filesystem (hardlinks work).
    cache = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
    return (
        cache.parent / f"torch-matrix-bench-{os.getpid()}"
    )  # per run: two runs never share scratch


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="reduced smoke run: light cells, fewer repeats"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})"
    )
    parser.add_argument("--only", default="", help="comma-separated figure numbers, e.g. 1,3")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch dir for venvs and fresh caches (default: next to uv's cache)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    parser.add_argument(
        "--history-scale",
        default="365x2500",
        metavar="NIGHTSxCELLS",
        help="figure 7's generated history (default 365x2500: a year of a 2,500-cell nightly)",
    )
    parser.add_argument(
        "--ecosystem-results",
        type=Path,
        default=None,
        metavar="DIR",
        help="figure 13: a real ecosystem run's directory, projected to 1,000 projects too",
    )
    parser.add_argument(
        "--ecosystem-durations-from",
        type=Path,
        default=None,
        metavar="DIR",
        help="figure 13: an earlier ecosystem run whose recorded durations forecast "
        "--ecosystem-results' run (as its --durations-from would)",
    )
    return parser.parse_args(argv)


def selected_figures(only: str) -> list[tuple[str, str]]:
    if not only.strip():
        return list(FIGURES)
    wanted = {part.strip() for part in only.split(",") if part.strip()}
    unknown = wanted - {key.split("_")[0] for key, _ in FIGURES}
    if unknown:
        raise SystemExit(
            f"benchmarks: unknown figure(s) {sorted(unknown)}; choose from 1-{len(FIGURES)}"
        )
    return [(key, module) for key, module in FIGURES if key.split("_")[0] in wanted]


def run_figure(key: str, module_name: str, ctx: Context) -> dict[str, Any]:
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    try:
        result = module.measure(ctx)
    except Exception as error:  # noqa: BLE001 - one broken figure must not hide the others
        ctx.log(f"  NOT MEASURED: {type(error).__name__}: {error}")
        result = {
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc()[-3000:],
            "targets": targets_for(key, getattr(module, "GOALS", {}), {}),
        }
    result["figure_wall_s"] = round(time.perf_counter() - started, 2)
    return result


def _jsonable(value: Any) -> Any:
    if isinstance(value, Target):
        return value.to_json()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figures = selected_figures(args.only)
    for option, given in (
        ("--ecosystem-results", args.ecosystem_results),
        ("--ecosystem-durations-from", args.ecosystem_durations_from),
    ):
        if given is not None and not (given / "run.json").is_file():
            print(
                f"benchmarks: {option} {given}: no run.json in it\n"
                "hint: give an ecosystem run's directory (the --out of `torch-matrix ecosystem run`)",
                file=sys.stderr,
            )
            return 2
    work = (args.work or _default_work()).resolve()
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(work=work, quick=args.quick, log=lambda line: print(line, flush=True))
    ctx.facts["history_scale"] = args.history_scale
    if args.ecosystem_results is not None:
        ctx.facts["ecosystem_results"] = str(args.ecosystem_results.resolve())
    if args.ecosystem_durations_from is not None:
        ctx.facts["ecosystem_durations_from"] = str(args.ecosystem_durations_from.resolve())
    command = "python -m benchmarks.run " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

    facts = machine_facts(work)
    print(
        f"torch-matrix benchmarks ({'quick' if args.quick else 'full'}), {started_at}", flush=True
    )
    print("machine:", *facts_lines(facts), sep="\n", flush=True)

    results: dict[str, Any] = {}
    try:
        for key, module_name in figures:
            print(f"\n== figure {key}", flush=True)
            results[key] = run_figure(key, module_name, ctx)
    finally:
        if not args.keep:
            remove_tree(work)

    targets = [t for result in results.values() for t in result.get("targets", [])]
    print("\n== targets", flush=True)
    for target in targets:
        print("  " + target.line(), flush=True)
    counts = tally(targets)
    print("  " + ", ".join(f"{n} {status}" for status, n in counts.items()), flush=True)

    document = {
        "schema": RESULTS_SCHEMA,
        "schema_version": RESULTS_VERSION,
        "command": command,
        "quick": args.quick,
        "started_at": started_at,
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": facts,
        "load_average_at_end": load_average(),
        "figures": results,
        "targets": targets,
        "tally": counts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_jsonable(document), indent=2) + "\n")
    print(f"\nwrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
