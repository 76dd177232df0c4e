"""Figure 5: planning and reporting at scale.

(a) ``nox -l`` on a generated 200-cell spec (25 real torch releases x 4 Pythons x 2 numpy
    values, paired torchvision read from the index) with the metadata cache warm: the first
    listing warms it and is not counted. Target: under 0.3 s (issue 46; it was 1 s, issue 24).
    Its floor is timed beside it: nox listing a noxfile of one empty session (nox's own start).
(b) The report and the pins over 2,000 synthetic cell results, end to end as a user runs them:
    ``torch-matrix report DIR --pins`` (one fresh process: the results are loaded and validated once,
    then the table, summary.md, results.json and the pins are written). Target: under 0.5 s
    (issue 46; it was 1 s). For comparison, the same outputs from two fresh processes
    (``report``, then ``pins``: two loads).
(c) ``torch-matrix report DIR --html FILE`` over the same 2,000 results (a fresh process, HTML
    rendered with Jinja2). Target: under 0.5 s (issue 46; it was 2 s).

Each figure is wall-clock time; the CPU time (user + system) of the same processes is recorded
next to it, since a loaded machine stretches wall time and not CPU time, and so is a bare
``python -c pass`` timed in the same rounds (interleaved): each figure is also given as a ratio to
it, which a loaded machine stretches less than either. Beside (b) and (c), in the same rounds, each
command's floor (benchmarks/floor.py): a fresh ``python -c`` that imports the modules the command
imports (traced with ``-X importtime``) and reads and decodes the 2,000 result files once; context
for the target, never part of it. Bytecode caches are allowed (as for an
installed package), whatever PYTHONDONTWRITEBYTECODE says in the caller.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from typing import Any

from torch_matrix.probes.discovery import STANDARD_PROBES
from torch_matrix.vocab.records import (
    FAIL,
    INSTALL_ERROR,
    INSTALLED,
    PASS,
    SKIP,
    UNSATISFIABLE,
    Cell,
    CellResult,
    InstallOutcome,
    ProbeResult,
)

from .common import REPO_ROOT, BenchError, Context, run_command, traced_imports
from .floor import floor_phrase, floor_record, floor_script
from .stats import ratio, summarize, targets_for

FIGURE = "5_scale"
GOALS = {
    "nox -l, 200 cells, warm cache": ("<", 0.3, " s"),
    "report --pins, 2000 results": ("<", 0.5, " s"),
    "HTML report, 2000 results": ("<", 0.5, " s"),
    "HTML page size, 2000 results": ("<=", 3.0, " MB"),
}
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
NUMPY = ("<2", ">=2")
NUMPY_TOKENS = {"<2": "lt2", ">=2": "ge2", "==1.26.*": "1.26", "==2.0.*": "2.0", "==2.1.*": "2.1"}


def released_torch(count: int) -> list[str]:
    """The newest ``count`` public torch releases >= 2.0, from the tool's (cached) index."""
    from torch_matrix.world.index import open_index
    from torch_matrix.spec.parse import parse_spec

    spec = parse_spec(
        'name = "x"\npython = ["3.11"]\ntorch = { versions = ">=2.0" }\n',
        "bench",
        environ=os.environ,
    )
    versions = [
        v
        for v in open_index(spec.index).versions("torch")
        if not v.is_prerelease and not v.local and v.release >= (2, 0)
    ]
    return [str(v) for v in sorted(set(versions))[-count:]]


def spec_200(torch_versions: list[str]) -> str:
    torch = ", ".join(f'"{v}"' for v in torch_versions)
    pythons = ", ".join(f'"{p}"' for p in PYTHONS)
    numpy = ", ".join(f'"{n}"' for n in NUMPY)
    return (
        f'name = "bench200"\npython = [{pythons}]\ntorch = [{torch}]\ntorchvision = "paired"\n'
        f'variant = ["default"]\n\n[extras]\nnumpy = [{numpy}]\n'
    )


def measure_listing(ctx: Context, repeats: int) -> dict[str, Any]:
    versions = released_torch(25)
    spec = ctx.dir("scale") / "matrix.toml"
    spec.write_text(spec_200(versions))
    env = {
        "TORCH_MATRIX_SPEC": str(spec),
        "TORCH_MATRIX_RESULTS": str(ctx.work / "scale" / "results"),
    }
    listing = [sys.executable, "-m", "nox", "-f", str(REPO_ROOT / "noxfile.py"), "-l"]
    warm = run_command(listing + ["--json"], env=env, cwd=REPO_ROOT)  # warms the metadata cache
    sessions = [
        s for s in json.loads(warm.stdout[warm.stdout.index("[") :]) if s.get("name") == "matrix"
    ]
    # The floor: nox itself, listing a noxfile of one empty session (its own imports and start).
    empty = ctx.dir("scale-empty-noxfile") / "noxfile.py"
    empty.write_text("import nox\n\n\n@nox.session(python=False)\ndef empty(session):\n    pass\n")
    commands = {
        "nox -l": listing,
        "nox -l, empty noxfile": [sys.executable, "-m", "nox", "-f", str(empty), "-l"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    bytecode = {"PYTHONDONTWRITEBYTECODE": ""}  # an installed tool has its .pyc files
    for command in commands.values():
        run_command(command, env={**env, **bytecode}, cwd=REPO_ROOT)
    walls, cpus = timed_rounds(commands, repeats, {**env, **bytecode})
    summary = summarize(walls["nox -l"])
    floor = summarize(walls["nox -l, empty noxfile"])
    bare = summarize(walls["python -c pass"])
    cpu = {name: summarize(values) for name, values in cpus.items()}
    ctx.log(
        f"  nox -l: {len(sessions)} matrix sessions, median {summary['median']:.3f} s over {repeats} "
        f"runs (cpu {cpu['nox -l']['median']:.3f} s) = {ratio(summary['median'], bare['median']):.1f}x "
        f"python -c pass ({bare['median']:.3f} s); nox's floor (an empty noxfile) "
        f"{floor['median']:.3f} s = {ratio(floor['median'], bare['median']):.1f}x (load {load_now()})"
    )
    return {
        "torch_versions": versions,
        "matrix_sessions": len(sessions),
        "seconds": summary,
        "cpu_seconds": cpu["nox -l"],
        "floor_empty_noxfile_s": floor,
        "floor_empty_noxfile_cpu_s": cpu["nox -l, empty noxfile"],
        "bare_python_s": bare,
        "over_bare_python": ratio(summary["median"], bare["median"]),
        "floor_over_bare_python": ratio(floor["median"], bare["median"]),
        "load_average": load_now(),
    }


def timed_rounds(
    commands: dict[str, list[str]], repeats: int, env: dict[str, str]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each command once per round, ``repeats`` rounds (interleaved: a load that comes and goes
    falls on all of them): wall seconds and CPU seconds (user + system) of each run."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            run_command(command, cwd=REPO_ROOT, env=env)
            walls[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def load_now() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def synthetic_results(count: int, seed: int = 0) -> list[CellResult]:
    """``count`` finished cells with a realistic mix: mostly passing, a few real-looking findings."""
    rng = random.Random(seed)
    torches = [f"2.{minor}.{patch}" for minor in range(0, 13) for patch in range(0, 3)][:32]
    variants = ("default", "cpu", "cu121", "cu124")
    numpys = tuple(NUMPY_TOKENS)
    results = []
    for torch in torches:
        for python in PYTHONS:
            for variant in variants:
                for numpy in numpys:
                    if len(results) == count:
                        return results
                    results.append(_synthetic_cell(rng, torch, python, variant, numpy))
    if len(results) < count:
        raise ValueError(f"the synthetic grid holds only {len(results)} cells")
    return results


def _synthetic_cell(
    rng: random.Random, torch: str, python: str, variant: str, numpy: str
) -> CellResult:
    minor = int(torch.split(".")[1])
    vision = f"0.{minor + 15}.{torch.split('.')[2]}"
    token = NUMPY_TOKENS[numpy]
    cell_id = "-".join(
        p
        for p in (
            f"t{torch}",
            None if variant == "default" else variant,
            f"py{python}",
            f"np{token}",
        )
        if p
    )
    cell = Cell(
        id=cell_id,
        axes={
            "python": python,
            "torch": torch,
            "torchvision": "",
            "variant": variant,
            "numpy": numpy,
        },
        requirements=(f"torch=={torch}", f"torchvision=={vision}", f"numpy{numpy}"),
        probes=STANDARD_PROBES,
        required_probes=("install_sanity", "training_step", "numpy_interop"),
    )
    roll = rng.random()
    if python == "3.13" and minor < 5:
        install = InstallOutcome(
            UNSATISFIABLE,
            message=f"torch=={torch} has no wheels with a matching Python ABI tag (cp313)",
        )
        probes: tuple[ProbeResult, ...] = ()
    elif roll < 0.02:
        install = InstallOutcome(
            INSTALL_ERROR, message="Failed to download: connection reset", attempts=3
        )
        probes = ()
    else:
        install = InstallOutcome(
            INSTALLED,
            command=("uv", "pip", "install", *cell.requirements),
            resolved={
                "torch": torch,
                "torchvision": vision,
                "numpy": "2.1.3" if ">=2" in numpy or "==2" in numpy else "1.26.4",
            },
        )
        probes = tuple(_synthetic_probe(name, torch, numpy, variant) for name in STANDARD_PROBES)
    return CellResult(
        cell=cell,
        fingerprint=cell.fingerprint(),
        install=install,
        probes=probes,
        interpreter={"version": f"{python}.9", "path": f"/usr/bin/python{python}"},
        platform={"system": "Linux", "machine": "x86_64"},
        timings={"install": 1.0, "probes": 9.0, "total": 10.5},
        started_at="2026-11-21T08:00:00+00:00",
        finished_at="2026-11-21T08:00:10+00:00",
        tool_version="bench",
    )


def _synthetic_probe(name: str, torch: str, numpy: str, variant: str) -> ProbeResult:
    if name in ("cuda_devices", "mixed_precision") or (
        name == "lazy_cuda_init" and variant == "cpu"
    ):
        return ProbeResult(name, SKIP, "no CUDA device", 0.01)
    if name == "numpy_interop" and torch.startswith("2.2.") and ">=2" in numpy:
        return ProbeResult(
            name,
            FAIL,
            "torch.from_numpy rejects numpy 2 arrays",
            0.2,
            observed="TypeError",
            expected="tensor",
            repro="import numpy, torch; torch.from_numpy(numpy.zeros(2))",
        )
    if name == "training_step" and torch == "2.1.1":
        return ProbeResult(
            name, FAIL, "loss is NaN after one step", 0.8, observed="nan", expected="finite"
        )
    return ProbeResult(name, PASS, "", 0.1, evidence={"ok": True})


def measure_reporting(ctx: Context, repeats: int) -> dict[str, Any]:
    from torch_matrix.world.results import write_result

    root = ctx.dir("scale-results")
    outputs = ctx.dir("scale-outputs")  # outside the results root, or the next run would read them
    cells_dir = root / "bench" / "cells"
    results = synthetic_results(2000)
    for result in results:
        write_result(result, cells_dir)
    written = len(list(cells_dir.glob("*.json")))
    if written != len(results):
        raise BenchError(
            f"synthetic results: {written} files for {len(results)} cells (duplicate ids)"
        )
    cli = [sys.executable, "-m", "torch_matrix.cli"]
    commands = {
        "report --pins": cli + ["report", str(root), "--out", str(outputs / "one"), "--pins"],
        "report": cli + ["report", str(root), "--out", str(outputs / "report")],
        "pins": cli + ["pins", str(root), "--out", str(outputs / "pins")],
        "report --html": cli
        + [
            "report",
            str(root),
            "--out",
            str(outputs / "html"),
            "--html",
            str(outputs / "html" / "report.html"),
        ],
    }
    commands["python -c pass"] = [sys.executable, "-c", "pass"]  # the floor of a fresh process
    env = {"PYTHONDONTWRITEBYTECODE": ""}  # empty: off; an installed package has its .pyc files
    traced: dict[str, list[str]] = {"report --pins": [], "report --html": []}
    # warm-up: bytecode, index metadata for coverage, page cache
    for name, command in commands.items():
        if name in traced:  # the modules it imports, for its floor
            traced[name] = traced_imports(command, env=env)[1]
        else:
            run_command(command, cwd=REPO_ROOT, env=env)
    # Each command's floor, timed in the same rounds: a fresh interpreter, the command's imports
    # and one read of the result files (context for the target, never part of it).
    not_measured: dict[str, str] = {}
    for name, modules in traced.items():
        floor_command = [sys.executable, "-c", floor_script(modules, root, len(results))]
        try:  # warm-up, and the check that it reads every file
            run_command(floor_command, cwd=REPO_ROOT, env=env)
        except BenchError as error:
            not_measured[name] = str(error)[-300:]
            continue
        commands[f"floor of {name}"] = floor_command
    runs, cpu = timed_rounds(commands, repeats, env)
    floors = {
        name: {"error": not_measured[name]}
        if name in not_measured
        else floor_record(
            len(results),
            modules,
            runs[f"floor of {name}"],
            cpu[f"floor of {name}"],
            runs["python -c pass"],
            cpu["python -c pass"],
        )
        for name, modules in traced.items()
    }
    summaries = {name: summarize(values) for name, values in runs.items()}
    cpu_summaries = {name: summarize(values) for name, values in cpu.items()}
    separate = summarize([a + b for a, b in zip(runs["report"], runs["pins"])])
    separate_cpu = summarize([a + b for a, b in zip(cpu["report"], cpu["pins"])])
    html_size = (outputs / "html" / "report.html").stat().st_size
    bare = summaries["python -c pass"]["median"]
    ctx.log(
        f"  {len(results)} results: report --pins {summaries['report --pins']['median']:.3f} s "
        f"(cpu {cpu_summaries['report --pins']['median']:.3f} s, "
        f"{ratio(summaries['report --pins']['median'], bare):.1f}x python -c pass); report + pins "
        f"as two processes {separate['median']:.2f} s (cpu {separate_cpu['median']:.2f} s); report "
        f"--html {summaries['report --html']['median']:.3f} s (cpu "
        f"{cpu_summaries['report --html']['median']:.3f} s, "
        f"{ratio(summaries['report --html']['median'], bare):.1f}x, {html_size / 1e6:.1f} MB); "
        f"python -c pass {bare:.3f} s (medians of {repeats}; load {load_now()})"
    )
    for name, floor in floors.items():
        ctx.log(f"  {name}: {floor_phrase(floor)}")
    return {
        "results": len(results),
        "report_pins_one_process_s": summaries["report --pins"],
        "report_pins_one_process_cpu_s": cpu_summaries["report --pins"],
        "report_s": summaries["report"],
        "pins_s": summaries["pins"],
        "report_plus_pins_two_processes_s": separate,
        "report_plus_pins_two_processes_cpu_s": separate_cpu,
        "report_html_s": summaries["report --html"],
        "report_html_cpu_s": cpu_summaries["report --html"],
        "html_bytes": html_size,
        "bare_python_startup_s": summaries["python -c pass"],
        "over_bare_python": {
            name: ratio(summary["median"], bare) for name, summary in summaries.items()
        },
        "floors": floors,
        "load_average": load_now(),
    }


def _times(found: dict[str, Any], key: str) -> str:
    """``12.3x python -c pass`` from a figure's ratio, or ``-``."""
    value = found.get(key)
    return f"{value:.1f}x python -c pass (load {load_now()})" if value is not None else "-"


def measure(ctx: Context) -> dict[str, Any]:
    repeats = 3 if ctx.quick else 5
    values: dict[str, float | None] = {}
    result: dict[str, Any] = {"repeats": repeats}
    try:
        result["listing"] = listing = measure_listing(ctx, repeats)
        if listing["matrix_sessions"] == 200:
            values["nox -l, 200 cells, warm cache"] = listing["seconds"]["median"]
        else:
            result["listing"]["problem"] = (
                f"expected 200 sessions, got {listing['matrix_sessions']}"
            )
    except BenchError as error:
        result["listing"] = {"error": str(error)}
        ctx.log(f"  nox -l NOT MEASURED: {error}")
    result["reporting"] = reporting = measure_reporting(ctx, repeats)
    values["report --pins, 2000 results"] = reporting["report_pins_one_process_s"]["median"]
    values["HTML report, 2000 results"] = reporting["report_html_s"]["median"]
    values["HTML page size, 2000 results"] = reporting["html_bytes"] / 1e6
    result["targets"] = targets_for(
        FIGURE,
        GOALS,
        values,
        {
            "nox -l, 200 cells, warm cache": f"median of {repeats}, after one warm-up listing; "
            + _times(result["listing"], "over_bare_python")
            + (
                f"; nox's floor (an empty noxfile) {result['listing']['floor_over_bare_python']:.1f}x"
                if "floor_over_bare_python" in result["listing"]
                else ""
            ),
            "report --pins, 2000 results": f"one fresh process, median of {repeats}; "
            + _times(reporting["over_bare_python"], "report --pins")
            + f" (two processes, report then pins: "
            f"{reporting['report_plus_pins_two_processes_s']['median']:.2f} s); "
            + floor_phrase(reporting["floors"]["report --pins"]),
            "HTML report, 2000 results": f"`report --html`, one fresh process, median of {repeats}; "
            + _times(reporting["over_bare_python"], "report --html")
            + "; "
            + floor_phrase(reporting["floors"]["report --html"]),
            "HTML page size, 2000 results": "report.html of the same run (MB = 10^6 bytes)",
        },
    )
    return result
