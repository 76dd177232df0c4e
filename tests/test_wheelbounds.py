"""Per-target bounds proven over every release of the spec's range, from each release's own wheel
(``torch_matrix.pins.wheelbounds``; read by ``torch_matrix.run.targetplan.release_reads``): a read
fact is labelled as read, never as a test, and an unreadable release stays unknown, uncrossed."""

from __future__ import annotations

import dataclasses
import os

from packaging.specifiers import SpecifierSet

from tests.rangeserver import serve
from tests.synthetic_wheels import build_index, torch_wheel
from torch_matrix import cli
from torch_matrix.judge.gpus import targets_of
from torch_matrix.pins.target_render import render_target_constraints, render_target_summary
from torch_matrix.pins.targets import target_pins
from torch_matrix.pins.wheelbounds import (
    ReleaseRead,
    bound_for,
    merged_specifiers,
    release_verdict,
    releases_in_range,
)
from torch_matrix.spec.model import TorchSelection
from torch_matrix.world.results import write_result

# PyPI's default builds: 2.2.2 .. 2.7.1 carry sm_50 .. sm_90; 2.8.0 and 2.9.1 sm_70 .. sm_120.
SEVEN = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
NEW = "sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
GTX_1080, RTX_5090, V100 = targets_of(["GTX 1080", "RTX 5090", "V100"], [])


def build(release: str, flags: str | None, cuda: str = "12.8", variant: str = "default"):
    if flags is None:
        return ReleaseRead(release, variant, why_not="example.org does not serve ranges")
    facts = {
        "source": "wheel",
        "torch": f"{release}+cu{cuda.replace('.', '')}",
        "torch_cuda": cuda,
        "arch_flags": flags,
        "arch_list": flags.split(),
    }
    return ReleaseRead(release, variant, f"torch-{release}-cp311-cp311-linux_x86_64.whl", facts)


def reads_of(table: dict[str, str | None]) -> dict[str, list[ReleaseRead]]:
    return {release: [build(release, flags)] for release, flags in table.items()}


RANGE = {"2.6.0": SEVEN, "2.7.0": SEVEN, "2.7.1": SEVEN, "2.8.0": NEW, "2.9.0": NEW, "2.9.1": NEW}


def test_a_card_every_newer_release_dropped_gets_an_upper_bound_read_from_the_wheels():
    bound = bound_for(GTX_1080, reads_of(RANGE))
    assert bound.specifiers == ("<2.8.0",)
    (proof,) = bound.proof
    assert proof.startswith("torch<2.8.0: no-kernel-image on GTX 1080 (sm_61) for every release ")
    assert "from 2.8.0 to 2.9.1 (3 releases)" in proof
    assert "read from each wheel's torch/include/ATen/cuda/CUDAConfig.h (not tested" in proof
    assert NEW in proof and not bound.unknown and not bound.none_runs
    assert [v.runs for v in bound.verdicts] == [True, True, True, False, False, False]
    allowed = SpecifierSet(",".join(bound.specifiers))
    assert [r for r in RANGE if r in allowed] == ["2.6.0", "2.7.0", "2.7.1"]


def test_a_card_only_newer_releases_serve_gets_a_lower_bound():
    bound = bound_for(RTX_5090, reads_of(RANGE))
    assert bound.specifiers == (">=2.8.0",)
    assert "every release from 2.6.0 to 2.7.1 (3 releases)" in bound.proof[0]
    assert bound_for(V100, reads_of(RANGE)).specifiers == ()  # sm_70 in every arch list


def test_an_unread_release_is_unknown_and_no_bound_crosses_it():
    table = dict(RANGE, **{"2.8.0": None})
    bound = bound_for(GTX_1080, reads_of(table))
    assert bound.specifiers == ("<2.9.0",)  # not <2.8.0: 2.8.0 was not read
    assert not bound.excludes("2.8.0") and bound.excludes("2.9.0") and bound.excludes("2.9.1")
    assert bound.unknown == ("2.8.0: default build: example.org does not serve ranges",)
    # the newest release unread: no upper bound at all, only the read ones in between
    table = dict(RANGE, **{"2.9.1": None})
    bound = bound_for(GTX_1080, reads_of(table))
    assert bound.specifiers == ("!=2.8.0", "!=2.9.0") and not bound.excludes("2.9.1")


def test_a_window_in_the_middle_is_one_exclusion_per_release():
    table = {"2.7.1": SEVEN, "2.8.0": NEW, "2.9.0": NEW, "2.10.0": SEVEN}
    bound = bound_for(GTX_1080, reads_of(table))
    assert bound.specifiers == ("!=2.8.0", "!=2.9.0")
    assert bound.proof[0].startswith("torch!=2.8.0: no-kernel-image on GTX 1080 (sm_61) for 2.8.0,")


def test_where_no_release_runs_nothing_is_pinned_and_that_is_said():
    bound = bound_for(GTX_1080, reads_of({"2.8.0": NEW, "2.9.0": NEW}))
    assert bound.none_runs and bound.specifiers == ()


def test_a_release_is_excluded_only_when_every_variant_read_does_not_run():
    cu126 = build("2.8.0", SEVEN, cuda="12.6", variant="cu126")
    both = {"2.7.1": [build("2.7.1", SEVEN)], "2.8.0": [build("2.8.0", NEW), cu126]}
    assert bound_for(GTX_1080, both).specifiers == ()  # 2.8.0's cu126 build runs there
    unread = ReleaseRead("2.8.0", "cu126", why_not="download.pytorch.org: unreachable")
    partly = {"2.7.1": [build("2.7.1", SEVEN)], "2.8.0": [build("2.8.0", NEW), unread]}
    bound = bound_for(GTX_1080, partly)
    assert bound.specifiers == () and bound.unknown[0].startswith("2.8.0: cu126 build:")


def test_a_driver_target_is_bounded_from_version_py():
    (old_driver,) = targets_of([], ["535.104"])
    table = {"2.7.1": [build("2.7.1", SEVEN, "12.6")], "2.9.0": [build("2.9.0", NEW, "13.0")]}
    bound = bound_for(old_driver, table)
    assert bound.specifiers == ("<2.9.0",)
    assert "driver-too-old" in bound.proof[0] and "torch/version.py" in bound.proof[0]


def test_the_range_is_every_release_between_the_named_ones_or_that_the_specifier_admits():
    listed = ["2.2.2", "2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0rc1", "2.5.0", "2.6.0+cpu"]
    explicit = TorchSelection(explicit=("2.3.1", "2.5.0"))
    assert releases_in_range(listed, explicit) == ["2.3.1", "2.4.0", "2.4.1", "2.5.0"]
    assert releases_in_range(listed, TorchSelection(versions=">=2.4")) == [
        "2.4.0",
        "2.4.1",
        "2.5.0",
    ]
    newest = TorchSelection(versions=">=2.2", newest=2)
    assert releases_in_range(listed, newest) == ["2.4.0", "2.4.1", "2.5.0"]


def test_a_tested_exclusion_the_bound_covers_is_dropped_others_kept():
    bound = bound_for(GTX_1080, reads_of(RANGE))
    assert merged_specifiers(["!=2.9.1", "!=2.7.0"], bound) == ("<2.8.0", "!=2.7.0")


# ---------------------------------------------------------------- the pins, over a served index


def _served_pins(tmp_path, capsys, **mode):
    """`torch-matrix pins` on two tested cells (2.7.1 runs on a GTX 1080, 2.13.0 does not) with the
    spec's range (2.7.1 .. 2.13.0: four releases) served by a local server: (stdout, stderr, the
    GTX 1080's constraints file, the Range header of each wheel request)."""
    from tests.test_pins_targets import result_for

    index = build_index(
        tmp_path / "index",
        [
            torch_wheel(v, cuda=c, arch_flags=f, build_version=f"{v}+cu{c.replace('.', '')}")
            for v, c, f in (
                ("2.7.1", "12.6", SEVEN),
                ("2.8.0", "12.8", NEW),
                ("2.9.1", "12.8", NEW),
                ("2.13.0", "12.8", NEW),
            )
        ],
    )
    for version in ("2.7.1", "2.13.0"):  # tested: one that runs, one that does not
        write_result(result_for(version), tmp_path / "run" / "cells")
    with serve(index.root, **mode) as served:
        spec = tmp_path / "matrix.toml"
        spec.write_text(
            'name = "hw"\npython = ["3.11"]\ntorch = ["2.7.1", "2.13.0"]\ntorchvision = "none"\n'
            f'[index]\ndefault = "{served.url}/simple"\n'
            '[targets]\ngpus = ["GTX 1080"]\ndrivers = ["580.82.07"]\n'
        )
        environ = {"TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache")}
        old = {k: os.environ.get(k) for k in environ}
        os.environ.update(environ)
        try:
            argv = [
                "pins",
                str(tmp_path / "run"),
                "--spec",
                str(spec),
                "--out",
                str(tmp_path / "p"),
            ]
            assert cli.main(argv) == 0
        finally:
            for key, value in old.items():
                os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
        wheel_reads = [r for p, r, _n in served.log if p.endswith(".whl")]
    out, err = capsys.readouterr()
    text = tmp_path / "p" / "targets" / "gtx-1080-sm_61-driver-580.82.07" / "constraints.txt"
    return out, err, text.read_text(), wheel_reads


def test_pins_bound_a_target_over_the_range_read_from_the_served_wheels(tmp_path, capsys):
    """`torch-matrix pins` reads every release of the spec's range from its wheel (range requests to
    a local server), and the GTX 1080's file gets `torch<2.8.0` where the tested cells alone gave
    only `!=` of the one tested release that fails."""
    out, err, text, wheel_reads = _served_pins(tmp_path, capsys)
    assert wheel_reads and all(wheel_reads)  # every wheel byte by a range request
    assert "4 torch release(s) of the spec's range read from their wheels" in err
    requirement = [line for line in text.splitlines() if line.startswith(("torch<", "torch!"))]
    assert len(requirement) == 1 and requirement[0].startswith("torch<2.8.0  # bound read from")
    assert "# Proof (read from the wheel): torch<2.8.0: no-kernel-image on GTX 1080" in text
    assert "(3 releases)" in text and "not tested" in text
    assert (
        "GTX 1080 (sm_61), driver 580.82.07 -> gtx-1080-sm_61-driver-580.82.07: torch<2.8.0" in out
    )


def test_a_server_without_ranges_leaves_every_release_unknown_and_says_so(tmp_path, capsys):
    """No range requests: nothing is bounded from the wheels (never a wheel fetched whole for it);
    the target's file keeps the tested cells' pins and names each release as unknown."""
    out, err, text, _reads = _served_pins(tmp_path, capsys, ranges=False)
    assert "4 build(s) could not be read (unknown: no bound crosses them)" in err
    assert "# Read from the wheels (not tested): 0 of 4 torch release(s)" in text
    assert "# Unknown (no bound crosses it): 2.8.0: default build: " in text
    assert "does not serve ranges" in text
    requirement = [line for line in text.splitlines() if line.startswith(("torch<", "torch!"))]
    assert requirement and requirement[0].startswith("torch!=2.13.0")  # the tested cell alone


def test_the_target_file_says_what_was_read_and_what_stayed_unknown():
    from tests.test_pins_targets import result_for

    results = [result_for(v, targets_of(["GTX 1080"], [])) for v in ("2.7.1", "2.8.0")]
    reads = reads_of(dict(RANGE, **{"2.9.0": None}))
    (pins,) = target_pins(results, release_reads=reads)
    text = render_target_constraints(pins)
    assert "# Read from the wheels (not tested): 5 of 6 torch release(s)" in text
    assert "# Unknown (no bound crosses it): 2.9.0: default build: example.org" in text
    assert "torch!=2.8.0" in text and "<2.8.0" not in text  # 2.9.0 unknown, 2.9.1 read
    assert "unknown: 2.9.0" in render_target_summary([pins])


def test_a_label_that_names_no_gpu_or_driver_gets_no_bound_and_no_crash():
    from tests.test_pins_targets import result_for

    (result,) = [result_for("2.8.0", targets_of(["GTX 1080"], []))]
    verdict = {**result.targets[0], "target": "some card"}  # a label read back from a shard
    odd = dataclasses.replace(result, targets=(verdict,))
    (pins,) = target_pins([odd], release_reads=reads_of(RANGE), builds={"2.8.0": {"cu126": {}}})
    assert pins.target == "some card" and pins.wheel_bound is None


def test_cpu_builds_alone_say_nothing_about_a_card_and_a_cuda_build_beside_them_decides():
    """variant "auto" on a machine with no GPU installs CPU builds: read alone they would make every
    release 'not run' on every card. They leave the release unknown; a CUDA build read beside
    them decides."""
    cpu = {"source": "wheel", "torch": "2.8.0+cpu", "torch_cuda": None}
    only_cpu = {r: [ReleaseRead(r, "cpu", f"torch-{r}+cpu.whl", cpu)] for r in ("2.8.0", "2.9.0")}
    bound = bound_for(GTX_1080, only_cpu)
    assert bound.specifiers == () and not bound.none_runs
    assert [line.split(":")[0] for line in bound.unknown] == ["2.8.0", "2.9.0"]
    (verdict,) = [release_verdict("2.8.0", only_cpu["2.8.0"], GTX_1080)]
    assert verdict.runs is None and "only builds without CUDA were read (cpu)" in verdict.reason
    both = {r: reads + [build(r, NEW)] for r, reads in only_cpu.items()}
    assert bound_for(GTX_1080, both).none_runs  # the CUDA builds were read: they decide
    assert release_verdict("2.8.0", both["2.8.0"], RTX_5090).runs is True
