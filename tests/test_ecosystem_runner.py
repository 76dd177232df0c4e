"""Issue 34, the runner's pieces that need no venv: the install line of a side, the isolation, the
shards and the estimate, and the command line's bad input (one line, a hint, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from torch_matrix.cli import main as cli
from torch_matrix.ecosystem.plan import MAX_SHARDS, estimate, shard_projects
from torch_matrix.spec.model import IndexConfig
from torch_matrix.ecosystem.projects import parse_projects, parse_side, torchaudio_for
from torch_matrix.vocab.errors import UserError
from torch_matrix.ecosystem import bisection, sides

FILE = """
[[project]]
name = "a"
sdist = "a==1.0"
extras = ["test"]
requires = ["scipy"]
torchvision = true
budget = 60

[[project]]
name = "b"
path = "/src/b"
command = "make check"

[[project]]
name = "c"
path = "/src/c"
skip = "needs a GPU"
"""


def test_a_side_installs_its_torch_its_paired_torchvision_the_project_and_pytest() -> None:
    a, b, _ = parse_projects(FILE, "p.toml")
    side = parse_side("2.6.0", "candidate")
    wanted = sides.install_args(a, side, Path("/work/a/tree"))
    assert wanted[:2] == ["torch==2.6.0", "torchvision==0.21.0"]
    assert "a[test] @ file:///work/a/tree" in wanted and "scipy" in wanted and "pytest" in wanted
    assert sides.overrides(a, side) == "torch==2.6.0\ntorchvision==0.21.0\ntorchaudio==2.6.0\n"
    plain = sides.install_args(b, side, Path("/work/b/tree"))
    assert plain == ["torch==2.6.0", "/work/b/tree"], "no pytest for a command that is not pytest"
    pre = parse_side("2.7.0rc3", "candidate", index="https://example.org/whl/test/cpu")
    args = sides.index_args(IndexConfig(default="https://mirror/simple"), pre)
    assert args[:4] == ["--default-index", "https://mirror/simple", "--index", pre.index]
    assert "unsafe-best-match" in args


def test_torchaudio_is_pinned_to_the_side_s_torch_wherever_a_requirement_pulls_it() -> None:
    """torch-stoi's tests imported the newest torchaudio, built for another torch, on both sides
    (``_torchaudio.so: undefined symbol``): the override pins the paired one; an override adds
    nothing a requirement does not pull in, so a project without torchaudio gets none."""
    _a, b, _ = parse_projects(FILE, "p.toml")
    assert sides.overrides(b, parse_side("2.5.1", "baseline")).endswith("\ntorchaudio==2.5.1\n")
    nightly = parse_side("nightly-2025-03-01:2.7.0", "candidate")
    assert sides.overrides(b, nightly).splitlines()[2] == "torchaudio==2.7.0.dev20250301"
    assert torchaudio_for("2.0.1") == "2.0.2" and torchaudio_for("2.0.0") == "2.0.1"
    assert torchaudio_for("2.7.0rc3") == "2.7.0rc3" and torchaudio_for("1.13.1") == ""
    assert sides.overrides(b, parse_side("1.13.1", "baseline")) == "torch==1.13.1\n"


def test_torchvision_is_pinned_to_the_side_s_torch_wherever_a_requirement_pulls_it() -> None:
    """accelerate 1.5.2's tests extra pulls torchvision in (through timm), not the project: the
    list's baseline check installed the newest torchvision (0.29.2), built for another torch,
    and every test file importing it failed to collect (``operator torchvision::nms does not
    exist``) on both sides. The override pins the paired one; it installs nothing by itself."""
    _a, b, _ = parse_projects(FILE, "p.toml")
    assert not b.torchvision
    assert sides.overrides(b, parse_side("2.5.1", "baseline")) == (
        "torch==2.5.1\ntorchvision==0.20.1\ntorchaudio==2.5.1\n"
    )
    assert "torchvision" not in " ".join(
        sides.install_args(b, parse_side("2.5.1", "baseline"), Path("/b"))
    )
    pinned = parse_side("2.6.0", "candidate", torchvision="0.21.0")
    assert "torchvision==0.21.0" in sides.overrides(b, pinned).splitlines()


def test_the_isolation_says_what_it_could_not_do() -> None:
    off = sides.isolation(network_off=False)
    assert off.network == "on (asked for)" and off.network_prefix == ()
    found = sides.isolation()
    assert found.network.startswith(("off (unshare -n)", "on: "))
    if found.prlimit:
        assert found.prefix(2)[-3:] == [found.prlimit, f"--as={2 << 30}", "--"]
        assert found.memory_note(2) == "2 GiB address space (prlimit --as)"


def test_shards_cover_every_project_once_and_the_estimate_counts_before_the_run() -> None:
    projects = parse_projects(FILE, "p.toml")
    for n in (1, 2, 3, 5):
        parts = [shard_projects(projects, k, n) for k in range(1, n + 1)]
        assert sorted(p.name for part in parts for p in part) == ["a", "b", "c"]
    with pytest.raises(UserError):
        shard_projects(projects, 1, MAX_SHARDS + 1)
    cost = estimate(projects, {"2.5.1": [("torch-2.5.1.whl", 3_000_000_000)], "2.6.0": None})
    assert (cost.projects, cost.skipped, cost.venvs) == (2, 1, 4)
    assert cost.worst_seconds == (60 + 1200) * 4
    lines = "\n".join(cost.lines())
    assert "torch 2.5.1: 3.0 GB" in lines and "torch 2.6.0: size unknown" in lines
    assert "downloads at least 3.0 GB once into uv's cache (not found)" in lines


TORCH_251 = [("torch-2.5.1-x.whl", 900_000_000), ("nvidia_cudnn-9.1-x.whl", 2_000_000_000)]
TORCH_260 = [("torch-2.6.0-x.whl", 800_000_000), ("nvidia_cudnn-9.1-x.whl", 2_000_000_000)]


@pytest.mark.parametrize(
    "cached, sizes, downloads",
    [
        (  # the real case: both torches cached; it said "downloads once ... = 5.7 GB"
            {"torch-2.5.1-x.whl", "torch-2.6.0-x.whl", "nvidia_cudnn-9.1-x.whl"},
            "torch 2.5.1: 2.9 GB (in uv's cache), torch 2.6.0: 2.8 GB (in uv's cache)",
            "downloads nothing: all in uv's cache (/fake/uv)",
        ),
        (
            {"torch-2.5.1-x.whl", "nvidia_cudnn-9.1-x.whl"},
            "torch 2.5.1: 2.9 GB (in uv's cache), torch 2.6.0: 2.8 GB (2.0 GB of it in uv's cache)",
            "downloads 0.8 GB once into uv's cache (/fake/uv)",
        ),
        (  # the CUDA wheel both sides pin is fetched once
            set(),
            "torch 2.5.1: 2.9 GB, torch 2.6.0: 2.8 GB",
            "downloads 3.7 GB once into uv's cache (/fake/uv)",
        ),
    ],
)
def test_the_estimate_downloads_only_what_uv_s_cache_lacks(
    cached: set[str], sizes: str, downloads: str
) -> None:
    projects = parse_projects(FILE, "p.toml")
    cost = estimate(projects, {"2.5.1": TORCH_251, "2.6.0": TORCH_260}, cached, "/fake/uv")
    line = cost.lines()[1]
    assert f": {sizes}; {downloads};" in line, line
    assert cost.to_json()["download_bytes"] == sum(
        size for name, size in {**dict(TORCH_251), **dict(TORCH_260)}.items() if name not in cached
    )


def test_the_run_s_estimate_reads_uv_s_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line printed before a run (and by --estimate), with UV_CACHE_DIR a fake cache holding
    torch 2.5.1's wheel (uv's ``wheels-v*/pypi/<name>/<version>-<tags>`` entry) and not 2.6.0's."""
    import json
    import sys

    from packaging.requirements import Requirement

    from torch_matrix.ecosystem.runner import EcosystemRun, plan_run
    from torch_matrix.world.listings import DistFile

    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel_tags = f"{tag}-{tag}-manylinux1_x86_64"

    class Index:  # the three calls the estimate makes of a PackageIndex
        def versions(self, name: str) -> list[Version]:
            return [Version("2.5.1"), Version("2.6.0")]

        def files(self, name: str, version: str) -> list[DistFile]:
            filename = f"{name.replace('-', '_')}-{version}-{wheel_tags}.whl"  # as PyPI spells it
            size = {"torch": 900_000_000, "nvidia-cudnn-cu12": 2_000_000_000}[name]
            return [
                DistFile(filename, f"https://x/{filename}", version, tags=(wheel_tags,), size=size)
            ]

        def requires_dist(self, name: str, version: str) -> list[Requirement]:
            return [Requirement("nvidia-cudnn-cu12==9.1.0.70"), Requirement("numpy")]

    cache = tmp_path / "uv"
    for name, version in (("torch", "2.5.1"), ("nvidia-cudnn-cu12", "9.1.0.70")):
        archive = cache / "archive-v0" / f"{name}-{version}"
        archive.mkdir(parents=True)
        entry = cache / "wheels-v8" / "pypi" / name / f"{version}-{wheel_tags}"
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(archive)
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    a, b, c = parse_projects(FILE, "p.toml")
    run = EcosystemRun(
        projects=[a, b, c],
        baseline=parse_side("2.5.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path / "run",
    )
    plan_run(run, Index())  # type: ignore[arg-type]
    printed = capsys.readouterr().err
    assert (
        "torch 2.5.1: 2.9 GB (in uv's cache), torch 2.6.0: 2.9 GB (2.0 GB of it in uv's cache); "
        f"downloads 0.9 GB once into uv's cache ({cache})" in printed
    ), printed
    saved = json.loads((tmp_path / "run" / "run.json").read_text())["estimate"]
    assert saved["download_bytes"] == 900_000_000 and saved["uv_cache"] == str(cache)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--baseline", "2.5.1", "--candidate", "2.5.1"], "both torch 2.5.1"),
        (["--baseline", "two", "--candidate", "2.6.0"], "not a torch version"),
        (["--baseline", "2.5.1", "--candidate", "2.6.0", "--shard", "3/2"], "invalid shard"),
        (["--baseline", "2.5.1", "--candidate", "2.6.0", "--only", "zz"], "no project 'zz'"),
    ],
)
def test_bad_command_lines_are_one_line_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    projects = tmp_path / "projects.toml"
    projects.write_text(FILE)
    assert cli(["ecosystem", "run", str(projects), *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert words in err and "hint:" in err and "Traceback" not in err


def test_a_missing_projects_file_and_a_missing_report_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.toml")
    assert cli(["ecosystem", "run", missing, "--baseline", "2.5.1", "--candidate", "2.6.0"]) == 2
    assert "cannot read the projects file" in capsys.readouterr().err
    assert cli(["ecosystem", "diff", str(tmp_path), str(tmp_path)]) == 2
    assert "ecosystem report DIR" in capsys.readouterr().err


def _redo_run(tmp_path: Path) -> tuple[object, Path]:
    from torch_matrix.ecosystem.runner import EcosystemRun

    a, _, c = parse_projects(FILE, "p.toml")
    run = EcosystemRun(
        projects=[a, c],
        baseline=parse_side("2.5.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path,
        redo=True,
    )
    return run, tmp_path / "projects"


def _earlier(folder: Path, names: tuple[str, ...]) -> dict[str, str]:
    folder.mkdir(parents=True)
    texts = {name: '{"earlier": "%s"}\n' % name for name in names}
    for name, text in texts.items():
        (folder / name).write_text(text)
    return texts


def test_a_redone_project_stopped_halfway_keeps_its_earlier_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redo deleted a project's results before rerunning it; a run stopped then (a time limit,
    Ctrl-C) lost them. Now nothing is replaced until the new results are all known."""
    from torch_matrix.ecosystem import runner

    run, projects = _redo_run(tmp_path)
    names = ("baseline.json", "candidate.json", "candidate-retry.json", "baseline-retry.json")
    texts = _earlier(projects / "a", names)

    def stopped(*_args: object, **_kwargs: object) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "fetch", stopped)
    with pytest.raises(KeyboardInterrupt):
        runner.run_project(run, run.projects[0], None)  # type: ignore[attr-defined]
    assert {p.name: p.read_text() for p in (projects / "a").glob("*.json")} == texts


def test_a_redone_project_replaces_its_results_and_drops_the_earlier_run_s_others(
    tmp_path: Path,
) -> None:
    from torch_matrix.ecosystem import runner

    run, projects = _redo_run(tmp_path)
    _earlier(projects / "c", ("baseline.json", "candidate.json", "candidate-retry.json"))
    assert runner.run_project(run, run.projects[1], None) == "skipped"  # type: ignore[attr-defined]
    left = sorted(p.name for p in (projects / "c").glob("*.json"))
    assert left == ["baseline.json", "candidate.json"]  # the earlier retry is not this run's
    for name in left:
        assert '"status": "skipped"' in (projects / "c" / name).read_text()


def test_a_redo_of_some_projects_keeps_the_rest_of_the_run_in_run_json(tmp_path: Path) -> None:
    """`ecosystem run --only a --redo` into a run's directory wrote run.json with project a alone:
    the report lost c's skip reason (c's stale results from before it was skipped came back as a
    class, same-fail in the real run) and could no longer name the projects with no result."""
    import json

    from torch_matrix.ecosystem.report import build
    from torch_matrix.ecosystem.runner import EcosystemRun, plan_run
    from torch_matrix.ecosystem.records import EcoClass, Role, SideRun, SideStatus
    from torch_matrix.ecosystem.results import load

    a, b, c = parse_projects(FILE, "p.toml")
    baseline, candidate = parse_side("2.5.1", "baseline"), parse_side("2.6.0", "candidate")

    def invocation(*projects: object, candidate_side: object = candidate) -> None:
        plan_run(
            EcosystemRun(
                projects=list(projects),  # type: ignore[arg-type]
                baseline=baseline,
                candidate=candidate_side,  # type: ignore[arg-type]
                out=tmp_path,
                redo=True,
            ),
            None,
        )

    invocation(a, b, c)
    for role in Role:  # c's results from a run before its skip reason was added
        stale = SideRun(project="c", role=role, torch="2.5.1", status=SideStatus.FAILED)
        (tmp_path / "projects" / "c").mkdir(parents=True, exist_ok=True)
        (tmp_path / "projects" / "c" / f"{role}.json").write_text(json.dumps(stale.to_json()))
    invocation(a)  # --only a --redo
    meta = json.loads((tmp_path / "run.json").read_text())
    assert [p["name"] for p in meta["projects"]] == ["a", "b", "c"]
    assert meta["projects"][2]["skip"] == "needs a GPU"
    loaded = load([tmp_path])
    report = build(loaded.meta, loaded.sides)
    assert [(r.name, r.classified.eco_class) for r in report.rows] == [("c", EcoClass.SKIPPED)]
    assert report.missing == ("a", "b")
    with pytest.raises(UserError, match="candidate's torch is '2.6.0', this run's '2.7.1'"):
        invocation(a, candidate_side=parse_side("2.7.1", "candidate"))


REGRESSED = ("tests/test_io.py::test_load", "tests/test_io.py::test_resume")


def _bisect_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on: dict[str, dict[str, str]]
) -> dict[str, object]:
    """bisect_project over torch 2.4.1 .. 2.6.0 (2.5.0 and 2.5.1 between), each release's venv
    and tests replaced by ``on[version]``: the regressed tests' outcomes there."""

    from torch_matrix.ecosystem.runner import EcosystemRun
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    class Index:
        def versions(self, project: str) -> list[Version]:
            return [Version(v) for v in ("2.3.1", "2.4.1", "2.5.0", "2.5.1", "2.6.0", "2.7.0")]

    def prepare(work: sides.SideWork) -> tuple[None, str]:
        return None, "python"

    def run_tests(
        work: sides.SideWork, python: str, *, only: tuple[str, ...], purpose: str
    ) -> SideRun:
        assert purpose == "bisection"
        assert tuple(only) == REGRESSED
        tests = on[work.side.torch]
        failed = any(o in ("failed", "error") for o in tests.values())
        return SideRun(
            project="a",
            role=Role.CANDIDATE,
            torch=work.side.torch,
            status=SideStatus.FAILED if failed else SideStatus.PASSED,
            tests=tests,
            summary=", ".join(f"{t.split('::')[-1]} {o}" for t, o in tests.items()),
        )

    monkeypatch.setattr(sides, "prepare", prepare)
    monkeypatch.setattr(sides, "run_tests", run_tests)
    a = parse_projects(FILE, "p.toml")[0]
    run = EcosystemRun(
        projects=[a],
        baseline=parse_side("2.4.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path,
        bisect=True,
    )
    return bisection.bisect_project(run, a, tmp_path, sides.isolation(False), REGRESSED, Index())  # type: ignore[arg-type]


def test_bisect_pins_below_the_first_release_where_the_regressed_tests_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passed = dict.fromkeys(REGRESSED, "passed")
    failed = {REGRESSED[0]: "passed", REGRESSED[1]: "failed"}
    found = _bisect_with(tmp_path, monkeypatch, {"2.5.0": passed, "2.5.1": failed})
    assert found["versions"] == ["2.4.1", "2.5.0", "2.5.1", "2.6.0"]
    assert found["outcomes"] == {"2.4.1": "good", "2.5.0": "good", "2.5.1": "bad", "2.6.0": "bad"}
    assert found["first_bad"] == "2.5.1" and found["pin"] == "torch<2.5.1"
    seconds = found["seconds"]  # each release it installed and ran, the sides' own not again
    assert isinstance(seconds, dict) and sorted(seconds) == ["2.5.0", "2.5.1"]


@pytest.mark.parametrize(
    "between",
    [
        {"tests/test_io.py": "error"},  # the module holding them failed to import
        dict.fromkeys(REGRESSED, "skipped"),  # skipped there (an importorskip)
        {REGRESSED[0]: "passed"},  # one of them ran, the other never did
    ],
    ids=["collection-error", "skipped", "half-ran"],
)
def test_bisect_calls_no_release_good_where_the_regressed_tests_did_not_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, between: dict[str, str]
) -> None:
    """A release was `good` when none of the regressed tests *failed* there: one where they never
    ran (a collection error, a skip) was put on the good side, and the run proved a wrong pin
    (here `torch<2.6.0` "pass on 2.5.1", though nothing passed on 2.5.1)."""
    passed = dict.fromkeys(REGRESSED, "passed")
    found = _bisect_with(tmp_path, monkeypatch, {"2.5.0": passed, "2.5.1": between})
    assert found["outcomes"] == {"2.4.1": "good", "2.5.0": "good", "2.5.1": "skip", "2.6.0": "bad"}
    evidence = found["evidence"]
    assert isinstance(evidence, dict) and "did not pass or fail" in evidence["2.5.1"]
    assert found["first_bad"] == "2.6.0" and "pin" not in found
    assert "2.5.1 or 2.6.0" in str(found["sentence"])


def test_each_side_file_records_when_it_began_and_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stamps every side it writes, the retries too, so the report can say each project's
    wall time (from its first side's start to its last side's end); the sides and the tests are
    stand-ins here (no venv): a regressed project, its test failing on every retry."""
    import json

    from torch_matrix.ecosystem.report import build
    from torch_matrix.ecosystem import runner
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus
    from torch_matrix.ecosystem.results import load

    a, _b, _c = parse_projects(FILE, "p.toml")
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)  # a has no command: its tests are discovered there
    (tree / "tests" / "test_a.py").write_text("def test_load(): pass\n")
    monkeypatch.setattr(runner, "fetch", lambda *args: tree)
    monkeypatch.setattr(
        sides, "isolation", lambda *args, **kwargs: sides.Isolation((), "on (test)", "")
    )
    monkeypatch.setattr(sides, "prepare", lambda work, *args: (None, "/venv/bin/python"))

    def run_tests(work: sides.SideWork, python: str, **kw: object) -> SideRun:
        outcome = "passed" if work.side.role == "baseline" else "failed"
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.PASSED if outcome == "passed" else SideStatus.FAILED,
            tests={"tests/test_a.py::test_load": outcome},
            messages={"tests/test_a.py::test_load": "UnpicklingError"}
            if outcome != "passed"
            else {},
            retry_of=tuple(kw.get("only") or ()),  # type: ignore[call-overload]
        )

    monkeypatch.setattr(sides, "run_tests", run_tests)
    run = runner.EcosystemRun(
        projects=[a],
        baseline=parse_side("2.5.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path / "run",
    )
    runner.plan_run(run, None)
    before = __import__("time").time()
    assert runner.run_project(run, a, None) == "regressed"
    after = __import__("time").time()
    files = sorted((tmp_path / "run" / "projects" / "a").glob("*.json"))
    files.remove(tmp_path / "run" / "projects" / "a" / "discovery.json")  # what a's sdist implied
    assert [f.name for f in files][:4] == [
        "baseline-retry.json",
        "baseline-retry2.json",
        "baseline-retry3.json",
        "baseline.json",
    ]
    for path in files:
        data = json.loads(path.read_text())
        assert before <= data["started"] <= data["ended"] <= after, path.name
    loaded = load([tmp_path / "run"])
    (row,) = build(loaded.meta, loaded.sides).rows
    wall = row.wall_seconds()
    assert wall is not None and 0 <= wall <= after - before


def test_bisect_between_two_nightlies_runs_the_nightlies_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two nightlies the bisection looked for final releases, found none, and proved the
    candidate's nightly the first bad one ("no release lies between them") without testing the
    nightlies of the days between, where the break had come in."""
    from packaging.version import Version

    from torch_matrix.ecosystem.runner import EcosystemRun
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    days = [f"2.7.0.dev202503{d:02d}" for d in range(1, 6)]
    tested: list[str] = []

    class Index:
        def versions(self, project: str) -> list[Version]:
            return [Version(v) for v in ("2.6.0", *days, "2.7.0")]

    def prepare(work: sides.SideWork) -> tuple[None, str]:
        assert work.side.index == "https://nightly.example/cpu"
        return None, "python"

    def run_tests(
        work: sides.SideWork, python: str, *, only: tuple[str, ...], purpose: str
    ) -> SideRun:
        assert purpose == "bisection"
        tested.append(work.side.torch)
        outcome = "failed" if work.side.torch >= days[2] else "passed"  # broken from March 3
        return SideRun(
            project="a",
            role=Role.CANDIDATE,
            torch=work.side.torch,
            status=SideStatus.FAILED if outcome == "failed" else SideStatus.PASSED,
            tests=dict.fromkeys(only, outcome),
            summary=f"{len(only)} {outcome}",
        )

    monkeypatch.setattr(sides, "prepare", prepare)
    monkeypatch.setattr(sides, "run_tests", run_tests)
    a = parse_projects(FILE, "p.toml")[0]
    nightly = "https://nightly.example/cpu"
    run = EcosystemRun(
        projects=[a],
        baseline=parse_side("nightly-2025-03-01:2.7.0", "baseline", index=nightly),
        candidate=parse_side("nightly-2025-03-05:2.7.0", "candidate", index=nightly),
        out=tmp_path,
        bisect=True,
    )
    found = bisection.bisect_project(run, a, tmp_path, sides.isolation(False), REGRESSED, Index())  # type: ignore[arg-type]
    assert found["versions"] == days
    assert tested == [days[2], days[1]]  # the middle day, then the one left between
    assert found["first_bad"] == "2.7.0.dev20250303" and found["last_good"] == "2.7.0.dev20250302"
    assert found["pin"] == "torch<2.7.0.dev20250303"
    assert "no nightly lies between" in str(found["proof"])
    assert "main@{2025-03-02}...main@{2025-03-03}" in str(found["changes"])


def test_the_estimate_of_a_bisecting_run_counts_the_releases_between(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real 2.4.1 -> 2.6.0 run with --bisect installed torch 2.5.0 and 2.5.1 for each
    regressed project, and its estimate said nothing of them (only the two sides' downloads)."""
    from packaging.version import Version

    from torch_matrix.ecosystem.runner import EcosystemRun, plan_run

    class Index:
        def versions(self, project: str) -> list[Version]:
            return [Version(v) for v in ("2.3.1", "2.4.1", "2.5.0", "2.5.1", "2.6.0", "2.7.0")]

        def files(self, project: str, version: str) -> list[object]:
            return []  # no wheel: the sides' sizes are unknown

    a = parse_projects(FILE, "p.toml")[0]  # budget 60 s

    def planned(candidate: str, bisect: bool) -> str:
        run = EcosystemRun(
            projects=[a],
            baseline=parse_side("2.4.1", "baseline"),
            candidate=parse_side(candidate, "candidate"),
            out=tmp_path / f"{candidate}-{bisect}",
            bisect=bisect,
        )
        plan_run(run, Index())  # type: ignore[arg-type]
        return capsys.readouterr().err

    said = planned("2.6.0", True)
    assert (
        "--bisect: each regressed project runs its regressed tests on at most 2 of the 2 releases "
        "between the sides (2.5.0, 2.5.1)" in said
    )
    assert "at most 2 min of tests per regressed project" in said
    assert "--bisect" not in planned("2.6.0", False)
    assert "no releases lie between the sides" in planned("2.5.0", True)


@pytest.mark.parametrize(
    ("status", "expected"), [("passed", "good"), ("failed", "bad"), ("timeout", "skip")]
)
def test_bisect_judges_a_command_that_is_not_pytest_by_its_exit(status: str, expected: str) -> None:
    """A project whose command is not pytest has one "test", the whole command: its regression
    is the command failing. A release where it passed was 'no evidence' (no per-test outcome
    passed), and, before that, one where it failed was good (no per-test outcome failed)."""
    from torch_matrix.ecosystem.classify import WHOLE, bisect_outcome
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    result = SideRun(project="b", role=Role.CANDIDATE, torch="2.5.1", status=SideStatus(status))
    assert bisect_outcome(result, (WHOLE,))[0] == expected


def test_the_run_is_one_line_a_project_and_the_tail_of_a_failing_side_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console echoed both sides' test output by default (433 KB for 7 projects); now one
    line a project, its class and time, and with --tail the end of each side that did not pass."""
    from torch_matrix.cli import main
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    _no_fetch_no_install(monkeypatch, tmp_path)

    def run_tests(work: sides.SideWork, python: str, **kw: object) -> SideRun:
        echo = kw.get("echo")
        if callable(echo):
            echo("PASSED tests/test_a.py::test_a (the test output)")
        bad = work.side.role == "candidate" and work.project.name == "bad"
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.FAILED if bad else SideStatus.PASSED,
            tests={"t::a": "failed" if bad else "passed"},
            output_tail="line 1\nE   RuntimeError: boom\n1 failed" if bad else "1 passed",
        )

    monkeypatch.setattr(sides, "run_tests", run_tests)
    projects = tmp_path / "p.toml"
    projects.write_text(
        '[[project]]\nname = "good"\npath = "tree"\ncommand = "pytest"\n'
        '[[project]]\nname = "bad"\npath = "tree"\ncommand = "pytest"\n'
    )
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    assert main([*args, "--out", str(tmp_path / "quiet")]) == 0
    out, err = capsys.readouterr()
    assert "the test output" not in out + err
    progress = [line for line in err.splitlines() if line.strip().startswith("[")]
    assert (
        len(progress) == 2 and "good: same-pass" in progress[0] and "bad: regressed" in progress[1]
    )
    assert "RuntimeError" not in err

    assert main([*args, "--out", str(tmp_path / "tail"), "--tail", "2"]) == 0
    err = capsys.readouterr().err
    assert "  candidate (failed, torch 2.6.0):" in err
    assert "    E   RuntimeError: boom" in err and "line 1" not in err
    assert "baseline (" not in err  # it passed: no tail

    assert main([*args, "--out", str(tmp_path / "echo"), "--echo"]) == 0
    assert "the test output" in capsys.readouterr().out


def test_the_estimate_forecasts_from_recorded_durations_and_keeps_the_ceiling() -> None:
    """The estimate was only the ceiling (4.7 h for a run that took about 9 minutes); now the
    recorded wall times forecast it, a project without a record at their mean (the median
    forecast a real run's skewed durations 3.3x under)."""
    from torch_matrix.ecosystem.plan import estimate, forecast_seconds, recorded_durations
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    projects = parse_projects(
        "".join(f'[[project]]\nname = "p{i}"\npath = "/x"\nbudget = 300\n' for i in range(4)), "p"
    )
    assert forecast_seconds(projects, {}) == (None, 0)
    seconds, known = forecast_seconds(projects, {"p0": 10.0, "p1": 30.0, "p2": 5000.0})
    # p2 capped at its ceiling; p3 at the mean (1680: not the median, 30), capped too
    assert known == 3 and seconds == 10 + 30 + 1200 + 1200
    seconds, known = forecast_seconds(projects, {"p0": 10.0, "p1": 20.0, "p2": 90.0})
    assert known == 3 and seconds == 10 + 20 + 90 + 40  # p3 at the mean of 10, 20, 90
    cost = estimate(projects, {}, recorded={"p0": 60.0, "p1": 120.0})
    lines = cost.lines()
    assert (
        "estimate: about 6 min (forecast: 2 project(s) at their recorded wall time, 2 at the mean of those)"
        in lines
    )
    assert any(line.startswith("estimate: at most 1.3 h of tests") for line in lines)
    assert cost.to_json()["forecast_seconds"] == 360.0

    def side(role: Role, started: float, ended: float) -> SideRun:
        return SideRun("p0", role, "2.5.1", SideStatus.PASSED, started=started, ended=ended)

    sides_ = {
        "p0": {
            "baseline": side(Role.BASELINE, 100, 150),
            "candidate": side(Role.CANDIDATE, 101, 170),
        },
        "p1": {"baseline": SideRun("p1", Role.BASELINE, "2.5.1", SideStatus.PASSED)},  # no times
    }
    assert recorded_durations(sides_) == {"p0": 70.0}


def test_a_run_s_estimate_reads_an_earlier_run_s_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from torch_matrix.cli import main

    projects = _estimate_only(monkeypatch, tmp_path, "a")
    earlier = tmp_path / "earlier"
    (earlier / "projects" / "a").mkdir(parents=True)
    (earlier / "run.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "baseline": {"torch": "2.5.1"},
                "candidate": {"torch": "2.6.0"},
                "projects": [{"name": "a"}],
            }
        )
    )
    for role, (began, ended) in {"baseline": (0, 90), "candidate": (0, 120)}.items():
        (earlier / "projects" / "a" / f"{role}.json").write_text(
            json.dumps(
                {
                    "project": "a",
                    "role": role,
                    "torch": "2.5.1",
                    "status": "passed",
                    "started": began,
                    "ended": ended,
                }
            )
        )
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    assert main([*args, "--out", str(tmp_path / "new"), "--estimate"]) == 0
    assert "no recorded durations to forecast from" in capsys.readouterr().err
    assert (
        main(
            [*args, "--out", str(tmp_path / "new"), "--estimate", "--durations-from", str(earlier)]
        )
        == 0
    )
    assert (
        "estimate: about 2 min (forecast: 1 project(s) at their recorded wall time)"
        in capsys.readouterr().err
    )


def test_an_only_or_shard_invocation_s_forecast_reads_the_rest_of_the_list_s_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real run of docs/ecosystem-run.md resumed with `--only` its 10 new projects and
    `--durations-from` a run that recorded 70 others: `no recorded durations to forecast from`,
    since the mean a project without a record is forecast at was taken over the --only (or
    --shard) selection alone. The rest of the list's records give it now."""
    import json

    from torch_matrix.cli import main

    projects = _estimate_only(monkeypatch, tmp_path, "ab")
    earlier = tmp_path / "earlier"
    (earlier / "projects" / "a").mkdir(parents=True)
    meta = {"schema": 1, "baseline": {"torch": "2.5.1"}, "candidate": {"torch": "2.6.0"}}
    (earlier / "run.json").write_text(json.dumps({**meta, "projects": [{"name": "a"}]}))
    for role in ("baseline", "candidate"):
        side = {"project": "a", "role": role, "torch": "2.5.1", "status": "passed"}
        (earlier / "projects" / "a" / f"{role}.json").write_text(
            json.dumps({**side, "started": 0, "ended": 120})
        )
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    args += ["--estimate", "--durations-from", str(earlier)]
    forecast = "estimate: about 2 min (forecast: 0 project(s) at their recorded wall time, 1 at the mean of those)"
    for k, narrowed in enumerate((["--only", "b"], ["--shard", "2/2"])):
        assert main([*args, *narrowed, "--out", str(tmp_path / f"new{k}")]) == 0
        err = capsys.readouterr().err
        assert "estimate: 1 project(s) to run (0 skipped), 2 venvs" in err, narrowed
        assert forecast in err, narrowed


def test_shards_then_the_merge_equal_the_unsharded_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow's shape, simulated: 3 shard invocations (`--shard K/3`, each its own --out, as
    each CI job), then `ecosystem report` over the three, equal the unsharded run's report."""
    import json

    from torch_matrix.cli import main
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    _no_fetch_no_install(monkeypatch, tmp_path)
    outcome = {"p1": ("passed", "failed"), "p2": ("failed", "failed"), "p4": ("failed", "passed")}

    def run_tests(work: sides.SideWork, python: str, **kw: object) -> SideRun:
        pair = outcome.get(work.project.name, ("passed", "passed"))
        state = pair[0] if work.side.role == "baseline" else pair[1]
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.PASSED if state == "passed" else SideStatus.FAILED,
            tests={"t::a": state},
            messages={"t::a": "RuntimeError: x"} if state == "failed" else {},
            retry_of=tuple(kw.get("only") or ()),  # type: ignore[call-overload]
        )

    monkeypatch.setattr(sides, "run_tests", run_tests)
    projects = tmp_path / "p.toml"
    projects.write_text(
        "".join(
            f'[[project]]\nname = "p{i}"\npath = "tree"\ncommand = "pytest"\n' for i in range(7)
        )
        + '[[project]]\nname = "gpu"\npath = "tree"\nskip = "needs a GPU"\n'
    )
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    for k in (1, 2, 3):
        assert main([*args, "--out", str(tmp_path / f"shard-{k}"), "--shard", f"{k}/3"]) == 0
    assert main(["ecosystem", "report", str(tmp_path / "whole")]) == 0
    shards = [str(tmp_path / f"shard-{k}") for k in (1, 2, 3)]
    assert main(["ecosystem", "report", *shards, "--out", str(tmp_path / "merged")]) == 0

    def classes(folder: Path) -> dict[str, object]:
        data = json.loads((folder / "ecosystem.json").read_text())
        return {
            name: (row["class"], row.get("new_failures"), sorted(row.get("sides", {})))
            for name, row in data["projects"].items()
        }

    whole, merged = classes(tmp_path / "whole"), classes(tmp_path / "merged")
    assert len(whole) == 8 and merged == whole
    assert {v[0] for v in whole.values()} >= {
        "regressed",
        "fixed",
        "same-fail",
        "same-pass",
        "skipped",
    }


def test_a_resumed_run_s_estimate_counts_only_the_projects_still_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a 72-project run whose first 22 had results printed `71 project(s) to run` and a
    forecast of 2.0 h that counted the 22 done ones again (the real run of docs/ecosystem-run.md);
    the estimate is of what this invocation will run, the done ones said apart (--redo: all)."""
    import json

    from torch_matrix.cli import main

    projects = _estimate_only(monkeypatch, tmp_path, "abc")
    out = tmp_path / "run"
    (out / "projects" / "a").mkdir(parents=True)
    (out / "run.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "baseline": parse_side("2.5.1", "baseline").to_json(),
                "candidate": parse_side("2.6.0", "candidate").to_json(),
                "projects": [{"name": "a"}],
            }
        )
    )
    for role in ("baseline", "candidate"):
        (out / "projects" / "a" / f"{role}.json").write_text(
            json.dumps(
                {
                    "project": "a",
                    "role": role,
                    "torch": "2.5.1",
                    "status": "passed",
                    "started": 0,
                    "ended": 600,
                }
            )
        )
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    assert main([*args, "--out", str(out), "--estimate"]) == 0
    err = capsys.readouterr().err
    assert "estimate: 2 project(s) to run (0 skipped, 1 done before), 4 venvs" in err
    assert "estimate: about 20 min (forecast: 0 project(s) at their recorded wall time, " in err
    assert main([*args, "--out", str(out), "--estimate", "--redo"]) == 0
    err = capsys.readouterr().err
    assert "estimate: 3 project(s) to run (0 skipped), 6 venvs" in err
    assert "estimate: about 30 min (forecast: 1 project(s) at their recorded wall time" in err


def _estimate_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: str) -> Path:
    """A projects file of one-letter projects (each ``path = "."``, ``command = "pytest"``) for a
    run that only estimates: no torch wheel is looked up."""
    from torch_matrix.ecosystem import runner

    monkeypatch.setattr(runner, "torch_wheels", lambda *args: None)
    projects = tmp_path / "p.toml"
    projects.write_text(
        "".join(f'[[project]]\nname = "{n}"\npath = "."\ncommand = "pytest"\n' for n in names)
    )
    return projects


def _no_fetch_no_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The runner with no source fetched (an empty tree), no torch wheels sized, no sandbox and
    no venv made: what a test of the console or the classes alone needs."""
    from torch_matrix.ecosystem import runner

    tree = tmp_path / "tree"
    tree.mkdir()
    monkeypatch.setattr(runner, "fetch", lambda *args: tree)
    monkeypatch.setattr(runner, "torch_wheels", lambda *args: None)
    monkeypatch.setattr(
        sides, "isolation", lambda *args, **kw: sides.Isolation((), "on (test)", "")
    )
    monkeypatch.setattr(sides, "prepare", lambda work, *args: (None, "/venv/bin/python"))


def test_a_fixed_project_s_fixed_tests_are_retried_and_a_flip_makes_it_flaky(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tntorch 1.1.2 in the real run: one unseeded test failed on the baseline once and the project
    read as fixed, never retried. Its fixed tests are rerun on both sides now; one that passes on
    a baseline's retry makes the project flaky, the retries written beside the sides."""
    from torch_matrix.cli import main
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    _no_fetch_no_install(monkeypatch, tmp_path)
    calls: list[tuple[str, tuple[str, ...]]] = []

    def run_tests(work: sides.SideWork, python: str, **kw: object) -> SideRun:
        only = tuple(kw.get("only") or ())  # type: ignore[call-overload]
        calls.append((work.side.role, only))
        state = "failed" if work.side.role == "baseline" and not only else "passed"
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.PASSED if state == "passed" else SideStatus.FAILED,
            tests={"t::a": state},
            messages={"t::a": "assert 24.1 < 10.0"} if state == "failed" else {},
            retry_of=only,
        )

    monkeypatch.setattr(sides, "run_tests", run_tests)
    projects = tmp_path / "p.toml"
    projects.write_text('[[project]]\nname = "p"\npath = "tree"\ncommand = "pytest"\n')
    out = tmp_path / "run"
    args = ["ecosystem", "run", str(projects), "--baseline", "2.5.1", "--candidate", "2.6.0"]
    main([*args, "--out", str(out), "--quiet"])
    assert "p: flaky" in capsys.readouterr().err
    assert ("baseline", ("t::a",)) in calls and ("candidate", ("t::a",)) in calls
    assert (out / "projects" / "p" / "baseline-retry.json").exists()


def test_collect_baseline_collects_the_discovered_tests_on_the_baseline_side_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list generator's check (examples/ecosystem/build_list.py --check): a zero-config
    entry's source discovered, only its baseline side installed, its discovered command run with
    pytest's --collect-only within the budget given; the work folder deleted after. A source
    that cannot be had is a BROKEN side with the reason (stand-ins for the venv and pytest)."""
    from torch_matrix.ecosystem import runner
    from torch_matrix.ecosystem.records import Role, SideRun, SideStatus

    (entry,) = parse_projects('[[project]]\nsdist = "demo==1.0"\n', "p.toml")
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_demo.py").write_text("def test_one(): pass\n")
    monkeypatch.setattr(runner, "fetch", lambda *args: tree)
    monkeypatch.setattr(
        sides, "isolation", lambda *args, **kwargs: sides.Isolation((), "on (test)", "")
    )
    prepared: list[str] = []

    def prepare(work: sides.SideWork, *args: object) -> tuple[None, str]:
        prepared.append(work.side.role)
        return None, "/venv/bin/python"

    seen: dict[str, object] = {}

    def run_tests(work: sides.SideWork, python: str, **kw: object) -> SideRun:
        seen.update(command=work.project.command, budget=kw.get("budget_s"), box=work.box)
        return SideRun(
            project=work.project.name,
            role=Role(work.side.role),
            torch=work.side.torch,
            status=SideStatus.PASSED,
            exit_code=0,
            output_tail="tests/test_demo.py::test_one\n\n1 test collected in 0.01s\n",
        )

    monkeypatch.setattr(sides, "prepare", prepare)
    monkeypatch.setattr(sides, "run_tests", run_tests)
    run = runner.EcosystemRun(
        projects=[],
        baseline=parse_side("2.5.1", "baseline"),
        candidate=parse_side("2.6.0", "candidate"),
        out=tmp_path / "check",
        confine=False,
    )
    done = runner.collect_baseline(run, entry, None, 90.0)
    assert prepared == ["baseline"]
    assert seen["command"] == "python -m pytest -q -p no:cacheprovider tests --collect-only"
    assert seen["budget"] == 90.0
    assert (
        done.project.command == "python -m pytest -q -p no:cacheprovider tests"
    )  # as a run has it
    assert done.side.status == SideStatus.PASSED and done.side.role == Role.BASELINE
    assert done.tree == str(seen["box"]) + "/src"
    assert (tmp_path / "check" / "projects" / "demo" / "baseline.log").is_file()
    assert not (tmp_path / "check" / "work" / "demo").exists()

    def no_source(*args: object) -> Path:
        raise runner.SourceError("demo==1.0: the index has no such release")

    monkeypatch.setattr(runner, "fetch", no_source)
    broken = runner.collect_baseline(run, entry, None, 90.0)
    assert broken.side.status == SideStatus.BROKEN and broken.side.exit_code is None
    assert broken.side.detail == "source: demo==1.0: the index has no such release"
    assert prepared == ["baseline"]  # nothing installed
