"""Cause attribution (torch_matrix.judge.causes): environment failures give advice, never exclusions."""

from __future__ import annotations

from torch_matrix.judge.causes import Cause, EnvironmentKind, attribute
from torch_matrix.pins import requirement_lines, suggest_pins
from torch_matrix.pins.render import render_json, render_requirements, render_text
from torch_matrix.judge.verdict import COMPATIBLE, ENVIRONMENT, INCOMPATIBLE, verdict_of
from tests.factories import make_cell, make_probe, make_result

SETUPTOOLS = "torch.compile failed: backend='inductor' raised: ModuleNotFoundError: No module named 'setuptools'"
NMS = "import torchvision failed: RuntimeError: operator torchvision::nms does not exist"


def _compile_cell(torch, python, status="pass", message=""):
    cell = make_cell(
        torch=torch,
        python=python,
        torchvision="",
        probes=("install_sanity", "torch_compile"),
        required_probes=("install_sanity", "torch_compile"),
    )
    return make_result(
        cell,
        probes=[make_probe("install_sanity"), make_probe("torch_compile", status, message)],
        resolved={"torch": torch, "numpy": "2.2.6"},
    )


def test_an_undeclared_missing_module_is_an_environment_cause_with_a_requirement():
    result = _compile_cell("2.3.1", "3.10", "fail", SETUPTOOLS)
    attribution = attribute(result, result.probe("torch_compile"))
    assert attribution.cause == Cause.ENVIRONMENT
    assert (
        attribution.kind == EnvironmentKind.MISSING_DEPENDENCY
        and attribution.requirement == "setuptools"
    )
    verdict = verdict_of(result)
    assert verdict.kind == ENVIRONMENT and "setuptools" in verdict.reason


def test_a_missing_module_that_the_cell_tests_or_installed_is_a_version_cause():
    result = _compile_cell("2.3.1", "3.10", "fail", "No module named 'numpy'")
    assert attribute(result, result.probe("torch_compile")).cause == Cause.VERSION
    result = _compile_cell("2.3.1", "3.10", "fail", "No module named 'torch._dynamo'")
    assert attribute(result, result.probe("torch_compile")).cause == Cause.VERSION
    assert verdict_of(result).kind == INCOMPATIBLE


def test_torch_and_torchvision_from_different_builds_is_an_environment_cause():
    mixed = make_result(
        torch="2.13.0",
        torchvision="0.28.0",
        resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
        probes=[make_probe("install_sanity", "fail", NMS)],
    )
    attribution = attribute(mixed, mixed.probe("install_sanity"))
    assert (attribution.cause, attribution.kind) == (
        Cause.ENVIRONMENT,
        EnvironmentKind.MISMATCHED_BUILD,
    )
    assert "same index/variant" in attribution.advice
    # The same failure with matching builds is the versions' own.
    matched = make_result(
        torch="2.13.0", torchvision="0.28.0", probes=[make_probe("install_sanity", "fail", NMS)]
    )
    assert attribute(matched, matched.probe("install_sanity")).cause == Cause.VERSION


def test_setuptools_case_gives_advice_scoped_to_the_pythons_that_missed_it_and_no_version_pin():
    """Python 3.10/3.12 x torch 2.3.1/2.4.1: 3.10 misses setuptools (environment), 2.3.1 on 3.12
    is refused by dynamo (the version), 2.4.1 on 3.12 declares setuptools and works."""
    results = [
        _compile_cell("2.3.1", "3.10", "fail", SETUPTOOLS),
        _compile_cell("2.4.1", "3.10", "fail", SETUPTOOLS),
        _compile_cell("2.3.1", "3.12", "unsupported", "torch.compile does not support Python 3.12"),
        _compile_cell("2.4.1", "3.12"),
    ]
    assert [verdict_of(r).kind for r in results] == [
        ENVIRONMENT,
        ENVIRONMENT,
        INCOMPATIBLE,
        COMPATIBLE,
    ]
    suggestion = suggest_pins(results)
    lines = [line.text() for line in requirement_lines(suggestion.recommended)]
    assert not any(
        "python" == pin.package for pin in suggestion.recommended.pins
    )  # no Requires-Python blame
    assert lines == ["torch!=2.3.1"]  # only Python 3.12 has evidence: the marker would say nothing
    (advice,) = suggestion.environment
    assert advice.requirement == 'setuptools; python_version < "3.12"'
    assert advice.cells == ("t2.3.1-py3.10", "t2.4.1-py3.10")
    assert 'setuptools; python_version < "3.12"' in render_text(suggestion)
    assert 'setuptools; python_version < "3.12"' in render_requirements(suggestion)
    assert '"kind": "missing-dependency"' in render_json(suggestion)


def test_a_mismatched_build_makes_no_pin_and_gives_pairing_advice():
    mixed = make_result(
        torch="2.13.0",
        torchvision="0.28.0",
        resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
        probes=[make_probe("install_sanity", "fail", NMS)],
    )
    good = make_result(torch="2.14.1", torchvision="0.29.2")
    suggestion = suggest_pins([mixed, good])
    assert [line.text() for line in requirement_lines(suggestion.recommended)] == []
    (advice,) = suggestion.environment
    assert advice.kind == EnvironmentKind.MISMATCHED_BUILD and advice.requirement == ""
    assert "torch 2.13.0+cpu and torchvision 0.28.0" in advice.advice


def test_a_mismatched_build_plans_the_matched_build_and_its_pass_confirms_the_advice():
    """The find-links +cpu torch next to PyPI's torchvision: the counterfactual keeps that build out."""
    from torch_matrix.plan.counterfactual import plan_counterfactuals

    mixed = make_result(
        torch="2.13.0",
        torchvision="0.28.0",
        resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
        probes=[make_probe("install_sanity", "fail", NMS)],
    )
    (cf,) = plan_counterfactuals(mixed)
    assert cf.id == f"{mixed.cell.id}-cf-matched-build"
    assert (
        cf.requirements == (*mixed.cell.requirements, "torch!=2.13.0+cpu")
        and cf.axes == mixed.cell.axes
    )
    assert cf.probe_subset == (
        "install_sanity",
    )  # the probe the finding concerns; the rest is the original's
    # torchvision is the odd build when only it carries a label
    odd_vision = make_result(
        torch="2.4.1",
        torchvision="0.19.1",
        resolved={"torch": "2.4.1", "torchvision": "0.19.1+cpu"},
        probes=[make_probe("install_sanity", "fail", NMS)],
    )
    assert plan_counterfactuals(odd_vision)[0].requirements[-1] == "torchvision!=0.19.1+cpu"
    matched = make_result(cf, resolved={"torch": "2.13.0", "torchvision": "0.28.0"})
    suggestion = suggest_pins([mixed, matched])
    assert [line.text() for line in requirement_lines(suggestion.recommended)] == []
    (advice,) = suggestion.environment
    assert advice.confirmed_by == (cf.id,)
    assert (
        "2.13.0" in render_text(suggestion).split("Tested versions:")[1].split("\n")[1]
    )  # 2.13.0 is good


def test_a_missing_dependency_plans_the_same_cell_with_it_added_and_its_pass_confirms_the_advice():
    from torch_matrix.plan.counterfactual import counterfactual_of, plan_counterfactuals
    from torch_matrix.plan.followups import DEFAULT_CAP, cap_from, within_cap

    failing = _compile_cell("2.3.1", "3.10", "fail", SETUPTOOLS)
    (cf,) = plan_counterfactuals(failing)
    assert (
        cf.id == "t2.3.1-py3.10-cf-with-setuptools" and counterfactual_of(cf.id) == failing.cell.id
    )
    assert (
        cf.requirements == (*failing.cell.requirements, "setuptools")
        and cf.axes == failing.cell.axes
    )
    assert cf.required_probes == failing.cell.required_probes and "counterfactual" in cf.tags
    assert cf.origin == "counterfactual" and cf.reason == f"{failing.cell.id} with setuptools"
    assert plan_counterfactuals(_compile_cell("2.4.1", "3.12")) == []  # nothing to isolate
    version_failure = _compile_cell(
        "2.3.1", "3.12", "unsupported", "torch.compile does not support Python 3.12"
    )
    assert plan_counterfactuals(version_failure) == []
    # Bounded, and switched off with 0.
    assert cap_from({}) == DEFAULT_CAP and cap_from({"TORCH_MATRIX_FOLLOWUPS": "0"}) == 0
    assert within_cap([cf, cf], 7, 8) == ([cf], 1)
    assert within_cap([cf], 0, 0) == ([], 1)
    # Its result is an ordinary cell: a pass is evidence that 2.3.1 works on 3.10, and confirms the advice.
    passing = make_result(
        cf,
        probes=[make_probe("install_sanity"), make_probe("torch_compile")],
        resolved={"torch": "2.3.1", "setuptools": "80.0.0"},
    )
    assert plan_counterfactuals(passing) == []  # a counterfactual plans none of its own
    results = [
        failing,
        passing,
        _compile_cell("2.3.1", "3.12", "unsupported", "does not support Python 3.12"),
        _compile_cell("2.4.1", "3.12"),
        _compile_cell("2.4.1", "3.10", "fail", SETUPTOOLS),
    ]
    suggestion = suggest_pins(results)
    assert [line.text() for line in requirement_lines(suggestion.recommended)] == [
        'torch; python_version < "3.12"',
        'torch!=2.3.1; python_version >= "3.12"',
    ]
    (advice,) = suggestion.environment
    assert advice.confirmed_by == ("t2.3.1-py3.10-cf-with-setuptools",)
    assert "confirmed" in render_text(suggestion)


def test_a_changed_default_is_a_fail_with_its_workaround_and_advice_not_an_exclusion():
    message = (
        "fails in 3 of 3 runs: changed default: torch.load(path) refuses this checkpoint (UnpicklingError: "
        "Weights only load failed); it loads with weights_only=False"
    )

    def cell(torch, status, text=""):
        probe = make_probe(
            "checkpoint_roundtrip",
            status,
            text,
            evidence={"advice": "load with weights_only=False (torch.load's default changed)"}
            if status == "fail"
            else {},
        )
        return make_result(
            make_cell(torch=torch, torchvision="", probes=("checkpoint_roundtrip",)), probes=[probe]
        )

    old, new = cell("2.5.1", "pass"), cell("2.6.0", "fail", message)
    attribution = attribute(new, new.probe("checkpoint_roundtrip"))
    assert attribution.cause == Cause.VERSION and attribution.kind == "changed-default"
    verdict = verdict_of(new)
    assert (
        verdict.kind == COMPATIBLE and "weights_only=False" in verdict.reason
    )  # the probe itself says fail
    suggestion = suggest_pins([old, new])
    assert [line.text() for line in requirement_lines(suggestion.recommended)] == []
    (advice,) = suggestion.environment
    assert advice.kind == "changed-default" and "weights_only=False" in advice.advice
    assert '"cause": "version"' in render_json(suggestion)


# What checkpoint_roundtrip recorded on the real torch 2.13.0+cpu before it said otherwise: its
# allowlist named the probe's own stand-in class (``check`` on realwheels/a-torch2.13-cpu).
REAL_ADVICE = (
    "load with weights_only=False or torch.serialization.safe_globals / add_safe_globals(["
    "'argparse.Namespace', 'numpy._core.multiarray._reconstruct', 'numpy._core.multiarray.scalar', "
    "'numpy.dtype', 'numpy.dtypes.Float64DType', 'numpy.ndarray', "
    "'torch_matrix.probes.standard.checkpoint_roundtrip.RunConfig']) (torch.load's default changed)"
)


def test_changed_default_advice_names_the_users_types_never_the_probes_own_class():
    message = (
        "changed default: torch.load(path) refuses this checkpoint; it loads with "
        + REAL_ADVICE[10:]
    )
    cell = make_cell(torch="2.13.0", torchvision="", probes=("checkpoint_roundtrip",))
    result = make_result(
        cell,
        probes=[
            make_probe("checkpoint_roundtrip", "fail", message, evidence={"advice": REAL_ADVICE})
        ],
    )
    advice = attribute(result, result.probe("checkpoint_roundtrip")).advice
    assert "probes." not in advice and "RunConfig" not in advice
    assert "add_safe_globals(['argparse.Namespace', 'numpy._core.multiarray._reconstruct'" in advice
    assert "'numpy.ndarray'] + your own classes pickled in the checkpoint)" in advice
    assert "probes." not in verdict_of(result).reason
    suggestion = suggest_pins([result])
    for text in (render_text(suggestion), render_json(suggestion), render_requirements(suggestion)):
        assert "torch_matrix.probes.standard" not in text and "your own classes" in text


def test_a_missing_module_from_another_distribution_asks_for_that_distribution():
    """torch 2.1's torch.compile imports pkg_resources (real wheels, Python 3.11): setuptools brings it."""
    failing = _compile_cell(
        "2.1.0", "3.11", "fail", "ModuleNotFoundError: No module named 'pkg_resources'"
    )
    (attribution,) = verdict_of(failing).environment.values()
    assert attribution.requirement == "setuptools<82"  # 82.0.0 removed pkg_resources
    assert "`pkg_resources` (from setuptools<82)" in attribution.advice
    # With a setuptools that has no pkg_resources installed it is still the environment's.
    newer = make_result(
        failing.cell, probes=failing.probes, resolved={"torch": "2.1.0", "setuptools": "84.2.1"}
    )
    assert verdict_of(newer).kind == ENVIRONMENT
    older = make_result(
        failing.cell, probes=failing.probes, resolved={"torch": "2.1.0", "setuptools": "81.0.0"}
    )
    assert verdict_of(older).kind == INCOMPATIBLE


def test_the_release_advised_as_a_cap_is_the_newest_by_pep_440_not_by_text():
    """A pre-release is older than its release (2.0.0rc1 < 2.0.0) and 10.0 is newer than 9.0: the
    advice caps at the newest release seen shipping the module, and names the cell that showed it
    (the text-split ordering this replaced advised `<=2.0.0rc1`, excluding 2.0.0 that ships it)."""
    from torch_matrix.judge.causes import dropped_advice

    found = {
        "module": "pkg_resources",
        "distribution": "setuptools",
        "installed": "82.0.0",
        "torch": "2.5.1",
        "provided_in": [
            {"version": "2.0.0rc1", "cell": "rc"},
            {"version": "2.0.0", "cell": "final"},
            {"version": "1.9", "cell": "old"},
        ],
    }
    advice = dropped_advice(found)
    assert "cap setuptools<=2.0.0 " in advice and "(cell final)" in advice, advice
    found["provided_in"] = [{"version": "9.0", "cell": "nine"}, {"version": "10.0", "cell": "ten"}]
    advice = dropped_advice(found)
    assert "cap setuptools<=10.0 " in advice and "(cell ten)" in advice, advice


def test_a_dropped_module_keeps_the_newest_providers_when_more_than_five_shipped_it():
    from torch_matrix.judge.runcontext import dropped_provider

    here = make_result(make_cell(id="here"), resolved={"torch": "2.5.1", "setuptools": "82.0.0"})
    seen = [(f"{v}.0", f"c{v}") for v in (3, 4, 5, 6, 7, 8, 9, 10, 11)]
    found = dropped_provider(here, "pkg_resources", {"pkg_resources": {"setuptools": seen}})
    assert found is not None
    assert [p["version"] for p in found["provided_in"]] == ["11.0", "10.0", "9.0", "8.0", "7.0"]


def test_pytest_refusing_its_options_after_an_undeclared_extra_is_the_installs_to_fix():
    """Seen on a real project (docs/corpus.md): `install = [".[test]"]` copied from
    torch-fourier-shift's CI, whose 0.6.0 moved `test` to a dependency group. uv warned `does not
    have an extra named test`, pytest-cov was never installed and pytest refused `--cov` (exit 4).
    The advice said "fix the test suite"; it names the extra and says to name the packages."""
    message = (
        "pytest usage error (bad option or path): pytest: error: unrecognized arguments: --cov "
        "--cov-report=xml (pytest exit 4): the tests did not run"
    )
    probe = make_probe("tests", "error", message, evidence={"pytest_exit": 4}, isolation="command")
    warned = (
        " + torch==2.6.0\nwarning: The package `torch-fourier-shift @ file:///p` does not have an "
        "extra named `test`"
    )
    cause = attribute(make_result(torch="2.6.0", probes=[probe], message=warned), probe)
    assert cause.cause == Cause.ENVIRONMENT and cause.kind == EnvironmentKind.TESTS_DID_NOT_RUN
    assert "the extra `test`, which the project does not declare" in cause.advice, cause.advice
    assert "fix the test suite" not in cause.advice
    assert "unrecognized arguments: --cov" in cause.advice
    # without uv's warning the suite is still the one to fix
    plain = attribute(make_result(torch="2.6.0", probes=[probe]), probe)
    assert "fix the test suite" in plain.advice
