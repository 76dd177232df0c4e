"""Issue 44's list generator, stage 6 (examples/ecosystem/build_list.py --check): each kept entry
installed on the baseline torch as a run's baseline side and its tests collected by pytest; kept
only where at least one test is collected with no error, else written with
``skip = "a list fault (baseline check): <why>"``.

The decision is pure (pytest's exit and output -> kept, or the reason), tested on pytest's own
words; one end-to-end test checks two synthetic sdists on the local index of tiny wheels (torch
2.5.0), with real uv venvs, the sandbox and the projects' real pytest: one kept, one dropped with
its reason, and a second pass reuses the verdicts instead of installing again.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from torch_matrix.ecosystem.projects import parse_projects

REPO = Path(__file__).resolve().parent.parent
ROOT = "/tmp/check/work/demo/baseline/box/src"  # where pytest ran: made relative in a reason


@pytest.fixture(scope="module")
def build() -> ModuleType:
    path = REPO / "examples" / "ecosystem" / "build_list.py"
    spec = importlib.util.spec_from_file_location("build_list", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_list"] = module  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


COLLECTED = "tests/test_a.py::test_a\ntests/test_a.py::test_b\n\n2 tests collected in 2.19s\n"
DESELECTED = "tests/test_a.py::test_b\n\n1/2 tests collected (1 deselected) in 0.01s\n"
COLLECTION_ERROR = f"""tests/test_y.py::test_a

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_x.py _______________________
ImportError while importing test module '{ROOT}/tests/test_x.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_x.py:1: in <module>
    import cv2
E   ModuleNotFoundError: No module named 'cv2'
=========================== short test summary info ============================
ERROR tests/test_x.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 test collected, 1 error in 7.56s"""
CONFTEST = f"""ImportError while loading conftest '{ROOT}/tests/conftest.py'.
tests/conftest.py:1: in <module>
    import foo_missing
E   ModuleNotFoundError: No module named 'foo_missing'
"""
CONFIG = (
    f"ERROR: {ROOT}/pyproject.toml: Cannot use both [tool.pytest] (native TOML types) and "
    "[tool.pytest.ini_options] (string-based INI format) simultaneously. Please use "
    "[tool.pytest] with native TOML types (recommended) or [tool.pytest.ini_options] for "
    "backwards compatibility.\n\n"
)
USAGE = f"""ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]
python -m pytest: error: unrecognized arguments: --cov
  inifile: None
  rootdir: {ROOT}
"""
PLUGIN = """Error while loading plugin "pytest11".
/tmp/uv/torch-matrix-sandbox/0a/venv/lib/python3.11/site-packages/pytest_cases/__init__.py:8: in <module>
    from .fixture_core1_unions import fixture_union, NOT_USED, unpack_fixture, ignore_unused
/tmp/uv/torch-matrix-sandbox/0a/venv/lib/python3.11/site-packages/pytest_cases/common_pytest.py:644: in <module>
    _idval = IdMaker([], [], None, None, None, None, None)._idval
E   TypeError: IdMaker.__init__() takes 7 positional arguments but 8 were given
"""  # brevitas 0.11.0's tests extra: pytest-cases, older than today's pytest
BUILD_FAILED = """Resolved 30 packages in 1.2s
  × Failed to build `poutyne @ file:///tmp/check/work/poutyne/baseline/box/build-src`
  ├─▶ The build backend returned an error
  ╰─▶ Call to `setuptools.build_meta:__legacy__.build_wheel` failed (exit status: 1)

      [stderr]
      Traceback (most recent call last):
        File "<string>", line 14, in <module>
      FileNotFoundError: [Errno 2] No such file or directory: 'version.txt'

      hint: This usually indicates a problem with the package or the build environment.
"""
UNSOLVABLE = """  × No solution found when resolving dependencies:
  ╰─▶ Because pandas==1.4.2 has no wheels with a matching Python ABI tag (e.g., `cp311`) and
      fastmri==0.3.0 depends on pandas==1.4.2, we can conclude that fastmri==0.3.0 cannot be used.
"""


def test_an_entry_is_kept_where_pytest_collects_tests_with_no_error(build: ModuleType) -> None:
    assert build.collect_verdict("passed", 0, COLLECTED, {}, "", ROOT) == build.Collected(True, 2)
    # the run's own selection (-k, --deselect): what it selected is what counts
    assert build.collect_verdict("passed", 0, DESELECTED, {}, "", ROOT).tests == 1
    # a plugin's own summary (pytest-pretty, torchcam 0.4.0's tests extra)
    pretty = "tests/test_a.py::test_a\n\nResults (19.91s):\n        43 tests collected\n"
    assert build.collect_verdict("passed", 0, pretty, {}, "", ROOT) == build.Collected(True, 43)
    ruled = "\n======================== 145 tests collected in 21.94s =========================\n"
    assert build.collect_verdict("passed", 0, ruled, {}, "", ROOT).tests == 145  # no -q
    colored = "\n\x1b[32m357 tests collected\x1b[0m\x1b[32m in 9.1s\x1b[0m\n"  # ultralytics 8.3
    assert build.collect_verdict("passed", 0, colored, {}, "", ROOT).tests == 357
    per_file = "tests/test_cli.py: 1\ntests/test_integration.py: 2\n\n"  # -qq: matgl 1.1.3
    assert build.collect_verdict("passed", 0, per_file, {}, "", ROOT).tests == 3


@pytest.mark.parametrize(
    ("status", "code", "output", "messages", "detail", "reason"),
    [
        # a test file that does not import: pytest's record of it, else its own summary
        (
            "broken",
            2,
            COLLECTION_ERROR,
            {f"{ROOT}/tests/test_x.py": "ModuleNotFoundError: No module named 'cv2'"},
            "",
            "collection error in tests/test_x.py: ModuleNotFoundError: No module named 'cv2'",
        ),
        (
            "broken",
            2,
            COLLECTION_ERROR,
            {},
            "",
            "collection error in tests/test_x.py: ModuleNotFoundError: No module named 'cv2'",
        ),
        (
            "broken",
            4,
            CONFTEST,
            {},
            "",
            "conftest tests/conftest.py does not load: "
            "ModuleNotFoundError: No module named 'foo_missing'",
        ),
        (
            "broken",
            4,
            CONFIG,
            {},
            "",
            "pytest refuses it: pyproject.toml: Cannot use both [tool.pytest] (native TOML types) "
            "and [tool.pytest.ini_options] (string-based INI format) simultaneously",
        ),
        ("broken", 4, USAGE, {}, "", "pytest refuses the command: unrecognized arguments: --cov"),
        (
            "broken",
            3,
            PLUGIN,
            {},
            "",
            "the pytest plugin pytest_cases does not load: "
            "TypeError: IdMaker.__init__() takes 7 positional arguments but 8 were given",
        ),
        (  # curvlinops-for-pytorch 2.0.1: its addopts load a plugin nothing installs
            "broken",
            3,
            'Error while loading plugin "pytest11".\n'
            "ModuleNotFoundError: No module named 'pytest_optional_tests'\n",
            {},
            "",
            "a pytest plugin does not load: "
            "ModuleNotFoundError: No module named 'pytest_optional_tests'",
        ),
        ("broken", 5, "\nno tests collected in 1.25s\n", {}, "", "no test collected"),
        ("passed", 0, "\nno tests collected in 1.25s\n", {}, "", "no test collected"),
        # no pytest at all: the install (the build's own error, the resolver's), the source
        (
            "broken",
            None,
            BUILD_FAILED,
            {},
            "install failed: × Failed to build `poutyne @ file:///tmp/check/x/build-src`",
            "install failed: FileNotFoundError: [Errno 2] No such file or directory: 'version.txt'",
        ),
        (
            "broken",
            None,
            UNSOLVABLE,
            {},
            "install failed: × No solution found when resolving dependencies:",
            "install failed: Because pandas==1.4.2 has no wheels with a matching Python ABI tag "
            "(e.g., `cp311`) and fastmri==0.3.0 depends on pandas==1.4.2, we can conclude that "
            "fastmri==0.3.0 cannot be used.",
        ),
        (  # imitation 1.0.1's tests extra, in uv's other style
            "broken",
            None,
            "error: No solution found when resolving dependencies\n"
            "  cause: Because ray[debug]>=2.0.0,<=2.0.1 has no wheels with a matching Python ABI"
            " tag (e.g., `cp311`)\n\nhint: You require CPython 3.11\n",
            {},
            "install failed: error: No solution found when resolving dependencies",
            "install failed: Because ray[debug]>=2.0.0,<=2.0.1 has no wheels with a matching "
            "Python ABI tag (e.g., `cp311`)",
        ),
        (
            "broken",
            None,
            "",
            {},
            "install failed: × Failed to build `x @ file:///tmp/check/x/build-src`",
            "install failed: × Failed to build `x @ the sdist`",
        ),
        (
            "broken",
            None,
            "",
            {},
            "source: demo==1.0: the index has no sdist (demo-1.0-py3-none-any.whl)",
            "source: demo==1.0: the index has no sdist (demo-1.0-py3-none-any.whl)",
        ),
        (
            "timeout",
            None,
            "",
            {},
            "past its time budget of 300 s (exit -9)",
            "collection past its time budget of 300 s (exit -9)",
        ),
    ],
)
def test_an_entry_is_dropped_with_the_one_line_reason_the_list_s_skip_gives(
    build: ModuleType,
    status: str,
    code: int | None,
    output: str,
    messages: dict[str, str],
    detail: str,
    reason: str,
) -> None:
    found = build.collect_verdict(status, code, output, messages, detail, ROOT)
    assert found == build.Collected(False, 0, reason)
    assert "\n" not in found.reason and "/tmp" not in found.reason  # the list is committed


def test_tests_that_collect_beside_a_file_that_does_not_still_drop_the_entry(
    build: ModuleType,
) -> None:
    """pytest collected one test and stopped at the other file's error (exit 2): a run would
    fail both sides the same way, so the entry is a list fault, not a kept one."""
    assert build.tests_collected(COLLECTION_ERROR) == 1
    assert not build.collect_verdict("broken", 2, COLLECTION_ERROR, {}, "", ROOT).kept


def _args(build: ModuleType, **given: object) -> argparse.Namespace:
    defaults = dict(
        baseline="2.5.0",
        candidate="2.6.0",
        python="3.11",
        cutoff="2025-03-15",
        starter=str(REPO / "examples" / "ecosystem" / "projects.toml"),
        index="",
        check_dir="",
        check_python=sys.executable,
        check_budget=120.0,
        no_sandbox=False,
        recheck=False,
    )
    return argparse.Namespace(**{**defaults, **given})


def test_the_list_writes_a_checked_fault_as_a_skip_with_its_reason(build: ModuleType) -> None:
    verdicts = [
        build.Verdict("good", "1.0", True, "python -m pytest tests", build.Collected(True, 3)),
        build.Verdict(
            "bad",
            "1.0",
            True,
            "python -m pytest tests",
            build.Collected(False, 0, "no test collected"),
        ),
    ]
    text = build.render(verdicts, _args(build))
    projects = {p.name: p for p in parse_projects(text, "generated")}
    assert projects["good"].skip == "" and projects["good"].discover
    assert projects["bad"].skip == "a list fault (baseline check): no test collected"
    assert "# baseline check (torch 2.5.0): 3 tests collected" in text
    assert "Baseline check (--check, torch 2.5.0): 1 of 2 collect their tests" in text
    unchecked = build.render([build.Verdict("good", "1.0", True, "x")], _args(build))
    assert "skip" not in unchecked.split("[[project]]")[-1] and "Not checked" in unchecked


# -- end to end: two synthetic sdists on the local index, checked on torch 2.5.0 ---------------


def _sdist(index_root: Path, name: str, test: str) -> None:
    tree = index_root / "sources" / f"{name}-1.0"
    (tree / name).mkdir(parents=True)
    (tree / name / "__init__.py").write_text('"""A synthetic project."""\n__version__ = "1.0"\n')
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["flit_core>=3.4,<5"]\nbuild-backend = "flit_core.buildapi"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\ndescription = "x"\n'
        'dependencies = ["torch"]\n'
    )
    (tree / "tests").mkdir()
    (tree / "tests" / f"test_{name}.py").write_text(test)
    archive = index_root / "files" / f"{name}-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(tree, arcname=f"{name}-1.0")
    page = index_root / "simple" / name / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<html><body><a href="../../files/{archive.name}">x</a></body></html>')


@pytest.mark.e2e
def test_the_check_keeps_an_entry_whose_tests_collect_and_drops_one_whose_do_not(
    build: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.synthetic_wheels import build_index, downstream_wheels

    index = build_index(tmp_path / "index", downstream_wheels())
    _sdist(tmp_path / "index", "good", "import torch\n\n\ndef test_one():\n    assert torch\n")
    # its helper module is not in the sdist (tntorch's util.py, torch-lr-finder's task.py)
    _sdist(tmp_path / "index", "bad", "from helpers import make\n\n\ndef test_one():\n    make()\n")
    for name in [k for k in __import__("os").environ if k.startswith(("UV_", "PIP_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("TORCH_MATRIX_CACHE_DIR", str(tmp_path / "tm-cache"))
    args = _args(build, index=index.url, check_dir=str(tmp_path / "check"))
    verdicts = [
        build.Verdict("good", "1.0", True, "tests"),
        build.Verdict("bad", "1.0", True, "tests"),
        build.Verdict("gone", "1.0", False, "no tests in the sdist"),  # dropped before: untouched
    ]
    checked = {v.name: v.check for v in build.check_entries(verdicts, args)}
    assert checked["good"] == build.Collected(True, 1)
    assert checked["good"].line() == "1 test collected"
    assert checked["bad"] == build.Collected(
        False,
        0,
        "collection error in tests/test_bad.py: ModuleNotFoundError: No module named 'helpers'",
    )
    assert checked["gone"] is None
    log = (tmp_path / "check" / "projects" / "good" / "baseline.log").read_text()
    assert "torch==2.5.0" in log and "--collect-only" in log
    assert not (tmp_path / "check" / "work").exists()  # the venvs are gone
    projects = {
        p.name: p for p in parse_projects(build.render(build.check_entries(verdicts, args), args))
    }
    assert projects["good"].skip == ""
    assert projects["bad"].skip == (
        "a list fault (baseline check): collection error in tests/test_bad.py: "
        "ModuleNotFoundError: No module named 'helpers'"
    )

    # resumed: the verdicts it holds are not checked again (nothing is installed)
    from torch_matrix.ecosystem import runner

    def installs(*args: object) -> None:
        raise AssertionError("checked again")

    monkeypatch.setattr(runner, "collect_baseline", installs)
    again = {v.name: v.check for v in build.check_entries(verdicts, args)}
    assert again == checked
    with pytest.raises(AssertionError, match="checked again"):
        build.check_entries(verdicts, _args(build, **{**vars(args), "recheck": True}))
