"""Zero-config ecosystem entries (issue 44): what an sdist's files imply about running its tests.
Pure: trees given as file lists and texts, no network, no venv."""

from __future__ import annotations

import textwrap

import pytest

from torch_matrix.ecosystem.discover import NoTests, discover, wanted

PKG_INFO = """\
Metadata-Version: 2.1
Name: demo
Version: 1.0
Requires-Dist: torch>=2.0
Requires-Dist: numpy
Provides-Extra: test
Requires-Dist: pytest; extra == "test"
Requires-Dist: scipy; extra == "test"
Provides-Extra: dev
Requires-Dist: black; extra == "dev"
"""


def found(paths, texts=None, name="demo"):
    texts = {k: textwrap.dedent(v) for k, v in (texts or {}).items()}
    assert set(texts) <= set(wanted(paths)), "the tree reader would not read these"
    return discover(name, paths, texts)


def test_testpaths_of_pyproject_win_over_a_tests_folder():
    d = found(
        ["pyproject.toml", "tests/test_a.py", "demo/unit/test_b.py", "PKG-INFO"],
        {
            "pyproject.toml": """
                [tool.pytest.ini_options]
                testpaths = ["demo/unit"]
                """,
            "PKG-INFO": PKG_INFO,
        },
    )
    assert d.tests == ("demo/unit",)
    assert d.command == "python -m pytest -q -p no:cacheprovider demo/unit"
    assert d.extras == ("test",)
    assert "tests: testpaths in pyproject.toml [tool.pytest.ini_options]" in d.reasons


def test_testpaths_missing_from_the_sdist_fall_back_to_the_folder_and_say_so():
    d = found(
        ["setup.cfg", "test/test_a.py"],
        {"setup.cfg": "[tool:pytest]\ntestpaths = tests\n"},
    )
    assert d.tests == ("test",)
    assert any("names testpaths tests: not in the sdist" in r for r in d.reasons)


def test_pytest_ini_is_read_before_pyproject_as_pytest_does():
    d = found(
        ["pytest.ini", "pyproject.toml", "a/test_x.py", "b/test_y.py"],
        {
            "pytest.ini": "[pytest]\ntestpaths = a\n",
            "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["b"]\n',
        },
    )
    assert d.tests == ("a",)


def test_a_tox_test_session_gives_the_options_deps_and_requirement_file():
    d = found(
        ["tox.ini", "tests/test_a.py", "requirements/ci.txt", "PKG-INFO"],
        {
            "tox.ini": """
                [testenv:lint]
                commands = flake8 demo
                [testenv]
                deps =
                    -r requirements/ci.txt
                    .[test]
                    hypothesis>=6
                commands = pytest -x --cov=demo --cov-report xml {posargs:tests}
                """,
            "PKG-INFO": PKG_INFO,
        },
    )
    assert d.tests == ("tests",)
    # coverage and its report dropped, -x kept, {posargs:tests} is the test location
    assert d.command == "python -m pytest -q -p no:cacheprovider -x tests"
    assert d.extras == ("test",)
    assert "hypothesis>=6" in d.requires
    assert any(r.startswith("needs: what tox.ini [testenv] installs") for r in d.reasons)


def test_a_requirement_file_of_a_session_is_read_with_its_includes():
    paths = ["tox.ini", "tests/test_a.py", "requirements-test.txt", "requirements-base.txt"]
    texts = {
        "tox.ini": "[testenv]\ndeps = -r requirements-test.txt\ncommands = python -m pytest\n",
        "requirements-test.txt": "-r requirements-base.txt\npytest-mock  # mocks\n-e .\n",
    }
    # requirements-base.txt is not named like a test file: the session's include still reads it
    d = discover("demo", paths, {**texts, "requirements-base.txt": "scipy>=1.9\n"})
    assert d.requires[:3] == ("pytest", "scipy>=1.9", "pytest-mock")


def test_a_noxfile_test_session_gives_the_pytest_call_and_installs():
    d = found(
        ["noxfile.py", "tests/unit/test_a.py", "tests/slow/test_b.py", "PKG-INFO"],
        {
            "noxfile.py": """
                import nox

                @nox.session
                def lint(session):
                    session.run("ruff", "check")

                @nox.session(python=["3.11"])
                def tests(session):
                    session.install("-e", ".[dev]", "pytest-timeout")
                    session.run("pytest", "-n", "2", "tests/unit", *session.posargs)
                """,
            "PKG-INFO": PKG_INFO,
        },
    )
    assert d.tests == ("tests/unit",)
    assert d.command == "python -m pytest -q -p no:cacheprovider -n 2 tests/unit"
    assert d.extras == ("dev",)
    assert "pytest-timeout" in d.requires and "pytest-xdist" in d.requires


def test_addopts_that_need_a_plugin_bring_it():
    d = found(
        ["pyproject.toml", "tests/test_a.py"],
        {
            "pyproject.toml": """
                [tool.pytest.ini_options]
                addopts = "--cov=demo --timeout=60"
                asyncio_mode = "auto"
                """
        },
    )
    assert {"pytest-cov", "pytest-timeout", "pytest-asyncio"} <= set(d.requires)


def test_a_dependency_group_is_followed_through_its_includes():
    d = found(
        ["pyproject.toml", "tests/test_a.py"],
        {
            "pyproject.toml": """
                [dependency-groups]
                base = ["scipy"]
                test = ["pytest>=8", {include-group = "base"}]
                """
        },
    )
    assert d.requires == ("pytest>=8", "scipy")


def test_test_folders_inside_the_package_and_src_layout():
    d = found(["demo/tests/test_a.py", "src/other/test/test_b.py", "setup.py"])
    assert d.tests == ("demo/tests", "src/other/test")


def test_test_files_deep_in_the_package_run_the_package():
    d = found(["tltorch/layers/tests/test_a.py", "docs/test_doc.py", "setup.py"])
    assert d.tests == ("tltorch",)


def test_imports_the_metadata_leaves_out_are_added_and_torchvision_pairs():
    d = found(
        ["tests/test_a.py", "tests/conftest.py", "PKG-INFO", "demo/__init__.py"],
        {
            "tests/test_a.py": "import numpy as np\nimport demo\nfrom torchvision import models\n",
            "tests/conftest.py": "import scipy.stats\nimport yaml\nimport pkg_resources\n",
            "PKG-INFO": PKG_INFO,
        },
    )
    # numpy is a dependency, scipy comes with the test extra, demo is the project: only yaml
    assert d.requires == ("pytest", "setuptools<82", "pyyaml")  # 82 removed pkg_resources
    assert d.torchvision is True  # imported by the tests: the side pairs it, never unpinned
    assert "torchvision" not in d.requires


def test_torch_and_torchvision_are_never_installed_as_test_needs():
    d = found(
        ["tests/test_a.py", "requirements-dev.txt"],
        {"requirements-dev.txt": "torch>=2\ntorchvision\nscipy\n"},
    )
    assert d.requires == ("pytest", "scipy")
    assert d.torchvision is True


def test_dev_extra_only_when_nothing_names_the_test_needs():
    d = found(["tests/test_a.py", "PKG-INFO"], {"PKG-INFO": PKG_INFO.replace("test", "docs")})
    assert d.extras == ("dev",)
    assert any("no test extra; the dev extra" in r for r in d.reasons)


def test_no_tests_is_said_with_what_was_looked_for():
    with pytest.raises(NoTests, match="no tests in the sdist: no pytest testpaths"):
        found(["demo/__init__.py", "setup.py", "docs/test_x.py"])


def test_damaged_configuration_is_read_as_absent():
    d = found(
        ["pyproject.toml", "tox.ini", "noxfile.py", "tests/test_a.py"],
        {"pyproject.toml": "[tool", "tox.ini": "[testenv\n", "noxfile.py": "def ("},
    )
    assert d.tests == ("tests",)
    assert d.command == "python -m pytest -q -p no:cacheprovider tests"


def test_a_requirement_file_s_tools_are_left_out_and_extra_only_needs_pair_nothing():
    d = found(
        ["tests/test_a.py", "dev_requirements.txt", "PKG-INFO"],
        {
            "dev_requirements.txt": "black\nflake8\nsphinx\nhypothesis\n",
            "PKG-INFO": PKG_INFO
            + 'Provides-Extra: vision\nRequires-Dist: torchvision; extra == "vision"\n',
        },
    )
    assert d.requires == ("pytest", "hypothesis")
    assert any("tools that test nothing: black, flake8, sphinx" in r for r in d.reasons)
    assert d.torchvision is False  # only an extra the tests do not install names it


# -- a zero-config entry, through the projects file, the tree and the run ----------------------

ZERO = """
[defaults]
requires = ["pytest"]

[[project]]
sdist = "demo==1.0"

[[project]]
sdist = "other==2.0"
extras = []
requires = ["scipy<1.14"]
torchvision = false

[[project]]
name = "hand"
sdist = "hand==1.0"
command = "python -m pytest tests/test_one.py"
"""


def _tree(root):
    files = {
        "PKG-INFO": PKG_INFO,
        "tests/test_a.py": "import yaml\nimport torchvision\nimport scipy\n",
        "tox.ini": "[testenv]\ncommands = pytest -x tests\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_a_zero_config_entry_is_named_by_its_sdist_and_discovered_only_where_the_hand_is_silent(
    tmp_path,
):
    from torch_matrix.ecosystem.projects import parse_projects
    from torch_matrix.ecosystem.source import with_discovery

    demo, other, hand = parse_projects(ZERO, "p.toml")
    assert (demo.name, demo.discover, hand.discover) == ("demo", True, False)
    tree = _tree(tmp_path)
    done, found = with_discovery(demo, tree)
    assert found is not None and done.command == "python -m pytest -q -p no:cacheprovider -x tests"
    assert (done.extras, done.torchvision) == (("test",), True)
    assert done.requires == ("pyyaml", "pytest")  # discovered, then the entry's own
    done, _ = with_discovery(other, tree)
    # the hand's keys win: no extras, no torchvision; its scipy pin replaces the discovered one
    assert (done.extras, done.torchvision) == ((), False)
    assert done.requires == ("pyyaml", "pytest", "scipy<1.14")
    assert with_discovery(hand, tree) == (hand, None)  # a hand command: nothing discovered


def test_a_zero_config_run_records_its_discovery_and_a_tree_without_tests_is_no_source(
    tmp_path, monkeypatch
):
    import json

    from torch_matrix.ecosystem import runner, sides
    from torch_matrix.ecosystem.projects import parse_projects, parse_side
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    demo = parse_projects(ZERO, "p.toml")[0]
    tree = _tree(tmp_path / "tree")
    commands = []
    monkeypatch.setattr(runner, "fetch", lambda *args: tree)
    monkeypatch.setattr(
        sides, "isolation", lambda *args, **kw: sides.Isolation((), "on (test)", "")
    )
    monkeypatch.setattr(sides, "prepare", lambda work, *args: (None, "/venv/bin/python"))

    def run_tests(work, python, **kw):
        commands.append((work.project.command, work.project.requires, work.project.torchvision))
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.PASSED,
            tests={"tests/test_a.py::test_a": "passed"},
        )

    monkeypatch.setattr(sides, "run_tests", run_tests)
    run = runner.EcosystemRun(
        projects=[demo],
        baseline=parse_side("2.5.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path / "run",
    )
    runner.plan_run(run, None)
    assert runner.run_project(run, demo, None) == "same-pass"
    assert set(commands) == {
        ("python -m pytest -q -p no:cacheprovider -x tests", ("pyyaml", "pytest"), True)
    }
    recorded = json.loads((tmp_path / "run/projects/demo/discovery.json").read_text())
    assert recorded["tests"] == ["tests"] and recorded["reasons"]

    for path in list(tree.rglob("test_*.py")):
        path.unlink()
    run.redo = True
    assert runner.run_project(run, demo, None) == "no source"
    side = json.loads((tmp_path / "run/projects/demo/baseline.json").read_text())
    assert side["status"] == "broken" and side["detail"].startswith("source: no tests in the sdist")
    assert not (tmp_path / "run/projects/demo/discovery.json").exists()


def test_discover_command_on_a_tree_and_its_bad_input(tmp_path, capsys):
    from torch_matrix.cli import main

    tree = _tree(tmp_path / "demo")
    assert main(["ecosystem", "discover", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "command:     python -m pytest -q -p no:cacheprovider -x tests" in out
    assert "tests: the pytest call of tox.ini [testenv]" in out
    assert main(["ecosystem", "discover", "demo>=1"]) == 2
    err = capsys.readouterr().err
    assert "'demo>=1' is neither name==version nor a directory" in err and "hint:" in err
    (tree / "tests" / "test_a.py").unlink()
    assert main(["ecosystem", "discover", str(tree)]) == 2
    assert "no tests in the sdist" in capsys.readouterr().err


# -- the generated list (examples/ecosystem/build_list.py) --------------------------------------


def test_the_generated_list_holds_the_starter_list_and_at_least_100_projects():
    from pathlib import Path

    from torch_matrix.ecosystem.projects import parse_projects

    folder = Path(__file__).resolve().parent.parent / "examples" / "ecosystem"
    generated = parse_projects((folder / "projects-generated.toml").read_text(), "generated")
    starter = parse_projects((folder / "projects.toml").read_text(), "starter")
    assert len(generated) >= 100
    by_name = {p.name: p for p in generated}
    for project in starter:  # verbatim: the same source, command and needs
        kept = by_name[project.name]
        assert (kept.source, kept.command, kept.requires, kept.skip) == (
            project.source,
            project.command,
            project.requires,
            project.skip,
        )
    rest = [p for p in generated if p.name not in {s.name for s in starter}]
    assert rest and all(p.discover and p.source.kind == "sdist" for p in rest)


def test_the_list_script_s_filters(monkeypatch):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "ecosystem" / "build_list.py"
    spec = importlib.util.spec_from_file_location("build_list", path)
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_list", build)  # its dataclasses look it up
    spec.loader.exec_module(build)
    sdist = {"packagetype": "sdist", "upload_time": "2025-01-10T00:00:00", "url": "x.tar.gz"}
    meta = {
        "releases": {
            "1.0": [sdist],
            "1.1": [{**sdist, "upload_time": "2025-06-01T00:00:00"}],  # after the cutoff
            "1.1rc1": [sdist],  # a pre-release
            "0.9": [{**sdist, "yanked": True}],
        }
    }
    assert build.pick_release(meta, "2025-03-15")[0] == "1.0"
    assert build.pick_release(meta, "2025-03-15", "1.1")[0] == "1.1"  # a pin is taken as given
    paths = ["PKG-INFO", "tests/test_a.py"]

    def judged(requires, python=""):
        info = "Metadata-Version: 2.1\nName: demo\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )
        info += f"Requires-Python: {python}\n" if python else ""
        return build.judge("demo", "1.0", paths, {"PKG-INFO": info}, ("2.5.1", "2.6.0"), "3.11")

    assert judged(["torch>=2.0"]).kept
    assert judged(["numpy"]).reason.startswith("no torch requirement")
    assert judged(['torch; extra == "gpu"']).reason.startswith("no torch requirement")
    assert "not torch 2.6.0" in judged(["torch<2.6"]).reason
    assert "not 3.11" in judged(["torch"], python="<3.11").reason
    assert build.judge(
        "demo",
        "1.0",
        ["PKG-INFO"],
        {"PKG-INFO": "Requires-Dist: torch\n"},
        ("2.5.1", "2.6.0"),
        "3.11",
    ).reason.startswith("no tests in the sdist")


def test_a_tox_session_s_plain_setenv_prefixes_the_command():
    # torch-kmeans 0.2.0: its tests raise unless PYTORCH_JIT=0, which only its tox.ini sets
    d = found(
        ["tox.ini", "tests/test_a.py"],
        {
            "tox.ini": "[testenv]\nsetenv =\n    TOXINIDIR = {toxinidir}\n    PYTORCH_JIT = 0\n"
            "commands = pytest {posargs}\n"
        },
    )
    assert d.command == "PYTORCH_JIT=0 python -m pytest -q -p no:cacheprovider tests"
    assert "environment: what tox.ini [testenv] sets (setenv)" in d.reasons


def test_tests_importing_torchaudio_or_a_pypi_test_helper_get_them_and_pkg_resources_a_bound():
    """Found by discover on real sdists (issue 44): torch-stoi's tests import torchaudio (paired
    with each side's torch by the install's overrides, never left to the newest), nflows' tests
    import torchtestcase (on PyPI; the sdist neither ships nor declares it), and a module that
    imports pkg_resources needs a setuptools that still has it (82 removed it)."""
    d = found(
        ["tests/test_a.py", "tests/flows/base_test.py", "PKG-INFO"],
        {
            "tests/test_a.py": "import torchaudio\nfrom pkg_resources import resource_filename\n",
            "tests/flows/base_test.py": "import torchtestcase\n",
            "PKG-INFO": PKG_INFO,
        },
    )
    assert d.requires == ("pytest", "setuptools<82", "torchaudio", "torchtestcase")
    assert d.torchvision is False
    assert "needs: torchtestcase, imported by tests/flows/base_test.py and required nowhere" in (
        d.reasons
    )
    # a requirement the project names already (any bound) is never added twice
    declared = found(
        ["tests/test_a.py", "requirements-test.txt"],
        {"tests/test_a.py": "import torchaudio\n", "requirements-test.txt": "torchaudio>=2\n"},
    )
    assert declared.requires == ("pytest", "torchaudio>=2")


def test_the_mock_backport_the_tests_import_is_added():
    """torchbearer 0.5.5's 28 test files import ``mock`` (the backport of unittest.mock), which it
    declares nowhere: every file failed to collect on both sides of the real run
    (docs/ecosystem-run.md)."""
    d = found(
        ["tests/test_a.py", "PKG-INFO", "demo/__init__.py"],
        {"tests/test_a.py": "import mock\nfrom mock import Mock\n", "PKG-INFO": PKG_INFO},
    )
    assert "mock" in d.requires


def test_a_test_helper_the_sdist_leaves_out_is_said_and_nothing_else_is():
    """tntorch, torch-lr-finder and torchgeometry (issue 44's real run): their tests import a
    helper (``util``, ``task``, ``utils``) that their sdist does not ship; the run could only say
    'a test dependency is missing'. discover names it; a module of the tree, the standard
    library's, torch's or pytest's own, or a requirement's, is never named."""
    d = found(
        ["tests/test_cross.py", "tests/common.py", "demo/__init__.py", "PKG-INFO"],
        {
            "tests/test_cross.py": (
                "import os\nimport pytest\nimport torch\nimport numpy\nimport demo\n"
                "import common\nimport scipy\nimport packaging\nfrom util import random_format\n"
            ),
            "PKG-INFO": PKG_INFO,
        },
    )
    said = [r for r in d.reasons if r.startswith("unshipped:")]
    assert said == [
        "unshipped: tests/test_cross.py imports util, which the sdist does not ship and no "
        "requirement names (a test helper left out of the sdist: choose tests that do not import "
        "it; or a dependency under another name: add it to requires)"
    ]
    assert "util" not in d.requires  # never installed on a guess


def test_a_module_deep_in_the_package_is_not_what_a_test_s_import_reaches():
    d = found(
        ["test/test_a.py", "torchgeometry/utils.py", "torchgeometry/__init__.py", "setup.py"],
        {"test/test_a.py": "import utils\nimport torchgeometry\n"},
        name="torchgeometry",
    )
    said = [r for r in d.reasons if r.startswith("unshipped:")]
    assert len(said) == 1 and "imports utils," in said[0]
