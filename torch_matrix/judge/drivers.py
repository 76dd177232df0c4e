"""Which NVIDIA driver runs a CUDA runtime, and which driver first knew a card.

The rule follows NVIDIA's CUDA Toolkit Release Notes, "CUDA Driver", Table 3 ("CUDA Toolkit and
Corresponding Driver Versions", the toolkit driver of each release) and Table 2 ("CUDA Toolkit and
Minimum Required Driver Version for CUDA Minor Version Compatibility"):
https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver . A runtime X.Y
runs on a driver of at least the minor-version-compatibility minimum of major X (525.60.13 for
12.x); at the toolkit driver of X.Y or above, everything works. A driver written in full is
compared as written (``580.65`` is below a ``580.65.06`` floor, never padded up to it). A branch
alone (``580``) is what a user means by it, "some R580 driver": below a floor of a newer branch,
above one of an older branch, and against a floor of its own branch assumed to meet it (every
public R580 Linux driver meets CUDA 13.x's ``580.65.06``), the verdict saying what it assumed.

Pure; ``torch_matrix.judge.hardware`` uses it for the driver-too-old verdict.
"""

from __future__ import annotations

# NVIDIA CUDA Toolkit Release Notes, "CUDA Driver" (linked in the module docstring), Linux x86_64.
# Table 3, the toolkit driver of each CUDA X.Y (its GA release): at or above it, everything works.
TOOLKIT_DRIVER: dict[tuple[int, int], str] = {
    (10, 2): "440.33",
    (11, 0): "450.51.05",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}
# Table 2, minor version compatibility: any X.y runs on a driver of at least this (since CUDA 11),
# without PTX JIT of newer-toolkit PTX. CUDA 10.x and older need their toolkit driver.
MINOR_COMPAT_DRIVER: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def driver_numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def is_branch(driver: str) -> bool:
    """``580``: a driver branch alone, not one driver."""
    return driver.isdigit()


def at_least(driver: str, minimum: str) -> bool:
    """``driver >= minimum``, each compared as the version it is written: a part not written is 0,
    so ``580.65`` does not meet a ``580.65.06`` floor (padding the driver to the floor's length
    would pass any driver of the floor's branch, however old). A branch alone (``580``) is some
    driver of that branch: it meets a floor of its own branch (``assumed`` says so)."""
    have, need = driver_numbers(driver), driver_numbers(minimum)
    if is_branch(driver):
        return have[0] >= need[0]
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def assumed(driver: str, minimum: str) -> str:
    """What a branch alone was taken to mean against ``minimum`` ("" where nothing was assumed)."""
    if not minimum or not is_branch(driver) or "." not in minimum:
        return ""
    if driver_numbers(driver)[0] != driver_numbers(minimum)[0]:
        return ""
    return f"driver {driver} read as some R{driver} driver, assumed >= {minimum}"


def driver_minimum(cuda: str) -> tuple[str, str]:
    """(the minor-version-compatibility minimum, the toolkit driver) for CUDA "X.Y"; "" where unknown."""
    major, minor = (int(p) for p in cuda.split(".")[:2])
    return MINOR_COMPAT_DRIVER.get(major, ""), TOOLKIT_DRIVER.get((major, minor), "")


# The first CUDA toolkit that knew each compute capability, whose toolkit driver (Table 3) is the oldest
# driver branch that can drive such a card at all: a driver older than that does not know the GPU,
# whatever the build (an RTX 5090 needs R570+, an H100 R520+). Capabilities older than 6.0 are not listed.
FIRST_CUDA: dict[int, tuple[int, int]] = {
    60: (8, 0),
    61: (8, 0),
    62: (8, 0),
    70: (9, 0),
    72: (10, 0),
    75: (10, 0),
    80: (11, 0),
    86: (11, 1),
    87: (11, 4),
    89: (11, 8),
    90: (11, 8),
    100: (12, 8),
    101: (12, 8),
    120: (12, 8),
    103: (12, 9),
    121: (12, 9),
    110: (13, 0),
}
OLD_TOOLKIT_DRIVER: dict[tuple[int, int], str] = {
    (8, 0): "367.48",
    (9, 0): "384.81",
    (10, 0): "410.48",
}


def card_driver_floor(capability: int) -> tuple[str, str]:
    """(the oldest driver that knows a card of ``capability``, the CUDA version that introduced it); "" unknown."""
    first = FIRST_CUDA.get(capability)
    if first is None:
        return "", ""
    floor = TOOLKIT_DRIVER.get(first) or OLD_TOOLKIT_DRIVER.get(first, "")
    return floor, f"{first[0]}.{first[1]}"
