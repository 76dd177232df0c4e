"""Build the generated ecosystem list (issue 44) from PyPI metadata: zero-config entries, one per
candidate that passes every filter, each checked against its own sdist.

    python examples/ecosystem/build_list.py [--cutoff 2025-03-15] [--out projects-generated.toml]
    python examples/ecosystem/build_list.py --check [--baseline 2.5.1] [--check-dir DIR]

Candidates come from ``candidates.txt`` (the starter list and names reasoned about: never a
registry's name listing). For each, the filters, in order (the first that fails drops it, and the
output says which):

1. **a release**: the pinned version, else the newest final release with an sdist uploaded before
   ``--cutoff`` (the torch 2.5 -> 2.6 window by default), read from PyPI's JSON API;
2. **an sdist** of at most ``--max-mb`` MB (``.tar.gz`` or ``.zip``), downloaded once;
3. **torch in its requirements**: ``Requires-Dist: torch`` in the sdist's PKG-INFO (or its
   ``*.egg-info/requires.txt``, or pyproject's ``[project] dependencies``), not only in an extra;
4. **both sides allowed**: that requirement's specifier admits the baseline and the candidate
   torch, and ``Requires-Python`` admits ``--python``;
5. **tests in the sdist**: ``torch-matrix ecosystem discover``'s own rules find a test location
   (torch_matrix.ecosystem.discover.py), and the folder holds at least one ``test_*.py``.

6. **its tests collect on the baseline** (only with ``--check``; the passes above need no torch):
   the entry installed on the baseline torch (``--baseline``) exactly as a run's baseline side
   installs it (the product's own ``ecosystem.runner.collect_baseline``: the sdist from the index,
   discovery, the side's venv and overrides, the bubblewrap sandbox unless ``--no-sandbox``), then
   its discovered test command with ``--collect-only``. Kept where pytest collects at least one
   test with no error; else written with ``skip = "a list fault (baseline check): <why>"`` (the
   install's error, the missing module, the configuration pytest refuses, ``no test collected``),
   which the run lists as skipped with that reason. Each entry's verdict is kept in
   ``--check-dir`` (``projects/<name>/check.json``, beside its install and pytest log): a stopped
   check resumes where it stopped, a rebuild reuses them (``--recheck`` redoes them).

Each kept project is written as ``sdist = "name==version"`` alone: the run discovers the rest.
The starter list's 22 projects (``projects.toml``) come first, verbatim with their hand keys
(checked by hand: their trimmed commands fit a 2-core machine), whatever the filters say of them.
The dropped candidates are listed at the end of the file with their reason.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from email.parser import Parser
from itertools import takewhile
from pathlib import Path
from typing import Any, Mapping

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from torch_matrix.ecosystem.discover import EGG_REQUIRES_RE, NoTests, discover, wanted
from torch_matrix.spec.parse import TOML_ERRORS, tomllib

HERE = Path(__file__).resolve().parent
JSON_API = "https://pypi.org/pypi/{name}/json"
DEFAULTS = 'budget = "10m"'  # the generated file's [defaults] (the check parses each entry so)


@dataclass(frozen=True)
class Collected:
    """Stage 6's verdict on one entry: kept (pytest collected ``tests`` tests on the baseline, no
    error), or not, with the one-line reason the list's ``skip`` gives."""

    kept: bool
    tests: int = 0
    reason: str = ""

    def line(self) -> str:
        if not self.kept:
            return self.reason
        return f"{self.tests} test{'' if self.tests == 1 else 's'} collected"


@dataclass(frozen=True)
class Verdict:
    name: str
    version: str
    kept: bool
    reason: str  # why dropped, or what discover found
    check: Collected | None = None  # stage 6, where it ran


def pick_release(
    meta: dict[str, Any], cutoff: str, pinned: str = ""
) -> tuple[str, dict[str, Any]] | None:
    """The release to test and its sdist file: ``pinned``, else the newest final release with an
    sdist uploaded before ``cutoff`` (an ISO date)."""
    releases = meta.get("releases") or {}
    best: tuple[Version, str, dict[str, Any]] | None = None
    for text, files in releases.items():
        if pinned and text != pinned:
            continue
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if (version.is_prerelease or version.is_devrelease) and not pinned:
            continue
        sdists = [
            f
            for f in files or ()
            if f.get("packagetype") == "sdist"
            and not f.get("yanked")
            and (pinned or str(f.get("upload_time", "")) < cutoff)
        ]
        if sdists and (best is None or version > best[0]):
            best = (version, text, sdists[0])
    return (best[1], best[2]) if best else None


def read_archive(data: bytes, filename: str) -> tuple[list[str], dict[str, str]]:
    """An sdist's files (relative to its top folder) and the text of those ``wanted`` names, plus
    any egg-info requires.txt."""
    names: list[str]
    if filename.endswith(".zip"):
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = [n for n in archive.namelist() if not n.endswith("/")]

        def read(member: str) -> bytes:
            return archive.read(member)
    else:
        tar = tarfile.open(fileobj=io.BytesIO(data))
        names = [m.name for m in tar.getmembers() if m.isfile()]

        def read(member: str) -> bytes:
            handle = tar.extractfile(member)
            return handle.read() if handle else b""

    tops = {n.split("/")[0] for n in names}
    top = tops.pop() + "/" if len(tops) == 1 else ""
    paths = [n[len(top) :] for n in names if n.startswith(top)]
    chosen = set(wanted(paths)) | {
        p for p in paths if re.fullmatch(r"[^/]+\.egg-info/requires\.txt", p)
    }
    texts = {p: read(top + p).decode("utf-8", "replace") for p in chosen}
    return paths, texts


def torch_requirement(texts: dict[str, str]) -> tuple[Requirement | None, str]:
    """The project's own (not extra-only) torch requirement, and where it was read."""
    candidates: list[tuple[str, str]] = []
    metadata = Parser().parsestr(texts.get("PKG-INFO", ""), headersonly=True)
    candidates += [(str(r), "PKG-INFO") for r in metadata.get_all("Requires-Dist") or []]
    for path, text in texts.items():
        if EGG_REQUIRES_RE.match(path):
            candidates += [(line, path) for line in _base_lines(text)]
    try:
        project = tomllib.loads(texts.get("pyproject.toml", "")).get("project", {})
    except TOML_ERRORS:
        project = {}
    for item in project.get("dependencies", []) if isinstance(project, dict) else []:
        candidates.append((str(item), "pyproject.toml"))
    for text, where in candidates:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name.lower() == "torch" and "extra" not in str(requirement.marker or ""):
            return requirement, where
    return None, ""


def _base_lines(text: str) -> list[str]:
    """requires.txt's lines before its first [extra] section."""
    lines = []
    for line in text.splitlines():
        if line.startswith("["):
            break
        if line.strip():
            lines.append(line.strip())
    return lines


def judge(
    name: str,
    version: str,
    paths: list[str],
    texts: dict[str, str],
    sides: tuple[str, str],
    python: str,
) -> Verdict:
    """Filters 3-5 on one sdist's files."""
    requirement, where = torch_requirement(texts)
    if requirement is None:
        return Verdict(name, version, False, "no torch requirement (Requires-Dist) in the sdist")
    for side in sides:
        if not requirement.specifier.contains(side, prereleases=True):
            return Verdict(
                name, version, False, f"{where} requires {requirement}: not torch {side}"
            )
    metadata = Parser().parsestr(texts.get("PKG-INFO", ""), headersonly=True)
    wants_python = metadata.get("Requires-Python") or ""
    try:
        if wants_python and not SpecifierSet(wants_python).contains(python):
            return Verdict(name, version, False, f"Requires-Python {wants_python}: not {python}")
    except InvalidSpecifier:
        pass
    try:
        found = discover(name, paths, texts)
    except NoTests as error:
        return Verdict(name, version, False, str(error))
    return Verdict(name, version, True, f"{found.command} ({found.reasons[0]})")


def fetch(url: str, timeout: float = 120) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


def check(line: str, args: argparse.Namespace) -> Verdict:
    name, _, pinned = line.partition("==")
    name = name.strip()
    try:
        api = JSON_API.format(name=name)
        meta = json.loads(fetch(api, 60))
    except (OSError, ValueError) as error:
        return Verdict(name, pinned, False, f"PyPI's JSON API: {error}")
    picked = pick_release(meta, args.cutoff, pinned.strip())
    if picked is None:
        return Verdict(name, pinned, False, f"no sdist uploaded before {args.cutoff}")
    version, item = picked
    if int(item.get("size") or 0) > args.max_mb * 1e6:
        return Verdict(name, version, False, f"sdist of {int(item['size']) / 1e6:.0f} MB")
    try:
        data = fetch(urllib.parse.urljoin(api, item["url"]))
        paths, texts = read_archive(data, item["filename"])
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as error:
        return Verdict(name, version, False, f"sdist unreadable: {error}")
    canonical = str(meta.get("info", {}).get("name") or name)
    return judge(canonical, version, paths, texts, (args.baseline, args.candidate), args.python)


# -- stage 6: the baseline check ----------------------------------------------------------------

SKIP_PREFIX = "a list fault (baseline check): "
CHECK_FILE = "check.json"
REASON_CHARS = 240
# pytest's summary: "2 tests collected", "1/2 tests collected (1 deselected)", "collected 2 items"
# (verbose), indented under a plugin's own header (pytest-pretty's "Results (2.0s):"), or in
# a rule of "=" (without -q: torch-kmeans 0.2.0's addopts)
_COUNT_RE = re.compile(r"(?m)^[\s=]*(?:(\d+)/\d+|(\d+)) tests? collected|^collected (\d+) items?")
_NONE_COLLECTED_RE = re.compile(r"(?m)^[\s=]*no tests (?:collected|ran)")
_EXCEPTION_RE = re.compile(r"^\s*(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception): .*)$")
_SITE_PACKAGES_RE = re.compile(r"/(?:[^\s/'\"`]+/)+(site-packages/)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FILE_URL_RE = re.compile(r"file://[^\s'\"`]+")
_ABSOLUTE_RE = re.compile(r"(?<![\w.:/])/(?:[^\s/'\"`():]+/)+")


def _plain(text: str, root: str) -> str:
    """``text`` without this machine's paths: the tree's own relative, site-packages' from there,
    a local file URL as 'the sdist', any other absolute folder dropped (the list is committed)."""
    if root:
        text = text.replace(root.rstrip("/") + "/", "").replace(root.rstrip("/"), ".")
    text = _FILE_URL_RE.sub("the sdist", text)
    text = _SITE_PACKAGES_RE.sub(r"\1", text)
    return _ABSOLUTE_RE.sub("", text)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


_PER_FILE_RE = re.compile(r"(?m)^\S+\.py: (\d+)$")  # -qq (a -q in addopts too): no summary line


def tests_collected(output: str) -> int | None:
    """The number of tests pytest's ``--collect-only`` summary says it selected (under -qq, the
    sum of its per-file counts); None when the output has none (pytest never got that far)."""
    found = _COUNT_RE.findall(output)
    if found:
        selected, alone, items = found[-1]
        return int(selected or alone or items)
    if _NONE_COLLECTED_RE.search(output):
        return 0
    per_file = _PER_FILE_RE.findall(output)
    return sum(map(int, per_file)) if per_file else None


def _install_reason(detail: str, output: str) -> str:
    """Why the install failed: the build's own exception (a file the sdist lacks, a pyproject
    setuptools cannot read) or uv's resolution's first 'Because ...', else uv's first error."""
    lines = output.splitlines()
    for number, line in enumerate(lines):
        text = line.strip(" ╰─▶").removeprefix("cause: ")  # uv's two styles
        if text.startswith("Because "):  # with the lines uv wrapped it onto
            rest = takewhile(lambda x: x.startswith("      ") and x.strip(), lines[number + 1 :])
            return "install failed: " + " ".join([text, *map(str.strip, rest)])
    raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines) if m]
    if raised:
        return f"install failed: {raised[-1]}"
    return detail


def _collect_reason(code: int | None, output: str, messages: Mapping[str, str]) -> str:
    """Why pytest collected nothing it could run: a test file's collection error (its module
    missing, ...), a conftest that does not load, a configuration or option pytest refuses."""
    if messages:
        where, message = next(iter(messages.items()))
        more = f" (and {len(messages) - 1} more)" if len(messages) > 1 else ""
        return f"collection error in {where}: {message}{more}"
    lines = output.splitlines()
    failed = [line.split()[1] for line in lines if re.match(r"ERROR \S", line)]
    if failed:  # the short summary's files, where pytest's records were not read
        raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines) if m]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"collection error in {failed[0]}: {(raised or ['?'])[0]}{more}"
    for number, line in enumerate(lines):
        if line.startswith("ImportError while loading conftest"):
            raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines[number:]) if m]
            conftest = line.split("'")[1] if "'" in line else "conftest.py"
            return f"conftest {conftest} does not load: " + (raised or ["ImportError"])[0]
        if line.startswith("ERROR: usage:"):
            refused = [x for x in lines[number:] if ": error: " in x]
            return "pytest refuses the command: " + (
                refused[0].split(": error: ", 1)[1] if refused else line
            )
        if line.startswith("ERROR: "):  # its configuration: the first sentence says what
            return f"pytest refuses it: {line[len('ERROR: ') :].split('. ')[0]}"
        if "while loading plugin" in line:  # one the tests' needs installed: this pytest refuses it
            plugin = re.search(r"site-packages/([\w.-]+)/", "\n".join(lines[number:]))
            raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines[number:]) if m]
            name = f"the pytest plugin {plugin.group(1)}" if plugin else "a pytest plugin"
            return f"{name} does not load: " + (raised or [line])[-1]
        if line.startswith("INTERNALERROR>"):
            raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines[number:]) if m]
            return "pytest internal error: " + (raised or [line])[-1]
    if code == 5 or tests_collected(output) == 0:
        return "no test collected"
    raised = [m.group(1) for m in map(_EXCEPTION_RE.match, lines) if m]
    last = raised[-1] if raised else next((x for x in reversed(lines) if x.strip()), "")
    return f"pytest exit {code}: {last}" if last else f"pytest exit {code}"


def collect_verdict(
    status: str,
    code: int | None,
    output: str,
    messages: Mapping[str, str],
    detail: str,
    root: str = "",
) -> Collected:
    """Stage 6's decision, pure: one baseline side that ran pytest with ``--collect-only``
    (``status`` and ``detail`` as its ``SideRun`` says, ``code`` pytest's exit, ``messages``
    the collection errors pytest recorded, by file) -> kept with its test count, or the reason.
    ``root``: the tree pytest ran in, made relative in the reason."""
    if status == "timeout":
        return Collected(False, reason=_one_line(f"collection {_plain(detail, root)}"))
    if status == "broken" and code is None:  # no pytest: the source or the install
        why = _install_reason(detail, output) if detail.startswith("install") else detail
        return Collected(False, reason=_one_line(_plain(why, root)))
    output = _ANSI_RE.sub("", output)  # a project's addopts may color it (--color=yes)
    count = tests_collected(output)
    if code == 0 and not messages and count:
        return Collected(True, tests=count)
    plain = {_plain(k, root): _plain(v, root) for k, v in messages.items()}
    return Collected(False, reason=_one_line(_collect_reason(code, _plain(output, root), plain)))


def check_dir(args: argparse.Namespace) -> Path:
    return Path(args.check_dir or f"ecosystem/list-check-{args.baseline}")


def _verdict_of(side: Any, tree: str) -> Collected:
    """Stage 6's verdict on a ``SideRun`` that collected (or failed to install)."""
    return collect_verdict(
        str(side.status), side.exit_code, side.output_tail, side.messages, side.detail, tree
    )


def _cached(path: Path, sdist: str, baseline: str) -> Collected | None:
    """The verdict on the evidence ``path`` holds (the side's result), judged again by today's
    rules; None where it holds none for this entry on this baseline."""
    from torch_matrix.ecosystem.records import SideRun

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if (data.get("sdist"), data.get("baseline")) != (sdist, baseline):
            return None
        return _verdict_of(SideRun.from_json(data["side"]), str(data.get("tree") or ""))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def check_entries(verdicts: list[Verdict], args: argparse.Namespace) -> list[Verdict]:
    """Stage 6 over the kept entries, one after another (each a baseline install): each verdict
    with its ``check``. An entry whose verdict ``check_dir`` already holds is not checked again
    (``--recheck`` does), so a stopped check resumes where it stopped."""
    from torch_matrix.ecosystem.projects import parse_projects, parse_side
    from torch_matrix.ecosystem.runner import EcosystemRun, collect_baseline
    from torch_matrix.edges import sandbox
    from torch_matrix.edges.fileio import atomic_write
    from torch_matrix.spec.model import IndexConfig
    from torch_matrix.world.index import open_index

    if not args.no_sandbox and not sandbox.detect().on:
        raise SystemExit(
            f"build_list.py --check: no sandbox for the projects' code: {sandbox.detect().why_none}"
            "\nhint: install bubblewrap, or check unconfined with --no-sandbox"
        )
    config = IndexConfig(default=args.index or os.environ.get("UV_DEFAULT_INDEX", ""))
    index = open_index(config, prereleases=True)
    run = EcosystemRun(
        projects=[],
        baseline=parse_side(args.baseline, "baseline"),
        candidate=parse_side(args.candidate, "candidate"),
        out=check_dir(args),
        index=config,
        python=args.check_python,
        confine=not args.no_sandbox,
    )
    todo = [v for v in verdicts if v.kept]
    checked: dict[str, Collected] = {}
    for number, verdict in enumerate(todo, 1):
        sdist = f"{verdict.name}=={verdict.version}"
        entry = f'[defaults]\n{DEFAULTS}\n[[project]]\nsdist = "{sdist}"\n'
        (project,) = parse_projects(entry, "build_list.py")
        record = run.out / "projects" / project.name / CHECK_FILE  # the evidence, kept
        found = None if args.recheck else _cached(record, sdist, args.baseline)
        began = time.monotonic()
        if found is None:
            done = collect_baseline(run, project, index, args.check_budget)
            found = _verdict_of(done.side, done.tree)
            record.parent.mkdir(parents=True, exist_ok=True)
            fields = {"sdist": sdist, "baseline": args.baseline, "command": done.project.command}
            evidence = {"tree": done.tree, "side": done.side.to_json()}
            atomic_write(record, json.dumps({**fields, **asdict(found), **evidence}, indent=1))
        checked[sdist] = found
        print(
            f"[{number}/{len(todo)}] {sdist}: {'kept' if found.kept else 'list fault'}: "
            f"{found.line()} ({time.monotonic() - began:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    shutil.rmtree(run.out / "work", ignore_errors=True)
    return [replace(v, check=checked[f"{v.name}=={v.version}"]) if v.kept else v for v in verdicts]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def starter_entries(path: Path) -> tuple[list[str], set[str]]:
    """The starter list's projects as TOML lines, each with its [defaults] merged in."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    defaults = data.get("defaults", {})
    lines: list[str] = []
    names: set[str] = set()
    for table in data.get("project", []):
        merged = {**defaults, **table}
        if "requires" in table:
            merged["requires"] = list(defaults.get("requires", [])) + list(table["requires"])
        names.add(_key(str(table.get("sdist", table["name"])).partition("==")[0]))
        first = [k for k in ("name", "sdist", "git", "ref", "path") if k in merged]
        order = first + [k for k in merged if k not in first]
        lines += ["[[project]]", *(f"{k} = {_toml_value(merged[k])}" for k in order), ""]
    return lines, names


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _check_header(kept: list[Verdict], args: argparse.Namespace) -> list[str]:
    checked = [v.check for v in kept if v.check is not None]
    if not checked:
        return [
            "# Not checked on a torch (build_list.py --check): an entry may not install or collect."
        ]
    passed = sum(c.kept for c in checked)
    return [
        f"# Baseline check (--check, torch {args.baseline}): {passed} of {len(checked)} collect "
        f"their tests; {len(checked) - passed} skipped as list faults, each with its reason."
    ]


def render(verdicts: list[Verdict], args: argparse.Namespace) -> str:
    starter, starter_names = starter_entries(Path(args.starter))
    kept = [v for v in verdicts if v.kept and _key(v.name) not in starter_names]
    dropped = [v for v in verdicts if not v.kept and _key(v.name) not in starter_names]
    starter_filtered = [v for v in verdicts if _key(v.name) in starter_names]
    lines = [
        "# Generated by examples/ecosystem/build_list.py: do not edit by hand (rerun it).",
        f"# {len(starter) and len(starter_names)} starter projects (projects.toml, with their hand "
        f"keys), then {len(kept)} of {len(verdicts) - len(starter_filtered)} further candidates "
        f"kept: torch in Requires-Dist admitting {args.baseline} and {args.candidate}, Python "
        f"{args.python}, tests in the sdist, releases before {args.cutoff}.",
        "# The kept entries are zero-config: the run discovers their tests, needs and command",
        "# (`torch-matrix ecosystem discover NAME==VERSION` shows what and why).",
        "",
        *_check_header(kept, args),
        "",
        "[defaults]",
        DEFAULTS,
        "",
        *starter,
    ]
    for v in kept:
        lines += ["[[project]]", f'sdist = "{v.name}=={v.version}"']
        if v.check is not None and not v.check.kept:
            lines.append(f"skip = {_toml_value(SKIP_PREFIX + v.check.reason)}")
        lines.append(f"# {v.reason}")
        if v.check is not None and v.check.kept:
            lines.append(f"# baseline check (torch {args.baseline}): {v.check.line()}")
        lines.append("")
    lines.append("# The starter projects, as the filters see them (kept above by hand either way):")
    lines += [
        f"#   {v.name}=={v.version}: {'passes' if v.kept else v.reason}" for v in starter_filtered
    ]
    lines.append("# Dropped:")
    lines += [f"#   {v.name}{'==' + v.version if v.version else ''}: {v.reason}" for v in dropped]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default=str(HERE / "candidates.txt"))
    parser.add_argument("--out", default=str(HERE / "projects-generated.toml"))
    parser.add_argument("--starter", default=str(HERE / "projects.toml"))
    parser.add_argument("--cutoff", default="2025-03-15", help="newest upload date (ISO)")
    parser.add_argument("--baseline", default="2.5.1")
    parser.add_argument("--candidate", default="2.6.0")
    parser.add_argument("--python", default="3.11")
    parser.add_argument("--max-mb", type=float, default=40.0)
    parser.add_argument("--jobs", type=int, default=8)
    stage6 = parser.add_argument_group("stage 6, the baseline check")
    stage6.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="install each kept entry on --baseline and collect its tests (default: no)",
    )
    stage6.add_argument(
        "--check-dir",
        default="",
        help="its verdicts and logs (default: ecosystem/list-check-BASELINE)",
    )
    stage6.add_argument("--recheck", action="store_true", help="check again what it holds")
    stage6.add_argument(
        "--index", default="", help="the run's index (default: $UV_DEFAULT_INDEX or PyPI)"
    )
    stage6.add_argument("--check-python", default=sys.executable, help="the venvs' interpreter")
    stage6.add_argument(
        "--check-budget", type=float, default=300.0, help="seconds for one collection"
    )
    stage6.add_argument("--no-sandbox", action="store_true", help="check unconfined")
    args = parser.parse_args(argv)
    seen: set[str] = set()
    lines: list[str] = []
    for raw in Path(args.candidates).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        key = re.sub(r"[-_.]+", "-", line.partition("==")[0]).lower()
        if line and key not in seen:
            seen.add(key)
            lines.append(line)
    with ThreadPoolExecutor(args.jobs) as pool:
        verdicts = list(pool.map(lambda line: check(line, args), lines))
    if args.check:
        _, starter = starter_entries(Path(args.starter))
        verdicts = [v for v in verdicts if _key(v.name) in starter] + check_entries(
            [v for v in verdicts if _key(v.name) not in starter], args
        )
    Path(args.out).write_text(render(verdicts, args), encoding="utf-8")
    kept = sum(v.kept and (v.check is None or v.check.kept) for v in verdicts)
    print(f"{kept} of {len(verdicts)} candidates kept -> {args.out}", file=sys.stderr)
    checked = [v.check for v in verdicts if v.check is not None]
    if checked:
        passed = sum(c.kept for c in checked)
        print(f"baseline check: {passed} of {len(checked)} entries collect", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
