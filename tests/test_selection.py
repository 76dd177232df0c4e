"""What nox runs, read by the tool itself (torch_matrix.run.selection): the prefetch's "what runs
next" must agree with the order a real nox runs the matrix cells in, and no source file may reach
into nox's private objects (``session._runner.manifest._queue`` once did; when nox changed it, the
prefetch would quietly stop)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import nox
import pytest

from torch_matrix.run import prefetch
from torch_matrix.run.selection import Candidate, read_selection, selected, wants_matrix
from torch_matrix.run.matrixplan import MatrixPlan
from tests.factories import make_cell

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    ("/p/3.11", "t2.1.0-py3.11", ["cpu"]),
    ("/p/3.12", "t2.2.0-py3.12", ["cu121"]),
    ("/p/3.11", "t2.3.0-py3.11", ["cu121", "cpu"]),
]
NOXFILE = f"""
import os
import nox
nox.options.sessions = ["matrix"]

@nox.session(venv_backend="none")
@nox.parametrize(["python", "cell"], [nox.param(p, c, id=c, tags=t) for p, c, t in {CELLS!r}])
def matrix(session, cell):
    with open(os.environ["RAN"], "a") as ran:
        ran.write(session.name + "\\n")

@nox.session(python=False)
def report(session):
    pass
"""

SELECTIONS: list[tuple[list[str], dict[str, str]]] = [
    ([], {}),
    (["-s", "matrix"], {}),
    (["-s", "matrix(t2.3.0-py3.11)", "matrix"], {}),
    (["--session=matrix(t2.2.0-py3.12)", "-s", "report", "matrix(t2.1.0-py3.11)"], {}),
    (["-e", "report"], {}),
    (["-p", "/p/3.11"], {}),
    (["--python=/p/3.12", "-s", "matrix"], {}),
    (["-t", "cpu"], {}),
    (["-t", "cu121", "-s", "report"], {}),  # tags given: the names are not a filter
    (["-k", "t2 and not py3_12"], {}),
    (["-k", "cu121 or t2_1"], {}),
    (["-k", "2_2 or 3_11"], {}),  # names are substrings of keywords: this selects nothing
    (["-r", "-s", "matrix(t2.2.0-py3.12)", "--", "-s", "matrix"], {}),
    ([], {"NOXSESSION": "matrix(t2.2.0-py3.12),matrix(t2.1.0-py3.11)"}),
    ([], {"NOXPYTHON": "/p/3.12"}),
    (["-s", "matrix(t2.1.0-py3.11)"], {"NOXSESSION": "report"}),  # the option wins
]


def candidates() -> list[Candidate]:
    return [Candidate("matrix", f"matrix({c})", p, tuple(t)) for p, c, t in CELLS]


@pytest.mark.parametrize("argv, environ", SELECTIONS)
def test_the_cells_selected_are_those_nox_runs_in_its_order(tmp_path, argv, environ):
    (tmp_path / "noxfile.py").write_text(NOXFILE)
    ran = tmp_path / "ran.txt"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("NOX")
    }  # only the case's own variables
    done = subprocess.run(
        [sys.executable, "-m", "nox", *argv],
        cwd=tmp_path,
        env={**env, **environ, "RAN": str(ran)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    nox_ran = ran.read_text().split() if ran.exists() else []
    if done.returncode != 0:
        assert nox_ran == [], done.stderr
    ours = selected(read_selection(argv, environ), candidates(), ("matrix",))
    assert ours is not None
    assert [c.signature for c in ours] == nox_ran, done.stderr


@pytest.mark.parametrize(
    "argv, environ",
    [
        (["--extra-python", "3.13"], {}),
        (["--force-python=3.13"], {}),
        (["-P", "3.13"], {}),
        ([], {"NOXFORCEPYTHON": "3.13"}),
        (["--sess", "matrix"], {}),  # argparse takes the prefix: not read here
        (["-k", "not ("], {}),  # nox refuses it
    ],
)
def test_a_selection_not_followed_here_is_unknown_not_a_guess(argv, environ):
    assert selected(read_selection(argv, environ), candidates(), ("matrix",)) is None


def test_keywords_take_one_token_and_attached_values_are_read():
    selection = read_selection(["-kcpu", "-smatrix", "report", "-t", "a", "b", "-r"])
    assert selection.keywords == "cpu"
    assert selection.sessions == ("matrix", "report")
    assert selection.tags == ("a", "b")
    assert read_selection(["-k", "cpu", "matrix"]).keywords == "cpu"


def test_wants_matrix_reads_the_same_selection():
    assert wants_matrix(["-s", "report"], environ={}) is False
    assert wants_matrix(["-s", "report", "matrix(t2.1.0-py3.11)"], environ={}) is True


def test_the_prefetch_queue_is_what_nox_runs_after_the_running_session(tmp_path, monkeypatch):
    cells = [make_cell(torch=v, python="3.11") for v in ("2.1.0", "2.2.0", "2.3.0", "2.4.0")]
    plan = MatrixPlan(
        cells=cells, interpreters={"3.11": sys.executable}, results_root=tmp_path / "results"
    )
    monkeypatch.setattr(plan, "fingerprint", lambda cell: "fp")
    first, second, third, fourth = (f"matrix({c.id})" for c in cells)
    environ: dict[str, str] = {}
    upcoming = prefetch.queued_cells(plan, first, (), ["-s", "matrix"], environ)
    assert upcoming == cells[1:]
    # the order the names were given in, not the plan's
    argv = ["-s", fourth, second, first]
    assert prefetch.queued_cells(plan, fourth, (), argv, environ) == [cells[1], cells[0]]
    assert prefetch.queued_cells(plan, first, (), argv, environ) == []
    # a session not in the selection, or a selection not followed: nothing is fetched ahead
    assert prefetch.queued_cells(plan, third, (), argv, environ) is None
    assert prefetch.queued_cells(plan, first, (), ["--extra-python", "3.13"], environ) is None


def private_nox_uses(text: str, where: str) -> list[str]:
    """What ``text`` names of nox beyond its public API: ``import nox.<x>``, ``from nox.<x>``,
    ``nox.<not public>``, and a ``_private`` attribute of a nox session (a name ``session`` or a
    parameter typed ``...Session``)."""
    public = set(nox.__all__)
    tree = ast.parse(text)
    session_names = {"session"} | {
        arg.arg
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for arg in [*node.args.args, *node.args.kwonlyargs]
        if arg.annotation is not None and "Session" in ast.unparse(arg.annotation)
    }
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    wrong = []
    for node in ast.walk(tree):
        if id(node) in inner:
            continue  # a part of a longer chain, read with it
        if isinstance(node, ast.Import):
            wrong += [
                f"{where}:{node.lineno}: import {a.name}"
                for a in node.names
                if "." in a.name and a.name.split(".")[0] == "nox"
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nox":
            if node.module != "nox" or any(a.name not in public for a in node.names):
                wrong.append(f"{where}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute):
            chain, root = [node.attr], node.value
            while isinstance(root, ast.Attribute):
                chain.append(root.attr)
                root = root.value
            if not isinstance(root, ast.Name):
                continue
            chain.reverse()
            if root.id == "nox" and chain[0] not in public:
                wrong.append(f"{where}:{node.lineno}: nox.{'.'.join(chain)}")
            elif root.id in session_names and any(part.startswith("_") for part in chain):
                wrong.append(f"{where}:{node.lineno}: {root.id}.{'.'.join(chain)}")
    return wrong


def test_no_source_file_reaches_into_nox_private_objects():
    wrong = [
        use
        for path in sorted([*(ROOT / "torch_matrix").rglob("*.py"), ROOT / "noxfile.py"])
        for use in private_nox_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert wrong == [], "nox's private objects are named: use its public API or our own queue"


def test_the_check_catches_the_old_queue_read_and_private_imports():
    old = "def f(session):\n    return session._runner.manifest._queue\n"
    assert private_nox_uses(old, "x.py") == ["x.py:2: session._runner.manifest._queue"]
    typed = "import nox\ndef f(s: nox.Session):\n    return s._runner\n"
    assert private_nox_uses(typed, "x.py") == ["x.py:3: s._runner"]
    assert private_nox_uses("from nox.manifest import Manifest\n", "x.py") != []
    assert private_nox_uses("import nox\nnox._options\n", "x.py") == ["x.py:2: nox._options"]
    assert private_nox_uses("import nox\nnox.options.sessions\n", "x.py") == []
