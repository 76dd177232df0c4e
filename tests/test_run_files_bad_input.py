"""A run's own files beside its results (index-facts.json, planned-cells.json) may be damaged by
hand or by a full disk: each is then ignored with one line naming the file, never a traceback, and
the pins/report fall back to what they did without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix.world.runfacts import FACTS_NAME, read_facts
from torch_matrix.world.runplan import plan_path, read_plan

DAMAGED = [b"{not json", b"\xff\xfe", b"[]", b'{"schema": "something-else"}', b"1" * 10]


@pytest.mark.parametrize("content", DAMAGED)
def test_a_damaged_index_facts_file_is_one_line_naming_it(tmp_path: Path, content: bytes) -> None:
    (tmp_path / FACTS_NAME).write_bytes(content)
    facts, why = read_facts(tmp_path)
    assert facts is None
    assert str(tmp_path / FACTS_NAME) in why and "\n" not in why


@pytest.mark.parametrize("content", DAMAGED)
def test_a_damaged_run_plan_is_one_line_naming_it(tmp_path: Path, content: bytes) -> None:
    path = plan_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    plan, why = read_plan(tmp_path)
    assert plan is None
    assert str(path) in why and "ignored" in why and "\n" not in why


def test_no_file_is_no_error(tmp_path: Path) -> None:
    assert read_plan(tmp_path) == (None, "")
    facts, why = read_facts(tmp_path)
    assert facts is None and FACTS_NAME in why
