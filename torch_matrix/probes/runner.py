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
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from torch_matrix.probes import api, discovery, execute, facts, pytest_outcomes

PROBES_SCHEMA = 1
ZYGOTE_IMPORTS = ("torch", "torchvision")
STATUSES = execute.STATUSES


class UsageError(Exception):
    """Bad command-line input: one line on stderr, exit 2."""


def package_root():
    """The directory that contains the ``torch_matrix`` package (put on PYTHONPATH for our subprocesses)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env():
    env = dict(os.environ)
    root = package_root()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        paths.insert(0, root)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return env


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


# The terminal's rule of torch_matrix.vocab.escaping.terminal, which probes cannot import (a test holds the
# two equal): a control character in a probe's message is shown as \x1b, never sent to the terminal.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def visible(text):
    def shown(match):
        code = ord(match.group())
        return "\\x%02x" % code if code <= 0xFF else "\\u%04x" % code

    return text if text.isprintable() else _CONTROL.sub(shown, text)


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


def _wait_process(proc, timeout):
    """Wait for a subprocess (own session); kill its group on timeout. Returns (how, code)."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        proc.wait()
        return "timeout", None
    _kill_session(proc)
    if code < 0:
        return "signaled", -code
    return "exited", code


def _kill_session(proc):
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def run_pristine(request, imports=None, observations=None):
    """A fresh interpreter that has imported nothing runs the probe (``python -m torch_matrix.probes.execute``)."""
    request_path = request["result_path"] + ".request"
    with open(request_path, "w") as handle:
        json.dump(request, handle)
    started = time.time()
    with open(request["output_path"], "wb") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "torch_matrix.probes.execute", request_path],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=child_env(),
            cwd=request["workdir"],
            start_new_session=True,
        )
        how, code = _wait_process(proc, float(request["timeout"]))
    return execute.finish_result(request, how, code, time.time() - started)


def command_env(records_path):
    """The command's environment: ours (the cell's venv first on PATH), plus our pytest plugin.

    ``PYTEST_ADDOPTS`` reaches any pytest the command starts, however it is spelled
    (``pytest``, ``python -m pytest``, a script); other commands ignore it. The cache
    provider is off so cells never write ``.pytest_cache`` into the project.
    """
    env = child_env()
    env[pytest_outcomes.OUT_ENV] = records_path
    env["PYTEST_ADDOPTS"] = " ".join(
        filter(
            None,
            [
                env.get("PYTEST_ADDOPTS", ""),
                "-p",
                "torch_matrix.probes.pytest_outcomes",
                "-p",
                "no:cacheprovider",
            ],
        )
    )
    return env


def command_repro(command, cwd=None):
    """The shell line that reruns ``command`` as the cell ran it: from ``cwd``, with this
    interpreter's directory (the cell's venv) first on PATH, so ``pytest`` is the cell's own."""
    tools = os.path.dirname(sys.executable)
    line = 'PATH=%s:"$PATH" %s' % (shlex.quote(tools), command)
    return "cd %s && %s" % (shlex.quote(cwd), line) if cwd else line


def run_command_probe(name, command, timeout, tmpdir, index, cwd=None):
    """A downstream command (e.g. a pytest selection) as a probe, run from ``cwd`` (the project).

    Exit 0 passes, anything else fails; exit 127 (command not found) is ``error``. A command
    that runs pytest is judged test by test (``torch_matrix.probes.pytest_outcomes``): failing tests named
    by node id, skips not failures, a collection or usage error ``error``.
    """
    base = os.path.join(tmpdir, "%03d-%s" % (index, name))
    output_path = base + ".out"
    records_path = base + ".pytest.jsonl"
    started = time.time()
    with open(output_path, "wb") as output:
        proc = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd or None,
            env=command_env(records_path),
        )
        how, code = _wait_process(proc, timeout)
    duration = time.time() - started
    tail = execute.tail_of(output_path)
    result = {
        "name": name,
        "isolation": "command",
        "duration_s": round(duration, 4),
        "repro": command_repro(command, cwd),
        "evidence": {"command": command},
    }
    if cwd:
        result["evidence"]["cwd"] = cwd
    records = pytest_outcomes.read_records(records_path)
    if how == "timeout":
        result.update(
            status="timeout", message="command ran past its %gs limit and was killed" % timeout
        )
    elif how == "signaled":
        result.update(status="crash", message="command died from %s" % execute.signal_name(code))
        result["evidence"]["signal"] = execute.signal_name(code)
    elif code == 127:
        result.update(
            status="error",
            message="command not found (exit 127): %s"
            % ((tail or "").strip().splitlines() or [command])[-1][:300],
        )
        result["evidence"]["exit_code"] = code
    elif records or pytest_outcomes.runs_pytest(command):
        status, message, evidence = pytest_outcomes.judge(code, records, tail or "")
        result.update(status=status, message=message)
        result["evidence"].update(evidence)
        result["evidence"]["exit_code"] = code
        if status == "fail":
            result.update(observed=code, expected=0)
    elif code == 0:
        result.update(status="pass", message="")
        result["evidence"]["exit_code"] = 0
    else:
        result.update(
            status="fail", message="command exited with code %d" % code, observed=code, expected=0
        )
        result["evidence"]["exit_code"] = code
    if result["status"] != "pass" and tail:
        result["output_tail"] = tail
    return result


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


def run_suite(args):
    started = time.time()
    expected = parse_pairs(args.expect, "--expect")
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
        return 0
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
    progress = Progress(args.json_progress, args.quiet)
    options = {"expected": expected, "variant": args.variant}
    tmpdir = tempfile.mkdtemp(prefix="probes-")
    results = []
    total = len(specs) + len(problems) + len(commands)
    zygote = None
    try:
        shared = [s for s in specs if s.isolation == api.SHARED and args.isolation == "auto"]
        if shared:
            from torch_matrix.probes.zygote import Zygote

            zygote = Zygote(
                ZYGOTE_IMPORTS,
                probe_dirs,
                not args.no_standard,
                tmpdir,
                child_env(),
                import_timeout=args.import_timeout,
                log=lambda text: progress.event("zygote", text, message=text),
            )
            if zygote.start():
                progress.event(
                    "zygote",
                    "zygote ready in %.2fs (%s)"
                    % (zygote.ready_seconds, _describe_imports(zygote.imports)),
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
            else:
                progress.event(
                    "zygote",
                    "no zygote: shared probes run in fresh interpreters instead",
                    imports=zygote.imports,
                )
        index = 0
        for spec in specs:
            index += 1
            timeout = spec.timeout if spec.timeout_declared else args.timeout
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
            except Exception as exc:  # whatever went wrong with this probe costs this probe only
                result = {
                    "name": spec.name,
                    "status": "error",
                    "isolation": request["isolation"],
                    "message": "the runner could not run the probe: %s" % execute.one_line(exc),
                }
            results.append(
                execute.capped(execute.checked_result(result, request, time.time() - started_probe))
            )
            checkpoint(args.out, results)
            progress.result(results[-1], len(results), total)
        for problem in problems:
            results.append(execute.capped(_problem_result(problem)))
            checkpoint(args.out, results)
            progress.result(results[-1], len(results), total)
        for name, command in commands:
            index += 1
            results.append(
                execute.capped(
                    run_command_probe(name, command, args.timeout, tmpdir, index, args.command_dir)
                )
            )
            checkpoint(args.out, results)
            progress.result(results[-1], len(results), total)
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
        if gpu is None:
            gpu = (
                _gpu_facts_subprocess(tmpdir)
                if facts.installed_version("torch")
                else {
                    "cuda_available": False,
                    "torch_cuda": None,
                    "devices": [],
                    "driver": facts.driver_version(),
                }
            )
    finally:
        if zygote is not None:
            zygote.close()
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
