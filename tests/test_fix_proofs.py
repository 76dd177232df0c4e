"""Fixes grouped by cause and proven (issue 42): a command probe's tests that torch.load's
``weights_only`` default broke are grouped by call site, every class each load refuses is named
(an ``UnpicklingError`` names one at a time, so the allow-list grows by rerunning until the load
succeeds), and each fix is proven by rerunning the failing tests with it applied: the allow-list,
and the old default (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``). A fix not proven says so.

A fake ``torch`` (``load`` refuses the first class not allowed, as torch >= 2.6 does) stands in for
the real one; the real-wheel run is in the report of issue 42."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from torch_matrix.judge.causes import code_finding
from torch_matrix.judge.verdict import verdict_of
from torch_matrix.probes.isolated import run_command_probe
from torch_matrix.vocab.records import ProbeResult
from tests.factories import make_cell, make_result

FAKE_TORCH = {
    "torch/__init__.py": """
import os, pickle
from torch import serialization


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        dotted = module + "." + name
        if dotted not in serialization._ALLOWED:
            raise pickle.UnpicklingError(
                "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
                "`weights_only` argument in `torch.load` from `False` to `True`. WeightsUnpickler "
                "error: Unsupported global: GLOBAL %s was not an allowed global by default." % dotted
            )
        return super().find_class(module, name)


def save(obj, path):
    with open(path, "wb") as handle:
        pickle.dump(obj, handle)


def load(path, weights_only=None):
    with open(path, "rb") as handle:
        if weights_only is False or os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD") == "1":
            return pickle.load(handle)
        return _Unpickler(handle).load()
""",
    "torch/serialization.py": """
_ALLOWED = {"builtins.dict", "builtins.list"}


def add_safe_globals(classes):
    for cls in classes:
        _ALLOWED.add(cls.__module__ + "." + cls.__qualname__)
""",
}
PROJECT = {
    "ckptlib/__init__.py": "",
    "ckptlib/config.py": ("class RunConfig:\n    epochs = 3\n\n\nclass Stats:\n    steps = 5\n"),
    "ckptlib/io.py": (
        "import torch\nfrom ckptlib.config import RunConfig, Stats\n\n\n"
        "def save_checkpoint(path):\n"
        "    torch.save({'config': RunConfig(), 'stats': Stats()}, path)\n\n\n"
        "def load_checkpoint(path):\n    return torch.load(path)\n"
    ),
    "ckptlib/data.py": (
        "import torch\n\n\nclass TensorBag:\n    n = 4\n\n\n"
        "def load_bag(path):\n    return torch.load(path)\n"
    ),
    "tests/test_io.py": (
        "from ckptlib.io import load_checkpoint, save_checkpoint\n\n\n"
        "def test_checkpoint_roundtrip(tmp_path):\n"
        "    save_checkpoint(tmp_path / 'c.pt')\n"
        "    assert load_checkpoint(tmp_path / 'c.pt')['config'].epochs == 3\n\n\n"
        "def test_checkpoint_stats(tmp_path):\n"
        "    save_checkpoint(tmp_path / 'c.pt')\n"
        "    assert load_checkpoint(tmp_path / 'c.pt')['stats'].steps == 5\n"
    ),
    "tests/test_data.py": (
        "import torch\nfrom ckptlib.data import TensorBag, load_bag\n\n\n"
        "def test_bag_roundtrip(tmp_path):\n"
        "    torch.save(TensorBag(), tmp_path / 'b.pt')\n"
        "    assert load_bag(tmp_path / 'b.pt').n == 4\n\n\n"
        "def test_bag_values(tmp_path):\n"
        "    torch.save(TensorBag(), tmp_path / 'b.pt')\n"
        "    assert load_bag(tmp_path / 'b.pt').n == BROKEN\n"
    ),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _run(tmp_path: Path, monkeypatch, broken: str = "4") -> dict:
    fake, project = tmp_path / "fake", tmp_path / "project"
    _write(fake, FAKE_TORCH)
    _write(project, {k: v.replace("BROKEN", broken) for k, v in PROJECT.items()})
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(project), str(fake), os.environ.get("PYTHONPATH", "")])
    )
    work = tmp_path / "work"
    work.mkdir()
    return run_command_probe(
        "tests", f"{sys.executable} -m pytest -q tests", 120, str(work), 0, cwd=str(project)
    )


def _finding(record: dict):
    probe = ProbeResult.from_json(record)
    result = make_result(make_cell("2.6.0", torchvision="", probes=("tests",)), probes=[probe])
    return result, code_finding(probe)


def test_each_call_site_gets_every_refused_class_and_a_fix_proven_by_a_rerun(tmp_path, monkeypatch):
    record = _run(tmp_path, monkeypatch)
    assert record["status"] == "fail" and record["evidence"]["tests"] == {"failed": 4}
    proofs = record["evidence"]["fix_proofs"]
    sites = {group["site"]: group for group in proofs["load_fixes"]}
    assert sorted(sites) == ["ckptlib/data.py:9", "ckptlib/io.py:10"]
    io = sites["ckptlib/io.py:10"]
    # The first failure named only RunConfig; the rerun with it allowed named Stats.
    assert io["globals"] == ["ckptlib.config.RunConfig"]
    assert io["allowed"] == ["ckptlib.config.RunConfig", "ckptlib.config.Stats"]
    assert (io["rounds"], io["failed"]) == (2, [])
    data = sites["ckptlib/data.py:9"]
    assert (data["allowed"], data["failed"]) == (["ckptlib.data.TensorBag"], [])
    assert proofs["old_default"]["failed"] == [] and len(proofs["old_default"]["passed"]) == 4
    result, finding = _finding(record)
    fix = finding.fix
    assert "at ckptlib/io.py:10 (2 tests)" in fix and "at ckptlib/data.py:9 (2 tests)" in fix
    assert "add_safe_globals([ckptlib.config.RunConfig, ckptlib.config.Stats])" in fix
    assert "add_safe_globals([ckptlib.data.TensorBag])" in fix
    assert fix.count("(proven: with it, the 2 failing tests pass on a rerun") == 2
    assert "1 more class found by rerunning" in fix
    assert "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`" in fix and "NOT proven" not in fix
    (attribution,) = verdict_of(result).fixes.values()
    assert fix in attribution.advice
    # Without the reruns (a result written before they existed) the fix says it is not proven.
    del record["evidence"]["fix_proofs"]
    _result, unproven = _finding(record)
    assert unproven.fix.count("not proven: no rerun with it applied") == 2
    assert "add_safe_globals([ckptlib.config.RunConfig])" in unproven.fix


def test_a_fix_that_does_not_repair_a_test_says_it_is_not_proven(tmp_path, monkeypatch):
    record = _run(tmp_path, monkeypatch, broken="5")  # test_bag_values fails once loaded, too
    sites = {g["site"]: g for g in record["evidence"]["fix_proofs"]["load_fixes"]}
    assert sites["ckptlib/data.py:9"]["failed"] == ["tests/test_data.py::test_bag_values"]
    _result, finding = _finding(record)
    assert "(NOT proven: with it, 1 of 2 tests still fail on a rerun: " in finding.fix
    assert "NOT proven: 1 of 4 tests still fail with it" in finding.fix
