"""An issue-ready Markdown bundle for one cell (and one probe): ``torch-matrix repro CELL [PROBE]``.

Pure: a function of the cell's result and the run's other results. What an upstream issue needs:
the environment (Python, the torch build with its local label, CUDA and driver where present), the
exact install command, the minimal snippet, observed vs expected, the traceback, and the nearest cell
where the same probe passes ("passes on torch 1.12.1"), plus how to rerun the cell with torch-matrix.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_matrix.vocab.layout import (
    check_command,
    followup_repro_command,
    repro_command,
    spec_file,
)
from torch_matrix.report.html_page import cause_text
from torch_matrix.vocab.versions import version_key
from torch_matrix.vocab.records import (
    CORE_AXES,
    INSTALLED,
    PASS,
    CellResult,
    ProbeResult,
    built_versions,
)
from torch_matrix.report.rows import RUNS_ON_TARGET, extras_of
from torch_matrix.judge.verdict import COMPATIBLE, TIMED_OUT, verdict_of
from torch_matrix.report.markdown import Code
from torch_matrix.vocab.escaping import md_code, md_fence, md_text, shell_line

VENV = ".venv-repro"
EVIDENCE_CHARS = 3000


@dataclass(frozen=True)
class Nearest:
    result: CellResult
    differences: tuple[str, ...]  # "torch 1.12.1 (here 1.12.0)", ...

    def line(self) -> str:
        what = ", ".join(self.differences) or "the same axes"
        return f"passes on {md_text(what)}: cell {md_code(self.result.cell.id)}"


def chosen_probe(result: CellResult, name: str | None) -> ProbeResult | None:
    """The probe asked for; else the first failing required probe; else the first probe that did not pass."""
    if name:
        return result.probe(name)
    verdict = verdict_of(result)
    if verdict.failing:
        return result.probe(verdict.failing[0])
    for probe in result.probes:
        if probe.status != PASS:
            return probe
    return None


def _passes(result: CellResult, probe: str | None) -> bool:
    if result.install.status != INSTALLED:
        return False
    if probe is None:
        return verdict_of(result).kind == COMPATIBLE
    found = result.probe(probe)
    return found is not None and found.status == PASS


def _distance(a: str, b: str) -> tuple[Any, ...]:
    """How far apart two versions are, release part first (1.12.1 is nearer 1.12.0 than 1.13.1 is)."""
    ka, kb = version_key(a), version_key(b)
    if ka[0] or kb[0]:
        return (1, 0, 0, 0)
    ra, rb = ka[1].release + (0, 0, 0), kb[1].release + (0, 0, 0)
    return (0, abs(ra[0] - rb[0]), abs(ra[1] - rb[1]), abs(ra[2] - rb[2]))


def nearest_passing(
    result: CellResult, results: Iterable[CellResult], probe: str | None
) -> Nearest | None:
    """The cell that differs least from ``result`` (fewest axes, then the nearest torch) where ``probe``
    passes (the whole cell is compatible when no probe is named)."""
    cell = result.cell
    best: tuple[tuple[Any, ...], Nearest] | None = None
    for other in results:
        if other.cell.id == cell.id or not _passes(other, probe):
            continue
        differences = []
        changed = 0
        for axis in (*CORE_AXES, *sorted(set(extras_of(cell)) | set(extras_of(other.cell)))):
            mine, theirs = cell.axes.get(axis, ""), other.cell.axes.get(axis, "")
            if mine != theirs:
                changed += 1
                differences.append(f"{axis} {theirs or '(none)'} (here {mine or '(none)'})")
        # torchvision follows torch when paired: one move, not two
        paired = "torch" in " ".join(differences) and any(
            d.startswith("torchvision ") for d in differences
        )
        key = (
            changed - (1 if paired else 0),
            _distance(cell.torch, other.cell.torch),
            version_key(other.cell.torch),
            other.cell.id,
        )
        if best is None or key < best[0]:
            best = (key, Nearest(other, tuple(differences)))
    return best[1] if best else None


def _json(value: Any, limit: int = EVIDENCE_CHARS) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, indent=2, sort_keys=True, default=str)
    )
    return (
        text
        if len(text) <= limit
        else text[:limit] + f"\n... ({len(text) - limit} more characters)"
    )


def environment_rows(result: CellResult) -> list[tuple[str, str]]:
    interpreter, platform, gpu = result.interpreter, result.platform, result.gpu
    rows: list[tuple[str, str]] = [("cell", Code(result.cell.id))]
    python = interpreter.get("version") or result.cell.python
    implementation = interpreter.get("implementation")
    rows.append(("Python", f"{python}" + (f" ({implementation})" if implementation else "")))
    versions = built_versions(result)
    names = ["torch", "torchvision", *extras_of(result.cell)]
    for name in names:
        version = versions.get(name)
        if version:
            label = version
            if name == "torch" and gpu.get("torch_cuda"):
                label += f" (built with CUDA {gpu['torch_cuda']})"
            rows.append((name, label))
    variant = result.cell.variant
    if variant != "default":
        rows.append(("variant", variant))
    devices = gpu.get("devices") or []
    if devices:
        shown = ", ".join(str(d.get("name", d)) if isinstance(d, dict) else str(d) for d in devices)
        rows.append(("GPU", shown))
    else:
        rows.append(("GPU", "none visible" if gpu else "not recorded"))
    if gpu.get("driver"):
        rows.append(("NVIDIA driver", str(gpu["driver"])))
    build = gpu.get("build") or {}
    if build.get("arch_flags"):
        rows.append(("compiled for", f"{build['arch_flags']} (torch._C._cuda_getArchFlags())"))
    plat = " ".join(
        str(platform[key]) for key in ("system", "release", "machine") if platform.get(key)
    )
    if platform.get("libc"):
        plat += f", {platform['libc']}"
    if plat:
        rows.append(("platform", plat))
    if result.tool_version:
        rows.append(("torch-matrix", result.tool_version))
    return rows


def install_lines(
    result: CellResult, project_dir: str = "", snippet: bool = True
) -> tuple[list[str], list[str]]:
    """``uv venv`` and the cell's own ``uv pip install`` with its index options, into a fresh venv,
    run from the project's directory (``project_dir``: its paths made relative, machine-local
    indexes and paths left out); ``snippet``: then run the probe's ``repro.py``. Returns the lines
    and the notes on what was left out."""
    command = list(result.install.command)
    args = (
        command[3:]
        if len(command) >= 3 and command[1:3] == ["pip", "install"]
        else list(result.cell.requirements)
    )
    kept, notes = _portable_args(args, project_dir)
    lines = [
        shell_line(["uv", "venv", "--python", result.cell.python, VENV]),
        shell_line(["uv", "pip", "install", "--python", VENV, *kept]),
    ]
    return lines + ([f"{VENV}/bin/python repro.py"] if snippet else []), notes


_VALUED = (
    "--python",
    "--find-links",
    "-f",
    "--index-url",
    "--extra-index-url",
    "--index",
    "--default-index",
)


def _portable_args(args: Sequence[str], directory: str) -> tuple[list[str], list[str]]:
    """The install's arguments without this machine: ``--python`` dropped, a path inside the
    project relative to it, a local index, find-links directory or path left out (said)."""
    kept: list[str] = []
    dropped: list[str] = []
    skip_next = False
    for position, arg in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        if arg.startswith("--python="):
            continue
        if arg in _VALUED:
            value = args[position + 1] if position + 1 < len(args) else ""
            skip_next = True
            if arg == "--python":
                continue
            if _portable(value, directory) is None:
                dropped.append(f"{arg} (a local directory or file)")
                continue
            kept += [arg, value]
            continue
        portable = _portable(arg, directory)
        if portable is None:
            dropped.append("(a local path)")
        else:
            kept.append(portable)
    notes = (
        ["left out (local to the machine that ran the cell): " + ", ".join(dropped)]
        if dropped
        else []
    )
    return kept, notes


def _portable(arg: str, project: str) -> str | None:
    """``arg`` without this machine in it: a path inside the project becomes relative to it
    (``-e /home/me/proj[test]`` -> ``.[test]``); another local path (a find-links directory, a
    file:// index) is None: it exists only here."""
    if project and (
        arg == project or arg.startswith(project.rstrip("/") + "/") or arg.startswith(project + "[")
    ):
        rest = arg[len(project) :].lstrip("/")
        return "." + ("/" + rest if rest and not rest.startswith("[") else rest)
    if arg.startswith(("/", "file://", "~")):
        return None
    return arg


def command_probe_lines(
    result: CellResult, probe: ProbeResult, project: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The shell steps that rerun a command probe anywhere: get the project (its git URL and commit
    when it is a git checkout), install the cell's pins and the project as the cell did (paths made
    relative, machine-local indexes left out and said so), run the failing tests by node id."""
    directory = str(project.get("dir") or probe.evidence.get("cwd") or "")
    steps: list[str] = []
    notes: list[str] = []
    if project.get("url"):
        steps += [
            f"git clone {shlex.quote(project['url'])} project && cd project",
            f"git checkout {shlex.quote(project.get('commit', 'HEAD'))}",
        ]
    else:
        notes.append(
            "the project is not a git checkout with a remote: run these from its directory"
        )
    install, left_out = install_lines(result, directory, snippet=False)
    notes += left_out
    steps += install
    command_text = str(probe.evidence.get("command") or "")
    failed: list[str] = []
    for group in probe.evidence.get("failure_groups") or ():
        failed += [n.split(" (")[0] for n in group.get("nodeids", ())]
    if not failed:
        failed = [
            str(f.get("nodeid", "")) for f in probe.evidence.get("failed") or () if f.get("nodeid")
        ]
    if failed and "pytest" in command_text:
        steps.append(
            shell_line([f"{VENV}/bin/python", "-m", "pytest", "-q", *dict.fromkeys(failed)])
        )
    elif command_text:
        steps.append(f'PATH={VENV}/bin:"$PATH" {command_text}')
    return steps, notes


HARDWARE_SNIPPET = """import torch
print(torch.__version__, torch.version.cuda, torch._C._cuda_getArchFlags())  # what the build has
print(torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))  # what the card is
print((torch.arange(1024, device="cuda", dtype=torch.float32) ** 2).sum().item())  # 357389824.0
"""


def chosen_target(result: CellResult, wanted: str | None) -> Mapping[str, Any] | None:
    """The target the bundle is about: the first whose name contains ``wanted`` (any case), or
    without ``wanted`` the first on which the build does not run; None when there is none."""
    if wanted:
        return next((t for t in result.targets if wanted.lower() in str(t["target"]).lower()), None)
    return next((t for t in result.targets if t["verdict"] not in RUNS_ON_TARGET), None)


def _heading(
    result: CellResult, probe: ProbeResult | None, hardware: Any, status: str
) -> list[str]:
    """The bundle's title line: the torch version, what failed and how."""
    torch_version = built_versions(result).get("torch", result.cell.torch)
    if probe is not None:
        title = f"torch {md_text(torch_version)}: {md_code(probe.name)} {md_text(status)}"
    else:  # about the whole cell: name it (a code span reading `the cell` named nothing)
        title = f"torch {md_text(torch_version)}: cell {md_code(result.cell.id)} {md_text(status)}"
    if probe is not None and probe.message:
        title += f": {_prose(probe.message, 100)}"
    if hardware is not None and probe is None:
        title = f"torch {md_text(torch_version)} on {md_text(hardware['target'])}: {md_text(hardware['verdict'])}"
    return [f"### {title}", ""]


def _hardware_lines(hardware: Any) -> list[str]:
    """The hardware target asked about: its verdict and reason, and what the device said."""
    if hardware is None:
        return []
    lines = [
        f"**Hardware target** {md_text(hardware['target'])}: **{md_text(hardware['verdict'])}**. "
        f"{md_text(hardware['reason'])}",
        "",
    ]
    if hardware.get("device"):
        lines += [
            f"On the device: {md_text(hardware['device'])}"
            + (
                " (**disagrees** with the static verdict)"
                if hardware.get("agrees") is False
                else ""
            ),
            "",
        ]
    return lines


def _finding_lines(
    result: CellResult, results: Sequence[CellResult], probe: ProbeResult | None
) -> list[str]:
    """What went wrong: an install that failed, the probe's status, observed and expected, its
    cause; then the nearest passing cell and the environment."""
    lines: list[str] = []
    if result.install.status != INSTALLED:
        lines += [
            f"The cell was not installed: **{md_text(result.install.status)}**.",
            "",
            md_fence(result.install.message or "(no message)"),
            "",
        ]
    if probe is not None:
        lines += [
            f"**Probe** {md_code(probe.name)}: **{md_text(probe.status)}**"
            + (f". {_prose(probe.message)}" if probe.message else ""),
            "",
        ]
        if probe.observed is not None or probe.expected is not None:
            lines += [
                "| observed | expected |",
                "|---|---|",
                f"| {_md_inline(probe.observed)} | {_md_inline(probe.expected)} |",
                "",
            ]
        verdict = verdict_of(result)
        cause = verdict.reason if verdict.kind == TIMED_OUT else cause_text(result, probe)
        if cause:
            lines += [f"**Cause** (torch-matrix's reading): {_prose(cause)}", ""]
    # a bundle about a cell that passes (`repro` of a compatible cell) has no nearest passing cell
    # to offer: the cell itself is one
    passes_itself = probe is None and _passes(result, None)
    if not passes_itself:
        nearest = nearest_passing(result, results, probe.name if probe is not None else None)
        lines += [
            f"**Nearest passing cell**: {nearest.line()}."
            if nearest
            else "**Nearest passing cell**: none in this run (no other cell passes "
            f"{md_code(probe.name) if probe is not None else 'every probe'}).",
            "",
        ]
    lines += ["#### Environment", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {_md_cell(value)} |" for key, value in environment_rows(result)]
    return lines


def _reproduce_lines(
    result: CellResult,
    probe: ProbeResult | None,
    hardware: Any,
    project: Mapping[str, str] | None,
    command_probe: bool,
) -> list[str]:
    """How to get there again: a command probe's shell steps, or the install lines and the probe's
    snippet (the GPU snippet for a hardware target)."""
    lines: list[str] = []
    if command_probe and probe is not None:
        # A project's own test command: shell steps (the project by git URL and commit, the cell's
        # install made portable, the failing tests by node id), not a Python snippet.
        steps, notes = command_probe_lines(result, probe, project or {})
        lines += ["", "#### Steps (shell)", "", md_fence("\n".join(steps), "sh"), ""]
        lines += [f"Note: {md_text(note)}." for note in notes] + ([""] if notes else [])
        return lines
    lines += ["", "#### Install", ""]
    if result.cell.is_existing_env:
        lines += [
            f"Probed as found by `torch-matrix check` ({md_text(result.install.message)}); these lines "
            "rebuild its versions in a fresh venv:",
            "",
        ]
    root = str((project or {}).get("dir") or "")
    snippet = bool(probe is not None and probe.repro) or hardware is not None
    install, notes = install_lines(result, root, snippet=snippet)
    lines += [md_fence("\n".join(install), "sh"), ""]
    if root:
        notes = ["run these from the project's directory", *notes]
    lines += [f"Note: {md_text(note)}." for note in notes] + ([""] if notes else [])
    if probe is not None and probe.repro:
        lines += ["#### Minimal snippet (`repro.py`)", "", md_fence(probe.repro, "python"), ""]
    elif hardware is not None:
        lines += [
            "#### Minimal snippet (`repro.py`, on the GPU)",
            "",
            md_fence(HARDWARE_SNIPPET, "python"),
            "",
        ]
    return lines


def _detail_lines(result: CellResult, probe: ProbeResult | None) -> list[str]:
    """The hardware targets judged from the build, then the probe's traceback, evidence and output."""
    lines: list[str] = []
    if result.targets:
        lines += [
            "#### Hardware targets (judged from the build, no GPU needed)",
            "",
            "| target | verdict | reason |",
            "|---|---|---|",
        ]
        lines += [
            f"| {_md_cell(t['target'])} | {md_text(t['verdict'])} | {_md_cell(t['reason'])} |"
            for t in result.targets
        ]
        lines.append("")
    if probe is not None and probe.traceback:
        lines += ["#### Traceback", "", md_fence(probe.traceback), ""]
    if probe is not None and probe.evidence:
        lines += [
            "<details><summary>Evidence</summary>",
            "",
            md_fence(_json(dict(probe.evidence)), "json"),
            "",
            "</details>",
            "",
        ]
    if probe is not None and probe.output_tail:
        lines += [
            "<details><summary>Output</summary>",
            "",
            md_fence(probe.output_tail),
            "",
            "</details>",
            "",
        ]
    return lines


def _rerun_lines(
    result: CellResult, spec_path: str | None, from_project: bool = False
) -> list[str]:
    """The torch-matrix command that runs this cell again, and the cell's verdict."""
    cell = result.cell
    verdict = verdict_of(result)
    rerun = (
        check_command(str(result.interpreter.get("path") or "PATH/TO/python"))
        if cell.is_existing_env
        else followup_repro_command(cell.id, spec_path)
        if cell.is_followup  # no session of its own
        else repro_command(cell.id, spec_path)
    )
    where = " (from the project's directory)" if from_project else ""
    lines = [f"#### Rerun with torch-matrix{where}", "", md_fence(rerun, "sh"), ""]
    if verdict.kind != COMPATIBLE:
        why = (
            f"failing required probes: {', '.join(verdict.failing)}"
            if verdict.failing
            else verdict.reason
        )
        lines += [
            f"Verdict of the cell: **{verdict.kind}**"
            + (f" ({_prose(why, 200)})" if why else "")
            + ".",
            "",
        ]
    return lines


def _prose(text: str, width: int | None = None) -> str:
    """A message in the bundle as plain text: cut at a word (with an ellipsis) when it is longer
    than ``width``, and as inline code where it holds ``<``, ``>`` or ``&`` (Markdown would need
    them as ``&lt;``, which reads wrong wherever the bundle is read as text)."""
    line = " ".join(str(text).split())
    if width is not None and len(line) > width:
        cut = line[: width - 1]
        line = (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"
    return md_code(line) if any(ch in line for ch in "<>&") else md_text(line)


def _by_role(
    text: str, result: CellResult, probe: ProbeResult | None, project: Mapping[str, str] | None
) -> str:
    """The bundle without machine-local paths: the project, the cell's venv and the interpreter's
    home by role, not by place."""
    venv = str(Path(str(result.interpreter.get("path") or "/nonexistent/bin/python")).parent.parent)
    base = str(result.interpreter.get("base") or "")
    home = str(Path(base).parent.parent) if base else ""
    cwd = probe.evidence.get("cwd") if probe is not None else None
    for local, role in (
        (str((project or {}).get("dir") or cwd or ""), "$PROJECT"),
        (venv, "$CELL_VENV"),
        (home, "$PYTHON_HOME"),
    ):
        if len(local) > 1:
            text = text.replace(local, role)
    return text


def render_bundle(
    result: CellResult,
    results: Sequence[CellResult],
    probe_name: str | None = None,
    spec_path: str | None = None,
    target: str | None = None,
    project: Mapping[str, str] | None = None,
) -> str:
    """``project``: for a command probe, the project's ``dir`` and, when it is a git checkout, its
    remote ``url`` and ``commit`` (read by the caller)."""
    hardware = chosen_target(result, target)
    probe = chosen_probe(result, probe_name)
    if target and hardware is not None and not probe_name:
        probe = None  # asked about a target: the bundle is about that, not the first failing probe
    status = probe.status if probe is not None else verdict_of(result).kind
    command_probe = probe is not None and probe.isolation == "command"
    lines = _heading(result, probe, hardware, status)
    lines += _hardware_lines(hardware)
    lines += _finding_lines(result, results, probe)
    root = str((project or {}).get("dir") or (probe.evidence.get("cwd") if probe else "") or "")
    if not root and spec_path and spec_path.startswith("/"):
        root = str(Path(spec_file(spec_path)).parent)  # the spec's project: its directory
    where = {**(project or {}), "dir": root} if root else project
    lines += _reproduce_lines(result, probe, hardware, where, command_probe)
    lines += _detail_lines(result, probe)
    shown = _from_project(spec_path, root)
    lines += _rerun_lines(result, shown, from_project=shown != spec_path)
    text = "\n".join(lines).rstrip() + "\n"
    return _by_role(text, result, probe, where)


def _from_project(spec_path: str | None, project_dir: str) -> str | None:
    """The spec as the rerun line names it from the project's directory (where the bundle's steps
    run): relative when it lies there, so the line runs as printed (``$PROJECT`` would not)."""
    if not spec_path or not project_dir or spec_path.startswith("-"):
        return spec_path
    try:
        return str(Path(spec_file(spec_path)).relative_to(project_dir))
    except ValueError:
        return spec_path


def _md_inline(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return _md_cell(text[:400])


def _md_cell(text: Any) -> str:
    """A short value with markup characters as inline code, any other as text."""
    value = " ".join(str(text).split())
    if isinstance(text, Code) or (len(value) < 120 and any(ch in value for ch in "_*<>[]`")):
        return md_code(value, in_table=True)
    return md_text(value)
