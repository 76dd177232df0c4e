"""``torch-matrix check [--python PATH] [--results DIR] [--spec FILE] [--gpu GPU]... [--driver V]... [--json]``:
is this environment OK?

Runs the standard probe suite (and the spec's custom probes, when a spec is given or found)
in an existing interpreter, installing nothing, and writes an ordinary cell result to
``DIR/cells/<id>.json`` (default ``$TORCH_MATRIX_RESULTS/check``, i.e. ``results/check``).
Prints the cell's table, the probes that did not pass, each probe's status, and what could
not be exercised here (skips such as "no CUDA device", unsupported APIs) with the reason,
and the build's verdict on each hardware target (``--gpu``/``--driver``, else the spec's
``[targets]``, else the GPUs nvidia-smi finds here), judged from the build's own facts on CPU.

Exit status: 0 compatible, 1 incompatible (a finding; also when the build does not run on a
hardware target), 2 bad input (one line and a hint),
3 no verdict (the probe runner itself failed, or a required probe gave no result).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from torch_matrix.judge.hardware import RUNS
from torch_matrix.judge.gpus import Target, TargetError, parse_driver, parse_gpu, targets_of
from torch_matrix.report.rows import judge, shorten
from torch_matrix.report import terminal as report
from torch_matrix.world.probe_process import host_gpu_targets
from torch_matrix.run.check import RUN_NAME, CheckOptions, check_environment
from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.escaping import terminal
from torch_matrix.vocab.layout import results_root
from torch_matrix.vocab.records import SKIP, UNSUPPORTED, CellResult, built_versions
from torch_matrix.judge.verdict import COMPATIBLE, ENVIRONMENT, INCOMPATIBLE

EXIT_COMPATIBLE = 0
EXIT_INCOMPATIBLE = 1
EXIT_NO_VERDICT = 3


def exit_status(kind: str) -> int:
    if kind == COMPATIBLE:
        return EXIT_COMPATIBLE
    if kind in (INCOMPATIBLE, ENVIRONMENT):  # "is my environment OK?": a broken environment is a no
        return EXIT_INCOMPATIBLE
    return EXIT_NO_VERDICT


def _options(spec_path: str | None) -> CheckOptions:
    """The spec's probe settings: --spec, else $TORCH_MATRIX_SPEC / ./matrix.toml / the built-in default."""
    from torch_matrix.world.specfile import load_spec

    return CheckOptions.from_spec(load_spec(spec_path))


def _results_dir(value: str | None) -> Path:
    path = Path(value) if value else results_root() / RUN_NAME
    if path.exists() and not path.is_dir():
        raise UserError(
            "exists and is not a directory",
            where=f"--results {path}",
            hint="pass a directory for the cell result, e.g. --results results/check",
        )
    return path


def main(args: argparse.Namespace) -> int:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    python = os.path.abspath(args.python) if args.python else sys.executable
    results_dir = _results_dir(args.results)
    options = _options(args.spec)
    targets, where = hardware_targets(
        getattr(args, "gpu", None) or [], getattr(args, "driver", None) or [], options.targets
    )
    options = dataclasses.replace(options, targets=targets)
    result = check_environment(python, results_dir, options)
    if not targets and result.targets:
        where = (
            "found here by torch.cuda"  # no nvidia-smi, but the cell saw a device: "(this machine)"
        )
    judged = judge([result])
    status = exit_status(judged[0].verdict.kind)
    if status == EXIT_COMPATIBLE and any(t["verdict"] not in RUNS for t in result.targets):
        status = EXIT_INCOMPATIBLE  # it does not run on a GPU it was asked about (or found here)
    if getattr(args, "json", False):
        verdict = judged[0].verdict
        print(
            json.dumps(
                {
                    "cell": result.cell.id,
                    "verdict": str(verdict.kind),
                    "reason": verdict.reason,
                    "targets_from": where,
                    "targets": [dict(t) for t in result.targets],
                },
                indent=1,
            )
        )
        return status
    found = ", ".join(f"{name} {version}" for name, version in built_versions(result).items())
    print(
        f"{result.install.message}\n{python}: Python {result.interpreter.get('version', '?')}; {found}\n"
    )
    sys.stdout.write(report.render_text(judged, grid=True))
    not_run = not_run_lines(result)
    if not_run:
        sys.stdout.write(
            terminal("\nNot exercised here (skip / unsupported):\n" + "\n".join(not_run)) + "\n"
        )
    sys.stdout.write(f"\nHardware ({where}):\n" + "\n".join(target_lines(result)) + "\n")
    return status


def hardware_targets(
    gpus: list[str], drivers: list[str], declared: tuple[Target, ...]
) -> tuple[tuple[Target, ...], str]:
    """The targets to judge and where they came from: --gpu/--driver, else the spec's [targets],
    else the GPUs and driver nvidia-smi finds here (none on a machine without one)."""
    if gpus or drivers:
        for flag, values, parse in (
            ("--gpu", gpus, parse_gpu),
            ("--driver", drivers, parse_driver),
        ):
            for value in values:
                try:
                    parse(value)
                except TargetError as error:
                    raise UserError(str(error), where=f"{flag} {value}", hint=error.hint) from None
        return targets_of(gpus, drivers), "--gpu/--driver"
    if declared:
        return tuple(declared), "the spec's [targets]"
    found = host_gpu_targets()
    if found:
        return found, "found here by nvidia-smi"
    return (), (
        "no NVIDIA GPU found here (no nvidia-smi, or it lists none); pass --gpu/--driver "
        "to judge one"
    )


def target_lines(result: CellResult) -> list[str]:
    """``  V100 (sm_70), driver 580.82.07  no-kernel-image  no sm_70 ...``, one per target."""
    if not result.targets:
        return [
            "  nothing judged"
            + (
                ""
                if result.gpu.get("build")
                else " (the build's facts were not read: torch did not import?)"
            )
        ]
    width = max(len(t["target"]) for t in result.targets)
    lines = []
    for t in result.targets:
        mark = (
            ""
            if t.get("agrees") is not False
            else "  DISAGREES with the device: " + str(t.get("device"))
        )
        lines.append(f"  {t['target']:<{width}}  {t['verdict']:<15}  {t['reason']}{mark}")
    return lines


def not_run_lines(result: CellResult) -> list[str]:
    """``  cuda_devices  skip  no CUDA device``: what this environment could not test, and why."""
    rows = [
        (p.name, p.status, shorten(p.message, 120))
        for p in result.probes
        if p.status in (SKIP, UNSUPPORTED)
    ]
    width = max((len(name) for name, _, _ in rows), default=0)
    return [
        f"  {name:<{width}}  {status:<11}  {message}".rstrip() for name, status, message in rows
    ]


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix check``'s options (the command registry: ``torch_matrix.cli.COMMANDS``)."""
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the environment's interpreter (default: the one running torch-matrix)",
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        help="where the cell result goes (default: $TORCH_MATRIX_RESULTS/check, i.e. results/check)",
    )
    parser.add_argument(
        "--spec",
        help="spec whose [probes] table (selection, required, custom probes) applies "
        "(default: $TORCH_MATRIX_SPEC, ./matrix.toml, built-in)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="GPU",
        help="judge the environment's build for this GPU: a name (V100, RTX 4090, H100) or a "
        "compute capability (sm_89, 8.9); repeatable. Default: the spec's [targets], else "
        "the GPUs and driver found here",
    )
    parser.add_argument(
        "--driver",
        action="append",
        default=[],
        metavar="VERSION",
        help="judge it for this NVIDIA driver (535.104, 580.65.06); repeatable, each GPU with each",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the cell's verdict and its hardware verdicts as JSON instead of the tables",
    )
