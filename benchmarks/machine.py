"""Machine facts printed next to every figure: a number means little without the box it ran on."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

from .common import filesystem_type, tool_version


def _meminfo_gib() -> float | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine_facts(work: Path) -> dict[str, Any]:
    cache = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv"))
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu_model = next(
                (line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")),
                "",
            )
    except OSError:
        pass
    paths = {"work": work, "uv_cache": cache, "dev_shm": Path("/dev/shm")}
    return {
        "host": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": _meminfo_gib(),
        "load_average": load_average(),
        "disk_free_gib": {
            name: round(shutil.disk_usage(p).free / 2**30, 1)
            for name, p in paths.items()
            if p.exists()
        },
        "filesystems": {name: filesystem_type(p) for name, p in paths.items() if p.exists()},
        "python": sys.version.split()[0],
        "uv": tool_version(["uv", "--version"]),
        "nox": tool_version([sys.executable, "-m", "nox", "--version"]),
        "pip": tool_version([sys.executable, "-m", "pip", "--version"]).split(" from ")[0],
        "virtualenv": tool_version([sys.executable, "-m", "virtualenv", "--version"]).split(
            " from "
        )[0],
    }


def facts_lines(facts: dict[str, Any]) -> list[str]:
    return [f"  {key}: {value}" for key, value in facts.items()]
