"""The real ``nox -s matrix`` (and its report) against a local index of synthetic wheels.

Offline: the index is a directory of tiny pure-Python wheels (tests/synthetic_wheels.py).
The world: torch 2.1.0 + torchvision 0.16.0 work; torchvision 0.17.0's ops are broken;
torch 2.3.0 has only a cp38 wheel (the planner knows: unsatisfiable without installing);
torch 2.4.0 needs a dependency the index lacks (the resolver says no: unsatisfiable with
uv's message).
"""

from __future__ import annotations

import json
import shlex
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from torch_matrix.world.results import load_results, read_result
from torch_matrix.judge.verdict import COMPATIBLE, INCOMPATIBLE, NOT_INSTALLABLE, verdict_of
from tests.synthetic_wheels import build_index

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
NOXFILE = REPO / "noxfile.py"
CELLS = ("t2.1.0-py3.11", "t2.2.0-py3.11", "t2.3.0-py3.11", "t2.4.0-py3.11")
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def cell_ids() -> list[str]:
    return [cell.replace("py3.11", f"py{PY}") for cell in CELLS]


def write_spec(path: Path, index_url: str, extra: str = "") -> Path:
    path.write_text(f"""\
name = "e2e"
python = ["current"]
torch = ["2.1.0", "2.2.0", "2.3.0", "2.4.0"]
torchvision = "paired"
{extra}
[probes]
run = ["install_sanity"]

[index]
default = "{index_url}"
extra = []
find_links = []
""")
    return path


def nox_env(tmp: Path, spec: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "NOX")) and k not in ("VIRTUAL_ENV",)
    }
    env.update(
        TORCH_MATRIX_SPEC=str(spec),
        TORCH_MATRIX_RESULTS=str(tmp / "results"),
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        UV_HTTP_RETRIES="0",
    )
    env.update(extra)
    return env


def run_nox(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "nox",
        "-f",
        str(NOXFILE),
        "--envdir",
        str(tmp / "nox"),
        "--no-color",
        *args,
    ]
    return subprocess.run(
        command, cwd=tmp, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def snapshot(cells_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(cells_dir.glob("*.json"))}


def test_matrix_run_report_resume_and_redo(tmp_path):
    index = build_index(tmp_path / "index")
    spec = write_spec(tmp_path / "matrix.toml", index.url)
    env = nox_env(tmp_path, spec)
    cells_dir = tmp_path / "results" / "e2e" / "cells"

    listed = run_nox(tmp_path, env, "-l")
    assert listed.returncode == 0, listed.stderr
    for cell in cell_ids():
        assert f"matrix({cell})" in listed.stdout
    # The CI recipe: `nox -l --json` feeds a job matrix; parameters must be plain JSON.
    as_json = json.loads(run_nox(tmp_path, env, "-l", "--json").stdout)
    assert [s["call_spec"]["cell"] for s in as_json if s["name"] == "matrix"] == cell_ids()

    first = run_nox(tmp_path, env, "-s", "matrix")
    log = first.stdout + first.stderr
    # Findings (incompatible) and facts (unsatisfiable) do not fail the run.
    assert first.returncode == 0, log
    good, broken, no_wheel, no_solution = cell_ids()
    verdicts = {cell: verdict_of(read_result(cells_dir / f"{cell}.json")) for cell in cell_ids()}
    # each cell's file stores the verdict its session printed (judge.stored): read, not judged
    stored = {cell: read_result(cells_dir / f"{cell}.json").verdict for cell in cell_ids()}
    assert {cell: v.get("kind") for cell, v in stored.items()} == {
        cell: v.kind for cell, v in verdicts.items()
    }
    assert verdicts[good].kind == COMPATIBLE
    assert verdicts[broken].kind == INCOMPATIBLE
    assert "operator torchvision::nms does not exist" in verdicts[broken].reason
    assert verdicts[no_wheel].kind == NOT_INSTALLABLE
    assert "wheel for Python" in verdicts[no_wheel].reason
    assert verdicts[no_solution].kind == NOT_INSTALLABLE
    assert "triton was not found in the package registry" in verdicts[no_solution].reason

    # Progress lines and loud verdict lines in the log.
    assert f"[1/4] {good} resolve+install ..." in log
    assert f"{broken}: INCOMPATIBLE" in log
    assert f"{no_solution}: UNSATISFIABLE" in log

    # The report ran after the cells: table on the terminal, summary.md and results.json.
    assert "Running session report" in log
    assert "1 compatible, 1 incompatible, 2 unsatisfiable, 0 error" in first.stdout
    run_dir = tmp_path / "results" / "e2e"
    assert (run_dir / "summary.md").is_file()
    merged = json.loads((run_dir / "results.json").read_text())
    assert sorted(c["cell"]["id"] for c in merged["cells"]) == sorted(cell_ids())
    loaded = load_results(run_dir)
    assert loaded.problems == []
    assert {r.cell.id: verdict_of(r).kind for r in loaded.results} == {
        cell: verdicts[cell].kind for cell in cell_ids()
    }
    # ... the HTML heatmap and the pins, and the run ends saying where they are.
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert f'data-cell="{broken}" data-verdict="incompatible"' in html
    assert (run_dir / "pins" / "constraints.txt").is_file() and (
        run_dir / "pins" / "pins.json"
    ).is_file()
    # the report's stderr comes through nox's stdout: the pins line, what it leaves open or
    # untested (each on its own indented line), then where the page is
    lines = first.stdout.rstrip().splitlines()
    assert lines[-1] == f"HTML report: {run_dir / 'report.html'}"
    pins_at = max(i for i, line in enumerate(lines) if line.startswith("pins: "))
    assert f"{run_dir / 'pins' / 'constraints.txt'}" in lines[pins_at]
    assert all(line.startswith("  ") for line in lines[pins_at + 1 : -1]), lines[pins_at:]
    # no cell after torch 2.2.0 could be installed: the pins say so, never "none needed"
    assert "none needed" not in lines[pins_at]
    assert any("torch after 2.2.0 untested" in line for line in lines[pins_at + 1 : -1])

    # The report's rerun line carries the spec, so it works as printed (else: "Sessions not found"),
    # and is `torch-matrix run`, so it works without a noxfile too: run it as printed.
    rerun = next(
        line.strip()
        for line in first.stdout.splitlines()
        if f"matrix({broken})" in line and "torch-matrix run" in line
    )
    words = shlex.split(rerun)
    assert words[:4] == ["torch-matrix", "run", "--spec", str(spec)] and words[-2:] == [
        "--",
        "--redo",
    ]
    bare = {k: v for k, v in env.items() if k != "TORCH_MATRIX_SPEC"}
    rerun_run = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *words[1:]],
        cwd=tmp_path,
        env=bare,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert rerun_run.returncode == 0, rerun_run.stderr
    assert f"{broken}: INCOMPATIBLE" in rerun_run.stderr

    # Resume: every finished cell is skipped and its file left alone.
    before = snapshot(cells_dir)
    second = run_nox(tmp_path, env, "-s", "matrix")
    assert second.returncode == 0, second.stderr
    for cell in cell_ids():
        assert f"Session matrix({cell}) skipped: already complete" in second.stderr
    assert snapshot(cells_dir) == before

    # Redo: the one cell asked for runs again (new file); the others stay as they were.
    redo_env = nox_env(tmp_path, spec, TORCH_MATRIX_REDO="1")
    third = run_nox(tmp_path, redo_env, "-s", f"matrix({good})")
    assert third.returncode == 0, third.stderr
    assert f"[1/4] {good} probes ..." in third.stderr
    after = snapshot(cells_dir)
    assert after[f"{good}.json"] != before[f"{good}.json"]
    assert {k: v for k, v in after.items() if k != f"{good}.json"} == {
        k: v for k, v in before.items() if k != f"{good}.json"
    }


def test_a_changed_spec_reruns_the_cell(tmp_path):
    """Resume is per fingerprint: another index means the stored result is not this spec's."""
    index = build_index(tmp_path / "index")
    spec = write_spec(tmp_path / "matrix.toml", index.url)
    env = nox_env(tmp_path, spec)
    good = cell_ids()[0]
    assert run_nox(tmp_path, env, "-s", f"matrix({good})").returncode == 0
    # Same index, reached through a different (but equivalent) URL: a different spec.
    write_spec(spec, index.url.rstrip("/") + "/")
    again = run_nox(tmp_path, env, "-s", f"matrix({good})")
    assert again.returncode == 0, again.stderr
    assert "skipped" not in again.stderr
    assert f"{good} probes ..." in again.stderr


def test_parallel_run_with_the_report_last(tmp_path):
    """`nox -j 2 -s matrix report`: workers re-load the noxfile; notify is not allowed there."""
    index = build_index(tmp_path / "index")
    env = nox_env(tmp_path, write_spec(tmp_path / "matrix.toml", index.url))
    done = run_nox(tmp_path, env, "-j", "2", "-s", "matrix", "report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list((tmp_path / "results" / "e2e" / "cells").glob("*.json"))) == 4
    assert "1 compatible, 1 incompatible, 2 unsatisfiable, 0 error" in done.stdout + done.stderr


def test_ctrl_c_loses_no_finished_cell(tmp_path):
    """Interrupt while the second cell probes: the first cell's file stays, the second has none."""
    index = build_index(tmp_path / "index")
    # A command probe that hangs only in the torch 2.2.0 cell, so we know where we interrupt.
    hang = tmp_path / "hang.py"
    hang.write_text("import time, torch\ntime.sleep(120 if torch.__version__ == '2.2.0' else 0)\n")
    spec = write_spec(tmp_path / "matrix.toml", index.url)
    spec.write_text(
        spec.read_text().replace("[index]", f"[probes.commands]\nhang = 'python {hang}'\n\n[index]")
    )
    env = nox_env(tmp_path, spec)
    good, broken = cell_ids()[:2]
    command = [
        sys.executable,
        "-m",
        "nox",
        "-f",
        str(NOXFILE),
        "--envdir",
        str(tmp_path / "nox"),
        "--no-color",
        "-s",
        f"matrix({good})",
        f"matrix({broken})",
    ]
    from tests.test_faults import (
        AS_FOREGROUND_JOB,
    )  # Ctrl-C as a terminal sends it, however pytest started

    proc = subprocess.Popen(
        [*AS_FOREGROUND_JOB, *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in proc.stderr:  # wait (on output, not on time) until cell 2 is probing
            seen.append(line)
            if f"{broken} probes ..." in line:
                break
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, "".join(seen)
    cells_dir = tmp_path / "results" / "e2e" / "cells"
    kept = read_result(cells_dir / f"{good}.json")
    assert kept is not None and verdict_of(kept).kind == COMPATIBLE
    assert not (cells_dir / f"{broken}.json").exists()
    assert not list(cells_dir.glob(".*.tmp"))  # no half-written file left behind


def test_bad_spec_is_one_line_and_exit_2(tmp_path):
    spec = tmp_path / "matrix.toml"
    spec.write_text('name = "e2e"\ntorch = ["2.1.0"]\ncolour = "blue"\n')
    done = run_nox(tmp_path, nox_env(tmp_path, spec), "-l")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, done.stderr  # the error, then its hint
    assert lines[0].startswith("torch-matrix: error: ") and "colour" in lines[0]
    assert lines[1].startswith("  hint: ") and "`torch-matrix help spec" in lines[1]
    assert str(spec) in lines[0]
    # Sessions that do not run cells do not need the spec (`nox -s tests` with a broken spec).
    other = run_nox(tmp_path, nox_env(tmp_path, spec), "-l", "-s", "tests")
    assert other.returncode == 0, other.stderr
    # The report needs the run's name from the spec: the same one line, exit 2.
    report = run_nox(tmp_path, nox_env(tmp_path, spec), "-s", "report")
    assert report.returncode == 2
    assert lines[0] in report.stderr.splitlines() and "Traceback" not in report.stderr


REAL_FIND_LINKS = os.environ.get("PIP_FIND_LINKS", "")
REAL_TORCH_WHEELS = [
    wheel
    for d in REAL_FIND_LINKS.split()
    if Path(d).is_dir()
    for wheel in Path(d).glob("torch-2.13.0+cpu-cp311-*.whl")
]


@pytest.mark.realwheels
@pytest.mark.skipif(
    not REAL_TORCH_WHEELS, reason="needs PIP_FIND_LINKS with torch-2.13.0+cpu (cp311)"
)
def test_real_cpu_torch_from_pips_find_links_is_compatible(tmp_path):
    """A real torch wheel, found the way pip finds it (PIP_FIND_LINKS), with the real probe."""
    spec = tmp_path / "matrix.toml"
    # No [index] table: the spec layer takes PIP_FIND_LINKS from the environment, as pip does.
    spec.write_text(
        'name = "real"\npython = ["3.11"]\ntorch = ["2.13.0"]\ntorchvision = "none"\n'
        '[probes]\nrun = ["install_sanity"]\n'
    )
    env = nox_env(tmp_path, spec)
    env.pop("UV_CACHE_DIR")  # the machine's warm uv cache: torch is unpacked there once
    env.pop("TORCH_MATRIX_CACHE_DIR")
    env["PIP_FIND_LINKS"] = REAL_FIND_LINKS
    done = run_nox(tmp_path, env, "-s", "matrix")
    assert done.returncode == 0, done.stdout + done.stderr
    result = read_result(tmp_path / "results" / "real" / "cells" / "t2.13.0-py3.11.json")
    assert result is not None, done.stderr
    assert result.install.resolved["torch"] == "2.13.0+cpu"
    assert any(arg == "--find-links" for arg in result.install.command)
    assert verdict_of(result).kind == COMPATIBLE, verdict_of(result).reason
    probe = result.probe("install_sanity")
    assert probe.status == "pass" and probe.evidence.get("torch") == "2.13.0+cpu"


def test_an_undeclared_missing_module_runs_its_counterfactual_cell_and_makes_no_pin(tmp_path):
    """A probe needs a module no wheel declares (as torch 2.2-2.4's inductor needs setuptools):
    the cell is the environment's fault, `nox -s matrix` runs the same cell with the module
    added (a counterfactual, its own result file), and the pins give advice, not a bound."""
    from tests.synthetic_wheels import WheelSpec, default_wheels

    helper = WheelSpec("helperdep", "1.0.0", {"helperdep/__init__.py": "OK = True\n"})
    index = build_index(tmp_path / "index", [*default_wheels(), helper])
    probes_dir = tmp_path / "my_probes"
    probes_dir.mkdir()
    (probes_dir / "needs_helper.py").write_text(
        "from torch_matrix.probes.api import probe\n\n"
        "@probe('needs_helper', doc='imports an undeclared runtime dependency')\n"
        "def needs_helper(ctx):\n"
        "    import helperdep\n"
        "    return {'ok': helperdep.OK}\n"
    )
    spec = tmp_path / "matrix.toml"
    spec.write_text(f"""\
name = "e2e"
python = ["current"]
torch = ["2.1.0"]
torchvision = "paired"

[probes]
run = ["install_sanity", "needs_helper"]
dirs = ["my_probes"]

[index]
default = "{index.url}"
extra = []
find_links = []
""")
    env = nox_env(tmp_path, spec)
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    cells_dir = tmp_path / "results" / "e2e" / "cells"
    original = read_result(cells_dir / f"t2.1.0-py{PY}.json")
    counterfactual = read_result(cells_dir / f"t2.1.0-py{PY}-cf-with-helperdep.json")
    assert original is not None and counterfactual is not None, output
    assert "counterfactual: 1 cell(s)" in output and "follow-up cap 24 per run" in output
    assert original.probe("needs_helper").status in ("fail", "error")
    assert verdict_of(original).environment["needs_helper"].requirement == "helperdep"
    assert counterfactual.install.resolved.get("helperdep") == "1.0.0"
    assert verdict_of(counterfactual).kind == COMPATIBLE, verdict_of(counterfactual).reason
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(cells_dir.parent), "--no-coverage"],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0, pins.stderr
    assert "Suggested pins: none" in pins.stdout
    assert "requirement: helperdep" in pins.stdout
    assert (
        f"confirmed: with the fix applied, all else equal, passes: t2.1.0-py{PY}-cf-with-helperdep"
        in pins.stdout
    )
    # Switched off: no counterfactual cell.
    off = tmp_path / "off"
    off.mkdir()
    env_off = nox_env(off, spec, TORCH_MATRIX_FOLLOWUPS="0")
    done = run_nox(off, env_off, "-s", "matrix")
    assert not (
        off / "results" / "e2e" / "cells" / f"t2.1.0-py{PY}-cf-with-helperdep.json"
    ).exists()
    assert "counterfactual: 0 cell(s)" in done.stdout + done.stderr


def test_an_include_can_install_a_deliberately_mismatched_pair_and_gets_pairing_advice(tmp_path):
    """torchvision 0.17.0 requires torch==2.2.0; the spec installs it with torch 2.1.0 (as a user's
    --no-deps or override does). The cell installs, its failure is the pair's, and the pins
    bound neither release: torchvision 0.17.0 with its own torch is still admitted."""
    index = build_index(tmp_path / "index")
    spec = write_spec(
        tmp_path / "matrix.toml",
        index.url,
        extra="""
[[include]]
python = "current"
torch = "2.1.0"
torchvision = "0.17.0"
install = "override"
""",
    )
    env = nox_env(tmp_path, spec, TORCH_MATRIX_PROBE_RERUNS="0")
    done = run_nox(tmp_path, env, "-s", "matrix")
    cells_dir = tmp_path / "results" / "e2e" / "cells"
    mismatched = read_result(cells_dir / f"t2.1.0-tv0.17.0-py{PY}-override.json")
    assert mismatched is not None, done.stdout + done.stderr
    assert mismatched.install.status == "installed", mismatched.install.message
    assert (
        mismatched.install.resolved["torch"] == "2.1.0"
        and mismatched.install.resolved["torchvision"] == "0.17.0"
    )
    assert "--overrides" in mismatched.install.command
    verdict = verdict_of(mismatched)
    assert verdict.environment["install_sanity"].kind == "mismatched-pair", verdict
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(cells_dir.parent), "--no-coverage"],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0, pins.stderr
    assert "[mismatched-pair] torchvision 0.17.0 installed with torch 2.1.0" in pins.stdout
    lines = [
        line.split("  #")[0]
        for line in (cells_dir.parent / "pins" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    # The pair makes no global bound: no torchvision line, and torch 2.1.0 stays admitted (only the
    # broken paired release 2.2.0 is excluded, for its own failure with its own torchvision).
    assert lines == ["torch!=2.2.0"]


def probe_spec(tmp_path: Path, head: str, probe: str, body: str, index_url: str) -> Path:
    """``tmp_path/matrix.toml``: ``head`` (name and axes), then install_sanity and the required
    ``probe`` (``body``: its code, written to ``my_probes/<probe>.py``), and the synthetic index."""
    probes_dir = tmp_path / "my_probes"
    probes_dir.mkdir()
    (probes_dir / f"{probe}.py").write_text(
        "from torch_matrix.probes.api import Fail, probe  # noqa: F401\n\n" + body
    )
    spec = tmp_path / "matrix.toml"
    spec.write_text(f"""{head}
[probes]
run = ["install_sanity", "{probe}"]
required = ["{probe}"]
dirs = ["my_probes"]

[index]
default = "{index_url}"
extra = []
find_links = []
""")
    return spec


def run_matrix(tmp_path: Path, spec: Path, name: str) -> tuple[Path, dict[str, str], list, str]:
    """`nox -s matrix` on ``spec`` (run ``name``; exit 0 asserted): its results directory, environment,
    results and output."""
    run_dir = tmp_path / "results" / name
    env = nox_env(tmp_path, spec)
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return run_dir, env, load_results(run_dir).results, output


def write_window_world(
    tmp_path: Path, bad: tuple[str, ...] = ("2.3.0", "2.4.0", "2.5.0")
) -> tuple[Path, Path]:
    """Ten torch releases 2.0.0 .. 2.9.0; a custom probe fails on ``bad`` (one closed window).
    The spec tests 2.0.0, 2.4.0 and 2.9.0: the grid sees one bad release."""
    from tests.synthetic_wheels import torch_wheel

    releases = [f"2.{minor}.0" for minor in range(10)]
    index = build_index(tmp_path / "index", [torch_wheel(version) for version in releases])
    spec = probe_spec(
        tmp_path,
        """\
name = "window"
python = ["current"]
torch = ["2.0.0", "2.4.0", "2.9.0"]
torchvision = "none"
""",
        "regression",
        (
            "@probe('regression', doc='fails on the releases of one synthetic window')\n"
            "def regression(ctx):\n"
            "    import torch\n"
            f"    if torch.__version__.split('+')[0] in {bad!r}:\n"
            "        raise Fail('the synthetic regression', observed=torch.__version__, expected='a fixed release')\n"
        ),
        index.url,
    )
    return spec, tmp_path / "results" / "window"


def test_the_default_run_bisects_each_edge_and_the_pins_exclude_the_proven_window(tmp_path):
    """`nox -s matrix` alone: the grid finds 2.4.0 bad; the follow-up session bisects both edges
    over the index's releases (2.0.0 .. 2.4.0 and 2.4.0 .. 2.9.0), each cell in its own venv and
    result file with origin `edge`; the pins exclude the window 2.3.0 .. 2.5.0 with its proof."""
    spec, run_dir = write_window_world(tmp_path)
    env = nox_env(tmp_path, spec)
    done = run_nox(tmp_path, env, "-s", "matrix")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    loaded = load_results(run_dir)
    edges = sorted(
        (r for r in loaded.results if r.cell.origin == "edge"), key=lambda r: r.cell.torch
    )
    assert edges, output[-3000:]
    assert len(edges) <= 2 * 5  # ceil(log2 5) + 2 per edge, 5 releases in each span
    assert all(r.cell.id.endswith("-edge") and r.cell.reason for r in edges)
    assert {r.cell.torch for r in edges} >= {"2.2.0", "2.3.0", "2.5.0", "2.6.0"}
    assert f"follow-up cells: {len(edges)} spent of the cap 24" in output
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(run_dir), "--spec", str(spec)],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0, pins.stderr
    assert "  torch!=2.3.0,!=2.4.0,!=2.5.0\n" in pins.stdout, pins.stdout
    assert (
        "window torch 2.3.0..2.5.0 (closed" in pins.stdout
        and "found by bisect between 2.2.0 (passes)" in pins.stdout
    )
    # Resumed: a second run plans nothing new and reruns nothing.
    again = run_nox(tmp_path, env, "-s", "matrix")
    assert (
        f"follow-up cells: {len(edges)} spent of the cap 24 (0 run now"
        in again.stdout + again.stderr
    )
    # A follow-up result of other probes (another fingerprint) is no evidence: that cell runs again.
    stale = run_dir / "cells" / f"{edges[0].cell.id}.json"
    stale.write_text(
        stale.read_text().replace(
            f'"fingerprint": "{edges[0].fingerprint}"', '"fingerprint": "older"'
        )
    )
    third = run_nox(tmp_path, env, "-s", "matrix")
    assert (
        "0 run now" not in third.stdout + third.stderr
    )  # it ran again (the bisection may ask one more)
    assert read_result(stale).fingerprint == edges[0].fingerprint
    # A failing follow-up cell's rerun line, run as printed from the project directory (the cell file
    # lies under results/<name>/cells/, not where the line is printed): that cell, and only it, runs again.
    bad_edge = next(r for r in edges if r.cell.torch in ("2.3.0", "2.5.0"))
    line = next(
        x.strip()
        for x in third.stdout.splitlines()
        if x.strip().startswith("torch-matrix run")
        and x.strip().endswith(f"--redo {bad_edge.cell.id}")
    )
    before = read_result(run_dir / "cells" / f"{bad_edge.cell.id}.json").started_at
    rerun = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *shlex.split(line)[1:]],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    assert read_result(run_dir / "cells" / f"{bad_edge.cell.id}.json").started_at != before
    assert "1 run now" in rerun.stdout + rerun.stderr, rerun.stdout[-2000:]
    wrong = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *shlex.split(line)[1:-1], "../../etc/passwd"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (
        wrong.returncode != 0
        and "--redo '../../etc/passwd' is not a cell id" in wrong.stdout + wrong.stderr
    )
    # A matrix cell's id there: refused, its result kept (the follow-up planner never plans it again).
    grid = next(
        r
        for r in load_results(run_dir).results
        if r.cell.origin != "edge" and "-cf-" not in r.cell.id
    )
    grid_file = run_dir / "cells" / f"{grid.cell.id}.json"
    wrong = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", *shlex.split(line)[1:-1], grid.cell.id],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (
        wrong.returncode != 0
        and f"--redo {grid.cell.id} is a matrix cell" in wrong.stdout + wrong.stderr
    )
    assert (
        f"-s 'matrix({grid.cell.id})' -- --redo" in wrong.stdout + wrong.stderr
        and grid_file.is_file()
    )
    # Off: no follow-up cell, the pins fall back to the tested bad release and say why.
    off = tmp_path / "off"
    off.mkdir()
    spec_off, run_off = write_window_world(off)
    done = run_nox(off, nox_env(off, spec_off, TORCH_MATRIX_FOLLOWUPS="0"), "-s", "matrix")
    assert "follow-up cells: off" in done.stdout + done.stderr
    assert not [r for r in load_results(run_off).results if r.cell.origin == "edge"]


def run_vision_world(
    tmp_path: Path, probe: str, body: str
) -> tuple[Path, Path, dict[str, str], list, str]:
    """torch 2.0.0 .. 2.9.0, torchvision 0.15.0 .. 0.24.0 (each requiring its torch; those before 0.18.0
    ship ``torchvision.transforms.functional_tensor``); a spec listing torch 2.1.0, 2.5.0 and
    torchvision 0.16.0, 0.20.0 (the mismatched pairs excluded) with one custom probe; `nox -s matrix`."""
    import dataclasses

    from tests.synthetic_wheels import torch_wheel, torchvision_wheel

    wheels = []
    for minor in range(10):
        wheels.append(torch_wheel(f"2.{minor}.0"))
        vision = torchvision_wheel(f"0.{15 + minor}.0", f"2.{minor}.0")
        if 15 + minor < 18:
            vision = dataclasses.replace(
                vision,
                files={
                    **vision.files,
                    "torchvision/transforms/__init__.py": "",
                    "torchvision/transforms/functional_tensor.py": "def rgb_to_grayscale(img):\n    return img\n",
                },
            )
        wheels.append(vision)
    index = build_index(tmp_path / "index", wheels)
    spec = probe_spec(
        tmp_path,
        """\
name = "vision"
python = ["current"]
torch = ["2.1.0", "2.5.0"]
torchvision = ["0.16.0", "0.20.0"]

[[exclude]]
torch = "2.1.0"
torchvision = "0.20.0"

[[exclude]]
torch = "2.5.0"
torchvision = "0.16.0"
""",
        probe,
        body,
        index.url,
    )
    return (spec, *run_matrix(tmp_path, spec, "vision"))


def test_an_explicit_torchvision_axis_is_bisected_over_its_releases_and_pinned_there(tmp_path):
    """The spec lists torchvision. torchvision 0.18.0 dropped ``torchvision.transforms.functional_tensor``
    (as the real 0.17.0 did): the grid's failing cell names that module, so the follow-up session
    bisects torchvision's releases, each installed with the torch it requires, and tests the newest;
    the pin is torchvision's window, ``torchvision<0.18``, and torch is not pinned."""
    spec, run_dir, env, results, output = run_vision_world(
        tmp_path,
        "transforms",
        (
            "@probe('transforms', doc='the downstream import basicsr made')\n"
            "def transforms(ctx):\n"
            "    from torchvision.transforms.functional_tensor import rgb_to_grayscale  # noqa: F401\n"
        ),
    )
    grid = {r.cell.id for r in results if r.cell.origin == "matrix"}
    assert grid == {f"t2.1.0-tv0.16.0-py{PY}", f"t2.5.0-tv0.20.0-py{PY}"}, output[-3000:]
    edges = {r.cell.torchvision: r for r in results if r.cell.origin == "edge"}
    assert {"0.18.0", "0.17.0", "0.24.0"} <= set(edges), sorted(edges)
    for vision, result in edges.items():
        assert result.install.resolved["torch"] == f"2.{int(vision.split('.')[1]) - 15}.0", (
            result.install
        )
        assert result.cell.id == f"t{result.cell.torch}-tv{vision}-py{PY}-edge"
        assert result.cell.reason.startswith(
            ("start of the break at torchvision", "end of the break at torchvision")
        )
    assert (
        len(edges) <= 2 * 5
    )  # ceil(log2 5) + 2 on the start edge (0.16.0 .. 0.20.0), one on the end
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(run_dir), "--spec", str(spec)],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0, pins.stderr
    assert "  torchvision<0.18\n" in pins.stdout and not re.search(
        r"^ *torch[<>=!~]", pins.stdout, re.M
    ), pins.stdout
    assert (
        "window torchvision 0.18.0..0.24.0 (upper-bound: <0.18): first bad 0.18.0, found by bisect between "
        f"0.17.0 (passes) [t2.2.0-tv0.17.0-py{PY}-edge] and 0.18.0 (fails)" in pins.stdout
    ), pins.stdout


def test_a_torch_break_of_a_spec_listing_torchvision_moves_torchvision_with_torch(tmp_path):
    """Same spec, a break that is torch's (its message names no torchvision module): the edges move
    torch, each with its paired torchvision read from the index (a listed torchvision held while
    torch moves would install nothing), and the pin is torch's."""
    spec, run_dir, env, results, output = run_vision_world(
        tmp_path,
        "regression",
        (
            "@probe('regression', doc='torch 2.3 changed a default')\n"
            "def regression(ctx):\n"
            "    import torch\n"
            "    if int(torch.__version__.split('.')[1]) >= 3:\n"
            "        raise Fail('the synthetic regression', observed=torch.__version__, expected='before 2.3')\n"
        ),
    )
    edges = [r for r in results if r.cell.origin == "edge"]
    assert {"2.3.0", "2.9.0"} <= {r.cell.torch for r in edges}, output[-3000:]
    for result in edges:
        assert verdict_of(result).kind in (COMPATIBLE, INCOMPATIBLE), (
            result.cell.id,
            result.install.message,
        )
        assert (
            result.install.resolved["torchvision"]
            == f"0.{15 + int(result.cell.torch.split('.')[1])}.0"
        )
        assert result.cell.reason.startswith(
            ("start of the break at torch ", "end of the break at torch ")
        )
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(run_dir), "--spec", str(spec)],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0 and "  torch<2.3\n" in pins.stdout, pins.stdout + pins.stderr


def test_an_interactions_edge_releases_are_run_in_both_configurations(tmp_path):
    """torch older than 2.3 breaks with numpy 2 and works with numpy 1 (as torch built against numpy 1
    did): the grid tests torch 2.1.0 and 2.4.0 with numpy<2 and >=2. The follow-up session bisects
    the edges in the numpy>=2 configuration and runs every release it finds bad with numpy<2 too
    (tag other-configuration), where it passes: no torch release is pinned for everyone."""
    from tests.synthetic_wheels import numpy_wheel, torch_wheel

    releases = [f"2.{minor}.0" for minor in range(6)]
    numpys = ["1.25.0", "1.26.0", "2.0.0", "2.1.0"]
    index = build_index(
        tmp_path / "index", [torch_wheel(v) for v in releases] + [numpy_wheel(v) for v in numpys]
    )
    spec = probe_spec(
        tmp_path,
        """\
name = "numpy2"
python = ["current"]
torch = ["2.1.0", "2.4.0"]
torchvision = "none"

[extras]
numpy = { values = ["<2", ">=2"], label = "np" }
""",
        "numpy2",
        (
            "@probe('numpy2', doc='torch before 2.3 was built against numpy 1')\n"
            "def numpy2(ctx):\n"
            "    import numpy, torch\n"
            "    old = tuple(int(p) for p in torch.__version__.split('+')[0].split('.')[:2]) < (2, 3)\n"
            "    if old and numpy.__version__.startswith('2.'):\n"
            "        raise Fail('A module that was compiled using NumPy 1.x cannot be run in NumPy 2',\n"
            "                   observed=numpy.__version__, expected='numpy 1')\n"
        ),
        index.url,
    )
    run_dir, env, results, output = run_matrix(tmp_path, spec, "numpy2")
    edges = [r for r in results if r.cell.origin == "edge"]
    others = {
        (r.cell.torch, r.cell.axes["numpy"]): r
        for r in edges
        if "other-configuration" in r.cell.tags
    }
    bad = [
        r
        for r in edges
        if "other-configuration" not in r.cell.tags and verdict_of(r).kind == INCOMPATIBLE
    ]
    assert bad and others, output[-3000:]
    for result in bad:  # each bad edge release ran again in the passing configuration, and passed
        if result.cell.axes["numpy"] == ">=2":  # a torch edge: the other configuration is numpy<2
            twin = others[(result.cell.torch, "<2")]
        else:  # a numpy edge (torch 2.1.0 held): the other configuration is torch 2.4.0
            twin = others[("2.4.0", result.cell.axes["numpy"])]
        assert (
            verdict_of(twin).kind == COMPATIBLE
            and "the finding's other configuration" in twin.cell.reason
        )
    assert ("2.0.0", "<2") in others  # the oldest release, bad with numpy 2, works with numpy 1
    pins = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "pins", str(run_dir), "--spec", str(spec)],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pins.returncode == 0, pins.stderr
    # torch 2.0.0 was seen working (with numpy 1.26.0): the safe answer admits it; a trade-off that
    # gives it up names that pair (pins.search).
    from torch_matrix.pins import requirement_lines, suggest_pins
    from torch_matrix.pins.specifiers import specifier_set

    suggestion = suggest_pins(results, {"torch": releases, "numpy": numpys})
    for line in requirement_lines(suggestion.safe):
        assert line.package != "torch" or specifier_set([line.text()[len("torch") :]]).contains(
            "2.0.0"
        ), line.text()
    assert "t2.0.0-py3.11-nplt2-edge".replace("py3.11", f"py{PY}") in pins.stdout
    # The files as written pin one trade-off by the rule (keep torch whole, constrain numpy): applied
    # as they are, they admit no tested failing pair, and they keep every torch release.
    from packaging.requirements import Requirement

    constraints = (run_dir / "pins" / "constraints.txt").read_text()
    active = [
        Requirement(line.split("  #")[0])
        for line in constraints.splitlines()
        if line and not line.startswith("#")
    ]
    assert [str(r) for r in active] == ["numpy<2"], constraints
    assert "trade-off 1 (pinned by the rule): numpy<2" in pins.stdout + pins.stderr or (
        "1. (pinned) numpy<2" in pins.stdout
    )
    for result in results:
        if verdict_of(result).kind != INCOMPATIBLE:
            continue
        installed = result.install.resolved
        assert any(
            not r.specifier.contains(installed[r.name], prereleases=True)
            for r in active
            if r.name in installed
        ), (result.cell.id, installed)


def test_two_local_runs_feed_the_local_history(tmp_path):
    """A local run (no CI) imports itself into <results root>/history.sqlite after its report, so
    `torch-matrix history` and `diff` answer after two runs with no explicit `import`."""
    index = build_index(tmp_path / "index")
    spec = write_spec(tmp_path / "matrix.toml", index.url)
    env = {k: v for k, v in nox_env(tmp_path, spec).items() if k not in ("CI", "GITHUB_ACTIONS")}
    good = cell_ids()[0]
    for redo in ("", "1"):
        done = run_nox(
            tmp_path, {**env, "TORCH_MATRIX_REDO": redo}, "-s", f"matrix({good})", "report"
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "results" / "history.sqlite").is_file()
    history = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "history", "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert history.returncode == 0, history.stderr
    assert len(json.loads(history.stdout)["e2e"]["runs"]) == 2
    diff = subprocess.run(
        [sys.executable, "-m", "torch_matrix.cli", "diff"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 0 and diff.stdout.strip(), diff.stdout + diff.stderr
