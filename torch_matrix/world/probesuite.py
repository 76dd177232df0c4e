"""What the spec's probe suite is, checked at plan time: names that exist, directories that exist,
and a digest of the suite's code for the cell fingerprint.

Mistakes here used to surface only after every cell had installed (each cell ``error``, the
reason buried in an output tail); now ``torch-matrix plan`` and ``nox -l`` stop with exit 2.
The known names come from the real runner (``python -m torch_matrix.probes --list``), so a custom probe
file counts exactly as the runner will see it. Its code never runs in our process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

from torch_matrix import __version__ as TOOL_VERSION
from torch_matrix.edges import proc
from torch_matrix.vocab.errors import UserError, did_you_mean


def probes_package() -> Path:
    return Path(__file__).resolve().parents[1] / "probes"


def check_dirs(spec) -> None:
    for i, directory in enumerate(spec.probes.dirs):
        if not os.path.isdir(directory):
            problem = "does not exist" if not os.path.exists(directory) else "is not a directory"
            raise UserError(
                f"probe directory {directory} {problem}",
                where=f"{spec.path}: probes.dirs[{i}]",
                hint="create it, or fix the path (relative paths are relative to the spec file)",
            )


@functools.lru_cache(maxsize=16)
def known_probes(dirs: tuple[str, ...]) -> frozenset[str]:
    """Probe names the runner finds: the standard suite plus every probe file in ``dirs``."""
    command = [sys.executable, "-m", "torch_matrix.probes", "--list"]
    for directory in dirs:
        command += ["--probe-dir", directory]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(probes_package().parent.parent)
    code, out, err = proc.run_text(
        command, timeout=120, env=env, cwd=probes_package().parent.parent
    )
    if code != 0:
        refused = (
            " refused: " in err
        )  # torch_matrix.probes.api.check_name: a probe file names a probe badly
        raise UserError(
            f"cannot list the probes: {err.strip()[-300:]}",
            where="python -m torch_matrix.probes --list",
            hint='rename the probe in that file (@probe("name")): a probe\'s name is a word, '
            "like a command probe's"
            if refused
            else "run `python -m torch_matrix.probes --list` to see why; check probes.dirs",
        )
    return frozenset(line.split()[0] for line in out.splitlines() if line.strip())


def check_names(spec) -> None:
    names = set(spec.probes.commands)
    needed = [("probes.run", i, n) for i, n in enumerate(spec.probes.run)]
    needed += [("probes.required", i, n) for i, n in enumerate(spec.probes.required)]
    if spec.probes.dirs:  # the runner refuses a probe file whose names are not names: say so now
        known_probes(tuple(spec.probes.dirs))
    if not needed or all(n in names for _, _, n in needed):
        return
    known = known_probes(tuple(spec.probes.dirs)) | names
    for key, i, name in needed:
        if name not in known:
            raise UserError(
                f"unknown probe {name!r}",
                where=f"{spec.path}: {key}[{i}]",
                hint=f"{did_you_mean(name, known)}known probes: {', '.join(sorted(known))} "
                "(`python -m torch_matrix.probes --list`; custom ones go in probes.dirs or "
                "[probes.commands])",
            )


def check(spec) -> None:
    """Raise ``UserError`` (exit 2) for a probe suite the runner would refuse."""
    check_dirs(spec)
    check_names(spec)


def suite_digest(spec) -> str:
    """The tool's version and the code of every probe the cells run: part of each cell's fingerprint,
    so resume does not reuse results an older probe produced."""
    return _digest(tuple(spec.probes.dirs), tuple(sorted(spec.probes.commands.items())))


@functools.lru_cache(maxsize=16)
def _digest(dirs: tuple[str, ...], commands: tuple[tuple[str, str], ...]) -> str:
    digest = hashlib.sha256(TOOL_VERSION.encode())
    roots = [probes_package()] + [Path(d) for d in dirs]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"<unreadable>")
    for name, command in commands:
        digest.update(f"{name}={command}\0".encode())
    return digest.hexdigest()[:16]
