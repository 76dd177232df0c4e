"""pip's configuration: what torch-matrix honours (the spec's [index], pip's environment
variables) and what it only shows (pip's configuration files), and ``plan`` saying, in text and
JSON, each index and find-links location the cells install from and where it came from."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

from torch_matrix.cli import plan as plan_cli
from torch_matrix.world.pipconfig import config_files, settings_from
from tests.synthetic_wheels import build_index


def test_files_are_read_in_pips_order_and_the_later_one_wins(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "xdg")}
    files = [str(p) for p in config_files(env, "/venv")]
    assert files == [
        f"{tmp_path}/xdg/pip/pip.conf",
        "/etc/pip.conf",
        f"{tmp_path}/.pip/pip.conf",
        f"{tmp_path}/.config/pip/pip.conf",
        "/venv/pip.conf",
    ]
    assert config_files({**env, "PIP_CONFIG_FILE": "/dev/null"}, "/venv") == []
    named = tmp_path / "named.conf"
    named.write_text("[global]\n")
    with_named = [str(p) for p in config_files({**env, "PIP_CONFIG_FILE": str(named)}, "/venv")]
    assert (
        with_named[-1] == str(named) and f"{tmp_path}/.pip/pip.conf" not in with_named
    )  # as pip: no user files

    settings = settings_from(
        [
            ("/etc/pip.conf", "[global]\nindex-url = https://mirror/simple\nfind_links = /a\n"),
            (
                "~/.config/pip/pip.conf",
                "[global]\nextra-index-url = file:///x file:///y\n[install]\nfind-links = /b /c\n",
            ),
            ("broken.conf", "this is not ini"),
        ]
    )
    assert [(s.key, s.values, s.origin) for s in settings] == [
        ("index-url", ("https://mirror/simple",), "/etc/pip.conf [global]"),
        ("extra-index-url", ("file:///x", "file:///y"), "~/.config/pip/pip.conf [global]"),
        ("find-links", ("/b", "/c"), "~/.config/pip/pip.conf [install]"),
    ]


def _plan(tmp_path: Path, spec_text: str, environ: dict[str, str], *, as_json: bool = False) -> str:
    index = build_index(tmp_path / "index")
    spec = tmp_path / "matrix.toml"
    spec.write_text(spec_text.replace("INDEX", index.url))
    out = io.StringIO()
    args = argparse.Namespace(spec=str(spec), json=as_json, shard=None, shards=None)
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_DIRS": str(tmp_path / "no-xdg"),
        "TORCH_MATRIX_CACHE_DIR": str(tmp_path / "cache"),
        **environ,
    }
    assert plan_cli.main(args, out=out, environ=env) == 0
    return out.getvalue()


SPEC = 'name = "p"\npython = ["current"]\ntorch = ["2.1.0"]\n'


def test_plan_shows_each_location_in_use_with_its_origin_and_what_pip_conf_holds(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    conf = tmp_path / "home" / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        f"[global]\nextra-index-url = file:///opt/elsewhere/simple\nfind-links = {wheels}\n"
    )
    spec_text = SPEC + '[index]\ndefault = "INDEX"\n'
    text = _plan(tmp_path, spec_text, {"PIP_FIND_LINKS": str(wheels)})
    assert f"default-index  {(tmp_path / 'index' / 'simple').as_uri()}" in text
    assert f"from {tmp_path / 'matrix.toml'} [index] default" in text
    assert f"find-links     {wheels}" in text and "from $PIP_FIND_LINKS" in text
    assert (
        f"extra-index-url = file:///opt/elsewhere/simple  ({conf} [global]): not used; to use it, "
        "set $PIP_EXTRA_INDEX_URL or [index] extra"
    ) in text
    assert f"find-links = {wheels}  ({conf} [global]): the same locations are in use" in text

    cells = json.loads(_plan(tmp_path, spec_text, {"PIP_FIND_LINKS": str(wheels)}, as_json=True))
    assert cells[0]["sources"] == [
        {
            "kind": "default-index",
            "location": (tmp_path / "index" / "simple").as_uri(),
            "from": f"{tmp_path / 'matrix.toml'} [index] default",
        },
        {"kind": "find-links", "location": str(wheels), "from": "$PIP_FIND_LINKS"},
    ]


def test_a_variant_cell_shows_its_variant_index(tmp_path):
    spec_text = (
        'name = "p"\npython = ["current"]\ntorch = ["2.1.0"]\nvariant = ["default", "cu121"]\n'
        '[index]\ndefault = "INDEX"\npytorch = "INDEX/../whl"\nfind_links = []\n'
    )
    cells = json.loads(_plan(tmp_path, spec_text, {}, as_json=True))
    variant = next(c for c in cells if c["axes"]["variant"] == "cu121")
    assert variant["sources"][-1]["kind"] == "variant-index"
    assert variant["sources"][-1]["location"].endswith("/whl/cu121/")
    assert variant["sources"][-1]["from"] == f"{tmp_path / 'matrix.toml'} [index] pytorch"
    assert all(
        s["kind"] != "variant-index"
        for s in next(c for c in cells if c["axes"]["variant"] == "default")["sources"]
    )
