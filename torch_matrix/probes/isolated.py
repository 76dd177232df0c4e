"""Probes in a process of their own: ``pristine`` probes (a fresh interpreter that imported
nothing, ``python -m torch_matrix.probes.execute``) and ``--command`` probes (a shell command from
the project's directory, pytest judged test by test through ``torch_matrix.probes.pytest_outcomes``).

Each child runs in its own session; on a timeout its whole process group is killed. Its
environment puts our package first on PYTHONPATH (``child_env``). Stdlib only, Python 3.8+: this
runs inside a cell's interpreter. The suite's loop: ``torch_matrix.probes.runner``."""

import json
import os
import shlex
import subprocess
import sys
import time

from torch_matrix.probes import execute, fixproof, pytest_outcomes


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


def wait_process(proc, timeout):
    """Wait for a subprocess (own session); kill its group on timeout. Returns (how, code)."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        execute.kill_group(proc.pid)
        proc.wait()
        return "timeout", None
    execute.kill_group(proc.pid)
    if code < 0:
        return "signaled", -code
    return "exited", code


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
        how, code = wait_process(proc, float(request["timeout"]))
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


def run_shell(command, cwd, env, output_path, timeout):
    """The one place a user's command line runs through the shell (the spec's command, and its
    reruns proving a fix): its own session, its output to ``output_path``; (how, code)."""
    with open(output_path, "wb") as output:
        proc = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd or None,
            env=env,
        )
        return wait_process(proc, timeout)


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
    how, code = run_shell(command, cwd, command_env(records_path), output_path, timeout)
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
            # A torch.load refused by weights_only: each call site's fix rerun on its tests.
            proofs = fixproof.prove(command, cwd, records, base, timeout, command_env, run_shell)
            if proofs is not None:
                result["evidence"]["fix_proofs"] = proofs
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
