"""``torch-matrix ecosystem run | report | diff`` (issue 34): a torch release against many downstream
projects' own tests, like Rust's crater.

``run PROJECTS.toml --baseline 2.5.1 --candidate 2.6.0 [--shard K/N]`` runs each project's tests
on both sides into ``--out`` (default ``ecosystem/<baseline>-vs-<candidate>``); ``report DIR...``
merges one run's shards and writes report.html, summary.md and ecosystem.json; ``diff OLD NEW``
compares two runs' classes. See docs/ecosystem.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from torch_matrix.vocab.errors import UserError


def main(args: argparse.Namespace) -> int:
    """``torch-matrix ecosystem VERB``: the verb's function."""
    verbs = {
        "run": run_main,
        "report": report_main,
        "diff": diff_main,
        "discover": discover_main,
    }
    return verbs[args.verb](args)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``torch-matrix ecosystem``'s verbs and their options (the command registry:
    ``torch_matrix.cli.COMMANDS``)."""
    parser.description = (
        "Run downstream projects' own tests with a baseline and a candidate torch, "
        "class each project (regressed, fixed, same-pass, same-fail, spurious, flaky, skipped) "
        "and report. A projects file: [[project]] tables with name, sdist / git+ref / path, "
        "command, budget, extras, requires, torchvision, skip."
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="run the projects file's projects on both sides")
    run.add_argument("projects", help="the projects file (TOML): [[project]] tables")
    run.add_argument(
        "--baseline", required=True, help="torch: 2.5.1, 2.7.0rc3, nightly-2025-03-01:2.7.0"
    )
    run.add_argument("--candidate", required=True, help="torch, as --baseline")
    run.add_argument("--baseline-torchvision", default="", help="default: the paired release")
    run.add_argument("--candidate-torchvision", default="", help="default: the paired release")
    run.add_argument("--baseline-index", default="", help="an extra index for this side's torch")
    run.add_argument(
        "--candidate-index",
        default="",
        help="an extra index for this side's torch (a pre-release: https://download.pytorch.org/whl/test/cpu)",
    )
    run.add_argument(
        "--index", default="", help="the default index (default: $UV_DEFAULT_INDEX or PyPI)"
    )
    run.add_argument("--find-links", action="append", default=[], metavar="DIR", help="repeatable")
    run.add_argument("--out", help="the run directory (default: ecosystem/BASELINE-vs-CANDIDATE)")
    run.add_argument("--shard", default="1/1", help="run shard K of N (by project)")
    run.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="only these projects"
    )
    run.add_argument("--python", default=sys.executable, help="the interpreter of the venvs")
    run.add_argument("--redo", action="store_true", help="run projects that already have results")
    run.add_argument("--network", action="store_true", help="leave the tests' network on")
    run.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the projects' build and tests unconfined (default: each side in a bubblewrap "
        "sandbox; refused where the machine offers none)",
    )
    run.add_argument("--keep-venvs", action="store_true", help="keep work/ (venvs, source copies)")
    run.add_argument(
        "--echo",
        action="store_true",
        help="echo both sides' test output (default: one line a project)",
    )
    run.add_argument(
        "--tail",
        type=int,
        nargs="?",
        const=20,
        default=0,
        metavar="LINES",
        help="after each project, the last LINES (20) lines of each side that did not pass",
    )
    run.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)  # the default now
    run.add_argument(
        "--sides-in-turn",
        action="store_true",
        help="run a project's baseline and candidate one after the other (default: side by side)",
    )
    run.add_argument("--estimate", action="store_true", help="print the estimate and stop")
    run.add_argument(
        "--durations-from",
        action="append",
        default=[],
        metavar="DIR",
        help="an earlier run's directory: its recorded durations forecast this run (repeatable; "
        "the run's own --out directory is always read)",
    )
    run.add_argument(
        "--bisect",
        action="store_true",
        help="for each regressed project: the first bad torch release between the sides "
        "(running only its regressed tests) and the proven pin",
    )

    _add_report_discover_diff(verbs)


def _add_report_discover_diff(verbs: Any) -> None:
    """``torch-matrix ecosystem report``, ``discover`` and ``diff``, with their options."""
    report = verbs.add_parser("report", help="merge a run's shards and write its reports")
    report.add_argument(
        "dirs", nargs="+", metavar="DIR", help="run directories (shards of one run)"
    )
    report.add_argument(
        "--out", help="where report.html, summary.md, ecosystem.json go (default: the first DIR)"
    )
    report.add_argument(
        "--link", default="", help="the full report's URL, for a cut Markdown summary"
    )
    report.add_argument(
        "--max-summary-chars", type=int, default=65_536, help="GitHub's issue body limit (65,536)"
    )

    found = verbs.add_parser(
        "discover",
        help="what a zero-config entry finds in an sdist: its tests, their needs, the command, and why",
    )
    found.add_argument("what", help="a pinned sdist (zuko==1.3.1) or a source tree's directory")
    found.add_argument("--index", default="", help="the index (default: $UV_DEFAULT_INDEX or PyPI)")
    found.add_argument("--json", action="store_true", help="machine-readable output")

    diff = verbs.add_parser("diff", help="what changed between two ecosystem runs")
    diff.add_argument("old", help="a run directory or its ecosystem.json")
    diff.add_argument("new", help="a run directory or its ecosystem.json")
    diff.add_argument("--json", action="store_true", help="machine-readable output")


def _load_projects(path: str) -> list:
    from torch_matrix.ecosystem.projects import parse_projects

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = Path(path).read_bytes()[: error.start].count(b"\n") + 1
        raise UserError(
            f"not valid UTF-8 (byte {error.object[error.start]:#04x} on line {line})",
            where=path,
            hint="TOML files are UTF-8: re-save the projects file as UTF-8",
        ) from None
    except OSError as error:
        raise UserError(
            f"cannot read the projects file: {error.strerror or error}",
            where=path,
            hint="give the path of a projects file (TOML with [[project]] tables)",
        ) from None
    return parse_projects(text, path, base_dir=str(Path(path).resolve().parent))


def _check_paths(projects: list, path: str) -> None:
    """A local checkout that is not there is said before the run, not as each side's failure."""
    from torch_matrix.ecosystem.projects import SourceKind

    for project in projects:
        location = project.source.location
        if project.skip or project.source.kind != SourceKind.PATH or Path(location).is_dir():
            continue
        raise UserError(
            f"{location} is not a directory",
            where=f"{path} [[project]] {project.name}.path",
            hint="paths are relative to the projects file's directory: fix the path, "
            "or give the project as an sdist or a git URL and ref",
        )


def _check_python(given: str) -> str:
    """The venvs' interpreter (``--python``), checked before any work: a path or a name on PATH
    that runs. A missing one made every venv fail, and every project 'same-fail'."""
    import shutil
    import subprocess

    found = given if os.sep in given else shutil.which(given)
    hint = "give an interpreter that exists, e.g. --python python3.11 or --python /usr/bin/python3"
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise UserError("no such Python interpreter", where=f"--python {given}", hint=hint)
    try:
        done = subprocess.run(
            [found, "-c", "import sys; print(sys.version_info[0])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserError(f"cannot run it: {error}", where=f"--python {given}", hint=hint) from None
    if done.returncode != 0 or done.stdout.strip() != "3":
        raise UserError(
            f"it is not a working Python 3 (exit {done.returncode})",
            where=f"--python {given}",
            hint=hint,
        )
    return found


def run_main(args: argparse.Namespace) -> int:
    from torch_matrix.edges import console, locks
    from torch_matrix.plan.shards import parse_shard
    from torch_matrix.ecosystem.runner import EcosystemRun, plan_run, run_all
    from torch_matrix.spec.model import IndexConfig
    from torch_matrix.ecosystem.projects import Project, parse_side
    from torch_matrix.world.index import open_index

    projects = _load_projects(args.projects)
    unselected: list[Project] = []
    if args.only:
        known = {p.name for p in projects}
        for name in args.only:
            if name not in known:
                raise UserError(
                    f"no project {name!r} in {args.projects}",
                    where="--only",
                    hint="one of: " + ", ".join(sorted(known)),
                )
        unselected = [p for p in projects if p.name not in args.only]
        projects = [p for p in projects if p.name in args.only]
    baseline = parse_side(
        args.baseline, "baseline", index=args.baseline_index, torchvision=args.baseline_torchvision
    )
    candidate = parse_side(
        args.candidate,
        "candidate",
        index=args.candidate_index,
        torchvision=args.candidate_torchvision,
    )
    if baseline.torch == candidate.torch and baseline.index == candidate.index:
        raise UserError(
            f"baseline and candidate are both torch {baseline.torch}",
            where="--candidate",
            hint="compare two different torch releases, e.g. --baseline 2.5.1 --candidate 2.6.0",
        )
    k, n = parse_shard(args.shard)
    _check_paths(projects, args.projects)
    _check_python(args.python)
    default = args.index or os.environ.get("UV_DEFAULT_INDEX", "")
    config = IndexConfig(
        default=default,
        extra=tuple(i for i in {candidate.index, baseline.index} if i),
        find_links=tuple(str(Path(p).resolve()) for p in args.find_links),
    )
    index = open_index(config, prereleases=True)
    out = Path(args.out or f"ecosystem/{baseline.torch}-vs-{candidate.torch}")
    run = EcosystemRun(
        projects=projects,
        baseline=baseline,
        candidate=candidate,
        out=out,
        index=IndexConfig(default=default, find_links=config.find_links),
        python=args.python,
        shard=(k, n),
        network_off=not args.network,
        confine=not args.no_sandbox,
        redo=args.redo,
        keep_venvs=args.keep_venvs,
        bisect=args.bisect,
        parallel_sides=not args.sides_in_turn,
        echo=(lambda line: print(line, flush=True)) if args.echo and not args.quiet else None,
        tail_lines=max(0, args.tail),
        durations_from=[Path(d) for d in args.durations_from],
        unselected=unselected,
    )
    # one run per --out: the second is refused before it writes anything (run.json included)
    locks.hold(out, "--out directory", hint="wait for it to finish, or give this run its own --out")
    if args.estimate:
        plan_run(run, index)
        return 0
    _confinement(run, args.no_sandbox)
    code = run_all(run, index)
    console.note(f"results in {out}; the report: torch-matrix ecosystem report {out}")
    return code


def _confinement(run: object, unconfined: bool) -> None:
    """Refuse a run whose untrusted code the machine cannot confine, unless asked to run it so;
    say which confinement it has (every side's result records it too)."""
    from torch_matrix.edges import console, sandbox

    if unconfined:
        console.note(
            "sandbox: none (--no-sandbox): the projects' build and tests run as you, with your "
            "home, your environment and the network for the build"
        )
        return
    found = sandbox.detect()
    if not found.on:
        raise UserError(
            f"no sandbox for the projects' code: {found.why_none}",
            where="ecosystem run",
            hint="install bubblewrap (bash tests/install-browser.sh, or apt-get install "
            "bubblewrap) and, as non-root, allow unprivileged user namespaces; or run them "
            "unconfined with --no-sandbox",
        )
    console.note(f"sandbox: {sandbox.describe(found, network=False, gate='index')}")


def report_main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.ecosystem_report import write_reports

    return write_reports(args)


def diff_main(args: argparse.Namespace) -> int:
    from torch_matrix.cli.ecosystem_report import print_diff

    return print_diff(args)


def discover_main(args: argparse.Namespace) -> int:
    import json

    from torch_matrix.ecosystem.source import discover_source
    from torch_matrix.spec.model import IndexConfig
    from torch_matrix.world.index import open_index

    index = open_index(IndexConfig(default=args.index or os.environ.get("UV_DEFAULT_INDEX", "")))
    found = discover_source(args.what, index)
    if args.json:
        print(json.dumps(found.to_json(), indent=1))
    else:
        print(f"{args.what}:")
        print("\n".join(f"  {line}" for line in found.lines()))
    return 0
