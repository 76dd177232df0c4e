"""Pins per hardware target (``torch_matrix.pins.targets``), from cells whose build facts are PyPI's own
wheels (tests/fixtures/wheel-builds: recorded without a GPU): the same search as the main pins, a
window of releases that cannot run on the card becomes a bound in that target's file only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from packaging.specifiers import SpecifierSet

from torch_matrix import cli
from torch_matrix.judge.hardware import cell_verdicts, targets_of
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
    (v100_advice,) = by_target[
        "V100 (sm_70), driver 580.82.07"
    ].advice  # from 2.13.0's own table of its builds
    assert (
        "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
        in v100_advice
    )
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
    by_target = {pins.target: pins for pins in target_pins(results)}
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
