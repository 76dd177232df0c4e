"""The package index, and nothing else, for a confined build (``edges/sandbox.py``).

A project's install runs its own build code (``setup.py``, an in-tree backend) in a sandbox with
no network (``--unshare-net``). uv inside reaches the index through this gate: an HTTPS proxy
(``CONNECT`` only) that we run outside the sandbox on a Unix socket, which lets through only the
index's hosts on port 443. Inside, a forwarder (``FORWARDER``, stdlib Python) listens on the
sandbox's own loopback and hands each connection to that socket; uv finds it through
``HTTPS_PROXY``. So the build code reaches the index's hosts and nothing else: not the host's
listeners (another network namespace), not another site. TLS is end to end (the gate only
joins two sockets after ``CONNECT``).
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit

PORT = 3128  # inside the sandbox's own network namespace: no clash with the host's
PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org")
CONNECT_TIMEOUT_S = 30.0

# Runs inside the sandbox: listens on 127.0.0.1:PORT, joins each connection to the gate's
# socket, runs the command and exits with its status (the PID namespace ends the rest).
FORWARDER = r"""
import os, select, socket, subprocess, sys, threading
gate, port, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port)); server.listen(64)
def pipe(a, b):
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [])
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close(); b.close()
def serve():
    while True:
        client, _ = server.accept()
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(gate)
        except OSError:
            client.close(); continue
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
sys.exit(subprocess.call(command))
"""


def index_hosts(urls: Iterable[str]) -> set[str]:
    """The hosts a build may reach: each http(s) index URL's host; PyPI where none is given or
    PyPI is one (its files live on files.pythonhosted.org)."""
    hosts = {urlsplit(u).hostname or "" for u in urls if u.startswith(("http://", "https://"))}
    hosts.discard("")
    if not hosts or hosts & set(PYPI_HOSTS):
        hosts |= set(PYPI_HOSTS)
    return hosts


class IndexGate:
    """The gate's proxy, serving on ``socket_path`` until ``close``; ``refused`` names the
    destinations it turned away (the side's log says them)."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.hosts = frozenset(h.lower() for h in hosts)
        self.folder = Path(tempfile.mkdtemp(prefix="tm-gate-"))
        self.socket_path = str(self.folder / "gate.sock")
        self.refused: list[str] = []
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(self.socket_path)
        os.chmod(self.socket_path, 0o777)  # a sandbox mapped to another user connects too
        os.chmod(self.folder, 0o755)
        self._server.listen(64)
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 16384:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split()
            host, _, port = (parts[1] if len(parts) == 3 else "").rpartition(":")
            if parts[:1] != ["CONNECT"] or host.lower() not in self.hosts or port != "443":
                self.refused.append(line[:200])
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            upstream = socket.create_connection((host, 443), timeout=CONNECT_TIMEOUT_S)
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _join(client, upstream)
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> IndexGate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _join(a: socket.socket, b: socket.socket) -> None:
    while True:
        ready, _, _ = select.select([a, b], [], [])
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)


def proxy_env() -> dict[str, str]:
    """What uv inside the sandbox needs to go through the forwarder."""
    url = f"http://127.0.0.1:{PORT}"
    return {"HTTPS_PROXY": url, "https_proxy": url, "HTTP_PROXY": url, "http_proxy": url}


def forwarded(python: str, gate: IndexGate, argv: list[str]) -> list[str]:
    """``argv`` started behind the forwarder (inside the sandbox)."""
    return [python, "-c", FORWARDER, gate.socket_path, str(PORT), *argv]
