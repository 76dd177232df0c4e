"""uv at the edge: install command, failure classification on real uv 0.13 messages, retries, verify."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from torch_matrix.world.environment import (
    OFFICIAL_PYTORCH_INDEX,
    check_installed,
    install,
    install_command,
    parse_freeze,
    verify,
)
from torch_matrix.world.uvoutput import classify_install_failure
from torch_matrix.vocab.records import INSTALL_ERROR, INSTALLED, UNSATISFIABLE, InstallOutcome
from torch_matrix.spec.model import IndexConfig
from tests.factories import make_cell

# Real uv 0.13.8 output, produced on this machine.
NO_SUCH_VERSION = """\
Using Python 3.12.1 environment at: v312
error: No solution found when resolving dependencies
  cause: Because there is no version of torch==99.0 and you require torch==99.0, we can conclude \
that your requirements are unsatisfiable.
"""
NO_WHEEL_FOR_PYTHON = """\
Using Python 3.12.1 environment at: v312
error: No solution found when resolving dependencies
  cause: Because torch==2.0.0 has no wheels with a matching Python ABI tag (e.g., `cp312`) and you \
require torch==2.0.0, we can conclude that your requirements are unsatisfiable.

hint: You require CPython 3.12 (`cp312`), but we only found wheels for `torch` (v2.0.0) with the \
following Python ABI tags: `cp38`, `cp39`, `cp310`, `cp311`
"""
REQUIRES_PYTHON = """\
Using Python 3.10.13 environment at: v310
error: No solution found when resolving dependencies
  cause: Because the current Python version (3.10.13) does not satisfy Python>=3.11 and \
numpy==2.3.0 depends on Python>=3.11, we can conclude that numpy==2.3.0 cannot be used.
         And because you require numpy==2.3.0, we can conclude that your requirements are unsatisfiable.
"""
NO_PAIRING = """\
error: No solution found when resolving dependencies
  cause: Because torchvision==0.20.0 depends on torch==2.5.0 and you require torchvision==0.20.0, \
we can conclude that you require torch==2.5.0.
         And because you require torch==2.4.0, we can conclude that your requirements are unsatisfiable.
"""
NOT_IN_REGISTRY = """\
error: No solution found when resolving dependencies
  cause: Because nonexistent-pkg-xyz-123 was not found in the package registry and you require \
nonexistent-pkg-xyz-123, we can conclude that your requirements are unsatisfiable.
"""
CONNECTION_REFUSED = """\
Using Python 3.12.1 environment at: v312
error: Request failed after 3 retries in 10.2s
  cause: Failed to fetch: http://127.0.0.1:9/simple/six/
  cause: error sending request for url (http://127.0.0.1:9/simple/six/)
  cause: client error (Connect)
  cause: tcp connect error
  cause: Connection refused (os error 111)
"""
DNS_FAILURE = """\
error: Request failed after 3 retries in 10.5s
  cause: Failed to fetch: http://nonexistent.invalid/simple/six/
  cause: error sending request for url (http://nonexistent.invalid/simple/six/)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Name or service not known
"""
DISK_FULL = """\
error: Failed to install: torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl (torch==2.5.1)
  Caused by: failed to write to file `/root/.cache/uv/archive-v0/x/torch/lib/libtorch_cuda.so`: \
No space left on device (os error 28)
"""
SERVER_ERROR = """\
error: Failed to fetch: `https://download.pytorch.org/whl/cu124/torch/`
  Caused by: HTTP status server error (503 Service Unavailable) for url \
(https://download.pytorch.org/whl/cu124/torch/)
"""


@pytest.mark.parametrize(
    "output", [NO_SUCH_VERSION, NO_WHEEL_FOR_PYTHON, REQUIRES_PYTHON, NO_PAIRING, NOT_IN_REGISTRY]
)
def test_resolver_refusals_are_unsatisfiable_and_keep_uvs_words(output):
    found = classify_install_failure(1, output)
    assert found.status == UNSATISFIABLE
    assert "No solution found" in found.message
    assert "Using Python" not in found.message  # uv's chatter is dropped, its reasons kept


def test_the_hint_about_python_tags_is_kept():
    found = classify_install_failure(1, NO_WHEEL_FOR_PYTHON)
    assert "`cp38`, `cp39`, `cp310`, `cp311`" in found.message


@pytest.mark.parametrize("output", [CONNECTION_REFUSED, DNS_FAILURE, DISK_FULL, SERVER_ERROR])
def test_infrastructure_trouble_is_error(output):
    assert classify_install_failure(2, output).status == INSTALL_ERROR


def test_a_killed_installer_is_error_even_with_resolver_words():
    assert classify_install_failure(-9, NO_SUCH_VERSION).status == INSTALL_ERROR
    assert classify_install_failure(137, "").status == INSTALL_ERROR


def test_unknown_failure_is_error_not_a_finding():
    found = classify_install_failure(1, "")
    assert found.status == INSTALL_ERROR
    assert "exited with 1" in found.message


# ---------------------------------------------------------------- the command


def test_default_variant_uses_the_configured_default_index_and_find_links():
    cell = make_cell(torch="2.1.0", torchvision="0.16.0")
    config = IndexConfig(
        default="file:///idx/simple", extra=("https://extra/simple",), find_links=("/opt/wheels",)
    )
    command = install_command(cell, config, "/venv/bin/python")
    assert command[:5] == ["uv", "pip", "install", "--python", "/venv/bin/python"]
    assert command[command.index("--default-index") + 1] == "file:///idx/simple"
    assert command[command.index("--index") + 1] == "https://extra/simple"
    assert command[command.index("--find-links") + 1] == "/opt/wheels"
    assert "--torch-backend" not in command
    assert command[-2:] == ["torch==2.1.0", "torchvision==0.16.0"]


def test_no_default_index_means_uvs_default():
    command = install_command(make_cell(), IndexConfig(), "/venv/bin/python")
    assert "--default-index" not in command and "--index" not in command


def test_variant_on_the_official_index_uses_torch_backend():
    command = install_command(make_cell(variant="cu124"), IndexConfig(), "/py")
    assert command[command.index("--torch-backend") + 1] == "cu124"
    assert "--index" not in command


def test_variant_on_a_mirror_uses_an_explicit_index():
    config = IndexConfig(pytorch="https://mirror.example/whl/")
    command = install_command(make_cell(variant="cpu"), config, "/py")
    assert "--torch-backend" not in command
    assert command[command.index("--index") + 1] == "https://mirror.example/whl/cpu/"


def test_official_index_constant_matches_the_spec_default():
    assert IndexConfig().pytorch.rstrip("/") == OFFICIAL_PYTORCH_INDEX


# ---------------------------------------------------------------- retries


class FakeUv:
    """Plays back (returncode, output) pairs; records each command."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    def __call__(self, command, **kwargs):
        self.calls.append(command)
        code, output = self.replies.pop(0)
        return subprocess.CompletedProcess(command, code, stdout=output)


def test_error_is_retried_a_bounded_number_of_times():
    fake = FakeUv(*[(2, CONNECTION_REFUSED)] * 5)
    waits = []
    outcome = install(make_cell(), IndexConfig(), "/py", retries=2, runner=fake, sleep=waits.append)
    assert outcome.status == INSTALL_ERROR
    assert outcome.attempts == 3 and len(fake.calls) == 3
    assert len(waits) == 2


def test_error_then_success_is_installed():
    fake = FakeUv((2, DNS_FAILURE), (0, "Installed 2 packages"))
    outcome = install(make_cell(), IndexConfig(), "/py", runner=fake, sleep=lambda s: None)
    assert outcome.status == INSTALLED and outcome.attempts == 2


def test_unsatisfiable_is_not_retried():
    fake = FakeUv((1, NO_PAIRING), (0, ""))
    outcome = install(make_cell(), IndexConfig(), "/py", runner=fake, sleep=lambda s: None)
    assert outcome.status == UNSATISFIABLE and outcome.attempts == 1
    assert "torchvision==0.20.0 depends on torch==2.5.0" in outcome.message
    assert list(outcome.command) == fake.calls[0]


# ---------------------------------------------------------------- verification


def test_parse_freeze_keeps_local_labels():
    frozen = parse_freeze("torch==2.13.0+cpu\nNumPy==2.1.0\nfoo @ file:///x/foo.whl\n")
    assert frozen == {"torch": "2.13.0+cpu", "numpy": "2.1.0", "foo": "file:///x/foo.whl"}


def test_public_version_equality_and_labels_kept():
    cell = make_cell(torch="2.13.0", torchvision="", variant="default")
    checked = check_installed(cell, {"torch": "2.13.0+cpu"}, {"torch": {"version": "2.13.0+cpu"}})
    assert checked.ok and checked.resolved == {"torch": "2.13.0+cpu"}


def test_wrong_version_is_a_problem():
    cell = make_cell(torch="2.1.0", torchvision="0.16.0")
    checked = check_installed(cell, {"torch": "2.2.0", "torchvision": "0.16.0"}, {})
    assert not checked.ok and "torch: asked ==2.1.0, got 2.2.0" in checked.problems[0]


def test_missing_package_is_a_problem():
    checked = check_installed(make_cell(torchvision="0.20.1"), {"torch": "2.5.1"}, {})
    assert any("torchvision" in p and "not installed" in p for p in checked.problems)


def test_variant_label_must_match_the_variant():
    cell = make_cell(torch="2.5.1", torchvision="", variant="cu124")
    assert check_installed(cell, {"torch": "2.5.1+cu124"}, {}).ok
    wrong = check_installed(cell, {"torch": "2.5.1+cpu"}, {})
    assert "asked the cu124 build, got 2.5.1+cpu" in wrong.problems[0]


def test_own_version_must_agree_with_freeze():
    cell = make_cell(torch="2.1.0", torchvision="")
    checked = check_installed(cell, {"torch": "2.1.0"}, {"torch": {"version": "2.0.0"}})
    assert "__version__ says 2.0.0" in checked.problems[0]
    broken = check_installed(cell, {"torch": "2.1.0"}, {"torch": {"error": "ImportError: x"}})
    assert "cannot read its __version__" in broken.problems[0]


def test_extra_axis_specifier_is_checked():
    cell = make_cell(torch="2.1.0", torchvision="", extras={"numpy": "<2"})
    assert check_installed(cell, {"torch": "2.1.0", "numpy": "1.26.4"}, {}).ok
    assert not check_installed(cell, {"torch": "2.1.0", "numpy": "2.1.0"}, {}).ok


def test_verify_turns_a_mismatch_into_error_on_a_real_venv(tmp_path: Path):
    """A venv with nothing in it 'installed' fine (e.g. -R after a failed install): not evidence."""
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", str(venv)], check=True)
    outcome = verify(
        make_cell(torch="2.1.0", torchvision=""),
        str(venv / "bin" / "python"),
        InstallOutcome(INSTALLED, ("uv",)),
    )
    assert outcome.status == INSTALL_ERROR
    assert "torch: asked ==2.1.0, not installed" in outcome.message


def test_verify_leaves_failed_outcomes_alone():
    failed = InstallOutcome(UNSATISFIABLE, message="no")
    assert verify(make_cell(), "/nonexistent/python", failed) is failed


def test_uv_step_seconds_reads_uvs_summary_lines():
    from torch_matrix.world.uvoutput import uv_step_seconds

    output = (
        "Using Python 3.11.7 environment at: v\nResolved 13 packages in 512ms\n"
        "Prepared 2 packages in 1.20s\nInstalled 13 packages in 295ms\n + torch==2.13.0+cpu\n"
    )
    assert uv_step_seconds(output) == {"resolve": 0.512, "download": 1.2, "link": 0.295}
    assert uv_step_seconds("error: No solution found") == {}
