"""A hardware target: a GPU (a product name from NVIDIA's table, or its compute capability) and an
NVIDIA driver version, parsed with a hint for what is accepted; the label a result names it by, and
a directory name (slug) for its pins.

Pure; ``torch_matrix.judge.hardware`` judges a build on a target.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Product names -> compute capability (NVIDIA's "CUDA GPUs" list, developer.nvidia.com/cuda-gpus).
# Matched ignoring case, spaces, '-' and the words NVIDIA / GeForce / Tesla / Quadro.
GPU_CAPABILITIES: dict[str, tuple[int, int]] = {
    "K80": (3, 7),
    "M60": (5, 2),
    "GTX 980": (5, 2),
    "GTX 980 Ti": (5, 2),
    "Jetson Nano": (5, 3),
    "P100": (6, 0),
    "GTX 1060": (6, 1),
    "GTX 1070": (6, 1),
    "GTX 1080": (6, 1),
    "GTX 1080 Ti": (6, 1),
    "Titan Xp": (6, 1),
    "P4": (6, 1),
    "P40": (6, 1),
    "Jetson TX2": (6, 2),
    "V100": (7, 0),
    "Titan V": (7, 0),
    "Jetson Xavier": (7, 2),
    "T4": (7, 5),
    "GTX 1650": (7, 5),
    "GTX 1660": (7, 5),
    "GTX 1660 Ti": (7, 5),
    "RTX 2060": (7, 5),
    "RTX 2070": (7, 5),
    "RTX 2080": (7, 5),
    "RTX 2080 Ti": (7, 5),
    "Titan RTX": (7, 5),
    "RTX 6000": (7, 5),
    "RTX 8000": (7, 5),
    "A100": (8, 0),
    "A30": (8, 0),
    "A10": (8, 6),
    "A40": (8, 6),
    "RTX 3060": (8, 6),
    "RTX 3070": (8, 6),
    "RTX 3080": (8, 6),
    "RTX 3080 Ti": (8, 6),
    "RTX 3090": (8, 6),
    "RTX 3090 Ti": (8, 6),
    "RTX A4000": (8, 6),
    "RTX A5000": (8, 6),
    "RTX A6000": (8, 6),
    "Jetson Orin": (8, 7),
    "L4": (8, 9),
    "L40": (8, 9),
    "L40S": (8, 9),
    "RTX 4060": (8, 9),
    "RTX 4070": (8, 9),
    "RTX 4080": (8, 9),
    "RTX 4090": (8, 9),
    "RTX 6000 Ada": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "GH200": (9, 0),
    "B200": (10, 0),
    "GB200": (10, 0),
    "B300": (10, 3),
    "GB300": (10, 3),
    "Jetson Thor": (11, 0),
    "RTX 5060": (12, 0),
    "RTX 5070": (12, 0),
    "RTX 5070 Ti": (12, 0),
    "RTX 5080": (12, 0),
    "RTX 5090": (12, 0),
    "RTX PRO 6000": (12, 0),
    "DGX Spark": (12, 1),
    "GB10": (12, 1),
}
# Capabilities NVIDIA has shipped (torch's DEVICE_REQUIREMENT keys plus older ones still in the table).
KNOWN_CAPABILITIES = frozenset(
    {
        30,
        35,
        37,
        50,
        52,
        53,
        60,
        61,
        62,
        70,
        72,
        75,
        80,
        86,
        87,
        89,
        90,
        100,
        101,
        103,
        110,
        120,
        121,
    }
)
_NOISE = re.compile(r"nvidia|geforce|tesla|quadro|[\s_\-]")


def _key(name: str) -> str:
    return _NOISE.sub("", name.lower())


_BY_KEY = {_key(name): name for name in GPU_CAPABILITIES}


class TargetError(ValueError):
    """A GPU or driver this module cannot judge; ``hint`` says what it accepts."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Gpu:
    name: str  # a product name from the table, or the capability as written ("sm_89")
    capability: int  # major * 10 + minor: 89 for 8.9, 120 for 12.0

    @property
    def sm(self) -> str:
        return f"sm_{self.capability}"

    @property
    def label(self) -> str:
        return self.sm if self.name == self.sm else f"{self.name} ({self.sm})"


def capability_text(capability: int) -> str:
    return f"{capability // 10}.{capability % 10}"


def parse_gpu(text: str) -> Gpu:
    """``"sm_89"``, ``"8.9"`` or a product name (``"RTX 4090"``, ``"NVIDIA GeForce RTX 4090"``)."""
    raw = text.strip()
    match = re.fullmatch(r"sm_?(\d{2,3})|(\d{1,2})\.(\d)", raw.lower())
    if match:
        cap = (
            int(match.group(1))
            if match.group(1)
            else int(match.group(2)) * 10 + int(match.group(3))
        )
        if cap not in KNOWN_CAPABILITIES:
            known = ", ".join(f"sm_{c}" for c in sorted(KNOWN_CAPABILITIES))
            raise TargetError(
                f"unknown compute capability {raw!r} ({capability_text(cap)})",
                f"NVIDIA GPUs have one of: {known}",
            )
        return Gpu(f"sm_{cap}", cap)
    name = _BY_KEY.get(_key(raw))
    if name is None:
        import difflib  # here: only a misspelt GPU name needs it

        close = difflib.get_close_matches(_key(raw), list(_BY_KEY), n=3, cutoff=0.6)
        hint = (
            (f"did you mean {' or '.join(repr(_BY_KEY[c]) for c in close)}? " if close else "")
            + "give a product name from the table (V100, T4, A100, RTX 4090, H100, RTX 5090, ...) or the "
            "compute capability itself, such as 'sm_89' or '8.9'"
        )
        raise TargetError(f"unknown GPU {raw!r}", hint)
    major, minor = GPU_CAPABILITIES[name]
    return Gpu(name, major * 10 + minor)


def parse_driver(text: str) -> str:
    raw = text.strip()
    if not re.fullmatch(r"\d{3,4}(\.\d{1,3}){0,2}", raw):  # 535.104, 580.65.06, 1000.12
        raise TargetError(
            f"invalid NVIDIA driver version {raw!r}",
            "give the driver version nvidia-smi prints, such as '535.104' or '580.65.06' "
            "(not the CUDA version it shows)",
        )
    return raw


@dataclass(frozen=True)
class Target:
    gpu: Gpu | None = None
    driver: str = ""

    @property
    def label(self) -> str:
        parts = ([self.gpu.label] if self.gpu else []) + (
            [f"driver {self.driver}"] if self.driver else []
        )
        return ", ".join(parts)

    @property
    def slug(self) -> str:
        """A directory name: ``rtx-4090-sm_89``, ``sm_70-driver-535.104``, ``driver-580.82.07``."""
        return slug_of_label(self.label)


def slug_of_label(label: str) -> str:
    """``RTX 4090 (sm_89), driver 535.104`` -> ``rtx-4090-sm_89-driver-535.104`` (a directory name:
    never empty, never ``.`` or ``..``; ``unique_slugs`` keeps two labels apart)."""
    slug = re.sub(r"[^a-z0-9_.]+", "-", label.lower()).strip("-.")
    slug = re.sub(r"\.{2,}", ".", slug)
    return slug or "target"


LABEL_CHARS = 200
# What a target label is made of: a GPU name as the table or nvidia-smi writes it ("NVIDIA H100
# 80GB HBM3", "Tesla V100-SXM2-16GB"), "(sm_89)", ", driver 535.104", " (this machine)".
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.,:;()+#@-]*")


def label_problem(label: object) -> str:
    """Why ``label`` (a target label read from a result file) is not a target's name; "" when it is.
    A name, one line, not a path: letters, digits and ``_ .,:;()+#@-``, starting with a letter or
    digit, no ``..``, at most 200 characters."""
    if not isinstance(label, str):
        return "not text"
    if len(label) > LABEL_CHARS:
        return f"{len(label):,} characters (at most {LABEL_CHARS})"
    if not _LABEL.fullmatch(label):
        return "not a name (letters, digits and ' _.,:;()+#@-' only, one line, no path)"
    if ".." in label:
        return "not a name ('..' is a path)"
    return ""


def unique_slugs(labels: Iterable[str]) -> dict[str, str]:
    """label -> its directory name, one per label: labels whose slugs would collide (two spellings
    of one GPU, "RTX 4090" and "rtx-4090") each get a short digest of the label appended, so
    neither overwrites the other and the name does not depend on the order they were met."""
    labels = list(dict.fromkeys(labels))
    slugs = {label: slug_of_label(label) for label in labels}
    count: dict[str, int] = {}
    for slug in slugs.values():
        count[slug] = count.get(slug, 0) + 1
    return {
        label: slug
        if count[slug] == 1
        else f"{slug}-{hashlib.sha256(label.encode('utf-8')).hexdigest()[:8]}"
        for label, slug in slugs.items()
    }


def targets_of(gpus: Iterable[str], drivers: Iterable[str]) -> tuple[Target, ...]:
    """Each GPU with each driver; GPUs alone or drivers alone when only one kind is given."""
    parsed_gpus = [parse_gpu(g) for g in gpus]
    parsed_drivers = [parse_driver(d) for d in drivers]
    if parsed_gpus and parsed_drivers:
        return tuple(Target(g, d) for g in parsed_gpus for d in parsed_drivers)
    return tuple(Target(g) for g in parsed_gpus) + tuple(Target(driver=d) for d in parsed_drivers)
