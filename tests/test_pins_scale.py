"""Pins at scale: the indexed search gives the answers of a naive scan, on grids up to 2,000 cells.

``torch_matrix.pins`` keeps cell sets as bit masks per distinct (axis, value) and decides each
specifier once per distinct version. The reference here is the plain definition: an atom
excludes the cells it ``covers`` (one scan per atom), an answer admits a cell when fresh
``packaging`` objects say so, and the greedy cover is the original loop over Python sets.
No timing is asserted; benchmarks/ measures speed.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from packaging.markers import Marker
from packaging.specifiers import SpecifierSet

from torch_matrix import pins
from torch_matrix.pins import (
    PYTHON,
    VARIANT,
    Atom,
    observe,
    package_axes,
    requirement_lines,
    suggest_pins,
)
from torch_matrix.pins.render import (
    render_constraints,
    render_json,
    render_requirements,
    render_text,
)
from torch_matrix.vocab.records import INSTALL_ERROR, UNSATISFIABLE
from tests.factories import make_cell, make_probe, make_result
from tests.test_pins import grids

TORCHES = [f"2.{minor}.{patch}" for minor in range(10) for patch in range(2)]
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
VARIANTS = ("default", "cpu", "cu121", "cu124")
NUMPYS = (
    ("==1.24.*", "1.24.4"),
    ("==1.26.*", "1.26.4"),
    ("==2.0.*", "2.0.2"),
    ("==2.1.*", "2.1.3"),
    ("==2.2.*", "2.2.6"),
)
REQUIRED = ("install_sanity", "training_step", "numpy_interop", "torchvision_ops")
RELEASED = {
    "torch": TORCHES + ["1.13.1", "2.10.0"],
    "numpy": ["1.24.4", "1.25.0", "1.26.4", "2.0.2", "2.1.3", "2.2.6", "2.3.0"],
}


def scale_grid(torches=TORCHES, pythons=PYTHONS, variants=VARIANTS, numpys=NUMPYS, seed=0):
    """torch x python x variant x numpy (20 x 5 x 4 x 5 = 2,000 by default) with real-looking findings:
    one bad torch patch, old torch with numpy 2, torchvision broken on one Python, one build
    broken on one variant, plus unsatisfiable and install-error cells."""
    rng = random.Random(seed)
    results = []
    for torch in torches:
        minor = int(torch.split(".")[1])
        torchvision = f"0.{minor + 15}.{torch.split('.')[2]}"
        for python in pythons:
            for variant in variants:
                for spec, numpy in numpys:
                    cell = make_cell(
                        torch=torch,
                        python=python,
                        variant=variant,
                        torchvision=torchvision,
                        extras={"numpy": spec},
                        probes=REQUIRED,
                        required_probes=REQUIRED,
                    )
                    if python == "3.13" and minor < 4:
                        results.append(
                            make_result(cell, status=UNSATISFIABLE, message="no cp313 wheel")
                        )
                        continue
                    if rng.random() < 0.01:
                        results.append(
                            make_result(cell, status=INSTALL_ERROR, message="connection reset")
                        )
                        continue
                    failing = {}
                    if torch == "2.3.1":
                        failing["training_step"] = "loss is NaN"
                    if minor <= 2 and numpy.startswith("2."):
                        failing["numpy_interop"] = "from_numpy rejects numpy 2"
                    if python == "3.12" and minor in (4, 5):
                        failing["torchvision_ops"] = "nms missing"
                    if variant == "cu121" and torch == "2.7.0":
                        failing["install_sanity"] = "libcudnn missing"
                    probes = [
                        make_probe(
                            name, "fail" if name in failing else "pass", failing.get(name, "")
                        )
                        for name in REQUIRED
                    ]
                    local = "+cpu" if variant == "cpu" else ""
                    results.append(
                        make_result(
                            cell,
                            probes=probes,
                            resolved={
                                "torch": torch + local,
                                "torchvision": torchvision,
                                "numpy": numpy,
                            },
                        )
                    )
    return results


@pytest.fixture(scope="module")
def big_grid():
    results = scale_grid()
    assert len(results) == 2000
    return results


# ----------------------------------------------------------------------------- naive reference


def naive_admits(answer, observation) -> bool:
    """What a user's installer decides, with fresh packaging objects and no memo."""
    if answer.expressible:
        checks = [
            (line.package, line.specifiers, line.marker, None) for line in requirement_lines(answer)
        ]
        checks += [
            (pin.package, pin.specifiers, "", None) for pin in answer.pins if pin.package == PYTHON
        ]
    else:
        checks = [(pin.package, pin.specifiers, "", pin.condition) for pin in answer.pins]
    for package, specifiers, marker, condition in checks:
        value = observation.value(package)
        if value is None:
            continue
        python = observation.value(PYTHON)
        if (
            marker
            and python is not None
            and not Marker(marker).evaluate(
                {"python_version": str(python), "python_full_version": f"{python}.0"}
            )
        ):
            continue
        if condition is not None and observation.value(condition.axis) not in condition.values:
            continue
        if not SpecifierSet(",".join(specifiers)).contains(value, prereleases=True):
            return False
    return True


def reference_greedy(grid, uncovered, candidates, lost):
    """The original set-based greedy cover: every key computed for every atom on every round."""

    def cells(mask):
        return {i for i in range(len(grid.observations)) if mask >> i & 1}

    scanned = {}

    def excluded(atom):  # one scan per atom, as the original cache did
        if atom not in scanned:
            scanned[atom] = {i for i, o in enumerate(grid.observations) if atom.covers(o)}
        return scanned[atom]

    uncovered, lost, good = cells(uncovered), cells(lost), cells(grid.good_mask)
    pool = sorted(set(candidates), key=Atom.sort_key)
    chosen = []
    while uncovered:
        best, best_key = None, None
        for atom in pool:
            hit = excluded(atom) & uncovered
            if not hit:
                continue
            cost = len((excluded(atom) & good) - lost)
            key = (
                cost / len(hit),
                -len(hit),
                bool(atom.cond_axis),
                not grid.named_by_probes(atom, hit),
                atom.sort_key(),
            )
            if best_key is None or key < best_key:
                best, best_key = atom, key
        if best is None:
            return None
        chosen.append(best)
        uncovered -= excluded(best)
        lost |= excluded(best) & good
    return chosen


class ScanGrid(pins._Grid):
    """The grid without its index: each atom's cells and each admission by a full scan."""

    def mask(self, atom):
        return sum(1 << i for i, o in enumerate(self.observations) if atom.covers(o))

    def admitted(self, answer):
        return sum(1 << i for i, o in enumerate(self.observations) if naive_admits(answer, o))


def rendered(results, released=None) -> str:
    suggestion = suggest_pins(results, released)
    return "\n".join(
        (
            render_text(suggestion),
            render_constraints(suggestion),
            render_requirements(suggestion),
            render_json(suggestion),
        )
    )


def reference_rendered(monkeypatch, results, released=None) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(pins, "_Grid", ScanGrid)
        patch.setattr(pins, "_greedy", reference_greedy)
        return rendered(results, released)


def _grid_of(results):
    observations, _, _ = observe(results)
    pinnable = [*package_axes(results), PYTHON]
    return pins._Grid(observations, pinnable, [*pinnable, VARIANT])


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(4))
def test_smaller_grids_give_the_reference_answers_and_texts(monkeypatch, seed):
    rng = random.Random(seed)
    torches = sorted(rng.sample(TORCHES, 6), key=lambda t: tuple(map(int, t.split("."))))
    results = scale_grid(
        torches, rng.sample(PYTHONS, 3), rng.sample(VARIANTS, 2), rng.sample(NUMPYS, 3), seed=seed
    )
    assert rendered(results, RELEASED) == reference_rendered(monkeypatch, results, RELEASED)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(grids())
def test_random_grids_give_the_reference_answers_and_texts(monkeypatch, results):
    assert rendered(results) == reference_rendered(monkeypatch, results)


def test_the_2000_cell_index_matches_a_scan_for_every_candidate_atom(big_grid):
    grid = _grid_of(big_grid)
    atoms = grid.atoms_of_cells(grid.bad_mask, grid.axes)
    assert len(atoms) > 100
    for atom in atoms:
        assert grid.mask(atom) == ScanGrid.mask(grid, atom), atom


def test_the_2000_cell_greedy_cover_matches_the_reference(big_grid):
    grid = _grid_of(big_grid)
    remaining = grid.bad_mask
    for conditions in ([PYTHON], grid.axes):
        candidates = grid.atoms_of_cells(remaining, conditions)
        chosen = pins._greedy(grid, remaining, candidates, 0)
        assert chosen and chosen == reference_greedy(grid, remaining, candidates, 0)


def test_the_2000_cell_answers_exclude_every_bad_cell_and_lose_what_they_say(big_grid):
    suggestion = suggest_pins(big_grid, RELEASED)
    observations, _, _ = observe(big_grid)
    assert len(suggestion.answers) >= 2 and suggestion.recommended.expressible
    assert (
        suggestion.diagnosis is not None and suggestion.diagnosis.lost == ()
    )  # the interaction is found
    assert suggestion.diagnosis.unresolved == ()
    for answer in suggestion.answers:
        assert answer.lost == ()  # no suggestion ever loses a good cell
        assert not any(o.good and not naive_admits(answer, o) for o in observations), (
            answer.describe()
        )
        open_cells = {o.cell_id for o in observations if not o.good and naive_admits(answer, o)}
        assert set(answer.unresolved) == open_cells, answer.describe()
        assert all(answer.admits(o) == naive_admits(answer, o) for o in observations)


def test_the_2000_cell_suggestion_does_not_depend_on_input_order(big_grid):
    shuffled = list(big_grid)
    random.Random(1).shuffle(shuffled)
    assert rendered(shuffled, RELEASED) == rendered(big_grid, RELEASED)


def test_a_packages_pins_are_built_once_per_search_and_anew_for_other_atoms():
    """The answers share atoms, so the grid keeps each package's pins and each exclusion's reason
    (issue 46). Other atoms, or another grid, must never get the kept ones."""
    from torch_matrix.pins.answers import _build_pins

    results = scale_grid(TORCHES[:6], PYTHONS[:3], VARIANTS[:2], NUMPYS[:3])
    grid = _grid_of(results)
    grid.released = RELEASED
    torch_atoms = [a for a in grid.atoms_of_cells(grid.bad_mask, grid.axes) if a.axis == "torch"]
    one, two = torch_atoms[:1], torch_atoms[:2]
    assert len(two) == 2

    def fresh(atoms):
        other = _grid_of(results)
        other.released = RELEASED
        return _build_pins(other, atoms, {})

    first = _build_pins(grid, one, {})
    second = _build_pins(grid, two, {})
    assert first == fresh(one) and second == fresh(two)
    assert first != second  # another atom: other pins, not the kept ones
    again = _build_pins(grid, one, {})
    assert again == first and all(a is b for a, b in zip(again, first))  # kept, not rebuilt


def test_the_distributions_a_failing_probe_needed_are_read_from_its_module_provider():
    """needed_present reads each probe's module provider (issue 46 skips the ABC check for the
    probes without one, nearly all): a provider names its distribution, normalized; a provider
    that is no mapping, or names none, adds nothing."""
    from torch_matrix.judge.causes import MODULE_PROVIDER
    from torch_matrix.pins.suggest import needed_present
    from torch_matrix.vocab.records import FAIL

    def with_evidence(evidence):
        return make_result(probes=[make_probe("install_sanity", FAIL, "boom", evidence=evidence)])

    results = [
        make_result(probes=[make_probe("install_sanity")]),
        with_evidence({MODULE_PROVIDER: {"distribution": "Setup_Tools"}}),
        with_evidence({MODULE_PROVIDER: "setuptools"}),
        with_evidence({MODULE_PROVIDER: {"distribution": ""}}),
    ]
    assert needed_present(results) == ("setup-tools",)
