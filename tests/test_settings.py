"""The settings table (torch_matrix/vocab/settings.py): every ``TORCH_MATRIX_*`` variable declared
once, parsed by one parser, a bad value one line naming the variable and what it accepts; the
table, ``torch-matrix help env`` and the spec reference's environment section agree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from torch_matrix.cli import main
from torch_matrix.cli.reference import reference_text, topic
from torch_matrix.probes import pytest_outcomes, pytest_select
from torch_matrix.vocab import settings
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.settings import BY_NAME, INTERNAL, USER, VARIABLES, Settings, parse, read

PACKAGE = Path(__file__).resolve().parent.parent / "torch_matrix"
NAME = re.compile(r"\bTORCH_MATRIX_[A-Z][A-Z_]*[A-Z]\b")
PARSED = [v for v in VARIABLES if v.field and v.setter == USER]


def test_every_variable_the_code_names_is_declared_once() -> None:
    named = {
        name: path.relative_to(PACKAGE)
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in NAME.findall(path.read_text(encoding="utf-8"))
    }
    assert sorted(set(named) - set(BY_NAME)) == []
    assert (
        len(BY_NAME) == len(VARIABLES) == 26
    )  # RERUN_ALWAYS left, the ecosystem's PYTEST_ONLY came, RUN_URL (pins --pr-body) came, DISK_BUDGET and KEEP_VENVS came (#32), PROBE_NOW (the heartbeat, #42), SAFE_GLOBALS (a fix's proof, #42)
    assert "TORCH_MATRIX_RERUN_ALWAYS" not in named  # a benchmark-only switch: not in the product


def test_the_probe_suite_reads_the_declared_names() -> None:
    """The probe suite imports nothing of ours (stdlib only): its own spelling must match."""
    assert pytest_outcomes.OUT_ENV == settings.PYTEST_OUT_ENV
    assert pytest_select.ONLY_ENV == settings.PYTEST_ONLY_ENV
    from torch_matrix.probes import safe_globals

    assert safe_globals.GLOBALS_ENV == settings.SAFE_GLOBALS_ENV
    install_check = (PACKAGE / "probes" / "installcheck.py").read_text(encoding="utf-8")
    assert f'"{settings.VERIFIED_DB_ENV}"' in install_check


def test_unset_and_empty_are_the_defaults() -> None:
    assert parse({}) == Settings()
    assert parse({v.name: "" for v in VARIABLES}) == Settings()
    assert parse({v.name: "  " for v in PARSED}) == Settings()


@pytest.mark.parametrize(
    "name, raw, value",
    [
        ("TORCH_MATRIX_FOLLOWUPS", "0", 0),
        ("TORCH_MATRIX_FOLLOWUPS", "7", 7),
        ("TORCH_MATRIX_COUNTERFACTUALS", "3", 3),
        ("TORCH_MATRIX_PREFETCH", "0", 0),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "2.5", 2.5),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "1e9", 1e9),
        ("TORCH_MATRIX_PROBE_GRACE", "0.5", 0.5),
        ("TORCH_MATRIX_PROBE_RERUNS", "0", 0),
        ("TORCH_MATRIX_RETRY_BACKOFF", "0", 0.0),
        ("TORCH_MATRIX_INDEX_TTL", "0", 0.0),
        ("TORCH_MATRIX_SHARD", "2/5", (2, 5)),
        ("TORCH_MATRIX_REDO", "1", True),
        ("TORCH_MATRIX_REDO", "yes", True),
        ("TORCH_MATRIX_REDO", "0", False),
        ("TORCH_MATRIX_GPUS", "0, 1", ("0", "1")),
        ("TORCH_MATRIX_NIGHTLY_INDEX", "file:///srv/nightly", "file:///srv/nightly"),
        ("TORCH_MATRIX_RESULTS", "/r", "/r"),
    ],
)
def test_a_good_value_is_read(name: str, raw: str, value: object) -> None:
    field = BY_NAME[name].field
    assert getattr(parse({name: raw}), field) == value
    target = BY_NAME[name].alias_of or name
    assert read({name: raw}, target) == value


@pytest.mark.parametrize(
    "name, raw",
    [
        ("TORCH_MATRIX_FOLLOWUPS", "x"),  # issue 35: was silently the default (24)
        ("TORCH_MATRIX_FOLLOWUPS", "-1"),  # issue 35: was silently 0
        ("TORCH_MATRIX_FOLLOWUPS", "2.5"),
        ("TORCH_MATRIX_COUNTERFACTUALS", "-1"),
        ("TORCH_MATRIX_PREFETCH", "two"),
        ("TORCH_MATRIX_PREFETCH", "-1"),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "1e300"),  # issue 35: was an OverflowError traceback
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "nan"),
        ("TORCH_MATRIX_PREFETCH_FREE_GB", "-1"),
        ("TORCH_MATRIX_PROBE_GRACE", "inf"),
        ("TORCH_MATRIX_PROBE_GRACE", "-3"),
        ("TORCH_MATRIX_PROBE_RERUNS", "-1"),  # was silently 0
        ("TORCH_MATRIX_PROBE_RERUNS", "many"),  # was silently 2
        ("TORCH_MATRIX_RETRY_BACKOFF", "soon"),
        ("TORCH_MATRIX_INDEX_TTL", "-1"),
        ("TORCH_MATRIX_SHARD", "0/3"),
        ("TORCH_MATRIX_SHARD", "3"),
        ("TORCH_MATRIX_REDO", "maybe"),
        ("TORCH_MATRIX_GPUS", "0,,1"),
        ("TORCH_MATRIX_NIGHTLY_INDEX", "download.pytorch.org/whl/nightly"),
        # issue 45: accepted, then a cell's watchdog thread died (timestamp out of range) and an
        # install retry ended in an OverflowError traceback: every number has a declared range
        ("TORCH_MATRIX_PROBE_GRACE", "1e300"),
        ("TORCH_MATRIX_PROBE_GRACE", "86401"),
        ("TORCH_MATRIX_RETRY_BACKOFF", "1e300"),
        ("TORCH_MATRIX_RETRY_BACKOFF", "3601"),
        ("TORCH_MATRIX_INDEX_TTL", "1e300"),
        ("TORCH_MATRIX_PROBE_RERUNS", "99999999999999999999"),
        ("TORCH_MATRIX_FOLLOWUPS", "99999999999999999999"),
        ("TORCH_MATRIX_PREFETCH", "99999999999999999999"),
        ("TORCH_MATRIX_DISK_BUDGET", "1e300"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable_and_what_it_accepts(
    name: str, raw: str
) -> None:
    variable = BY_NAME[name]
    with pytest.raises(UserError) as caught:
        parse({name: raw})
    assert caught.value.one_line() == (
        f"torch-matrix: error: {name}: {raw!r} is not accepted: expected {variable.accepted}"
    )
    assert f"{name}={variable.example}" in caught.value.hint
    with pytest.raises(UserError):
        read({name: raw}, variable.alias_of or name)


def test_the_current_name_wins_over_the_older_one() -> None:
    both = {"TORCH_MATRIX_FOLLOWUPS": "5", "TORCH_MATRIX_COUNTERFACTUALS": "9"}
    assert parse(both).followups == 5 == read(both, "TORCH_MATRIX_FOLLOWUPS")


def test_variables_set_by_the_tool_or_read_in_the_cell_are_not_parsed_here() -> None:
    assert parse({"TORCH_MATRIX_LOCK_OWNER": "x", "TORCH_MATRIX_VERIFIED_DB": ""}) == Settings()
    with pytest.raises(KeyError):
        read({}, "TORCH_MATRIX_CELL")


def test_help_env_prints_every_variable_with_its_default_and_accepted_values(capsys) -> None:
    assert main(["help", "env"]) == 0
    out = capsys.readouterr().out
    for variable in VARIABLES:
        assert f"  {variable.name}  ({variable.type})" in out
        assert variable.meaning in out
        if variable.setter == USER:
            assert f"default: {variable.default}" in out
            assert f"accepts: {variable.accepted}" in out
    assert out.index("TORCH_MATRIX_NIGHTLY_INDEX") < out.index("Set by torch-matrix")
    assert out.index("Set by torch-matrix") < out.index("TORCH_MATRIX_LOCK_OWNER")


def test_the_spec_reference_lists_what_the_table_declares() -> None:
    section = topic(reference_text(), "environment")
    assert section is not None
    listed = set(NAME.findall(section))
    assert listed == set(BY_NAME)
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| `(TORCH_MATRIX_[A-Z_]+)` \| (.*) \|$", section, re.M)
    }
    for variable in VARIABLES:
        if variable.setter == INTERNAL:
            assert variable.name not in rows  # listed among those torch-matrix sets itself
            continue
        assert variable.name in rows, variable.name
        default = re.split(r"[ ,]", variable.default)[0]
        assert default.strip("./") in rows[variable.name], (variable.name, default)


def test_a_bad_value_stops_a_command_before_it_runs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TORCH_MATRIX_FOLLOWUPS", "-1")
    monkeypatch.chdir(tmp_path)
    assert main(["plan"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("torch-matrix: error: TORCH_MATRIX_FOLLOWUPS: '-1' is not accepted")
    assert err[1].startswith("  hint: e.g. TORCH_MATRIX_FOLLOWUPS=24")
    assert "Traceback" not in "\n".join(err)


# The argument list each command needs to get past argparse (whose own exit is 2 as well): a new
# command must be added here, so that it too is shown to refuse a bad value before any work.
COMMAND_ARGS = {
    "plan": [],
    "report": ["{tmp}"],
    "pins": ["{tmp}"],
    "repro": ["some-cell"],
    "check": [],
    "import": ["{tmp}"],
    "history": [],
    "diff": ["{tmp}", "{tmp}"],
    "bisect": ["--good", "2.5.0", "--bad", "2.6.0"],
    "ecosystem": ["run", "--baseline", "2.5.1", "--candidate", "2.6.0", "{tmp}/projects.toml"],
    "run": [],
}


def test_every_number_has_a_declared_range() -> None:
    """A parsed number has an upper bound: no value reaches a timer, a sleep or a loop unchecked."""
    for variable in PARSED:
        if variable.type in ("seconds", "count", "GB", "size"):
            assert " to " in variable.accepted, variable.name
            with pytest.raises(UserError):
                parse({variable.name: "1" + "0" * 30})


@pytest.mark.parametrize(
    "name, raw", [("TORCH_MATRIX_PROBE_GRACE", "1e300"), ("TORCH_MATRIX_RETRY_BACKOFF", "1e300")]
)
def test_a_value_out_of_range_stops_every_command_with_one_line(
    tmp_path, monkeypatch, capsys, name, raw
) -> None:
    """Issue 45: ``TORCH_MATRIX_PROBE_GRACE=1e300 torch-matrix plan`` was accepted (and overflowed
    a timer in each cell). Every command refuses it first: one line naming the variable and the
    range, a hint, exit 2, no traceback."""
    from torch_matrix.cli import COMMANDS

    assert sorted(COMMAND_ARGS) == sorted(set(COMMANDS) - {"help"})
    monkeypatch.setenv(name, raw)
    monkeypatch.chdir(tmp_path)
    accepted = BY_NAME[name].accepted
    assert " from 0 to " in accepted
    for command, args in COMMAND_ARGS.items():
        argv = [command] + [a.format(tmp=tmp_path) for a in args]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.splitlines()
        assert err[0] == (
            f"torch-matrix: error: {name}: {raw!r} is not accepted: expected {accepted}"
        ), argv
        assert err[1].startswith(f"  hint: e.g. {name}="), argv
        assert len(err) == 2, (argv, err)
    assert main(["help", "env"]) == 0  # the table of variables prints whatever they hold
    assert name in capsys.readouterr().out


def _env_names(tree: ast.Module) -> dict[str, str]:
    """The identifiers a module binds to a ``TORCH_MATRIX_*`` name (the table's constants, under
    any alias, and its own ``X = "TORCH_MATRIX_..."``), with the name each stands for."""
    known = {k: v for k, v in vars(settings).items() if isinstance(v, str) and NAME.fullmatch(v)}
    names = dict(known)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in known:
                    names[alias.asname or alias.name] = known[alias.name]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and _variable(value, names):
                names[target.id] = _variable(value, names)
    return names


def _variable(node: ast.AST, names: dict[str, str]) -> str:
    """The TORCH_MATRIX_* name ``node`` stands for ("" none)."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and NAME.fullmatch(node.value)
    ):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id, "")
    if isinstance(node, ast.Attribute):
        return names.get(node.attr, "")
    return ""


def _reads(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, text, variable) of each lookup of a TORCH_MATRIX_* name in a mapping or the
    process's environment: ``m.get(NAME)``, ``m[NAME]``, ``NAME in m``, ``os.getenv(NAME)``."""
    names = _env_names(tree)
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "getenv")) or (
                isinstance(func, ast.Name) and func.id == "getenv"
            ):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            key = node.left
        if key is not None and _variable(key, names):
            found.append((node.lineno, ast.unparse(node), _variable(key, names)))
    return found


def test_only_the_resolver_reads_a_torch_matrix_variable_from_the_environment() -> None:
    """Issue 41: a setting is resolved in one place (vocab/settings.py: ``parse`` at the start of
    every command and nox session, ``read``/``given``/``shard_text`` where a value is used), so a
    bad value is found before any work and a default is written once. Two kinds of variable
    cross a process boundary and are read on the other side, each by one rule:
    - read in the cell (``parsed=IN_CELL``): by the probe suite under probes/, which runs in the
      cell's interpreter and imports nothing of ours;
    - set by torch-matrix for its own children (``INTERNAL``): by the edge module that sets them.
    A parent hands a child resolved values as variables of the child's environment, and the
    child's resolver reads them again, ranges and all (the noxfile's sessions, the -j workers)."""
    in_cell = {v.name for v in VARIABLES if v.parsed != settings.HERE}
    owners = {settings.LOCK_OWNER_ENV: "edges/locks.py", settings.CELL_ENV: "edges/proc.py"}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        if where == "vocab/settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text, variable in _reads(tree):
            cell_side = variable in in_cell and where.startswith("probes/")
            if not cell_side and owners.get(variable) != where:
                wrong.append(f"{where}:{line}: {text}")
    assert wrong == [], "read it through vocab/settings.py:\n" + "\n".join(wrong)


def test_the_reads_test_sees_a_read() -> None:
    """The check above is not blind: each way of reading a variable is caught."""
    source = (
        "import os\nfrom torch_matrix.vocab.settings import SHARD_ENV as S\nX = 'TORCH_MATRIX_REDO'\n"
        "a = os.environ.get(S)\nb = os.getenv('TORCH_MATRIX_GPUS')\nc = env[X]\nd = X in env\n"
        "env[X] = '1'\n"
    )
    assert [line for line, _text, _name in _reads(ast.parse(source))] == [4, 5, 6, 7]
