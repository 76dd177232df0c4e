"""Byte sizes as people write and read them: ``"15GB"`` -> 15_000_000_000, 4_100_000_000 -> ``"4.1 GB"``.

Decimal units (kB, MB, GB, TB: powers of 1000, as disks are sold and ``df -H`` prints) and binary
ones (KiB, MiB, GiB, TiB: powers of 1024, as uv prints download sizes). Pure; stdlib only.
"""

from __future__ import annotations

import math
import re

UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
EXAMPLES = '"15GB", "500MB", "12GiB" or a number of bytes'


def parse_size(text: str | int | float) -> int:
    """Bytes from ``"15GB"`` / ``"1.5 GiB"`` / ``"2000000"`` / a number; ValueError naming what is wrong."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as {EXAMPLES}, got {text!r}")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = _SIZE.match(text)
        if not match:
            raise ValueError(f"expected a size such as {EXAMPLES}, got {text!r}")
        value, unit = float(match.group(1)), match.group(2).lower()
    if unit not in UNITS:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r} (expected one of kB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        )
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a size >= 0, got {text!r}")
    total = value * UNITS[unit]
    if total > 1e18:
        raise ValueError(f"{text!r} is larger than any disk (at most 1 EB)")
    return int(total)


def format_size(count: int | float) -> str:
    """``4.1 GB``, ``730 MB``, ``12 kB``, ``512 B``: decimal units, two or three significant digits."""
    count = float(count)
    sign = "-" if count < 0 else ""
    count = abs(count)
    for unit, scale in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if count >= scale * 0.995:
            value = count / scale
            return f"{sign}{value:.1f} {unit}" if value < 100 else f"{sign}{value:.0f} {unit}"
    return f"{sign}{count:.0f} B"
