"""The run layout (paths, repro line) and the one atomic writer."""

from __future__ import annotations

import os
import stat

import pytest

from torch_matrix.vocab import layout
from torch_matrix.edges.fileio import atomic_write


def test_cell_file_lives_under_the_run_dir():
    run = layout.run_dir("/r", "nightly")
    assert layout.cell_file(layout.cells_dir(run), "t2.5.1-py3.11") == layout.cell_file(
        "/r/nightly/cells", "t2.5.1-py3.11"
    )
    assert (
        str(layout.cell_file(layout.cells_dir(run), "t2.5.1-py3.11"))
        == "/r/nightly/cells/t2.5.1-py3.11.json"
    )
    assert layout.run_dir("/r", None) == layout.run_dir("/r", "default")


def test_repro_names_the_session_and_optionally_the_spec():
    # torch-matrix run (the shipped noxfile): it works in a project that has no noxfile of its own
    assert (
        layout.repro_command("t2.6.0-py3.11")
        == "torch-matrix run -s 'matrix(t2.6.0-py3.11)' -- --redo"
    )
    assert layout.repro_command("t1-py3.11", "my dir/m.toml") == (
        "torch-matrix run --spec 'my dir/m.toml' -s 'matrix(t1-py3.11)' -- --redo"
    )


def test_results_root_is_absolute_and_follows_the_variable(tmp_path):
    assert layout.results_root({}) == (layout.Path.cwd() / ".torch-matrix" / "results")
    assert layout.results_root({layout.RESULTS_ENV: str(tmp_path)}) == tmp_path


@pytest.mark.parametrize("durable", [True, False])
def test_atomic_write_keeps_the_mode_of_an_existing_file_and_leaves_no_temp(tmp_path, durable):
    target = tmp_path / "sub" / "x.txt"
    atomic_write(target, "one\r\n", durable=durable)
    assert target.read_bytes() == b"one\r\n"  # newlines as given
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    target.chmod(0o640)
    atomic_write(target, "two", durable=durable)
    assert target.read_text() == "two" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.txt"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "x.txt"
    target.write_text("old")

    def boom(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_a_cell_id_is_a_file_name_never_a_path():
    from torch_matrix.vocab.layout import is_cell_id

    assert is_cell_id("t2.0.0-py3.11-edge") and is_cell_id("t2.4.1-py3.11-numpy2.0.2")
    for bad in ("", "../x", "a/b", ".hidden", "-x", "t2 x", "t2;rm"):
        assert not is_cell_id(bad), bad
