"""Every ``TORCH_MATRIX_*`` environment variable, declared once, and the one parser of them. Pure.

``VARIABLES`` is the table: name, type, default, meaning and the values it accepts (what
``torch-matrix help env`` prints). ``parse(environ)`` reads a given mapping into ``Settings``;
a bad value is a ``UserError`` whose one line names the variable, the value and what it accepts.
Reading ``os.environ`` itself is the edge's job (``torch_matrix.edges.environ``); the CLI and
the noxfile parse it when they start, so a bad value stops a run before any cell is planned.

Variables the probe suite reads inside a cell's interpreter (``TORCH_MATRIX_VERIFIED_DB``), and
those torch-matrix sets for its own child processes, are declared here too but parsed where they
are read: the probe suite imports nothing of ours (stdlib only, Python 3.8).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch_matrix.vocab.errors import UserError

PREFIX = "TORCH_MATRIX_"

# The names, in table order (``VARIABLES`` says what each means).
SPEC_ENV = "TORCH_MATRIX_SPEC"
RESULTS_ENV = "TORCH_MATRIX_RESULTS"
SHARD_ENV = "TORCH_MATRIX_SHARD"
REDO_ENV = "TORCH_MATRIX_REDO"
GPUS_ENV = "TORCH_MATRIX_GPUS"
GRACE_ENV = "TORCH_MATRIX_PROBE_GRACE"
RERUNS_ENV = "TORCH_MATRIX_PROBE_RERUNS"
BACKOFF_ENV = "TORCH_MATRIX_RETRY_BACKOFF"
FOLLOWUPS_ENV = "TORCH_MATRIX_FOLLOWUPS"
LEGACY_FOLLOWUPS_ENV = "TORCH_MATRIX_COUNTERFACTUALS"
PREFETCH_ENV = "TORCH_MATRIX_PREFETCH"
BUDGET_ENV = "TORCH_MATRIX_PREFETCH_FREE_GB"
DISK_BUDGET_ENV = "TORCH_MATRIX_DISK_BUDGET"
KEEP_VENVS_ENV = "TORCH_MATRIX_KEEP_VENVS"
CACHE_DIR_ENV = "TORCH_MATRIX_CACHE_DIR"
TTL_ENV = "TORCH_MATRIX_INDEX_TTL"
HISTORY_ENV = "TORCH_MATRIX_HISTORY"
NIGHTLY_ENV = "TORCH_MATRIX_NIGHTLY_INDEX"
VERIFIED_DB_ENV = "TORCH_MATRIX_VERIFIED_DB"
LOCK_OWNER_ENV = "TORCH_MATRIX_LOCK_OWNER"
CELL_ENV = "TORCH_MATRIX_CELL"
PYTEST_OUT_ENV = "TORCH_MATRIX_PYTEST_OUT"
PYTEST_ONLY_ENV = "TORCH_MATRIX_PYTEST_ONLY"
PROBE_NOW_ENV = "TORCH_MATRIX_PROBE_NOW"
SAFE_GLOBALS_ENV = "TORCH_MATRIX_SAFE_GLOBALS"
RUN_URL_ENV = "TORCH_MATRIX_RUN_URL"

# Who sets a variable: the user, or torch-matrix for its own children (documented, not parsed).
USER, INTERNAL = "user", "internal"
# Where it is parsed: here, or inside a cell's interpreter by the probe suite.
HERE, IN_CELL = "here", "in the cell"

# Under the project, where no build backend looks: a hidden folder whose name is no identifier.
# setuptools' flat-layout discovery skips names with a dot and ``[._]*``; hatch, flit and poetry
# take the package by the project's name (and git ignores the folder: it holds a ``.gitignore``).
# Until #42 the default was ``results``, which setuptools' automatic discovery took for a second
# top-level package ("Multiple top-level packages discovered in a flat-layout"): every cell that
# installed the project failed. ``report``/``pins`` still read a run left there (``LEGACY_RESULTS``).
DEFAULT_RESULTS = ".torch-matrix/results"
LEGACY_RESULTS = "results"
DEFAULT_PROBE_GRACE_S = 60.0
DEFAULT_RETRY_BACKOFF_S = 3.0
DEFAULT_PROBE_RERUNS = 2
DEFAULT_FOLLOWUPS = 24
DEFAULT_PREFETCH = 2
DEFAULT_PREFETCH_FREE_GB = 10.0
MAX_PREFETCH_FREE_GB = 1e9  # a billion GB: more than any disk, and bytes stay a finite integer
# The declared ranges of the numbers (the error line says them): each far above any real use,
# and far below what a timer (``threading.TIMEOUT_MAX``), ``time.sleep`` or a loop can take.
MAX_PROBE_GRACE_S = 86400.0  # a day
MAX_RETRY_BACKOFF_S = 3600.0  # an hour, times the attempt number
MAX_INDEX_TTL_S = 366 * 86400.0  # a year
MAX_PROBE_RERUNS = 100
MAX_FOLLOWUPS = 100_000
MAX_PREFETCH = 1000
DEFAULT_INDEX_TTL_S = 6 * 3600.0
DEFAULT_NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/cpu"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


class BadValue(ValueError):
    """A value a variable does not accept (the parser turns it into a ``UserError``)."""


def _text(raw: str) -> str:
    return raw


def _path(raw: str) -> str | None:
    return raw or None


def _within(low: float, high: float, number: Callable[[str], Any]) -> Callable[[str], Any]:
    """``number``'s parser, refusing a value outside [low, high] (the variable's declared range)."""

    def parse(raw: str) -> Any:
        value = number(raw)
        if not low <= value <= high:
            raise BadValue(raw)
        return value

    return parse


def _seconds(high: float) -> Callable[[str], float]:
    return _within(0, high, _number)


def _counts(high: int) -> Callable[[str], int]:
    return _within(0, high, _count)


def _number(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise BadValue(raw) from None
    if not math.isfinite(value):
        raise BadValue(raw)
    return value


def _count(raw: str) -> int:
    if not re.fullmatch(r"\+?\d+", raw):
        raise BadValue(raw)
    return int(raw)


_gigabytes = _within(0, MAX_PREFETCH_FREE_GB, _number)


def _size(raw: str) -> int | None:
    from torch_matrix.vocab.sizes import parse_size

    if not raw:
        return None
    try:
        return parse_size(raw)
    except ValueError:
        raise BadValue(raw) from None


def _flag(raw: str) -> bool:
    value = raw.lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise BadValue(raw)


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N), 1 <= K <= N (``torch-matrix plan --shard`` and ``TORCH_MATRIX_SHARD``)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise BadValue(text)
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise BadValue(text)
    return k, n


def _shard(raw: str) -> tuple[int, int] | None:
    return parse_shard(raw) if raw else None


def _devices(raw: str) -> tuple[str, ...]:
    devices = tuple(part.strip() for part in raw.split(","))
    if raw and (any(not d or any(c.isspace() for c in d) for d in devices)):
        raise BadValue(raw)
    return devices if raw else ()


def _url(raw: str) -> str | None:
    if raw and not re.match(r"(https?|file)://\S+$", raw):
        raise BadValue(raw)
    return raw or None


@dataclass(frozen=True)
class Variable:
    """One environment variable: what ``torch-matrix help env`` shows, and how it is parsed."""

    name: str
    type: str  # path, seconds, count, GB, flag, K/N, list, URL, text
    default: str  # as shown; "" when unset means "not set"
    meaning: str
    accepted: str  # what the error line says it accepts
    parse: Callable[[str], Any] = _text
    field: str = ""  # the ``Settings`` attribute it fills ("": not parsed here)
    setter: str = USER
    parsed: str = HERE
    alias_of: str = ""  # an older name, read when the current one is unset
    example: str = ""  # a value it accepts, for the error's hint


VARIABLES: tuple[Variable, ...] = (
    Variable(
        SPEC_ENV,
        "path",
        "./matrix.toml, else [tool.torch-matrix] in ./pyproject.toml, else the built-in default",
        "the spec file",
        "a path to a spec file",
        _path,
        "spec",
        example="matrix.toml",
    ),
    Variable(
        RESULTS_ENV,
        "path",
        "./.torch-matrix/results",
        "the results root: each run writes <root>/<spec name>/",
        "a directory path",
        _path,
        "results",
        example="results",
    ),
    Variable(
        SHARD_ENV,
        "K/N",
        "every cell",
        "run only shard K of N (CI)",
        "K/N with 1 <= K <= N, such as 2/5",
        _shard,
        "shard",
        example="2/5",
    ),
    Variable(
        REDO_ENV,
        "flag",
        "0",
        "rerun cells that already have a complete result",
        "1, true, yes, on, or 0, false, no, off",
        _flag,
        "redo",
        example="1",
    ),
    Variable(
        GPUS_ENV,
        "list",
        "none (cells see every device)",
        "one device per running cell under -j (CUDA_VISIBLE_DEVICES of each cell)",
        "device ids separated by commas, such as 0,1",
        _devices,
        "gpus",
        example="0,1",
    ),
    Variable(
        GRACE_ENV,
        "seconds",
        f"{DEFAULT_PROBE_GRACE_S:g}",
        "seconds the cell watchdog adds to [probes] timeout x probes for start-up",
        f"a number of seconds from 0 to {MAX_PROBE_GRACE_S:.0f} (a day)",
        _seconds(MAX_PROBE_GRACE_S),
        "probe_grace_s",
        example="60",
    ),
    Variable(
        RERUNS_ENV,
        "count",
        str(DEFAULT_PROBE_RERUNS),
        "at most how many more times a failing probe runs, alone, to tell flaky from broken",
        f"a whole number from 0 to {MAX_PROBE_RERUNS} (0: no reruns)",
        _counts(MAX_PROBE_RERUNS),
        "probe_reruns",
        example="2",
    ),
    Variable(
        BACKOFF_ENV,
        "seconds",
        f"{DEFAULT_RETRY_BACKOFF_S:g}",
        "seconds before an install retry, times the attempt number",
        f"a number of seconds from 0 to {MAX_RETRY_BACKOFF_S:.0f} (an hour)",
        _seconds(MAX_RETRY_BACKOFF_S),
        "retry_backoff_s",
        example="3",
    ),
    Variable(
        FOLLOWUPS_ENV,
        "count",
        str(DEFAULT_FOLLOWUPS),
        "the most follow-up cells (counterfactuals, the edges that prove a pin) per run",
        f"a whole number from 0 to {MAX_FOLLOWUPS} (0 switches follow-up cells off)",
        _counts(MAX_FOLLOWUPS),
        "followups",
        example="24",
    ),
    Variable(
        LEGACY_FOLLOWUPS_ENV,
        "count",
        str(DEFAULT_FOLLOWUPS),
        "the older name of TORCH_MATRIX_FOLLOWUPS, read when that is unset",
        f"a whole number from 0 to {MAX_FOLLOWUPS} (0 switches follow-up cells off)",
        _counts(MAX_FOLLOWUPS),
        "followups",
        alias_of=FOLLOWUPS_ENV,
        example="24",
    ),
    Variable(
        PREFETCH_ENV,
        "count",
        str(DEFAULT_PREFETCH),
        "how many cells ahead to fetch into uv's cache while a cell runs its probes",
        f"a whole number of cells from 0 to {MAX_PREFETCH} (0 switches the prefetch off)",
        _counts(MAX_PREFETCH),
        "prefetch",
        example="2",
    ),
    Variable(
        BUDGET_ENV,
        "GB",
        f"{DEFAULT_PREFETCH_FREE_GB:g}",
        "the prefetch's disk budget: the free space it always leaves on uv's cache's filesystem",
        f"a number of GB from 0 to {MAX_PREFETCH_FREE_GB:.0f}",
        _gigabytes,
        "prefetch_free_gb",
        example="10",
    ),
    Variable(
        DISK_BUDGET_ENV,
        "size",
        "the spec's disk_budget, else the free disk less 5 GB (a tenth of it below 50 GB free)",
        "the disk a run may fill: what it adds to uv's cache, and its venvs",
        "a size from 0 to 1 EB, such as 15GB, 500MB, 12GiB or a number of bytes",
        _size,
        "disk_budget",
        example="15GB",
    ),
    Variable(
        KEEP_VENVS_ENV,
        "flag",
        "0",
        "keep each cell's venv after its result is written (else removed, for the disk budget)",
        "1, true, yes, on / 0, false, no, off",
        _flag,
        "keep_venvs",
        example="1",
    ),
    Variable(
        CACHE_DIR_ENV,
        "path",
        "$XDG_CACHE_HOME/torch-matrix, else ~/.cache/torch-matrix",
        "the cache of index listings and wheel metadata",
        "a directory path",
        _path,
        "cache_dir",
        example="~/.cache/torch-matrix",
    ),
    Variable(
        TTL_ENV,
        "seconds",
        f"{DEFAULT_INDEX_TTL_S:g} (6 h)",
        "how long a cached index listing is used before it is fetched again",
        f"a number of seconds from 0 to {MAX_INDEX_TTL_S:.0f} (a year; 0 always refetches)",
        _seconds(MAX_INDEX_TTL_S),
        "index_ttl_s",
        example="3600",
    ),
    Variable(
        HISTORY_ENV,
        "path",
        "<results root>/history.sqlite",
        "the history database (torch-matrix import, history, diff)",
        "a file path",
        _path,
        "history",
        example="results/history.sqlite",
    ),
    Variable(
        NIGHTLY_ENV,
        "URL",
        DEFAULT_NIGHTLY_INDEX,
        "the nightly index `torch-matrix bisect --nightly` reads",
        "an index URL: https://..., http://... or file://...",
        _url,
        "nightly_index",
        example="https://download.pytorch.org/whl/nightly/cpu",
    ),
    Variable(
        VERIFIED_DB_ENV,
        "path",
        "~/.cache/torch-matrix/verified-files.sqlite3",
        "the memo of installed files already hashed and found whole (each is hashed once)",
        'a file path; "" switches the memo off (every file hashed in every cell)',
        parsed=IN_CELL,
    ),
    Variable(
        RUN_URL_ENV,
        "URL",
        "",
        "the CI run `pins --pr-body` links the pull request body to (the nightly sets it)",
        "an http(s) URL",
        _url,
        "run_url",
        example="https://github.com/OWNER/REPO/actions/runs/1",
    ),
    Variable(
        LOCK_OWNER_ENV,
        "text",
        "",
        "the PID of the run holding the results lock, for its -j workers",
        "set by torch-matrix",
        setter=INTERNAL,
    ),
    Variable(
        CELL_ENV,
        "text",
        "",
        "marks a cell's processes, so an interrupt stops them all",
        "set by torch-matrix",
        setter=INTERNAL,
    ),
    Variable(
        PYTEST_OUT_ENV,
        "path",
        "",
        "where a command probe's pytest writes its outcomes",
        "set by torch-matrix",
        setter=INTERNAL,
        parsed=IN_CELL,
    ),
    Variable(
        PROBE_NOW_ENV,
        "path",
        "",
        "where the probe runner names the probe it runs (and a command's pytest its test), "
        "for the cell's heartbeat",
        "set by torch-matrix",
        setter=INTERNAL,
        parsed=IN_CELL,
    ),
    Variable(
        SAFE_GLOBALS_ENV,
        "list",
        "",
        "a fix's proof: the classes a rerun's pytest allows torch.load (dotted paths, commas)",
        "set by torch-matrix",
        setter=INTERNAL,
        parsed=IN_CELL,
    ),
    Variable(
        PYTEST_ONLY_ENV,
        "path",
        "",
        "the ecosystem run's retry: a file of the test node ids a project's pytest reruns",
        "set by torch-matrix",
        setter=INTERNAL,
        parsed=IN_CELL,
    ),
)

BY_NAME: Mapping[str, Variable] = {v.name: v for v in VARIABLES}


@dataclass(frozen=True)
class Settings:
    """The parsed values of the variables a user sets (defaults where unset)."""

    spec: str | None = None
    results: str | None = None
    shard: tuple[int, int] | None = None
    redo: bool = False
    gpus: tuple[str, ...] = ()
    probe_grace_s: float = DEFAULT_PROBE_GRACE_S
    probe_reruns: int = DEFAULT_PROBE_RERUNS
    retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S
    followups: int = DEFAULT_FOLLOWUPS
    prefetch: int = DEFAULT_PREFETCH
    prefetch_free_gb: float = DEFAULT_PREFETCH_FREE_GB
    disk_budget: int | None = None
    keep_venvs: bool = False
    cache_dir: str | None = None
    index_ttl_s: float = DEFAULT_INDEX_TTL_S
    history: str | None = None
    nightly_index: str | None = None
    run_url: str | None = None

    @property
    def results_root(self) -> str:
        """The results root as given (relative to where the run starts), default ``results``."""
        return self.results or DEFAULT_RESULTS

    @property
    def prefetch_free_bytes(self) -> int:
        return int(self.prefetch_free_gb * 1e9)


def bad_value(variable: Variable, raw: str) -> UserError:
    """The one error line for a value ``variable`` does not accept."""
    hint = f"e.g. {variable.name}={variable.example}" if variable.example else ""
    if variable.default:
        hint += (", or " if hint else "") + f"unset it (default: {variable.default})"
    return UserError(
        f"{raw!r} is not accepted: expected {variable.accepted}",
        where=variable.name,
        hint=hint,
    )


def value_of(variable: Variable, environ: Mapping[str, str]) -> Any:
    """One variable's parsed value in ``environ`` (its default's value where it is unset)."""
    raw = environ.get(variable.name, "").strip()
    try:
        return variable.parse(raw)
    except BadValue:
        raise bad_value(variable, raw) from None


def read(environ: Mapping[str, str], name: str) -> Any:
    """One variable's value in ``environ``, parsed as ``parse`` does (its older name where it is
    unset; its default where neither is set)."""
    variable = BY_NAME[name]
    if not variable.field:
        raise KeyError(f"{name} is not parsed here ({variable.parsed}, set by {variable.setter})")
    if environ.get(name, "").strip():
        return value_of(variable, environ)
    for older in VARIABLES:
        if older.alias_of == name and environ.get(older.name, "").strip():
            return value_of(older, environ)
    return getattr(Settings(), variable.field)


def shard_text(environ: Mapping[str, str]) -> str:
    """``TORCH_MATRIX_SHARD`` as ``K/N`` ("" when unset), checked."""
    shard = read(environ, SHARD_ENV)
    return f"{shard[0]}/{shard[1]}" if shard else ""


def given(environ: Mapping[str, str], name: str) -> bool:
    """Whether ``name`` (or its older name) is set, non-empty, in ``environ``: a value given
    there wins over the spec's."""
    names = [name] + [v.name for v in VARIABLES if v.alias_of == name]
    return any(environ.get(n, "").strip() for n in names)


def parse(environ: Mapping[str, str]) -> Settings:
    """Every variable a user sets, parsed from ``environ``; the first bad one raises ``UserError``
    (``TORCH_MATRIX_FOLLOWUPS: '-1' is not accepted: expected a whole number >= 0 ...``)."""
    values: dict[str, Any] = {}
    for variable in VARIABLES:
        if not variable.field or variable.parsed != HERE or variable.setter != USER:
            continue
        if not environ.get(variable.name, "").strip():
            continue  # unset or empty: the default
        if variable.alias_of and environ.get(variable.alias_of, "").strip():
            continue  # the current name wins over the older one
        values[variable.field] = value_of(variable, environ)
    return Settings(**values)


def table() -> list[tuple[str, str, str, str, str]]:
    """(name, type, default, meaning, accepted) per variable, in declaration order."""
    return [(v.name, v.type, v.default, v.meaning, v.accepted) for v in VARIABLES]


def render_table() -> str:
    """``torch-matrix help env``: the variables a user sets, then those torch-matrix sets."""
    lines = ["Environment variables torch-matrix reads (unset or empty: the default).", ""]
    for setter, title in ((USER, "You set"), (INTERNAL, "Set by torch-matrix for its children")):
        lines.append(f"{title}:")
        for v in VARIABLES:
            if v.setter != setter:
                continue
            lines.append(f"  {v.name}  ({v.type})")
            lines.append(f"      {v.meaning}")
            if setter == USER:
                lines.append(f"      default: {v.default}")
                lines.append(f"      accepts: {v.accepted}")
            if v.parsed == IN_CELL:
                lines.append("      read inside the cell by the probe suite")
        lines.append("")
    lines.append(
        "pip's and uv's own variables it honours (PIP_INDEX_URL, UV_CACHE_DIR, ...): "
        "`torch-matrix help spec environment`."
    )
    return "\n".join(lines) + "\n"
