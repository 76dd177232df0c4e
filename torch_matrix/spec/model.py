"""The spec's records and vocabulary: what a validated ``matrix.toml`` is. Pure data.

``torch_matrix.spec.parse`` builds these from text; ``torch_matrix.world.specfile`` finds and loads the file.
Everything is importable from ``torch_matrix.world.specfile``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from torch_matrix.judge.gpus import Target
from torch_matrix.vocab.records import default_policy

DEFAULT_SPEC_PATH = Path(__file__).with_name("default_matrix.toml")
CURRENT_PYTHON = "current"  # the interpreter running torch-matrix
DEFAULT_VARIANT = "default"
VARIANT_RE = re.compile(r"^(default|auto|cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu)$")
# ``variant = "auto"``: the CPU build on a machine with no GPU where the indexes serve one, else the
# default (run.pipeline.resolve_auto, before planning).
AUTO_VARIANT = "auto"
PYTHON_RE = re.compile(r"^\d+\.\d+$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PROBE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
TORCH_SELECT = ("all", "latest-patch")
POLICY_VALUES = ("fail", "pass")
PYPI_SIMPLE = "https://pypi.org/simple"
PYTORCH_INDEX = (
    "https://download.pytorch.org/whl"  # the official base: uv's --torch-backend knows it
)
# Where ``torch_matrix.world.interpreters`` looks for Python X.Y, in order (named in messages).
# `torch` left out of a spec: the built-in default matrix's selection (default_matrix.toml), never
# every release since 1.0
DEFAULT_TORCH = (("versions", ">=2.0"), ("select", "latest-patch"), ("newest", 3))
INTERPRETER_SEARCH = "[interpreters] in the spec, PATH, $PYENV_ROOT/versions, uv python"
# How an [[include]] cell installs: "resolve" (the default) or "override" (the pair as named,
# torchvision's own torch requirement overridden: a deliberately mismatched pair).
INSTALL_MODES = ("resolve", "override")
OVERRIDE_TAG = "install-override"

# Axes whose values are versions: exclude/include rules match them as PEP 440 specifiers.
VERSIONED_AXES = ("python", "torch", "torchvision")


@dataclass(frozen=True)
class TorchSelection:
    """Which torch releases become cells: explicit versions, or a range plus a policy."""

    explicit: tuple[str, ...] = ()
    versions: str = ""  # PEP 440 specifier set ("" = any release)
    select: str = "latest-patch"  # "all" | "latest-patch"
    newest: int | None = None  # keep only the N newest minor releases

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.versions)


@dataclass(frozen=True)
class ExtraAxis:
    """A further pinned dependency, e.g. numpy with values ``<2`` and ``>=2``."""

    name: str  # the project name as written
    values: tuple[str, ...]  # normalised specifier strings
    label: str  # short prefix for cell ids and tags


# A standard probe's limit (one API exercised once: seconds when it works, a hang otherwise).
DEFAULT_PROBE_TIMEOUT_S = 300.0
# A command probe's limit when the spec names none: a project's whole suite, which takes 10 to 60
# minutes a cell on the real projects tried (pytorch_wavelets' 343 tests: 20 minutes), so a
# 5-minute limit read every one of them as a failure. Two hours leaves a 60-minute suite room on a
# slower machine and still ends a hung one; a timed-out command is no evidence either way
# (``judge.verdict.TIMED_OUT``), with the time it ran and the key to raise.
DEFAULT_COMMAND_TIMEOUT_S = 7200.0


@dataclass(frozen=True)
class ProbeConfig:
    run: tuple[str, ...] = ()  # empty = the whole standard suite
    required: tuple[str, ...] = ()  # empty = every probe that runs
    unsupported: str = default_policy(names_required=False)[
        "unsupported"
    ]  # "fail" once `required` names probes
    skip: str = default_policy(names_required=False)["skip"]
    dirs: tuple[str, ...] = ()  # absolute paths
    commands: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_PROBE_TIMEOUT_S
    # A command probe (the project's own test suite) runs under this limit: the spec's ``timeout``
    # when it names one, else ``DEFAULT_COMMAND_TIMEOUT_S``.
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT_S

    @property
    def policy(self) -> dict[str, str]:
        return {"unsupported": self.unsupported, "skip": self.skip}


@dataclass(frozen=True)
class IndexConfig:
    """Where packages come from; resolved against pip's environment so uv sees what pip sees."""

    default: str = ""  # "" = uv's default ($UV_DEFAULT_INDEX or PyPI)
    pytorch: str = PYTORCH_INDEX  # base of the per-variant indexes (<pytorch>/<variant>/)
    extra: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    # where each key's value came from ("matrix.toml [index] extra", "$PIP_FIND_LINKS"), for
    # `plan`; not part of to_json, so not of any fingerprint
    origins: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def origin(self, key: str) -> str:
        return dict(self.origins).get(key, "")

    def variant_url(self, variant: str) -> str:
        return f"{self.pytorch.rstrip('/')}/{variant}/"

    def to_json(self) -> dict[str, Any]:
        return {
            "default": self.default,
            "pytorch": self.pytorch,
            "extra": list(self.extra),
            "find_links": list(self.find_links),
        }


@dataclass(frozen=True)
class Rule:
    """One exclude or include entry: axis name -> accepted values (any of)."""

    values: Mapping[str, tuple[str, ...]]
    where: str
    # include only: "override" installs the named pair even when torchvision requires another
    # torch (uv --overrides), to reproduce a user's mismatched environment; "" = resolve normally
    install: str = ""


@dataclass(frozen=True)
class Spec:
    name: str
    python: tuple[str, ...]
    torch: TorchSelection
    torchvision: str | tuple[str, ...]  # "paired" | "none" | explicit versions
    variants: tuple[str, ...]
    extras: tuple[ExtraAxis, ...]
    exclude: tuple[Rule, ...]
    include: tuple[Rule, ...]
    probes: ProbeConfig
    index: IndexConfig
    interpreters: Mapping[str, str]
    path: str  # where the spec came from, for messages
    base_dir: str  # relative paths in the spec are relative to this (the project directory)
    install: tuple[
        str, ...
    ] = ()  # what else goes into every cell (see torch_matrix.spec.install_items)
    install_digest: str = ""  # what the install items' files declare (set by load_spec)
    # [targets]: GPUs and drivers each cell's build is judged for (torch_matrix.judge.hardware), each GPU
    # with each driver; they change no cell (verdicts come from the build's facts, on CPU).
    targets: tuple[Target, ...] = ()
    # a Python no interpreter is found for: false (default) stops planning (exit 2); true plans
    # its cells as unsatisfiable
    allow_missing_interpreters: bool = False
    # The most follow-up cells (counterfactual, edge) a run adds; None: $TORCH_MATRIX_FOLLOWUPS or
    # the default cap (the variable wins over the spec, as for every setting).
    followups: int | None = None
    # The disk the run may fill (venvs + the uv cache growth it causes), in bytes; None: the free
    # space of the disk less a margin (torch_matrix.plan.cost).
    disk_budget: int | None = None

    def extra(self, name: str) -> ExtraAxis | None:
        for axis in self.extras:
            if axis.name == name:
                return axis
        return None


PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = "tool.torch-matrix"
