"""An ecosystem project's source on disk (issue 34): a PyPI sdist at its pinned version (found through
the index, as the installer would), a git URL at its ref, or a local path, unpacked into one
directory that both sides copy. Each failure is a ``SourceError`` with one line saying why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tarfile
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from torch_matrix.ecosystem.discover import Discovery, NoTests, applied, discover, wanted
from torch_matrix.edges import proc
from torch_matrix.ecosystem.projects import Project, SourceKind
from torch_matrix.vocab.errors import UserError
from torch_matrix.world.listings import DistFile
from torch_matrix.world.index import IndexUnavailable, PackageIndex, http_fetch

IGNORED = shutil.ignore_patterns(".git", ".venv", ".nox", "__pycache__", "*.pyc", ".tox")
GIT_TIMEOUT_S = 600.0


class SourceError(Exception):
    """The project's source could not be had; the message says why, in one line."""


def fetch(project: Project, dest: Path, index: PackageIndex | None) -> Path:
    """The project's source tree under ``dest`` (created; must not exist). Returns the tree's root:
    the directory holding its pyproject.toml / setup.py (an sdist's single top folder)."""
    source = project.source
    dest.mkdir(parents=True)
    if source.kind == SourceKind.PATH:
        if not Path(source.location).is_dir():
            raise SourceError(f"{source.location} is not a directory")
        tree = dest / "tree"
        shutil.copytree(source.location, tree, ignore=IGNORED, symlinks=True)
        return tree
    if source.kind == SourceKind.GIT:
        return _git(source.location, source.ref, dest / "tree")
    return _sdist(source.location, dest, index)


MAX_READ_BYTES = 1 << 20  # a configuration or test file read for discovery, at most
SKIPPED_DIRS = {".git", ".venv", ".nox", ".tox", "__pycache__", "node_modules"}


def read_tree(root: Path) -> tuple[list[str], dict[str, str]]:
    """A source tree's files (relative, with ``/``) and the text of those ``discover`` reads."""
    paths: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        base = Path(folder).relative_to(root).as_posix()
        paths += [name if base == "." else f"{base}/{name}" for name in sorted(files)]
    texts: dict[str, str] = {}
    for path in wanted(paths):
        try:
            with open(root / path, "rb") as handle:
                texts[path] = handle.read(MAX_READ_BYTES).decode("utf-8", "replace")
        except OSError:
            continue  # unreadable reads as absent, as a damaged file does
    return paths, texts


def discover_tree(name: str, root: Path) -> Discovery:
    """What the tree implies about running its tests; raises ``NoTests``."""
    paths, texts = read_tree(root)
    return discover(name, paths, texts)


def with_discovery(project: Project, root: Path) -> tuple[Project, Discovery | None]:
    """A zero-config project completed from its tree (the project as it was for any other);
    raises ``SourceError`` where the tree has no tests."""
    if not project.discover:
        return project, None
    try:
        found = discover_tree(project.name, root)
    except NoTests as error:
        raise SourceError(str(error)) from None
    return applied(project, found), found


def discover_source(what: str, index: PackageIndex | None) -> Discovery:
    """``torch-matrix ecosystem discover``: ``name==version`` (its sdist, fetched from the index
    into a scratch folder, removed after) or a local source tree. Raises ``UserError``."""
    local = Path(what).expanduser()
    if local.is_dir():
        return _discover_or_refuse(local.resolve().name, local, what)
    try:
        requirement = Requirement(what)
    except InvalidRequirement:
        requirement = None
    pinned = [s for s in requirement.specifier if s.operator == "=="] if requirement else []
    if requirement is None or len(pinned) != 1:
        raise UserError(
            f"{what!r} is neither name==version nor a directory",
            where="discover",
            hint="give a pinned sdist (torch-matrix ecosystem discover zuko==1.3.1) or a source tree",
        )
    with tempfile.TemporaryDirectory(prefix="torch-matrix-discover-") as scratch:
        try:
            tree = _sdist(f"{requirement.name}=={pinned[0].version}", Path(scratch), index)
        except SourceError as error:
            raise UserError(
                str(error), where=what, hint="check the name and version on the index"
            ) from None
        return _discover_or_refuse(requirement.name, tree, what)


def _discover_or_refuse(name: str, tree: Path, what: str) -> Discovery:
    try:
        return discover_tree(name, tree)
    except NoTests as error:
        raise UserError(
            str(error),
            where=what,
            hint="give the project a git source (its repository has the tests) with command = ...",
        ) from None


def _git(url: str, ref: str, tree: Path) -> Path:
    steps = (
        ["git", "init", "-q", str(tree)],
        ["git", "-C", str(tree), "fetch", "-q", "--depth", "1", url, ref],
        ["git", "-C", str(tree), "checkout", "-q", "FETCH_HEAD"],
    )
    for step in steps:
        code, out, err = proc.run_text(step, timeout=GIT_TIMEOUT_S)
        if code != 0:
            last = (err or out).strip().splitlines()[-1:] or [f"exit {code}"]
            raise SourceError(f"git {step[3] if step[1] == '-C' else step[1]}: {last[0]}")
    return tree


def _sdist(requirement_text: str, dest: Path, index: PackageIndex | None) -> Path:
    if index is None:
        raise SourceError("no package index to find the sdist on")
    requirement = Requirement(requirement_text)
    version = next(iter(requirement.specifier)).version
    try:
        files = index.files(requirement.name, version)
    except IndexUnavailable as error:
        raise SourceError(f"the index cannot be read: {error}") from None
    if not files:
        raise SourceError(
            f"{requirement_text}: the index has no such release (pin a version it lists)"
        )
    sdists = [f for f in files if f.filename.endswith((".tar.gz", ".zip")) and not f.yanked]
    if not sdists:
        found = ", ".join(sorted(f.filename for f in files)[:3]) or "no files"
        raise SourceError(f"{requirement_text}: the index has no sdist ({found})")
    item = sdists[0]
    archive = dest / item.filename
    if item.is_local:
        shutil.copyfile(item.url[len("file://") :], archive)
    else:
        try:
            got = http_fetch(item.url, "*/*")
        except IndexUnavailable as error:
            raise SourceError(str(error)) from None
        if got is None:
            raise SourceError(f"{item.url}: not found")
        archive.write_bytes(got[1])
    return unpack(archive, dest / "tree")


def unpack(archive: Path, unpacked: Path) -> Path:
    """An sdist (.tar.gz or .zip) unpacked into ``unpacked``: its one top folder, or the folder
    itself when the archive has several tops. SourceError when it cannot be unpacked."""
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as handle:
                handle.extractall(unpacked)
        else:
            with tarfile.open(archive) as handle:
                handle.extractall(unpacked, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as error:
        raise SourceError(f"cannot unpack {archive.name}: {error}") from None
    tops = list(unpacked.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked


def _wheel_for(files: list[DistFile], python_tag: str) -> DistFile | None:
    wheels = [f for f in files if f.is_wheel and not f.yanked]
    fitting = [
        f
        for f in wheels
        if any(
            (python_tag in tag or "py3" in tag) and ("x86_64" in tag or tag.endswith("-any"))
            for tag in f.tags
        )
    ]
    found = fitting or wheels
    return found[0] if found else None


def _bytes_of(item: DistFile) -> int | None:
    import urllib.request

    if item.size is not None:  # the index said (PEP 700), no request
        return item.size
    url = item.url
    if item.is_local:
        try:
            return Path(url[len("file://") :]).stat().st_size
        except OSError:
            return None
    try:
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=30) as response:
            length = response.headers.get("Content-Length")
            return int(length) if length else None
    except (OSError, ValueError):
        return None


def torch_wheels(
    index: PackageIndex, version: str, python_tag: str
) -> list[tuple[str, int | None]] | None:
    """Torch ``version``'s wheel for this machine and the pinned wheels it requires (nvidia-*,
    triton: 3-4 GB per CUDA line on PyPI's Linux builds): each file's name and bytes (None where
    the index cannot say). None when the index has no such wheel."""
    try:
        item = _wheel_for(index.files("torch", version), python_tag)
        if item is None:
            return None
        found: list[tuple[str, int | None]] = [(item.filename, _bytes_of(item))]
        for requirement in index.requires_dist("torch", version):
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            pins = [s.version for s in requirement.specifier if s.operator == "=="]
            if not pins:
                continue
            dependency = _wheel_for(index.files(requirement.name, pins[0]), python_tag)
            if dependency is not None:
                found.append((dependency.filename, _bytes_of(dependency)))
        return found
    except (IndexUnavailable, UserError, OSError, ValueError):  # an estimate never stops a run
        return None
