"""Figure 5: planning and reporting at scale.

(a) ``nox -l`` on a generated 200-cell spec (25 real torch releases x 4 Pythons x 2 numpy
    values, paired torchvision read from the index) with the metadata cache warm: the first
    listing warms it and is not counted. Target: under 1 s (issue 24).
(b) The report and the pins over 2,000 synthetic cell results, end to end as a user runs them:
    ``torch-matrix report DIR --pins`` (one fresh process: the results are loaded and validated once,
    then the table, summary.md, results.json and the pins are written). Target: under 1 s. For
    comparison, the same outputs from two fresh processes (``report``, then ``pins``: two loads).
(c) ``torch-matrix report DIR --html FILE`` over the same 2,000 results (a fresh process, HTML
    rendered with Jinja2). Target: under 2 s.

Each figure is wall-clock time; the CPU time (user + system) of the same processes is recorded
next to it, since a loaded machine stretches wall time and not CPU time. Bytecode caches are
allowed (as for an installed package), whatever PYTHONDONTWRITEBYTECODE says in the caller.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from typing import Any

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

from .common import REPO_ROOT, BenchError, Context, run_command
from .stats import summarize, targets_for

FIGURE = "5_scale"
GOALS = {
    "nox -l, 200 cells, warm cache": ("<", 1.0, " s"),
    "report + pins, 2000 results": ("<", 1.0, " s"),
    "HTML report, 2000 results": ("<", 2.0, " s"),
    "HTML page size, 2000 results": ("<=", 3.0, " MB"),
}
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
NUMPY = ("<2", ">=2")
NUMPY_TOKENS = {"<2": "lt2", ">=2": "ge2", "==1.26.*": "1.26", "==2.0.*": "2.0", "==2.1.*": "2.1"}
STANDARD_PROBES = (
    "install_sanity",
    "lazy_cuda_init",
    "cuda_devices",
    "determinism",
    "training_step",
    "numpy_interop",
    "checkpoint_roundtrip",
    "dataloader_workers",
    "distributed_gloo",
    "mixed_precision",
    "torchscript",
    "torch_compile",
    "torch_export",
    "onnx_export",
    "torchvision_transforms",
    "torchvision_model",
    "torchvision_ops",
)


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
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_command(listing, env=env, cwd=REPO_ROOT)
        runs.append(time.perf_counter() - start)
    summary = summarize(runs)
    ctx.log(
        f"  nox -l: {len(sessions)} matrix sessions, median {summary['median']:.2f} s over {repeats} runs"
    )
    return {"torch_versions": versions, "matrix_sessions": len(sessions), "seconds": summary}


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
    env = {"PYTHONDONTWRITEBYTECODE": ""}  # empty: off; an installed package has its .pyc files
    for command in commands.values():  # warm-up: bytecode, index metadata for coverage, page cache
        run_command(command, cwd=REPO_ROOT, env=env)
    runs: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            run_command(command, cwd=REPO_ROOT, env=env)
            runs[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    summaries = {name: summarize(values) for name, values in runs.items()}
    cpu_summaries = {name: summarize(values) for name, values in cpu.items()}
    separate = summarize([a + b for a, b in zip(runs["report"], runs["pins"])])
    separate_cpu = summarize([a + b for a, b in zip(cpu["report"], cpu["pins"])])
    html_size = (outputs / "html" / "report.html").stat().st_size
    ctx.log(
        f"  {len(results)} results: report --pins {summaries['report --pins']['median']:.2f} s "
        f"(cpu {cpu_summaries['report --pins']['median']:.2f} s); report + pins as two processes "
        f"{separate['median']:.2f} s (cpu {separate_cpu['median']:.2f} s); report --html "
        f"{summaries['report --html']['median']:.2f} s (cpu {cpu_summaries['report --html']['median']:.2f} s, "
        f"{html_size / 1e6:.1f} MB) (medians of {repeats})"
    )
    python_start = summarize(_python_startup() for _ in range(repeats))
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
        "bare_python_startup_s": python_start,
    }


def _python_startup() -> float:
    start = time.perf_counter()
    run_command([sys.executable, "-c", "pass"])
    return time.perf_counter() - start


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
    values["report + pins, 2000 results"] = reporting["report_pins_one_process_s"]["median"]
    values["HTML report, 2000 results"] = reporting["report_html_s"]["median"]
    values["HTML page size, 2000 results"] = reporting["html_bytes"] / 1e6
    result["targets"] = targets_for(
        FIGURE,
        GOALS,
        values,
        {
            "nox -l, 200 cells, warm cache": f"median of {repeats}, after one warm-up listing",
            "report + pins, 2000 results": f"`report --pins`, one fresh process, median of {repeats} (two "
            f"processes, report then pins: "
            f"{reporting['report_plus_pins_two_processes_s']['median']:.2f} s)",
            "HTML report, 2000 results": f"`report --html`, one fresh process, median of {repeats}",
            "HTML page size, 2000 results": "report.html of the same run (MB = 10^6 bytes)",
        },
    )
    return result
