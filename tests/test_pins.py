"""Unit and property tests for torch_matrix.pins: specifiers, markers, answers on random grids."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from torch_matrix.pins import (
    PYTHON,
    Condition,
    PinPolicy,
    build_specifiers,
    merge_specifiers,
    observe,
    package_axes,
    package_pins,
    requirement_lines,
    suggest_pins,
    version_evidence,
)
from torch_matrix.vocab.records import INSTALL_ERROR, UNSATISFIABLE
from tests.factories import make_probe, make_result
from tests.pins_grids import PAIRED_TORCHVISION, cell

V = Version


# ----------------------------------------------------------------------------- specifiers

TESTED_ONLY = PinPolicy.TESTED_ONLY


def test_by_default_each_bad_version_is_excluded_alone_and_untested_ones_stay_admitted():
    specs = build_specifiers([V("1.12.1")], [V("1.12.0")])
    assert specs == ("!=1.12.0",)  # not >=1.12.1: that would exclude 1.11.0 and every older release
    allowed = SpecifierSet(",".join(specs))
    assert (
        allowed.contains("1.11.0") and allowed.contains("1.8.1") and not allowed.contains("1.12.0")
    )
    specs = build_specifiers([V("1.7.0"), V("1.13.1")], [V("1.6.0"), V("2.0.2"), V("2.1.0")])
    assert specs == ("!=1.6.0", "!=2.0.2", "!=2.1.0")
    assert SpecifierSet(",".join(specs)).contains("2.0.0")  # untested: admitted, listed as untested


def test_tested_only_policy_rounds_bad_versions_below_and_above_into_bounds():
    specs = build_specifiers(
        [V("1.7.0"), V("1.8.1"), V("1.13.1")],
        [V("1.6.0"), V("1.12.0"), V("2.0.2"), V("2.1.0")],
        policy=TESTED_ONLY,
    )
    assert specs == (">=1.7", "!=1.12.0", "<2")


def test_tested_only_policy_collapses_a_run_of_bad_patches_to_a_series():
    specs = build_specifiers(
        [V("1.11.0"), V("1.13.1")], [V("1.12.0"), V("1.12.1")], policy=TESTED_ONLY
    )
    assert specs == ("!=1.12.*",)
    assert build_specifiers([V("1.11.0"), V("1.12.1")], [V("1.12.0")], policy=TESTED_ONLY) == (
        "!=1.12.0",
    )
    assert build_specifiers([V("1.11.0"), V("1.13.1")], [V("1.12.0"), V("1.12.1")]) == (
        "!=1.12.0",
        "!=1.12.1",
    )


def test_tested_only_bound_stays_exact_when_a_good_version_shares_the_series():
    assert build_specifiers([V("2.5.0")], [V("2.5.1")], policy=TESTED_ONLY) == ("<2.5.1",)
    assert build_specifiers([V("2.5.1")], [V("2.5.0")], policy=TESTED_ONLY) == (">=2.5.1",)


def test_python_versions_are_excluded_as_series():
    specs = build_specifiers([V("3.10"), V("3.11"), V("3.13")], [V("3.9"), V("3.12")], python=True)
    assert specs == ("!=3.9.*", "!=3.12.*")
    assert not SpecifierSet(",".join(specs)).contains("3.12.4")
    assert SpecifierSet(",".join(specs)).contains("3.8.10")  # untested: admitted
    specs = build_specifiers(
        [V("3.10"), V("3.11"), V("3.13")], [V("3.9"), V("3.12")], python=True, policy=TESTED_ONLY
    )
    assert specs == (">=3.10", "!=3.12.*")


def test_no_bad_versions_means_no_specifier():
    assert build_specifiers([V("1.0")], []) == ()


def test_merge_keeps_the_tighter_bound_and_drops_redundant_exclusions():
    assert merge_specifiers([">=1.7.0"], [">=1.8", "!=1.12.0"]) == (">=1.8", "!=1.12.0")
    assert merge_specifiers([">=2.0", "!=1.12.0"], ["<2.6"]) == (">=2.0", "<2.6")
    assert merge_specifiers(["~=2.1"], ["!=2.2.0"]) == ("~=2.1", "!=2.2.0")


def test_merge_folds_an_inclusive_bound_excluded_at_its_own_version():
    """``>=X,!=X`` is ``>X`` and ``<=X,!=X`` is ``<X``: one version never gets both a bound and its
    exclusion (a window's start edge merged with a tested bad release printed both)."""
    assert merge_specifiers([">=2.2"], ["!=2.2.0", "!=2.3.1"]) == (">2.2", "!=2.3.1")
    assert merge_specifiers(["<=2.0.0", "!=1.13.1"], ["!=2.0.0"]) == ("!=1.13.1", "<2.0.0")
    assert merge_specifiers([">=1.5", "!=1.5", "<=1.9", "!=1.9"], []) == (">1.5", "<1.9")
    assert merge_specifiers([">=1.5", "!=1.5.*"], []) == (">=1.5", "!=1.5.*")  # not the same set
    assert merge_specifiers([">=1.5"], ["!=1.6"]) == (">=1.5", "!=1.6")


versions = st.builds(
    lambda a, b, c: V(f"{a}.{b}.{c}"), st.integers(0, 3), st.integers(0, 14), st.integers(0, 3)
)


@given(st.sets(versions, max_size=8), st.sets(versions, max_size=8))
def test_specifiers_admit_every_good_and_exclude_every_bad(good, bad):
    bad = bad - good
    specs = SpecifierSet(",".join(build_specifiers(good, bad)))
    assert all(specs.contains(v) for v in good)
    assert not any(specs.contains(v) for v in bad)


@given(
    st.lists(
        st.sampled_from([">=1.2", ">=1.5", "<2.1", "<3", "!=1.6.0", "!=2.5.0", "<=2.0.0", ">1.5"]),
        max_size=4,
    ),
    st.lists(
        st.sampled_from(
            [">=1.3", "<2.0", "!=1.7.1", "!=0.9.0", ">=1.5", "!=1.5", "!=2.0", "!=1.2"]
        ),
        max_size=3,
    ),
    st.lists(versions, min_size=1, max_size=10),
)
def test_merge_is_the_intersection(existing, added, probes):
    merged = SpecifierSet(",".join(merge_specifiers(existing, added)))
    both = SpecifierSet(",".join(existing + added))
    assert all(merged.contains(v) == both.contains(v) for v in probes)


# ----------------------------------------------------------------------------- markers


def test_python_condition_markers_partition_every_python_version():
    tested = (V("3.9"), V("3.10"), V("3.12"), V("3.13"))
    for members in ([V("3.12")], [V("3.9"), V("3.13")], [V("3.10"), V("3.12")], [V("3.13")]):
        condition = Condition(PYTHON, tuple(members), tested)
        inside, outside = Marker(condition.marker()), Marker(condition.complement().marker())
        for minor in range(6, 16):
            env = {"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0"}
            assert inside.evaluate(env) != outside.evaluate(env), (members, minor)
        for version in tested:
            env = {"python_version": str(version), "python_full_version": f"{version}.0"}
            assert inside.evaluate(env) == (version in members)


def test_single_python_uses_equality_marker():
    tested = (V("3.10"), V("3.11"), V("3.12"))
    assert Condition(PYTHON, (V("3.11"),), tested).marker() == 'python_version == "3.11"'
    assert Condition(PYTHON, (V("3.10"), V("3.12")), tested).marker() == 'python_version != "3.11"'


# ----------------------------------------------------------------------------- evidence


def test_local_labels_are_stripped_and_axis_specifiers_use_the_installed_version():
    results = [cell("2.5.1", local="cu124", numpy=("<2", "1.26.4"), torchvision="")]
    (observation,), _, _ = observe(results)
    assert observation.value("torch") == V("2.5.1")
    assert observation.value("numpy") == V("1.26.4")
    assert package_axes(results) == ("torch", "numpy")


def test_unsupported_counts_by_the_cell_policy():
    needs_compile = make_result(
        torch="1.13.1",
        torchvision="",
        probes=[make_probe("torch_compile", "unsupported")],
        required_probes=("torch_compile",),
    )
    optional = make_result(
        torch="1.13.1",
        python="3.10",
        torchvision="",
        probes=[make_probe("torch_compile", "unsupported")],
        required_probes=("torch_compile",),
        policy={"unsupported": "pass", "skip": "pass"},
    )
    assert suggest_pins([needs_compile]).counts["incompatible"] == 1
    assert suggest_pins([optional]).counts["compatible"] == 1


# ----------------------------------------------------------------------------- random grids

TORCH = ["1.11.0", "1.12.0", "1.12.1", "1.13.1", "2.0.1", "2.1.2"]
PYTHONS = ["3.9", "3.10", "3.11", "3.12"]
NUMPY = [("<2", "1.26.4"), (">=2", "2.0.2")]
OUTCOMES = ["good", "bad", "error", "unsat"]


@st.composite
def grids(draw):
    torches = draw(st.lists(st.sampled_from(TORCH), min_size=1, max_size=4, unique=True))
    pythons = draw(st.lists(st.sampled_from(PYTHONS), min_size=1, max_size=3, unique=True))
    numpys = draw(st.sampled_from([[None], NUMPY]))
    variants = draw(st.sampled_from([["default"], ["cu118", "cu124"]]))
    paired = draw(st.booleans())
    results = []
    for torch in torches:
        for python in pythons:
            for numpy in numpys:
                for variant in variants:
                    outcome = draw(st.sampled_from(OUTCOMES))
                    tv = PAIRED_TORCHVISION[torch] if paired else ""
                    if outcome in ("error", "unsat"):
                        extras = {"numpy": numpy[0]} if numpy else None
                        results.append(
                            make_result(
                                torch=torch,
                                python=python,
                                variant=variant,
                                torchvision=tv,
                                extras=extras,
                                status=INSTALL_ERROR if outcome == "error" else UNSATISFIABLE,
                                message=outcome,
                            )
                        )
                    else:
                        results.append(
                            cell(
                                torch,
                                python,
                                variant=variant,
                                torchvision=tv,
                                numpy=numpy,
                                fail="training_step" if outcome == "bad" else "",
                                message="loss is nan",
                            )
                        )
    return results


def _check_requirement_lines(answer):
    for line in requirement_lines(answer):
        parsed = Requirement(line.text())
        assert str(parsed.specifier) == str(SpecifierSet(",".join(line.specifiers)))


def _released(results):
    """Every release the index knows: the tested ones plus untested ones around and between."""
    extra = {
        "torch": ["1.8.1", "1.10.2", "1.12.2", "2.0.0", "2.2.0", "2.9.0"],
        "torchvision": ["0.9.1", "0.16.0"],
        "numpy": ["1.24.0", "2.1.0"],
    }
    released = {}
    for package in package_axes(results):
        tested = {str(r.install.resolved.get(package, "")) for r in results} - {""}
        released[package] = sorted(tested | set(extra.get(package, [])), key=Version)
    return released


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_answers_never_admit_a_bad_cell_they_do_not_name_and_never_lose_a_good_one(results):
    suggestion = suggest_pins(results)
    observations, _, _ = observe(results)
    assert suggestion.recommended.expressible
    for answer in suggestion.answers:
        assert answer.lost == ()
        unresolved = set(answer.unresolved)
        for observation in observations:
            if observation.good:
                assert answer.admits(observation), (answer.describe(), observation.cell_id)
            else:
                assert answer.admits(observation) == (observation.cell_id in unresolved), (
                    answer.describe(),
                    observation.cell_id,
                )
        if answer.expressible:
            _check_requirement_lines(answer)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids(), st.sampled_from(list(PinPolicy)))
def test_no_suggested_pin_excludes_a_version_present_in_a_compatible_cell(results, policy):
    """Property (i): whatever the grid, every requirement line (under its marker) of the safe answer
    and the Requires-Python advice admit every version of a compatible cell. The pinned answer
    differs only by trade-offs (an extras axis interacting with another package): it excludes a
    compatible cell only when a trade-off line names it among the working pairs it gives up."""
    suggestion = suggest_pins(results, policy=policy)
    observations, _, _ = observe(results)
    good = [o for o in observations if o.good]
    pinned = suggestion.recommended
    named = [pair for line in requirement_lines(pinned) for pair in line.gives_up]
    for o in good:
        assert pinned.admits(o) == (o.cell_id not in pinned.lost), o.cell_id
        if o.cell_id in pinned.lost:  # its pair of values is named ("torch 1.11.0 x numpy 2.0.2 [")
            pairs = {
                f"{a} {o.value(a)} x {b} {o.value(b)} ["
                for a in o.values
                for b in o.values
                if a != b
            }
            assert suggestion.traded is pinned and any(
                text.startswith(pair) for text in named for pair in pairs
            ), (o.cell_id, named)
    assert (suggestion.traded is None) == (not suggestion.tradeoffs)
    answer = suggestion.safe
    assert answer.lost == ()
    for line in requirement_lines(answer):
        allowed = SpecifierSet(",".join(line.specifiers))
        for o in good:
            version = o.value(line.package)
            if version is not None and line.applies(o.value(PYTHON)):
                assert allowed.contains(version, prereleases=True), (line.text(), o.cell_id)
    python_advice = [
        spec
        for pin in answer.pins
        if pin.package == PYTHON and pin.condition is None
        for spec in pin.specifiers
    ]
    for o in good:
        assert SpecifierSet(",".join(python_advice)).contains(o.value(PYTHON)), (
            python_advice,
            o.cell_id,
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_admit_untested_never_bounds_an_untested_release(results):
    """Property (ii): with ``--policy admit-untested``, a release the index has but no cell tested
    is admitted by every requirement line, and the coverage lists it as untested. (The default,
    ``proven``, excludes untested releases only inside a window whose edges were tested:
    tests/test_followups.py holds it to never covering a passing release.)"""
    released = _released(results)
    suggestion = suggest_pins(results, released, PinPolicy.ADMIT_UNTESTED)
    observations, _, _ = observe(results)
    for line in requirement_lines(suggestion.recommended):
        tested = {o.value(line.package) for o in observations}
        allowed = SpecifierSet(",".join(line.specifiers))
        for raw in released.get(line.package, []):
            if Version(raw) not in tested:
                assert allowed.contains(raw, prereleases=True), (line.text(), raw)
    for package, cover in suggestion.coverage.items():
        assert cover.excluded_untested == ()
        untested = {
            v
            for v in released[package]
            if Version(v) not in {o.value(package) for o in observations}
        }
        assert set(cover.untested + cover.newer + cover.older) == untested


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_per_package_pins_exclude_bad_versions_and_admit_good_ones(results):
    observations, _, _ = observe(results)
    axes = list(package_axes(results)) + [PYTHON]
    evidence = version_evidence(observations, axes)
    for axis, specs in package_pins(observations, axes).items():
        assert all(spec.startswith("!=") for spec in specs)  # never a bound over untested releases
        specifier = SpecifierSet(",".join(specs))
        assert all(specifier.contains(v) for v in evidence[axis].good + evidence[axis].mixed)
        assert not any(specifier.contains(v) for v in evidence[axis].bad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_cells_without_evidence_change_no_pin(results):
    evidence_only = [r for r in results if r.install.status == "installed"]
    with_all = suggest_pins(results).recommended
    without = suggest_pins(evidence_only).recommended
    assert [line.text() for line in requirement_lines(with_all)] == [
        line.text() for line in requirement_lines(without)
    ]


def test_when_nothing_works_torch_takes_the_blame_with_a_warning():
    from torch_matrix.pins.render import render_text

    results = [
        cell(t, "3.11", torchvision="", fail="training_step", message="nan")
        for t in ("2.4.1", "2.5.1")
    ]
    suggestion = suggest_pins(results)
    assert [line.text() for line in requirement_lines(suggestion.recommended)] == [
        "torch!=2.4.1,!=2.5.1"
    ]
    assert "no compatible cell at all" in render_text(suggestion)


def test_a_python_that_fails_everywhere_becomes_requires_python_advice():
    results = [
        cell(t, py, torchvision="", fail="install_sanity" if py == "3.13" else "", message="no _C")
        for t in ("2.4.1", "2.5.1")
        for py in ("3.11", "3.12", "3.13")
    ]
    recommended = suggest_pins(results).recommended
    assert [(pin.package, pin.specifiers) for pin in recommended.pins] == [
        ("python", ("!=3.13.*",))
    ]
    assert requirement_lines(recommended) == []


def test_coverage_separates_admitted_untested_from_excluded_untested():
    from tests.pins_grids import numpy2_range

    released = {
        "numpy": ["1.25.2", "1.26.4", "2.0.0", "2.0.2", "2.1.0", "2.2.0rc1"],
        "torch": ["2.1.2", "2.2.0", "2.2.2", "2.3.1", "2.4.0"],
    }
    cov = suggest_pins(numpy2_range(), released, pin_tradeoffs=False).coverage
    assert cov["numpy"].older == ("1.25.2",)
    # numpy 2.0.2 works with torch 2.3.1: no safe pin excludes it, so nothing untested is excluded either.
    assert cov["numpy"].excluded_untested == ()
    assert (cov["numpy"].untested, cov["numpy"].newer) == (
        ("2.0.0",),
        ("2.1.0",),
    )  # no pre-releases
    assert (cov["torch"].untested, cov["torch"].newer) == (("2.2.0",), ("2.4.0",))
    # By default the rule pins `numpy<2` (every numpy 2.x tested with torch < 2.3 fails): the
    # untested 2.x releases are excluded by that bound, and coverage says so.
    pinned = suggest_pins(numpy2_range(), released).coverage["numpy"]
    assert (pinned.excluded_untested, pinned.untested, pinned.newer) == (("2.0.0", "2.1.0"), (), ())


def test_a_find_links_build_in_a_default_cell_counts_as_its_own_variant():
    """A local +cpu wheel picked up through find-links is not PyPI's build of that release."""
    from torch_matrix.pins import cell_values

    local = make_result(torch="2.13.0", resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"})
    pypi = make_result(torch="2.14.1", resolved={"torch": "2.14.1", "torchvision": "0.29.2"})
    labelled = make_result(
        torch="2.5.1",
        variant="cu124",
        resolved={"torch": "2.5.1+cu124", "torchvision": "0.20.1+cu124"},
    )
    assert cell_values(local, ["torch"])["variant"] == "cpu"
    assert cell_values(local, ["torch"])["torch"] == Version("2.13.0")
    assert cell_values(pypi, ["torch"])["variant"] == "default"
    assert cell_values(labelled, ["torch"])["variant"] == "cu124"


def test_the_reason_names_a_find_links_build_so_nobody_blames_the_release():
    from torch_matrix.pins import probe_summary

    bad = make_result(
        torch="2.13.0",
        resolved={"torch": "2.13.0+cpu", "torchvision": "0.28.0"},
        probes=[
            make_probe(
                "install_sanity", status="fail", message="operator torchvision::nms does not exist"
            )
        ],
    )
    assert probe_summary(bad, "install_sanity").startswith("[tested with torch 2.13.0+cpu]")
    plain = make_result(
        torch="2.14.1",
        resolved={"torch": "2.14.1"},
        probes=[make_probe("install_sanity", status="fail", message="x")],
    )
    assert "tested with" not in probe_summary(plain, "install_sanity")


# ---------------------------------------------------------------- existing environments (torch-matrix check)


def _existing(result):
    import dataclasses

    from torch_matrix.vocab.records import ORIGIN_EXISTING

    cell = dataclasses.replace(
        result.cell, id="env-" + result.cell.id + "-host-abc123", origin=ORIGIN_EXISTING
    )
    return dataclasses.replace(result, cell=cell)


def test_a_failing_existing_environment_is_never_turned_into_a_pin():
    """The only evidence for torch 2.11.0 is a user's environment that fails: no torch!=2.11.0."""
    from torch_matrix.pins.render import render_json, render_text

    env = _existing(
        make_result(
            torch="2.11.0",
            torchvision="0.26.0",
            variant="cu130",
            resolved={"torch": "2.11.0+cu130", "torchvision": "0.26.0"},
            probes=[make_probe("install_sanity", status="fail", message="stray libcudnn")],
        )
    )
    good = make_result(torch="2.10.0", torchvision="0.25.0")
    suggestion = suggest_pins([env, good])
    assert suggestion.recommended.pins == ()
    assert requirement_lines(suggestion.recommended) == []
    assert [note.cell_id for note in suggestion.not_pinned] == [env.cell.id]
    assert "existing environment" in suggestion.not_pinned[0].reason
    assert (
        "[tested with torch 2.11.0+cu130]" not in suggestion.not_pinned[0].reason
    )  # variant cu130 is its label
    assert "stray libcudnn" in suggestion.not_pinned[0].reason
    text = render_text(suggestion)
    assert "1 incompatible existing environment(s) not pinned" in text and env.cell.id in text
    assert json.loads(render_json(suggestion))["not_pinned"][0]["cell"] == env.cell.id


def test_a_working_existing_environment_is_evidence_like_a_matrix_cell_of_its_build():
    """A user's torch 2.11.0+cu130 environment that works weighs exactly what a cu130 matrix cell would:
    its local label is its variant, its versions count as seen working."""
    from torch_matrix.pins import cell_values

    matrix_cell = make_result(
        torch="2.11.0",
        torchvision="0.26.0",
        variant="cu130",
        resolved={"torch": "2.11.0+cu130", "torchvision": "0.26.0"},
    )
    env = _existing(matrix_cell)
    assert cell_values(env, ["torch"]) == cell_values(matrix_cell, ["torch"])
    assert cell_values(env, ["torch"])["variant"] == "cu130"
    bad = make_result(
        torch="2.9.0",
        torchvision="0.24.0",
        probes=[make_probe("install_sanity", status="fail", message="x")],
    )
    other = make_result(torch="2.10.0", torchvision="0.25.0")
    with_env = suggest_pins([env, bad, other])
    with_matrix = suggest_pins([matrix_cell, bad, other])
    assert with_env.not_pinned == () and with_env.counts == with_matrix.counts
    assert with_env.recommended.describe() == with_matrix.recommended.describe()
    assert with_env.recommended.lost == ()
    assert all(Version("2.11.0") in pin.specifier_set for pin in with_env.recommended.pins)
    # 2.9.0 failed on the default build only, and no cell ran it on cu130: held there (#42).
    assert [pin.describe() for pin in with_env.variant_only()] == [
        pin.describe() for pin in with_matrix.variant_only()
    ]


def test_a_failing_existing_environment_leaves_a_matrix_cells_pin_alone():
    """The same break in a matrix cell is evidence; the existing environment adds nothing to it."""
    bad = make_result(
        torch="1.12.0",
        torchvision="0.13.0",
        probes=[make_probe("install_sanity", status="fail", message="cuda at import")],
    )
    env = _existing(bad)
    good = make_result(torch="1.12.1", torchvision="0.13.1")
    with_env = suggest_pins([bad, env, good]).recommended
    without = suggest_pins([bad, good]).recommended
    assert with_env.describe() == without.describe()
    assert Version("1.12.0") not in with_env.pins_for("torch")[0].specifier_set


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_every_exclusion_names_a_failing_cell_and_a_true_counterfactual_or_says_unconfirmed(
    results,
):
    from torch_matrix.pins.windows import COMPANIONS

    observations, _, _ = observe(results)
    by_id = {o.cell_id: o for o in observations}
    for pin in suggest_pins(results).recommended.pins:
        for exclusion in pin.exclusions:
            if exclusion.paired_with:
                continue
            failing = by_id[exclusion.failing_cell]
            assert not failing.good and exclusion.failing_cell in exclusion.cells
            assert str(failing.value(exclusion.package)) == exclusion.version
            if not exclusion.confirmed:
                assert exclusion.counterfactual().startswith("unconfirmed")
                continue
            passing = by_id[exclusion.passing_cell]
            assert (
                passing.good and str(passing.value(exclusion.package)) == exclusion.passing_version
            )
            free = {exclusion.package} | COMPANIONS.get(exclusion.package, set())
            assert all(
                failing.value(a) == passing.value(a) for a in failing.values if a not in free
            )
            assert "all else equal, passes" in exclusion.counterfactual()


def test_real_counterfactual_text_for_the_yolo_run():
    from tests.test_pins_golden import _suggest

    (torch,) = _suggest("real_yolo_run").recommended.pins_for("torch")[0].exclusions
    assert torch.counterfactual() == (
        "1.12.0 fails lazy_cuda_init [t1.12.0-py3.10-nplt2]; 1.12.1, all else "
        "equal, passes [t1.12.1-py3.10-nplt2]"
    )


def test_a_run_whose_cells_after_the_evidence_are_all_unsatisfiable_never_says_none_needed():
    """The false all-clear of issue 33: the only grid cell after the working one (torch 1.10.2)
    was unsatisfiable; the pins must say torch is untested beyond 1.8.1, not "none needed"."""
    from torch_matrix.pins.render import render_text, suggestion_to_json

    results = [
        make_result(torch="1.8.1", torchvision="0.9.1", python="3.9"),
        make_result(
            torch="1.10.2",
            torchvision="",
            python="3.9",
            status="unsatisfiable",
            message="no torchvision paired with torch 1.10.2",
        ),
        make_result(torch="1.11.0", torchvision="", python="3.9", status="error", message="killed"),
    ]
    suggestion = suggest_pins(results)
    (line,) = suggestion.untested
    assert line.startswith("torch after 1.8.1 untested (py3.9)")
    assert "1.10.2 unsatisfiable: no torchvision paired" in line and "1.11.0 error" in line
    text = render_text(suggestion)
    assert "Untested beyond the evidence" in text and line in text
    assert suggestion_to_json(suggestion)["untested_beyond"] == [line]
    # A newest cell with evidence leaves nothing untested.
    assert suggest_pins(results[:1]).untested == ()
    failing_last = [*results, make_result(torch="1.12.0", torchvision="", python="3.9")]
    assert suggest_pins(failing_last).untested == ()


def test_no_evidence_is_never_an_all_clear(tmp_path, capsys):
    """Every cell unsatisfiable or without evidence (installs that all failed): `pins` said
    "pins: none needed" and exited 0, and so did the run's report. Now the pins line says no cell
    was seen working or failing, and why, and both commands exit non-zero; one compatible cell
    makes "none needed" true again."""
    from tests.factories import make_cell, make_result
    from torch_matrix import cli
    from torch_matrix.world.results import write_result

    run = tmp_path / "run"
    failed = make_result(
        make_cell(torch="2.4.0", torchvision=""),
        status="error",
        message="error: Failed to build `toy @ file:///x`: Multiple top-level packages",
    )
    no_wheel = make_result(
        make_cell(torch="2.3.0", torchvision=""), status="unsatisfiable", message="no wheel"
    )
    for result in (failed, no_wheel):
        write_result(result, run / "cells")
    assert cli.main(["pins", str(run), "--no-coverage", "--out", str(tmp_path / "p")]) == 1
    out, _ = capsys.readouterr()
    assert "none needed" not in out, out
    assert "pins: none proven: no cell was seen working or failing" in out, out
    assert "1 without evidence (t2.4.0-py3.11: error: Failed to build" in out, out
    assert "1 unsatisfiable" in out
    assert cli.main(["report", str(run), "--pins"]) == 1
    _, err = capsys.readouterr()
    assert "none needed" not in err and "none proven" in err, err

    write_result(make_result(make_cell(torch="2.5.0", torchvision="")), run / "cells")
    assert cli.main(["pins", str(run), "--no-coverage", "--out", str(tmp_path / "p")]) == 0
    out, _ = capsys.readouterr()
    assert "pins: none needed" in out, out


def test_pins_of_a_results_directory_use_that_runs_spec(tmp_path, monkeypatch, capsys):
    """`torch-matrix pins RESULTS` run from elsewhere read the spec found there (or the built-in
    default's range): the per-target files of two hardware cases held only `torch!=2.7.1` and a
    false "No release of the spec's range runs here". It now reads the spec the run planned its
    cells with (planned-cells.json), and `report --pins` the same."""
    from tests.factories import make_cell, make_result
    from torch_matrix import cli
    from torch_matrix.world import specfile
    from torch_matrix.world.results import write_result
    from torch_matrix.world.runplan import RunPlan, write_plan

    project = tmp_path / "project"
    project.mkdir()
    run_spec = project / "matrix.toml"
    offline = (tmp_path / "no-index").as_uri()  # nothing to read: offline, the spec is what counts
    run_spec.write_text(
        f'name = "mine"\ntorch = [">=2.8"]\n[index]\ndefault = "{offline}"\nextra = []\n'
    )
    run = tmp_path / "run"
    cell = make_cell(torch="2.8.0", torchvision="")
    write_result(make_result(cell), run / "cells")
    write_plan(run, RunPlan(cells=(cell,), spec=str(run_spec)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "matrix.toml").write_text('name = "other"\ntorch = ["2.1.0"]\n')
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("TORCH_MATRIX_SPEC", raising=False)
    asked: list[object] = []
    real = specfile.load_spec

    def spy(path=None, *args, **kwargs):
        asked.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(specfile, "load_spec", spy)
    cli.main(["pins", str(run), "--out", str(tmp_path / "p")])
    assert asked and all(str(path) == str(run_spec) for path in asked), asked
    asked.clear()
    cli.main(["report", str(run), "--pins"])
    assert asked and all(str(path) == str(run_spec) for path in asked), asked
    capsys.readouterr()
