"""Pins per hardware target (``torch_matrix.pins.targets``), from cells whose build facts are PyPI's own
wheels (tests/fixtures/wheel-builds: recorded without a GPU): the same search as the main pins, a
window of releases that cannot run on the card becomes a bound in that target's file only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from packaging.specifiers import SpecifierSet

from torch_matrix import cli
from torch_matrix.judge.hardware import cell_verdicts
from torch_matrix.judge.gpus import targets_of
from torch_matrix.pins import requirement_lines, suggest_pins
from torch_matrix.pins.targets import as_seen_by, target_pins
from torch_matrix.world.results import write_result
from tests.factories import make_cell, make_result

FIXTURES = Path(__file__).parent / "fixtures" / "wheel-builds"
RELEASES = ("2.4.1", "2.7.1", "2.8.0", "2.9.1", "2.13.0")
TARGETS = targets_of(["GTX 1080", "V100", "RTX 5090"], ["580.82.07"])


def result_for(version: str, targets=TARGETS):
    facts = json.loads((FIXTURES / f"torch-{version}.json").read_text())
    result = make_result(
        make_cell(
            torch=version,
            torchvision=facts["torchvision"],
            python="3.11",
            probes=("install_sanity",),
        )
    )
    gpu = {"devices": [], "driver": None, "build": facts}
    return dataclasses.replace(result, gpu=gpu, targets=cell_verdicts(gpu, targets))


# What 2.13.0's cu126 build would say read from its wheel (its table: 12.6 -> sm_50 .. sm_90).
CU126_2_13 = {
    "torch": "2.13.0+cu126",
    "torch_cuda": "12.6",
    "arch_flags": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
    "arch_list": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90".split(),
}


def lines(suggestion) -> list[str]:
    return [line.text() for line in requirement_lines(suggestion.recommended) if line.specifiers]


def test_each_target_gets_the_bound_its_card_needs_and_the_main_pins_none():
    results = [result_for(v) for v in RELEASES]
    assert (
        lines(suggest_pins(results)) == []
    )  # every cell passes: no target excludes a release here
    by_target = {pins.target: pins for pins in target_pins(results)}
    assert list(by_target) == [t.label for t in TARGETS]

    def admitted(target: str) -> list[str]:
        (torch_line,) = [
            line
            for line in lines(by_target[target].suggestion)
            if line.startswith("torch") and not line.startswith("torchvision")
        ]
        specifier = SpecifierSet(torch_line[len("torch") :].split(";")[0])
        return [v for v in RELEASES if specifier.contains(v)]

    assert admitted("GTX 1080 (sm_61), driver 580.82.07") == ["2.4.1", "2.7.1"]  # 2.8 dropped sm_6x
    assert admitted("V100 (sm_70), driver 580.82.07") == [
        "2.4.1",
        "2.7.1",
        "2.8.0",
        "2.9.1",
    ]  # 2.13 dropped sm_70
    assert admitted("RTX 5090 (sm_120), driver 580.82.07") == [
        "2.8.0",
        "2.9.1",
        "2.13.0",
    ]  # 2.8 added sm_120
    assert (
        by_target["RTX 5090 (sm_120), driver 580.82.07"].slug == "rtx-5090-sm_120-driver-580.82.07"
    )
    (v100_advice,) = by_target["V100 (sm_70), driver 580.82.07"].advice
    # 2.13.0's own table lists a cu126 build with sm_70 code; no wheel of it was read: not advised
    assert (
        "index-url" not in v100_advice
        and (
            "torch's own table lists a CUDA 12.6 build with code for this card, but no cu126 wheel "
            "of it was read to show so: not advised"
        )
        in v100_advice
    )
    read = {"2.13.0": {"cu126": CU126_2_13}}
    (v100_read,) = {p.target: p for p in target_pins(results, builds=read)}[
        "V100 (sm_70), driver 580.82.07"
    ].advice
    assert (
        "its cu126 build runs there (read from its wheel: CUDA 12.6, arch list sm_50 sm_60 sm_70 "
        "sm_75 sm_80 sm_86 sm_90): pip install torch==2.13.0 --index-url "
        "https://download.pytorch.org/whl/cu126"
    ) in v100_read
    advice = by_target["RTX 5090 (sm_120), driver 580.82.07"].advice
    assert (
        advice[0].startswith("torch 2.4.1 (t2.4.1-py3.11): no-kernel-image")
        and "the default build of torch 2.8.0 runs there" in advice[0]
    )


def test_a_cell_that_runs_on_the_target_is_unchanged_and_one_that_does_not_fails_hardware():
    good, bad = result_for("2.7.1"), result_for("2.13.0")
    assert as_seen_by(good, "V100 (sm_70), driver 580.82.07") == good
    seen = as_seen_by(bad, "V100 (sm_70), driver 580.82.07")
    (probe,) = [p for p in seen.probes if p.name == "hardware"]
    assert probe.status == "fail" and probe.message.startswith(
        "no-kernel-image on V100 (sm_70), driver 580.82.07: no sm_70"
    )


def test_pins_writes_one_constraints_file_per_target(tmp_path, capsys):
    for version in RELEASES:
        write_result(result_for(version), tmp_path / "run" / "cells")
    assert (
        cli.main(["pins", str(tmp_path / "run"), "--no-coverage", "--out", str(tmp_path / "pins")])
        == 0
    )
    out = capsys.readouterr().out
    assert "Per hardware target (pins/targets/<target>/constraints.txt):" in out
    text = (
        tmp_path / "pins" / "targets" / "gtx-1080-sm_61-driver-580.82.07" / "constraints.txt"
    ).read_text()
    assert (
        "# Hardware target: GTX 1080 (sm_61), driver 580.82.07" in text
        and "torch" in text.split("\n", 3)[-1]
    )
    main = (tmp_path / "pins" / "constraints.txt").read_text()
    assert not [line for line in main.splitlines() if line and not line.startswith("#")]


def test_a_driver_that_does_not_know_the_card_is_advised_not_a_variant():
    targets = targets_of(["RTX 5090", "V100"], ["535.104"])
    results = [result_for(v, targets) for v in ("2.8.0", "2.13.0")]
    by_target = {
        pins.target: pins for pins in target_pins(results, builds={"2.13.0": {"cu126": CU126_2_13}})
    }
    advice = by_target["RTX 5090 (sm_120), driver 535.104"].advice
    assert all(
        "a driver >= 580.65.06 runs this build" in line
        or "a driver >= 570.26 runs this build" in line
        for line in advice
    ), advice
    assert not any(
        "index-url" in line for line in advice
    )  # no variant helps: R535 does not know the card
    (v100,) = by_target[
        "V100 (sm_70), driver 535.104"
    ].advice  # 2.13.0's cu126 runs on R535 (12.x compat)
    assert "/whl/cu126" in v100
    assert (
        "a driver >=" not in v100
    )  # a newer driver alone would not do: 2.13.0's default build has no sm_70


def test_the_report_writes_the_per_target_pins_with_the_main_ones(tmp_path, capsys):
    for version in RELEASES:
        write_result(result_for(version), tmp_path / "run" / "cells")
    assert cli.main(["report", str(tmp_path / "run"), "--pins"]) == 0
    assert "pins per hardware target: 3 file(s)" in capsys.readouterr().err
    assert (
        tmp_path / "run" / "pins" / "targets" / "v100-sm_70-driver-580.82.07" / "constraints.txt"
    ).is_file()


def test_a_build_the_table_lists_is_advised_only_where_its_own_wheel_shows_it_runs():
    """2.11.0's table lists a cu128 build with sm_70 code, but that wheel dropped Volta; 2.15.0's
    lists a cu126 build that does not exist. Neither is advised on the table's word."""
    (result,) = [result_for("2.11.0", targets_of(["V100"], ["580.82.07"]))]
    table = result.gpu["build"]["release_variants_code_cc"]
    assert 70 in table["12.8"]["any"]  # what the table claims
    cu128_as_read = {
        "torch": "2.11.0+cu128",
        "torch_cuda": "12.8",
        "arch_flags": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
        "arch_list": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120".split(),
    }
    (pins,) = target_pins([result], builds={"2.11.0": {"cu128": cu128_as_read}})
    (line,) = pins.advice
    assert "index-url" not in line and "its cu128 wheel has no code for it" in line
    (unread,) = target_pins([result], builds={}).pop().advice
    assert "index-url" not in unread and "no cu" in unread and "not advised" in unread
