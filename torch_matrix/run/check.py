"""``torch-matrix check``: probe an existing environment as it is, and record it as an ordinary cell.

Nothing is installed. The interpreter's versions (torch with its local build label,
torchvision, numpy, Python) are read from its metadata by ``torch_matrix/probes/facts.py environment``;
the cell built from them (``existing_cell``, pure) carries ``origin: existing-env``; the
probe phase and the result file are a planned cell's (``cellrun.run_existing``), so
``report``, ``pins`` and the history read it like any other cell.

The cell id names what was found and where: ``env-t2.13.0-cpu-py3.11-<host>-<hash>``,
the hash being of the host and the interpreter's path, so two environments never share a
result file and checking the same one again replaces its result.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from torch_matrix.world import environment
from torch_matrix.world import probe_process
from torch_matrix.run.cellrun import CellSettings, run_existing
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.layout import CHECK_RUN as RUN_NAME  # noqa: F401 - check_cli names the run with it
from torch_matrix.vocab.layout import cells_dir
from torch_matrix.vocab.records import (
    DEFAULT_POLICY,
    INSTALLED,
    ORIGIN_EXISTING,
    Cell,
    CellResult,
    InstallOutcome,
    local_label,
    public_version,
)

MIN_PYTHON = (3, 8)  # what the probes support
PACKAGES = ("torch", "torchvision", "numpy")
FACTS_TIMEOUT_S = 120.0
EXAMPLE_PYTHON = ".venv/bin/python"


@dataclass(frozen=True)
class EnvironmentFacts:
    """What ``torch_matrix/probes/facts.py environment`` found in the interpreter, before any probe runs."""

    python: str  # the path as given (a venv's bin/python: not resolved, or the venv is lost)
    version: str  # 3.11.7
    implementation: str = "cpython"
    prefix: str = ""
    base_prefix: str = ""
    packages: Mapping[str, str | None] = field(default_factory=dict)  # name -> installed version
    platform: Mapping[str, Any] = field(default_factory=dict)
    # name -> what the build says it is in its version.py: {"version": "2.4.1+cu121", "cuda": "12.1", "hip": None}
    builds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def in_venv(self) -> bool:
        return bool(self.prefix) and self.prefix != self.base_prefix

    def interpreter(self) -> dict[str, Any]:
        """The result's ``interpreter`` record: like a planned cell's, plus where the environment is."""
        data: dict[str, Any] = {
            "path": self.python,
            "version": self.version,
            "implementation": self.implementation,
            "prefix": self.prefix,
        }
        if self.in_venv:
            data["base_prefix"] = self.base_prefix
        return data

    @classmethod
    def from_json(cls, python: str, data: Mapping[str, Any]) -> "EnvironmentFacts":
        facts = data["python"]
        packages = {
            name: (value if isinstance(value, str) and value else None)
            for name, value in dict(data.get("packages") or {}).items()
        }
        builds = {
            name: dict(build)
            for name, build in dict(data.get("builds") or {}).items()
            if isinstance(build, Mapping) and isinstance(build.get("version"), str)
        }
        return cls(
            python=python,
            version=str(facts["version"]),
            implementation=str(facts.get("implementation", "")),
            prefix=str(facts.get("prefix", "")),
            base_prefix=str(facts.get("base_prefix", "")),
            packages=packages,
            platform=dict(data.get("platform") or {}),
            builds=builds,
        )


# ----------------------------------------------------------------------------- pure parts


def _public(version: str) -> str:
    """The release without its local label; a version PEP 440 cannot parse is kept as written."""
    return public_version(version) or version.split("+", 1)[0]


_VARIANT_LABEL = re.compile(r"^(cpu|cu\d+|rocm\d+(\.\d+)*|xpu)$")


def build_variant(installed: str, build: Mapping[str, Any] | None) -> str:
    """The variant of the torch that runs: a variant label on the installed version or on the build's
    own ``__version__`` (PyPI's CUDA wheels say ``2.14.1`` in their metadata, ``2.14.1+cu132`` at run
    time), else ``torch.version.cuda`` (``13.2`` -> ``cu132``) or ``.hip`` (``rocm6.2``), else ``cpu``;
    ``default`` only when the build could not be read."""
    for label in (local_label(installed), local_label(str((build or {}).get("version") or ""))):
        if _VARIANT_LABEL.match(label):
            return label
    if not build:
        return local_label(installed) or "default"
    cuda, hip = build.get("cuda"), build.get("hip")
    if isinstance(cuda, str) and re.match(r"^\d+\.\d+", cuda):
        major, minor = cuda.split(".")[:2]
        return f"cu{major}{minor}"
    if isinstance(hip, str) and re.match(r"^\d+\.\d+", hip):
        return "rocm" + ".".join(hip.split(".")[:2])
    return "cpu"


def _id_token(text: str, limit: int = 24) -> str:
    token = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit].strip("-.")
    return token or "x"


def existing_cell_id(facts: EnvironmentFacts, host: str) -> str:
    torch = facts.packages.get("torch") or ""
    parts = ["env", "t" + _id_token(_public(torch))]
    label = local_label(torch)
    if label:
        parts.append(_id_token(label))
    parts.append("py" + facts.minor)
    short_host = host.split(".", 1)[0]
    if short_host:
        parts.append(_id_token(short_host, 16))
    digest = hashlib.sha256(f"{host}\0{facts.python}".encode()).hexdigest()[:6]
    parts.append(digest)
    return "-".join(parts)


def existing_cell(
    facts: EnvironmentFacts,
    *,
    host: str,
    probes: tuple[str, ...] = (),
    required_probes: tuple[str, ...] = (),
    policy: Mapping[str, str] | None = None,
) -> Cell:
    """The cell an existing environment stands for: its versions as axes, exact pins as requirements.

    ``variant`` is the build's (``build_variant``: ``cu132`` for PyPI's ``2.14.1`` whose
    ``torch.version.cuda`` is 13.2), like a planned cell of that variant. The requirements pin
    what was found (local label included), so ``install_sanity`` checks each module against its
    own metadata.
    """
    torch = facts.packages.get("torch")
    if not torch:
        raise ValueError("an existing environment without torch is not a cell")
    torchvision = facts.packages.get("torchvision") or ""
    axes = {
        "python": facts.minor,
        "torch": _public(torch),
        "torchvision": _public(torchvision) if torchvision else "",
        "variant": build_variant(torch, facts.builds.get("torch")),
    }
    requirements = tuple(
        f"{name}=={version}" for name in PACKAGES if (version := facts.packages.get(name))
    )
    return Cell(
        id=existing_cell_id(facts, host),
        axes=axes,
        requirements=requirements,
        probes=tuple(probes),
        required_probes=tuple(required_probes),
        tags=("existing-env", f"py{facts.minor}"),
        policy=dict(policy or DEFAULT_POLICY),
        origin=ORIGIN_EXISTING,
    )


def existing_install(facts: EnvironmentFacts) -> InstallOutcome:
    """Installed, by someone else: no command, no attempt, the versions found."""
    where = facts.prefix or facts.python
    kind = "virtual environment" if facts.in_venv else "environment"
    resolved = {name: version for name, version in facts.packages.items() if version}
    return InstallOutcome(
        status=INSTALLED,
        command=(),
        attempts=0,
        resolved=resolved,
        message=f"existing {kind} at {where}: probed as found, nothing installed",
    )


def fingerprint(cell: Cell, facts: EnvironmentFacts) -> str:
    return cell.fingerprint({"origin": ORIGIN_EXISTING, "python": facts.python})


# ----------------------------------------------------------------------------- I/O


def interpreter_problem(python: str) -> UserError | None:
    """A --python that is plainly not an interpreter: missing, a directory, not executable."""
    path = Path(python)
    hint = f"pass the interpreter of the environment to check, e.g. --python {EXAMPLE_PYTHON}"
    if not path.exists():
        return UserError("no such file", where=f"--python {python}", hint=hint)
    if path.is_dir():
        venv_python = path / "bin" / "python"
        better = (
            f"this looks like a virtual environment: --python {venv_python}"
            if venv_python.exists()
            else hint
        )
        return UserError(
            "is a directory, not a Python interpreter", where=f"--python {python}", hint=better
        )
    if not os.access(path, os.X_OK):
        return UserError("is not executable", where=f"--python {python}", hint=hint)
    return None


def read_environment(python: str, env: Mapping[str, str] | None = None) -> EnvironmentFacts:
    """Run ``torch_matrix/probes/facts.py environment`` in the interpreter, as its user runs it; UserError for bad input."""
    problem = interpreter_problem(python)
    if problem is not None:
        raise problem
    where = f"--python {python}"
    hint = f"pass a Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ interpreter, e.g. --python {EXAMPLE_PYTHON}"
    data, why = probe_process.run_facts(
        python,
        ["environment"],
        isolated=False,
        timeout_s=FACTS_TIMEOUT_S,
        env=dict(environment.base_env() if env is None else env),
    )
    try:
        if data is None:
            raise ValueError(why)
        facts = EnvironmentFacts.from_json(python, data)
        version_info = tuple(int(part) for part in data["python"]["version_info"][:2])
    except (ValueError, KeyError, TypeError):
        said = " ".join(why.strip().splitlines()[-1:])[:200]
        raise UserError(
            "not a Python interpreter that can run the probes" + (f" ({said})" if said else ""),
            where=where,
            hint=hint,
        ) from None
    if version_info < MIN_PYTHON:
        raise UserError(
            f"Python {facts.version} is older than the probes support "
            f"({MIN_PYTHON[0]}.{MIN_PYTHON[1]}+)",
            where=where,
            hint=hint,
        )
    if not facts.packages.get("torch"):
        raise UserError(
            f"torch is not installed in this environment (Python {facts.version} at "
            f"{facts.prefix or python})",
            where=where,
            hint="point --python at the interpreter of an environment that has torch "
            "(`python -c 'import sys; print(sys.executable)'` inside it prints it)",
        )
    return facts


@dataclass(frozen=True)
class CheckOptions:
    """What the spec (its ``[probes]`` table) says about which probes run and how they count."""

    probes: tuple[str, ...] = ()
    required_probes: tuple[str, ...] = ()
    policy: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_POLICY))
    probe_dirs: tuple[str, ...] = ()
    probe_commands: Mapping[str, str] = field(default_factory=dict)
    probe_timeout_s: float = 300.0
    probe_command_timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    project_dir: str | None = None  # command probes run from it (the spec's directory)
    targets: tuple[
        Any, ...
    ] = ()  # hardware targets (torch_matrix.judge.gpus.Target): --gpu/--driver or [targets]

    @classmethod
    def from_spec(cls, spec: Any) -> "CheckOptions":
        from torch_matrix.world.specfile import project_dir

        probes = spec.probes
        return cls(
            probes=tuple(probes.run),
            required_probes=tuple(probes.required),
            policy=dict(probes.policy),
            probe_dirs=tuple(probes.dirs),
            probe_commands=dict(probes.commands),
            probe_timeout_s=float(probes.timeout),
            probe_command_timeout_s=float(probes.command_timeout),
            project_dir=project_dir(spec),
            targets=tuple(spec.targets),
        )


def check_environment(
    python: str, results_dir: Path, options: CheckOptions | None = None, host: str | None = None
) -> CellResult:
    """Read the environment, probe it, write ``results_dir/cells/<id>.json``; return the result."""
    options = options or CheckOptions()
    facts = read_environment(python)
    cell = existing_cell(
        facts,
        host=host if host is not None else str(facts.platform.get("host", "")),
        probes=options.probes,
        required_probes=options.required_probes,
        policy=options.policy,
    )
    with tempfile.TemporaryDirectory(prefix="torch-matrix-check-") as scratch:
        settings = CellSettings(
            cells_dir=cells_dir(results_dir),
            work_dir=Path(scratch),
            fingerprint=fingerprint(cell, facts),
            probe_dirs=options.probe_dirs,
            probe_commands=dict(options.probe_commands),
            probe_timeout_s=options.probe_timeout_s,
            probe_command_timeout_s=options.probe_command_timeout_s,
            env=dict(options.env),
            project_dir=options.project_dir,
            user_site=True,
            targets=tuple(options.targets),
        )
        return run_existing(cell, python, settings, existing_install(facts), facts.interpreter())
