"""The plan kept between listings (``world.plancache``): ``nox -l`` takes the last plan of the same
spec while nothing it was planned from changed, and plans again when anything did: the spec, a
setting, the interpreters found, a cached listing (rewritten or expired), a find-links directory,
the tool's code. A run (``nox -s matrix``) always plans now. Each test fails on the code before the
kept plan (no ``reuse``: every listing planned)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import torch_matrix.plan.grid
from torch_matrix.edges import console
from torch_matrix.run import pipeline
from torch_matrix.spec.parse import parse_spec
from torch_matrix.world import plancache
from torch_matrix.world.indexcache import DiskCache
from torch_matrix.world.interpreters import Interpreter
from torch_matrix.world.listings import dist_file

URL = "https://index.invalid/simple/"  # never fetched: every listing is in the cache


def _listing(cache: Path, versions: tuple[str, ...], fetched_at: float | None = None) -> None:
    """torch's listing of URL in the index cache, as a fetch would have left it."""
    files = [
        dist_file(
            f"torch-{v}-py3-none-any.whl", f"{URL}torch/torch-{v}-py3-none-any.whl", "torch", size=1
        )
        for v in versions
    ]
    clock = (lambda: fetched_at) if fetched_at is not None else time.time
    DiskCache(cache, 3600, clock=clock).write(
        "listings",
        f"listing {URL}torch/ torch",
        {"files": [f.to_json() for f in files if f is not None], "sizes": True},
    )


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A spec, its environment (the index cache under tmp_path) and a count of real plannings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TORCH_MATRIX_", "PIP_", "UV_"))
    }
    env["TORCH_MATRIX_CACHE_DIR"] = str(tmp_path / "cache")
    _listing(tmp_path / "cache", ("2.1.0", "2.2.0"))
    planned: list[int] = []
    gather = torch_matrix.plan.grid.gather_facts

    def counted(*args, **kwargs):
        planned.append(1)
        return gather(*args, **kwargs)

    monkeypatch.setattr(torch_matrix.plan.grid, "gather_facts", counted)
    return tmp_path, env, planned


def _spec(tmp_path: Path, torch: str = '{ versions = ">=2.0" }', find_links: str = ""):
    path = tmp_path / "matrix.toml"
    text = (
        f'name = "kept"\npython = ["current"]\ntorch = {torch}\ntorchvision = "none"\n'
        f'variant = ["default"]\n\n[index]\ndefault = "{URL}"\nextra = []\n'
        f"find_links = [{find_links}]\n"
    )
    path.write_text(text)
    return parse_spec(text, str(path), base_dir=str(tmp_path))


def _torch(planned: pipeline.Planned) -> list[str]:
    return sorted(cell.axes["torch"] for cell in planned.cells)


def test_a_listing_takes_the_kept_plan_while_nothing_changed(world):
    tmp_path, env, planned = world
    fresh = pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 1 and _torch(fresh) == ["2.1.0", "2.2.0"]
    kept = pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 1  # not planned again
    assert kept.cells == fresh.cells and kept.interpreters == fresh.interpreters
    assert kept.notes == fresh.notes


def test_a_run_always_plans_now(world):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    pipeline.plan_spec(_spec(tmp_path), env)
    pipeline.plan_spec(_spec(tmp_path), env)
    assert len(planned) == 3


def test_a_changed_spec_is_planned_again(world):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    again = pipeline.plan_spec(_spec(tmp_path, torch='["2.1.0"]'), env, reuse=True)
    assert len(planned) == 2 and _torch(again) == ["2.1.0"]


def test_a_changed_setting_is_planned_again(world):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    pipeline.plan_spec(_spec(tmp_path), {**env, "TORCH_MATRIX_INDEX_TTL": "7200"}, reuse=True)
    assert len(planned) == 2
    pipeline.plan_spec(_spec(tmp_path), {**env, "UV_DEFAULT_INDEX": URL}, reuse=True)
    assert len(planned) == 3


def test_a_rewritten_listing_is_planned_again(world):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    _listing(tmp_path / "cache", ("2.1.0", "2.2.0", "2.3.0"))  # a refetch found a new release
    again = pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 2 and _torch(again) == ["2.1.0", "2.2.0", "2.3.0"]


def test_an_expired_listing_is_planned_again(world, monkeypatch):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    hours_later = time.time() + 6 * 3600 + 60  # the default TTL (6 h) has passed
    monkeypatch.setattr(plancache.time, "time", lambda: hours_later)
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 2  # planning itself refetches (here the cache's clock: still fresh)


def test_other_interpreters_are_planned_again(world, monkeypatch):
    tmp_path, env, planned = world
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    found = pipeline.find_interpreters

    def upgraded(*args, **kwargs):
        return {
            name: Interpreter(i.path, i.version + ".1", i.implementation) if i else None
            for name, i in found(*args, **kwargs).items()
        }

    monkeypatch.setattr(pipeline, "find_interpreters", upgraded)
    again = pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 2
    assert all(i.version.endswith(".1") for i in again.interpreters.values() if i)


def test_a_changed_find_links_directory_is_planned_again(world):
    tmp_path, env, planned = world
    links = tmp_path / "links"
    links.mkdir()
    (links / "torch-2.4.0-py3-none-any.whl").write_bytes(b"x")
    spec = _spec(tmp_path, find_links=f'"{links}"')
    assert _torch(pipeline.plan_spec(spec, env, reuse=True)) == ["2.1.0", "2.2.0", "2.4.0"]
    pipeline.plan_spec(spec, env, reuse=True)
    assert len(planned) == 1  # a find-links directory is checked, not a reason never to keep
    (links / "torch-2.5.0-py3-none-any.whl").write_bytes(b"x")
    again = pipeline.plan_spec(spec, env, reuse=True)
    assert len(planned) == 2 and _torch(again) == ["2.1.0", "2.2.0", "2.4.0", "2.5.0"]
    (links / "torch-2.5.0-py3-none-any.whl").write_bytes(b"xx")  # the same name, rewritten
    pipeline.plan_spec(spec, env, reuse=True)
    assert len(planned) == 3


def test_a_plan_that_warned_is_not_kept(world, monkeypatch):
    tmp_path, env, planned = world
    gather = torch_matrix.plan.grid.gather_facts

    def warning(*args, **kwargs):
        console.warn("the index said something")
        return gather(*args, **kwargs)

    monkeypatch.setattr(torch_matrix.plan.grid, "gather_facts", warning)
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    monkeypatch.setattr(torch_matrix.plan.grid, "gather_facts", gather)  # counts again
    pipeline.plan_spec(_spec(tmp_path), env, reuse=True)
    assert len(planned) == 2  # its warning is said again, by planning


def test_a_damaged_kept_plan_is_planned_again(world):
    tmp_path, env, planned = world
    spec = _spec(tmp_path)
    pipeline.plan_spec(spec, env, reuse=True)
    plancache.plan_file(spec.path, env).write_text("{not json")
    assert _torch(pipeline.plan_spec(spec, env, reuse=True)) == ["2.1.0", "2.2.0"]
    assert len(planned) == 2


def test_an_edited_source_file_changes_the_code_stamp(tmp_path):
    (tmp_path / "grid.py").write_text("A = 1\n")
    before = plancache.code_stamp(tmp_path)
    (tmp_path / "grid.py").write_text("A = 22\n")
    assert plancache.code_stamp(tmp_path) != before


def test_only_a_listing_takes_a_kept_plan():
    from torch_matrix.run.matrixplan import is_listing

    assert is_listing(["-l"]) and is_listing(["--list", "--json"])
    assert not is_listing(["-s", "matrix"]) and not is_listing(["-s", "matrix", "--", "-l"])
