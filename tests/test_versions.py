"""One version ordering (torch_matrix.vocab.versions), on packaging.version."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from torch_matrix.vocab.versions import newest, parse_version, version_key

ROOT = Path(__file__).resolve().parent.parent

releases = st.builds(
    lambda parts, pre: ".".join(map(str, parts)) + pre,
    st.lists(st.integers(0, 20), min_size=1, max_size=4),
    st.sampled_from(["", "a1", "b2", "rc1", ".post1", ".dev3", "+cu121"]),
)


@given(st.lists(releases, min_size=1, max_size=8))
def test_versions_sort_as_packaging_orders_them(texts):
    ordered = sorted(texts, key=version_key)
    assert [Version(t) for t in ordered] == sorted(Version(t) for t in texts)


def test_prereleases_sort_before_their_release_and_other_texts_last():
    texts = ["current", "2.0.0", "1.10", "2.0.0rc1", "1.9", "default"]
    assert sorted(texts, key=version_key) == [
        "1.9",
        "1.10",
        "2.0.0rc1",
        "2.0.0",
        "current",
        "default",
    ]
    assert newest(["2.0.0rc1", "2.0.0"]) == "2.0.0"
    assert newest([]) is None
    assert parse_version("not a version") is None
    assert version_key(Version("2.1")) < version_key("2.10") < version_key(None)


def test_no_module_orders_versions_by_hand():
    """Splitting a version on dots (``tuple(int(p) for p in v.split("."))``) or keeping a private
    ``_version_key`` is how the orderings drifted apart: the one key lives in vocab/versions.py."""
    wrong = []
    for path in sorted((ROOT / "torch_matrix").rglob("*.py")):
        if "probes" in path.relative_to(ROOT).parts:
            continue  # stdlib only, runs inside the cell's interpreter: no packaging there
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("_version_key", "_value_key"):
                wrong.append(f"{path.name}: def {node.name}")
            if isinstance(node, ast.keyword) and node.arg == "key":
                if "split('.')" in ast.unparse(node.value):  # sorted/max(key=... split on dots)
                    wrong.append(f"{path.name}:{node.value.lineno}: a version split on dots")
    assert wrong == []
