"""A local HTTP server for a synthetic index that answers range requests as PyPI's file host does.

``http.server`` ignores ``Range``; this handler serves ``bytes=A-B``, ``bytes=A-`` and ``bytes=-N``
with ``206 Partial Content`` and a ``Content-Range``, or, with ``ranges=False``, the whole file
(``200``) as a server without range support does, or, with ``refuse=True``, ``416 Range Not
Satisfiable`` to every range request, as a server that refuses them does
(``200``) as a server without range support does. Every request is logged (path, Range header,
bytes sent) so a test can check what was fetched.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    log: list[tuple[str, str, int]] = field(default_factory=list)  # (path, Range, bytes sent)

    def sent(self, suffix: str = "") -> int:
        return sum(n for path, _r, n in self.log if path.endswith(suffix))


class _Handler(http.server.SimpleHTTPRequestHandler):
    ranges = True
    refuse = False
    served: Served

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        wanted = self.headers.get("Range", "")
        if wanted and self.refuse:
            self.send_error(416)
            self.served.log.append((self.path, wanted, 0))
            return
        found = _RANGE.fullmatch(wanted.strip()) if self.ranges else None
        if found and (found.group(1) or found.group(2)):
            first, last = found.group(1), found.group(2)
            if not first:  # the last N bytes
                start, end = max(0, len(data) - int(last)), len(data) - 1
            else:
                start, end = int(first), min(len(data) - 1, int(last) if last else len(data) - 1)
            if start >= len(data):
                self.send_error(416)
                return
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        content_type = "text/html" if path.suffix == ".html" else "application/octet-stream"
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.served.log.append((self.path, wanted, len(body)))


class Ranges:
    """A fetch over bytes in memory, as a range-serving host answers; counts what it sent."""

    def __init__(self, blob: bytes) -> None:
        self.blob = blob
        self.sent = 0
        self.requests: list[str] = []

    def __call__(self, url: str, wanted: str) -> tuple[int, bytes, int]:
        self.requests.append(wanted)
        first, last = wanted.removeprefix("bytes=").split("-")
        if not first:
            start, end = max(0, len(self.blob) - int(last)), len(self.blob) - 1
        else:
            start, end = int(first), min(int(last), len(self.blob) - 1)
        data = self.blob[start : end + 1]
        self.sent += len(data)
        return start, data, len(self.blob)


@contextmanager
def serve(root: Path, ranges: bool = True, refuse: bool = False) -> Iterator[Served]:
    """Serve ``root`` on a free local port for the ``with`` block."""
    served = Served("")
    handler = type("Handler", (_Handler,), {"ranges": ranges, "refuse": refuse, "served": served})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(root))
    )
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
