"""--apply: update real-looking requirements.txt and pyproject.toml files in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomlkit

from torch_matrix.world import apply as apply_module
from torch_matrix.world.apply import apply_pins
from torch_matrix.cli import main as cli_main
from torch_matrix.vocab.errors import UserError
from torch_matrix.pins import RequirementLine
from torch_matrix.world.results import write_result
from tests.pins_grids import single_bad_patch

TORCH_TV = [RequirementLine("torch", ("!=1.12.0",)), RequirementLine("torchvision", ("!=0.13.0",))]
SCOPED = [
    RequirementLine("torch", (">=1.9",), 'python_version < "3.12"'),
    RequirementLine("torch", (">=2.4",), 'python_version >= "3.12"'),
]

REQUIREMENTS = """\
# YOLOv5 requirements
# Usage: pip install -r requirements.txt

# Base ------------------------------------------------------------------------
--extra-index-url https://download.pytorch.org/whl/cu121
-r requirements-common.txt
-c constraints.txt
matplotlib>=3.3
numpy>=1.23.5  # numeric
torch>=1.8.0  # see https://github.com/ultralytics/yolov5/issues/8395
torchvision>=0.9.0
Torch_Vision-Extra==1.0 ; sys_platform == "linux"
torch[opt-einsum] >= 1.8.0 ; sys_platform == "linux"  # Linux only

# Local and VCS requirements are left alone
./vendor/mypkg
git+https://github.com/org/repo.git#egg=repo
pillow==10.0.0 \\
    --hash=sha256:abc
"""

EXPECTED_REQUIREMENTS = (
    REQUIREMENTS.replace("torch>=1.8.0  # see", "torch>=1.8.0,!=1.12.0  # see")
    .replace("torchvision>=0.9.0\n", "torchvision>=0.9.0,!=0.13.0\n")
    .replace("torch[opt-einsum] >= 1.8.0 ;", "torch[opt-einsum] >=1.8.0,!=1.12.0 ;")
)

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]

[project]
name = "downstream"  # the name
version = "1.0"
dependencies = [
    "numpy>=1.23",  # arrays
    # the big one
    "torch>=1.8.0",
    "torchvision>=0.9; platform_machine != 'armv7l'",
    'tomli>=2; python_version<"3.11"',
]

[project.optional-dependencies]
export = ["onnx>=1.12", "torch[opt-einsum]>=1.8"]

[tool.other]
torch = "not a dependency"
"""


def write(tmp_path: Path, name: str, text: str, newline: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def test_requirements_txt_changes_only_affected_specifiers(tmp_path):
    path = write(tmp_path, "requirements.txt", REQUIREMENTS)
    result = apply_pins(path, TORCH_TV)
    assert path.read_text() == EXPECTED_REQUIREMENTS
    assert len(result.changes) == 3
    assert result.notes == ()


def test_dry_run_shows_a_diff_and_writes_nothing(tmp_path):
    path = write(tmp_path, "requirements.txt", REQUIREMENTS)
    before = path.stat().st_mtime_ns
    result = apply_pins(path, TORCH_TV, dry_run=True)
    assert path.read_text() == REQUIREMENTS and path.stat().st_mtime_ns == before
    diff = result.diff()
    assert "-torch>=1.8.0  # see" in diff and "+torch>=1.8.0,!=1.12.0  # see" in diff
    assert diff.startswith("--- a/requirements.txt\n+++ b/requirements.txt\n")


def test_applying_twice_changes_nothing_the_second_time(tmp_path):
    path = write(tmp_path, "requirements.txt", REQUIREMENTS)
    apply_pins(path, TORCH_TV)
    again = apply_pins(path, TORCH_TV)
    assert not again.changed and again.changes == ()


def test_crlf_line_endings_are_kept(tmp_path):
    path = write(tmp_path, "requirements.txt", REQUIREMENTS, newline="\r\n")
    apply_pins(path, TORCH_TV)
    assert path.read_bytes() == EXPECTED_REQUIREMENTS.replace("\n", "\r\n").encode()


def test_python_scoped_pins_split_a_line_with_complementary_markers(tmp_path):
    path = write(tmp_path, "requirements.txt", "numpy\ntorch>=1.8.0  # core\n")
    apply_pins(path, SCOPED)
    assert path.read_text() == (
        'numpy\ntorch>=1.9; python_version < "3.12"  # core\ntorch>=2.4; python_version >= "3.12"\n'
    )


def test_existing_marker_is_combined_with_the_python_marker(tmp_path):
    path = write(
        tmp_path,
        "requirements.txt",
        'torch>=1.8 ; sys_platform == "linux" or sys_platform == "darwin"\n',
    )
    apply_pins(path, SCOPED)
    assert path.read_text() == (
        'torch>=1.9; (sys_platform == "linux" or sys_platform == "darwin") and python_version < "3.12"\n'
        'torch>=2.4; (sys_platform == "linux" or sys_platform == "darwin") and python_version >= "3.12"\n'
    )


def test_exact_pin_excluded_by_evidence_is_left_with_a_note(tmp_path):
    path = write(tmp_path, "requirements.txt", "torch==1.12.0+cu113\ntorchvision==0.14.1\n")
    result = apply_pins(path, TORCH_TV)
    assert not result.changed
    assert any(
        "torch==1.12.0+cu113 is an exact pin the evidence excludes" in note for note in result.notes
    )
    assert len(result.notes) == 1  # torchvision==0.14.1 is fine


def test_package_not_in_the_file_is_not_added(tmp_path):
    path = write(tmp_path, "requirements.txt", "torch>=2\n")
    result = apply_pins(path, [RequirementLine("numpy", ("<2",))])
    assert not result.changed
    assert result.notes == (
        (
            f"{path}: numpy is not a direct dependency here (not added); "
            "constrain it with constraints.txt: numpy<2"
        ),
    )


def test_bad_requirement_line_names_file_and_line(tmp_path):
    path = write(tmp_path, "requirements.txt", "numpy\ntorch>=>1.8\n")
    with pytest.raises(UserError) as error:
        apply_pins(path, TORCH_TV)
    assert error.value.where == f"{path}:2"
    assert path.read_text() == "numpy\ntorch>=>1.8\n"


def test_failed_write_leaves_the_original_and_no_temp_file(tmp_path, monkeypatch):
    path = write(tmp_path, "requirements.txt", REQUIREMENTS)

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(apply_module.os, "replace", broken_replace)
    with pytest.raises(OSError):
        apply_pins(path, TORCH_TV)
    assert path.read_text() == REQUIREMENTS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requirements.txt"]


def test_pyproject_dependencies_are_updated_format_preserving(tmp_path):
    path = write(tmp_path, "pyproject.toml", PYPROJECT)
    result = apply_pins(path, TORCH_TV)
    expected = (
        PYPROJECT.replace('"torch>=1.8.0",', '"torch>=1.8.0,!=1.12.0",')
        .replace(
            "\"torchvision>=0.9; platform_machine != 'armv7l'\"",
            "\"torchvision>=0.9,!=0.13.0; platform_machine != 'armv7l'\"",
        )
        .replace('"torch[opt-einsum]>=1.8"]', '"torch[opt-einsum]>=1.8,!=1.12.0"]')
    )
    assert path.read_text() == expected
    assert len(result.changes) == 3
    assert tomlkit.parse(path.read_text())["tool"]["other"]["torch"] == "not a dependency"


def test_pyproject_scoped_pins_insert_entries_in_place(tmp_path):
    path = write(tmp_path, "pyproject.toml", PYPROJECT)
    apply_pins(path, SCOPED)
    deps = tomlkit.parse(path.read_text())["project"]["dependencies"]
    assert list(deps) == [
        "numpy>=1.23",
        'torch>=1.9; python_version < "3.12"',
        'torch>=2.4; python_version >= "3.12"',
        "torchvision>=0.9; platform_machine != 'armv7l'",
        'tomli>=2; python_version<"3.11"',
    ]
    assert "# arrays" in path.read_text() and "# the big one" in path.read_text()


def test_pyproject_bad_dependency_names_the_entry(tmp_path):
    path = write(
        tmp_path, "pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch>=>1"]\n'
    )
    with pytest.raises(UserError) as error:
        apply_pins(path, TORCH_TV)
    assert "project.dependencies[0]" in error.value.where


def _results_dir(tmp_path: Path) -> Path:
    cells = tmp_path / "results" / "default" / "cells"
    for result in single_bad_patch(with_torchvision=True):
        write_result(result, cells)
    return tmp_path / "results"


def test_cli_writes_outputs_and_applies(tmp_path, capsys):
    results = _results_dir(tmp_path)
    target = write(tmp_path, "requirements.txt", "torch>=1.8.0  # core\ntorchvision\n")
    out = tmp_path / "pins"
    code = cli_main(
        ["pins", str(results), "--out", str(out), "--no-coverage", "--apply", str(target)]
    )
    assert code == 0
    assert target.read_text() == "torch>=1.8.0,!=1.12.0  # core\ntorchvision!=0.13.0\n"
    assert sorted(p.name for p in out.iterdir()) == [
        "constraints.txt",
        "pins.json",
        "requirements-pins.txt",
    ]
    constraints = (out / "constraints.txt").read_text()
    assert (
        "torch!=1.12.0  # 1.12.0: lazy_cuda_init (2 cells; 1.12.1 passes, all else equal)"
        in constraints
    )
    printed = capsys.readouterr().out
    assert "Suggested pins" in printed and "+torch>=1.8.0,!=1.12.0  # core" in printed


def test_cli_dry_run_writes_nothing(tmp_path, capsys):
    results = _results_dir(tmp_path)
    target = write(tmp_path, "requirements.txt", "torch>=1.8.0\n")
    code = cli_main(
        [
            "pins",
            str(results),
            "--out",
            str(tmp_path / "pins"),
            "--no-coverage",
            "--apply",
            str(target),
            "--dry-run",
        ]
    )
    assert code == 0
    assert target.read_text() == "torch>=1.8.0\n"
    assert not (tmp_path / "pins").exists()
    assert "would change (dry run" in capsys.readouterr().out


def test_cli_bad_apply_file_is_one_line_exit_2(tmp_path, capsys):
    results = _results_dir(tmp_path)
    target = write(tmp_path, "requirements.txt", "torch>=>1\n")
    assert (
        cli_main(["pins", str(results), "--no-coverage", "--apply", str(target), "--dry-run"]) == 2
    )
    assert f"torch-matrix: error: {target}:1: cannot parse requirement" in capsys.readouterr().err
    assert os.path.exists(target)


def test_bare_requirement_with_marker_gets_the_specifier_after_the_name(tmp_path):
    path = write(tmp_path, "requirements.txt", 'torch ; sys_platform == "linux"\n')
    apply_pins(path, TORCH_TV)
    assert path.read_text() == 'torch!=1.12.0 ; sys_platform == "linux"\n'


class FakeIndex:
    def versions(self, project):
        return {
            "torch": ["1.11.0", "1.12.0", "1.12.1", "1.13.0", "1.13.1", "2.0.0"],
            "torchvision": ["0.12.0", "0.13.0", "0.13.1", "0.14.1"],
        }[project]


def test_cli_coverage_from_the_index_and_offline_fallback(tmp_path, capsys, monkeypatch):
    import torch_matrix.world.index

    results = _results_dir(tmp_path)
    monkeypatch.setattr(
        torch_matrix.world.index, "open_index", lambda config, **kwargs: FakeIndex()
    )
    assert cli_main(["pins", str(results), "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert "torch: between tested versions: 1.13.0; newer than tested: 2.0.0" in printed

    def offline(config, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(torch_matrix.world.index, "open_index", offline)
    assert cli_main(["pins", str(results), "--out", str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    assert "coverage unknown" in captured.err and "network is unreachable" in captured.err
    assert "torch: unknown (released versions not available)" in captured.out

    # The same pins; online, each window also carries its proof (offline there are no releases to prove it over).
    def pins_only(path):
        return [
            line.split("  #")[0]
            for line in path.read_text().splitlines()
            if not line.startswith("#")
        ]

    assert pins_only(tmp_path / "b" / "constraints.txt") == pins_only(
        tmp_path / "a" / "constraints.txt"
    )
    assert "window 1.12.0: proven" in (tmp_path / "a" / "constraints.txt").read_text()


def test_scoped_pins_apply_idempotently_and_respect_existing_python_markers(tmp_path):
    path = write(tmp_path, "requirements.txt", "torch>=1.8.0  # core\n")
    apply_pins(path, SCOPED)
    first = path.read_text()
    assert not apply_pins(path, SCOPED).changed
    assert path.read_text() == first
    old_python = write(tmp_path, "old.txt", 'torch>=1.8; python_version < "3.10"\n')
    apply_pins(old_python, SCOPED)
    assert old_python.read_text() == 'torch>=1.9; python_version < "3.10"\n'


def test_apply_to_setup_py_prints_the_merged_requirement_to_paste_and_edits_nothing(
    tmp_path, capsys
):
    """setup.py is code: it used to be read as a requirements file (a PEP 508 parse error)."""
    results = _results_dir(tmp_path)
    text = 'from setuptools import setup\nsetup(name="x", install_requires=["torch>=1.7.0", "numpy"])\n'
    target = write(tmp_path, "setup.py", text)
    code = cli_main(
        [
            "pins",
            str(results),
            "--out",
            str(tmp_path / "pins"),
            "--no-coverage",
            "--apply",
            str(target),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and target.read_text() == text
    assert f"{target}: not edited" in out
    assert (
        "torch-matrix does not edit setup.py (it is code); paste the merged requirement(s) yourself"
        in out
    )
    assert "'torch>=1.7.0' -> 'torch>=1.7.0,!=1.12.0'" in out
