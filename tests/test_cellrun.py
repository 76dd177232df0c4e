"""One cell end to end. Most tests drive ``run_cell`` through its ``CellSteps`` seams with fake
installers and the probe runner on this interpreter; two build real uv venvs with synthetic
wheels (offline, about a second each): the whole chain once, and the runner's isolation."""

from __future__ import annotations

import io
import itertools
import json
import site
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest

from torch_matrix.world import environment
from torch_matrix.world import probe_process
from torch_matrix.run.cellrun import CellSettings, CellSteps, headline, run_cell
from torch_matrix.edges.console import Progress
from torch_matrix.world.probe_process import (
    ProbeOptions,
    ProbeRun,
    expected_versions,
    probe_command,
)
from torch_matrix.vocab.records import (
    CRASH,
    ERROR,
    FAIL,
    INSTALL_ERROR,
    INSTALLED,
    PASS,
    PROBE_RUNNER,
    UNSATISFIABLE,
    InstallOutcome,
    ProbeResult,
)
from torch_matrix.world.results import read_result
from torch_matrix.spec.model import IndexConfig
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, NO_EVIDENCE, verdict_of
from tests.factories import make_cell
from tests.synthetic_wheels import build_index


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return build_index(tmp_path_factory.mktemp("index"))


@pytest.fixture
def uv_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("UV_INDEX", raising=False)
    monkeypatch.delenv("UV_DEFAULT_INDEX", raising=False)
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)


def make_venv(tmp_path: Path) -> str:
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    return str(venv / "bin" / "python")


def settings_for(tmp_path: Path, index=None, **fields) -> CellSettings:
    config = IndexConfig(default=index.url if index else "", find_links=())
    return CellSettings(
        cells_dir=tmp_path / "cells",
        work_dir=tmp_path / "work",
        index_config=config,
        fingerprint="f1",
        retry_backoff_s=0.0,
        **fields,
    )


def fake_probes(tmp_path: Path, body: str) -> Path:
    """A stand-in ``probes`` package whose ``__main__`` is ``body`` (the runner's contract)."""
    package = tmp_path / "fake" / "probes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(textwrap.dedent(body))
    return package


def installed_as_asked(cell, index_config, venv_python, **kwargs) -> InstallOutcome:
    """An installer that 'installed' exactly the cell's pins (no uv, no venv)."""
    return InstallOutcome(
        INSTALLED, ("uv", "pip", "install", *cell.requirements), "Resolved 2 packages in 12ms"
    )


def verified(cell, venv_python, outcome, **kwargs) -> InstallOutcome:
    return outcome


def uv_says(returncode: int, output: str):
    """``environment.install`` driven by a fake uv that answers ``output``; calls are counted."""
    calls = []

    def runner(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, returncode, stdout=output)

    return partial(environment.install, runner=runner, sleep=lambda s: None), calls


# The cell's "venv python" for runner tests: this interpreter (the staged fake probes come
# first on PYTHONPATH, so the real package installed here is never what runs).
HERE = sys.executable
NO_GPU = {"interpreter": lambda python, env: {"path": python}, "gpu": dict}


# ---------------------------------------------------------------- pure parts


def test_expected_versions_are_the_exact_pins():
    cell = make_cell(torch="2.1.0", torchvision="0.16.0", extras={"numpy": "<2"})
    assert expected_versions(cell) == {"torch": "2.1.0", "torchvision": "0.16.0"}


def test_probe_command_follows_the_runner_interface(tmp_path):
    cell = make_cell(
        torch="2.1.0",
        torchvision="0.16.0",
        variant="cpu",
        probes=("install_sanity", "training_step"),
    )
    options = ProbeOptions(dirs=("/repo/my_probes",), commands={"smoke": "python -c pass"})
    command = probe_command(cell, "/v/bin/python", tmp_path / "out.json", options)
    assert command[:3] == ["/v/bin/python", "-m", "torch_matrix.probes"]
    pairs = list(itertools.pairwise(command))
    for pair in [
        ("--out", str(tmp_path / "out.json")),
        ("--variant", "cpu"),
        ("--select", "install_sanity,training_step"),
        ("--expect", "torch=2.1.0"),
        ("--expect", "torchvision=0.16.0"),
        ("--probe-dir", "/repo/my_probes"),
        ("--command", "smoke=python -c pass"),
    ]:
        assert pair in pairs


def test_headline_prefers_uvs_reason():
    message = (
        "error: No solution found when resolving dependencies\n  cause: Because x was not found"
    )
    assert headline(message) == "Because x was not found"
    assert headline("plain") == "plain"


def test_progress_lines_name_cell_phase_elapsed_and_count():
    ticks = iter([10.0, 34.1])
    stream = io.StringIO()
    progress = Progress("t2.5.1-cu124-py3.11", 3, 12, stream=stream, clock=lambda: next(ticks))
    with progress.phase("install") as note:
        note.outcome = "installed"
    assert stream.getvalue().splitlines() == [
        "[3/12] t2.5.1-cu124-py3.11 install ...",
        "[3/12] t2.5.1-cu124-py3.11 install ... 24.1s installed",
    ]
    assert progress.timings == {"install": pytest.approx(24.1)}


# ---------------------------------------------------------------- fakes through the seams


def test_planned_unsatisfiable_is_recorded_without_installing(tmp_path):
    cell = make_cell(plan_note="no torch 2.3.0 wheel for Python 3.11 on the index")

    def no_step(*args, **kwargs):
        raise AssertionError("a planned-unsatisfiable cell must run nothing")

    steps = CellSteps(
        install=no_step, verify=no_step, probes=no_step, interpreter=no_step, gpu=no_step
    )
    result = run_cell(cell, "/nonexistent/python", settings_for(tmp_path), steps)
    assert result.install.status == UNSATISFIABLE
    assert result.install.message == cell.plan_note
    stored = read_result(tmp_path / "cells" / f"{cell.id}.json")
    assert stored is not None and stored.install.status == UNSATISFIABLE


def test_a_failing_required_probe_makes_the_cell_incompatible_and_is_written(tmp_path):
    failing = ProbeResult(
        "install_sanity",
        FAIL,
        "import torchvision failed: RuntimeError: operator torchvision::nms does not exist",
    )

    def probes(cell, venv_python, work_dir, options, env, echo=None):
        return ProbeRun(
            (failing,),
            {
                "python": {"version": "3.11.9", "executable": "/x"},
                "platform": {"system": "Linux"},
                "gpu": {"driver": "550"},
            },
        )

    cell = make_cell(torch="2.2.0", torchvision="0.17.0", probes=("install_sanity",))
    steps = CellSteps(install=installed_as_asked, verify=verified, probes=probes, **NO_GPU)
    result = run_cell(cell, "/v/bin/python", settings_for(tmp_path), steps)
    verdict = verdict_of(result)
    assert verdict.kind == INCOMPATIBLE and verdict.failing == ("install_sanity",)
    assert "operator torchvision::nms does not exist" in result.probe("install_sanity").message
    assert result.interpreter == {
        "path": "/v/bin/python",
        "version": "3.11.9",
    }  # runner's facts win
    assert result.platform == {"system": "Linux"} and result.gpu == {"driver": "550"}
    assert {"resolve+install", "resolve", "verify", "probes", "total"} <= set(result.timings)
    assert read_result(tmp_path / "cells" / f"{cell.id}.json") == result
    # judged once: the record run_cell returns (the session's line) is the one it stored
    assert result.verdict["kind"] == INCOMPATIBLE
    assert read_result(tmp_path / "cells" / f"{cell.id}.json").verdict == result.verdict


def test_resolver_refusal_keeps_the_message_and_runs_no_probes(tmp_path):
    refusal = (
        "  x No solution found when resolving dependencies:\n  `-> Because triton was not found "
        "in the package registry and torch==2.4.0 depends on triton==3.0.0, we can conclude "
        "that torch==2.4.0 cannot be used.\n"
    )
    install, calls = uv_says(1, refusal)
    cell = make_cell(torch="2.4.0", torchvision="0.19.0")
    steps = CellSteps(install=install, probes=lambda *a, **k: pytest.fail("probes ran"), **NO_GPU)
    result = run_cell(cell, "/v/bin/python", settings_for(tmp_path), steps)
    assert result.install.status == UNSATISFIABLE
    assert "triton was not found in the package registry" in result.install.message
    assert result.install.attempts == 1 == len(calls) and not result.probes


def test_unreachable_index_is_error_after_retries(tmp_path):
    install, calls = uv_says(
        2,
        "error: Request failed after 3 retries\n  Caused by: tcp connect error: "
        "Connection refused (os error 111) for http://127.0.0.1:9/simple",
    )
    cell = make_cell(torch="2.1.0", torchvision="")
    settings = settings_for(tmp_path, install_retries=1)
    result = run_cell(cell, "/v/bin/python", settings, CellSteps(install=install, **NO_GPU))
    assert result.install.status == INSTALL_ERROR
    assert result.install.attempts == 2 == len(calls)
    assert "127.0.0.1:9" in result.install.message
    assert verdict_of(result).kind == NO_EVIDENCE


def test_verify_catches_a_venv_that_does_not_hold_the_cell(tmp_path):
    """The install 'succeeds' (as with nox -R after a failed install) but the venv is empty."""

    def empty_freeze(command, **kwargs):
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")

    steps = CellSteps(
        install=installed_as_asked,
        verify=partial(environment.verify, runner=empty_freeze),
        probes=lambda *a, **k: pytest.fail("probes ran"),
        **NO_GPU,
    )
    cell = make_cell(torch="2.1.0", torchvision="0.16.0")
    result = run_cell(cell, "/v/bin/python", settings_for(tmp_path), steps)
    assert result.install.status == INSTALL_ERROR
    assert "not installed" in result.install.message
    assert (
        json.loads((tmp_path / "cells" / f"{cell.id}.json").read_text())["install"]["status"]
        == "error"
    )


def run_with_runner(tmp_path, monkeypatch, body: str, cell=None, **fields):
    """``run_cell`` with a fake install and the real probe runner step, on this interpreter."""
    package = fake_probes(tmp_path, body)
    monkeypatch.setattr(probe_process, "probes_source", lambda: package)
    cell = cell or make_cell(torch="2.1.0", torchvision="", probes=())
    steps = CellSteps(install=installed_as_asked, verify=verified, **NO_GPU)
    return run_cell(cell, HERE, settings_for(tmp_path, **fields), steps)


def test_a_dying_probe_runner_is_an_error_not_a_finding(tmp_path, monkeypatch):
    result = run_with_runner(
        tmp_path,
        monkeypatch,
        """
        import sys
        print("segfault-ish", file=sys.stderr)
        sys.exit(3)
    """,
    )
    runner = result.probe(PROBE_RUNNER)
    assert runner is not None and runner.status == ERROR
    assert "exited with 3 without writing probes.json" in runner.message
    assert "segfault-ish" in runner.output_tail
    assert verdict_of(result).kind == NO_EVIDENCE


def test_a_probe_runner_past_its_limit_is_stopped_and_recorded(tmp_path, monkeypatch):
    result = run_with_runner(
        tmp_path,
        monkeypatch,
        """
        import subprocess, sys, time
        print("started", flush=True)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a forked helper
        time.sleep(60)
    """,
        cell=make_cell(torch="2.1.0", torchvision="", probes=("slow",)),
        probe_timeout_s=1.0,
        probe_grace_s=0.0,
    )
    runner = result.probe(PROBE_RUNNER)
    assert runner is not None and "ran past" in runner.message
    assert "started" in runner.output_tail
    assert verdict_of(result).kind == NO_EVIDENCE


def test_probe_output_is_echoed_live_as_progress_lines(tmp_path, monkeypatch, capsys):
    run_with_runner(
        tmp_path,
        monkeypatch,
        """
        import sys
        print("probe install_sanity ... pass", file=sys.stderr)
        sys.exit(1)
    """,
        position=2,
        total=5,
    )
    assert "[2/5] t2.1.0-py3.11   | probe install_sanity ... pass" in capsys.readouterr().err


# ---------------------------------------------------------------- real venvs


def test_good_cell_is_compatible_with_the_real_probe_and_command_probes_use_its_python(
    tmp_path, index, uv_cache
):
    """The whole chain, nothing faked: uv installs, verify reads the venv, the real probe and a
    downstream command probe (`python -c ...`, `pytest ...`) that must see the cell's venv first."""
    cell = make_cell(torch="2.1.0", torchvision="0.16.0", probes=("install_sanity",))
    check = "python -c \"import torch; assert torch.__version__ == '2.1.0'\""
    settings = settings_for(tmp_path, index, probe_commands={"own_python": check})
    result = run_cell(cell, make_venv(tmp_path), settings)
    assert result.install.status == INSTALLED, result.install.message
    assert dict(result.install.resolved) == {"torch": "2.1.0", "torchvision": "0.16.0"}
    assert "--default-index" in result.install.command
    assert verdict_of(result).kind == COMPATIBLE
    assert {"resolve+install", "resolve", "verify", "probes", "total"} <= set(result.timings)
    assert result.interpreter["version"].startswith("3.")
    assert result.started_at and result.finished_at and result.tool_version
    assert read_result(tmp_path / "cells" / f"{cell.id}.json") == result
    probe = result.probe("own_python")
    assert probe is not None and probe.status == "pass", probe


def test_probe_runner_sees_only_the_staged_probes_and_the_venv(
    tmp_path, index, uv_cache, monkeypatch
):
    """The runner's sys.path: the staged copy and the venv, never our site-packages or repo."""
    package = fake_probes(
        tmp_path,
        """
        import json, sys
        out = sys.argv[sys.argv.index("--out") + 1]
        import torch
        data = {"probes_schema": 1, "python": {"version": "3.x", "implementation": "cpython"},
                "platform": {"system": "Plan9"}, "gpu": {"cuda_available": False},
                "packages": {"torch": torch.__version__},
                "results": [{"name": "paths", "status": "pass", "message": "",
                             "duration_s": 0.1, "isolation": "shared",
                             "evidence": {"path": sys.path, "probes": __file__}}]}
        json.dump(data, open(out, "w"))
    """,
    )
    monkeypatch.setattr(probe_process, "probes_source", lambda: package)
    cell = make_cell(torch="2.1.0", torchvision="", probes=())
    result = run_cell(cell, make_venv(tmp_path), settings_for(tmp_path, index))
    probe = result.probe("paths")
    assert probe is not None and probe.status == "pass"
    assert probe.evidence["probes"].startswith(str(tmp_path / "work" / "stage"))
    repo_root = str(Path(__file__).resolve().parent.parent)
    ours = [p for p in probe.evidence["path"] if p and (p.startswith(repo_root) or p == ".")]
    assert ours == []
    our_site = set(site.getsitepackages())  # where torch-matrix itself is installed
    assert not our_site & set(probe.evidence["path"])
    assert result.platform == {"system": "Plan9"}
    assert verdict_of(result).kind == COMPATIBLE


def test_a_long_phase_is_not_silence_in_logs_nor_on_a_terminal():
    import time as _time

    stream = io.StringIO()
    progress = Progress("t1-py3.11", 1, 2, stream=stream, heartbeat_s=0.05, live=False)
    with progress.phase("resolve+install"):
        _time.sleep(0.3)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/2] t1-py3.11 resolve+install ..."
    beats = [line for line in lines if line.endswith("s so far")]
    assert len(beats) >= 2 and beats[0].startswith("[1/2] t1-py3.11 resolve+install ... ")
    assert lines[-1].startswith("[1/2] t1-py3.11 resolve+install ... 0.")

    import torch_matrix.edges.console as progress_module

    live_stream = io.StringIO()
    live = Progress("t1-py3.11", stream=live_stream, live=True)
    old = progress_module.LIVE_S
    progress_module.LIVE_S = 0.05
    try:
        with live.phase("probes"):
            _time.sleep(0.3)
    finally:
        progress_module.LIVE_S = old
    text = live_stream.getvalue()
    assert "\rt1-py3.11 probes ... 0s" in text  # rewritten in place
    assert "\r" + " " * len("\rt1-py3.11 probes ... 0s") + "\r" in text  # the live line is cleared
    assert text.splitlines()[-1].startswith("t1-py3.11 probes ... 0.")
    assert "so far" not in text


def test_a_failing_probe_records_k_of_n_runs_and_says_so():
    from torch_matrix.run.cellrun import merge_reruns
    from tests.factories import make_probe

    crash = make_probe("training_step", "crash", "interpreter died with SIGSEGV")
    merged = merge_reruns(
        crash,
        [
            make_probe("training_step", "crash", "again"),
            make_probe("training_step"),
            make_probe("training_step", "crash"),
            None,
        ],
    )
    assert merged.status == "crash"
    assert merged.message == "crashes in 4 of 5 runs (flaky): interpreter died with SIGSEGV"
    assert (merged.evidence["runs"], merged.evidence["failed_runs"]) == (5, 4)
    steady = merge_reruns(
        make_probe("numpy_interop", "fail", "Numpy is not available"),
        [make_probe("numpy_interop", "fail")] * 2,
    )
    assert steady.message == "fails in 3 of 3 runs: Numpy is not available"


def test_probe_reruns_default_to_two_and_can_be_switched_off():
    from torch_matrix.run.sessions import probe_reruns

    assert probe_reruns({}) == 2
    assert probe_reruns({"TORCH_MATRIX_PROBE_RERUNS": "0"}) == 0
    assert probe_reruns({"TORCH_MATRIX_PROBE_RERUNS": "4"}) == 4


def _scripted_probes(scripts: dict[str, list[tuple[str, str]]], calls: list[tuple[str, ...]]):
    """A probe step that answers each probe's next (status, message) from ``scripts`` and records
    which probes each run asked for."""

    def probes(cell, venv_python, work_dir, options, env, echo=None):
        calls.append(tuple(cell.probes))
        found = []
        for name in cell.probes:
            attempt = sum(1 for called in calls if name in called) - 1
            status, message = scripts[name][min(attempt, len(scripts[name]) - 1)]
            found.append(ProbeResult(name, status, message))
        return ProbeRun(tuple(found), {})

    return probes


def test_only_failures_a_rerun_can_change_are_rerun(tmp_path, monkeypatch):
    """Crash and timeout: rerun each time. A failure repeating its message on the first rerun: no
    second rerun. A message that changes: rerun again. Explained failures (changed default, missing
    module, mismatched build): never rerun, their message unchanged."""
    scripts = {
        "install_sanity": [(PASS, "")],
        "training_step": [(FAIL, "loss is NaN at 0x7f00aa11")] * 3,  # steady (addresses differ)
        "determinism": [
            (FAIL, "differs by 1e-3"),
            (FAIL, "differs by 2e-3"),
            (FAIL, "differs by 1e-3"),
        ],
        "distributed_gloo": [(CRASH, "SIGSEGV"), (PASS, ""), (CRASH, "SIGSEGV")],
        "checkpoint_roundtrip": [
            (FAIL, "changed default: torch.load(weights_only=True) refuses it")
        ],
        "torch_compile": [(FAIL, "ModuleNotFoundError: No module named 'setuptools'")],
        "torchvision_ops": [(FAIL, "RuntimeError: operator torchvision::nms does not exist")],
        # the release under test lacks the module: the same in every run (torch 2.0 removed torch._six)
        "six_import": [(FAIL, "ModuleNotFoundError: No module named 'torch._six'")],
        "optim_import": [
            (
                FAIL,
                "ImportError: cannot import name 'SGDW' from 'torch.optim' (/v/torch/optim/__init__.py)",
            )
        ],
    }
    scripts["training_step"][1] = (FAIL, "loss is NaN at 0x7f00bb22")
    calls: list[tuple[str, ...]] = []
    cell = make_cell(torch="2.13.0", torchvision="0.28.0", probes=tuple(scripts))

    def install(cell, index_config, venv_python, **kwargs):
        return InstallOutcome(
            INSTALLED, ("uv",), "", resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"}
        )

    steps = CellSteps(
        install=install, verify=verified, probes=_scripted_probes(scripts, calls), **NO_GPU
    )
    result = run_cell(cell, "/v/bin/python", settings_for(tmp_path), steps)
    assert calls[1:] == [
        ("training_step", "determinism", "distributed_gloo"),
        ("determinism", "distributed_gloo"),
    ]
    messages = {p.name: p.message for p in result.probes}
    assert messages["training_step"] == "fails in 2 of 2 runs: loss is NaN at 0x7f00aa11"
    assert messages["determinism"] == "fails in 3 of 3 runs: differs by 1e-3"
    assert messages["distributed_gloo"] == "crashes in 2 of 3 runs (flaky): SIGSEGV"
    for name in (
        "checkpoint_roundtrip",
        "torch_compile",
        "torchvision_ops",
        "six_import",
        "optim_import",
    ):
        # explained: run once
        assert messages[name] == scripts[name][0][1] and "runs" not in result.probe(name).evidence

    # The old rule, for the benchmark's side-by-side figure (benchmarks/old_rule_noxfile.py; the
    # product has no switch for it): every failing probe, twice more.
    from benchmarks import old_rerun_rule
    from torch_matrix.run import cellrun

    monkeypatch.setattr(cellrun, "explained_failures", old_rerun_rule.nothing_explained)
    monkeypatch.setattr(cellrun, "_same_failure", old_rerun_rule.never_the_same)
    calls.clear()
    old = run_cell(
        cell,
        "/v/bin/python",
        settings_for(tmp_path),
        CellSteps(
            install=install, verify=verified, probes=_scripted_probes(scripts, calls), **NO_GPU
        ),
    )
    assert (
        len(calls) == 3
        and set(calls[1]) == set(scripts) - {"install_sanity"}
        and calls[2] == calls[1]
    )
    assert old.probe("torch_compile").message.startswith("fails in 3 of 3 runs: ")


def test_a_module_named_only_in_a_failures_output_does_not_explain_it():
    """An import the release cannot satisfy is explained by the probe's message; a numeric failure
    whose output mentions a torch module in passing (a warning) may be flaky: it is rerun."""
    from torch_matrix.run.cellrun import explained_failures

    cell = make_cell(torch="2.13.0", probes=("six_import", "determinism"))
    installed = InstallOutcome(INSTALLED, ("uv",), "", resolved={"torch": "2.13.0"})
    six = ProbeResult("six_import", FAIL, "ModuleNotFoundError: No module named 'torch._six'")
    numeric = ProbeResult(
        "determinism",
        FAIL,
        "differs by 1e-3",
        output_tail="UserWarning: module 'torch.backends.cudnn' has no attribute 'x'",
    )
    assert explained_failures(cell, installed, [six, numeric]) == {"six_import"}


def test_a_counterfactual_runs_only_the_probes_its_finding_concerns_and_keeps_the_rest(tmp_path):
    """The setuptools counterfactual of a full-suite cell runs install_sanity and torch_compile
    only; every other result is the original cell's, marked as inherited, and the file loads."""
    from torch_matrix.plan.counterfactual import plan_counterfactuals
    from tests.factories import make_probe, make_result

    suite = ("install_sanity", "training_step", "torch_compile", "torchvision_ops", "determinism")
    cell = make_cell(torch="2.3.1", torchvision="", probes=suite)
    original = make_result(
        cell,
        resolved={"torch": "2.3.1"},
        probes=[
            make_probe("install_sanity"),
            make_probe("training_step", evidence={"loss": 0.5}),
            make_probe("torch_compile", FAIL, "ModuleNotFoundError: No module named 'setuptools'"),
            make_probe("torchvision_ops", "skip", "no torchvision"),
            make_probe("determinism"),
        ],
    )
    (cf,) = plan_counterfactuals(original)
    assert cf.probe_subset == ("install_sanity", "torch_compile") and cf.probes == suite
    calls: list[tuple[str, ...]] = []
    probes = _scripted_probes(
        {"install_sanity": [(PASS, "")], "torch_compile": [(PASS, "")]}, calls
    )
    steps = CellSteps(install=installed_as_asked, verify=verified, probes=probes, **NO_GPU)
    result = run_cell(cf, "/v/bin/python", settings_for(tmp_path), steps, base=original)
    assert calls == [("install_sanity", "torch_compile")]  # one run, the subset alone
    assert [p.name for p in result.probes] == list(suite)
    assert (
        result.probe("torch_compile").status == PASS
        and "inherited_from" not in result.probe("torch_compile").evidence
    )
    kept = result.probe("training_step")
    assert kept.evidence == {"loss": 0.5, "inherited_from": cell.id} and kept.status == PASS
    assert verdict_of(result).kind == COMPATIBLE
    assert read_result(tmp_path / "cells" / f"{cf.id}.json") == result  # schema-valid, round-trips
    # Without the original's result there is nothing to keep: the whole suite runs.
    calls.clear()
    whole = _scripted_probes({name: [(PASS, "")] for name in suite}, calls)
    run_cell(
        cf,
        "/v/bin/python",
        settings_for(tmp_path),
        CellSteps(install=installed_as_asked, verify=verified, probes=whole, **NO_GPU),
    )
    assert calls == [suite]


def test_an_edge_cell_runs_only_the_probes_that_decide_its_break_and_claims_no_other(tmp_path):
    """An edge follow-up asks one question: do the probes that fail in its break fail at this
    release? It runs those (with install_sanity) and nothing else; the unrun probes are absent from
    its result, never passes, and its verdict is the subset's."""
    import dataclasses

    from torch_matrix.plan.edgecells import asking_only
    from torch_matrix.vocab.records import ORIGIN_EDGE

    suite = ("install_sanity", "training_step", "torch_compile", "determinism")
    grid = make_cell(torch="2.3.1", torchvision="", probes=suite, required_probes=suite)
    edge = asking_only(
        dataclasses.replace(grid, id="t2.2.0-py3.11-edge", origin=ORIGIN_EDGE), ("torch_compile",)
    )
    assert edge.probe_subset == ("install_sanity", "torch_compile")
    assert (edge.probes, edge.required_probes) == (suite, suite)  # judged in the grid's context
    for outcome, kind in ((PASS, COMPATIBLE), (FAIL, INCOMPATIBLE)):
        calls: list[tuple[str, ...]] = []
        probes = _scripted_probes(
            {"install_sanity": [(PASS, "")], "torch_compile": [(outcome, "it broke")] * 2}, calls
        )
        steps = CellSteps(install=installed_as_asked, verify=verified, probes=probes, **NO_GPU)
        where = tmp_path / outcome
        result = run_cell(edge, "/v/bin/python", settings_for(where), steps)
        assert calls[0] == ("install_sanity", "torch_compile")
        assert {p.name for p in result.probes} == {"install_sanity", "torch_compile"}
        assert result.probe("training_step") is None and result.probe("determinism") is None
        assert verdict_of(result).kind == kind and not verdict_of(result).missing
        assert read_result(where / "cells" / f"{edge.id}.json") == result
