"""A hostile index (issue 45): an HTTP server of our own on 127.0.0.1 that serves a zip bomb, a
wheel whose end record claims a 4 GB central directory, a body cut mid-way and a body dripped a
byte at a time. ``torch-matrix plan`` reads it in a child process whose peak memory is measured
(``os.wait4``'s ``ru_maxrss``) and whose address space is capped, so a regression fails the test
instead of the machine. What must hold: one line naming the URL and the limit, no traceback,
memory bounded, a wheel that cannot be read judged "not read" (never excluded), a plan that
never hangs. Run with the fault suite: ``python -m pytest -m faults``.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import rangeserver
from tests.synthetic_wheels import build_index

pytestmark = [pytest.mark.faults]

REPO = Path(__file__).resolve().parent.parent
PAIRED = "torchvision-0.16.0-py3-none-any.whl"  # torch 2.1.0's pair: its METADATA is read
TORCH = "torch-2.1.0-py3-none-any.whl"
BOMB_BYTES = 1536 * 1024 * 1024  # METADATA inflates to 1.5 GiB
ADDRESS_SPACE = 6 * 1024**3  # the child's cap: an unbounded read fails there, not the machine
PEAK_RSS = 300 * 1024 * 1024  # bytes: a plan of this small world, whatever the index serves


class Hostile(rangeserver._Handler):
    """The range-serving handler, with some paths made hostile (``modes``: path -> mode)."""

    modes: dict[str, str] = {}
    drip_s = 10.0
    seen: dict[str, int] = {}

    def do_GET(self) -> None:
        mode = self.modes.get(self.path, "")
        self.seen[self.path] = self.seen.get(self.path, 0) + 1
        if mode == "huge":
            return self._huge()
        if mode in ("cut", "cut-once", "drip") and not (
            mode == "cut-once" and self.seen[self.path] > 1
        ):
            data = Path(self.translate_path(self.path)).joinpath("index.html").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if mode == "drip":
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(self.drip_s)
            else:
                self.wfile.write(data[: len(data) // 2])  # then the connection is closed
                self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def _huge(self) -> None:
        """A '6 GB wheel' whose end record claims a 4 GB central directory: the tail is served,
        any other range is zeros, and the server cuts the connection after 1 GiB of them."""
        total, claimed = 6_000_000_000, 0xFFFFFFF0
        offset = total - 22 - claimed
        eocd = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 9, 9, claimed, offset, 0)
        first, _dash, last = self.headers.get("Range", "").removeprefix("bytes=").partition("-")
        start = total - int(last) if not first else int(first)
        end = total - 1 if not first or not last else min(int(last), total - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{total}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if end == total - 1 and end - start + 1 <= 1 << 20:
            self.wfile.write(bytes(end - start + 1 - len(eocd)) + eocd)
            return
        zeros = bytes(1 << 20)
        try:
            for _ in range(min(1024, (end - start) // len(zeros) + 1)):
                self.wfile.write(zeros)
        except OSError:
            pass
        self.close_connection = True


@contextmanager
def hostile(root: Path, modes: dict[str, str], drip_s: float = 10.0) -> Iterator[str]:
    handler = type("H", (Hostile,), {"modes": modes, "drip_s": drip_s, "seen": {}})
    served = rangeserver.Served("")
    handler.served = served
    import http.server
    from functools import partial

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(root))
    )
    server.daemon_threads = True
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def write_bomb(path: Path, dist_info: str, requires: str) -> None:
    """A wheel whose METADATA is a valid header and then 1.5 GiB of one letter (~1.5 MB zipped).

    Written by hand (APPNOTE 4.3): after a full flush deflate starts afresh, so one block's
    compressed bytes repeated are the compressed bytes of the block repeated; seconds, not the
    minute zlib takes to compress 1.5 GiB."""
    header = f"Metadata-Version: 2.1\nName: torchvision\nVersion: 0.16.0\n{requires}\n\n".encode()
    block = b"A" * (8 << 20)
    repeats = BOMB_BYTES // len(block)
    head = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = head.compress(header) + head.flush(zlib.Z_FULL_FLUSH)
    again = zlib.compressobj(9, zlib.DEFLATED, -15)
    middle = again.compress(block) + again.flush(zlib.Z_FULL_FLUSH)
    last = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    data = first + middle * repeats + last
    crc = zlib.crc32(header)
    for _ in range(repeats):
        crc = zlib.crc32(block, crc)
    size = len(header) + len(block) * repeats
    name = f"{dist_info}/METADATA".encode()
    local = struct.pack(
        "<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(data), size, len(name), 0
    )
    central = struct.pack(
        "<4sHHHHHHIIIHHHHHII",
        b"PK\x01\x02",
        20,
        20,
        0,
        8,
        0,
        0x21,
        crc,
        len(data),
        size,
        len(name),
        0,
        0,
        0,
        0,
        0,
        0,
    )
    body = local + name + data
    directory = central + name
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), len(body), 0)
    path.write_bytes(body + directory + end)
    with zipfile.ZipFile(path) as archive:  # a valid zip: the bomb is only in its size
        with archive.open(f"{dist_info}/METADATA") as member:
            assert member.read(len(header)) == header


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """The synthetic index, with no PEP 658 .metadata files (METADATA is read from the wheels)."""
    root = tmp_path_factory.mktemp("hostile")
    index = build_index(root / "index")
    for extra in index.files_dir.glob("*.metadata"):
        extra.unlink()
    return root / "index"


@pytest.fixture(scope="module")
def bomb_world(world: Path, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bomb")
    copy = root / "index"
    subprocess.run(["cp", "-r", str(world), str(copy)], check=True)
    wheel = copy / "files" / PAIRED
    with zipfile.ZipFile(wheel) as original:
        dist_info = next(n for n in original.namelist() if n.endswith("METADATA")).split("/")[0]
        meta = original.read(f"{dist_info}/METADATA").decode()
    requires = "\n".join(line for line in meta.splitlines() if line.startswith("Requires-Dist"))
    write_bomb(wheel, dist_info, requires)
    assert wheel.stat().st_size < 3_000_000  # a small download ...
    with zipfile.ZipFile(wheel) as archive:  # ... that inflates to 1.5 GiB
        assert archive.getinfo(f"{dist_info}/METADATA").file_size > BOMB_BYTES
    return copy


def plan(tmp: Path, url: str, deadline_s: float | None = None, timeout: float = 120):
    """``torch-matrix plan`` against ``url`` in a child: (rc, stdout + stderr, peak RSS bytes,
    seconds). The child's address space is capped at ``ADDRESS_SPACE``."""
    spec = tmp / "matrix.toml"
    spec.write_text(
        f'name = "hostile"\npython = ["current"]\ntorch = ["2.1.0"]\ntorchvision = "paired"\n'
        f'[probes]\nrun = ["install_sanity"]\n[index]\ndefault = "{url}/simple"\nextra = []\n'
        "find_links = []\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCH_MATRIX_", "UV_", "PIP_")) and k != "VIRTUAL_ENV"
    }
    env.update(
        TORCH_MATRIX_SPEC=str(spec),
        TORCH_MATRIX_CACHE_DIR=str(tmp / "index-cache"),
        TORCH_MATRIX_RESULTS=str(tmp / "results"),
        PYTHONPATH=str(REPO),
    )
    code = (
        "import sys\nimport torch_matrix.edges.httpget as h\n"
        "if sys.argv[1]: h.READ_DEADLINE_S = float(sys.argv[1])\n"
        "from torch_matrix.cli import main\nsys.exit(main(sys.argv[2:]))"
    )
    out = tmp / "out.txt"

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    started = time.monotonic()
    with out.open("w") as sink:
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(deadline_s or ""), "plan"],
            cwd=tmp,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=cap,
        )
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                child.kill()
                child.wait()
                raise AssertionError(f"plan still running after {timeout} s: {out.read_text()}")
            time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, out.read_text(), usage.ru_maxrss * 1024, time.monotonic() - started


def one_error(text: str, *needles: str) -> str:
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if "torch-matrix: error:" in line]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def test_a_metadata_zip_bomb_is_one_line_and_memory_stays_bounded(tmp_path, bomb_world):
    """Issue 45: a 1.5 MB wheel whose METADATA inflates to 1.5 GiB made plan use 16.2 GB."""
    with hostile(bomb_world, {}) as url:
        rc, out, peak, _s = plan(tmp_path, url)
    assert peak < PEAK_RSS, f"peak memory {peak / 1e6:.0f} MB\n{out}"
    assert rc == 2, out
    line = one_error(out, f"{url}/files/{PAIRED}", "METADATA", "over the limit of 16.0 MB")
    assert "not read" in line


def test_a_claimed_4_gb_central_directory_is_not_read_and_memory_stays_bounded(tmp_path, world):
    """Issue 45: a '6 GB wheel' claiming a 4 GB directory made plan ask for 4 GB in one range and
    read 1 GiB into memory before an IncompleteRead traceback. Its build facts and size are
    now 'not read': the plan goes on without them (the wheel is not excluded)."""
    with hostile(world, {f"/files/{TORCH}": "huge"}) as url:
        rc, out, peak, _s = plan(tmp_path, url)
    assert peak < PEAK_RSS, f"peak memory {peak / 1e6:.0f} MB\n{out}"
    assert "Traceback" not in out, out
    assert rc == 0, out
    assert "t2.1.0" in out  # the cell is planned: the unread wheel is not excluded


def test_a_listing_cut_mid_body_every_time_is_retried_then_one_line(tmp_path, world):
    """Issue 45: a connection cut mid-body was rc 1 with an http.client.IncompleteRead traceback."""
    with hostile(world, {"/simple/torchvision/": "cut"}) as url:
        rc, out, _peak, _s = plan(tmp_path, url)
    assert rc == 2, out
    one_error(out, f"{url}/simple/torchvision/", "cut after", "2 times")


def test_a_listing_cut_once_is_read_again(tmp_path, world):
    modes = {"/simple/torchvision/": "cut-once"}
    with hostile(world, modes) as url:
        rc, out, _peak, _s = plan(tmp_path, url)
    assert rc == 0, out
    assert "Traceback" not in out and "t2.1.0" in out


@pytest.mark.parametrize("drip_s", [0.5, 10.0])
def test_a_slow_index_meets_one_deadline_per_read(tmp_path, world, drip_s):
    """Issue 45: one byte every 10 s never tripped the 30 s socket timeout, and plan hung. Each
    read has one overall deadline (3 s here, 300 s by default): at 0.5 s a byte no single wait
    is long, yet the read stops at its deadline with one line."""
    with hostile(world, {"/simple/torchvision/": "drip"}, drip_s=drip_s) as url:
        rc, out, _peak, seconds = plan(tmp_path, url, deadline_s=3, timeout=60)
    assert rc == 2, out
    one_error(out, f"{url}/simple/torchvision/", "3 s deadline")
    assert seconds < 25, seconds
