"""The probe runner (`python -m torch_matrix.probes`): isolation, statuses, options, output file.

Every test runs the real runner in a subprocess, with throwaway probe files
(`--probe-dir`) and a tiny fake torch (or none), so the whole file takes seconds.
"""

import json
import os
import subprocess
import sys

import pytest

from torch_matrix.vocab.records import PROBE_STATUSES, ProbeResult
from synthetic_torch import make_fake_torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ISOLATION_PROBES = """
import os, sys, time
from torch_matrix.probes.api import Fail, Skip, Unsupported, probe

@probe("passes", doc="returns evidence")
def passes(ctx):
    return {"answer": 42}

@probe("fails", doc="raises Fail")
def fails(ctx):
    ctx.note("seen", "before failing")
    raise Fail("value differs", observed=1, expected=2, repro="print(1)")

@probe("unsupported_api", doc="raises Unsupported")
def unsupported_api(ctx):
    raise Unsupported("no such API in this version")

@probe("skips", doc="raises Skip")
def skips(ctx):
    raise Skip("no CUDA device")

def helper():
    raise KeyError("missing")

@probe("errors", doc="raises a plain exception")
def errors(ctx):
    helper()

@probe("segfaults", doc="dies from SIGSEGV")
def segfaults(ctx):
    import ctypes
    ctx.note("repro", "import ctypes; ctypes.string_at(0)")
    print("about to read address 0", flush=True)
    ctypes.string_at(0)

@probe("exits", doc="os._exit without a result")
def exits(ctx):
    print("leaving early", flush=True)
    os._exit(3)

@probe("hangs", doc="sleeps past its limit", timeout=1)
def hangs(ctx):
    print("going to sleep", flush=True)
    time.sleep(60)

@probe("poisons", doc="pollutes global state")
def poisons(ctx):
    import json
    json.dumps = None
    os.environ["PROBE_POISON"] = "1"
    sys.modules["torch_matrix.probes.api"].POISONED = True
    os.chdir("/")

@probe("checks_clean", doc="sees none of the poison")
def checks_clean(ctx):
    import json
    poisoned = {"json.dumps": json.dumps is None, "environ": "PROBE_POISON" in os.environ,
                "api": hasattr(sys.modules["torch_matrix.probes.api"], "POISONED"), "cwd": os.getcwd() == "/"}
    if any(poisoned.values()):
        raise Fail("saw poisoned state", observed=poisoned, expected={})
    return {"cwd": os.getcwd()}
"""


def run_probes(tmp_path, *args, pythonpath=(), expect_rc=0):
    """Run `python -m torch_matrix.probes --out FILE ARGS`; return (output dict, stderr)."""
    out = tmp_path / "out" / "probes.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in pythonpath] + [REPO])
    proc = subprocess.run(
        [sys.executable, "-m", "torch_matrix.probes", "--out", str(out)] + list(args),
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    assert proc.returncode == expect_rc, proc.stderr.decode()
    data = json.loads(out.read_text()) if expect_rc == 0 else None
    return data, proc.stderr.decode()


def by_name(data):
    return {r["name"]: r for r in data["results"]}


@pytest.fixture(scope="module")
def isolation_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("isolation")
    probe_dir = tmp_path / "my_probes"
    probe_dir.mkdir()
    (probe_dir / "isolation_probes.py").write_text(ISOLATION_PROBES)
    (probe_dir / "broken_module.py").write_text("import this_module_does_not_exist\n")
    data, stderr = run_probes(
        tmp_path, "--no-standard", "--probe-dir", str(probe_dir), "--json-progress"
    )
    return data, stderr, tmp_path


def test_outcomes_map_to_statuses(isolation_run):
    results = by_name(isolation_run[0])
    assert results["passes"]["status"] == "pass"
    assert results["passes"]["evidence"] == {"answer": 42}
    failed = results["fails"]
    assert (failed["status"], failed["observed"], failed["expected"], failed["repro"]) == (
        "fail",
        1,
        2,
        "print(1)",
    )
    assert failed["evidence"]["seen"] == "before failing"
    assert results["unsupported_api"]["status"] == "unsupported"
    assert results["skips"]["status"] == "skip" and results["skips"]["message"] == "no CUDA device"
    errored = results["errors"]
    assert errored["status"] == "error" and errored["message"].startswith("KeyError")
    assert "in helper" in errored["traceback"] and "--select errors" in errored["repro"]


def test_segfault_is_a_crash_with_signal_and_last_output(isolation_run):
    crashed = by_name(isolation_run[0])["segfaults"]
    assert crashed["status"] == "crash"
    assert "SIGSEGV" in crashed["message"] and crashed["evidence"]["signal"] == "SIGSEGV"
    assert "about to read address 0" in crashed["output_tail"]
    assert "Fatal Python error" in crashed["output_tail"]  # faulthandler's stack of the crash
    assert (
        crashed["repro"] == "import ctypes; ctypes.string_at(0)"
    )  # noted before the crash, kept after it


def test_exit_without_result_is_a_crash(isolation_run):
    exited = by_name(isolation_run[0])["exits"]
    assert exited["status"] == "crash" and exited["evidence"]["exit_code"] == 3
    assert "leaving early" in exited["output_tail"]


def test_hang_times_out_and_later_probes_still_run(isolation_run):
    data = isolation_run[0]
    names = [r["name"] for r in data["results"]]
    hung = by_name(data)["hangs"]
    assert hung["status"] == "timeout" and "1s" in hung["message"]
    assert "going to sleep" in hung["output_tail"]
    assert names.index("checks_clean") > names.index("hangs")
    assert by_name(data)["checks_clean"]["status"] == "pass"


def test_poisoned_state_does_not_leak(isolation_run):
    results = by_name(isolation_run[0])
    assert results["poisons"]["status"] == "pass"
    clean = results["checks_clean"]
    assert clean["status"] == "pass", clean
    assert clean["evidence"]["cwd"] != "/"


def test_module_that_fails_to_import_is_an_error_result(isolation_run):
    broken = by_name(isolation_run[0])["broken_module"]
    assert broken["status"] == "error" and "this_module_does_not_exist" in broken["message"]


def test_output_file_schema(isolation_run):
    data, stderr, tmp_path = isolation_run
    for key in ("probes_schema", "python", "platform", "packages", "gpu", "results", "wall_s"):
        assert key in data
    assert data["python"]["executable"] and data["platform"]["system"]
    assert set(data["packages"]) >= {"torch", "torchvision", "numpy"}
    assert data["gpu"]["cuda_available"] is False
    for result in data["results"]:
        assert result["status"] in PROBE_STATUSES
        assert ProbeResult.from_json(result).to_json() == result  # lossless for the cell result
    assert os.listdir(str(tmp_path / "out")) == ["probes.json"]  # atomic: no temp file left behind


def test_json_progress_has_one_line_per_probe(isolation_run):
    data, stderr, _ = isolation_run
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    probe_events = [e for e in events if e["event"] == "probe"]
    assert [e["name"] for e in probe_events] == [r["name"] for r in data["results"]]
    assert all("status" in e and "seconds" in e for e in probe_events)


def test_select_runs_only_the_named_probes(tmp_path):
    probe_dir = tmp_path / "p"
    probe_dir.mkdir()
    (probe_dir / "isolation_probes.py").write_text(ISOLATION_PROBES)
    data, stderr = run_probes(
        tmp_path, "--no-standard", "--probe-dir", str(probe_dir), "--select", "passes,skips"
    )
    assert [r["name"] for r in data["results"]] == ["passes", "skips"]
    assert "[2/2]" in stderr


def test_select_unknown_probe_is_a_usage_error(tmp_path):
    _, stderr = run_probes(tmp_path, "--select", "no_such_probe", expect_rc=2)
    assert "no_such_probe" in stderr and "Traceback" not in stderr


def test_command_probes(tmp_path):
    data, _ = run_probes(
        tmp_path,
        "--no-standard",
        "--timeout",
        "1",
        "--command",
        "ok=%s -c \"print('fine')\"" % sys.executable,
        "--command",
        "bad=%s -c \"print('assert 1 == 2 failed'); raise SystemExit(3)\"" % sys.executable,
        "--command",
        "slow=%s -c \"import time; print('waiting', flush=True); time.sleep(60)\"" % sys.executable,
    )
    results = by_name(data)
    assert results["ok"]["status"] == "pass" and results["ok"]["isolation"] == "command"
    bad = results["bad"]
    assert (
        bad["status"] == "fail"
        and bad["observed"] == 3
        and "assert 1 == 2 failed" in bad["output_tail"]
    )
    assert bad["repro"].endswith('raise SystemExit(3)"')
    assert results["slow"]["status"] == "timeout" and "waiting" in results["slow"]["output_tail"]


def test_list_names_every_standard_probe_with_its_doc(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "torch_matrix.probes", "--list"],
        env=env,
        stdout=subprocess.PIPE,
        timeout=60,
    )
    lines = proc.stdout.decode().splitlines()
    names = [line.split()[0] for line in lines]
    assert names[:2] == ["install_sanity", "lazy_cuda_init"]
    assert all(len(line.split(None, 2)) == 3 for line in lines)  # name, isolation, doc


def test_standard_probe_modules_do_not_import_torch(tmp_path):
    fake = make_fake_torch(
        tmp_path / "site"
    )  # importable, so a module-level `import torch` would show
    code = (
        "import sys, torch_matrix.probes.discovery as d; specs, problems = d.discover();"
        "print(len(specs), 'torch' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([fake, REPO])),
        stdout=subprocess.PIPE,
        timeout=60,
    )
    count, imported = proc.stdout.decode().split()
    assert int(count) >= 2 and imported == "False"


# -- install_sanity against fake torch builds ---------------------------------------------------


def test_install_sanity_passes_on_a_matching_fake_install(tmp_path):
    fake = make_fake_torch(tmp_path / "site", version="2.5.1+cpu", torchvision="0.20.1")
    data, _ = run_probes(
        tmp_path,
        "--select",
        "install_sanity",
        "--expect",
        "torch=2.5.1",
        "--expect",
        "torchvision=0.20.1",
        "--variant",
        "cpu",
        pythonpath=[fake],
    )
    result = by_name(data)["install_sanity"]
    assert result["status"] == "pass", result
    assert result["evidence"]["nms_keep"] == [0, 2]
    assert data["packages"]["torch"] == "2.5.1+cpu" and data["imports"]["torch"]["ok"] is True


def test_install_sanity_fails_on_wrong_version_and_cuda_build(tmp_path):
    fake = make_fake_torch(tmp_path / "site", version="2.5.0+cpu", torchvision="0.20.1")
    data, _ = run_probes(
        tmp_path,
        "--select",
        "install_sanity",
        "--expect",
        "torch=2.5.1",
        "--variant",
        "cu124",
        pythonpath=[fake],
    )
    result = by_name(data)["install_sanity"]
    assert result["status"] == "fail"
    assert result["observed"]["torch"] == "2.5.0+cpu" and result["expected"]["torch"] == "2.5.1"
    assert result["expected"]["cuda_build"] == "12.4" and result["observed"]["cuda_build"] is None
    assert "torchvision.ops.nms" in result["repro"]


def test_mismatched_torchvision_fails_install_sanity_with_the_real_message(tmp_path):
    fake = make_fake_torch(
        tmp_path / "site",
        torchvision="0.28.0",
        torchvision_import_error="operator torchvision::nms does not exist",
    )
    data, _ = run_probes(
        tmp_path,
        "--select",
        "install_sanity,lazy_cuda_init",
        "--expect",
        "torchvision=0.28.0",
        pythonpath=[fake],
    )
    results = by_name(data)
    assert results["install_sanity"]["status"] == "fail"
    assert "operator torchvision::nms does not exist" in results["install_sanity"]["message"]
    assert (
        os.path.join("torchvision", "__init__.py") in results["install_sanity"]["traceback"]
    )  # the import's
    assert results["lazy_cuda_init"]["status"] == "pass"  # needs torch only
    assert (
        data["imports"]["torchvision"]["ok"] is False
        and "Traceback" in data["imports"]["torchvision"]["traceback"]
    )


def test_torchvision_that_kills_the_zygote_degrades_instead_of_losing_results(tmp_path):
    fake = make_fake_torch(tmp_path / "site", torchvision="0.28.0", torchvision_segfaults=True)
    data, _ = run_probes(tmp_path, "--select", "install_sanity,lazy_cuda_init", pythonpath=[fake])
    results = by_name(data)
    assert results["install_sanity"]["status"] == "fail"
    assert (
        "SIGSEGV" in results["install_sanity"]["message"]
        and "torchvision" in results["install_sanity"]["message"]
    )
    assert results["lazy_cuda_init"]["status"] == "pass"
    assert data["zygote"]["starts"] == 2 and data["imports"]["torch"]["ok"] is True


def test_no_torch_at_all(tmp_path):
    data, _ = run_probes(
        tmp_path, "--select", "install_sanity,lazy_cuda_init", "--expect", "torch=2.5.1"
    )
    results = by_name(data)
    assert (
        results["install_sanity"]["status"] == "fail"
        and "not installed" in results["install_sanity"]["message"]
    )
    assert results["lazy_cuda_init"]["status"] == "skip"
    assert data["packages"]["torch"] is None


def test_example_custom_probes_run_in_the_same_protocol(tmp_path):
    fake = make_fake_torch(
        tmp_path / "site"
    )  # no torch.fft, no channels_last: both APIs are missing
    example = os.path.join(REPO, "examples", "custom_probes", "probes_dir")
    data, _ = run_probes(tmp_path, "--no-standard", "--probe-dir", example, pythonpath=[fake])
    results = by_name(data)
    assert set(results) == {"fft_roundtrip", "channels_last_conv"}
    assert all(r["status"] == "unsupported" for r in results.values())


def _python38():
    import glob
    import shutil

    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python")))
    if pyenv:  # pyenv's shims exit 127 for a non-global version: use the real interpreter
        return pyenv[-1]
    found = shutil.which("python3.8")
    return found if found and "shims" not in found else None


@pytest.mark.skipif(_python38() is None, reason="no Python 3.8 interpreter on this machine")
def test_runner_works_on_python_3_8(tmp_path):
    """probes/ must stay Python 3.8 compatible: cells of old torch releases run it."""
    fake = make_fake_torch(tmp_path / "site", query_cuda_at_import=True, torchvision="0.20.1")
    probe_dir = tmp_path / "p"
    probe_dir.mkdir()
    (probe_dir / "isolation_probes.py").write_text(ISOLATION_PROBES)
    out = tmp_path / "o.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([fake, REPO]))
    proc = subprocess.run(
        [
            _python38(),
            "-m",
            "torch_matrix.probes",
            "--out",
            str(out),
            "--probe-dir",
            str(probe_dir),
            "--select",
            "install_sanity,lazy_cuda_init,fails,segfaults,checks_clean",
        ],
        cwd=str(tmp_path),
        env=env,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    data = json.loads(out.read_text())
    assert data["python"]["version"].startswith("3.8")
    statuses = {r["name"]: r["status"] for r in data["results"]}
    assert statuses == {
        "install_sanity": "pass",
        "lazy_cuda_init": "fail",
        "fails": "fail",
        "segfaults": "crash",
        "checks_clean": "pass",
    }


def test_zygote_is_abandoned_only_when_import_queried_cuda_on_a_gpu_machine(monkeypatch):
    from torch_matrix.probes import facts, runner

    queried = {"import_torch": {"calls": [{"function": "torch.cuda.is_available"}]}}
    monkeypatch.setattr(facts, "physical_gpu_count", lambda: 2)
    assert runner.fork_safe(queried) is False
    assert runner.fork_safe({"import_torch": {"calls": []}}) is True
    monkeypatch.setattr(
        facts, "physical_gpu_count", lambda: 0
    )  # no driver: the query initialised nothing
    assert runner.fork_safe(queried) is True


def test_the_heartbeat_names_no_test_once_the_probes_are_done(tmp_path, monkeypatch):
    """Seen on every project of the real-project corpus (docs/corpus.md): after a suite's line said
    `pass`, the runner read the GPU facts for 5 to 12 s and the heartbeat went on printing
    `running tests: <the suite's last test>`. Once the probes are done it names none."""
    from types import SimpleNamespace

    from torch_matrix.probes import runner
    from torch_matrix.vocab.settings import PROBE_NOW_ENV
    from torch_matrix.world.probe_process import running_file, running_now

    monkeypatch.setenv(PROBE_NOW_ENV, str(running_file(tmp_path)))
    seen = []
    monkeypatch.setattr(runner, "_gpu", lambda zygote, tmpdir: seen.append(running_now(tmp_path)))
    # what the suite's pytest plugin does: name the running test in <probe-now file>.test
    command = 'echo tests/test_x.py::test_last > "$%s.test" && echo ok > wrote' % PROBE_NOW_ENV
    args = SimpleNamespace(
        timeout=60, command_timeout=None, command_dir=str(tmp_path), isolation="auto", out=None
    )
    progress = SimpleNamespace(result=lambda *a: None)
    work = tmp_path / "work"
    work.mkdir()
    results, _, _ = runner._run_all(args, {}, ([], [], [("tests", command)], []), progress, work)
    assert [r["status"] for r in results] == ["pass"]
    assert (tmp_path / "wrote").exists()  # the suite named its test where the heartbeat reads
    assert seen == [""], seen
