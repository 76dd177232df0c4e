"""``torch-matrix check``: an existing environment probed as found, recorded as an ordinary cell.

Pure parts (the cell an environment stands for, its id, the exit status) with properties;
then real runs against uv venvs holding the synthetic wheels (offline, about a second each):
a good pair, a broken pair, a local-label build, and every bad-input path with its hint.
The real-torch run (torch 2.13.0+cpu from pip's find-links) is the ``realwheels`` test at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix import cli  # noqa: F401
from torch_matrix.run import check  # noqa: F401 - check: the module under test
from torch_matrix.cli import check as check_cli
from torch_matrix.report import rows
from torch_matrix.run.check import (
    EnvironmentFacts,
    existing_cell,
    existing_cell_id,
    existing_install,
)
from torch_matrix.vocab.records import INSTALLED, ORIGIN_EXISTING
from torch_matrix.world.results import load_results
from torch_matrix.judge.verdict import (
    COMPATIBLE,
    ENVIRONMENT,
    INCOMPATIBLE,
    NO_EVIDENCE,
    NOT_INSTALLABLE,
    verdict_of,
)
from tests import realwheels
from tests.factories import make_result
from tests.synthetic_wheels import build_index, default_wheels, torch_wheel

ID_CHARACTERS = re.compile(r"^[A-Za-z0-9._-]+$")


def facts(
    torch="2.13.0+cpu",
    torchvision=None,
    numpy="2.4.6",
    python="/srv/envs/a/bin/python",
    version="3.11.7",
    prefix="/srv/envs/a",
    base_prefix="/usr",
) -> EnvironmentFacts:
    return EnvironmentFacts(
        python=python,
        version=version,
        prefix=prefix,
        base_prefix=base_prefix,
        packages={"torch": torch, "torchvision": torchvision, "numpy": numpy},
    )


# ---------------------------------------------------------------- pure parts


def test_the_cell_holds_the_versions_found_and_says_where_they_came_from():
    cell = existing_cell(
        facts(torch="2.11.0+cu130", torchvision="0.26.0"), host="gpu-1.example.org"
    )
    assert cell.origin == ORIGIN_EXISTING and cell.is_existing_env
    assert dict(cell.axes) == {
        "python": "3.11",
        "torch": "2.11.0",
        "torchvision": "0.26.0",
        "variant": "cu130",
    }
    assert cell.requirements == ("torch==2.11.0+cu130", "torchvision==0.26.0", "numpy==2.4.6")
    assert cell.id.startswith("env-t2.11.0-cu130-py3.11-gpu-1-") and ID_CHARACTERS.match(cell.id)
    assert "existing-env" in cell.tags


def test_a_build_without_a_local_label_is_the_default_variant_and_torchvision_may_be_absent():
    cell = existing_cell(facts(torch="2.5.1", torchvision=None, numpy=None), host="h")
    assert (
        cell.variant == "default"
        and cell.torchvision == ""
        and cell.requirements == ("torch==2.5.1",)
    )


def test_the_variant_is_the_builds_when_the_metadata_has_no_label():
    # PyPI's CUDA wheels: metadata 2.14.1, torch.__version__ 2.14.1+cu132, torch.version.cuda 13.2.
    found = dataclasses.replace(
        facts(torch="2.14.1", torchvision="0.29.2"),
        builds={"torch": {"version": "2.14.1+cu132", "cuda": "13.2", "hip": None}},
    )
    cell = existing_cell(found, host="h")
    assert cell.variant == "cu132" and cell.torch == "2.14.1"
    assert (
        cell.requirements[0] == "torch==2.14.1"
    )  # pinned as the metadata says: install_sanity checks it
    no_label = dataclasses.replace(
        found, builds={"torch": {"version": "2.14.1", "cuda": "13.2", "hip": None}}
    )
    assert existing_cell(no_label, host="h").variant == "cu132"
    cpu = dataclasses.replace(
        found, builds={"torch": {"version": "2.14.1", "cuda": None, "hip": None}}
    )
    assert existing_cell(cpu, host="h").variant == "cpu"
    rocm = dataclasses.replace(
        found,
        builds={"torch": {"version": "2.5.1+rocm6.2", "cuda": None, "hip": "6.2.41133-dd7f95766"}},
    )
    assert existing_cell(rocm, host="h").variant == "rocm6.2"


def test_the_spec_probe_settings_reach_the_cell():
    cell = existing_cell(
        facts(),
        host="h",
        probes=("install_sanity", "smoke"),
        required_probes=("smoke",),
        policy={"unsupported": "fail", "skip": "fail"},
    )
    assert cell.probes == ("install_sanity", "smoke") and cell.required_probes == ("smoke",)
    assert cell.policy == {"unsupported": "fail", "skip": "fail"}


def test_no_torch_is_not_a_cell():
    with pytest.raises(ValueError):
        existing_cell(facts(torch=None), host="h")


def test_two_environments_never_share_an_id_and_the_same_one_always_gets_its_own():
    a = existing_cell_id(facts(python="/srv/envs/a/bin/python"), "h")
    b = existing_cell_id(facts(python="/srv/envs/b/bin/python"), "h")
    elsewhere = existing_cell_id(facts(python="/srv/envs/a/bin/python"), "other")
    assert len({a, b, elsewhere}) == 3
    assert a == existing_cell_id(facts(python="/srv/envs/a/bin/python"), "h")


@given(
    torch=st.text(min_size=1, max_size=40),
    host=st.text(max_size=80),
    python=st.text(max_size=80),
    minor=st.sampled_from(["3.8", "3.13"]),
)
def test_ids_are_shell_safe_whatever_the_environment_says(torch, host, python, minor):
    cell_id = existing_cell_id(facts(torch=torch, python=python, version=minor + ".1"), host)
    assert ID_CHARACTERS.match(cell_id) and cell_id.startswith("env-t")


def test_the_install_record_says_nothing_was_installed():
    outcome = existing_install(facts(torch="2.13.0+cpu", torchvision=None))
    assert outcome.status == INSTALLED and outcome.command == () and outcome.attempts == 0
    assert dict(outcome.resolved) == {"torch": "2.13.0+cpu", "numpy": "2.4.6"}
    assert (
        outcome.message
        == "existing virtual environment at /srv/envs/a: probed as found, nothing installed"
    )
    system = existing_install(facts(prefix="/usr", base_prefix="/usr"))
    assert system.message.startswith("existing environment at /usr:")


@pytest.mark.parametrize(
    "kind, status",
    [(COMPATIBLE, 0), (INCOMPATIBLE, 1), (ENVIRONMENT, 1), (NO_EVIDENCE, 3), (NOT_INSTALLABLE, 3)],
)
def test_exit_status(kind, status):
    assert check_cli.exit_status(kind) == status


def test_the_report_reruns_an_existing_environment_with_check_not_nox():
    import dataclasses

    bad = make_result(
        torch="2.13.0",
        probes=[
            __import__("tests.factories").factories.make_probe(
                "install_sanity", status="fail", message="x"
            )
        ],
    )
    env = dataclasses.replace(
        bad,
        cell=dataclasses.replace(
            bad.cell, id="env-t2.13.0-py3.11-h-abc123", origin=ORIGIN_EXISTING
        ),
        interpreter={"path": "/srv/my env/bin/python"},
    )
    lines = dict(rows.repro_lines(rows.judge([bad, env])))
    assert lines[env.cell.id] == "torch-matrix check --python '/srv/my env/bin/python'"
    assert lines[bad.cell.id] == "torch-matrix run -s 'matrix(t2.13.0-py3.11)' -- --redo"


# ---------------------------------------------------------------- real runs on synthetic wheels


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return build_index(tmp_path_factory.mktemp("index"), default_wheels())


@pytest.fixture(scope="module")
def label_index(tmp_path_factory):
    """A find-links style local build: ``==2.1.0`` would pick it over PyPI's, so it has its own index."""
    return build_index(tmp_path_factory.mktemp("label-index"), [torch_wheel("2.1.0+cpu")])


@pytest.fixture
def uv_env(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    for name in ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_FIND_LINKS", "TORCH_MATRIX_SPEC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./matrix.toml: the built-in default spec


def venv_with(tmp_path: Path, index, *requirements: str, name: str = "env") -> str:
    venv = tmp_path / name
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    if requirements:
        subprocess.run(
            [
                "uv",
                "pip",
                "install",
                "-q",
                "--python",
                python,
                "--default-index",
                index.url,
                *requirements,
            ],
            check=True,
        )
    return python


def install_sanity_only(tmp_path: Path) -> str:
    spec = tmp_path / "check.toml"
    spec.write_text('[probes]\nrun = ["install_sanity"]\n')
    return str(spec)


def run_check(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(["check", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_good_environment_is_compatible_and_reports_like_any_cell(
    tmp_path, index, uv_env, capsys
):
    python = venv_with(tmp_path, index, "torch==2.1.0", "torchvision==0.16.0")
    before = subprocess.run(
        [python, "-m", "pip", "--version"], capture_output=True
    ).returncode  # no pip: untouched
    results = tmp_path / "results" / "check"
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(results),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 0, out + err
    assert "1 cell: 1 compatible" in out and re.search(r"^install_sanity +pass$", out, re.M)
    assert "Not exercised here" not in out  # install_sanity ran: nothing skipped
    assert "torch 2.1.0, torchvision 0.16.0" in out
    loaded = load_results(results)
    assert loaded.problems == [] and len(loaded.results) == 1
    result = loaded.results[0]
    assert result.cell.is_existing_env and verdict_of(result).kind == COMPATIBLE
    assert dict(result.install.resolved) == {"torch": "2.1.0", "torchvision": "0.16.0"}
    assert result.install.command == () and result.interpreter["path"] == python
    assert result.interpreter["version"] == ".".join(map(str, sys.version_info[:3]))
    assert (results / "cells" / f"{result.cell.id}.json").is_file()
    assert subprocess.run(
        ["uv", "pip", "freeze", "--python", python], capture_output=True, text=True, check=True
    ).stdout.split() == ["torch==2.1.0", "torchvision==0.16.0"]
    assert (
        subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == before
    )

    # Merged with a planned cell's result, the report and the pins read it like any other cell.
    other = tmp_path / "results" / "default"
    from torch_matrix.world.results import write_result

    write_result(make_result(torch="2.2.0", torchvision="0.17.0"), other / "cells")
    assert cli.main(["report", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "2 cells: 2 compatible" in out and result.cell.id in out
    assert (
        cli.main(
            ["pins", str(tmp_path / "results"), "--no-coverage", "--out", str(tmp_path / "pins")]
        )
        == 0
    )
    pins = json.loads((tmp_path / "pins" / "pins.json").read_text())
    assert pins["counts"]["compatible"] == 2 and "not_pinned" not in pins


SEVEN = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"  # torch 2.2.2 to 2.7.1 on PyPI (tests/fixtures/wheel-builds)


@pytest.fixture(scope="module")
def cuda_index(tmp_path_factory):
    """A synthetic CUDA 12.6 build answering what PyPI's torch 2.7.1 answers without a device."""
    return build_index(
        tmp_path_factory.mktemp("cuda-index"), [torch_wheel("2.7.1", cuda="12.6", arch_flags=SEVEN)]
    )


def test_hardware_targets_are_judged_from_the_build_and_printed_as_json(
    tmp_path, cuda_index, uv_env, capsys
):
    python = venv_with(tmp_path, cuda_index, "torch==2.7.1")
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
        "--gpu",
        "V100",
        "--gpu",
        "RTX 5090",
        "--driver",
        "580.82.07",
        "--json",
    )
    assert status == 1, out + err  # it runs on the V100, not on the RTX 5090
    data = json.loads(out)
    assert data["verdict"] == "compatible" and data["targets_from"] == "--gpu/--driver"
    assert [(t["target"], t["verdict"]) for t in data["targets"]] == [
        ("V100 (sm_70), driver 580.82.07", "native"),
        ("RTX 5090 (sm_120), driver 580.82.07", "no-kernel-image"),
    ]
    assert (
        SEVEN in data["targets"][1]["reason"]
        and "no kernel image is available" in data["targets"][1]["reason"]
    )
    result = load_results(tmp_path / "r").results[0]
    assert [dict(t) for t in result.targets] == data[
        "targets"
    ]  # recorded in the cell's result file
    assert result.gpu["build"]["arch_flags"] == SEVEN

    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
        "--gpu",
        "H100",
    )
    assert status == 0, out + err
    assert re.search(
        r"^Hardware \(--gpu/--driver\):\n  H100 \(sm_90\)  native +sm_90 is in the build", out, re.M
    )


def fake_nvidia_smi(tmp_path, monkeypatch, script: str) -> None:
    """An ``nvidia-smi`` first on PATH (no GPU was lent to the session that wrote this)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script + "\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_with_no_flag_check_judges_the_gpu_and_driver_nvidia_smi_finds(
    tmp_path, cuda_index, uv_env, capsys, monkeypatch
):
    python = venv_with(tmp_path, cuda_index, "torch==2.7.1")
    fake_nvidia_smi(tmp_path, monkeypatch, 'echo "NVIDIA GeForce RTX 5090, 12.0, 580.65.06"')
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 1, out + err
    assert re.search(
        r"^Hardware \(found here by nvidia-smi\):\n  NVIDIA GeForce RTX 5090 \(sm_120\), driver "
        r"580\.65\.06  no-kernel-image +no sm_120",
        out,
        re.M,
    )


def test_with_no_flag_check_says_when_no_gpu_is_found(
    tmp_path, cuda_index, uv_env, capsys, monkeypatch
):
    python = venv_with(tmp_path, cuda_index, "torch==2.7.1")
    fake_nvidia_smi(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 0, out + err
    assert (
        "Hardware (no NVIDIA GPU found here (no nvidia-smi, or it lists none); pass --gpu/--driver"
        in out
    )
    assert "  nothing judged" in out


@pytest.mark.parametrize(
    "flag, value, message, hint",
    [
        ("--gpu", "RTX 409", "unknown GPU 'RTX 409'", "did you mean 'RTX 4090'"),
        ("--gpu", "sm_88", "unknown compute capability 'sm_88'", "NVIDIA GPUs have one of"),
        ("--driver", "12.4", "invalid NVIDIA driver version '12.4'", "not the CUDA version"),
    ],
)
def test_a_bad_target_is_one_line_with_a_hint(tmp_path, capsys, flag, value, message, hint):
    status, _, err = run_check(capsys, "--python", sys.executable, flag, value)
    assert status == 2 and "Traceback" not in err
    assert err.startswith(f"torch-matrix: error: {flag} {value}: {message}") and hint in err


def test_a_broken_pair_is_incompatible_exit_1(tmp_path, index, uv_env, capsys):
    python = venv_with(tmp_path, index, "torch==2.2.0", "torchvision==0.17.0")
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 1, out + err
    assert "✗ incompatible: install_sanity" in out
    assert "operator torchvision::nms does not exist" in out
    assert f"torch-matrix check --python {python}" in out  # the rerun line


def test_a_local_label_build_is_its_own_variant(tmp_path, label_index, uv_env, capsys):
    python = venv_with(tmp_path, label_index, "torch==2.1.0+cpu")
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 0, out + err
    result = load_results(tmp_path / "r").results[0]
    assert result.cell.variant == "cpu" and result.cell.torch == "2.1.0"
    assert result.install.resolved["torch"] == "2.1.0+cpu" and result.cell.id.startswith(
        "env-t2.1.0-cpu-py"
    )
    assert (
        result.probe("install_sanity").status == "pass"
    )  # torch.version.cuda is None: a cpu build


@pytest.fixture(scope="module")
def pypi_cuda_index(tmp_path_factory):
    """A PyPI-style CUDA build: no label in its metadata, ``2.1.0+cu132`` and CUDA 13.2 at run time."""
    return build_index(
        tmp_path_factory.mktemp("pypi-cuda-index"),
        [torch_wheel("2.1.0", cuda="13.2", build_version="2.1.0+cu132")],
    )


def test_the_variant_and_installed_version_come_from_the_runtime_build(
    tmp_path, pypi_cuda_index, uv_env, capsys
):
    python = venv_with(tmp_path, pypi_cuda_index, "torch==2.1.0")
    status, out, err = run_check(
        capsys,
        "--python",
        python,
        "--results",
        str(tmp_path / "r"),
        "--spec",
        install_sanity_only(tmp_path),
    )
    assert status == 0, out + err
    result = load_results(tmp_path / "r").results[0]
    assert result.cell.variant == "cu132" and result.install.resolved["torch"] == "2.1.0"
    assert result.probe("install_sanity").status == "pass"  # CUDA 13.2 is what cu132 expects
    row = next(line for line in out.splitlines() if line.startswith(result.cell.id))
    assert re.search(r"\bcu132\b", row) and "default" not in row
    assert "torch 2.1.0+cu132" in row  # the installed column: the build, label included
    assert re.search(r"; torch 2\.1\.0\+cu132\b", out)  # the versions line above the table


def test_the_default_results_dir_is_check_under_the_results_root(
    tmp_path, index, uv_env, capsys, monkeypatch
):
    python = venv_with(tmp_path, index, "torch==2.1.0")
    monkeypatch.setenv("TORCH_MATRIX_RESULTS", str(tmp_path / "root"))
    status, out, err = run_check(
        capsys, "--python", python, "--spec", install_sanity_only(tmp_path)
    )
    assert status == 0, out + err
    assert len(list((tmp_path / "root" / "check" / "cells").glob("env-t2.1.0-py*.json"))) == 1


def test_spec_custom_command_probes_run_in_the_environment(tmp_path, index, uv_env, capsys):
    python = venv_with(tmp_path, index, "torch==2.1.0")
    spec = tmp_path / "custom.toml"
    spec.write_text(
        '[probes]\nrun = ["install_sanity", "which_torch"]\n'
        "[probes.commands]\nwhich_torch = \"python -c 'import torch, sys; "
        'sys.exit(torch.__version__ != \\"2.1.0\\")\'"\n'
    )
    status, out, err = run_check(
        capsys, "--python", python, "--results", str(tmp_path / "r"), "--spec", str(spec)
    )
    assert status == 0, out + err
    result = load_results(tmp_path / "r").results[0]
    assert result.probe("which_torch").status == "pass"


def test_a_changed_default_is_marked_and_noted_not_a_bare_fail_under_compatible(
    tmp_path, index, uv_env, capsys
):
    probes_dir = tmp_path / "my_probes"
    probes_dir.mkdir()
    (probes_dir / "plain_load.py").write_text(
        "from torch_matrix.probes.api import Fail, probe\n\n"
        "@probe('plain_load', doc='the plain call breaks on a changed default')\n"
        "def plain_load(ctx):\n"
        "    raise Fail('changed default: load(path) refuses it; it loads with strict=False',\n"
        "               evidence={'advice': 'load with strict=False (the default changed)'})\n"
    )
    spec = tmp_path / "flip.toml"
    spec.write_text('[probes]\nrun = ["install_sanity", "plain_load"]\ndirs = ["my_probes"]\n')
    python = venv_with(tmp_path, index, "torch==2.1.0", "torchvision==0.16.0")
    status, out, err = run_check(
        capsys, "--python", python, "--results", str(tmp_path / "r"), "--spec", str(spec)
    )
    assert status == 0, out + err
    cell = load_results(tmp_path / "r").results[0].cell.id
    row = next(line for line in out.splitlines() if line.startswith(cell))
    assert "✓ compatible ⚑ changed default: plain_load" in row
    assert re.search(r"^plain_load +FAIL ⚑$", out, re.M)  # the FAIL under "compatible", explained
    assert (
        f"  ⚑ plain_load in {cell}: load with strict=False (the default changed)"
        in out.splitlines()
    )


def test_a_probe_runner_that_dies_is_no_verdict_exit_3(
    tmp_path, index, uv_env, capsys, monkeypatch
):
    from torch_matrix.world import probe_process

    package = tmp_path / "fake" / "probes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import os\nos._exit(9)\n")
    monkeypatch.setattr(probe_process, "probes_source", lambda: package)
    python = venv_with(tmp_path, index, "torch==2.1.0")
    status, out, err = run_check(capsys, "--python", python, "--results", str(tmp_path / "r"))
    assert status == 3, out + err
    assert "! error" in out


# ---------------------------------------------------------------- bad input: one line, a hint, exit 2


def assert_one_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert (
        len(lines) == 2
        and lines[0].startswith("torch-matrix: error: ")
        and lines[1].startswith("  hint: ")
    )
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


def test_a_python_that_does_not_exist(tmp_path, capsys):
    status, out, err = run_check(capsys, "--python", str(tmp_path / "nope" / "python"))
    assert status == 2 and out == ""
    assert_one_error(err, "nope/python: no such file", "hint: pass the interpreter")


def test_a_venv_directory_gets_its_interpreter_suggested(tmp_path, index, uv_env, capsys):
    venv_with(tmp_path, index, name="venv")
    status, _, err = run_check(capsys, "--python", str(tmp_path / "venv"))
    assert status == 2
    assert_one_error(err, "is a directory", f"--python {tmp_path / 'venv' / 'bin' / 'python'}")


def test_a_file_that_is_not_executable(tmp_path, capsys):
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n")
    status, _, err = run_check(capsys, "--python", str(path))
    assert status == 2
    assert_one_error(err, "is not executable")


def test_an_executable_that_is_not_python(tmp_path, capsys):
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\necho 'I am not python' >&2\nexit 1\n")
    path.chmod(0o755)
    status, _, err = run_check(capsys, "--python", str(path))
    assert status == 2
    assert_one_error(
        err,
        "not a Python interpreter that can run the probes (I am not python)",
        "hint: pass a Python 3.8+ interpreter",
    )


def test_an_interpreter_without_torch(tmp_path, index, uv_env, capsys):
    python = venv_with(tmp_path, index, "numpy==1.26.4", name="notorch")
    status, _, err = run_check(capsys, "--python", python, "--results", str(tmp_path / "r"))
    assert status == 2
    assert_one_error(
        err,
        "torch is not installed in this environment",
        str(tmp_path / "notorch"),
        "hint: point --python at the interpreter of an environment that has torch",
    )
    assert not (tmp_path / "r").exists()


def test_results_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("")
    status, _, err = run_check(capsys, "--python", sys.executable, "--results", str(target))
    assert status == 2
    assert_one_error(err, "exists and is not a directory", "hint: pass a directory")


def test_a_bad_spec_is_one_line(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text("[probes]\nrun = 3\n")
    status, _, err = run_check(capsys, "--python", sys.executable, "--spec", str(spec))
    assert status == 2 and err.startswith("torch-matrix: error: ") and "Traceback" not in err


# ---------------------------------------------------------------- real torch (installs real wheels once)


@pytest.mark.realwheels
def test_check_a_real_torch_2_13_cpu_environment(tmp_path, capsys):
    try:
        python = str(realwheels.ensure_env(realwheels.CPU_2_13))
    except realwheels.EnvUnavailable as exc:
        pytest.skip(
            "REAL-WHEEL TEST NOT RUN: cannot build %s here: %s" % (realwheels.CPU_2_13.name, exc)
        )
    results = tmp_path / "check"
    status, out, err = run_check(capsys, "--python", python, "--results", str(results))
    assert status in (0, 1), out + err  # a finding either way, never "no verdict"
    result = load_results(results).results[0]
    assert result.cell.is_existing_env and result.cell.variant == "cpu"
    assert (
        result.install.resolved["torch"] == "2.13.0+cpu"
        and "torchvision" not in result.install.resolved
    )
    by_name = {probe.name: probe for probe in result.probes}
    assert {"install_sanity", "lazy_cuda_init", "cuda_devices", "training_step"} <= set(by_name)
    assert by_name["install_sanity"].status == "pass"
    assert by_name["lazy_cuda_init"].status == "pass"
    assert by_name["cuda_devices"].status == "skip" and "no CUDA" in by_name["cuda_devices"].message
    assert by_name["torchvision_ops"].status == "skip"  # not installed in that venv
    assert re.search(
        r"^  cuda_devices +skip +no CUDA device$", out, re.M
    )  # says what it could not test
    assert result.gpu.get("cuda_available") is False
    expected = 0 if verdict_of(result).kind == COMPATIBLE else 1
    assert status == expected
    assert os.path.basename(python) == "python"


def test_repro_of_an_existing_environment_says_so_and_reruns_with_check():
    import dataclasses

    from torch_matrix.report.repro import render_bundle
    from tests.factories import make_probe

    bad = make_result(
        torch="2.13.0",
        resolved={"torch": "2.13.0+cpu"},
        probes=[make_probe("install_sanity", status="fail", message="x")],
    )
    cell = dataclasses.replace(
        bad.cell,
        id="env-t2.13.0-cpu-py3.11-h-abc123",
        origin=ORIGIN_EXISTING,
        requirements=("torch==2.13.0+cpu",),
    )
    env = dataclasses.replace(
        bad,
        cell=cell,
        interpreter={"path": "/srv/env/bin/python", "version": "3.11.7"},
        install=existing_install(facts(torch="2.13.0+cpu", numpy=None, prefix="/srv/env")),
    )
    text = render_bundle(env, [env])
    # issue-ready: the environment is named by its role, never by this machine's path (#42)
    assert (
        "Probed as found by `torch-matrix check` (existing virtual environment at $CELL_VENV"
        in text
    )
    assert "/srv/env" not in text
    assert re.search(r"^uv pip install --python \S+ torch==2\.13\.0\+cpu$", text, re.M)
    assert "torch-matrix check --python $CELL_VENV/bin/python" in text and "nox -s" not in text


def test_what_could_not_be_exercised_is_listed_with_its_reason():
    from tests.factories import make_probe

    result = make_result(
        probes=[
            make_probe("install_sanity"),
            make_probe("cuda_devices", "skip", "no CUDA device"),
            make_probe("torch_compile", "unsupported", "Python 3.14 is not supported"),
        ]
    )
    assert check_cli.not_run_lines(result) == [
        "  cuda_devices   skip         no CUDA device",
        "  torch_compile  unsupported  Python 3.14 is not supported",
    ]
    assert check_cli.not_run_lines(make_result()) == []
