"""Run one probe in the current process and describe its outcome as a ProbeResult-shaped dict.

Used inside the zygote's forked children and, as ``python -m torch_matrix.probes.execute REQUEST``,
inside the fresh interpreter of a ``pristine`` probe. The process that runs the probe is
disposable: the parent reads the result file it leaves behind, or, if there is none,
classifies the death (``crash``/``timeout``) itself.
"""

import json
import math
import os
import shlex
import signal
import sys
import time
import traceback
from json.encoder import encode_basestring_ascii

from torch_matrix.probes import api

STATUSES = ("pass", "fail", "unsupported", "skip", "error", "timeout", "crash")
FRAMES_KEPT = 8
OUTPUT_TAIL_CHARS = 4000
# What one result records at most (``capped``): a probe's megabyte message or evidence made the
# cell file, the report and an issue body megabytes too. torch_matrix.world.shardvalues applies the
# same limits when it loads a file our runner did not write; a test keeps them in step.
TEXT_CHARS = 16000  # message, traceback, repro, output tail
JSON_CHARS = 64000  # evidence, observed, expected, as JSON

# --------------------------------------------------------------------------- the report channel
#
# What the process that ran a probe writes is read back by a process the probe never ran in (the
# zygote or the runner), which checks it (``checked_result``): whatever a probe did to its own
# process costs only its own result. So that a probe which rebinds what reporting uses
# (``builtins.open``, ``json.dumps``, ``json.JSONEncoder``, ``print``, ``isinstance``,
# ``os.replace``) still gets its own outcome recorded, everything the report needs is bound here,
# at import, before any probe runs, and the result is encoded without the json module.
_open, _repr, _str, _isinstance, _len, _sorted = open, repr, str, isinstance, len, sorted
_dict, _list, _tuple, _bool, _int, _float, _round = dict, list, tuple, bool, int, float, round
_BaseException, _id, _type = BaseException, id, type
_quote, _float_repr, _isfinite = encode_basestring_ascii, float.__repr__, math.isfinite
_getpid, _fsync, _replace, _time = os.getpid, os.fsync, os.replace, time.time
_killpg, _SIGKILL = os.killpg, signal.SIGKILL
MAX_DEPTH = 64


def jsonable(value, _depth=0, _seen=None):
    """``value`` as plain JSON data (dict with text keys, list, text, number, bool, None); anything
    else, a cycle or nesting deeper than ``MAX_DEPTH`` becomes its repr."""
    if value is None or _isinstance(value, (_bool, _str)):
        return value
    if _isinstance(value, _int):
        return _int(value)
    if _isinstance(value, _float):
        return _float(value)
    seen = _seen if _seen is not None else set()
    if _isinstance(value, (_dict, _list, _tuple)) and _depth < MAX_DEPTH and _id(value) not in seen:
        seen.add(_id(value))
        try:
            if _isinstance(value, _dict):
                return {
                    _key(key): jsonable(item, _depth + 1, seen) for key, item in _dict.items(value)
                }
            return [jsonable(item, _depth + 1, seen) for item in value]
        finally:
            seen.discard(_id(value))
    return _safe_repr(value)


def _key(key):
    """A mapping key as the json module writes it (``1`` -> "1", ``None`` -> "null"), else its repr."""
    if _isinstance(key, _str):
        return key
    if key is None or _isinstance(key, (_bool, _int, _float)):
        return encode(jsonable(key)).strip('"')
    return _safe_repr(key)


def _safe_repr(value):
    try:
        text = _repr(value)
        return text if _isinstance(text, _str) else "<unrepresentable>"
    except _BaseException:
        return "<unrepresentable %s>" % _type_name(value)


def encode(value):
    """JSON text of ``jsonable`` data, written without the json module (a probe may have rebound
    it). Non-finite floats are written as the json module writes them (NaN, Infinity)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _isinstance(value, _str):
        return _quote(value)
    if _isinstance(value, _int):
        return _int.__repr__(value)
    if _isinstance(value, _float):
        if _isfinite(value):
            return _float_repr(value)
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if _isinstance(value, _dict):
        return (
            "{"
            + ", ".join(_quote(key) + ": " + encode(item) for key, item in _dict.items(value))
            + "}"
        )
    return "[" + ", ".join(encode(item) for item in value) + "]"


def last_frames(exc, limit=FRAMES_KEPT):
    """The exception with its last ``limit`` frames (and its cause, one line)."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
        lines = [
            "Traceback (most recent call last%s):\n"
            % (", last %d of %d frames" % (limit, _len(frames)) if _len(frames) > limit else "")
        ]
        lines.extend(traceback.format_list(frames[-limit:]))
        lines.extend(traceback.format_exception_only(type(exc), exc))
        cause = exc.__cause__
        if cause is None and not getattr(exc, "__suppress_context__", False):
            cause = exc.__context__
        if cause is not None:
            lines.append(
                "caused by: "
                + "".join(traceback.format_exception_only(type(cause), cause)).strip()
                + "\n"
            )
        return "".join(lines)
    except _BaseException:  # the probe broke the traceback module, or the exception's own str()
        return one_line(exc)


def one_line(exc):
    name = _type_name(exc)
    try:
        text = _str(exc).strip().splitlines()
    except _BaseException:
        return name + ": <its message could not be read>"
    return "%s: %s" % (name, text[0] if text else "") if text else name


def _type_name(value):
    try:
        name = _type(value).__name__
        return name if _isinstance(name, _str) else "object"
    except _BaseException:
        return "object"


def rerun_command(name, expected=None, variant="default"):
    """The command that runs just this probe again, as the repro of last resort."""
    parts = ["python", "-m", "torch_matrix.probes", "--select", name]
    for key, value in sorted((expected or {}).items()):
        parts += ["--expect", "%s=%s" % (key, value)]
    if variant and variant != "default":
        parts += ["--variant", variant]
    return " ".join(shlex.quote(str(part)) for part in parts)  # printed for pasting: quoted


def kill_group(pid):
    """SIGKILL the process group ``pid`` leads (a probe, a command probe's shell, the zygote: each
    starts one, so whatever it started goes too); one already gone is no error. The probe side's
    only process killer."""
    try:
        _killpg(pid, _SIGKILL)
    except OSError:  # gone already (ProcessLookupError), or not ours to kill (PermissionError)
        pass


def write_json_atomic(path, data):
    tmp = "%s.tmp%d" % (path, _getpid())
    text = encode(jsonable(data))
    with _open(tmp, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(text)
        handle.flush()
        _fsync(handle.fileno())
    _replace(tmp, path)


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
    ctx = api.Context(
        expected=request.get("expected"),
        variant=request.get("variant", "default"),
        workdir=request.get("workdir", ""),
        timeout=float(request.get("timeout", 0.0)),
    )
    ctx.imports = dict(request.get("imports") or {})
    ctx.observations = dict(request.get("observations") or {})
    ctx.isolation = request.get("isolation", api.SHARED)
    notes_path = request.get("notes_path")
    if notes_path:

        def sink(key, value):
            with _open(notes_path, "a", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(encode({"k": jsonable(key), "v": jsonable(value)}) + "\n")

        ctx.note_sink = sink
    return ctx


def run_probe(spec, ctx):
    """Call the probe and map its outcome to a status. Never raises: when describing the outcome
    fails (the probe broke something that needs), the result says so, as the probe's ``error``."""
    started = _time()
    result = {"name": spec.name, "isolation": ctx.isolation or spec.isolation}
    try:
        try:
            returned = spec.func(ctx)
        except api.ProbeOutcome as outcome:
            evidence = _dict(ctx.notes)
            evidence.update(outcome.evidence)
            result.update(
                status=outcome.status,
                message=outcome.message,
                evidence=evidence,
                observed=outcome.observed,
                expected=outcome.expected,
                repro=outcome.repro,
            )
            if outcome.status == "fail":
                result["traceback"] = getattr(outcome, "traceback", "") or last_frames(outcome)
        except (
            _BaseException
        ) as exc:  # SystemExit and KeyboardInterrupt inside a probe are its errors too
            result.update(
                status="error",
                message=one_line(exc),
                evidence=_dict(ctx.notes),
                traceback=last_frames(exc),
            )
        else:
            evidence = _dict(ctx.notes)
            if _isinstance(returned, _dict):
                evidence.update(returned)
            elif returned is not None:
                evidence["returned"] = returned
            result.update(status="pass", message="", evidence=evidence)
    except _BaseException as exc:
        result = {
            "name": spec.name,
            "isolation": ctx.isolation or spec.isolation,
            "status": "error",
            "message": "the probe's outcome could not be recorded: %s" % one_line(exc),
        }
    if result["status"] in ("fail", "error") and not result.get("repro"):
        result["repro"] = rerun_command(spec.name, ctx.expected, ctx.variant)
    result["duration_s"] = _round(_time() - started, 4)
    cleaned = {}
    for key, value in _dict.items(result):
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


_SURROGATES = dict((code, "\ufffd") for code in range(0xD800, 0xE000))


def _text(value):
    """``value`` as text that encodes: each lone surrogate (a path decoded with surrogateescape) becomes U+FFFD."""
    return value.translate(_SURROGATES)


def capped(result):
    """``result`` as the runner records it: each text field at most ``TEXT_CHARS``, each structured
    field at most ``JSON_CHARS`` of JSON, and text that encodes; what was cut is said in place."""
    capped_result = _dict(result)
    for key in ("message", "traceback", "repro", "output_tail"):
        value = capped_result.get(key)
        if _isinstance(value, _str):
            value = _text(value)
            if _len(value) > TEXT_CHARS:
                value = value[
                    :TEXT_CHARS
                ] + "\n[... %d more characters cut by the probe runner]" % (
                    _len(value) - TEXT_CHARS
                )
            capped_result[key] = value
    for key in ("evidence", "observed", "expected"):
        if key not in capped_result:
            continue
        text = encode(jsonable(capped_result[key]))
        if _len(text) <= JSON_CHARS:
            continue
        note = "%d characters of %s as JSON cut by the probe runner (over %d)" % (
            _len(text),
            key,
            JSON_CHARS,
        )
        capped_result[key] = (
            {"cut_by_runner": note, "start": _text(text[:1000])}
            if key == "evidence"
            else _text(text[:1000]) + " [... " + note + "]"
        )
    return capped_result


RESULT_TEXT = ("message", "traceback", "repro", "output_tail", "isolation")
RESULT_KEYS = ("name", "status", "duration_s", "evidence", "observed", "expected") + RESULT_TEXT


def result_problem(result, name):
    """What is wrong with a result a probe's process reported ("" when nothing is): read in a process
    the probe never ran in, so no rebinding in the probe's process can change the verdict."""
    if not isinstance(result, dict):
        return "a %s, not an object" % type(result).__name__
    if result.get("name") != name:
        return "a result named %r" % (result.get("name"),)
    if result.get("status") not in STATUSES:
        return "status %r" % (result.get("status"),)
    for key in RESULT_TEXT:
        if key in result and not isinstance(result[key], str):
            return "%s is a %s, not text" % (key, type(result[key]).__name__)
    if "evidence" in result and not isinstance(result["evidence"], dict):
        return "evidence is a %s, not an object" % type(result["evidence"]).__name__
    duration = result.get("duration_s", 0.0)
    if (
        isinstance(duration, bool)
        or not isinstance(duration, (int, float))
        or not (0 <= duration < 1e9)
    ):
        return "duration_s %r" % (duration,)
    return ""


def checked_result(result, request, duration=0.0):
    """``result`` as the runner records it (known keys only), or, when it is malformed, an ``error``
    result for the requested probe that says how: it costs that probe, never the others."""
    name = request["name"]
    problem = result_problem(result, name)
    if not problem:
        return {key: value for key, value in result.items() if key in RESULT_KEYS}
    checked = {
        "name": name,
        "status": "error",
        "isolation": request.get("isolation", api.SHARED),
        "duration_s": round(duration, 4),
        "message": "the probe's process reported a malformed result (%s); nothing it reported is kept"
        % problem[:200],
        "repro": rerun_command(name, request.get("expected"), request.get("variant", "default")),
    }
    tail = tail_of(request["output_path"]) if request.get("output_path") else ""
    if tail:
        checked["output_tail"] = tail
    return checked


def finish_result(request, how, code, duration, check=True):
    """The result of a probe process that has ended: its own result file, or what its death says.

    ``how`` is "exited" (``code`` = exit status), "signaled" (``code`` = signal number)
    or "timeout" (the parent killed it after ``request["timeout"]`` seconds). ``check``: the file
    holds a probe's result (``checked_result``); False for other work done the same way (GPU facts).
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
    reported = result is not None
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
            message = (
                "the process running the probe exited with code %s without reporting a result"
                % code
            )
        result = {
            "name": name,
            "status": status,
            "message": message,
            "isolation": isolation,
            "duration_s": round(duration, 4),
        }
        evidence = dict(notes)
        evidence.pop("repro", None)
        if how == "signaled":
            evidence["signal"] = signal_name(code)
        elif how == "exited":
            evidence["exit_code"] = code
        if evidence:
            result["evidence"] = jsonable(evidence)
        repro = notes.get("repro")
        result["repro"] = (
            repro
            if isinstance(repro, str) and repro
            else rerun_command(name, request.get("expected"), request.get("variant", "default"))
        )
    elif check:
        reported = not result_problem(result, name)
        result = checked_result(result, request, duration)
    if not check:
        return result
    if reported and how == "signaled":
        # it reported, then died (e.g. in a destructor): keep both facts
        result.setdefault("evidence", {})["died_after_reporting"] = signal_name(code)
    if output_tail and result.get("status") != "pass":
        result["output_tail"] = output_tail
    return result


def main(argv=None):
    """Pristine entry point: ``python -m torch_matrix.probes.execute REQUEST.json``."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as handle:
        request = json.load(handle)
    from torch_matrix.probes import discovery

    ctx = make_context(request)
    try:
        spec = discovery.find_spec(request["source"], request["name"])
    except BaseException as exc:
        result = {
            "name": request["name"],
            "status": "error",
            "message": one_line(exc),
            "traceback": last_frames(exc),
            "isolation": ctx.isolation,
            "duration_s": 0.0,
        }
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
