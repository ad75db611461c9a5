"""Reading an answer within bounds: what stands between a broken or hostile service and the app.

Every answer is read as a stream, its size counted before and after decompression
(``MAX_RESPONSE_BYTES``), under a deadline for the whole exchange (``REQUEST_DEADLINE``: a
watchdog shuts the connection's socket when it passes, whatever phase the exchange is in, since
connect and read timeouts bound each socket operation, not their sum). Decoding the bytes that
were read is ``decoding``'s job.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import zlib
from collections.abc import Callable
from typing import Any

import urllib3
import urllib3.connection

#: Bytes read from the socket at a time.
CHUNK = 64 * 1024
#: Seconds between two shots of a watchdog whose deadline passed (the socket may be replaced
#: while it fires, e.g. between connect and send).
REFIRE = 0.25


class AnswerTooLarge(ValueError):
    """The answer is larger than the limit, compressed or decompressed."""


class UnsupportedEncoding(ValueError):
    """The answer's Content-Encoding is one the client did not ask for."""


# --- the deadline ---------------------------------------------------------------------------------

_current = threading.local()


class Deadline:
    """A watchdog for one exchange: when it fires, the connection's socket is shut down, which
    wakes any blocked read or write with an error; ``fired`` then tells that error apart."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.connection: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._done = False

    def __enter__(self) -> Deadline:
        _current.deadline = self
        self._arm(self.seconds)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current.deadline = None
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()

    def _arm(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self._fire)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            # Not ``connection.sock``: http.client drops that reference as soon as an answer
            # says "Connection: close", while the answer's body is still read from the socket.
            sock = getattr(self.connection, "last_sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._arm(REFIRE)

    def check(self) -> None:
        if self.fired:
            raise TimeoutError("the request deadline passed")


def _track(connection: Any) -> Any:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.connection = connection
    return connection


class _TrackedHTTPConnection(urllib3.connection.HTTPConnection):
    last_sock: socket.socket | None = None

    def connect(self) -> None:
        super().connect()
        self.last_sock = self.sock


class _TrackedHTTPSConnection(urllib3.connection.HTTPSConnection):
    last_sock: socket.socket | None = None

    def connect(self) -> None:
        super().connect()
        self.last_sock = self.sock


class _TrackedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


class _TrackedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


#: For ``PoolManager.pool_classes_by_scheme``: pools whose connections a ``Deadline`` can find.
TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


# --- the body -------------------------------------------------------------------------------------


def read_body(response: Any, limit: int, deadline: Deadline) -> bytes:
    """The decoded body of a streamed ``requests`` response, at most ``limit`` bytes.

    Raises ``AnswerTooLarge`` as soon as a declared Content-Length, the bytes received or the
    bytes decompressed pass ``limit`` (memory stays within about ``limit`` plus one chunk),
    ``UnsupportedEncoding`` for a Content-Encoding other than gzip or deflate, and
    ``TimeoutError`` once the deadline fired; network errors from urllib3 pass through.
    """
    declared = response.headers.get("Content-Length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(f"it declares {int(declared):,} bytes")
    decode = _decoder(response.headers.get("Content-Encoding", ""))
    parts: list[bytes] = []
    received = size = 0
    while True:
        deadline.check()
        chunk = response.raw.read(CHUNK, decode_content=False)
        deadline.check()
        if not chunk:
            break
        received += len(chunk)
        if received > limit:
            raise AnswerTooLarge(f"more than {limit:,} bytes arrived")
        data = decode(chunk, limit - size + 1) if decode else chunk
        size += len(data)
        if size > limit:
            raise AnswerTooLarge(f"it decompresses to more than {limit:,} bytes")
        parts.append(data)
    return b"".join(parts)


def _decoder(encoding: str) -> Callable[[bytes, int], bytes] | None:
    """A decompressor that never produces more than it is allowed (``max_length``)."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif name == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise UnsupportedEncoding(f"Content-Encoding {encoding.strip()[:40]!r}")
    state = {"d": zlib.decompressobj(wbits)}

    def decode(data: bytes, room: int) -> bytes:
        out = b""
        while data and room > 0:
            d = state["d"]
            try:
                piece = d.decompress(data, room)
            except zlib.error as exc:
                raise ValueError(f"the compressed body is damaged ({exc})") from None
            out += piece
            room -= len(piece)
            if d.unconsumed_tail:
                return out  # stopped at max_length: more is coming, the caller refuses it
            data = d.unused_data  # a next gzip member, if any
            if data:
                state["d"] = zlib.decompressobj(wbits)
        return out

    return decode
