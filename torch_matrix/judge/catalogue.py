"""The catalogue of API changes a user's own tests meet: changed defaults and removed or renamed
APIs of torch and torchvision, each with its code fix and its upstream source.

``torch_matrix.judge.causes`` asks it about every failing test of a command probe (the message,
the exception type, the frames ``torch_matrix.probes.pytest_outcomes`` records) and about the
standard probes' failures. A match is still evidence about the versions (the tests fail with that
release, so the window is proven), but the answer a maintainer merges is the code fix, with the
user's own call site from the traceback; the window is the alternative for code that cannot change.
Each entry has a test on the real output of the release that introduced it
(tests/test_real_messages.py). Pure: functions of text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_matrix.vocab.records import StrEnum


class ChangeKind(StrEnum):
    CHANGED_DEFAULT = "changed-default"  # the plain call breaks; an explicit argument keeps it
    REMOVED_API = "removed-api"  # a module, function or keyword argument is gone or renamed


@dataclass(frozen=True)
class Change:
    """One upstream change: how its failure reads, and the fix."""

    key: str
    kind: ChangeKind
    package: str  # the distribution that changed: torch, torchvision
    since: str  # the first release with the change
    summary: str  # what changed, one clause
    patterns: tuple[str, ...]  # regexes: any one found in the failure's text is the change
    call: str  # regex of the user's call in a frame's code (the call site); "" for imports
    fix: str  # the code fix; ``{site}`` is the call site's code, ``{globals}`` the allowlist
    source: str  # the upstream PR or release note


WEIGHTS_ONLY = Change(
    key="torch.load-weights_only",
    kind=ChangeKind.CHANGED_DEFAULT,
    package="torch",
    since="2.6.0",
    summary="torch.load defaults to weights_only=True",
    patterns=(r"Weights only load failed", r"WeightsUnpickler error"),
    call=r"\btorch\.load\(",
    fix="{site} -> {site_fixed} if the file is trusted, or allow its types: "
    "`torch.serialization.add_safe_globals([{globals}])`",
    source="https://github.com/pytorch/pytorch/pull/137602 (release notes: "
    "https://github.com/pytorch/pytorch/releases/tag/v2.6.0)",
)
TORCH_SIX = Change(
    key="torch._six",
    kind=ChangeKind.REMOVED_API,
    package="torch",
    since="2.0.0",
    summary="torch._six was removed",
    patterns=(r"No module named 'torch\._six'", r"module 'torch' has no attribute '_six'"),
    call=r"torch\._six|from torch import _six",
    fix="replace torch._six: `string_classes` -> `str`, `inf` -> `math.inf` (or `torch.inf`), "
    "`container_abcs` -> `collections.abc`, `int_classes` -> `int`",
    source="https://github.com/pytorch/pytorch/pull/94709",
)
# timm's ``from torch._six import container_abcs`` broke at 1.9, when torch._six lost its Python 2
# shims (``container_abcs``, ``int_classes``); the module itself went in 2.0. Code that imports one
# of them fails on every release from 1.9: the fix is framed on 1.9, wherever torch._six is gone.
TORCH_SIX_SHIMS = Change(
    key="torch._six-shims",
    kind=ChangeKind.REMOVED_API,
    package="torch",
    since="1.9.0",
    summary="torch._six.container_abcs and int_classes were removed; torch._six itself went in 2.0.0",
    patterns=(
        r"cannot import name '(?:container_abcs|int_classes)' from 'torch\._six'",
        r"module 'torch\._six' has no attribute '(?:container_abcs|int_classes)'",
    ),
    call=r"container_abcs|int_classes",
    fix="`from torch._six import container_abcs` -> `import collections.abc as container_abcs`, "
    "`int_classes` -> `int`",
    source="https://github.com/pytorch/pytorch/releases/tag/v1.9.0",
)
FUNCTIONAL_TENSOR = Change(
    key="torchvision.transforms.functional_tensor",
    kind=ChangeKind.REMOVED_API,
    package="torchvision",
    since="0.17.0",
    summary="torchvision.transforms.functional_tensor was made private (deprecated in 0.15)",
    patterns=(r"No module named 'torchvision\.transforms\.functional_tensor'",),
    call=r"functional_tensor",
    fix="import from `torchvision.transforms.functional` (e.g. `rgb_to_grayscale`) or "
    "`torchvision.transforms.v2.functional` instead of `torchvision.transforms.functional_tensor`",
    source="https://github.com/pytorch/vision/pull/7269",
)
SCHEDULER_VERBOSE = Change(
    key="lr_scheduler-verbose",
    kind=ChangeKind.REMOVED_API,
    package="torch",
    since="2.7.0",
    summary="the LR schedulers' verbose argument was removed (deprecated in 2.2)",
    patterns=(
        r"(?:LR|Scheduler|LR\w*|Plateau|Annealing\w*)\.__init__\(\) got an unexpected keyword "
        r"argument 'verbose'",
        r"__init__\(\) got an unexpected keyword argument 'verbose'.*lr_scheduler",
    ),
    call=r"verbose\s*=",
    fix="drop `verbose=` from the scheduler's call ({site}); log `scheduler.get_last_lr()` instead",
    source="https://github.com/pytorch/pytorch/pull/147301 (deprecated by "
    "https://github.com/pytorch/pytorch/pull/111302)",
)
CUDA_AMP = Change(
    key="torch.cuda.amp",
    kind=ChangeKind.REMOVED_API,
    package="torch",
    since="2.4.0",
    summary="torch.cuda.amp.autocast/GradScaler are deprecated for torch.amp",
    patterns=(
        r"torch\.cuda\.amp\.(?:autocast|GradScaler)\(args\.\.\.\)` is deprecated",
        r"module 'torch\.cuda' has no attribute 'amp'",
        r"No module named 'torch\.cuda\.amp'",
    ),
    call=r"torch\.cuda\.amp\.",
    fix="`torch.cuda.amp.autocast(...)` -> `torch.amp.autocast('cuda', ...)`, "
    "`torch.cuda.amp.GradScaler(...)` -> `torch.amp.GradScaler('cuda', ...)`",
    source="https://github.com/pytorch/pytorch/pull/126062",
)
CATALOGUE: tuple[Change, ...] = (
    WEIGHTS_ONLY,
    TORCH_SIX_SHIMS,
    TORCH_SIX,
    FUNCTIONAL_TENSOR,
    SCHEDULER_VERBOSE,
    CUDA_AMP,
)


@dataclass(frozen=True)
class CallSite:
    """Where the user's code made the call: ``src/pkg/io.py:42: torch.load(path)``."""

    path: str
    line: int
    code: str

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.code}" if self.code else f"{self.path}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "code": self.code}


@dataclass(frozen=True)
class Finding:
    """A failure the catalogue explains: the change, the fix with the user's call site."""

    change: Change
    fix: str
    site: CallSite | None = None
    tests: tuple[str, ...] = ()  # node ids of the failing tests it explains

    def advice(self) -> str:
        where = f" at {self.site.text()}" if self.site else ""
        return (
            f"{self.change.package} {self.change.since}: {self.change.summary}{where}: fix the "
            f"code: {self.fix} (upstream: {self.change.source})"
        )


_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")
_PROBE_PARTS = ("/site-packages/", "/dist-packages/", "<frozen ", "/lib/python")


def user_frames(frames: Iterable[Mapping[str, Any]]) -> list[CallSite]:
    """The frames in the user's own code (not site-packages, not the standard library)."""
    sites = []
    for frame in frames:
        path = str(frame.get("path", ""))
        if not path or any(part in path for part in _PROBE_PARTS):
            continue
        sites.append(CallSite(path, int(frame.get("line", 0) or 0), str(frame.get("code", ""))))
    return sites


def find_change(text: str) -> Change | None:
    """The catalogue's change a failure's text shows, or None."""
    for change in CATALOGUE:
        if any(re.search(pattern, text, re.DOTALL) for pattern in change.patterns):
            return change
    return None


def diagnose(
    text: str, frames: Sequence[Mapping[str, Any]] = (), tests: Sequence[str] = ()
) -> Finding | None:
    """The finding for one failure (its message and text, its frames), or None."""
    change = find_change(text)
    if change is None:
        return None
    change = _framed(change, frames)
    site = _site(change, frames)
    return Finding(change, _fix(change, text, site), site, tuple(tests))


def _framed(change: Change, frames: Sequence[Mapping[str, Any]]) -> Change:
    """``change`` framed on the release that broke the user's call: ``No module named
    'torch._six'`` raised by ``from torch._six import container_abcs`` is the 1.9 break."""
    if change is TORCH_SIX and any(
        re.search(TORCH_SIX_SHIMS.call, str(s.code)) for s in user_frames(frames)
    ):
        return TORCH_SIX_SHIMS
    return change


def _site(change: Change, frames: Sequence[Mapping[str, Any]]) -> CallSite | None:
    """The user's frame that made the change's call (else the innermost user frame)."""
    sites = user_frames(frames)
    site = (
        next((s for s in reversed(sites) if re.search(change.call, s.code)), None)
        if (change.call)
        else None
    )
    if site is None and sites:
        site = sites[-1]
    return site


def _fix(change: Change, text: str, site: CallSite | None) -> str:
    if change is WEIGHTS_ONLY:
        names = list(dict.fromkeys(_GLOBAL.findall(text))) or ["<the class named in the error>"]
        code = site.code if site and "torch.load(" in site.code else "torch.load(path)"
        return change.fix.format(
            site=f"`{code}`",
            site_fixed=f"`{_with_weights_only_false(code)}`",
            globals=", ".join(names),
        )
    return change.fix.format(site=f"`{site.code}`" if site and site.code else "the call")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def load_fix_groups(failures: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The failures torch.load's weights_only default explains, grouped by cause: the user's
    call site, with its tests and the classes their errors refused, by site."""
    groups: dict[str, dict[str, Any]] = {}
    for failure in failures:
        text = str(failure.get("text") or failure.get("message") or "")
        if find_change(text) is not WEIGHTS_ONLY:
            continue
        site = _site(WEIGHTS_ONLY, failure.get("frames") or ())
        key = f"{site.path}:{site.line}" if site else "?"
        group = groups.setdefault(
            key, {"site": key, "code": site.code if site else "", "tests": [], "globals": []}
        )
        for value, into in (
            (failure.get("nodeid"), "tests"),
            *((g, "globals") for g in _GLOBAL.findall(text)),
        ):
            if value and value not in group[into]:
                group[into].append(value)
    return [groups[key] for key in sorted(groups)]


def load_fix_sites(
    failures: Sequence[Mapping[str, Any]], proofs: Mapping[str, Any] | None = None
) -> list[Mapping[str, Any]]:
    """The call sites of ``weights_only_fix``: the proofs' groups where a rerun made them, else
    the failures' own."""
    proven = proofs.get("load_fixes") if isinstance(proofs, Mapping) else None
    if isinstance(proven, list) and proven:
        return [group for group in proven if isinstance(group, Mapping)]
    return list(load_fix_groups(failures))


def weights_only_fix(
    failures: Sequence[Mapping[str, Any]], proofs: Mapping[str, Any] | None = None
) -> str:
    """The fix for each call site torch.load's weights_only default broke, with every class its
    loads refuse and whether a rerun of its tests with the fix applied proved it
    (``torch_matrix.probes.fixproof``: the probe's ``fix_proofs``); a fix not proven says so."""
    groups = load_fix_sites(failures, proofs)
    parts = []
    for group in groups:
        code = str(group.get("code") or "")
        code = code if "torch.load(" in code else "torch.load(path)"
        tests = list(group.get("tests") or ())
        names = list(group.get("allowed") or group.get("globals") or ()) or [
            "<the class named in the error>"
        ]
        text = (
            (
                f"at {group.get('site', '?')} ({_plural(len(tests), 'test')}): "
                if len(groups) > 1
                else ""
            )
            + f"`{code}` -> "
            f"`{_with_weights_only_false(code)}` if the file is trusted, or allow its types: "
            f"`torch.serialization.add_safe_globals([{', '.join(names)}])`"
        )
        if "allowed" not in group:
            text += (
                " (not proven: no rerun with it applied; torch names one refused class at a "
                "time, so the list may be incomplete)"
            )
        elif group.get("failed"):
            failed = list(group["failed"])
            text += (
                f" (NOT proven: with it, {len(failed)} of {len(tests)} tests still fail on a "
                f"rerun: {failed[0]})"
            )
        else:
            found = len(names) - len(group.get("globals") or ())
            text += (
                f" (proven: with it, the {_plural(len(tests), 'failing test')} pass on a rerun"
                + (f"; {_plural(found, 'more class')} found by rerunning)" if found > 0 else ")")
            )
        parts.append(text)
    old = proofs.get("old_default") if isinstance(proofs, Mapping) else None
    if isinstance(old, Mapping) and old.get("ran"):
        tests, failed = list(old.get("tests") or ()), list(old.get("failed") or ())
        verdict = (
            f"proven: the {_plural(len(tests), 'failing test')} pass with it on a rerun"
            if not failed
            else f"NOT proven: {len(failed)} of {len(tests)} tests still fail with it: {failed[0]}"
        )
        parts.append(
            f"or the old default for every load (`{old.get('env')}`, or `weights_only=False` at "
            f"each site): {verdict}"
        )
    return "; ".join(parts)


NOT_PROVEN = (
    " (not proven: no rerun with it applied; torch names one refused class at a "
    "time, so the list may be incomplete)"
)


def with_fix_proofs(
    cause: Cause, failures: Sequence[Mapping[str, Any]], proofs: Mapping[str, Any] | None
) -> Cause:
    """``cause`` (a ``weights_only`` one, not proven) with its fix rewritten from the reruns that
    proved it (``fixproof``'s shape: ``load_fixes``, ``old_default``), kept to the call sites and
    tests of ``failures`` (one group of a report); unchanged where no rerun covers them."""
    if not cause.fix.endswith(NOT_PROVEN) or not isinstance(proofs, Mapping):
        return cause
    tests = {str(f.get("nodeid")) for f in failures}
    sites = [
        g
        for g in proofs.get("load_fixes") or ()
        if isinstance(g, Mapping) and tests & set(g.get("tests") or ())
    ]
    if not sites:
        return cause
    old = proofs.get("old_default")
    mine: dict[str, Any] = {"load_fixes": sites}
    if isinstance(old, Mapping):
        mine["old_default"] = {
            **old,
            **{
                k: [t for t in old.get(k) or () if t in tests]
                for k in ("tests", "passed", "failed")
            },
        }
    where = cause.fix.split(": ", 1)[0] + ": " if cause.fix.startswith("at ") else ""
    return dataclasses.replace(cause, fix=where * (len(sites) == 1) + weights_only_fix([], mine))


def _with_weights_only_false(code: str) -> str:
    """``torch.load(path)`` -> ``torch.load(path, weights_only=False)`` (the call's last paren)."""
    start = code.find("torch.load(")
    depth = 0
    for index in range(start + len("torch.load"), len(code)):
        if code[index] == "(":
            depth += 1
        elif code[index] == ")":
            depth -= 1
            if depth == 0:
                inside = code[start + len("torch.load(") : index].strip()
                joiner = ", " if inside else ""
                return f"{code[:index]}{joiner}weights_only=False{code[index:]}"
    return code


# ---------------------------------------------------------------------------- one message's cause


class CauseKind(StrEnum):
    """What a failure message says changed (the kinds ``judge.causes.VersionKind`` also uses)."""

    CHANGED_DEFAULT = "changed-default"  # a change of the catalogue (``ChangeKind``)
    REMOVED_API = "removed-api"
    IMPORT_BREAK = "import-break"  # a torch/torchvision module the catalogue does not know is gone
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Cause:
    """The cause of one failure message in a line each: what changed upstream, what the code
    changes, and where upstream said so (a change of the catalogue; "" for the generic kinds)."""

    kind: CauseKind
    what: str
    fix: str
    source: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"kind": str(self.kind), "what": self.what, "fix": self.fix}
        if self.source:
            out["source"] = self.source
        return out


# A module or name of torch/torchvision that is gone, where no change of the catalogue matched.
_MISSING_MODULE = re.compile(r"No module named '((?:torch|torchvision)(?:\.[A-Za-z0-9_]+)+)'")
_CANNOT_IMPORT = re.compile(
    r"cannot import name '([A-Za-z0-9_]+)' from '((?:torch|torchvision)[A-Za-z0-9_.]*)'"
)
_NO_ATTRIBUTE = re.compile(
    r"module '((?:torch|torchvision)[A-Za-z0-9_.]*)' has no attribute '([A-Za-z0-9_]+)'"
)


def _gone_name(message: str) -> str:
    """``torch.x.name`` from "cannot import name 'name' from 'torch.x'" or "module 'torch.x' has
    no attribute 'name'"; "" when the message says neither."""
    imported = _CANNOT_IMPORT.search(message)
    if imported:
        return f"{imported.group(2)}.{imported.group(1)}"
    attribute = _NO_ATTRIBUTE.search(message)
    return f"{attribute.group(1)}.{attribute.group(2)}" if attribute else ""


def probe_finding(evidence: Mapping[str, Any], text: str) -> Finding | None:
    """The finding for a failing probe: each failing test and collection error of a command probe
    (its whole text, its frames; the first change found, with every test it explains), else the
    probe's own ``text``. ``torch.load``'s weights_only findings are grouped by call site, every
    refused class named, each fix proven by a rerun (or said not to be): one finding for all."""
    failures = [*(evidence.get("collection_errors") or ()), *(evidence.get("failed") or ())]
    found: Finding | None = None
    tests: list[str] = []
    for failure in failures:
        if not isinstance(failure, dict):
            continue
        message = str(failure.get("text") or failure.get("message") or "")
        finding = diagnose(message, failure.get("frames") or ())
        if finding is None or (found is not None and finding.change != found.change):
            continue
        found = found or finding
        tests.append(str(failure.get("nodeid", "")))
    if found is None:
        return diagnose(text)
    if found.change is WEIGHTS_ONLY:
        mine = [f for f in failures if isinstance(f, dict)]
        proofs = evidence.get("fix_proofs")
        one_site = len(load_fix_sites(mine, proofs)) == 1
        return dataclasses.replace(
            found,
            fix=weights_only_fix(mine, proofs),
            site=found.site if one_site else None,
            tests=tuple(t for t in tests if t),
        )
    return dataclasses.replace(found, tests=tuple(t for t in tests if t))


def cause_key(message: str, text: str = "", frames: Sequence[Mapping[str, Any]] = ()) -> str:
    """What besides the message tells two failures' causes apart: for a change of the catalogue,
    the user's call site and the classes the error names (two torch.load call sites, each refusing
    its own class, read alike in a message cut before the class); "" otherwise."""
    change = find_change(f"{message}\n{text}")
    if change is None:
        return ""
    site = _site(change, frames)
    names = sorted(set(_GLOBAL.findall(f"{message}\n{text}")))
    where = f" @{site.path}:{site.line}" if site else ""
    return where + (f" [{', '.join(names)}]" if names else "")


def cause_of(message: str, context: str = "", frames: Sequence[Mapping[str, Any]] = ()) -> Cause:
    """The cause of one failure message (tests that fail alike share it): a change of the
    catalogue, with its fix and source; else a torch/torchvision module or name the message shows
    gone; else unknown. ``context`` (the failure's whole text, the side's log tail) may name what a
    cut message does not (the global a checkpoint holds); ``frames`` (the failure's, in the
    project's own code) give the fix its call site."""
    change = find_change(message)
    if change is not None:
        change = _framed(change, frames)
        text = message if _GLOBAL.search(message) else f"{message}\n{context}"
        site = _site(change, frames)
        fix = _fix(change, text, site)
        if change is WEIGHTS_ONLY:
            fix += NOT_PROVEN
        return Cause(
            CauseKind(str(change.kind)),
            f"{change.summary} ({change.package} {change.since})",
            (f"at {site.path}:{site.line}: " if site else "") + fix,
            change.source,
        )
    missing = _MISSING_MODULE.search(message)
    if missing:
        return Cause(
            CauseKind.IMPORT_BREAK,
            f"the module {missing.group(1)} is gone",
            f"stop importing {missing.group(1)} (a private module): use its public replacement",
        )
    gone = _gone_name(message)
    if gone:
        return Cause(
            CauseKind.REMOVED_API,
            f"{gone} is gone",
            f"replace {gone} (see the release notes), or pin below the release that removed it",
        )
    return Cause(CauseKind.UNKNOWN, "not in the catalogue", "read the failing tests' output")
