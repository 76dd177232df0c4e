"""The probe authoring API. Stdlib only; must import on Python 3.8 with no torch installed.

A probe is a function decorated with ``@probe``. It receives a ``Context`` and:

- returns a dict of evidence (or None)  -> ``pass``
- raises ``Fail(message, observed=..., expected=..., repro=...)``  -> ``fail``
- raises ``Unsupported(message)``  (the API does not exist in this version)  -> ``unsupported``
- raises ``Skip(message)``  (e.g. ``Skip(NO_CUDA)``)  -> ``skip``
- raises anything else  -> ``error``, with the exception and its last frames

The runner adds ``timeout`` (the probe ran past its limit) and ``crash`` (the process
running it died: segfault, abort, ``os._exit``), with the signal and the last output.

Example, a file ``my_probes/test_fft.py`` in a downstream repository::

    from torch_matrix.probes.api import probe, Fail

    @probe("fft_roundtrip", doc="irfft(rfft(x)) gives x back")
    def fft_roundtrip(ctx):
        import torch
        x = torch.arange(8.0)
        y = torch.fft.irfft(torch.fft.rfft(x), n=8)
        if not torch.allclose(x, y):
            raise Fail("roundtrip differs", observed=y.tolist(), expected=x.tolist(),
                       repro="import torch; x=torch.arange(8.); print(torch.fft.irfft(torch.fft.rfft(x), n=8))")
        return {"max_abs_err": float((x - y).abs().max())}
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Optional

NO_CUDA = "no CUDA device"

# Isolation levels. "shared" probes run in a forked child of one interpreter that has
# already imported torch (and torchvision): a crash or poisoned global state stays in
# the child, and the ~7 s import is paid once. "pristine" probes get a fresh
# interpreter that has imported nothing (e.g. they must observe `import torch` itself
# or set process-wide state before it).
SHARED = "shared"
PRISTINE = "pristine"

DEFAULT_TIMEOUT = (
    120.0  # seconds, for probes that declare none (the runner's --timeout overrides it)
)

# A probe's name, like a command probe's (the spec's ``probes.commands``): it is a file name, a column
# of the report, part of an issue title; never a newline, markup or a shell word.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
NAME_RULE = "a letter or '_', then letters, digits, '_', '.' or '-'"


class InvalidProbeName(ValueError):
    """``@probe`` refused a name: the probe's module does not load (``python -m torch_matrix.probes --list`` exits 2)."""


def check_name(name: object) -> str:
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise InvalidProbeName("probe name %r refused: expected %s" % (name, NAME_RULE))
    return name


class ProbeOutcome(Exception):
    status = ""

    def __init__(
        self,
        message: str,
        observed: Any = None,
        expected: Any = None,
        repro: str = "",
        evidence: Optional[Dict[str, Any]] = None,
        traceback: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.observed = observed
        self.expected = expected
        self.repro = repro
        self.evidence = evidence or {}
        # The traceback that explains the failure when it is not this exception's own
        # (e.g. the runner's failed ``import torchvision``); default: the Fail's frames.
        self.traceback = traceback


class Fail(ProbeOutcome):
    """The behaviour training code relies on is broken in this cell."""

    status = "fail"


class Unsupported(ProbeOutcome):
    """The API does not exist in this version: not a failure by itself."""

    status = "unsupported"


class Skip(ProbeOutcome):
    """The probe cannot run here (no CUDA device, optional package absent)."""

    status = "skip"


class Context:
    """What a probe knows about the cell it runs in.

    ``expected`` maps package names to the versions the cell asked for (exact
    versions, e.g. {"torch": "2.5.1", "torchvision": "0.20.1"}); ``variant`` is
    the wheel variant ("default", "cpu", "cu124", ...). ``workdir`` is a fresh
    temporary directory for the probe's files.
    """

    def __init__(
        self,
        expected: Optional[Dict[str, str]] = None,
        variant: str = "default",
        workdir: str = "",
        timeout: float = 0.0,
    ) -> None:
        self.expected = dict(expected or {})
        self.variant = variant
        self.workdir = workdir or os.getcwd()
        self.timeout = timeout
        self.notes = {}  # type: Dict[str, Any]
        # Filled by the runner: what happened when the runner's interpreter imported
        # torch/torchvision ({"torchvision": {"ok": False, "error": "...", "traceback": "..."}}),
        # and what it observed meanwhile (e.g. "import_torch": CUDA calls during `import torch`).
        self.imports = {}  # type: Dict[str, Dict[str, Any]]
        self.observations = {}  # type: Dict[str, Any]
        self.isolation = ""
        self.note_sink = None  # type: Optional[Callable[[str, Any], None]]

    def note(self, key: str, value: Any) -> None:
        """Record evidence even when the probe later raises (or crashes: the runner keeps a copy)."""
        self.notes[key] = value
        if self.note_sink is not None:
            try:
                self.note_sink(key, value)
            except Exception:
                pass

    def import_error(self, name: str) -> Optional[Dict[str, Any]]:
        """The runner's failed import of ``name`` (message, traceback), or None if it imported or was not tried."""
        info = self.imports.get(name)
        if info and not info.get("ok", True):
            return info
        return None

    def cuda_available(self) -> bool:
        """True only when torch can use a CUDA device (never initialises CUDA if torch can't)."""
        try:
            import torch
        except ImportError:
            return False
        try:
            return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
        except Exception:
            return False

    def require_cuda(self) -> None:
        if not self.cuda_available():
            raise Skip(NO_CUDA)


class ProbeSpec:
    """A registered probe: its function and how it must be run."""

    def __init__(
        self,
        name: str,
        func: Callable[[Context], Any],
        doc: str,
        isolation: str = SHARED,
        timeout: Optional[float] = 120.0,
        module: str = "",
    ) -> None:
        self.name = name
        self.func = func
        self.doc = doc
        self.isolation = isolation
        # A probe that declares no timeout gets the runner's default (``--timeout``).
        self.timeout_declared = timeout is not None
        self.timeout = float(timeout) if timeout is not None else DEFAULT_TIMEOUT
        self.module = module


_REGISTRY = []  # type: List[ProbeSpec]


def probe(
    name: str, doc: str = "", isolation: str = SHARED, timeout: Optional[float] = None
) -> Callable[[Callable[[Context], Any]], Callable[[Context], Any]]:
    """Register a probe. ``doc`` is its one-line description (defaults to the docstring)."""
    check_name(name)
    if isolation not in (SHARED, PRISTINE):
        raise ValueError("isolation must be %r or %r, not %r" % (SHARED, PRISTINE, isolation))

    def register(func: Callable[[Context], Any]) -> Callable[[Context], Any]:
        text = doc or (func.__doc__ or "").strip().splitlines()[0:1]
        if isinstance(text, list):
            text = text[0] if text else ""
        _REGISTRY.append(ProbeSpec(name, func, text, isolation, timeout, func.__module__))
        return func

    return register


def registered() -> List[ProbeSpec]:
    return list(_REGISTRY)
