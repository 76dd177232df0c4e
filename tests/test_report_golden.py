"""Golden test: ``torch-matrix report DIR --pins --html`` over fixed result sets writes exactly these bytes.

What the user sees and commits (the table, summary.md, results.json, the pins files, the HTML page and
what the command says on stderr) must not change when the report is made faster. Small outputs are
kept whole under tests/golden/report/<case>/; the HTML page (its styles and script are the same in
every case) and any output over ``WHOLE_LIMIT`` bytes are kept as their sha256 (``<name>.sha256``).

Regenerate after an intended change with ``TORCH_MATRIX_UPDATE_GOLDEN=1 pytest tests/test_report_golden.py``
and review the diff.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest

from benchmarks.scale import synthetic_results
from torch_matrix import cli
from torch_matrix.world.results import write_result
from tests.pins_grids import GRIDS, RELEASED

GOLDEN = Path(__file__).parent / "golden" / "report"
REAL_RUNS = Path(__file__).parent / "golden" / "pins"
UPDATE = __import__("os").environ.get("TORCH_MATRIX_UPDATE_GOLDEN") == "1"
WHOLE_LIMIT = 20_000
# The benchmark's synthetic grid (figure 5_scale) up to torch 2.2.1: passing cells, skips, unsatisfiable
# and install-error cells, a NaN training step on 2.1.1 and numpy 2 failures on 2.2.x.
SYNTHETIC_COUNT = 640
SYNTHETIC_RELEASED = {
    "torch": [f"2.{minor}.{patch}" for minor in range(0, 3) for patch in range(0, 3)],
    "torchvision": [f"0.{minor}.{patch}" for minor in range(15, 18) for patch in range(0, 3)],
    "numpy": ["1.26.4", "2.0.2", "2.1.3"],
}


def _write(results, root: Path) -> None:
    for result in results:
        write_result(result, root / "run" / "cells")


def _case_synthetic(root: Path):
    _write(synthetic_results(SYNTHETIC_COUNT), root)
    return SYNTHETIC_RELEASED


def _real_case(name: str):
    def make(root: Path):
        shutil.copytree(REAL_RUNS / name / "cells", root / "run" / "cells")
        return None  # coverage unknown, as offline

    return make


def _grid_case(name: str):
    def make(root: Path):
        _write(GRIDS[name](), root)
        return RELEASED

    return make


CASES = {
    "synthetic": _case_synthetic,
    **{name: _real_case(name) for name in sorted(path.name for path in REAL_RUNS.glob("real_*"))},
    **{f"grid_{name}": _grid_case(name) for name in sorted(GRIDS)},
}


def _outputs(root: Path, out: Path, stdout: str, stderr: str) -> dict[str, str]:
    files = {"stdout.txt": stdout, "stderr.txt": stderr}
    for path in sorted(out.rglob("*")):
        if path.is_file():
            files[path.relative_to(out).as_posix()] = path.read_text(encoding="utf-8")
    # The page names when it was made; nothing else in it may differ between runs.
    files["report.html"] = re.sub(
        r" · generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", " · generated <when>", files["report.html"]
    )
    return {name: text.replace(str(root), "<root>") for name, text in files.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_with_pins_writes_the_same_bytes(case, tmp_path, capsys, monkeypatch):
    import torch_matrix.run.pins

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    released = CASES[case](tmp_path)
    monkeypatch.setattr(
        torch_matrix.run.pins,
        "index_facts",
        lambda packages, spec=None: (
            (None, {})
            if released is None
            else ({name: list(released.get(name, ())) for name in packages}, {})
        ),
    )
    out = tmp_path / "out"
    code = cli.main(
        [
            "report",
            str(tmp_path / "run"),
            "--out",
            str(out),
            "--pins",
            "--html",
            str(out / "report.html"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    outputs = _outputs(tmp_path, out, captured.out, captured.err)
    assert {
        "stdout.txt",
        "summary.md",
        "results.json",
        "report.html",
        "pins/constraints.txt",
    } <= set(outputs)
    golden = GOLDEN / case
    if UPDATE:
        shutil.rmtree(golden, ignore_errors=True)
        for name, text in outputs.items():
            path = golden / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if len(text.encode()) > WHOLE_LIMIT or name.endswith(".html"):
                path = path.with_name(path.name + ".sha256")
                text = hashlib.sha256(text.encode()).hexdigest() + "\n"
            path.write_text(text, encoding="utf-8")
    expected = {
        path.relative_to(golden).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(golden.rglob("*"))
        if path.is_file()
    }
    assert sorted(name.removesuffix(".sha256") for name in expected) == sorted(outputs)
    for name, text in outputs.items():
        if name + ".sha256" in expected:
            assert hashlib.sha256(text.encode()).hexdigest() + "\n" == expected[name + ".sha256"], (
                f"{case}/{name} differs from its golden digest (see the module docstring)"
            )
        else:
            assert text == expected[name], f"{case}/{name} differs (see the module docstring)"
