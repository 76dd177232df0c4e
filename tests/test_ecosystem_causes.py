"""An ecosystem regression's failures grouped by cause (issue 42): the real case had two causes, a
checkpoint class at one torch.load call site and another class at a second, whose messages read
alike (cut before the class): one group and one fix, applied, repaired 2 of 6 tests. Grouped by
call site and refused class, each group names its own site and class, and its fix says it was not
proven by a rerun (the ecosystem run does not rerun a fix)."""

from __future__ import annotations

from torch_matrix.ecosystem.classify import Classified, EcoClass
from torch_matrix.ecosystem.records import Role, SideRun, SideStatus
from torch_matrix.ecosystem.report import groups_of

CUT = (
    "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you "
    "have two options, do those steps only if you trust the source of the checkpoint. (1) In "
    "PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load`"
)


def _text(cls: str) -> str:
    return (
        f"{CUT} from `False` to `True`. WeightsUnpickler error: Unsupported global: GLOBAL {cls} "
        "was not an allowed global by default."
    )


def _frames(path: str, line: int):
    return (
        {"path": "tests/test_x.py", "line": 3, "code": "load()"},
        {"path": path, "line": line, "code": "return torch.load(path)"},
    )


def test_a_regression_with_two_load_sites_gets_one_group_and_one_fix_per_site():
    tests = {
        "tests/test_io.py::test_a": ("ckptlib.config.RunConfig", "ckptlib/io.py", 11),
        "tests/test_io.py::test_b": ("ckptlib.config.RunConfig", "ckptlib/io.py", 11),
        "tests/test_data.py::test_c": ("ckptlib.data.TensorBag", "ckptlib/data.py", 19),
        "tests/test_data.py::test_d": ("ckptlib.data.TensorBag", "ckptlib/data.py", 19),
    }
    candidate = SideRun(
        "ckptlib",
        Role.CANDIDATE,
        "2.6.0",
        SideStatus.FAILED,
        tests={t: "failed" for t in tests},
        messages={t: CUT for t in tests},
        texts={t: _text(cls) for t, (cls, _p, _l) in tests.items()},
        frames={t: _frames(path, line) for t, (_c, path, line) in tests.items()},
    )
    classified = Classified(
        "ckptlib",
        EcoClass.REGRESSED,
        "4 tests regressed",
        new_failures=tuple(sorted(tests)),
        messages={t: CUT for t in tests},
    )
    groups = groups_of(classified, "", candidate)
    assert len(groups) == 2
    by_site = {g.tests: g.cause.fix for g in groups}
    io = by_site[("tests/test_io.py::test_a", "tests/test_io.py::test_b")]
    data = by_site[("tests/test_data.py::test_c", "tests/test_data.py::test_d")]
    assert (
        io.startswith("at ckptlib/io.py:11: ")
        and "add_safe_globals([ckptlib.config.RunConfig])" in io
    )
    assert data.startswith("at ckptlib/data.py:19: ") and "[ckptlib.data.TensorBag]" in data
    assert all("not proven: no rerun with it applied" in fix for fix in (io, data))
