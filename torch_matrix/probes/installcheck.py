"""The install check (``python -I facts.py record``): every file a distribution's RECORD lists is
there, whole, with its bytes.

A full disk or a killed installer leaves metadata behind, so the package looks installed while
its files are not all there; ``incomplete_installs`` says which distribution and which files.
Files hashed and matched before (the same hardlinked inodes, unchanged) are remembered in a small
SQLite memo (``VerifiedFiles``) and not hashed again. Loaded by ``facts.py``, also when it runs as
a script under ``python -I`` (by its path: nothing of ours goes on the cell's ``sys.path``).
Every Python that runs here is a cell's: stdlib only, Python 3.8 compatible.
"""

import os

# How an interrupted or damaged install differs from what a publisher ships. An installer
# (pip, uv) writes RECORD last, so a killed install has no RECORD; a full disk, a torn copy
# or a damaged cache leaves files missing, empty, shorter than RECORD says, or with other
# bytes (a shared library whose pages never reached the disk keeps its size). None of that
# is ever a publisher's doing: a package file that differs from RECORD is damage. The
# dist-info metadata is different: PyPI's torch 1.x wheels (1.8.1 ... 1.12.1, and their
# torchvision) were built as ``1.12.0+cu102`` and had ``+cu102`` cut from METADATA's
# ``Version:`` after RECORD was written; pip and uv install them without a word. So a
# metadata file that differs from RECORD is accepted when it is whole (present, not empty,
# and for METADATA/WHEEL the headers an installer reads are there and name this dist).
_CHUNK = 1 << 20


_HEADERS = {
    "METADATA": ("Metadata-Version", "Name", "Version"),
    "PKG-INFO": ("Metadata-Version", "Name", "Version"),
    "WHEEL": ("Wheel-Version",),
}


def _digests(path, algorithm):
    """(urlsafe base64 without padding, hex, status) of the file's digest; None for an unknown
    algorithm. ``status``: the ``os.fstat`` of the very file hashed, when it did not change while
    it was read (None when it did: its bytes must not be remembered under any key)."""
    import base64
    import hashlib

    try:
        digest = hashlib.new(algorithm)
    except (ValueError, TypeError):
        return None
    with open(path, "rb") as handle:
        before = os.fstat(handle.fileno())
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
        after = os.fstat(handle.fileno())
    raw = digest.digest()
    same = VerifiedFiles.key(before, "") == VerifiedFiles.key(after, "")
    return (
        base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii"),
        raw.hex(),
        before if same else None,
    )


def _dist_name(name):
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _whole_metadata(dist_info, relative, path):
    """Why an edited dist-info file is not whole ('' when it is)."""
    base = relative.rsplit("/", 1)[-1]
    wanted = _HEADERS.get(base)
    if not wanted:
        return ""
    import email.parser

    try:
        with open(path, "rb") as handle:
            headers = email.parser.BytesHeaderParser().parse(handle)
    except Exception as exc:  # noqa: BLE001 - any parse failure means the file is not whole
        return "unreadable (%s)" % type(exc).__name__
    lacking = [key for key in wanted if not (headers.get(key) or "").strip()]
    if lacking:
        return "lacks %s" % ", ".join(lacking)
    if "Name" in wanted:
        own = dist_info[: -len(".dist-info")].rpartition("-")[0]
        if own and _dist_name(headers["Name"].strip()) != _dist_name(own):
            return "names %r, not %r" % (headers["Name"].strip(), own)
    return ""


def _verified_db_path():
    """Where the memo of files already hashed lives ('' switches it off)."""
    explicit = os.environ.get("TORCH_MATRIX_VERIFIED_DB")
    if explicit is not None:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch-matrix", "verified-files.sqlite3")


class VerifiedFiles:
    """A memo of files whose bytes were hashed and matched their RECORD row, keyed by device,
    inode, size, modification time and the expected digest. uv hardlinks every cell's files from
    its cache, so the same 5 GiB CUDA stack is the same inodes in every cell: hashing it once is
    enough. Writing to a file changes its mtime, and a file that did not match is never
    remembered, so a file changed since is hashed again. The memo is an optimisation: when it
    cannot be read or written, every file is hashed.

    ``inodes``: the (device, inode) pairs the check will ask about; only their rows are read (one
    query, through the primary key). The memo holds up to ``LIMIT`` rows (the stacks of every
    release a machine tested): read whole, at 935,000 rows, it made every cell's check 1.8 s
    instead of 0.5 s."""

    LIMIT = 1000000  # rows kept (about 100 MB); the oldest go first

    def __init__(self, path, inodes):
        self.path = path
        self.known = set()
        self.new = []
        if not path:
            return
        try:
            import sqlite3

            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            connection = sqlite3.connect(path, timeout=10)
            try:
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS verified (dev INTEGER, ino INTEGER, "
                    "size INTEGER, mtime_ns INTEGER, digest TEXT, "
                    "PRIMARY KEY (dev, ino, size, mtime_ns, digest))"
                )
                connection.execute("PRAGMA temp_store = MEMORY")
                connection.execute("CREATE TEMP TABLE wanted (dev INTEGER, ino INTEGER)")
                connection.executemany("INSERT INTO wanted VALUES (?, ?)", inodes)
                # CROSS JOIN keeps this order on any SQLite: each wanted file, then its rows
                # through the primary key; never a scan of the memo.
                self.known = set(
                    connection.execute(
                        "SELECT verified.dev, verified.ino, verified.size, verified.mtime_ns, verified.digest "
                        "FROM wanted CROSS JOIN verified ON verified.dev = wanted.dev AND verified.ino = wanted.ino"
                    )
                )
            finally:
                connection.close()
        except Exception:  # noqa: BLE001 - a memo only: without it every file is hashed
            self.path = ""
            self.known = set()

    @staticmethod
    def key(status, expected):
        """The memo's key of a file from its ``os.stat`` (taken before it is hashed: a write
        while it is hashed moves the mtime, so the next check hashes it again)."""
        return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, expected)

    def knows(self, key):
        """Whether these very bytes were hashed and matched before."""
        return key in self.known

    def save(self):
        """Remember the files that matched; keep at most ``LIMIT`` rows, the newest."""
        if not self.path or not self.new:
            return
        try:
            import sqlite3

            connection = sqlite3.connect(self.path, timeout=10)
            try:
                with connection:
                    connection.executemany(
                        "INSERT OR IGNORE INTO verified VALUES (?, ?, ?, ?, ?)", self.new
                    )
                    # Rows are only ever added at the end and dropped from the start, so the rowids
                    # are contiguous: their span is the count, without reading the table.
                    low, high = connection.execute(
                        "SELECT min(rowid), max(rowid) FROM verified"
                    ).fetchone()
                    if high is not None and high - low + 1 > self.LIMIT:
                        connection.execute(
                            "DELETE FROM verified WHERE rowid <= ?", (high - self.LIMIT,)
                        )
            finally:
                connection.close()
        except Exception:  # noqa: BLE001 - a memo only
            pass


def _row_path(site, row):
    return os.path.normpath(os.path.join(site, row[0]))


def _statuses(tasks):
    """The ``os.stat`` of each file the RECORD rows ``tasks`` name, None where it cannot be taken
    (missing, a dangling link: ``_record_row_problem`` says which): one pass, so the memo can
    read just these files' rows before the hashing starts."""
    statuses = []
    for site, _entry, row in tasks:
        try:
            statuses.append(os.stat(_row_path(site, row)))
        except OSError:
            statuses.append(None)
    return statuses


def _record_row_problem(site, dist_info, row, verified=None, status=None):
    """What is wrong with one RECORD row's file ('' when nothing is). ``status``: the file's
    ``os.stat``, when the caller took it already (``_statuses``)."""
    import stat

    path = _row_path(site, row)
    expected = row[1] if len(row) > 1 else ""
    size_text = row[2] if len(row) > 2 else ""
    try:
        size = int(size_text) if size_text else None
    except ValueError:
        size = None
    if status is None:
        if not os.path.lexists(path):
            return "missing"
        try:
            status = os.stat(path)
        except OSError as exc:
            return "unreadable (%s)" % exc.strerror
    actual = status.st_size
    if stat.S_ISDIR(status.st_mode):
        return ""
    if size and actual == 0:
        return "empty (RECORD says %d bytes)" % size
    problem = ""
    if size is not None and actual != size:
        problem = "%s (%d of the %d bytes RECORD says)" % (
            "shorter" if actual < size else "longer",
            actual,
            size,
        )
    elif "=" in expected:
        algorithm, _, value = expected.partition("=")
        try:
            # Stat again now, not the pass's stat of seconds ago: a path replaced in between is
            # another inode, which the memo does not know.
            if verified is not None and verified.knows(VerifiedFiles.key(os.stat(path), expected)):
                return ""  # these very bytes were hashed and matched before
            found = _digests(path, algorithm)
        except OSError as exc:
            return "unreadable (%s)" % exc.strerror
        # Some build backends wrote hex digests; pip and uv accept those wheels too.
        if found is not None and value not in found[:2]:
            problem = "other bytes than RECORD's %s" % algorithm
        elif found is not None and verified is not None and found[2] is not None:
            # Remembered under the key of the file that was read (not of an earlier stat: a path
            # replaced in between must not vouch for the old inode), unchanged while it was read.
            verified.new.append(VerifiedFiles.key(found[2], expected))
    if problem and row[0].replace("\\", "/").startswith(dist_info + "/"):
        whole = _whole_metadata(dist_info, row[0], path)
        return (
            "%s, %s" % (problem, whole) if whole else ""
        )  # a publisher's edit, not a partial install
    return problem


def _outside(site, relative):
    path = os.path.normpath(os.path.join(site, relative))
    return os.path.commonpath([site, path]) != site


def incomplete_installs(sites=None):
    """Distributions whose install did not complete or was damaged since: no RECORD, or a file
    RECORD lists that is missing, empty, shorter or longer, or holds other bytes (package files
    are hashed: a torn shared library can keep its size). A full disk or a killed installer
    leaves metadata behind, so the package looks installed (``uv pip freeze`` lists it) while
    its files are not all there. Dist-info metadata a publisher edited after writing RECORD is
    accepted when whole (see ``_whole_metadata``): pip and uv install such wheels.

    ``sites``: check these directories (a ``uv pip install --target``: the prefetch) instead of
    this interpreter's site-packages, only the files inside them (a target has no venv around it
    for RECORD's ``../../bin`` rows). Matching files go into the memo either way."""
    import csv
    import sysconfig
    from concurrent.futures import ThreadPoolExecutor

    if sites is None:
        paths = sysconfig.get_paths()
        sites = [p for p in (paths.get("purelib"), paths.get("platlib")) if p]
        inside = False
    else:
        sites = [os.path.abspath(site) for site in sites]
        inside = True
    broken = []
    checked = []  # (dist-info, its RECORD rows), in order
    for site in sorted(set(sites)):
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            record = os.path.join(site, entry, "RECORD")
            if not os.path.isfile(record):
                broken.append("%s: no RECORD (the install did not complete)" % entry)
                continue
            try:
                with open(record, encoding="utf-8", newline="") as handle:
                    rows = [
                        row
                        for row in csv.reader(handle)
                        if row and row[0] and not (inside and _outside(site, row[0]))
                    ]
            except (OSError, UnicodeDecodeError, csv.Error) as exc:
                broken.append("%s: unreadable RECORD: %s" % (entry, exc))
                continue
            checked.append((site, entry, rows))
    # Hashing is most of the cost (5 GiB for a CUDA stack): on every core (hashlib lets go of the GIL).
    # Files hashed and matched before (the same hardlinked inodes, unchanged) are not hashed again.
    tasks = [(site, entry, row) for site, entry, rows in checked for row in rows]
    statuses = _statuses(tasks)
    verified = VerifiedFiles(
        _verified_db_path(), {(st.st_dev, st.st_ino) for st in statuses if st is not None}
    )
    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        problems = list(
            pool.map(
                lambda task, status: _record_row_problem(*task, verified=verified, status=status),
                tasks,
                statuses,
            )
        )
    verified.save()
    bad_by_entry = {}
    for (site, entry, row), problem in zip(tasks, problems):
        if problem:
            bad_by_entry.setdefault(entry, []).append("%s (%s)" % (row[0], problem))
    for site, entry, rows in checked:
        bad = bad_by_entry.get(entry)
        if bad:
            broken.append(
                "%s: %d file(s) its RECORD lists are missing or damaged: %s%s"
                % (entry, len(bad), ", ".join(bad[:3]), " ..." if len(bad) > 3 else "")
            )
    return sorted(broken)  # by distribution, as they were listed
