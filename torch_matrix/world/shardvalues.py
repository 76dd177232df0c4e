"""Every value read from a shard, checked where it is loaded (issue 25).

A result file comes from another machine, another tool version or a hand edit. Python's
``json`` reads ``NaN``, ``Infinity`` and lone surrogates (``"\\udcff"``: a path decoded with
surrogateescape) without a word, and a probe can record megabytes. Downstream, one such value
ended ``report``, ``report --html``, ``pins``, ``import`` and ``repro`` in a traceback for every
cell of the run. Here each bad value costs only itself: it is replaced or left out, and the
caller gets one phrase per change for one warning naming the file. Pure functions of the
parsed data (the loader in ``world.results`` decides where the warning goes).
"""

from __future__ import annotations

import json
import math
from typing import Any

from torch_matrix.judge.gpus import label_problem
from torch_matrix.vocab.escaping import terminal

# The runner caps what it records at write time (torch_matrix/probes/execute.py: TEXT_CHARS, JSON_CHARS; a
# test keeps these in step); the loader applies the same limits, plus room for what the cell
# adds to a message ("fails in 2 of 2 runs: "), to files our runner did not write.
RUNNER_TEXT_CHARS = 16_000
RUNNER_JSON_CHARS = 64_000
TEXT_CHARS = (
    RUNNER_TEXT_CHARS + 4_000
)  # one text field: message, traceback, repro, output tail, install message
JSON_CHARS = RUNNER_JSON_CHARS + 4_000  # one structured field as JSON: evidence, observed, expected
MAX_SECONDS = 1e7  # no phase and no probe runs for 115 days
_SURROGATES = {code: "\ufffd" for code in range(0xD800, 0xE000)}

_TEXT_FIELDS = ("message", "traceback", "repro", "output_tail")
_JSON_FIELDS = ("evidence", "observed", "expected")


def may_need_checking(text: str) -> bool:
    """False when the file's text cannot hold a bad string (cheap: most files skip the walk).

    A lone surrogate reaches JSON text only as a ``\\udXXX`` escape (Python's json and
    JavaScript's JSON.stringify write it so; writers of raw surrogates make invalid UTF-8, which
    is refused before this); an oversize field needs a text longer than the limit. One scan:
    at 2,000 files a report must stay under a second. Non-finite and out-of-range numbers in
    the fields that are computed with (timings, durations) are checked on every file
    (``check_numbers``).
    """
    return len(text) > TEXT_CHARS or "\\ud" in text


def _cut(text: str, limit: int, what: str) -> str:
    return (
        text[:limit] + f"\n[... {len(text) - limit:,} more characters of {what} cut when loading]"
    )


def _clean_text(value: str) -> str:
    """Lone surrogates (not text: unencodable) become U+FFFD, one each."""
    return value.translate(_SURROGATES)


def _has_lone_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _clean_json(value: Any, found: list[str]) -> Any:
    """``value`` with lone surrogates replaced and non-finite numbers as text ("nan", "inf")."""
    if isinstance(value, str):
        if _has_lone_surrogate(value):
            found.append("lone surrogates (not text)")
            return _clean_text(value)
        return value
    if isinstance(value, float) and not math.isfinite(value):
        found.append("a non-finite number")
        return repr(value)
    if isinstance(value, dict):
        return {
            _clean_json(key, found) if isinstance(key, str) else key: _clean_json(item, found)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_clean_json(item, found) for item in value]
    return value


def _seconds_problem(value: Any) -> str:
    if type(value) not in (int, float):
        return ""  # the schema names a wrong type
    if not math.isfinite(value):
        return f"{value!r} is not a number of seconds"
    if value < 0 or value > MAX_SECONDS:
        return f"{value:g} s is out of range (0 to {MAX_SECONDS:g})"
    return ""


def check_numbers(data: Any) -> list[str]:
    """Timings and probe durations made sane in place (cheap: run on every file); what changed."""
    notes: list[str] = []
    if not isinstance(data, dict):
        return notes
    timings = data.get("timings")
    if isinstance(timings, dict):
        for key in list(timings):
            why = _seconds_problem(timings[key])
            if why:
                del timings[key]
                notes.append(f"timings/{key}: {why}; left out")
    probes = data.get("probes")
    if isinstance(probes, list):
        for number, probe in enumerate(probes):
            if type(probe) is dict:
                seconds = probe.get("duration_s")
                if type(seconds) is float and 0 <= seconds <= MAX_SECONDS:
                    continue  # nearly every probe: no call (NaN fails both comparisons)
            if isinstance(probe, dict):
                why = _seconds_problem(probe.get("duration_s"))
                if why:
                    probe["duration_s"] = 0.0
                    notes.append(f"probes/{number}/duration_s: {why}; shown as 0")
    return notes


def _check_text_field(owner: dict, key: str, where: str, notes: list[str]) -> None:
    value = owner.get(key)
    if not isinstance(value, str):
        return
    changed = []
    if _has_lone_surrogate(value):
        value = _clean_text(value)
        changed.append("lone surrogates (not text) replaced")
    if len(value) > TEXT_CHARS:
        changed.append(f"{len(value):,} characters cut to {TEXT_CHARS:,}")
        value = _cut(value, TEXT_CHARS, key)
    if changed:
        owner[key] = value
        notes.append(f"{where}: {', '.join(changed)}")


def _check_json_field(owner: dict, key: str, where: str, notes: list[str]) -> None:
    if key not in owner:
        return
    found: list[str] = []
    value = _clean_json(owner[key], found)
    changed = [f"{kind} replaced" for kind in dict.fromkeys(found)]
    text = json.dumps(value, ensure_ascii=False)
    size = len(text)
    if size > JSON_CHARS:
        preview = text[:1000]
        value = (
            {
                "cut_when_loading": f"{size:,} characters of {key} as JSON, over {JSON_CHARS:,}",
                "start": preview,
            }
            if key == "evidence"
            else _cut(preview, 1000, key)
        )
        changed.append(f"{size:,} characters of JSON cut")
    if changed:
        owner[key] = value
        notes.append(f"{where}: {', '.join(changed)}")


def check_values(data: Any) -> list[str]:
    """Text and structured fields made safe in place (surrogates, non-finite numbers, size); what changed.

    Every string outside the probes' own fields (install, interpreter, platform, gpu, cell) is
    cleaned of lone surrogates and capped too."""
    notes: list[str] = []
    if not isinstance(data, dict):
        return notes
    probes = data.get("probes")
    for number, probe in enumerate(probes if isinstance(probes, list) else ()):
        if not isinstance(probe, dict):
            continue
        for key in _TEXT_FIELDS:
            _check_text_field(probe, key, f"probes/{number}/{key}", notes)
        for key in _JSON_FIELDS:
            _check_json_field(probe, key, f"probes/{number}/{key}", notes)
    for key, value in list(data.items()):
        if key in ("probes", "timings"):
            continue
        found: list[str] = []
        cleaned = _clean_json(value, found)
        if isinstance(cleaned, str) and len(cleaned) > TEXT_CHARS:
            cleaned = _cut(cleaned, TEXT_CHARS, key)
            found.append("oversize text")
        if isinstance(cleaned, dict):
            for inner, item in cleaned.items():
                if isinstance(item, str) and len(item) > TEXT_CHARS:
                    cleaned[inner] = _cut(item, TEXT_CHARS, f"{key}/{inner}")
                    found.append("oversize text")
        if found:
            data[key] = cleaned
            notes.append(f"{key}: {', '.join(f'{kind} replaced' for kind in dict.fromkeys(found))}")
    return notes


def check_targets(data: Any) -> list[str]:
    """Hardware target entries whose label is not a target's name left out, in place (run on every
    file: the label becomes a folder under pins/targets/ and a comment in its constraints.txt);
    what changed. The cell itself stays: its other evidence is not the label's fault."""
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        return []
    notes: list[str] = []
    kept = []
    for number, entry in enumerate(data["targets"]):
        label = entry.get("target") if isinstance(entry, dict) else None
        why = label_problem(label) if isinstance(entry, dict) else ""
        if why:
            shown = terminal(repr(label)[:80], multiline=False)
            notes.append(f"targets/{number}/target {shown}: {why}; that target left out")
        else:
            kept.append(entry)
    if notes:
        if kept:
            data["targets"] = kept
        else:
            del data["targets"]
    return notes
