"""Issue 34, the pure part: the projects file, the sides, and a project's class."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torch_matrix.ecosystem.classify import WHOLE, classify, to_retry
from torch_matrix.ecosystem.projects import (
    SideKind,
    SourceKind,
    parse_projects,
    parse_side,
    torchvision_for,
)
from torch_matrix.ecosystem.records import EcoClass, Role, SideRun, SideStatus, SpuriousKind
from torch_matrix.vocab.errors import UserError

# ------------------------------------------------------------------ the projects file

GOOD = """
[defaults]
budget = "10m"
requires = ["pytest"]

[[project]]
name = "einops"
sdist = "einops==0.8.1"
command = "python -m pytest -q einops/tests"

[[project]]
name = "kornia"
git = "https://github.com/kornia/kornia"
ref = "v0.8.0"
extras = ["x"]
requires = ["scipy>=1.10"]
torchvision = true
budget = 300

[[project]]
name = "local"
path = "../here"
skip = "needs a GPU"
"""


def test_a_projects_file_parses_with_defaults_and_each_source() -> None:
    projects = parse_projects(GOOD, "p.toml", base_dir="/base/dir")
    assert [p.name for p in projects] == ["einops", "kornia", "local"]
    einops, kornia, local = projects
    assert einops.source.kind == SourceKind.SDIST and einops.source.location == "einops==0.8.1"
    assert einops.budget_s == 600 and einops.requires == ("pytest",)
    assert kornia.source.kind == SourceKind.GIT and kornia.source.ref == "v0.8.0"
    assert kornia.requires == ("pytest", "scipy>=1.10") and kornia.torchvision
    assert kornia.budget_s == 300
    assert local.source.kind == SourceKind.PATH and local.source.location == "/base/here"
    assert local.skip == "needs a GPU"


@pytest.mark.parametrize(
    "text, where, words",
    [
        ("[[project]]\nname='a'\n", "[[project]] a", "exactly one source"),
        ("[[project]]\nname='a'\nsdist='a>=1'\n", "a.sdist", "not pinned"),
        ("[[project]]\nname='a'\ngit='https://x'\n", "a.ref", "needs a ref"),
        ("[[project]]\nname='a'\nsdist='a==1'\nbudget='soon'\n", "a.budget", "invalid time"),
        ("[[project]]\nname='a'\nsdist='a==1'\ncomand='x'\n", "[[project]] a", "unknown key"),
        ("[[project]]\nname='a'\nsdist='a==1'\nrequires=['a b c']\n", "a.requires", "invalid"),
        ("[[project]]\nname='a b'\nsdist='a==1'\n", "#1", "invalid or missing name"),
        ("[[project]]\nname='a'\nsdist='a==1'\n[[project]]\nname='A'\npath='x'\n", "A", "twice"),
        ("[projects]\n", "p.toml", "unknown table"),
        ("x = [", "p.toml", "invalid TOML"),
        ("", "p.toml", "no [[project]]"),
    ],
)
def test_bad_projects_files_name_the_key_and_hint(text: str, where: str, words: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_projects(text, "p.toml")
    assert where in caught.value.where and words in caught.value.message
    assert caught.value.hint


def test_sides_releases_prereleases_nightlies_and_their_torchvision() -> None:
    release = parse_side("2.6.0", "candidate")
    assert release.kind == SideKind.RELEASE and release.torchvision_version() == "0.21.0"
    assert parse_side("2.5.1", "baseline").torchvision_version() == "0.20.1"
    pre = parse_side("2.7.0rc3", "candidate", index="https://x/whl/test/cpu")
    assert pre.kind == SideKind.PRERELEASE and pre.torchvision_version() == "0.22.0rc3"
    nightly = parse_side("nightly-2025-03-01:2.7.0", "candidate")
    assert nightly.torch == "2.7.0.dev20250301" and nightly.kind == SideKind.NIGHTLY
    assert nightly.torchvision_version() == "0.22.0.dev20250301"
    assert parse_side("2.6.0", "candidate", torchvision="0.21.1").torchvision_version() == "0.21.1"
    assert torchvision_for("1.13.1") == ""
    for bad in ("two", "2.6.0+cpu", "nightly-2025-03-01"):
        with pytest.raises(UserError) as caught:
            parse_side(bad, "candidate")
        assert caught.value.where == "--candidate" and caught.value.hint


# ------------------------------------------------------------------ classes


def side(role: Role, status: SideStatus, tests: dict[str, str] | None = None, **kw) -> SideRun:  # type: ignore[no-untyped-def]
    return SideRun(
        project="p",
        role=role,
        torch="2.5.1" if role == Role.BASELINE else "2.6.0",
        status=status,
        tests=tests or {},
        **kw,
    )


B, C = Role.BASELINE, Role.CANDIDATE
OK, FAIL = SideStatus.PASSED, SideStatus.FAILED


def test_a_test_that_passes_on_the_baseline_and_fails_on_the_candidate_is_regressed() -> None:
    got = classify(
        side(B, OK, {"t::a": "passed", "t::b": "passed"}),
        side(
            C,
            FAIL,
            {"t::a": "passed", "t::b": "failed"},
            messages={"t::b": "_pickle.UnpicklingError: Weights only load failed"},
        ),
    )
    assert got.eco_class == EcoClass.REGRESSED and got.new_failures == ("t::b",)
    assert "Weights only load failed" in got.evidence
    assert to_retry(got) == ("t::b",)


def test_fixed_same_pass_same_fail() -> None:
    fixed = classify(side(B, FAIL, {"a": "failed"}), side(C, OK, {"a": "passed"}))
    assert fixed.eco_class == EcoClass.FIXED and to_retry(fixed) == ("a",)
    both = classify(side(B, OK, {"a": "passed"}), side(C, OK, {"a": "passed"}))
    assert both.eco_class == EcoClass.SAME_PASS
    broken = classify(
        side(B, FAIL, {"a": "failed"}, messages={"a": "assert 1 == 2"}),
        side(C, FAIL, {"a": "failed"}, messages={"a": "assert 1 == 2"}),
    )
    assert broken.eco_class == EcoClass.SAME_FAIL


def test_a_candidate_whose_tests_do_not_collect_is_regressed_with_its_error() -> None:
    got = classify(
        side(B, OK, {"a": "passed"}),
        side(C, SideStatus.BROKEN, detail="collection error: No module named 'torch._six'"),
    )
    assert got.eco_class == EcoClass.REGRESSED and "torch._six" in got.evidence


def test_a_command_without_per_test_outcomes_is_judged_by_its_exit_code() -> None:
    got = classify(side(B, OK, exit_code=0), side(C, FAIL, exit_code=1, summary="exit 1"))
    assert got.eco_class == EcoClass.REGRESSED and got.new_failures == (WHOLE,)


@pytest.mark.parametrize(
    "message, kind",
    [
        (
            "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
            SpuriousKind.NETWORK,
        ),
        (
            "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes",
            SpuriousKind.OOM,
        ),
        ("OSError: [Errno 28] No space left on device", SpuriousKind.DISK),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'python'", SpuriousKind.HARNESS),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'tests/data/x.npz'",
            SpuriousKind.HARNESS,
        ),
    ],
)
def test_spurious_failures_carry_their_kind_and_evidence(message: str, kind: SpuriousKind) -> None:
    got = classify(
        side(B, OK, {"a": "passed"}),
        side(C, FAIL, {"a": "failed"}, messages={"a": message}),
    )
    assert got.eco_class == EcoClass.SPURIOUS and got.spurious == kind
    assert message[:40] in got.evidence


def test_a_test_dependency_missing_on_both_sides_is_a_harness_fault() -> None:
    why = "collection error in tests/t.py: ModuleNotFoundError: No module named 'numpy'"
    got = classify(side(B, SideStatus.BROKEN, detail=why), side(C, SideStatus.BROKEN, detail=why))
    assert got.eco_class == EcoClass.SPURIOUS and got.spurious == SpuriousKind.HARNESS
    assert "No module named 'numpy'" in got.evidence
    assert "add it to the project's requires" in got.evidence
    # julius (issue 44): its dev extra's resampy imports pkg_resources, which setuptools provides
    why = "collection error in tests/t.py: ModuleNotFoundError: No module named 'pkg_resources'"
    gone = classify(side(B, SideStatus.BROKEN, detail=why), side(C, SideStatus.BROKEN, detail=why))
    assert gone.spurious == SpuriousKind.HARNESS
    assert "add setuptools<82 to the project's requires (pkg_resources comes from it)" in (
        gone.evidence
    )
    torch_gone = "No module named 'torch._six'"
    same = classify(
        side(B, SideStatus.BROKEN, detail=torch_gone), side(C, SideStatus.BROKEN, detail=torch_gone)
    )
    assert same.eco_class == EcoClass.SAME_FAIL


@pytest.mark.parametrize(
    "why, evidence",
    [
        # the real run's einx and pyro-ppl sdists (2026-11-27): test modules they do not ship
        (
            "collection error in test/test_shapes.py: ModuleNotFoundError: No module named 'conftest'",
            "lacks a test module its tests import (No module named 'conftest')",
        ),
        (
            "collection error in tests/test_generic.py: ModuleNotFoundError: No module named "
            "'tests.common'",
            "lacks a test module its tests import (No module named 'tests.common')",
        ),
        # nflows (a path the sdist lacks) and skorch (setup.cfg's addopts name pytest-cov)
        (
            "pytest usage error (bad option or path): ERROR: file or directory not found: "
            "tests/utils (pytest exit 4): the tests did not run",
            "pytest usage error",
        ),
        (
            "the tests did not run (pytest exit 4)\npython -m pytest: error: unrecognized "
            "arguments: --cov=skorch --cov-report=term-missing",
            "error: unrecognized arguments: --cov=skorch",
        ),
    ],
)
def test_a_test_command_the_source_cannot_run_is_a_harness_fault(why: str, evidence: str) -> None:
    got = classify(side(B, SideStatus.BROKEN, detail=why), side(C, SideStatus.BROKEN, detail=why))
    assert got.eco_class == EcoClass.SPURIOUS and got.spurious == SpuriousKind.HARNESS
    assert evidence in got.evidence
    assert "add it to the project's requires" not in got.evidence


def test_a_configuration_file_pytest_refuses_on_both_sides_is_a_harness_fault() -> None:
    """sparse_autoencoder 1.10.0 in the real run (docs/ecosystem-run.md): today's pytest refuses
    its pyproject (exit 4), no test ran on either side; it was classed same-fail, a verdict."""
    tail = (
        "ERROR: /run/work/sparse_autoencoder/baseline/box/src/pyproject.toml: Cannot use both "
        "[tool.pytest] (native TOML types) and [tool.pytest.ini_options] (string-based INI "
        "format) simultaneously.\n"
    )
    why = "the tests did not run (pytest exit 4)"
    got = classify(
        side(B, SideStatus.BROKEN, detail=why, exit_code=4, output_tail=tail),
        side(C, SideStatus.BROKEN, detail=why, exit_code=4, output_tail=tail),
    )
    assert got.eco_class == EcoClass.SPURIOUS and got.spurious == SpuriousKind.HARNESS
    assert "pyproject.toml: Cannot use both [tool.pytest]" in got.evidence


def test_no_test_collected_on_either_side_is_a_harness_fault() -> None:
    """ctgan, deepecho and deepctr-torch in the real run (docs/ecosystem-run.md): the command
    selected no test (pytest exit 5) on both sides, and the project was classed same-fail,
    a verdict on a project whose tests never ran."""
    why = "0 passed, 0 skipped: no evidence (pytest collected no tests)"
    got = classify(
        side(B, SideStatus.BROKEN, detail=why, exit_code=5),
        side(C, SideStatus.BROKEN, detail=why, exit_code=5),
    )
    assert got.eco_class == EcoClass.SPURIOUS and got.spurious == SpuriousKind.HARNESS
    assert "collected no tests" in got.evidence and "choose a command" in got.evidence
    # a side that ran its tests is not covered by it
    ran = classify(
        side(B, SideStatus.PASSED, {"t[a]": "passed"}),
        side(C, SideStatus.BROKEN, detail=why, exit_code=5),
    )
    assert "both sides: pytest collected no tests" not in ran.evidence


def test_tests_that_broke_before_the_budget_ran_out_still_regress() -> None:
    base = side(B, SideStatus.TIMEOUT, {"f[a]": "passed", "f[b]": "passed"}, detail="budget")
    cand = side(
        C,
        SideStatus.TIMEOUT,
        {"f[a]": "failed", "f[b]": "passed"},
        messages={"f[a]": "_pickle.UnpicklingError: Weights only load failed"},
    )
    got = classify(base, cand)
    assert got.eco_class == EcoClass.REGRESSED and got.new_failures == ("f[a]",)
    assert "before the budget ran out" in got.evidence
    same = classify(base, side(C, SideStatus.TIMEOUT, {"f[a]": "passed"}, detail="budget"))
    assert same.eco_class == EcoClass.SPURIOUS and same.spurious == SpuriousKind.TIMEOUT


def test_a_timeout_or_a_kill_is_spurious() -> None:
    timed = classify(
        side(B, OK, {"a": "passed"}), side(C, SideStatus.TIMEOUT, detail="past its 600 s budget")
    )
    assert timed.eco_class == EcoClass.SPURIOUS and timed.spurious == SpuriousKind.TIMEOUT
    killed = classify(
        side(B, OK, exit_code=0),
        side(C, SideStatus.BROKEN, exit_code=-9, memory_limit="8 GiB (RLIMIT_AS)"),
    )
    assert killed.spurious == SpuriousKind.OOM and "8 GiB" in killed.evidence


def test_one_real_failure_among_spurious_ones_keeps_it_regressed() -> None:
    got = classify(
        side(B, OK, {"a": "passed", "b": "passed"}),
        side(
            C,
            FAIL,
            {"a": "failed", "b": "failed"},
            messages={"a": "ConnectionError: x", "b": "AttributeError: no attribute '_six'"},
        ),
    )
    assert got.eco_class == EcoClass.REGRESSED


def test_the_retry_of_the_regressed_tests_decides_flaky() -> None:
    base = side(B, OK, {"a": "passed", "b": "passed"})
    cand = side(C, FAIL, {"a": "failed", "b": "failed"})
    again_fails = side(C, FAIL, {"a": "failed", "b": "failed"}, retry_of=("a", "b"))
    base_again = side(B, OK, {"a": "passed", "b": "passed"}, retry_of=("a", "b"))
    stays = classify(base, cand, retry_baseline=base_again, retry_candidate=again_fails)
    assert stays.eco_class == EcoClass.REGRESSED
    flips = side(C, FAIL, {"a": "passed", "b": "passed"}, retry_of=("a", "b"))
    flaky = classify(base, cand, retry_baseline=base_again, retry_candidate=flips)
    assert flaky.eco_class == EcoClass.FLAKY and flaky.flipped == ("a", "b")
    base_flips = side(B, FAIL, {"a": "failed", "b": "failed"}, retry_of=("a", "b"))
    assert classify(base, cand, retry_baseline=base_flips).eco_class == EcoClass.FLAKY


def test_a_flaky_test_does_not_hide_the_regressions_that_failed_on_every_retry() -> None:
    """Real run (zuko 1.3.1, 2.5.1 -> 2.6.0): six tests failing with weights_only on the candidate
    and its retry, one unseeded test that passed on the candidate's retry: the project read as
    flaky. Only the flipped test is flaky; the six stay regressed."""
    base = side(B, OK, {"a": "passed", "b": "passed"})
    cand = side(C, FAIL, {"a": "failed", "b": "failed"}, messages={"a": "x", "b": "y"})
    base_again = side(B, OK, {"a": "passed", "b": "passed"}, retry_of=("a", "b"))
    flips = side(C, FAIL, {"a": "passed", "b": "failed"}, retry_of=("a", "b"))
    got = classify(base, cand, retry_baseline=base_again, retry_candidate=flips)
    assert got.eco_class == EcoClass.REGRESSED
    assert got.new_failures == ("b",) and got.flipped == ("a",) and got.messages == {"b": "y"}
    assert "1 test(s) fail only with torch" in got.evidence and "1 more flipped" in got.evidence
    assert to_retry(got) == ("b",)


def test_a_test_that_flips_on_a_later_retry_is_flaky_and_the_report_reads_every_retry(
    tmp_path: Path,
) -> None:
    """Real run (zuko 1.3.1, 2.6.0 -> 2.7.1): an unseeded test failing for 11 of 40 seeds on both
    releases passed on the baseline and its one retry and failed on the candidate and its one
    retry: "regressed". Up to RETRIES retries, a flip on any makes it flaky; the report reads
    every retry's result file."""
    import json

    from torch_matrix.ecosystem.report import build
    from torch_matrix.ecosystem.records import RETRIES, retry_key
    from torch_matrix.ecosystem.results import load

    assert RETRIES >= 3
    base = side(B, OK, {"a": "passed", "b": "passed"})
    cand = side(C, FAIL, {"a": "failed", "b": "passed"})
    stays = side(C, FAIL, {"a": "failed"}, retry_of=("a",))
    base_again = side(B, OK, {"a": "passed"}, retry_of=("a",))
    flips = side(C, OK, {"a": "passed"}, retry_of=("a",))
    first_only = classify(base, cand, retry_baseline=[base_again], retry_candidate=[stays])
    assert first_only.eco_class == EcoClass.REGRESSED
    later = classify(
        base, cand, retry_baseline=[base_again, base_again], retry_candidate=[stays, flips]
    )
    assert later.eco_class == EcoClass.FLAKY and later.flipped == ("a",)
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    (tmp_path / "run.json").write_text(json.dumps({"baseline": {}, "candidate": {}}))
    written = {"baseline": base, "candidate": cand}
    written |= {retry_key("baseline", n): base_again for n in (1, 2)}
    written |= {retry_key("candidate", 1): stays, retry_key("candidate", 2): flips}
    for key, run in written.items():
        (folder / f"{key}.json").write_text(
            json.dumps(dataclasses.replace(run, project="p").to_json())
        )
    loaded = load([tmp_path])
    (row,) = build(loaded.meta, loaded.sides).rows
    assert row.classified.eco_class == EcoClass.FLAKY
    assert sorted(row.sides) == sorted(written)


def test_a_skip_reason_wins() -> None:
    got = classify(side(B, OK), side(C, FAIL), skip_reason="needs a GPU")
    assert got.eco_class == EcoClass.SKIPPED and got.evidence == "needs a GPU"


def test_side_runs_round_trip_through_json_and_refuse_a_newer_schema() -> None:
    run = side(C, FAIL, {"a": "failed"}, messages={"a": "x"}, resolved={"torch": "2.6.0"})
    assert SideRun.from_json(run.to_json()) == run
    with pytest.raises(ValueError, match="newer"):
        SideRun.from_json(run.to_json() | {"schema": 99})
    with pytest.raises(ValueError, match="project"):
        SideRun.from_json({"role": "baseline"})


# ------------------------------------------------------------------ properties

OUTCOMES = st.sampled_from(["passed", "failed", "error", "skipped"])
MESSAGES = st.sampled_from(["assert 1 == 2", "AttributeError: x", "Network is unreachable"])


@st.composite
def side_runs(draw: st.DrawFn, role: Role) -> SideRun:
    status = draw(st.sampled_from([SideStatus.PASSED, SideStatus.FAILED, SideStatus.BROKEN]))
    tests: dict[str, str] = {}
    messages: dict[str, str] = {}
    if status != SideStatus.BROKEN:
        tests = draw(st.dictionaries(st.sampled_from("abcdef"), OUTCOMES, min_size=1))
        failing = [t for t, o in tests.items() if o in ("failed", "error")]
        status = SideStatus.FAILED if failing else SideStatus.PASSED
        messages = {t: draw(MESSAGES) for t in failing}
    return side(role, status, tests, messages=messages, detail="collection error")


def test_a_fixed_test_is_retried_and_one_that_flips_is_flaky_not_fixed() -> None:
    """Real run (tntorch 1.1.2, 2.5.1 -> 2.6.0): its unseeded test_cp_tensor failed once on the
    baseline and the project read as fixed, never retried; by hand it passed on 2.5.1 five times
    of five. A fixed project's fixed tests are retried as a regressed one's are, sides swapped."""
    base = side(B, FAIL, {"a": "failed", "b": "failed"}, messages={"a": "x", "b": "y"})
    cand = side(C, OK, {"a": "passed", "b": "passed"})
    first = classify(base, cand)
    assert first.eco_class == EcoClass.FIXED and to_retry(first) == ("a", "b")
    base_flips = side(B, OK, {"a": "passed", "b": "passed"}, retry_of=("a", "b"))
    cand_again = side(C, OK, {"a": "passed", "b": "passed"}, retry_of=("a", "b"))
    flaky = classify(base, cand, retry_baseline=base_flips, retry_candidate=cand_again)
    assert flaky.eco_class == EcoClass.FLAKY and flaky.flipped == ("a", "b")
    assert "2 of 2 fixed test(s) flipped on retry" in flaky.evidence
    cand_fails = side(C, FAIL, {"a": "failed", "b": "failed"}, retry_of=("a", "b"))
    assert classify(base, cand, retry_candidate=cand_fails).eco_class == EcoClass.FLAKY
    base_steady = side(B, FAIL, {"a": "passed", "b": "failed"}, retry_of=("a", "b"))
    got = classify(base, cand, retry_baseline=base_steady, retry_candidate=cand_again)
    assert got.eco_class == EcoClass.FIXED and got.fixed_tests == ("b",) and got.flipped == ("a",)
    assert "1 test(s) fail only with torch 2.5.1 (1 more flipped" in got.evidence


def swapped(run: SideRun) -> SideRun:
    other = Role.CANDIDATE if run.role == Role.BASELINE else Role.BASELINE
    return SideRun.from_json(run.to_json() | {"role": str(other)})


@settings(max_examples=150, deadline=None)
@given(side_runs(B), side_runs(C))
def test_swapping_the_sides_swaps_regressed_and_fixed(base: SideRun, cand: SideRun) -> None:
    forward = classify(base, cand)
    backward = classify(swapped(cand), swapped(base))
    if forward.eco_class == EcoClass.FIXED:
        assert backward.eco_class in (EcoClass.REGRESSED, EcoClass.SPURIOUS)
        assert backward.new_failures == forward.fixed_tests or backward.spurious
    if forward.eco_class == EcoClass.REGRESSED and not forward.fixed_tests:
        assert backward.eco_class == EcoClass.FIXED
    if forward.eco_class in (EcoClass.SAME_PASS,):
        assert backward.eco_class == forward.eco_class


@settings(max_examples=150, deadline=None)
@given(side_runs(B))
def test_a_side_against_itself_is_never_regressed_or_fixed(base: SideRun) -> None:
    got = classify(base, swapped(base))
    assert got.eco_class in (EcoClass.SAME_PASS, EcoClass.SAME_FAIL, EcoClass.SPURIOUS)


@settings(max_examples=150, deadline=None)
@given(side_runs(B), side_runs(C))
def test_only_a_regressed_or_fixed_project_is_retried(base: SideRun, cand: SideRun) -> None:
    got = classify(base, cand)
    assert bool(to_retry(got)) == (got.eco_class in (EcoClass.REGRESSED, EcoClass.FIXED))
    assert set(to_retry(got)) <= set(got.new_failures) | set(got.fixed_tests)


def test_the_ecosystem_modules_sit_in_one_package_and_architecture_names_each() -> None:
    """The ecosystem mode is one package, torch_matrix/ecosystem/ (docs/ARCHITECTURE.md): each of
    its modules is named in the package's row, so a newcomer finds it from the map; the retry's
    pytest plugin runs in the project's interpreter and so sits with the probe suite."""
    from pathlib import Path

    import ast

    root = Path(__file__).resolve().parent.parent
    rows = {}
    for line in (root / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `") and "/` |" in line:
            rows[line.split("`")[1].rstrip("/")] = line
    assert "ecosystem" in rows, "docs/ARCHITECTURE.md: a row for the ecosystem package"
    package = root / "torch_matrix" / "ecosystem"
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    names = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    assert {"projects", "sides", "runner", "results", "classify", "report"} <= set(names)
    for name in names:
        assert f"`{name}`" in doc, f"torch_matrix/ecosystem/__init__.py: name ecosystem/{name}"
    assert (root / "torch_matrix" / "probes" / "pytest_select.py").is_file()
    probes_doc = ast.get_docstring(
        ast.parse((root / "torch_matrix" / "probes" / "__init__.py").read_text(encoding="utf-8"))
    )
    assert "`pytest_select`" in (probes_doc or "")
    cli_doc = ast.get_docstring(
        ast.parse((root / "torch_matrix" / "cli" / "__init__.py").read_text(encoding="utf-8"))
    )
    for name in ("ecosystem", "ecosystem_report"):
        assert (root / "torch_matrix" / "cli" / f"{name}.py").is_file()
        assert f"`{name}`" in (cli_doc or ""), f"torch_matrix/cli/__init__.py: name cli/{name}"
