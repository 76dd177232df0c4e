"""torch_matrix.world.interpreters against fake PATH and PYENV_ROOT trees of stub executables."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torch_matrix.vocab.errors import UserError
from torch_matrix.world.interpreters import find_interpreters


def stub(path: Path, version: str, exit_code: int = 0) -> Path:
    """An executable that answers ``torch_matrix/probes/facts.py interpreter`` like a real interpreter would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    answer = f'{{"version": "{version}", "implementation": "cpython", "executable": "{path}"}}'
    path.write_text(f"#!/bin/sh\necho '{answer}'\nexit {exit_code}\n")
    path.chmod(0o755)
    return path


def test_pyenv_installs_are_found_newest_patch_first(tmp_path):
    root = tmp_path / "pyenv"
    stub(root / "versions" / "3.9.2" / "bin" / "python", "3.9.2")
    newest = stub(root / "versions" / "3.9.10" / "bin" / "python", "3.9.10")
    stub(root / "versions" / "3.10.4" / "bin" / "python", "3.10.4")
    (root / "versions" / "3.9.99").mkdir()  # no bin/python: not a usable install
    found = find_interpreters(
        ["3.9", "3.7"], {}, {"PYENV_ROOT": str(root), "PATH": ""}, use_uv=False
    )
    assert found["3.9"].path == str(newest) and found["3.9"].version == "3.9.10"
    assert found["3.7"] is None


def test_a_shim_that_exits_127_does_not_count_but_a_real_install_does(tmp_path):
    shims = tmp_path / "pyenv" / "shims"
    stub(shims / "python3.12", "3.12.0", exit_code=127)
    real = stub(tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python", "3.12.1")
    environ = {"PYENV_ROOT": str(tmp_path / "pyenv"), "PATH": str(shims)}
    assert find_interpreters(["3.12"], {}, environ, use_uv=False)["3.12"].path == str(real)
    (tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python").unlink()
    alone = {"PYENV_ROOT": str(tmp_path / "pyenv"), "PATH": str(shims)}
    assert find_interpreters(["3.12"], {}, alone, use_uv=False)["3.12"] is None


def test_path_interpreter_is_used_and_its_version_confirmed(tmp_path):
    bin_dir = tmp_path / "bin"
    good = stub(bin_dir / "python3.11", "3.11.9")
    stub(bin_dir / "python3.13", "3.12.0")  # lies about its name
    environ = {"PYENV_ROOT": str(tmp_path / "none"), "PATH": str(bin_dir)}
    found = find_interpreters(["3.11", "3.13"], {}, environ, use_uv=False)
    assert found["3.11"].path == str(good) and found["3.11"].minor == "3.11"
    assert found["3.13"] is None


def test_configured_path_wins_and_a_wrong_one_is_a_user_error(tmp_path):
    configured = stub(tmp_path / "opt" / "py" / "python", "3.10.1")
    found = find_interpreters(["3.10"], {"3.10": str(configured)}, {"PATH": ""}, use_uv=False)
    assert found["3.10"].version == "3.10.1"
    with pytest.raises(UserError) as caught:
        find_interpreters(["3.11"], {"3.11": str(configured)}, {"PATH": ""}, use_uv=False)
    assert "interpreters" in caught.value.where and "3.10.1" in caught.value.one_line()


def test_current_is_the_running_interpreter():
    found = find_interpreters(["current"], {}, {"PATH": ""}, use_uv=False)["current"]
    assert found.path == sys.executable
    assert found.minor == f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_a_compiled_interpreters_answer_is_remembered_across_processes_by_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """``nox -l`` confirmed every Python of the spec by running it, in every process (0.2 s of
    0.47 s for 4 Pythons, issue 46): the answer of the same compiled file is remembered; a
    changed file, or a script (a pyenv shim), is run again."""
    from torch_matrix.world import interpreters

    binary = tmp_path / "pyenv" / "versions" / "3.12.4" / "bin" / "python"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF compiled")
    binary.chmod(0o755)
    script = stub(tmp_path / "pyenv" / "versions" / "3.11.2" / "bin" / "python", "3.11.2")
    runs: list[str] = []

    def run_facts(path, args, **_kwargs):
        runs.append(path)
        version = "3.12.4" if path == str(binary) else "3.11.2"
        return {"version": version, "implementation": "cpython"}, ""

    monkeypatch.setattr(interpreters, "run_facts", run_facts)
    environ = {
        "PYENV_ROOT": str(tmp_path / "pyenv"),
        "PATH": "",
        "TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache"),
    }

    def fresh_process() -> dict:
        interpreters._confirmed.clear()
        return find_interpreters(["3.12", "3.11"], {}, environ, use_uv=False)

    first = fresh_process()
    assert first["3.12"].version == "3.12.4" and runs == [str(binary), str(script)]
    second = fresh_process()
    assert second["3.12"] == first["3.12"] and second["3.11"] == first["3.11"]
    assert runs == [str(binary), str(script), str(script)]  # the script ran again, the binary not
    binary.write_bytes(b"\x7fELF reinstalled, another size")
    assert fresh_process()["3.12"].version == "3.12.4"
    assert runs[-2:] == [str(binary), str(script)]  # a changed file is run again
    (tmp_path / "cache" / interpreters.MEMO_NAME).write_text("not json")
    assert fresh_process()["3.12"].version == "3.12.4"  # a broken memo is only a run more
    assert runs[-2] == str(binary)
