"""torch_matrix.world.specfile: the TOML format, its defaults, and one-line errors for every bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_matrix.vocab.errors import UserError
from torch_matrix.spec.model import DEFAULT_SPEC_PATH
from torch_matrix.world.specfile import load_spec, spec_path
from torch_matrix.spec.parse import parse_spec

FULL = """
name = "nightly"
python = ["3.10", "3.11"]
torch = { versions = ">=2.0,<3", select = "all", newest = 2 }
torchvision = "paired"
variant = ["default", "cpu", "cu124", "rocm6.2"]

[extras]
numpy = { values = ["<2", ">=2"], label = "np" }
pillow = "10.4.0"

[[exclude]]
python = "3.10"
torch = ">=2.5"

[[exclude]]
variant = ["cu*", "rocm6.2"]
numpy = "<2"

[[include]]
python = "3.11"
torch = "2.4.1"
variant = "cu118"

[probes]
run = ["install_sanity", "numpy_interop"]
required = ["install_sanity", "smoke"]
unsupported = "pass"
skip = "fail"
dirs = ["my_probes"]
commands = { smoke = "pytest -q tests/smoke" }
timeout = 120

[index]
default = "https://mirror.example/simple"
pytorch = "https://mirror.example/whl"
extra = ["https://extra.example/simple"]
find_links = ["wheels"]

[interpreters]
"3.10" = "/opt/python3.10/bin/python"
"""


def parse(text: str, **kwargs):
    return parse_spec(text, "matrix.toml", base_dir="/proj", **kwargs)


def test_full_example_parses_into_typed_records():
    spec = parse(FULL)
    assert spec.name == "nightly"
    assert spec.python == ("3.10", "3.11")
    assert (spec.torch.versions, spec.torch.select, spec.torch.newest) == ("<3,>=2.0", "all", 2)
    assert spec.variants == ("default", "cpu", "cu124", "rocm6.2")
    numpy, pillow = spec.extras
    assert (numpy.name, numpy.values, numpy.label) == ("numpy", ("<2", ">=2"), "np")
    assert (pillow.values, pillow.label) == (("==10.4.0",), "pillow")
    assert spec.exclude[0].values == {"python": ("==3.10.*",), "torch": (">=2.5",)}
    assert spec.exclude[1].values["variant"] == ("cu*", "rocm6.2")
    assert spec.include[0].values == {
        "python": ("3.11",),
        "torch": ("2.4.1",),
        "variant": ("cu118",),
    }
    assert spec.probes.run == ("install_sanity", "numpy_interop")
    assert spec.probes.policy == {"unsupported": "pass", "skip": "fail"}
    assert spec.probes.dirs == ("/proj/my_probes",)
    assert spec.probes.commands == {"smoke": "pytest -q tests/smoke"}
    assert spec.probes.timeout == 120.0
    assert spec.index.find_links == ("/proj/wheels",)
    assert spec.index.variant_url("cu124") == "https://mirror.example/whl/cu124/"
    assert spec.interpreters == {"3.10": "/opt/python3.10/bin/python"}


def test_defaults_and_explicit_torch_list():
    spec = parse('torch = ["2.5.1", "1.12.0"]\ntorchvision = ["0.20.1"]')
    assert spec.name == "default" and spec.python == ("current",) and spec.variants == ("default",)
    assert spec.torch.explicit == ("2.5.1", "1.12.0")
    assert spec.torchvision == ("0.20.1",)
    # Nothing named as required: an API a version lacks (torch.compile on 1.x) is no breakage.
    assert spec.probes.policy == {"unsupported": "pass", "skip": "pass"}


def test_naming_required_probes_makes_their_absence_a_failure():
    spec = parse('[probes]\nrequired = ["torch_compile"]')
    assert spec.probes.policy == {"unsupported": "fail", "skip": "pass"}
    spec = parse('[probes]\nrequired = ["torch_compile"]\nunsupported = "pass"')
    assert spec.probes.policy["unsupported"] == "pass"


def test_index_honours_pip_environment_only_where_the_spec_is_silent():
    environ = {
        "PIP_FIND_LINKS": "/opt/wheels /more",
        "PIP_INDEX_URL": "https://mirror/simple",
        "PIP_EXTRA_INDEX_URL": "https://a/simple https://b/simple",
    }
    spec = parse("", environ=environ)
    assert spec.index.find_links == ("/opt/wheels", "/more")
    assert spec.index.default == "https://mirror/simple"
    assert spec.index.extra == ("https://a/simple", "https://b/simple")
    silent = parse("[index]\nfind_links = []\ndefault = ''\nextra = []", environ=environ)
    assert (silent.index.find_links, silent.index.default, silent.index.extra) == ((), "", ())
    assert parse("").index.to_json() == {
        "default": "",
        "pytorch": "https://download.pytorch.org/whl",
        "extra": [],
        "find_links": [],
    }


def test_builtin_default_matrix_is_newest_three_latest_patch_on_current_python():
    spec = load_spec(DEFAULT_SPEC_PATH, environ={})
    assert spec.python == ("current",)
    assert (spec.torch.select, spec.torch.newest) == ("latest-patch", 3)
    assert spec.torchvision == "paired" and spec.variants == ("default",)


def test_resolution_order(tmp_path: Path):
    explicit = tmp_path / "a.toml"
    from_env = tmp_path / "b.toml"
    assert spec_path(explicit, {"TORCH_MATRIX_SPEC": str(from_env)}, cwd=str(tmp_path)) == explicit
    assert spec_path(None, {"TORCH_MATRIX_SPEC": str(from_env)}, cwd=str(tmp_path)) == from_env
    assert spec_path(None, {}, cwd=str(tmp_path)) == DEFAULT_SPEC_PATH
    (tmp_path / "matrix.toml").write_text('name = "local"\n')
    assert spec_path(None, {}, cwd=str(tmp_path)) == tmp_path / "matrix.toml"


def test_load_spec_resolves_relative_paths_against_the_spec_file(tmp_path: Path):
    path = tmp_path / "sub" / "m.toml"
    path.parent.mkdir()
    path.write_text('[probes]\ndirs = ["p"]\n[index]\nfind_links = ["w"]\n')
    spec = load_spec(path, environ={})
    assert spec.probes.dirs == (str(tmp_path / "sub" / "p"),)
    assert spec.index.find_links == (str(tmp_path / "sub" / "w"),)


def test_missing_spec_file_is_a_user_error(tmp_path: Path):
    with pytest.raises(UserError) as caught:
        load_spec(tmp_path / "nope.toml", environ={})
    assert "nope.toml" in caught.value.one_line()


BAD = [
    ("name = 'a b'", "name", "'a b'"),
    ("colour = 1", "colour", "unknown key"),
    ("python = []", "python", "must not be empty"),
    ("python = ['3']", "python[0]", "'3'"),
    ("python = ['3.10', '3.10']", "python[1]", "duplicate"),
    ("python = 3.10", "python", "number 3.1"),
    ("torch = { versions = '>=2.0,banana' }", "torch.versions", "'>=2.0,banana'"),
    ("torch = { select = 'some' }", "torch.select", "'some'"),
    ("torch = { newest = 0 }", "torch.newest", "0"),
    ("torch = { latest = 1 }", "torch.latest", "unknown key"),
    ("torch = ['2.5.x']", "torch[0]", "'2.5.x'"),
    ("torch = ['2.5.1+cu124']", "torch[0]", "local labels"),
    ("torch = []", "torch", "must not be empty"),
    ("torchvision = 'matched'", "torchvision", "'matched'"),
    ("variant = ['cuda12']", "variant[0]", "'cuda12'"),
    ("variant = []", "variant", "must not be empty"),
    ("[extras]\nnumpy = ['<2', 'lots']", "extras.numpy[1]", "'lots'"),
    ("[extras]\nnumpy = []", "extras.numpy", "must not be empty"),
    ("[extras]\n'bad name!' = ['1']", "extras.bad name!", "invalid project name"),
    ("[extras]\ntorch = ['<2']", "extras.torch", "core axis"),
    ("[extras]\nnumpy = { values = ['<2'], colour = 1 }", "extras.numpy.colour", "unknown key"),
    ("[[exclude]]\ncuda = '12'", "exclude[0].cuda", "unknown key"),
    ("[[exclude]]\ntorch = '>>2'", "exclude[0].torch", "'>>2'"),
    ("[[include]]\ntorch = '2.5.1'", "include[0]", "needs 'python'"),
    ("[[include]]\npython = '3.11'\ntorch = ['2.5.1', '2.4.0']", "include[0].torch", "one value"),
    ("[probes]\nunsupported = 'ignore'", "probes.unsupported", "'ignore'"),
    ("[probes]\ntimeout = -1", "probes.timeout", "-1"),
    ("[probes]\nrun = ['a']\nrequired = ['b']", "probes.required[0]", "'b'"),
    ("[probes]\nwhatever = 1", "probes.whatever", "unknown key"),
    ("[index]\ndefault = 'pypi'", "index.default", "'pypi'"),
    ("[index]\nmirror = 'x'", "index.mirror", "unknown key"),
    ("[interpreters]\n'3' = '/x'", "interpreters.3", "'3'"),
    ("python = [", "matrix.toml", "invalid TOML"),
    ("[targets]\ngpus = ['RTX 409']", "targets.gpus[0]", "unknown GPU 'RTX 409'"),
    (
        "[targets]\ngpus = ['V100', 'sm_88']",
        "targets.gpus[1]",
        "unknown compute capability 'sm_88'",
    ),
    ("[targets]\ndrivers = ['12.4']", "targets.drivers[0]", "invalid NVIDIA driver version '12.4'"),
    ("[targets]\ngpu = ['V100']", "targets.gpu", "unknown key"),
    ("[targets]\ngpus = ['V100', 'v100']", "targets.gpus", "named twice"),
]


def test_targets_cross_gpus_with_drivers_and_a_bad_name_gets_a_did_you_mean():
    spec = parse(
        "[targets]\ngpus = ['GTX 1080', 'sm_70', 'RTX 4090', 'RTX 5090']\ndrivers = ['535.104', '580.82.07']"
    )
    assert len(spec.targets) == 8 and spec.targets[0].label == "GTX 1080 (sm_61), driver 535.104"
    assert [t.gpu.capability for t in spec.targets[::2] if t.gpu] == [61, 70, 89, 120]
    assert parse("").targets == () and [
        t.label for t in parse("[targets]\ndrivers = ['580.82.07']").targets
    ] == ["driver 580.82.07"]
    with pytest.raises(UserError) as caught:
        parse("[targets]\ngpus = ['RTX 409']")
    assert (
        "did you mean 'RTX 4090'" in caught.value.hint and "torch-matrix plan" in caught.value.hint
    )


@pytest.mark.parametrize("text, key, value", BAD)
def test_every_bad_input_is_one_line_naming_file_key_and_value(text: str, key: str, value: str):
    with pytest.raises(UserError) as caught:
        parse(text)
    line = caught.value.one_line()
    assert "\n" not in line
    assert line.startswith("torch-matrix: error: matrix.toml")
    assert key in caught.value.where
    assert value in line


def test_an_include_install_mode_must_be_resolve_or_override(tmp_path):
    import pytest

    from torch_matrix.vocab.errors import UserError
    from torch_matrix.world.specfile import load_spec

    spec = tmp_path / "matrix.toml"
    spec.write_text(
        'torch = ["2.3.1"]\n[[include]]\npython = "3.11"\ntorch = "2.3.1"\ntorchvision = "0.19.1"\n'
        'install = "nodeps"\n'
    )
    with pytest.raises(
        UserError, match="expected one of resolve, override, got 'nodeps'"
    ) as raised:
        load_spec(str(spec))
    assert "include[0].install" in raised.value.render()
    spec.write_text(
        'torch = ["2.3.1"]\n[[include]]\npython = "3.11"\ntorch = "2.3.1"\ntorchvision = "0.19.1"\n'
        'install = "override"\n'
    )
    assert load_spec(str(spec)).include[0].install == "override"
