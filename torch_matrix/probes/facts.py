"""Facts about the interpreter, platform, packages and GPU, for the cell result.

Everything except ``gpu_facts`` works without importing torch. ``gpu_facts`` imports
torch and may initialise CUDA, so the runner calls it in a forked child (the zygote
stays CUDA-clean) or in a throwaway subprocess.

Also a script: ``torch-matrix`` runs ``python -I torch_matrix/probes/facts.py interpreter`` to confirm
an interpreter and read a venv's base interpreter, and ``... versions torch numpy`` to
read each package's own ``__version__`` when it verifies an install; ``torch-matrix check``
runs ``python torch_matrix/probes/facts.py environment`` (not isolated: the environment as its user runs
it) for the interpreter, its prefix, the installed versions and the build torch says it is.
``... record`` is the install check (every file against its wheel's RECORD); ``record DIR``
checks a ``--target`` directory instead (the prefetch, to hash ahead what a cell will hardlink).
Every Python that runs here is a cell's, so keep it stdlib-only and Python 3.8 compatible.
"""

import ast
import importlib
import importlib.util
import json
import os
import platform
import socket
import sys

PACKAGES = ("torch", "torchvision", "numpy")


def python_facts():
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "implementation": sys.implementation.name,
        "providers": module_providers(),
    }


def _canonical(name):
    return "".join("_" if ch in "-." else ch for ch in name.lower())


def module_providers():
    """The importable top-level names each installed distribution provides (from its RECORD), for
    the distributions whose names differ from the single module they ship: ``setuptools`` ->
    ``[_distutils_hack, pkg_resources, setuptools]``, ``pillow`` -> ``[PIL]``. A missing module is
    then mapped to a distribution, in this cell or in another (``import yaml`` needs PyYAML)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {}
    providers = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
            record = dist.read_text("RECORD") or ""
        except Exception:
            continue
        if not name:
            continue
        tops = set()
        for first in set(line.split(",", 1)[0].split("/", 1)[0] for line in record.splitlines()):
            if first in ("..", "__pycache__") or first.endswith(
                (".dist-info", ".egg-info", ".data", ".pth")
            ):
                continue
            if first.endswith((".py", ".so", ".pyd")):
                first = first.split(".")[0]
            if first.isidentifier():
                tops.add(first)
        if tops and tops != {_canonical(name)}:
            providers[name] = sorted(tops)
    return providers


def platform_facts():
    libc_name, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "release": platform.release(),
        "libc": ("%s %s" % (libc_name, libc_version)).strip() if libc_name else "",
        "host": socket.gethostname(),
    }


def installed_version(name):
    """The installed distribution's version from its metadata, or None (never imports it)."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


def package_facts(names=PACKAGES):
    return {name: installed_version(name) for name in names}


def driver_version():
    """The NVIDIA kernel driver version from /proc, without touching CUDA; None without a driver."""
    try:
        with open("/proc/driver/nvidia/version") as handle:
            text = handle.read()
    except OSError:
        return None
    for token in text.split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return token
    return None


def physical_gpu_count():
    """GPUs the driver knows about (/proc/driver/nvidia/gpus), without touching CUDA."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def gpu_facts():
    """CUDA facts as torch sees them. Initialises CUDA: call it in a throwaway process."""
    facts = {"cuda_available": False, "torch_cuda": None, "devices": [], "driver": driver_version()}
    if installed_version("torch") is None:
        return facts
    try:
        import torch
    except Exception as exc:
        facts["error"] = "import torch failed: %s: %s" % (
            type(exc).__name__,
            str(exc).splitlines()[:1],
        )
        return facts
    version = getattr(torch, "version", None)
    facts["torch_cuda"] = getattr(version, "cuda", None)
    try:
        facts["build"] = build_facts()
    except Exception as exc:
        facts["build"] = {"error": "%s: %s" % (type(exc).__name__, _first_line(exc))}
    try:
        facts["cuda_available"] = bool(torch.cuda.is_available())
        if facts["cuda_available"]:
            for index in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(index)
                facts["devices"].append(
                    {
                        "index": index,
                        "name": torch.cuda.get_device_name(index),
                        "capability": "%d.%d" % (major, minor),
                    }
                )
            arch_list = getattr(torch.cuda, "get_arch_list", None)
            if arch_list is not None:
                facts["arch_list"] = list(arch_list())
            cudnn = getattr(torch.backends, "cudnn", None)
            if cudnn is not None and cudnn.is_available():
                facts["cudnn"] = cudnn.version()
    except Exception as exc:
        facts["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[:1])
    return facts


def _torchvision_build(torch, facts):
    """torchvision's CUDA version two ways: ``torchvision.version.cuda`` and its compiled ops'
    ``torch.ops.torchvision._cuda_version()`` (an int such as 12010; -1 or 0 for a CPU build)."""
    try:
        import torchvision
    except Exception as exc:
        facts["torchvision_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
        return
    facts["torchvision_cuda"] = getattr(getattr(torchvision, "version", None), "cuda", None)
    try:
        facts["torchvision_ops_cuda"] = int(torch.ops.torchvision._cuda_version())
    except (
        Exception
    ) as exc:  # ops not loadable: a mismatched pair ("operator torchvision::nms does not exist")
        facts["torchvision_ops_cuda"] = None
        facts["torchvision_ops_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def build_facts():
    """What the installed torch (and torchvision) were built for, read without a device:
    ``torch._C._cuda_getArchFlags()`` (the compiled SASS ``sm_XY`` and PTX ``compute_XY``
    entries; ``torch.cuda.get_arch_list()`` says [] without a device before torch 2.13),
    ``torch.version.cuda`` / ``.hip``, torchvision's CUDA version, and torch's own table of its
    release variants' architectures (``torch.cuda.PYTORCH_RELEASES_CODE_CC``, where it has one).
    Imports torch: call it in a throwaway process. ``torch_matrix.judge.hardware`` judges targets from it.
    """
    facts = {
        "torch": installed_version("torch"),
        "torchvision": installed_version("torchvision"),
        "python": platform.python_version(),
    }
    if facts["torch"] is None:
        return facts
    try:
        import torch
    except Exception as exc:
        facts["error"] = "import torch failed: %s: %s" % (type(exc).__name__, _first_line(exc))
        return facts
    version = getattr(torch, "version", None)
    facts["torch_cuda"] = getattr(version, "cuda", None)
    facts["torch_hip"] = getattr(version, "hip", None)
    getter = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        flags = getter() if getter is not None else None
    except Exception as exc:
        flags = None
        facts["error"] = "torch._C._cuda_getArchFlags() failed: %s: %s" % (
            type(exc).__name__,
            _first_line(exc),
        )
    facts["arch_flags"] = flags
    facts["arch_list"] = flags.split() if flags else []
    try:
        facts["get_arch_list_without_device"] = list(torch.cuda.get_arch_list())
    except Exception as exc:
        facts["get_arch_list_without_device"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
    table = getattr(torch.cuda, "PYTORCH_RELEASES_CODE_CC", None)
    if isinstance(
        table, dict
    ):  # {cuda: {host arch: {cc}}} in 2.13; {cuda: {cc}} earlier (any host)
        try:
            facts["release_variants_code_cc"] = dict(
                (
                    str(cuda),
                    dict((str(arch), sorted(ccs)) for arch, ccs in by.items())
                    if isinstance(by, dict)
                    else {"any": sorted(by)},
                )
                for cuda, by in table.items()
            )
        except Exception as exc:
            facts["release_variants_code_cc"] = {
                "error": "%s: %s" % (type(exc).__name__, _first_line(exc))
            }
    runtimes = {}
    for name in (
        "nvidia-cuda-runtime-cu11",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-runtime-cu13",
        "nvidia-cuda-runtime",
    ):
        found = installed_version(name)
        if found:
            runtimes[name] = found
    facts["cuda_runtime_packages"] = runtimes
    if facts["torchvision"]:
        _torchvision_build(torch, facts)
    return facts


def interpreter_identity():
    """Who is running: version, implementation, executable and the base interpreter of a venv."""
    return {
        "version": platform.python_version(),
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "base": getattr(sys, "_base_executable", sys.executable),
    }


def _version_literals(directory, names=("__version__",)):
    """{name: value} of the literal assignments to ``names`` in ``<package>/version.py`` (torch's
    ``__version__``, ``cuda: Optional[str] = '12.1'``, ``hip``), without importing the package."""
    path = os.path.join(directory, "version.py")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except Exception:
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = [getattr(t, "id", "") for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [getattr(node.target, "id", "")]
        else:
            continue
        for target in targets:
            if target in names:
                try:
                    found[target] = ast.literal_eval(node.value)
                except Exception:
                    found.pop(target, None)
    return found


def _literal_version(directory):
    """``__version__`` from ``<package>/version.py`` when it is a literal (torch, torchvision): no import."""
    return _version_literals(directory).get("__version__")


def version_file(name):
    """The build an installed package says it is in its ``version.py``, read without importing it:
    ``{"version": "2.4.1+cu121", "cuda": "12.1", "hip": None}``. PyPI's CUDA wheels carry no local
    label in their metadata (``2.4.1``); the build's own ``__version__`` and ``torch.version.cuda`` do.
    None when there is no such file or no literal ``__version__`` in it."""
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        found = _version_literals(base, ("__version__", "cuda", "hip"))
        if isinstance(found.get("__version__"), str):
            build = {"version": found["__version__"]}
            for key in ("cuda", "hip"):
                build[key] = found.get(key) if isinstance(found.get(key), str) else None
            return build
    return None


def own_versions(names):
    """{import name: {"version": ...} or {"error": ...}}: each package's own version string.

    ``version.py`` is read without importing the package when it holds a literal
    ``__version__`` (importing torch costs seconds); otherwise the package is imported.
    """
    out = {}
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:
            out[name] = {"error": repr(exc)}
            continue
        if spec is None:
            out[name] = {"error": "not importable"}
            continue
        found = None
        for base in spec.submodule_search_locations or []:
            found = _literal_version(base)
            if found:
                break
        if not isinstance(found, str):
            try:
                found = str(importlib.import_module(name).__version__)
            except Exception as exc:
                out[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
                continue
        out[name] = {"version": found}
    return out


def environment_facts():
    """What ``torch-matrix check`` reads before probing an existing environment: the interpreter,
    where its environment lives, and the installed versions (from metadata: torch is not imported)."""
    facts = python_facts()
    facts.update(
        prefix=sys.prefix,
        base_prefix=getattr(sys, "base_prefix", sys.prefix),
        version_info=list(sys.version_info[:3]),
    )
    builds = {}
    for name in ("torch", "torchvision"):
        build = version_file(name) if installed_version(name) else None
        if build is not None:
            builds[name] = build
    return {
        "python": facts,
        "platform": platform_facts(),
        "packages": package_facts(),
        "builds": builds,
    }


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


def main(argv):
    if argv[:1] == ["interpreter"]:
        print(json.dumps(interpreter_identity()))
    elif argv[:1] == ["environment"]:
        print(json.dumps(environment_facts()))
    elif argv[:1] == ["versions"]:
        print(json.dumps(own_versions(argv[1:])))
    elif argv[:1] == ["build"]:
        print(json.dumps(build_facts(), sort_keys=True))
    elif argv[:1] == ["record"]:
        print(json.dumps(incomplete_installs(argv[1:] or None)))
    else:
        sys.stderr.write(
            "usage: python -I facts.py interpreter | versions NAME... | environment | build | record [DIR...]\n"
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
