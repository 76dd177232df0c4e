"""``torch-matrix repro``: an issue-ready bundle, from a real run's failing cell."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch_matrix.cli import main as cli
from torch_matrix.vocab.records import FAIL, INSTALL_ERROR
from torch_matrix.report.repro import install_lines, nearest_passing, render_bundle
from torch_matrix.world.results import load_results
from tests.factories import make_probe, make_result

REAL_RUN = Path(__file__).parent / "golden" / "pins" / "real_yolo_run"


def _real():
    loaded = load_results(REAL_RUN / "cells")
    return {result.cell.id: result for result in loaded.results}, loaded.results


def test_bundle_of_the_real_lazy_cuda_init_failure():
    by_id, results = _real()
    text = render_bundle(by_id["t1.12.0-py3.10-nplt2"], results, spec_path="my specs/matrix.toml")
    # the message is text, its backticks shown as written (a probe's message is never markup)
    assert text.startswith(
        "### torch 1.12.0+cu102: `lazy_cuda_init` fail: \\`import torch\\` queried CUDA"
    )
    assert (
        "| torch | 1.12.0+cu102 (built with CUDA 10.2) |" in text
    )  # the build, with its local label
    assert "| torchvision | 0.13.0+cu102 |" in text and "| Python | 3.10.13 (cpython) |" in text
    assert "| GPU | none visible |" in text
    # this machine's wheel directory is left out, and said so (#42: no machine paths)
    assert (
        "uv pip install --python .venv-repro torch==1.12.0 torchvision==0.13.0 'numpy<2'"
    ) in text
    assert "left out (local to the machine that ran the cell): --find-links" in text
    assert "sys.setprofile(watch)\nimport torch\n" in text  # the snippet, whole
    assert "probes.api.Fail: `import torch` queried CUDA" in text  # the traceback
    assert (
        "| observed | expected |" in text
        and "no CUDA query or initialisation during import torch" in text
    )
    assert (
        "**Nearest passing cell**: passes on torch 1.12.1 (here 1.12.0), torchvision 0.13.1 (here 0.13.0): "
        "cell `t1.12.1-py3.10-nplt2`."
    ) in text
    assert (
        "torch-matrix run --spec 'my specs/matrix.toml' -s 'matrix(t1.12.0-py3.10-nplt2)' -- --redo"
        in text
    )


def test_a_named_probe_and_its_nearest_pass():
    by_id, results = _real()
    text = render_bundle(by_id["t1.13.1-py3.10-npge2"], results, "numpy_interop")
    assert "`numpy_interop` fail" in text.splitlines()[0]
    # numpy_interop passes on the same torch with numpy<2: one axis away beats another torch
    assert (
        "passes on numpy &lt;2 (here >=2): cell `t1.13.1-py3.10-nplt2`" in text
    )  # &lt;: renders <2


def test_nearest_passing_is_none_when_nothing_passes():
    bad = [
        make_result(torch=v, probes=[make_probe("install_sanity", FAIL)])
        for v in ("2.4.1", "2.5.1")
    ]
    assert nearest_passing(bad[0], bad, "install_sanity") is None
    assert "none in this run" in render_bundle(bad[0], bad)


def test_a_compatible_cells_bundle_names_the_cell_and_offers_no_nearest_pass():
    """Seen on a real project's run (examples/corpus, torch-image-interpolation): `repro` of a
    compatible cell was titled ``torch 2.6.0: `the cell` compatible`` and offered "Nearest passing
    cell: passes on torch 2.5.1 (here 2.6.0)", next to a cell that passes itself."""
    good = [make_result(torch=v, probes=[make_probe("tests")]) for v in ("2.5.1", "2.6.0")]
    text = render_bundle(good[1], good)
    assert text.splitlines()[0] == f"### torch 2.6.0: cell `{good[1].cell.id}` compatible"
    assert "Nearest passing" not in text
    failing = make_result(torch="2.4.1", probes=[make_probe("tests", FAIL)])
    assert "**Nearest passing cell**: passes on torch 2.5.1" in render_bundle(
        failing, [failing, *good]
    )


def test_install_lines_drop_the_cells_venv_and_keep_the_index_options():
    result = make_result(torch="2.5.1")
    result = dataclasses.replace(
        result,
        **{
            "install": type(result.install)(
                status="installed",
                command=(
                    "/x/uv",
                    "pip",
                    "install",
                    "--python",
                    "/x/.nox/v/bin/python",
                    "--torch-backend",
                    "cu124",
                    "--index",
                    "https://m.example/simple",
                    "torch==2.5.1",
                ),
            ),
        },
    )
    assert install_lines(result)[0][1] == (
        "uv pip install --python .venv-repro --torch-backend cu124 "
        "--index https://m.example/simple torch==2.5.1"
    )


def test_an_install_error_bundle_shows_the_message():
    result = make_result(status=INSTALL_ERROR, message="Failed to download: connection reset")
    text = render_bundle(result, [result])
    assert "not installed: **error**" in text and "connection reset" in text


def test_cli_prints_writes_and_names_bad_input(tmp_path, capsys):
    assert cli(["repro", "t1.12.0-py3.10-nplt2", "--results", str(REAL_RUN / "cells")]) == 0
    assert "lazy_cuda_init" in capsys.readouterr().out
    out = tmp_path / "bundle.md"
    assert (
        cli(
            [
                "repro",
                "t1.12.0-py3.10-npge2",
                "numpy_interop",
                "--results",
                str(REAL_RUN / "cells"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "`numpy_interop` fail" in out.read_text(encoding="utf-8")
    assert cli(["repro", "t1.12.0-py3.10-nplt", "--results", str(REAL_RUN / "cells")]) == 2
    err = capsys.readouterr().err
    assert (
        "torch-matrix: error:" in err
        and "did you mean t1.12.0-py3.10-nplt2" in err
        and "Traceback" not in err
    )
    assert cli(["repro", "t1.12.0-py3.10-nplt2", "nope", "--results", str(REAL_RUN / "cells")]) == 2
    assert "its probes: install_sanity, lazy_cuda_init" in capsys.readouterr().err


def test_the_bundle_of_a_command_probe_is_shell_steps_with_node_ids_and_no_machine_local_path():
    from dataclasses import replace

    from torch_matrix.report.repro import render_bundle
    from tests.factories import make_probe, make_result

    project = "/home/me/work/tinytrain"
    probe = make_probe(
        "tests",
        "fail",
        "2 failed, 3 passed: [2] tests/test_a.py::test_x, tests/test_a.py::test_y "
        "-- KeyError: 'epoch'",
        isolation="command",
        output_tail=f"{project}/.nox/tinytrain/matrix-t2-6-0/lib/python3.11/site-packages/torch/x.py",
        evidence={
            "command": "pytest -q tests",
            "cwd": project,
            "pytest_exit": 1,
            "failure_groups": [
                {
                    "message": "KeyError: 'epoch'",
                    "count": 2,
                    "more": 0,
                    "nodeids": ["tests/test_a.py::test_x", "tests/test_a.py::test_y"],
                }
            ],
        },
    )
    result = make_result(
        torch="2.6.0", torchvision="", probes=[make_probe("install_sanity"), probe]
    )
    result = replace(
        result,
        install=replace(
            result.install,
            command=(
                "uv",
                "pip",
                "install",
                "--python",
                f"{project}/.nox/tinytrain/matrix-t2-6-0/bin/python",
                "--find-links",
                "/opt/wheels",
                "torch==2.6.0",
                "-r",
                f"{project}/requirements.txt",
                "-e",
                f"{project}[test]",
                "pytest",
            ),
        ),
        interpreter={
            **result.interpreter,
            "path": f"{project}/.nox/tinytrain/matrix-t2-6-0/bin/python",
        },
    )
    text = render_bundle(
        result,
        [result],
        "tests",
        project={"dir": project, "url": "https://github.com/me/tinytrain.git", "commit": "0123abc"},
    )
    assert "#### Steps (shell)" in text and "repro.py" not in text
    assert (
        "git clone https://github.com/me/tinytrain.git project && cd project\ngit checkout 0123abc"
        in text
    )
    assert (
        "uv pip install --python .venv-repro torch==2.6.0 -r ./requirements.txt -e '.[test]' pytest"
        in text
    )
    assert (
        ".venv-repro/bin/python -m pytest -q tests/test_a.py::test_x tests/test_a.py::test_y"
        in text
    )
    assert "--find-links (a local directory or file)" in text  # said, not hidden
    assert "/home/me" not in text and "/opt/wheels" not in text, text


def test_a_follow_up_cells_bundle_reruns_it_through_the_follow_up_session():
    """An edge cell has no matrix(ID) session: its bundle's rerun line must be the follow-up
    session's (`matrix(ID)` would answer "Sessions not found")."""
    import dataclasses

    from torch_matrix.vocab.records import ORIGIN_EDGE

    result = make_result(probes=[make_probe("torch_six", FAIL, "No module named 'torch._six'")])
    edge = dataclasses.replace(
        result,
        cell=dataclasses.replace(
            result.cell, id=result.cell.id + "-edge", origin=ORIGIN_EDGE, reason="start"
        ),
    )
    text = render_bundle(edge, [edge], spec_path="m.toml")
    assert f"torch-matrix run --spec m.toml -s followups -- --redo {edge.cell.id}" in text
    assert "matrix(" not in text.split("#### Rerun with torch-matrix")[1]
