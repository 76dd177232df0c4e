"""uv at the edge: build the install command, run it with bounded retries, classify, verify.

uv's output is read by ``world.uvoutput`` (the failure's class and cause, the step times).

Only three install outcomes exist (``records.INSTALL_STATUSES``). The distinction that
matters is between *the resolver said no* (``unsatisfiable``: a fact about the cell,
kept with uv's own words) and *the machine had trouble* (``error``: network, disk,
killed; retried a few times, never a finding). An install that "succeeded" but left
other versions in the venv than the cell asked for is also ``error``: the cell would
otherwise report evidence about packages it never tested (nox field note: a failed
install later "passed" with ``--install-only`` then ``-R``).

Variant cells and indexes (uv #5001): with the official PyTorch index we pass
``--torch-backend <variant>``, which sends only the PyTorch-ecosystem packages to
``download.pytorch.org/whl/<variant>`` and everything else to the normal index. uv has
no command-line way to pin single packages to a mirror, so with a mirror we add
``--index <mirror>/<variant>``: it is searched first, and under uv's default
``first-index`` strategy any project the mirror also carries (numpy, pillow, ...) comes
from the mirror, possibly an older copy. That is the price of a mirror; the exact
command is recorded in every result so the choice is visible.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_matrix.edges import proc
from torch_matrix.edges.fileio import atomic_write
from torch_matrix.world.probe_process import run_facts
from torch_matrix.vocab.records import (
    INSTALL_ERROR,
    INSTALLED,
    UNSATISFIABLE,
    Cell,
    InstallOutcome,
    public_version,
)
from torch_matrix.spec.model import PYTORCH_INDEX as OFFICIAL_PYTORCH_INDEX
from torch_matrix.world.uvoutput import trim_output, classify_install_failure, missing_wheel_message

DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 3.0


@dataclass(frozen=True)
class Verification:
    """What is really in the venv, and every way it differs from what the cell asked."""

    resolved: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


Runner = proc.Runner


def find_uv(environ: Mapping[str, str] | None = None) -> str | None:
    """The uv that came with this package (the ``uv`` wheel), else the one on ``environ``'s PATH;
    None when there is neither. Every session finds uv here, so a follow-up cell uses the same uv
    as a matrix cell (a pipx-style install has no venv ``bin`` on PATH)."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except Exception:  # noqa: BLE001 - not installed as a package, or no binary in it
        path = (os.environ if environ is None else environ).get("PATH")
        return shutil.which("uv", path=path)


def uv_executable(environ: Mapping[str, str] | None = None) -> str:
    """``find_uv``, else plain ``uv`` (its "not found" then names the tool)."""
    return find_uv(environ) or "uv"


def uv_cache_dir(environ: Mapping[str, str] | None = None, uv: str | None = None) -> str:
    """Where uv keeps its cache: ``$UV_CACHE_DIR``, else what ``uv cache dir`` says ("" if unknown)."""
    environ = os.environ if environ is None else environ
    if environ.get("UV_CACHE_DIR"):
        return environ["UV_CACHE_DIR"]
    code, out, _err = proc.run_text(
        [uv or uv_executable(), "cache", "dir"], timeout=30, env=environ
    )
    return out.strip() if code == 0 else ""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def link_mode_warning(
    cache_dir: str | Path, venv_dir: str | Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """Why uv would copy every wheel into every venv instead of hardlinking, or None.

    uv hardlinks from its cache only within one filesystem (uv #15875); across
    filesystems, or with ``UV_LINK_MODE=copy``, N cells cost N full copies of torch
    (~5 GB each) and every install is several times slower. Two ``stat`` calls.
    """
    environ = os.environ if environ is None else environ
    if environ.get("UV_LINK_MODE", "") == "copy":
        return (
            "UV_LINK_MODE=copy: uv copies every wheel into every cell's venv "
            "(N cells take N full copies of torch); unset it to hardlink from the cache"
        )
    if not cache_dir:
        return None
    cache_dev = os.stat(_nearest_existing(Path(cache_dir))).st_dev
    venv_dev = os.stat(_nearest_existing(Path(venv_dir))).st_dev
    if cache_dev == venv_dev:
        return None
    return (
        f"uv's cache {cache_dir} and the venvs in {venv_dir} are on different filesystems: uv cannot "
        f"hardlink and copies every wheel into every venv (N cells take N full copies of torch, and "
        f"each install is slower); set UV_CACHE_DIR to a directory on the venvs' filesystem"
    )


class IndexSettings(Protocol):
    """Where packages come from, as the installer reads it: ``spec.IndexConfig`` fits."""

    default: str
    pytorch: str
    extra: Sequence[str]
    find_links: Sequence[str]


# A spec's IndexConfig, a mapping with the same keys (plan --json, old results), or None.
IndexLike = IndexSettings | Mapping[str, Any] | None


def _index_field(index_config: IndexLike, name: str, default: Any) -> Any:
    if index_config is None:
        return default
    if isinstance(index_config, Mapping):
        return index_config.get(name, default)
    return getattr(index_config, name, default)


def install_command(
    cell: Cell,
    index_config: IndexLike,
    venv_python: str,
    uv: str = "uv",
    project_dir: str | None = None,
    *,
    with_project: bool = True,
) -> list[str]:
    """The exact ``uv pip install`` for ``cell``; pure, so it can be shown and recorded.

    ``index_config`` is a ``spec.IndexConfig`` (or a mapping with the same keys:
    default, pytorch, extra, find_links). The cell's ``install`` items (the project under
    test) follow its pins, their paths made absolute against ``project_dir`` (the spec's
    directory); ``with_project=False`` leaves them out (the pins alone).
    """
    command = [uv, "pip", "install", "--python", str(venv_python)]
    default = _index_field(index_config, "default", "") or ""
    if default:
        command += ["--default-index", default]
    for url in _index_field(index_config, "extra", ()) or ():
        command += ["--index", url]
    for path in _index_field(index_config, "find_links", ()) or ():
        command += ["--find-links", str(path)]
    variant = cell.variant
    if variant and variant != "default":
        pytorch = (_index_field(index_config, "pytorch", "") or OFFICIAL_PYTORCH_INDEX).rstrip("/")
        if pytorch == OFFICIAL_PYTORCH_INDEX:
            command += ["--torch-backend", variant]
        else:
            command += ["--index", f"{pytorch}/{variant}/"]
    if OVERRIDE_TAG in cell.tags:
        command += ["--overrides", str(overrides_path(venv_python))]
    command += list(cell.requirements)
    if with_project and cell.install:
        from torch_matrix.spec.install_items import uv_args

        command += uv_args(cell.install, project_dir or os.getcwd())
    return command


def pins_text(cell: Cell) -> str:
    """``torch 2.3.1`` (``, torchvision 0.18.1``...): the cell's exact pins, for messages."""
    parts = []
    for text in cell.requirements:
        req = Requirement(text)
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        parts.append(f"{req.name} {pins[0]}" if len(pins) == 1 else f"{req.name}{req.specifier}")
    return ", ".join(parts)


EXCLUDED_BY_PROJECT = "your requirements exclude"


def blame_project(
    cell: Cell,
    index_config: IndexLike,
    venv_python: str,
    message: str,
    *,
    uv: str,
    env: Mapping[str, str] | None,
    timeout_s: float | None,
    runner: Runner,
) -> str:
    """An unsatisfiable cell with install items: when the pins alone resolve, the project's own
    requirements are what exclude them; say so first (the resolver's words follow)."""
    alone = install_command(cell, index_config, venv_python, uv=uv, with_project=False)
    try:
        done = runner(
            alone[:3] + ["--dry-run"] + alone[3:],
            stdout=proc.PIPE,
            stderr=proc.STDOUT,
            text=True,
            env=dict(env) if env is not None else None,
            timeout=timeout_s,
        )
    except (OSError, proc.TimeoutExpired):
        return message
    if done.returncode != 0:
        return message  # the pins are unsatisfiable by themselves: not the project's doing
    return (
        f"{EXCLUDED_BY_PROJECT} {pins_text(cell)} (the cell's pins resolve alone; with "
        f"{' '.join(cell.install)} they do not)\n{message}"
    )


OVERRIDE_TAG = "install-override"  # torch_matrix.spec.model.OVERRIDE_TAG


def overrides_path(venv_python: str) -> Path:
    """Where an override cell's ``uv --overrides`` file lives: next to its venv."""
    return Path(venv_python).parent.parent / "torch-matrix-overrides.txt"


def override_lines(cell: Cell) -> list[str]:
    """The cell's torch requirement, forced over torchvision's own (a mismatched pair)."""
    return [req for req in cell.requirements if req.split("==")[0].strip().lower() == "torch"]


def install(
    cell: Cell,
    index_config: IndexLike,
    venv_python: str,
    *,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float = DEFAULT_BACKOFF_S,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    uv: str | None = None,
    runner: Runner = proc.run,
    sleep: Callable[[float], None] = time.sleep,
    project_dir: str | None = None,
    log: Callable[[str], None] | None = None,
) -> InstallOutcome:
    """Install the cell's requirements; retry only ``error`` outcomes, at most ``retries`` times.

    An unsatisfiable cell whose pins resolve without the project's install items says
    that the project's requirements exclude it (``your requirements exclude torch 2.3.1``).
    """
    uv = uv or uv_executable()
    command = install_command(cell, index_config, venv_python, uv=uv, project_dir=project_dir)
    if OVERRIDE_TAG in cell.tags:
        atomic_write(
            overrides_path(venv_python), "\n".join(override_lines(cell)) + "\n", durable=False
        )
    attempt = 0
    while True:
        attempt += 1
        # A failed attempt may have left packages half-installed (ENOSPC, killed): uv would see
        # their metadata and only say "Checked N packages". So every retry reinstalls.
        executed = command if attempt == 1 else command[:3] + ["--reinstall"] + command[3:]
        try:
            done = runner(
                executed,
                stdout=proc.PIPE,
                stderr=proc.STDOUT,
                text=True,
                env=dict(env) if env is not None else None,
                timeout=timeout_s,
            )
            returncode, output = done.returncode, done.stdout or ""
        except proc.TimeoutExpired:
            returncode, output = -9, f"install timed out after {timeout_s:g} s"
        except OSError as error:
            returncode, output = 127, f"cannot run {command[0]}: {error}"
        if returncode == 0:  # keep uv's summary lines: they carry its resolve/download times
            return InstallOutcome(
                INSTALLED, tuple(command), trim_output(output, keep_summary=True), attempt
            )
        verdict = classify_install_failure(returncode, output)
        if verdict.status == UNSATISFIABLE:
            plain = missing_wheel_message(
                cell, output, lambda p, v: _served_pythons(index_config, p, v, env)
            )
            verdict = replace(verdict, message=plain) if plain else verdict
        if verdict.status == UNSATISFIABLE and cell.install:
            message = blame_project(
                cell,
                index_config,
                venv_python,
                verdict.message,
                uv=uv,
                env=env,
                timeout_s=timeout_s,
                runner=runner,
            )
            return InstallOutcome(UNSATISFIABLE, tuple(command), message, attempt)
        if verdict.status == UNSATISFIABLE or attempt > retries or not verdict.retry:
            return InstallOutcome(verdict.status, tuple(command), verdict.message, attempt)
        if log is not None:  # a retry is said, with its reason: it costs a whole install again
            reason = verdict.message.splitlines()[0] if verdict.message else f"exit {returncode}"
            log(
                f"install attempt {attempt} of {retries + 1} failed ({reason[:200]}); retrying "
                f"with --reinstall in {backoff_s * attempt:g}s"
            )
        sleep(backoff_s * attempt)


def _served_pythons(
    index_config: IndexLike, package: str, version: str, env: Mapping[str, str] | None
) -> frozenset[str] | None:
    """The Pythons the index's wheels of ``package==version`` serve (None when it cannot tell)."""
    from torch_matrix.plan.grid import _wheel_pythons
    from torch_matrix.spec.model import IndexConfig
    from torch_matrix.world.index import open_index

    if not isinstance(index_config, IndexConfig):
        return None
    index = open_index(index_config, environ=dict(env) if env is not None else os.environ)
    return _wheel_pythons(index.files(package, version))


# ---------------------------------------------------------------- verification


def parse_freeze(text: str) -> dict[str, str]:
    """``uv pip freeze`` lines -> {canonical name: version}; direct references keep their URL."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        found[canonicalize_name(req.name)] = pins[0] if pins else (req.url or "")
    return found


def _local_matches_variant(local: str | None, variant: str) -> bool:
    """A labelled build must be the variant's build (``+cu124`` for cu124); no label is fine."""
    if not local or variant in ("", "default"):
        return True
    return local.lower() == variant.lower()


def check_installed(
    cell: Cell, frozen: Mapping[str, str], own_versions: Mapping[str, Mapping[str, str]]
) -> Verification:
    """Compare the venv with the cell's requirements (pure).

    Public-version equality is what ``==`` means (``2.5.1+cu124`` satisfies ``==2.5.1``);
    the local label is kept in ``resolved`` and must name the cell's variant when present.
    ``own_versions`` maps import names to ``{"version": ...}`` or ``{"error": ...}``.
    """
    resolved: dict[str, str] = {}
    problems: list[str] = []
    for text in cell.requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        installed = frozen.get(name)
        if installed is None:
            problems.append(f"{req.name}: asked {req.specifier or 'any'}, not installed")
            continue
        resolved[name] = installed
        try:
            version = Version(installed)
        except InvalidVersion:
            problems.append(f"{req.name}: installed {installed!r} is not a version")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}: asked {req.specifier}, got {installed}")
        if name in ("torch", "torchvision", "torchaudio") and not _local_matches_variant(
            version.local, cell.variant
        ):
            problems.append(f"{req.name}: asked the {cell.variant} build, got {installed}")
        own = own_versions.get(req.name.replace("-", "_").lower())
        if own is None:
            continue
        if "error" in own:
            problems.append(f"{req.name}: cannot read its __version__: {own['error']}")
        elif own.get("version") != installed and (
            public_version(own.get("version")) or own.get("version")
        ) != (public_version(installed) or installed):
            problems.append(
                f"{req.name}: __version__ says {own.get('version')}, uv pip freeze says {installed}"
            )
    return Verification(resolved, tuple(problems))


# Projects whose import name is the project name and whose __version__ we check.
VERSIONED_IMPORTS = ("torch", "torchvision", "torchaudio", "numpy")


def verify(
    cell: Cell,
    venv_python: str,
    outcome: InstallOutcome,
    *,
    env: Mapping[str, str] | None = None,
    uv: str | None = None,
    runner: Runner = proc.run,
    timeout_s: float = 300.0,
) -> InstallOutcome:
    """Check that the venv holds what the cell asked for; a mismatch turns ``installed`` into ``error``."""
    if outcome.status != INSTALLED:
        return outcome
    freeze_cmd = [uv or uv_executable(), "pip", "freeze", "--python", str(venv_python)]
    code, out, err = proc.run_text(freeze_cmd, timeout=timeout_s, env=env, runner=runner)
    if code != 0:
        return replace(
            outcome,
            status=INSTALL_ERROR,
            message=f"verify: uv pip freeze failed: {trim_output(err)}",
        )
    frozen = parse_freeze(out)
    names = [
        n
        for n in VERSIONED_IMPORTS
        if any(canonicalize_name(Requirement(r).name) == n for r in cell.requirements)
    ]
    own: dict[str, Any] = {}
    if names:
        # Each package's own __version__, read inside the cell's interpreter (isolated).
        found, why = run_facts(
            venv_python, ["versions", *names], env=env, timeout_s=timeout_s, runner=runner
        )
        own = (
            found
            if isinstance(found, dict)
            else {n: {"error": trim_output(why)[-300:]} for n in names}
        )
    checked = check_installed(cell, frozen, own)
    if checked.ok:
        # Every file each wheel's RECORD lists must be there: a partial install (full disk,
        # killed installer) keeps its metadata, so freeze and __version__ alone look fine.
        broken, why = run_facts(
            venv_python, ["record"], env=env, timeout_s=timeout_s, runner=runner
        )
        if not isinstance(broken, list) or broken:
            problems = broken or [f"cannot check the installed files: {trim_output(why)[-300:]}"]
            return replace(
                outcome,
                status=INSTALL_ERROR,
                resolved=dict(checked.resolved),
                message="partial install (checked against each wheel's RECORD): "
                + "; ".join(problems),
            )
        return replace(outcome, resolved=dict(checked.resolved))
    return replace(
        outcome,
        status=INSTALL_ERROR,
        resolved=dict(checked.resolved),
        message="installed versions differ from the cell: " + "; ".join(checked.problems),
    )


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for uv and the cell: ours, minus what would leak our venv into the cell."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONNOUSERSITE")
    }
    env.update(extra or {})
    return env
