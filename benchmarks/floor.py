"""Pure helpers for a command's floor (issue 46): a fresh interpreter that imports the modules the
command imports and reads and decodes its input files once, nothing else.

The modules come from a ``python -X importtime`` run of the command itself (``traced_modules``), so
the floor follows the command when its imports change. Kept free of I/O so that
``tests/test_benchmarks.py`` can check them without timing anything; the figures run the script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .stats import ratio, summarize

TRACE_PREFIX = "import time:"


def traced_modules(trace: str) -> list[str]:
    """The modules a ``python -X importtime`` run imported at the top level, in its order.

    Only the outermost imports (``| name`` with no nesting): importing them in the same order
    imports every nested module the same way, where importing a nested one first could meet a
    circular import the command never meets. ``__main__`` modules are left out (importing one
    would run the command). Lines that are not the trace (the command's own output) are skipped."""
    modules: list[str] = []
    for line in trace.splitlines():
        if not line.startswith(TRACE_PREFIX):
            continue
        fields = line[len(TRACE_PREFIX) :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line, or not a trace line
        column = fields[2].rstrip()
        name = column.strip()
        if column != " " + name or not name:
            continue  # nested: imported by the module listed after it
        if name == "__main__" or name.endswith(".__main__") or name in modules:
            continue
        modules.append(name)
    return modules


def floor_script(modules: list[str], inputs: Path, files: int) -> str:
    """``python -c`` text: the cyclic GC off (as the tool's one-pass commands run), ``modules``
    imported in order, then every result file under ``inputs`` (the loader's own listing,
    ``world.resultfiles.candidate_files``) read once and decoded with ``json.loads``. It exits
    non-zero when it finds another number of files than ``files``."""
    return "\n".join(
        [
            "import gc",
            "gc.disable()",
            f"for name in {tuple(modules)!r}:",
            "    __import__(name)",
            "import json, os, sys",
            "from pathlib import Path",
            "from torch_matrix.world.resultfiles import candidate_files",
            f"paths = candidate_files(Path({str(inputs)!r}))",
            f"if len(paths) != {files}:",
            f"    sys.exit(f'floor: {{len(paths)}} result files, expected {files}')",
            "for path in paths:",
            "    fd = os.open(path, os.O_RDONLY)",
            "    try:",
            "        json.loads(os.read(fd, os.fstat(fd).st_size + 1).decode('utf-8'))",
            "    finally:",
            "        os.close(fd)",
            "",
        ]
    )


def floor_record(
    files: int,
    modules: list[str],
    walls: Sequence[float],
    cpus: Sequence[float],
    bare_walls: Sequence[float],
    bare_cpus: Sequence[float],
) -> dict[str, Any]:
    """What a figure stores of a floor timed in the same rounds as ``python -c pass``: wall and CPU
    medians, each also as a ratio to the bare interpreter's median."""
    seconds, cpu = summarize(walls), summarize(cpus)
    return {
        "files": files,
        "modules": len(modules),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "over_bare_python": ratio(seconds["median"], summarize(bare_walls)["median"]),
        "cpu_over_bare_python": ratio(cpu["median"], summarize(bare_cpus)["median"]),
    }


def floor_phrase(floor: dict[str, Any] | None) -> str:
    """The figure's words for a floor record (``files``, ``seconds``, ``cpu_seconds`` summaries,
    ``over_bare_python``), or why there is none."""
    if floor is None:
        return "floor not measured"
    if "error" in floor:
        return f"floor NOT MEASURED: {floor['error']}"
    return (
        f"floor (interpreter + imports + one read of the {floor['files']:,} files) "
        f"{floor['seconds']['median']:.3f} s (cpu {floor['cpu_seconds']['median']:.3f} s) = "
        f"{floor['over_bare_python']:.1f}x python -c pass"
    )
