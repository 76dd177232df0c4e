"""uv's output read (pure text): why an install failed, said cause first, and what each step took.

``classify_install_failure``: *the resolver said no* (``unsatisfiable``, uv's own words kept) or
*the machine had trouble* (``error``: network, disk, killed; never a finding); ``cause_summary``
puts uv's ``error:`` / ``Caused by:`` lines and the machine's own reason (``No space left on
device``) first; ``missing_wheel_message`` says which Pythons a release has wheels for where uv
speaks of platform tags; ``uv_step_seconds`` reads its summary lines. Running uv:
``world.environment``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import Version

from torch_matrix.vocab.records import (
    INSTALL_ERROR,
    UNSATISFIABLE,
    Cell,
)

MESSAGE_LIMIT = 4000


# uv's words for "this cannot be installed as asked" (checked after the infra patterns).
_UNSATISFIABLE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"No solution found when resolving",
        r"no matching distribution",
        r"not available for",
        r"requires-python",
        r"does not satisfy Python",
        r"have no wheels with a matching",
        r"has no wheels with a matching",
        r"no version of [\w.-]+",
        r"not found in the package registry",
        r"requirements are unsatisfiable",
        r"(?:is|are) incompatible",
        r"Distribution not found",
        r"no matching (?:wheel|version)",
    )
]


# Infrastructure trouble: retry, then give up as ``error``. Checked first, because a
# network failure can surface inside a resolver error ("...and there was an error").
_ERROR_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"Request failed after",
        r"Failed to fetch",
        r"error sending request",
        r"tcp connect error",
        r"Connection (?:refused|reset|closed|aborted)",
        r"dns error|failed to lookup address|Name or service not known|Temporary failure in name",
        r"timed? ?out",
        r"No space left on device|os error 28|Disk quota exceeded",
        r"\b5\d\d (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)",
        r"HTTP status server error",
        r"Too many open files",
        r"Failed to download",
        r"Broken pipe",
        r"unexpected end of file|incomplete message|IncompleteMessage",
        r"Killed",
    )
]


_NOISE = re.compile(r"^(Using Python .* environment at:|Resolved \d+ packages?|Prepared|Audited)")


@dataclass(frozen=True)
class Classification:
    status: str  # UNSATISFIABLE or INSTALL_ERROR
    message: str
    # False: the same install fails the same way again (a build backend's own error): no retry.
    retry: bool = True


def trim_output(output: str, keep_summary: bool = False) -> str:
    lines = [
        line.rstrip()
        for line in output.splitlines()
        if line.strip() and (keep_summary or not _NOISE.match(line))
    ]
    text = "\n".join(lines)
    return text if len(text) <= MESSAGE_LIMIT else "..." + text[-MESSAGE_LIMIT:]


# uv's own account of a failure: ``error: ...`` then ``  Caused by: ...`` lines (older uv and our
# messages: ``cause: ...``); the lines before them are its progress (``Building toyproj @ ...``,
# ``Downloading nvidia-cusolver (191.6MiB)``), which read as if they were the problem.
_UV_CAUSE = re.compile(
    r"^\s*(error|caused by|cause)\s*:\s*(\S.*?)\s*$", re.IGNORECASE | re.MULTILINE
)


# Reasons the machine gives, said first wherever they appear in the output.
_MACHINE_REASONS = (
    (re.compile(r"No space left on device|os error 28", re.IGNORECASE), "No space left on device"),
    (re.compile(r"Disk quota exceeded|os error 122", re.IGNORECASE), "Disk quota exceeded"),
    (re.compile(r"Too many open files", re.IGNORECASE), "Too many open files"),
)


# uv's words for a build backend that failed (a project's setup.py, a sdist that does not build),
# and the blocks in which it quotes the backend's own output.
_BUILD_FAILED = re.compile(
    r"The build backend returned an error|Failed to build `|Build backend failed", re.IGNORECASE
)
_BACKEND_BLOCK = re.compile(r"^\s*\[(?:stderr|stdout)\]\s*$")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): \S.*$")
_BACKEND_ERROR_LINE = re.compile(r"^(?:error|ERROR|fatal error): \S.*$")


def build_error(output: str) -> str:
    """The build's own error, as the backend said it (``RuntimeError: cannot find libfoo.so``,
    setuptools' ``error: Multiple top-level packages discovered ...``), when uv says a build
    backend failed; "" otherwise. The last exception line of the quoted output, else its last
    ``error:`` line."""
    if not output or not _BUILD_FAILED.search(output):
        return ""
    quoted: list[str] = []
    inside = False
    for line in output.splitlines():
        if _BACKEND_BLOCK.match(line):
            inside = True
            continue
        if inside:
            if line.strip() and not line.startswith((" ", "\t")):
                inside = False  # uv's own lines again (a hint, the next error)
                continue
            quoted.append(line.strip())
    for pattern in (_EXCEPTION_LINE, _BACKEND_ERROR_LINE):
        found = [line for line in quoted if pattern.match(line)]
        if found:
            return found[-1][:300]
    return ""


def cause_summary(output: str) -> str:
    """One line that says why an install failed, the cause first: uv's ``error:`` and its
    ``Caused by:`` lines joined (``error: Failed to install torch; cause: ... (os error 28)``), led by
    the machine's own reason when there is one (``No space left on device: ...``); "" if none."""
    found = [(kind.lower(), text) for kind, text in _UV_CAUSE.findall(output or "")]
    parts = [("error: " if kind == "error" else "cause: ") + text for kind, text in found if text][
        :4
    ]
    summary = "; ".join(dict.fromkeys(parts))
    built = build_error(output)
    if built:  # the build's own words first: uv's chain only says that a backend failed
        summary = f"the build failed: {built}" + (f" ({summary})" if summary else "")
    for pattern, reason in _MACHINE_REASONS:
        if pattern.search(output or ""):
            return f"{reason}: {summary}" if summary else reason
    return summary


def _cause_first(output: str, message: str) -> str:
    summary = cause_summary(output)
    if not summary or message.startswith(summary):
        return message
    return f"{summary}\n{message}"


def classify_install_failure(returncode: int, output: str) -> Classification:
    """Decide whether a failed install is a fact about the cell or trouble with the machine."""
    message = trim_output(output)
    if returncode < 0 or returncode in (137, 143):
        return Classification(
            INSTALL_ERROR,
            _cause_first(output, f"installer killed (exit {returncode}): {message}".strip()),
        )
    if any(p.search(output) for p in _ERROR_PATTERNS):
        return Classification(INSTALL_ERROR, _cause_first(output, message))
    if build_error(output):  # deterministic: the project's (or a sdist's) build fails as written
        return Classification(INSTALL_ERROR, _cause_first(output, message), retry=False)
    if any(p.search(output) for p in _UNSATISFIABLE_PATTERNS):
        return Classification(UNSATISFIABLE, message)
    return Classification(
        INSTALL_ERROR,
        _cause_first(output, message) or f"installer exited with {returncode} and no output",
    )


# uv's words when a release has wheels, none of them for this interpreter: it names whichever
# tag it checked first (often the platform's, "manylinux_2_36_x86_64"), which misleads when the
# wheel missing is the Python's (no cp310 wheel). Said here as the planner says it.
_NO_MATCHING_WHEEL = re.compile(
    r"\b([A-Za-z0-9][\w.-]*)==([\w.+!-]+?) has no wheels with a matching "
    r"(?:platform|Python ABI|Python implementation) tag"
)


_ABI_HINT = re.compile(
    r"only found wheels for\s+`([^`]+)`\s+\(v([^)\s]+)\)\s+with\s+the\s+following\s+Python\s+"
    r"(?:ABI|implementation)\s+tags?:((?:[\s,]*`[^`]+`)+)"
)


def missing_wheel_message(
    cell: Cell, output: str, served_of: Callable[[str, str], frozenset[str] | None]
) -> str:
    """ "no torch 2.1.2 wheel for Python 3.10 on the index (wheels for: 3.8, 3.9, 3.11)" when uv
    refused a release of the cell's for want of a wheel this Python can use ("" otherwise).
    ``served_of(package, version)``: the Pythons the index's wheels of it serve (None: unknown)."""
    match = _NO_MATCHING_WHEEL.search(output)
    if match is None or not cell.python:
        return ""
    package, version = match.group(1), match.group(2)
    served: frozenset[str] | None = None
    for hint in _ABI_HINT.finditer(output):
        if hint.group(1).lower() == package.lower() and hint.group(2) == version:
            tags = re.findall(r"`cp(\d)(\d+)", hint.group(3))
            served = frozenset(f"{major}.{minor}" for major, minor in tags)
            break
    if served is None:
        try:
            served = served_of(package, version)
        except Exception:  # noqa: BLE001 - the index is a help here, never a new failure
            served = None
    if served is not None and cell.python in served:
        return ""  # the Python is served: the platform really is what is missing
    listing = ", ".join(sorted(served, key=Version)) if served else ""
    return f"no {package} {version} wheel for Python {cell.python} on the index" + (
        f" (wheels for: {listing})" if listing else ""
    )


_UV_STEP = re.compile(
    r"^(Resolved|Prepared|Installed|Uninstalled|Audited) \d+ packages? in "
    r"([\d.]+)(ms|s)\b",
    re.MULTILINE,
)


_UV_STEP_NAMES = {
    "Resolved": "resolve",
    "Prepared": "download",
    "Installed": "link",
    "Uninstalled": "uninstall",
    "Audited": "audit",
}


def uv_step_seconds(output: str) -> dict[str, float]:
    """uv's own step times from its summary lines (``Resolved 13 packages in 512ms``)."""
    steps: dict[str, float] = {}
    for verb, number, unit in _UV_STEP.findall(output or ""):
        seconds = float(number) / (1000.0 if unit == "ms" else 1.0)
        name = _UV_STEP_NAMES[verb]
        steps[name] = steps.get(name, 0.0) + seconds
    return steps
