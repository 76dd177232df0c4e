"""Build the generated ecosystem list (issue 44) from PyPI metadata: zero-config entries, one per
candidate that passes every filter, each checked against its own sdist.

    python examples/ecosystem/build_list.py [--cutoff 2025-03-15] [--out projects-generated.toml]

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

Each kept project is written as ``sdist = "name==version"`` alone: the run discovers the rest.
The starter list's 22 projects (``projects.toml``) come first, verbatim with their hand keys
(checked by hand: their trimmed commands fit a 2-core machine), whatever the filters say of them.
The dropped candidates are listed at the end of the file with their reason.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from torch_matrix.ecosystem.discover import EGG_REQUIRES_RE, NoTests, discover, wanted
from torch_matrix.spec.parse import TOML_ERRORS, tomllib

HERE = Path(__file__).resolve().parent
JSON_API = "https://pypi.org/pypi/{name}/json"


@dataclass(frozen=True)
class Verdict:
    name: str
    version: str
    kept: bool
    reason: str  # why dropped, or what discover found


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
        "[defaults]",
        'budget = "10m"',
        "",
        *starter,
    ]
    for v in kept:
        lines += ["[[project]]", f'sdist = "{v.name}=={v.version}"', f"# {v.reason}", ""]
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
    Path(args.out).write_text(render(verdicts, args), encoding="utf-8")
    kept = sum(v.kept for v in verdicts)
    print(f"{kept} of {len(verdicts)} candidates kept -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
