"""Result files: the published schema, atomic writes, defensive loading, merging, resume."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from torch_matrix.vocab import records
from torch_matrix.world import results
from torch_matrix.world import resultschema
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.records import INSTALL_ERROR, UNSATISFIABLE, CellResult
from tests.factories import make_cell, make_probe, make_result
from torch_matrix.judge import stored
from torch_matrix.judge.causes import Cause
from torch_matrix.judge.verdict import VERDICTS


def schema_validator():
    schema = resultschema.cell_result_schema()
    return jsonschema.Draft202012Validator(schema)


def full_result() -> CellResult:
    """Every optional field filled, so the schema sees the whole shape."""
    probe = make_probe(
        "training_step",
        "fail",
        "loss is nan",
        observed=[float("1.5")],
        expected="finite loss",
        repro="python -c 'import torch'",
        traceback="Traceback...",
        output_tail="tail",
        evidence={"loss": 1.5, "steps": [1, 2]},
    )
    return make_result(
        make_cell(
            extras={"numpy": "<2"},
            probes=("install_sanity", "training_step"),
            required_probes=("training_step",),
        ),
        probes=[make_probe("install_sanity"), probe],
        resolved={"torch": "2.5.1+cpu", "torchvision": "0.20.1", "numpy": "1.26.4"},
    )


# ------------------------------------------------------------------------------ schema


def test_schema_is_a_valid_draft_2020_12_schema():
    schema = resultschema.cell_result_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    "result",
    [
        full_result(),
        make_result(status=UNSATISFIABLE, message="no wheel"),
        make_result(status=INSTALL_ERROR, probes=[]),
    ],
)
def test_schema_accepts_what_to_json_writes(result):
    schema_validator().validate(result.to_json())


def test_schema_stays_in_sync_with_records():
    schema = resultschema.cell_result_schema()
    props = schema["properties"]
    assert props["schema"]["const"] == records.SCHEMA_ID
    assert props["schema_version"]["enum"] == list(records.READABLE_SCHEMA_VERSIONS)
    assert records.SCHEMA_VERSION == max(records.READABLE_SCHEMA_VERSIONS)
    assert (
        tuple(schema["$defs"]["install"]["properties"]["status"]["enum"])
        == records.INSTALL_STATUSES
    )
    assert tuple(schema["$defs"]["probe"]["properties"]["status"]["enum"]) == records.PROBE_STATUSES
    # Every key to_json can write is declared, and every always-written key is required.
    data = full_result().to_json()
    assert set(data) == set(schema["required"])
    # optional since v3, v5, v7
    assert set(props) - set(schema["required"]) == {"targets", "replaces", "verdict"}
    judged = stored.judged(
        replace(
            full_result(),
            targets=({"target": "V100 (sm_70)", "verdict": "native", "reason": "r"},),
            replaces="sha256:" + "0" * 64,
        )
    )
    assert set(judged.to_json()) == set(props)
    schema_validator().validate(judged.to_json())
    again = CellResult.from_json(judged.to_json())
    assert again == judged and again.verdict == judged.verdict
    assert resultschema.is_canonical_json(judged.to_json())
    assert tuple(props["verdict"]["properties"]["kind"]["enum"]) == VERDICTS
    attribution = schema["$defs"]["attribution"]["properties"]
    assert tuple(attribution["cause"]["enum"]) == tuple(Cause)
    assert set(data["cell"]) == set(schema["$defs"]["cell"]["required"])
    cell_props = schema["$defs"]["cell"]["properties"]
    assert set(cell_props) - set(schema["$defs"]["cell"]["required"]) == {
        "origin",
        "install",
        "install_digest",
        "probe_subset",
        "reason",
    }  # optional since v2, v4, v5
    assert tuple(cell_props["origin"]["enum"]) == records.ORIGINS
    with_install = replace(
        full_result().cell,
        install=(".[test]",),
        install_digest="ab12",
        origin=records.ORIGIN_EDGE,
        probe_subset=("install_sanity",),
        reason="end of the break at torch 2.6.0",
    )
    assert set(with_install.to_json()) == set(cell_props)  # the optional ones are declared
    assert set(data["install"]) == set(schema["$defs"]["install"]["required"])
    assert set(data["probes"][1]) == set(schema["$defs"]["probe"]["properties"])
    policy_values = set(
        schema["$defs"]["cell"]["properties"]["policy"]["additionalProperties"]["enum"]
    )
    assert set(records.DEFAULT_POLICY.values()) <= policy_values


def _broken(mutate):
    data = full_result().to_json()
    mutate(data)
    return data


@pytest.mark.parametrize(
    "data",
    [
        _broken(lambda d: d.pop("cell")),
        _broken(lambda d: d["install"].update(status="maybe")),
        _broken(lambda d: d["probes"][0].update(status="passed")),
        _broken(lambda d: d["probes"][0].pop("name")),
        _broken(lambda d: d["cell"].update(id="t2.5.1 py3.11; rm -rf /")),
        _broken(lambda d: d["cell"]["axes"].pop("torch")),
        _broken(lambda d: d["timings"].update(total="12s")),
        _broken(lambda d: d.update(extra_key=1)),
        _broken(lambda d: d.update(schema_version=records.SCHEMA_VERSION + 1)),
        _broken(
            lambda d: d.update(
                targets=[{"target": "V100 (sm_70)", "verdict": "runs", "reason": "r"}]
            )
        ),
        _broken(lambda d: d.update(probes={})),
        _broken(lambda d: d["cell"].update(origin="somewhere")),
    ],
    ids=[
        "no-cell",
        "install-status",
        "probe-status",
        "probe-name",
        "unsafe-id",
        "no-torch-axis",
        "timing-type",
        "unknown-key",
        "version",
        "target-verdict",
        "probes-type",
        "origin",
    ],
)
def test_schema_rejects_broken_shapes(data):
    assert list(schema_validator().iter_errors(data))


# ------------------------------------------------------------------------------ writing


def test_cells_dir_layout(tmp_path):
    assert results.cells_dir(tmp_path, "nightly") == tmp_path / "nightly" / "cells"


def test_write_then_load_round_trips(tmp_path):
    original = full_result()
    path = results.write_result(original, results.cells_dir(tmp_path, "default"))
    assert path == tmp_path / "default" / "cells" / f"{original.cell.id}.json"
    loaded = results.load_results(tmp_path)
    assert loaded.problems == []
    assert loaded.results == [original]


def test_write_leaves_no_temp_files(tmp_path):
    results.write_result(make_result(), tmp_path)
    results.write_result(make_result(), tmp_path)  # overwrite
    assert [p.name for p in tmp_path.iterdir()] == ["t2.5.1-py3.11.json"]


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = results.write_result(make_result(total_s=1.0), tmp_path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError):
        results.write_result(make_result(total_s=99.0), tmp_path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_write_merged_round_trips_and_is_loadable(tmp_path):
    cells = [
        make_result(torch="2.4.1"),
        make_result(torch="2.5.1", status=UNSATISFIABLE, message="no"),
    ]
    path = results.write_merged(cells, tmp_path / "results.json")
    data = json.loads(path.read_text())
    assert data["schema"] == "torch-matrix/results" and data["schema_version"] == 1
    assert len(data["cells"]) == 2
    loaded = results.load_results(tmp_path)
    assert loaded.problems == []
    assert sorted(r.cell.id for r in loaded.results) == ["t2.4.1-py3.11", "t2.5.1-py3.11"]
    assert results.load_results(path).results == loaded.results  # a single file works too


# ------------------------------------------------------------------------------ loading

GOLDEN_V1 = Path(__file__).parent / "golden" / "pins" / "real_yolo_run" / "cells"


def test_version_1_files_load_unchanged(tmp_path):
    """Files written before schema 2 (no cell.origin) are matrix cells, read as they were."""
    files = sorted(GOLDEN_V1.glob("*.json"))
    assert files and all(json.loads(f.read_text())["schema_version"] == 1 for f in files)
    loaded = results.load_results(GOLDEN_V1)
    assert loaded.problems == [] and len(loaded.results) == len(files)
    for result in loaded.results:
        assert result.cell.origin == records.ORIGIN_MATRIX and not result.cell.is_existing_env
        original = json.loads((GOLDEN_V1 / f"{result.cell.id}.json").read_text())
        again = result.to_json()
        assert again["schema_version"] == records.SCHEMA_VERSION and "origin" not in again["cell"]
        assert "targets" not in again and result.targets == ()  # version 3: none judged
        assert {k: v for k, v in again.items() if k not in ("schema_version", "verdict")} == {
            k: v for k, v in original.items() if k != "schema_version"
        }
        # an old file stores no verdict: judged on load, and it judged exactly this record
        assert "verdict" not in original and again["verdict"]["of"] == stored.record_digest(
            original
        )
        # A planned cell's fingerprint (resume) does not change with the new optional field.
        assert result.cell.to_json() == original["cell"]


def test_an_existing_env_cell_round_trips_and_validates(tmp_path):
    cell = dataclasses.replace(
        make_cell(), id="env-t2.5.1-py3.11-host-abc123", origin=records.ORIGIN_EXISTING
    )
    result = make_result(cell)
    data = result.to_json()
    assert data["cell"]["origin"] == "existing-env"
    schema_validator().validate(data)
    results.write_result(result, tmp_path / "cells")
    loaded = results.load_results(tmp_path)
    assert loaded.problems == [] and loaded.results == [result]
    assert loaded.results[0].cell.is_existing_env
    assert cell.fingerprint() != make_cell().fingerprint()


def test_bad_files_are_reported_by_name_and_skipped(tmp_path):
    cells = results.cells_dir(tmp_path, "default")
    good = results.write_result(make_result(), cells)
    (cells / "corrupt.json").write_text("{not json")
    truncated_text = good.read_text()[: len(good.read_text()) // 2]
    (cells / "truncated.json").write_text(truncated_text)
    (cells / "foreign.json").write_text(json.dumps({"name": "something else"}))
    newer = make_result(torch="2.6.0").to_json()
    newer["schema_version"] = 70
    (cells / "t2.6.0-py3.11.json").write_text(json.dumps(newer))
    invalid = make_result(torch="2.7.0").to_json()
    invalid["install"]["status"] = "sort-of"
    (cells / "t2.7.0-py3.11.json").write_text(json.dumps(invalid))
    (cells / "empty.json").write_text("")
    (cells / "list.json").write_text("[1, 2]")

    loaded = results.load_results(tmp_path)

    assert [r.cell.id for r in loaded.results] == ["t2.5.1-py3.11"]
    by_file = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in loaded.problems}
    assert by_file[str(cells / "corrupt.json")] == "not JSON (line 1 column 2)"
    assert by_file[str(cells / "truncated.json")].startswith("not JSON (line ")
    assert by_file[str(cells / "foreign.json")] == "not a torch-matrix cell result"
    assert by_file[str(cells / "list.json")] == "not a torch-matrix cell result"
    assert by_file[str(cells / "empty.json")] == "empty file"
    assert (
        by_file[str(cells / "t2.6.0-py3.11.json")]
        == f"schema_version 70 is newer than this tool understands ({records.SCHEMA_VERSION})"
    )
    assert by_file[str(cells / "t2.7.0-py3.11.json")].startswith(
        "invalid cell result at install/status"
    )
    assert len(loaded.problems) == 7
    assert len(loaded.skipped) == 7


def test_finds_cells_at_any_depth_like_downloaded_artifacts(tmp_path):
    results.write_result(make_result(torch="2.4.1"), tmp_path / "shard-1" / "default" / "cells")
    results.write_result(make_result(torch="2.5.1"), tmp_path / "shard-2" / "default" / "cells")
    results.write_result(make_result(torch="2.6.0"), tmp_path / "nightly" / "cells")
    (tmp_path / "shard-1" / "nox-report.json").write_text("{}")  # not a cell file: ignored
    loaded = results.load_results(tmp_path)
    assert [r.cell.id for r in loaded.results] == [
        "t2.4.1-py3.11",
        "t2.5.1-py3.11",
        "t2.6.0-py3.11",
    ]
    assert loaded.problems == []


def test_loading_the_cells_dir_itself_works(tmp_path):
    directory = results.write_result(make_result(), tmp_path / "cells").parent
    assert len(results.load_results(directory).results) == 1


def test_duplicate_cell_keeps_newest_and_reports_it(tmp_path):
    old = make_result(finished_at="2026-11-20T23:00:00+00:00", status=INSTALL_ERROR, probes=[])
    new = make_result(finished_at="2026-11-21T01:00:00+00:00")
    old_path = results.write_result(old, tmp_path / "a" / "cells")
    results.write_result(new, tmp_path / "b" / "cells")
    loaded = results.load_results(tmp_path)
    assert loaded.results == [new]
    assert len(loaded.problems) == 1
    assert loaded.problems[0].startswith(f"{old_path}: duplicate result for cell t2.5.1-py3.11")


def test_identical_copies_and_stale_merged_copies_are_not_problems(tmp_path):
    first = make_result(finished_at="2026-11-20T23:00:00+00:00")
    results.write_result(first, results.cells_dir(tmp_path, "default"))
    results.write_merged([first], tmp_path / "results.json")
    assert results.load_results(tmp_path).problems == []
    rerun = make_result(finished_at="2026-11-21T09:00:00+00:00", total_s=3.0)
    path = results.write_result(rerun, results.cells_dir(tmp_path, "default"))
    loaded = results.load_results(tmp_path)
    assert loaded.results == [replace(rerun, replaces=loaded.results[0].replaces)]
    assert loaded.results[0].replaces.startswith("sha256:")  # the rerun names what it overwrote
    assert loaded.problems == []
    assert results.read_result(path) == loaded.results[0]


def test_foreign_results_json_is_reported(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"sessions": []}))
    loaded = results.load_results(tmp_path)
    assert loaded.results == []
    assert loaded.problems == [f"{tmp_path / 'results.json'}: not a torch-matrix results file"]


def test_bad_entry_inside_merged_file_is_named_by_position(tmp_path):
    path = results.write_merged(
        [make_result(torch="2.4.1"), make_result(torch="2.5.1")], tmp_path / "results.json"
    )
    data = json.loads(path.read_text())
    data["cells"][1]["probes"] = "nope"
    path.write_text(json.dumps(data))
    loaded = results.load_results(tmp_path)
    assert [r.cell.id for r in loaded.results] == ["t2.4.1-py3.11"]
    assert loaded.problems[0].startswith(f"{path}[1]: invalid cell result at probes")


def test_missing_root_is_a_user_error(tmp_path):
    with pytest.raises(UserError) as caught:
        results.load_results(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in caught.value.one_line()


def test_empty_root_loads_nothing(tmp_path):
    loaded = results.load_results(tmp_path)
    assert loaded.results == [] and loaded.problems == []


# ------------------------------------------------------------------------------ resume


def _stored(tmp_path, result):
    results.write_result(result, tmp_path)
    return result


def test_resume_skips_a_complete_installed_cell(tmp_path):
    cell = make_cell(probes=("install_sanity", "training_step"))
    _stored(tmp_path, make_result(cell))
    assert results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_resume_counts_a_failing_probe_as_complete(tmp_path):
    cell = make_cell()
    _stored(
        tmp_path, make_result(cell, probes=[make_probe("install_sanity", "fail", "nms missing")])
    )
    assert results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_resume_skips_unsatisfiable_but_retries_error(tmp_path):
    cell = make_cell()
    _stored(tmp_path, make_result(cell, status=UNSATISFIABLE, message="no wheel for cp313"))
    assert results.has_complete_result(tmp_path, cell, cell.fingerprint())
    _stored(tmp_path, make_result(cell, status=INSTALL_ERROR, message="connection reset"))
    assert not results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_resume_reruns_a_cell_whose_probe_runner_died(tmp_path):
    cell = make_cell()
    died = [
        make_probe("install_sanity"),
        make_probe(records.PROBE_RUNNER, "error", "exited with -11"),
    ]
    _stored(tmp_path, make_result(cell, probes=died))
    assert not results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_resume_reruns_when_fingerprint_differs(tmp_path):
    cell = make_cell()
    _stored(tmp_path, make_result(cell))
    assert not results.has_complete_result(tmp_path, cell, "another-spec")


def test_resume_reruns_when_a_probe_result_is_missing(tmp_path):
    cell = make_cell(probes=("install_sanity", "training_step"))
    _stored(tmp_path, make_result(cell, probes=[make_probe("install_sanity")]))
    assert not results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_resume_reruns_when_file_is_missing_or_corrupt(tmp_path):
    cell = make_cell()
    assert not results.has_complete_result(tmp_path, cell, cell.fingerprint())
    (tmp_path / f"{cell.id}.json").write_text('{"schema": "torch-matrix/cell-res')
    assert not results.has_complete_result(tmp_path, cell, cell.fingerprint())


def test_interrupted_write_leaves_resume_state_consistent(tmp_path, monkeypatch):
    """A Ctrl-C during the write keeps the finished older file valid for resume."""
    cell = make_cell()
    _stored(tmp_path, make_result(cell))

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(results.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        results.write_result(make_result(cell, total_s=5.0), tmp_path)
    monkeypatch.undo()
    assert results.has_complete_result(tmp_path, cell, cell.fingerprint())
    assert sorted(os.listdir(tmp_path)) == [f"{cell.id}.json"]
    assert Path(tmp_path / f"{cell.id}.json").read_text().count('"total": 12.5') == 1


# ------------------------------------------------------------------------------ fast validation


def test_fast_path_is_active_for_the_published_schema():
    """If the schema gains a keyword the fast path does not know, loading gets ~20x slower."""
    assert resultschema.fast_check() is not None
    assert resultschema.fast_check()(full_result().to_json())


_DELETE = object()
_REPLACEMENTS = [
    None,
    True,
    1,
    1.0,
    -1,
    "",
    "x",
    "t2.5.1 py3.11",
    [],
    {},
    ["x"],
    {"x": "y"},
    "installed",
    "pass",
    "fail",
    "maybe",
    "torch-matrix/cell-result",
    2,
]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutated(data, path, replacement):
    data = copy.deepcopy(data)
    if not path:
        return replacement
    target = data
    for part in path[:-1]:
        target = target[part]
    if replacement is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = replacement
    return data


def test_fast_path_never_accepts_what_jsonschema_rejects():
    """Every single-point mutation of a full result: fast 'valid' implies jsonschema 'valid'."""
    base = full_result().to_json()
    base["cell"]["axes"]["extra"] = "v"
    base["timings"]["odd"] = 1
    fast, strict = resultschema.fast_check(), schema_validator()
    checked = 0
    for path in list(_paths(base)):
        for replacement in [*_REPLACEMENTS, _DELETE] if path else _REPLACEMENTS:
            document = _mutated(base, path, replacement)
            if fast(document):
                assert strict.is_valid(document), (path, replacement)
            checked += 1
    added = _mutated(base, ("unknown",), 1)
    assert not fast(added) and not strict.is_valid(added)
    assert checked > 1000


def test_a_version_1_file_loads_unchanged_and_a_cell_with_install_round_trips(tmp_path):
    """Schema 2 added the cell's optional install list; version-1 files still load as they were."""
    old = full_result().to_json()
    old["schema_version"] = 1
    cells = results.cells_dir(tmp_path, "default")
    cells.mkdir(parents=True)
    (cells / f"{old['cell']['id']}.json").write_text(json.dumps(old))
    loaded = results.load_results(tmp_path)
    assert loaded.problems == [] and len(loaded.results) == 1
    assert loaded.results[0] == full_result()
    assert loaded.results[0].cell.fingerprint() == full_result().cell.fingerprint()
    # A cell with an install list: written as the current version, read back the same, other fingerprint.
    cell = replace(
        full_result().cell, install=(".[test]", "-r requirements.txt"), install_digest="ab12"
    )
    result = replace(full_result(), cell=cell)
    assert result.to_json()["schema_version"] == records.SCHEMA_VERSION
    path = results.write_result(result, tmp_path / "new")
    assert results.read_result(path) == result
    assert cell.fingerprint() != full_result().cell.fingerprint()
    assert replace(cell, install_digest="cd34").fingerprint() != cell.fingerprint()


def test_public_version_drops_the_local_label_and_refuses_non_versions():
    from torch_matrix.vocab.records import public_version

    assert public_version("2.13.0+cpu") == "2.13.0"
    assert public_version("0.28.0") == "0.28.0"
    assert public_version("") is None and public_version(None) is None
    assert public_version("not-a-version") is None


def test_local_label_is_the_build_and_survives_a_version_pep_440_cannot_parse():
    from torch_matrix.vocab.records import local_label

    assert local_label("2.13.0+cpu") == "cpu"
    assert local_label("2.5.1") == ""
    assert local_label("1.12.0+cu102.post1") == "cu102.post1"
    assert local_label("nightly+weird+x") == "weird+x"


@pytest.mark.parametrize(
    "probe",
    [
        make_probe("install_sanity"),
        full_result().probes[1],
        records.ProbeResult(name="p", status="skip"),
    ],
)
def test_probe_from_json_makes_what_the_constructor_makes(probe):
    """ProbeResult.from_json fills the record without its __init__ (speed): every field, same values,
    still frozen. A field added to the record and forgotten in from_json fails here."""
    loaded = records.ProbeResult.from_json(probe.to_json())
    assert loaded == probe
    assert vars(loaded) == vars(probe)
    assert set(vars(loaded)) == {field.name for field in dataclasses.fields(records.ProbeResult)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.status = "fail"  # type: ignore[misc]


def test_result_from_json_makes_what_the_constructor_makes():
    """CellResult.from_json fills the record without its __init__ (speed), as ProbeResult's does:
    every field (the stored verdict too), same values, still frozen."""
    from torch_matrix.judge.stored import judged

    for result in (full_result(), judged(full_result()), make_result()):
        loaded = records.CellResult.from_json(result.to_json())
        assert loaded == result and loaded.verdict == result.verdict
        assert vars(loaded) == vars(result)
        assert set(vars(loaded)) == {field.name for field in dataclasses.fields(records.CellResult)}
        with pytest.raises(dataclasses.FrozenInstanceError):
            loaded.fingerprint = "x"  # type: ignore[misc]


def test_probe_from_json_refuses_keys_a_probe_does_not_have():
    """The probe runner's output is not schema-checked: a key that is no field (``to_json``!)
    must not become an attribute of the record."""
    with pytest.raises(ValueError, match="to_json"):
        records.ProbeResult.from_json({"name": "p", "status": "pass", "to_json": None})


def test_a_cell_without_evidence_is_tried_again_by_a_resumed_run(tmp_path):
    """A truncated wheel in uv's cache installs (its RECORD said nothing of a cut shared library)
    and the probes fail loading it: '! error', no evidence. A resumed run kept that result as
    complete and skipped the cell (exit 0, the error left in the table). Now it runs it again;
    a cell whose tests all skipped (no evidence either, but a rerun skips them again) stays kept."""
    from tests.factories import make_cell, make_probe, make_result
    from torch_matrix.judge.verdict import NO_EVIDENCE, verdict_of
    from torch_matrix.world.results import has_complete_result, write_result

    cell = make_cell(torch="2.4.0", torchvision="", probes=("install_sanity",))
    broken = make_result(
        cell,
        fingerprint="f1",
        probes=[
            make_probe(
                "install_sanity",
                "fail",
                message="ImportError: torch/lib/libtorch_cpu.so: invalid ELF header",
            )
        ],
    )
    assert verdict_of(broken).kind == NO_EVIDENCE
    write_result(broken, tmp_path / "cells")
    assert not has_complete_result(tmp_path / "cells", cell, "f1")

    idle_cell = make_cell(torch="2.5.0", torchvision="", probes=("tests",))
    idle = make_result(
        idle_cell,
        fingerprint="f1",
        probes=[
            make_probe(
                "tests", "skip", message="0 passed, 3 skipped", evidence={"no_evidence": True}
            )
        ],
    )
    assert verdict_of(idle).kind == NO_EVIDENCE and verdict_of(idle).idle
    write_result(idle, tmp_path / "cells")
    assert has_complete_result(tmp_path / "cells", idle_cell, "f1")
