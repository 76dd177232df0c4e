"""Validate a spec's text into ``torch_matrix.spec.model`` records. Pure: a function of its arguments.

The spec is user input: every problem becomes one ``UserError`` that names the file,
the dotted key and the bad value, with a hint, never a traceback.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_matrix.judge.gpus import Target, TargetError, parse_driver, parse_gpu, targets_of
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import default_policy, public_version
from torch_matrix.spec.reader import CHECK_HINT, TableReader, show_value, spec_hint
from torch_matrix.spec.model import (
    DEFAULT_COMMAND_TIMEOUT_S,
    DEFAULT_PROBE_TIMEOUT_S,
    CURRENT_PYTHON,
    DEFAULT_TORCH,
    DEFAULT_VARIANT,
    INSTALL_MODES,
    NAME_RE,
    POLICY_VALUES,
    PROBE_NAME_RE,
    PYPROJECT,
    PYPROJECT_TABLE,
    PYTHON_RE,
    PYTORCH_INDEX,
    TORCH_SELECT,
    VARIANT_RE,
    VERSIONED_AXES,
    ExtraAxis,
    IndexConfig,
    ProbeConfig,
    Rule,
    Spec,
    TorchSelection,
)

if sys.version_info >= (3, 11):
    import tomllib as tomllib  # re-exported: world/specfile reads TOML the same way
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# A TOML file that cannot be read (the tuple world/specfile and run/budget catch): arrays or
# inline tables nested past Python's recursion limit raise RecursionError, not TOMLDecodeError.
TOML_ERRORS = (tomllib.TOMLDecodeError, RecursionError)


def loads_toml(text: str, where: str, hint: str) -> dict[str, Any]:
    """``tomllib.loads``, every way it fails one ``UserError`` naming the file."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"invalid TOML: {error}", where=where, hint=hint) from None
    except RecursionError:
        raise UserError(
            "invalid TOML: arrays or tables nested too deeply to read", where=where, hint=hint
        ) from None


def derived_name(path: Path) -> str:
    """The results name of a spec file that sets none: its directory's name (``tinytrain`` for
    tinytrain/matrix.toml), plus the file's stem for any other file name (``tinytrain-gpu``).

    Readable and the same on every machine that checks the project out, and never ``default``,
    so two specs do not silently share ``results/default``.
    """
    resolved = path.resolve()
    parts = [resolved.parent.name or "spec"] + (
        [] if resolved.name == "matrix.toml" else [resolved.stem]
    )
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(parts)).strip("-._") or "spec"
    return name if name != "default" else "default-spec"


def parse_spec(
    text: str,
    where: str = "matrix.toml",
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | None = None,
    default_name: str | None = None,
) -> Spec:
    """Validate a spec's text. Pure: a function of its arguments alone.

    ``environ`` (pip's variables, ``HOME`` for ``~`` in paths) is only what the caller
    passes; relative paths are joined to ``base_dir`` (default: the directory part of
    ``where``), never to the process's current directory. ``default_name`` is the
    results name when the spec sets none (``default`` if None).
    """
    data = loads_toml(text, where, "fix the TOML syntax at that line and column; " + CHECK_HINT)
    return _Parser(
        where, environ or {}, base_dir or os.path.dirname(where), default_name or "default"
    ).spec(data)


def parse_pyproject(
    text: str,
    where: str = PYPROJECT,
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | None = None,
) -> Spec:
    """The ``[tool.torch-matrix]`` table of a pyproject.toml: the same keys as matrix.toml.

    With no ``name`` the results go under the project's name (``[project] name``), else a
    name derived from the table, never ``default``.
    """
    data = loads_toml(text, where, "fix the TOML syntax at that line and column; " + CHECK_HINT)
    tool = data.get("tool", {})
    table = tool.get("torch-matrix") if isinstance(tool, dict) else None
    shown = f"{where} [{PYPROJECT_TABLE}]"
    if table is None:
        raise UserError(
            f"no [{PYPROJECT_TABLE}] table",
            where=where,
            hint=f"add a [{PYPROJECT_TABLE}] table (the keys of matrix.toml: `torch-matrix help spec keys`) "
            "or point --spec at a matrix.toml",
        )
    if not isinstance(table, dict):
        raise UserError(
            f"expected a table, got {show_value(table)}", where=shown, hint=spec_hint("")
        )
    project = data.get("project")
    project_name = project.get("name") if isinstance(project, dict) else None
    if isinstance(project_name, str) and NAME_RE.match(canonicalize_name(project_name)):
        default_name: str = canonicalize_name(project_name)
    else:
        default_name = derived_name(Path(where).parent / "matrix.toml")
    return _Parser(shown, environ or {}, base_dir or os.path.dirname(where), default_name).spec(
        table
    )


INSTALL_HINT = (
    "each `install` entry is a path such as '.[test]' (relative to the spec's directory), "
    "'-e PATH', '-r FILE', '-c FILE' or a PEP 508 requirement such as 'pytest>=8' "
    "(`torch-matrix help spec install`)"
)


class _Parser(TableReader):
    TOP_KEYS = (
        "name",
        "python",
        "torch",
        "torchvision",
        "variant",
        "extras",
        "exclude",
        "include",
        "probes",
        "index",
        "interpreters",
        "install",
        "targets",
        "allow_missing_interpreters",
        "followups",
        "disk_budget",
    )

    def __init__(
        self, where: str, environ: Mapping[str, str], base_dir: str, default_name: str = "default"
    ) -> None:
        super().__init__(where, environ, base_dir)
        self.default_name = default_name

    # -- sections

    def spec(self, data: Mapping[str, Any]) -> Spec:
        self.check_keys(data, self.TOP_KEYS, "")
        name = self.string(data.get("name", self.default_name), "name")
        if not NAME_RE.match(name):
            raise self.error("name", f"invalid name {name!r} (letters, digits, '.', '_', '-')")
        python = self.pythons(data.get("python", [CURRENT_PYTHON]))
        torch = self.torch(data.get("torch", dict(DEFAULT_TORCH)))  # left out: the default matrix's
        torchvision = self.torchvision(data.get("torchvision", "paired"))
        variants = self.variants(data.get("variant", [DEFAULT_VARIANT]))
        extras = self.extras(data.get("extras", {}))
        axes = ("python", "torch", "torchvision", "variant") + tuple(e.name for e in extras)
        exclude = self.rules(data.get("exclude", []), "exclude", axes, extras)
        include = self.rules(data.get("include", []), "include", axes, extras)
        for rule in include:
            for required in ("python", "torch"):
                if required not in rule.values:
                    raise self.error(rule.where, f"an include entry needs {required!r}")
            for axis, values in rule.values.items():
                if len(values) != 1:
                    raise self.error(
                        f"{rule.where}.{axis}", "an include entry takes one value per axis"
                    )
        return Spec(
            name=name,
            python=python,
            torch=torch,
            torchvision=torchvision,
            variants=variants,
            extras=extras,
            exclude=exclude,
            include=include,
            probes=self.probes(data.get("probes", {})),
            index=self.index(data.get("index", {})),
            interpreters=self.interpreters(data.get("interpreters", {})),
            path=self.where,
            base_dir=self.base_dir,
            install=self.install(data.get("install", [])),
            targets=self.targets(data.get("targets", {})),
            allow_missing_interpreters=self.boolean(
                data.get("allow_missing_interpreters", False), "allow_missing_interpreters"
            ),
            followups=self.followups(data.get("followups")),
            disk_budget=self.disk_budget(data.get("disk_budget")),
        )

    def followups(self, value: Any) -> int | None:
        """``followups = N``: the most follow-up cells a run adds (0: none)."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.error(
                "followups",
                f"expected a number of cells >= 0, got {show_value(value)}",
                hint="`followups = 6` bounds the follow-up cells to 6; `followups = 0` runs none; "
                + spec_hint("followups"),
            )
        return value

    def disk_budget(self, value: Any) -> int | None:
        """``disk_budget = "15GB"``: the disk the run may fill."""
        from torch_matrix.vocab.sizes import EXAMPLES, parse_size

        if value is None:
            return None
        try:
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise ValueError(f"expected a size such as {EXAMPLES}, got {show_value(value)}")
            return parse_size(value)
        except ValueError as error:
            raise self.error(
                "disk_budget",
                str(error),
                hint='`disk_budget = "15GB"`; leave it out for the free space less a margin; '
                + spec_hint("disk_budget"),
            ) from None

    def targets(self, value: Any) -> tuple[Target, ...]:
        """``[targets]``: ``gpus`` (product names or capabilities) and ``drivers`` (NVIDIA versions)."""
        table = self.table(value, "targets")
        self.check_keys(table, ("gpus", "drivers"), "targets")
        gpus = self.string_list(table.get("gpus", []), "targets.gpus", allow_empty=True)
        drivers = self.string_list(table.get("drivers", []), "targets.drivers", allow_empty=True)
        for key, items, parse in (
            ("targets.gpus", gpus, parse_gpu),
            ("targets.drivers", drivers, parse_driver),
        ):
            for i, item in enumerate(items):
                try:
                    parse(item)
                except TargetError as error:
                    raise self.error(
                        f"{key}[{i}]", str(error), hint=f"{error.hint}; {spec_hint(key)}"
                    ) from None
        targets = targets_of(gpus, drivers)
        labels = [t.label for t in targets]
        for label in labels:
            if labels.count(label) > 1:
                raise self.error(
                    "targets.gpus", f"{label!r} is named twice (two spellings of one GPU)"
                )
        return targets

    def install(self, value: Any) -> tuple[str, ...]:
        from torch_matrix.spec.install_items import InstallItemError, parse_item

        items = self.string_list(value, "install", allow_empty=True)
        for i, item in enumerate(items):
            try:
                parse_item(item)
            except InstallItemError as error:
                raise UserError(
                    str(error), where=f"{self.where}: install[{i}]", hint=INSTALL_HINT
                ) from None
        return tuple(item.strip() for item in items)

    def pythons(self, value: Any) -> tuple[str, ...]:
        items = self.string_list(value, "python")
        for i, item in enumerate(items):
            if item != CURRENT_PYTHON and not PYTHON_RE.match(item):
                raise self.error(
                    f"python[{i}]",
                    f"invalid Python version {item!r} (expected X.Y such as '3.11', or 'current')",
                )
        return items

    def torch(self, value: Any) -> TorchSelection:
        if isinstance(value, list):
            explicit = self.string_list(value, "torch")
            return TorchSelection(
                explicit=tuple(self.version(v, f"torch[{i}]") for i, v in enumerate(explicit))
            )
        if isinstance(value, str):
            return TorchSelection(versions=self.specifier(value, "torch"))
        table = self.table(value, "torch")
        self.check_keys(table, ("versions", "select", "newest"), "torch")
        versions = self.specifier(table.get("versions", ""), "torch.versions")
        select = self.string(table.get("select", "latest-patch"), "torch.select")
        if select not in TORCH_SELECT:
            raise self.error(
                "torch.select",
                f"invalid value {select!r} (expected one of: {', '.join(TORCH_SELECT)})",
            )
        newest = table.get("newest")
        if newest is not None and (
            isinstance(newest, bool) or not isinstance(newest, int) or newest < 1
        ):
            raise self.error(
                "torch.newest", f"expected a positive integer, got {show_value(newest)}"
            )
        return TorchSelection(versions=versions, select=select, newest=newest)

    def torchvision(self, value: Any) -> str | tuple[str, ...]:
        if isinstance(value, str):
            if value not in ("paired", "none"):
                raise self.error(
                    "torchvision",
                    f"invalid value {value!r} (expected 'paired', 'none' or a list of versions)",
                )
            return value
        items = self.string_list(value, "torchvision")
        return tuple(self.version(v, f"torchvision[{i}]") for i, v in enumerate(items))

    def variants(self, value: Any) -> tuple[str, ...]:
        items = self.string_list(value, "variant")
        for i, item in enumerate(items):
            if not VARIANT_RE.match(item):
                raise self.error(
                    f"variant[{i}]",
                    f"invalid variant {item!r} (expected default, auto, cpu, "
                    "cuXYZ such as cu124, rocmX.Y or xpu)",
                )
        return items

    def extras(self, value: Any) -> tuple[ExtraAxis, ...]:
        table = self.table(value, "extras")
        axes = []
        labels: dict[str, str] = {}
        for name, spec in table.items():
            key = f"extras.{name}"
            try:
                requirement = Requirement(name)
            except InvalidRequirement:
                requirement = None
            if requirement is None or str(requirement) != name:
                raise self.error(key, f"invalid project name {name!r}")
            if canonicalize_name(name) in ("torch", "torchvision", "python", "variant"):
                raise self.error(key, f"{name!r} is a core axis, set it at the top level")
            label = re.sub(r"[^A-Za-z0-9]", "", name).lower()
            if isinstance(spec, dict):
                self.check_keys(spec, ("values", "label"), key)
                if "values" not in spec:
                    raise self.error(key, "missing key 'values'")
                raw_values = spec["values"]
                if "label" in spec:
                    label = self.string(spec["label"], f"{key}.label")
                    if not re.match(r"^[A-Za-z][A-Za-z0-9]*$", label):
                        raise self.error(
                            f"{key}.label", f"invalid label {label!r} (letters and digits)"
                        )
                values_key = f"{key}.values"
            else:
                raw_values, values_key = spec, key
            items = self.string_list(raw_values, values_key)
            values = tuple(self.pin(v, f"{values_key}[{i}]") for i, v in enumerate(items))
            if len(set(values)) != len(values):
                raise self.error(values_key, f"duplicate values {list(items)!r}")
            if label in labels:
                raise self.error(key, f"label {label!r} is already used by extras.{labels[label]}")
            labels[label] = name
            axes.append(ExtraAxis(name=name, values=values, label=label))
        return tuple(axes)

    def rules(
        self, value: Any, key: str, axes: tuple[str, ...], extras: tuple[ExtraAxis, ...]
    ) -> tuple[Rule, ...]:
        if not isinstance(value, list):
            raise self.error(
                key, f"expected an array of tables ([[{key}]]), got {show_value(value)}"
            )
        rules = []
        for i, entry in enumerate(value):
            where = f"{key}[{i}]"
            table = dict(self.table(entry, where))
            if not table:
                raise self.error(where, "empty rule")
            install = ""
            if key == "include" and "install" in table:
                install = self.string(table.pop("install"), f"{where}.install")
                if install not in INSTALL_MODES:
                    raise self.error(
                        f"{where}.install",
                        f"expected one of {', '.join(INSTALL_MODES)}, got {install!r}",
                    )
            self.check_keys(table, axes, where)
            values: dict[str, tuple[str, ...]] = {}
            for axis, raw in table.items():
                akey = f"{where}.{axis}"
                items = self.string_list(raw, akey)
                checked = []
                for j, item in enumerate(items):
                    ikey = akey if len(items) == 1 else f"{akey}[{j}]"
                    checked.append(self.rule_value(axis, item, ikey, key == "include", extras))
                values[axis] = tuple(checked)
            rules.append(
                Rule(values=values, where=where, install=install if install != "resolve" else "")
            )
        return tuple(rules)

    def rule_value(
        self, axis: str, value: str, key: str, include: bool, extras: tuple[ExtraAxis, ...]
    ) -> str:
        if include:
            # Include entries name one exact cell.
            if axis == "python":
                if value != CURRENT_PYTHON and not PYTHON_RE.match(value):
                    raise self.error(key, f"invalid Python version {value!r}")
                return value
            if axis == "torch":
                return self.version(value, key)
            if axis == "torchvision":
                return value if value in ("paired", "none") else self.version(value, key)
            if axis == "variant":
                if not VARIANT_RE.match(value):
                    raise self.error(key, f"invalid variant {value!r}")
                return value
            return self.pin(value, key)
        if axis in VERSIONED_AXES:
            return str(version_matcher(value, key, self.where))
        if axis != "variant" and value and value[0] in "<>=!~":
            return self.pin(value, key)  # normalise so it compares equal to the axis value
        if any(axis == extra.name for extra in extras) and public_version(value):
            return self.pin(value, key)  # a bare version means ==, as in [extras]
        return value

    def probes(self, value: Any) -> ProbeConfig:
        table = self.table(value, "probes")
        self.check_keys(
            table,
            ("run", "required", "unsupported", "skip", "dirs", "commands", "timeout"),
            "probes",
        )
        run = self.string_list(table.get("run", []), "probes.run", allow_empty=True)
        required = self.string_list(table.get("required", []), "probes.required", allow_empty=True)
        commands_table = self.table(table.get("commands", {}), "probes.commands")
        commands = {}
        for name, command in commands_table.items():
            if not PROBE_NAME_RE.match(name):
                raise self.error(f"probes.commands.{name}", f"invalid probe name {name!r}")
            commands[name] = self.string(command, f"probes.commands.{name}")
            if not commands[name].strip():
                raise self.error(f"probes.commands.{name}", "empty command")
        for key, names in (("probes.run", run), ("probes.required", required)):
            for i, name in enumerate(names):
                if not PROBE_NAME_RE.match(name):
                    raise self.error(f"{key}[{i}]", f"invalid probe name {name!r}")
        if run:
            runs = set(run) | set(commands)
            for i, name in enumerate(required):
                if name not in runs:
                    raise self.error(
                        f"probes.required[{i}]", f"{name!r} is required but not in probes.run"
                    )
        defaults = default_policy(names_required=bool(required))  # why: see records.DEFAULT_POLICY
        policy = {}
        for key in ("unsupported", "skip"):
            policy[key] = self.string(table.get(key, defaults[key]), f"probes.{key}")
            if policy[key] not in POLICY_VALUES:
                raise self.error(
                    f"probes.{key}", f"invalid value {policy[key]!r} (expected 'fail' or 'pass')"
                )
        timeout = table.get("timeout", DEFAULT_PROBE_TIMEOUT_S)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not timeout > 0
            or not math.isfinite(timeout)
        ):
            raise self.error(
                "probes.timeout",
                f"expected a positive, finite number of seconds, got {show_value(timeout)}",
            )
        dirs = tuple(
            self.path(d, f"probes.dirs[{i}]")
            for i, d in enumerate(
                self.string_list(table.get("dirs", []), "probes.dirs", allow_empty=True)
            )
        )
        return ProbeConfig(
            run=run,
            required=required,
            dirs=dirs,
            commands=commands,
            timeout=float(timeout),
            command_timeout=float(timeout) if "timeout" in table else DEFAULT_COMMAND_TIMEOUT_S,
            **policy,
        )

    def index(self, value: Any) -> IndexConfig:
        table = self.table(value, "index")
        self.check_keys(table, ("default", "pytorch", "extra", "find_links"), "index")
        env = self.environ
        origins = {key: f"{self.where} [index] {key}" for key in table}
        if "default" in table:
            default = self.url(table["default"], "index.default", allow_empty=True)
        else:
            default = env.get("PIP_INDEX_URL", "").strip()
            origins["default"] = "$PIP_INDEX_URL" if default else ""
        pytorch = self.url(table.get("pytorch", PYTORCH_INDEX), "index.pytorch")
        origins.setdefault("pytorch", "built in (PyTorch's own index)")
        if "extra" in table:
            extra = tuple(
                self.url(u, f"index.extra[{i}]")
                for i, u in enumerate(
                    self.string_list(table["extra"], "index.extra", allow_empty=True)
                )
            )
        else:
            extra = tuple(env.get("PIP_EXTRA_INDEX_URL", "").split())
            origins["extra"] = "$PIP_EXTRA_INDEX_URL"
        if "find_links" in table:
            find_links = tuple(
                self.path(u, f"index.find_links[{i}]")
                for i, u in enumerate(
                    self.string_list(table["find_links"], "index.find_links", allow_empty=True)
                )
            )
        else:
            find_links = tuple(env.get("PIP_FIND_LINKS", "").split())
            origins["find_links"] = "$PIP_FIND_LINKS"
        return IndexConfig(
            default=default,
            pytorch=pytorch,
            extra=extra,
            find_links=find_links,
            origins=tuple(sorted(origins.items())),
        )

    def interpreters(self, value: Any) -> dict[str, str]:
        table = self.table(value, "interpreters")
        found = {}
        for version, path in table.items():
            key = f"interpreters.{version!r}" if "." in version else f"interpreters.{version}"
            if not PYTHON_RE.match(version):
                raise self.error(key, f"invalid Python version {version!r} (expected X.Y)")
            found[version] = self.path(path, key)
        return found


def version_matcher(value: str, key: str = "", where: str = "matrix.toml") -> SpecifierSet:
    """A rule value for a versioned axis: a specifier, or a bare version meaning that release series."""
    text = value.strip()
    try:
        if text and text[0].isdigit():
            Version(text)
            return SpecifierSet(f"=={text}.*")
        if not text:
            raise InvalidSpecifier(text)
        return SpecifierSet(text)
    except (InvalidSpecifier, InvalidVersion):
        raise UserError(
            f"invalid version or specifier {value!r}",
            where=f"{where}: {key}",
            hint="use a version such as '2.5' (that release series) or a specifier "
            "such as '>=2.5'; " + spec_hint(key),
        ) from None
