"""One bounded HTTP GET: what an index serves is read with a cap, a deadline and a retry.

A server is not trusted to be honest or quick: the body is read at most ``limit`` bytes (a
``Content-Length`` over it is refused before the body is read), the whole read has one deadline
(``READ_DEADLINE_S``; a server that drips a byte every few seconds never trips a per-recv
timeout, so that alone is not enough), and a body cut short (fewer bytes than its
``Content-Length``, a reset connection, ``IncompleteRead``) is read again, ``ATTEMPTS`` times in
all. Each limit is a ``ReadFailed`` whose one line names the URL and the limit. HTTP errors
(``HTTPError``) and the status line are the caller's: ``before_body`` sees the response first.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from torch_matrix.vocab.sizes import format_size

READ_DEADLINE_S = (
    300.0  # one read (a listing, a range, a .metadata file), from request to last byte
)
SOCKET_TIMEOUT_S = 30.0  # connect, and each wait for the next bytes
ATTEMPTS = 2  # a body cut short is read once more
_CHUNK = 1 << 16


class ReadFailed(Exception):
    """A read that hit a limit or failed: its one line names the URL (and the limit)."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


class _Cut(Exception):
    def __init__(self, got: int, expected: int | None) -> None:
        super().__init__(got, expected)
        self.got, self.expected = got, expected


def get(
    url: str,
    headers: Mapping[str, str],
    limit: int,
    what: str = "the answer",
    *,
    before_body: Callable[[http.client.HTTPResponse], None] | None = None,
    deadline_s: float | None = None,
    attempts: int = ATTEMPTS,
) -> Answer:
    """GET ``url``: at most ``limit`` bytes of body (``what`` names it in the error line), read
    within ``deadline_s`` (default ``READ_DEADLINE_S``); a cut body is read again. Raises
    ``ReadFailed``; ``urllib.error.HTTPError`` is left to the caller."""
    deadline = READ_DEADLINE_S if deadline_s is None else deadline_s
    for attempt in range(1, attempts + 1):
        try:
            return _once(url, headers, limit, what, before_body, deadline)
        except _Cut as cut:
            if attempt == attempts:
                of = f" of {cut.expected}" if cut.expected is not None else ""
                raise ReadFailed(
                    f"{url}: the connection was cut after {cut.got}{of} bytes, "
                    f"{attempts} times in a row"
                ) from None
    raise AssertionError("unreachable: attempts >= 1")


def _once(
    url: str,
    headers: Mapping[str, str],
    limit: int,
    what: str,
    before_body: Callable[[http.client.HTTPResponse], None] | None,
    deadline_s: float,
) -> Answer:
    started = time.monotonic()
    request = urllib.request.Request(url, headers=dict(headers))
    late = ReadFailed(f"{url}: not read within the {deadline_s:g} s deadline of one read")
    got = 0
    try:
        with urllib.request.urlopen(request, timeout=min(SOCKET_TIMEOUT_S, deadline_s)) as response:
            if before_body is not None:
                before_body(response)
            length_text = response.headers.get("Content-Length", "")
            length = int(length_text) if length_text.strip().isdigit() else None
            if length is not None and length > limit:
                raise ReadFailed(_over(url, what, length, limit))
            chunks = []
            while True:
                if time.monotonic() - started > deadline_s:
                    raise late
                chunk = response.read1(min(_CHUNK, limit + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
                if got > limit:
                    raise ReadFailed(_over(url, what, None, limit))
            if length is not None and got < length:
                raise _Cut(got, length)
            return Answer(response.status, response.headers, b"".join(chunks))
    except urllib.error.HTTPError:
        raise
    except (http.client.IncompleteRead, ConnectionResetError, ConnectionAbortedError) as error:
        raise _Cut(got, getattr(error, "expected", None)) from None
    except TimeoutError:
        if time.monotonic() - started >= deadline_s * 0.99:
            raise late from None
        raise ReadFailed(f"cannot reach {url}: no answer within {SOCKET_TIMEOUT_S:g} s") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as error:
        raise ReadFailed(f"cannot reach {url}: {getattr(error, 'reason', error)}") from None


def _over(url: str, what: str, size: int | None, limit: int) -> str:
    said = f" of {format_size(size)}" if size is not None else ""
    return f"{url}: {what}{said} is over the limit of {format_size(limit)}: not read"
