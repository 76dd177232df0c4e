"""A cell result file's schema (pure checks of data): valid, why not, and already canonical.

``is_valid_cell_result`` takes a fast plain-Python yes (``edges.fastcheck``, compiled from the same
schema file) before jsonschema, which has the final word and writes the message
(``describe_schema_error``). ``is_canonical_json``: a valid dict that is exactly what
``CellResult.to_json()`` writes, so a merge can copy it as is. Reading and writing the files:
``world.results``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch_matrix.edges.fastcheck import Unsupported, compile_checker
from torch_matrix.vocab.records import (
    INSTALLED,
    SCHEMA_ID,
    SCHEMA_VERSION,
    Cell,
    CellResult,
    InstallOutcome,
    ProbeResult,
)

if TYPE_CHECKING:
    import jsonschema

SCHEMA_PATH = (
    Path(__file__).resolve().parent.parent / "vocab" / "schema" / "cell-result.schema.json"
)


@lru_cache(maxsize=1)
def cell_result_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    """Compiled once: building a validator per file costs more than validating it.

    Imported here, not at the top: only a file the fast check does not accept needs it."""
    import jsonschema

    schema = cell_result_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# A fast yes for the common case: jsonschema costs ~1 ms per result file, which makes a
# 2,000-cell report take seconds. torch_matrix.edges.fastcheck compiles the same schema file into plain
# code that only ever says "surely valid"; anything else goes to jsonschema, which has the
# final word and writes the message.


@lru_cache(maxsize=1)
def fast_check() -> Callable[[Any], bool] | None:
    """None when the schema uses a keyword the fast path does not know (jsonschema alone then)."""
    try:
        return compile_checker(cell_result_schema())
    except Unsupported:
        return None


def is_valid_cell_result(data: Any) -> bool:
    fast = fast_check()
    if fast is not None and fast(data):
        return True
    return _validator().is_valid(data)


@lru_cache(maxsize=1)
def _canonical_layout() -> tuple[
    tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]
]:
    """Key orders as ``to_json()`` writes them, taken from the records so they never drift:
    top level, cell, install, the probe keys always written, then the optional ones in order."""
    full_probe = ProbeResult(
        name="p",
        status="pass",
        evidence={"k": 1},
        observed=1,
        expected=1,
        traceback="t",
        repro="r",
        output_tail="o",
    )
    sample = CellResult(
        cell=Cell(id="c", axes={"python": "3", "torch": "2"}, requirements=()),
        fingerprint="f",
        install=InstallOutcome(status=INSTALLED),
        probes=(full_probe,),
    )
    data = sample.to_json()
    always = tuple(ProbeResult(name="p", status="pass").to_json())
    optional = tuple(key for key in data["probes"][0] if key not in always)
    return tuple(data), tuple(data["cell"]), tuple(data["install"]), always, optional


_KEPT_WHEN_FALSY = ("observed", "expected")  # ProbeResult.to_json drops these only when None


@lru_cache(maxsize=256)
def _probe_optional_keys(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """The optional keys of a probe whose keys are ``keys``, or None when to_json never writes that order."""
    _, _, _, always, optional = _canonical_layout()
    rest = keys[len(always) :]
    if keys[: len(always)] != always or rest != tuple(key for key in optional if key in rest):
        return None
    return rest


def _canonical_probe(probe: Any) -> bool:
    if type(probe) is not dict:
        return False
    extra = _probe_optional_keys(tuple(probe))
    if extra is None:
        return False
    for key in extra:  # to_json leaves out empty values (None observed/expected)
        value = probe[key]
        if value is None or (not value and key not in _KEPT_WHEN_FALSY):
            return False
    duration = probe.get("duration_s")
    return type(duration) is float and _kept_by_round(duration, 4)


@lru_cache(
    maxsize=65_536
)  # round(x, n) goes through text (0.5 us); a run's durations and timings repeat
def _kept_by_round(value: float, digits: int) -> bool:
    """``round(value, digits) == value``: what to_json's rounding leaves unchanged."""
    return round(value, digits) == value


def is_canonical_json(data: Any) -> bool:
    """True only when ``data`` (a schema-valid cell result) is exactly ``CellResult.from_json(data).to_json()``,
    key order included, so it can be written as is. False is always safe (the caller converts)."""
    top, cell_keys, install_keys, _, _ = _canonical_layout()
    if type(data) is not dict or type(data.get("schema_version")) is not int:
        return False  # (jsonschema's enum also admits 1.0)
    keys = tuple(data)
    if keys[-1:] == ("verdict",):  # to_json writes it last, and only when set (judge.stored)
        if not data["verdict"]:
            return False
        keys = keys[:-1]
    if keys[-1:] == ("replaces",):  # to_json writes it last, and only when set
        if not data["replaces"]:
            return False
        keys = keys[:-1]
    if keys not in (top, top + ("targets",)):
        return False
    if data["schema_version"] != SCHEMA_VERSION:
        return False  # an older file: to_json() writes the current version
    cell, install, probes, timings = data["cell"], data["install"], data["probes"], data["timings"]
    if type(cell) is not dict or tuple(cell) != cell_keys:
        return False
    if (
        type(install) is not dict
        or tuple(install) != install_keys
        or type(install.get("attempts")) is not int
    ):
        return False
    if type(timings) is not dict or type(probes) is not list:
        return False
    for value in timings.values():
        if type(value) is not float or not _kept_by_round(value, 3):
            return False
    for probe in probes:
        if not _canonical_probe(probe):
            return False
    targets = data.get("targets")
    if targets is not None and not (
        type(targets) is list and targets and all(type(t) is dict for t in targets)
    ):
        return False
    return True


def describe_schema_error(data: Any) -> str | None:
    """None when ``data`` is a valid cell result of our version, else why not (one line)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        return "not a torch-matrix cell result"
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return f"schema_version {version} is newer than this tool understands ({SCHEMA_VERSION})"
    fast = fast_check()
    if fast is not None and fast(data):
        return None
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "top level"
    message = " ".join(error.message.split())
    if len(message) > 160:
        message = message[:157] + "..."
    return f"invalid cell result at {where}: {message}"


# ---------------------------------------------------------------------------- a cell file as written

# How ``cell_file_text`` lays out a cell file: ``json.dumps(indent=2)`` of the record, its stored
# verdict last, and the verdict's ``text`` last in it: the digest of every byte before that key.
_TEXT_KEY = ',\n    "text": "'
_TEXT_END = '"\n  }\n}\n'


def text_digest(covered: str) -> str:
    """``sha256:<hex>`` of a cell file's text before its verdict's ``text``."""
    return "sha256:" + hashlib.sha256(covered.encode("utf-8", "surrogatepass")).hexdigest()


def cell_file_text(data: dict[str, Any], digest: bool = True) -> str:
    """A cell file's text for ``data`` (``CellResult.to_json()``): indented JSON; with ``digest``,
    a stored verdict (written last) gets ``text``, the digest of the file's bytes before it (the
    writer gives it only to a valid record whose verdict is its own: ``world.results``)."""
    verdict = data.get("verdict")
    if not verdict or not digest:
        return json.dumps(data, indent=2) + "\n"
    mine = {key: value for key, value in verdict.items() if key != "text"}
    body = json.dumps({**data, "verdict": mine}, indent=2)
    covered = body[: -len("\n  }\n}")]  # up to the end of the verdict's last value
    return covered + _TEXT_KEY + text_digest(covered) + _TEXT_END


def written_with_verdict(text: str, data: Any) -> bool:
    """Whether ``text`` (a cell file, parsed as ``data``) is byte for byte what
    ``cell_file_text`` wrote: then the record is valid and unchanged since it was judged, and so
    is its verdict, and a loader needs neither the schema check of the record nor its digest
    (``judge.stored.holds``).

    Sound against an edit anywhere: every byte before the verdict's ``text`` must hash to it, and
    the file must end right after it (no key can follow it to override what the digest covered).
    False is always safe: the loader then checks it all."""
    if type(data) is not dict or data.get("schema_version") != SCHEMA_VERSION:
        return False
    verdict = data.get("verdict")
    digest = verdict.get("text") if type(verdict) is dict else None
    if type(digest) is not str:
        return False
    ending = _TEXT_KEY + digest + _TEXT_END
    return text.endswith(ending) and text_digest(text[: -len(ending)]) == digest


@lru_cache(maxsize=1)
def _smallest_record() -> dict[str, Any]:
    """A valid cell result with nothing in it: the frame ``stored_verdict_problem`` checks a
    verdict in."""
    return CellResult(
        cell=Cell(id="c", axes={"python": "3", "torch": "2"}, requirements=()),
        fingerprint="f",
        install=InstallOutcome(status=INSTALLED),
    ).to_json()


@lru_cache(maxsize=1)
def _verdict_check() -> Callable[[Any], bool] | None:
    """The fast check of the schema's ``verdict`` alone (None: jsonschema alone)."""
    schema = cell_result_schema()
    try:
        return compile_checker({**schema["properties"]["verdict"], "$defs": schema["$defs"]})
    except Unsupported:
        return None


def stored_verdict_problem(data: dict[str, Any]) -> str | None:
    """``describe_schema_error`` of ``data``'s stored verdict alone (the rest written as is)."""
    check = _verdict_check()
    if check is not None and check(data.get("verdict")):
        return None
    return describe_schema_error({**_smallest_record(), "verdict": data.get("verdict")})
