"""``python -m torch_matrix.probes``: run the probe suite in this interpreter's environment and write one JSON file.

The runner itself never imports torch. ``shared`` probes run in forked children of a
zygote that imported torch/torchvision once (see ``torch_matrix.probes.zygote``); ``pristine`` probes
each get a fresh interpreter; ``--command`` probes are shell commands. All of them end
as ProbeResult-shaped dicts in the output file (docs/contracts.md, "Probe output").

Exit status: 0 when the suite ran and its output was written (whatever the probes
found), 2 for bad usage (unknown probe, malformed option).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from torch_matrix.probes import api, discovery, execute, facts, pytest_outcomes
from torch_matrix.probes.isolated import child_env, run_command_probe, run_pristine
from torch_matrix.probes.visible import visible

PROBES_SCHEMA = 1
ZYGOTE_IMPORTS = ("torch", "torchvision")
STATUSES = execute.STATUSES


class UsageError(Exception):
    """Bad command-line input: one line on stderr, exit 2."""


def parse_pairs(values, option):
    pairs = {}
    for value in values:
        for item in [v for v in value.split(",") if v.strip()]:
            key, sep, rest = item.partition("=")
            if not sep or not key.strip() or not rest.strip():
                raise UsageError("%s %r: expected NAME=VALUE" % (option, item))
            pairs[key.strip()] = rest.strip()
    return pairs


def parse_commands(values):
    commands = []
    for value in values:
        name, sep, command = value.partition("=")
        if not sep or api.NAME_PATTERN.fullmatch(name) is None or not command.strip():
            raise UsageError(
                "--command %r: expected NAME=COMMAND, NAME being %s" % (value, api.NAME_RULE)
            )
        commands.append((name, command))
    return commands


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m torch_matrix.probes", description="Run the torch-matrix probe suite."
    )
    parser.add_argument("--out", help="write the JSON result here (atomically); default: stdout")
    parser.add_argument(
        "--list", action="store_true", help="list the probes (name, isolation, doc) and exit"
    )
    parser.add_argument(
        "--select", action="append", default=[], help="comma-separated probe names to run"
    )
    parser.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="PKG=VERSION",
        help="version the cell asked for (repeatable), e.g. torch=2.5.1",
    )
    parser.add_argument(
        "--variant", default="default", help="wheel variant: default, cpu, cu124, ..."
    )
    parser.add_argument(
        "--probe-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="directory of custom probe files (repeatable)",
    )
    parser.add_argument(
        "--no-standard", action="store_true", help="run only --probe-dir and --command probes"
    )
    parser.add_argument(
        "--command",
        action="append",
        default=[],
        metavar="NAME=CMD",
        help="custom command probe: exit 0 is pass, anything else fail (repeatable)",
    )
    parser.add_argument(
        "--command-dir",
        metavar="DIR",
        help="run --command probes from this directory (the project under test; default: here)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=api.DEFAULT_TIMEOUT,
        help="per-probe timeout in seconds for probes that declare none (default %(default)s)",
    )
    parser.add_argument(
        "--command-timeout",
        type=float,
        default=None,
        help="timeout in seconds for each --command probe (default: --timeout)",
    )
    parser.add_argument(
        "--import-timeout",
        type=float,
        default=600.0,
        help="limit for the zygote's import of torch/torchvision",
    )
    parser.add_argument(
        "--isolation",
        choices=("auto", "pristine"),
        default="auto",
        help="pristine: every probe in its own fresh interpreter (slow; for debugging)",
    )
    parser.add_argument(
        "--json-progress", action="store_true", help="progress as JSON lines on stderr"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


class Progress(object):
    def __init__(self, as_json, quiet):
        self.as_json = as_json
        self.quiet = quiet

    def event(self, kind, text, **fields):
        if self.quiet:
            return
        if self.as_json:
            fields.update(event=kind)
            line = json.dumps(fields)
        else:
            line = "probes: " + visible(text)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def result(self, result, index, total):
        try:
            seconds = float(result.get("duration_s") or 0.0)
        except (TypeError, ValueError):
            seconds = 0.0
        self.event(
            "probe",
            "[%d/%d] %-24s %-11s %6.2fs%s"
            % (
                index,
                total,
                result["name"],
                result["status"],
                seconds,
                ("  " + result["message"].splitlines()[0][:100]) if result.get("message") else "",
            ),
            name=result["name"],
            status=result["status"],
            seconds=seconds,
            index=index,
            total=total,
            message=result.get("message", ""),
        )


def say_running(name):
    """Name the probe starting now in the file the cell's heartbeat reads (``$TORCH_MATRIX_PROBE_NOW``);
    the test a command's pytest runs goes to ``<file>.test`` (``pytest_outcomes``)."""
    path = os.environ.get(pytest_outcomes.NOW_ENV)
    if not path:
        return
    try:
        if os.path.exists(path + ".test"):
            os.unlink(path + ".test")
        with open(path, "w") as handle:
            handle.write(name)
    except OSError:
        pass


def _request(name, source, isolation, timeout, options, tmpdir, index):
    base = os.path.join(tmpdir, "%03d-%s" % (index, re.sub(r"[^A-Za-z0-9_.-]", "_", name)))
    workdir = base + ".work"
    os.mkdir(workdir)
    return {
        "name": name,
        "source": source,
        "isolation": isolation,
        "timeout": timeout,
        "expected": options["expected"],
        "variant": options["variant"],
        "workdir": workdir,
        "output_path": base + ".out",
        "result_path": base + ".json",
        "notes_path": base + ".notes",
    }


def _problem_result(problem):
    return {
        "name": problem.name,
        "status": "error",
        "message": problem.message,
        "isolation": "shared",
        "duration_s": 0.0,
        "traceback": problem.traceback,
        "evidence": {"source": problem.source},
    }


def _gpu_facts_subprocess(tmpdir):
    """GPU facts from a throwaway interpreter, when no zygote is around to fork one."""
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, torch_matrix.probes.facts as f; print(json.dumps(f.gpu_facts()))",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_env(),
            timeout=300,
            cwd=tmpdir,
        )
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except Exception as exc:
        return {
            "cuda_available": False,
            "torch_cuda": None,
            "devices": [],
            "driver": facts.driver_version(),
            "error": "gathering GPU facts failed: %s" % exc,
        }


def write_output(path, data):
    if not path:
        sys.stdout.write(json.dumps(data, indent=1, default=repr) + "\n")
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    execute.write_json_atomic(path, data)


def checkpoint(path, results):
    """Rewrite ``--out`` after each probe (``"partial": true``): a runner killed by the cell's
    watchdog, or any other way, still leaves the probes that finished."""
    if path:
        write_output(path, {"probes_schema": PROBES_SCHEMA, "partial": True, "results": results})


def list_probes(specs, problems, commands):
    rows = [(s.name, s.isolation, s.doc) for s in specs]
    rows += [(p.name, "error", p.message) for p in problems]
    rows += [(name, "command", command) for name, command in commands]
    width = max([len(r[0]) for r in rows] + [4])
    for name, isolation, doc in rows:
        print("%-*s  %-8s  %s" % (width, name, isolation, doc))


def _selection(args):
    """The probes this run runs: (specs, problems, commands, probe dirs); ``None`` after ``--list``.
    A bad argument is a ``UsageError``."""
    commands = parse_commands(args.command)
    selected = set()
    for value in args.select:
        selected.update(n.strip() for n in value.split(",") if n.strip())
    if args.command_dir and not os.path.isdir(args.command_dir):
        raise UsageError("--command-dir %s: not a directory" % args.command_dir)
    for directory in args.probe_dir:
        if not os.path.isdir(directory):
            raise UsageError("--probe-dir %s: not a directory" % directory)
    probe_dirs = [os.path.abspath(d) for d in args.probe_dir]
    specs, problems = discovery.discover(probe_dirs, standard=not args.no_standard)
    refused = [problem for problem in problems if problem.refused]
    if refused and args.list:  # at plan time (``--list``): the spec's author fixes the name first
        raise UsageError(refused[0].message)
    if args.list:
        list_probes(specs, problems, commands)
        return None
    known = set(s.name for s in specs) | set(p.name for p in problems) | set(n for n, _ in commands)
    unknown = sorted(selected - known)
    if unknown:
        raise UsageError(
            "--select: unknown probe(s) %s (see python -m torch_matrix.probes --list)"
            % ", ".join(unknown)
        )
    if selected:
        specs = [s for s in specs if s.name in selected]
        problems = [p for p in problems if p.name in selected]
    return specs, problems, commands, probe_dirs


def _start_zygote(args, probe_dirs, tmpdir, progress):
    """The zygote the shared probes fork from, started (it may have died starting or been closed
    as unsafe to fork: ``alive`` says), or ``None`` when no probe shares an interpreter."""
    from torch_matrix.probes.zygoteclient import Zygote

    zygote = Zygote(
        ZYGOTE_IMPORTS,
        probe_dirs,
        not args.no_standard,
        tmpdir,
        child_env(),
        import_timeout=args.import_timeout,
        log=lambda text: progress.event("zygote", text, message=text),
    )
    if not zygote.start():
        progress.event(
            "zygote",
            "no zygote: shared probes run in fresh interpreters instead",
            imports=zygote.imports,
        )
        return zygote
    progress.event(
        "zygote",
        "zygote ready in %.2fs (%s)" % (zygote.ready_seconds, _describe_imports(zygote.imports)),
        seconds=round(zygote.ready_seconds, 3),
        imports=zygote.imports,
    )
    if not fork_safe(zygote.observations):
        progress.event(
            "zygote",
            "import torch initialised CUDA on this GPU machine: forked children "
            "would inherit it, so shared probes run in fresh interpreters instead",
        )
        zygote.close()
    return zygote


def _run_probe(spec, request, zygote):
    """One discovered probe's result: forked from the zygote when it shares an interpreter and the
    zygote lives, else in a fresh interpreter; whatever goes wrong costs this probe only."""
    try:
        result = None
        if spec.isolation == api.SHARED and zygote is not None and zygote.alive:
            result = zygote.run(request)
        if result is None:
            request["isolation"] = api.PRISTINE
            if (
                zygote is not None
            ):  # what the zygote learnt about imports still helps (install_sanity)
                request["imports"] = zygote.imports
            result = run_pristine(request)
    except Exception as exc:
        result = {
            "name": spec.name,
            "status": "error",
            "isolation": request["isolation"],
            "message": "the runner could not run the probe: %s" % execute.one_line(exc),
        }
    return result


def _gpu(zygote, tmpdir):
    """The GPU facts: from the zygote (torch imported already), else a subprocess, else none."""
    gpu = None
    if zygote is not None and zygote.alive:
        gpu = zygote.gpu_facts(
            {
                "timeout": 120.0,
                "output_path": os.path.join(tmpdir, "gpu.out"),
                "result_path": os.path.join(tmpdir, "gpu.json"),
                "workdir": tmpdir,
            }
        )
    if gpu is not None:
        return gpu
    if facts.installed_version("torch"):
        return _gpu_facts_subprocess(tmpdir)
    return {
        "cuda_available": False,
        "torch_cuda": None,
        "devices": [],
        "driver": facts.driver_version(),
    }


def _run_all(args, options, selection, progress, tmpdir):
    """Run every selected probe, then read the GPU facts: (results, gpu, zygote). ``--out`` is
    rewritten after each probe (``checkpoint``)."""
    specs, problems, commands, probe_dirs = selection
    results = []
    total = len(specs) + len(problems) + len(commands)

    def record(result):
        results.append(execute.capped(result))
        checkpoint(args.out, results)
        progress.result(results[-1], len(results), total)

    zygote = None
    try:
        if any(s.isolation == api.SHARED for s in specs) and args.isolation == "auto":
            zygote = _start_zygote(args, probe_dirs, tmpdir, progress)
        index = 0
        for spec in specs:
            index += 1
            timeout = spec.timeout if spec.timeout_declared else args.timeout
            say_running(spec.name)
            request = _request(
                spec.name,
                getattr(spec, "source", ""),
                spec.isolation,
                timeout,
                options,
                tmpdir,
                index,
            )
            started_probe = time.time()
            result = _run_probe(spec, request, zygote)
            record(execute.checked_result(result, request, time.time() - started_probe))
        for problem in problems:
            record(_problem_result(problem))
        for name, command in commands:
            index += 1
            say_running(name)
            limit = args.timeout if args.command_timeout is None else args.command_timeout
            record(run_command_probe(name, command, limit, tmpdir, index, args.command_dir))
        # the probes are done: the heartbeat must not go on naming the last one (and its last
        # test) while the GPU facts are read, seconds in a fresh interpreter
        say_running("")
        gpu = _gpu(zygote, tmpdir)
    finally:
        if zygote is not None:
            zygote.close()
    return results, gpu, zygote


def run_suite(args):
    started = time.time()
    options = {"expected": parse_pairs(args.expect, "--expect"), "variant": args.variant}
    selection = _selection(args)
    if selection is None:  # --list
        return 0
    progress = Progress(args.json_progress, args.quiet)
    tmpdir = tempfile.mkdtemp(prefix="probes-")
    try:
        results, gpu, zygote = _run_all(args, options, selection, progress, tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    data = {
        "probes_schema": PROBES_SCHEMA,
        "python": facts.python_facts(),
        "platform": facts.platform_facts(),
        "packages": facts.package_facts(),
        "gpu": gpu,
        "imports": zygote.imports if zygote is not None else {},
        "zygote": {
            "used": zygote is not None,
            "starts": zygote.starts if zygote else 0,
            "ready_s": round(zygote.ready_seconds, 3) if zygote else 0.0,
            "prewarm": zygote.prewarm if zygote else {},
        },
        "results": results,
        "wall_s": round(time.time() - started, 3),
    }
    write_output(args.out, data)
    counts = {}
    for result in results:
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    progress.event(
        "done",
        "done in %.1fs: %s"
        % (data["wall_s"], ", ".join("%d %s" % (counts[s], s) for s in STATUSES if s in counts)),
        wall_s=data["wall_s"],
        counts=counts,
    )
    return 0


def fork_safe(observations):
    """False when the zygote's imports queried CUDA on a machine with a GPU (fork after cuInit is unsafe).

    Without a driver the query initialises nothing, and forked children stay usable.
    """
    queried = any(
        (observations.get(key) or {}).get("calls") for key in ("import_torch", "import_torchvision")
    )
    return not (queried and facts.physical_gpu_count() > 0)


def _describe_imports(imports):
    parts = []
    for name, info in imports.items():
        if info.get("ok"):
            parts.append(
                "%s %s ok %.1fs" % (name, info.get("version", ""), info.get("seconds", 0.0))
            )
        else:
            parts.append("%s FAILED: %s" % (name, info.get("error", "")[:200]))
    return "; ".join(parts) or "nothing imported"


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return run_suite(args)
    except UsageError as exc:
        sys.stderr.write("python -m torch_matrix.probes: %s\n" % exc)
        return 2
