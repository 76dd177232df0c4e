"""Read package indexes the way a resolver sees them, with a disk cache.

Sources: PEP 691 JSON / PEP 503 HTML simple indexes over http(s) and file:// (a
directory with ``<project>/index.html``), and find-links locations (a flat directory of
distribution files, or an HTML page of links). Several sources combine as a union.

Remote listings are cached with a TTL (``TORCH_MATRIX_INDEX_TTL`` seconds, default 6 h,
0 = always refresh); core metadata never changes once published, so it is cached forever.
A warm run therefore makes no network call at all. Local sources are read directly:
they are cheap and a user expects a wheel dropped into a find-links dir to show up.

Beside it: ``listings`` (what a listing page and a file name say: ``DistFile``), ``indexcache``
(the disk cache), ``wheeltarget`` (which wheels install on the cell's platform).
"""

from __future__ import annotations

import io
import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    canonicalize_name,
)
from packaging.version import Version

from torch_matrix.edges.console import warn_once
from torch_matrix.edges.ranges import (
    RangeFetch,
    RangeReadError,
    RangesUnsupported,
    RemoteZip,
    http_range,
    metadata_name,
    read_member,
)
from torch_matrix.vocab.errors import UserError
from torch_matrix.spec.model import PYPI_SIMPLE, IndexConfig
from torch_matrix.world.indexcache import (
    DiskCache,
    default_cache_dir,
    default_ttl,
    note_local,
)
from torch_matrix.world.listings import (
    DistFile,
    dist_file,
    parse_html_listing,
    parse_json_listing,
    parse_metadata,
)
from torch_matrix.world.wheeltarget import WheelTarget, wheel_fits

MAX_WHEEL_BYTES = 64 * 1024 * 1024  # only to read METADATA when the index serves no .metadata
MAX_PAGE_BYTES = 64 * 1024 * 1024  # a listing or a .metadata file (PyPI's torch page: ~1 MB)
MAX_SDIST_BYTES = 512 * 1024 * 1024  # an ecosystem project's source archive
ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
USER_AGENT = "torch-matrix (planning; +https://github.com/)"
SIZES_KEY = "sizes"  # a cached listing whose files carry the index's sizes

# (url, accept) -> (content_type, body). Raises IndexUnavailable or returns None for 404.
Fetch = Callable[[str, str], "tuple[str, bytes] | None"]


class IndexUnavailable(Exception):
    """A source could not be read (network, HTTP 5xx, unreadable directory)."""


class NotCached(Exception):
    """Metadata asked for with ``cache_only`` is not in the cache yet."""


# ---------------------------------------------------------------- helpers


def http_fetch(url: str, accept: str) -> tuple[str, bytes] | None:
    """GET over http(s), bounded (``edges.httpget``: a cap, one deadline, a retry on a cut body).
    None for 404/410 (the project or file is not there)."""
    import urllib.error  # imported here: a warm run never needs http, ssl or email

    from torch_matrix.edges import httpget  # http.client and ssl with it: only when fetching

    if url.endswith(".whl"):
        limit, what = MAX_WHEEL_BYTES, "a wheel read whole"
    elif url.endswith((".tar.gz", ".zip")):
        limit, what = MAX_SDIST_BYTES, "a source archive"
    else:
        limit, what = MAX_PAGE_BYTES, "a page"
    try:
        answer = httpget.get(url, {"Accept": accept, "User-Agent": USER_AGENT}, limit, what)
    except urllib.error.HTTPError as error:
        if error.code in (404, 410):
            return None
        raise IndexUnavailable(f"HTTP {error.code} from {url}") from None
    except httpget.ReadFailed as error:
        raise IndexUnavailable(str(error)) from None
    return answer.headers.get("Content-Type", ""), answer.body


def _range_metadata(url: str, filename: str, fetch: RangeFetch) -> str | None:
    """A remote wheel's METADATA by range requests (``edges.ranges``: its directory, then the one
    member); None where the server serves no ranges (the caller reads the whole wheel)."""
    try:
        reader = RemoteZip(url, fetch)
        name = metadata_name(reader.members())
        if name is None:
            raise IndexUnavailable(f"{filename}: no .dist-info/METADATA in the wheel")
        data = reader.read(name)
    except RangesUnsupported:
        return None
    except RangeReadError as error:
        raise IndexUnavailable(str(error)) from None
    return (data or b"").decode("utf-8", errors="replace")


def _local_path(location: str) -> Path | None:
    if location.startswith("file://"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(location).path))
    if "://" in location:
        return None
    return Path(location)


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    location: str  # URL or local directory
    kind: str  # "simple" | "find-links"
    optional: bool = False  # a failure degrades with a warning (PyTorch variant indexes)

    @property
    def local_dir(self) -> Path | None:
        return _local_path(self.location)

    def project_url(self, project: str) -> str:
        return f"{self.location.rstrip('/')}/{canonicalize_name(project)}/"


class PackageIndex:
    """One or more sources combined as a resolver sees them (the union of their files)."""

    def __init__(
        self,
        sources: Sequence[Source],
        cache: DiskCache,
        *,
        fetch: Fetch = http_fetch,
        prereleases: bool = False,
        fetch_range: RangeFetch | None = None,
        target: WheelTarget | None = None,
    ) -> None:
        self.sources = tuple(sources)
        self.cache = cache
        self.fetch = fetch
        self.prereleases = prereleases
        # Range requests go where ``fetch`` goes: a test's fake HTTP gets none unless it asks.
        self.fetch_range = fetch_range or (http_range if fetch is http_fetch else None)
        self.target = target or WheelTarget.host()
        self._listings: dict[tuple[Source, str], list[DistFile]] = {}
        self._grouped: dict[str, dict[str, list[DistFile]]] = {}
        self._lock = threading.Lock()

    # -- listings

    def listing(self, source: Source, project: str) -> list[DistFile]:
        """All files of ``project`` in one source, yanked ones included."""
        key = (source, canonicalize_name(project))
        with self._lock:
            if key in self._listings:
                return self._listings[key]
        local = source.local_dir
        if local is not None:
            files = self._read_local(source, local, project)
        else:
            files = self._read_remote(source, project)
        with self._lock:
            self._listings[key] = files
        return files

    def _read_local(self, source: Source, directory: Path, project: str) -> list[DistFile]:
        if source.kind == "simple":
            page = directory / canonicalize_name(project) / "index.html"
            note_local(page)  # what planning read here, for a kept plan (``world.plancache``)
            if page.is_file():
                return parse_html_listing(
                    page.read_text(encoding="utf-8", errors="replace"),
                    page.resolve().as_uri(),
                    project,
                )
            directory = directory / canonicalize_name(project)
            note_local(directory)
            if not directory.is_dir():
                return []
        elif not directory.is_dir():
            note_local(directory)
            if source.optional:
                return []
            raise UserError(
                f"find-links directory does not exist: {directory}",
                where="index.find_links",
                hint="fix the path in [index] find_links (or $PIP_FIND_LINKS when the spec "
                "sets none), or create the directory",
            )
        note_local(directory)
        files = []
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.is_file():
                stat = entry.stat()
                note_local(entry.path, stat)
                found = dist_file(
                    entry.name,
                    Path(entry.path).resolve().as_uri(),
                    project,
                    size=stat.st_size,
                )
                if found:
                    files.append(found)
        return files

    def _read_remote(self, source: Source, project: str) -> list[DistFile]:
        url = source.project_url(project) if source.kind == "simple" else source.location
        cache_key = f"listing {url} {canonicalize_name(project)}"
        cached = self.cache.read("listings", cache_key)
        # A listing cached before files carried their sizes is read again (once) for them.
        if (
            cached is not None
            and self.cache.fresh(cached)
            and cached.get(SIZES_KEY, "error" in cached)
        ):
            if "error" in cached:
                raise IndexUnavailable(cached["error"])
            return [DistFile.from_json(f) for f in cached["files"]]
        try:
            response = self.fetch(url, ACCEPT)
        except IndexUnavailable as error:
            if cached is not None and "files" in cached:
                age_h = (self.cache.clock() - float(cached.get("fetched_at", 0))) / 3600
                warn_once(f"{error}; using the cached listing of {project} from {age_h:.1f} h ago")
                return [DistFile.from_json(f) for f in cached["files"]]
            if source.optional:  # remember the failure for the TTL: warm runs stay offline
                self.cache.write("listings", cache_key, {"error": str(error)})
            raise
        if response is None:
            files: list[DistFile] = []
        else:
            content_type, body = response
            text = body.decode("utf-8", errors="replace")
            if "json" in content_type:
                try:
                    files = parse_json_listing(json.loads(text), url, project)
                except ValueError:
                    raise IndexUnavailable(f"{url}: invalid JSON") from None
            else:
                files = parse_html_listing(text, url, project)
        self.cache.write(
            "listings", cache_key, {"files": [f.to_json() for f in files], SIZES_KEY: True}
        )
        return files

    def all_files(self, project: str) -> list[DistFile]:
        """Union over sources; a required source that cannot be read is a UserError."""
        files = []
        for source in self.sources:
            try:
                files.extend(self.listing(source, project))
            except IndexUnavailable as error:
                if source.optional:
                    warn_once(f"{error}; planning {project} without {source.location}")
                    continue
                raise UserError(
                    f"cannot list {project!r}: {error}",
                    where=f"index {source.location}",
                    hint="check the network and the index URL in the spec's [index] (or "
                    "$PIP_INDEX_URL); a listing fetched before is used for "
                    "$TORCH_MATRIX_INDEX_TTL seconds",
                ) from None
        return [f for f in files if not f.yanked]

    # -- public interface

    def versions(self, project: str) -> list[Version]:
        found = set()
        # Each version string parsed once (a release has dozens of files), in the files' order: of
        # two spellings of one version ("2.0", "2.0.0") the first met is the one kept, as before.
        for text in dict.fromkeys(item.version for item in self.all_files(project)):
            version = Version(text)
            if version.is_prerelease and not self.prereleases:
                continue
            found.add(version)
        return sorted(found)

    def files(self, project: str, version: str | Version) -> list[DistFile]:
        """Files of one release. A version without a local label also matches ``+cpu`` builds."""
        wanted = Version(str(version))
        by_public = self._by_public(project)
        candidates = by_public.get(wanted.public, [])
        if wanted.local:
            return [f for f in candidates if Version(f.version) == wanted]
        return list(candidates)

    def _by_public(self, project: str) -> dict[str, list[DistFile]]:
        key = canonicalize_name(project)
        with self._lock:
            if key in self._grouped:
                return self._grouped[key]
        grouped: dict[str, list[DistFile]] = {}
        public_of: dict[str, str] = {}  # each version string parsed once, not once per file
        for item in self.all_files(project):
            public = public_of.get(item.version)
            if public is None:
                public = public_of[item.version] = Version(item.version).public
            grouped.setdefault(public, []).append(item)
        with self._lock:
            self._grouped[key] = grouped
        return grouped

    def requires_dist(
        self,
        project: str,
        version: str | Version,
        cache_only: bool = False,
        pythons: Sequence[str] = (),
    ) -> list[Requirement]:
        """Requires-Dist of a release, read from the wheel a cell installs: one for this index's
        ``target`` platform, for the first of ``pythons`` (X.Y) that has one. Wheels of one release
        can declare different requirements per platform, so never from an arbitrary file; a
        release with no wheel for the platform declares nothing here (``[]``). ``cache_only``
        raises ``NotCached`` instead of fetching."""
        wheels = [f for f in self.files(project, version) if f.is_wheel]
        if not wheels:
            raise UserError(
                f"no wheel of {project} {version} to read metadata from",
                where="index " + ", ".join(s.location for s in self.sources),
                hint=f"the index lists {project} {version} without wheels: pin another "
                "version, or add an index that has its wheels",
            )
        candidates = self.installable_wheels(wheels, pythons)
        if not candidates:
            return []
        problems = []
        for item in candidates[:3]:
            try:
                lines = self._metadata(item, cache_only)
            except IndexUnavailable as error:
                problems.append(str(error))
                continue
            requirements = []
            for line in lines:
                try:
                    requirements.append(Requirement(line))
                except InvalidRequirement:
                    continue
            return requirements
        raise UserError(
            f"cannot read the metadata of {project} {version}: {problems[-1]}",
            where=f"index {candidates[0].url}",
            hint="check the network and rerun; metadata read once is cached for good",
        )

    def installable_wheels(
        self, wheels: Sequence[DistFile], pythons: Sequence[str] = ()
    ) -> list[DistFile]:
        """The wheels a cell on this index's target installs, best first: for the first of
        ``pythons`` that has one, then any Python; within that, advertised .metadata first, then
        local wheels (PyPI serves .metadata even where a mirror does not advertise it)."""
        ranked = []
        for item in wheels:
            if not wheel_fits(item, self.target):
                continue
            rank = next(
                (i for i, python in enumerate(pythons) if wheel_fits(item, self.target, python)),
                len(pythons),
            )
            ranked.append(((rank, not item.has_metadata, not item.is_local, item.filename), item))
        return [item for _key, item in sorted(ranked, key=lambda pair: pair[0])]

    def requires_dist_many(
        self,
        project: str,
        versions: Iterable[str | Version],
        workers: int = 8,
        pythons: Sequence[str] = (),
    ) -> dict[str, list[Requirement]]:
        """Metadata of many releases (see ``requires_dist``); cold fetches run in parallel."""
        wanted = [str(v) for v in versions]
        found: dict[str, list[Requirement]] = {}
        missing = []
        for version in wanted:  # warm: all from the cache, no threads
            try:
                found[version] = self.requires_dist(project, version, True, pythons)
            except NotCached:
                missing.append(version)
        if missing:
            from concurrent.futures import ThreadPoolExecutor  # only when metadata must be fetched

            with ThreadPoolExecutor(max_workers=max(1, min(workers, len(missing)))) as pool:
                found.update(
                    zip(
                        missing,
                        pool.map(lambda v: self.requires_dist(project, v, False, pythons), missing),
                    )
                )
        return {v: found[v] for v in wanted}

    def _metadata(self, item: DistFile, cache_only: bool = False) -> list[str]:
        path = _local_path(item.url)
        if path is not None:  # local wheels are cheap to read and can be rebuilt: no cache
            with path.open("rb") as wheel:
                return parse_metadata(_wheel_metadata(wheel, item.filename, item.url))[0]
        cache_key = f"metadata {item.url}"
        cached = self.cache.read("metadata", cache_key)
        if cached is not None:
            return list(cached["requires_dist"])
        if cache_only:
            raise NotCached(item.url)
        # PEP 658 .metadata where the index serves it, else METADATA by range requests (a few
        # KB of the wheel), else the whole wheel.
        text = None
        response = self.fetch(item.url + ".metadata", "*/*")
        if response is not None:
            text = response[1].decode("utf-8", errors="replace")
        if text is None and self.fetch_range is not None:
            text = _range_metadata(item.url, item.filename, self.fetch_range)
        if text is None:
            response = self.fetch(item.url, "*/*")
            if response is None:
                raise IndexUnavailable(f"{item.url}: not found")
            text = _wheel_metadata(io.BytesIO(response[1]), item.filename, item.url)
        requires, requires_python = parse_metadata(text)
        self.cache.write(
            "metadata", cache_key, {"requires_dist": requires, "requires_python": requires_python}
        )
        return requires


def _wheel_metadata(wheel: IO[bytes], filename: str, url: str) -> str:
    """METADATA of a whole wheel held locally (a find-links file, or one fetched whole)."""
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as archive:
            name = metadata_name(archive.namelist())
            if name is None:
                raise IndexUnavailable(f"{filename}: no .dist-info/METADATA in the wheel")
            return read_member(archive, name, url).decode("utf-8", errors="replace")
    except RangeReadError as error:
        raise IndexUnavailable(str(error)) from None
    except zipfile.BadZipFile:
        raise IndexUnavailable(f"{filename}: not a valid wheel (zip)") from None


# ---------------------------------------------------------------- construction


def default_index_url(config: IndexConfig, environ: Mapping[str, str] = os.environ) -> str:
    return config.default or environ.get("UV_DEFAULT_INDEX", "") or PYPI_SIMPLE


def sources_in_use(
    config: IndexConfig, variant: str = "default", environ: Mapping[str, str] = os.environ
) -> list[dict[str, str]]:
    """Each index and find-links location a cell of ``variant`` installs from, in the order uv is
    given them, with where it came from (the spec, pip's or uv's environment variable, a default)."""
    if config.default:
        default, origin = config.default, config.origin("default") or "the spec"
    elif environ.get("UV_DEFAULT_INDEX", ""):
        default, origin = environ["UV_DEFAULT_INDEX"], "$UV_DEFAULT_INDEX"
    else:
        default, origin = (
            PYPI_SIMPLE,
            "uv's default (no [index] default, $PIP_INDEX_URL or $UV_DEFAULT_INDEX)",
        )
    used = [{"kind": "default-index", "location": default, "from": origin}]
    used += [
        {"kind": "extra-index", "location": url, "from": config.origin("extra")}
        for url in config.extra
    ]
    used += [
        {"kind": "find-links", "location": path, "from": config.origin("find_links")}
        for path in config.find_links
    ]
    for name, kind in (("UV_INDEX", "extra-index"), ("UV_FIND_LINKS", "find-links")):
        used += [
            {
                "kind": kind,
                "location": location,
                "from": f"${name} (uv reads it when installing; planning does not)",
            }
            for location in environ.get(name, "").split()
        ]
    if variant != "default":
        used.append(
            {
                "kind": "variant-index",
                "location": config.variant_url(variant),
                "from": config.origin("pytorch") or "the spec",
            }
        )
    return used


def sources_for(config: IndexConfig, environ: Mapping[str, str] = os.environ) -> list[Source]:
    sources = [Source(default_index_url(config, environ), "simple")]
    sources += [Source(url, "simple") for url in config.extra]
    sources += [Source(location, "find-links") for location in config.find_links]
    return sources


def open_index(
    config: IndexConfig,
    *,
    variant: str = "default",
    cache_dir: str | Path | None = None,
    ttl: float | None = None,
    environ: Mapping[str, str] = os.environ,
    fetch: Fetch = http_fetch,
    prereleases: bool = False,
) -> PackageIndex:
    """The index as the installer will see it for one variant.

    For a variant other than ``default`` the PyTorch variant index is added as an
    optional source: unreachable, it degrades with a warning and the installer decides.
    """
    sources = sources_for(config, environ)
    if variant != "default":
        sources.append(Source(config.variant_url(variant), "simple", optional=True))
    cache = DiskCache(
        Path(cache_dir) if cache_dir else default_cache_dir(environ),
        default_ttl(environ) if ttl is None else ttl,
    )
    return PackageIndex(sources, cache, fetch=fetch, prereleases=prereleases)


def open_variant_index(
    config: IndexConfig, variant: str, *, optional: bool = True, **kwargs: Any
) -> PackageIndex:
    """Only the PyTorch index of one variant; ``optional``: warns and answers nothing when unreachable."""
    index = open_index(config, **kwargs)
    return PackageIndex(
        [Source(config.variant_url(variant), "simple", optional=optional)],
        index.cache,
        fetch=index.fetch,
        prereleases=index.prereleases,
        fetch_range=index.fetch_range,
        target=index.target,
    )
