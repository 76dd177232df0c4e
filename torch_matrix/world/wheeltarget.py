"""Which wheels install on the platform a cell runs on: a release's wheels differ per platform (and
so does what they declare), so planning reads the one the cell gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_matrix.world.listings import DistFile


@dataclass(frozen=True)
class WheelTarget:
    """The platform a cell installs on (``linux``/``x86_64``): which wheel of a release it gets,
    and so whose metadata planning must read (torchvision 0.11.3's aarch64 wheel declares a
    bare ``torch`` where its x86_64 ones declare ``torch==1.10.2``)."""

    system: str  # "linux", "darwin", "windows"
    machine: str  # "x86_64", "aarch64", "arm64", "amd64"

    @classmethod
    def host(cls) -> WheelTarget:
        import platform

        return cls(platform.system().lower(), platform.machine().lower())

    def serves(self, platform_tag: str) -> bool:
        """Whether a wheel tagged for ``platform_tag`` installs here."""
        if platform_tag == "any":
            return True
        machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(self.machine, self.machine)
        aliases = {
            "x86_64": ("x86_64", "amd64", "universal2", "intel"),
            "aarch64": ("aarch64", "arm64", "universal2"),
        }.get(machine, (machine,))
        prefixes = {
            "linux": ("linux", "manylinux", "musllinux"),
            "darwin": ("macosx",),
            "windows": ("win",),
        }.get(self.system, (self.system,))
        return platform_tag.startswith(prefixes) and platform_tag.endswith(aliases)


def wheel_fits(item: DistFile, target: WheelTarget, python: str | None = None) -> bool:
    """Whether a cell on ``target`` (and Python ``python`` X.Y, when given) can install ``item``."""
    from packaging.tags import parse_tag

    for text in item.tags:
        for tag in parse_tag(text):
            if not target.serves(tag.platform):
                continue
            if python is None or _tag_serves_python(tag.interpreter, tag.abi, python):
                return True
    return False


def _tag_serves_python(interpreter: str, abi: str, python: str) -> bool:
    digits = python.replace(".", "")
    if interpreter in (f"cp{digits}", f"py{digits}", "py3", f"py{digits[:1]}"):
        return True
    if abi == "abi3" and interpreter.startswith("cp3") and interpreter[3:].isdigit():
        return int(digits[1:] or 0) >= int(interpreter[3:])
    return False
