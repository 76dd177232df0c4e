"""Run one probe in the current process and describe its outcome as a ProbeResult-shaped dict.

Used inside the zygote's forked children and, as ``python -m probes.execute REQUEST``,
inside the fresh interpreter of a ``pristine`` probe. The process that runs the probe is
disposable: the parent reads the result file it leaves behind, or, if there is none,
classifies the death (``crash``/``timeout``) itself.
"""

import json
import os
import sys
import time
import traceback

from probes import api

# Bound now: a probe that monkeypatches json (poisoned state) must not corrupt its own result.
_dumps, _loads = json.dumps, json.loads

FRAMES_KEPT = 8
OUTPUT_TAIL_CHARS = 4000


def jsonable(value):
    """``value`` as plain JSON data; anything unknown becomes its repr."""
    try:
        return _loads(_dumps(value, default=repr))
    except Exception:
        return repr(value)


def last_frames(exc, limit=FRAMES_KEPT):
    """The exception with its last ``limit`` frames (and its cause, one line)."""
    frames = traceback.extract_tb(exc.__traceback__)
    lines = ["Traceback (most recent call last%s):\n"
             % (", last %d of %d frames" % (limit, len(frames)) if len(frames) > limit else "")]
    lines.extend(traceback.format_list(frames[-limit:]))
    lines.extend(traceback.format_exception_only(type(exc), exc))
    cause = exc.__cause__
    if cause is None and not getattr(exc, "__suppress_context__", False):
        cause = exc.__context__
    if cause is not None:
        lines.append("caused by: " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
                     + "\n")
    return "".join(lines)


def one_line(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "") if text else type(exc).__name__


def rerun_command(name, expected=None, variant="default"):
    """The command that runs just this probe again, as the repro of last resort."""
    parts = ["python", "-m", "probes", "--select", name]
    for key, value in sorted((expected or {}).items()):
        parts += ["--expect", "%s=%s" % (key, value)]
    if variant and variant != "default":
        parts += ["--variant", variant]
    return " ".join(parts)


def write_json_atomic(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    text = _dumps(data, indent=1, default=repr)
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_notes(path):
    """Notes a probe recorded with ``ctx.note`` before it died, from the sidecar file."""
    notes = {}
    try:
        with open(path) as handle:
            for line in handle:
                try:
                    item = json.loads(line)
                    notes[item["k"]] = item["v"]
                except Exception:
                    continue
    except OSError:
        pass
    return notes


def make_context(request):
    ctx = api.Context(expected=request.get("expected"), variant=request.get("variant", "default"),
                      workdir=request.get("workdir", ""), timeout=float(request.get("timeout", 0.0)))
    ctx.imports = dict(request.get("imports") or {})
    ctx.observations = dict(request.get("observations") or {})
    ctx.isolation = request.get("isolation", api.SHARED)
    notes_path = request.get("notes_path")
    if notes_path:
        def sink(key, value):
            with open(notes_path, "a") as handle:
                handle.write(_dumps({"k": key, "v": jsonable(value)}) + "\n")
        ctx.note_sink = sink
    return ctx


def run_probe(spec, ctx):
    """Call the probe and map its outcome to a status. Never raises."""
    started = time.time()
    result = {"name": spec.name, "isolation": ctx.isolation or spec.isolation}
    try:
        returned = spec.func(ctx)
        evidence = dict(ctx.notes)
        if isinstance(returned, dict):
            evidence.update(returned)
        elif returned is not None:
            evidence["returned"] = returned
        result.update(status="pass", message="", evidence=evidence)
    except api.ProbeOutcome as outcome:
        evidence = dict(ctx.notes)
        evidence.update(outcome.evidence)
        result.update(status=outcome.status, message=outcome.message, evidence=evidence,
                      observed=outcome.observed, expected=outcome.expected, repro=outcome.repro)
        if outcome.status == "fail":
            result["traceback"] = getattr(outcome, "traceback", "") or last_frames(outcome)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt inside a probe are its errors too
        result.update(status="error", message=one_line(exc), evidence=dict(ctx.notes),
                      traceback=last_frames(exc))
    if result["status"] in ("fail", "error") and not result.get("repro"):
        result["repro"] = rerun_command(spec.name, ctx.expected, ctx.variant)
    result["duration_s"] = round(time.time() - started, 4)
    cleaned = {}
    for key, value in result.items():
        value = jsonable(value)
        if key == "message" or (value is not None and value != "" and value != {}):
            cleaned[key] = value
    return cleaned


def signal_name(number):
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def tail_of(path, chars=OUTPUT_TAIL_CHARS):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - chars))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def finish_result(request, how, code, duration):
    """The result of a probe process that has ended: its own result file, or what its death says.

    ``how`` is "exited" (``code`` = exit status), "signaled" (``code`` = signal number)
    or "timeout" (the parent killed it after ``request["timeout"]`` seconds).
    """
    name = request["name"]
    isolation = request.get("isolation", api.SHARED)
    output_tail = tail_of(request["output_path"]) if request.get("output_path") else ""
    result = None
    if how != "timeout":
        try:
            with open(request["result_path"]) as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            result = None
    if result is None:
        notes = read_notes(request.get("notes_path", ""))
        if how == "timeout":
            status = "timeout"
            message = "ran past its %gs limit and was killed" % float(request.get("timeout", 0))
        elif how == "signaled":
            status = "crash"
            message = "the process running the probe died from %s" % signal_name(code)
        else:
            status = "crash"
            message = "the process running the probe exited with code %s without reporting a result" % code
        result = {"name": name, "status": status, "message": message, "isolation": isolation,
                  "duration_s": round(duration, 4)}
        evidence = dict(notes)
        evidence.pop("repro", None)
        if how == "signaled":
            evidence["signal"] = signal_name(code)
        elif how == "exited":
            evidence["exit_code"] = code
        if evidence:
            result["evidence"] = jsonable(evidence)
        result["repro"] = notes.get("repro") or rerun_command(name, request.get("expected"),
                                                             request.get("variant", "default"))
    else:
        if how == "signaled":  # it reported, then died (e.g. in a destructor): keep both facts
            result.setdefault("evidence", {})["died_after_reporting"] = signal_name(code)
    if output_tail and result.get("status") != "pass":
        result["output_tail"] = output_tail
    return result


def main(argv=None):
    """Pristine entry point: ``python -m probes.execute REQUEST.json``."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as handle:
        request = json.load(handle)
    from probes import discovery

    ctx = make_context(request)
    try:
        spec = discovery.find_spec(request["source"], request["name"])
    except BaseException as exc:
        result = {"name": request["name"], "status": "error", "message": one_line(exc),
                  "traceback": last_frames(exc), "isolation": ctx.isolation, "duration_s": 0.0}
    else:
        if request.get("workdir"):
            os.chdir(request["workdir"])
        result = run_probe(spec, ctx)
    write_json_atomic(request["result_path"], result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
