"""Reading an answer within bounds: what stands between a broken or hostile service and the app.

Every answer is read as a stream, its size counted before and after decompression
(``MAX_RESPONSE_BYTES``), under a deadline for the whole exchange (``REQUEST_DEADLINE``: a
watchdog shuts the connection's socket when it passes, whatever phase the exchange is in, since
connect and read timeouts bound each socket operation, not their sum). Decoding the bytes that
were read is ``wire_json``'s job; what one 2xx answer holds once read is an ``Answer``.

What a lookup gives back is here too (``Lookup``, ``RecordLookup``, ``RefundLookup``): plain
records with the time their request was sent, which the mirror stores without knowing how they
were fetched, and imports from this leaf rather than from the client that fetches them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import urllib3
import urllib3.connection

#: Bytes read from the socket at a time.
CHUNK = 64 * 1024
#: Seconds between two shots of a watchdog whose deadline passed (the socket may be replaced
#: while it fires, e.g. between connect and send).
REFIRE = 0.25
#: The longest the watchdog sleeps at once (it looks again then): well under what
#: ``Condition.wait`` accepts.
LONGEST_SLEEP = 3600.0


@dataclass(frozen=True)
class Answer:
    """A 2xx answer, decoded (or its body kept as sent: ``body``)."""

    data: Any
    status_code: int
    request_id: str | None
    #: The body, not decoded (``data`` is ``None``): a page asked for with raw records
    #: (``fetch_page(..., raw=True)``), which ``pages.page_from`` cuts into them.
    body: bytes | None = None


class AnswerTooLarge(ValueError):
    """The answer is larger than the limit, compressed or decompressed."""


class UnsupportedEncoding(ValueError):
    """The answer's Content-Encoding is one the client did not ask for."""


# --- the deadline ---------------------------------------------------------------------------------

_current = threading.local()
logger = logging.getLogger("django_orders.client")


class _Watchdog:
    """One daemon thread that fires each pending ``Deadline`` of the process when it passes.

    Why not a ``threading.Timer`` per exchange: starting a thread for every request is a
    large share of a small request's CPU (figures: benchmarks/README.md). The heap holds
    only the exchanges in flight: a deadline is taken out as its exchange ends. The thread
    starts with the first deadline, and again in a forked child, which has none of its parent's
    threads (``os.register_at_fork`` below).
    """

    def __init__(self) -> None:
        self._wake = threading.Condition(threading.Lock())
        self._pending: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline, seconds: float) -> tuple[float, int, Deadline]:
        """Fire ``deadline`` in ``seconds``; returns what ``forget`` takes."""
        with self._wake:
            entry = (time.monotonic() + seconds, next(self._order), deadline)
            heapq.heappush(self._pending, entry)
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name="django-orders-deadlines", daemon=True
                )
                try:
                    thread.start()
                except BaseException:
                    # No thread (a process at its limit): this exchange fails, the next one
                    # tries again, and nothing of this one stays behind.
                    self._pending.remove(entry)
                    heapq.heapify(self._pending)
                    raise
                self._thread = thread
            elif self._pending[0] is entry:
                self._wake.notify()  # sooner than what the thread sleeps until
        return entry

    def forget(self, entry: tuple[float, int, Deadline]) -> None:
        # A linear search: the heap holds only the exchanges in flight (a few), and taking an
        # entry out as its exchange ends keeps it that small, where leaving finished entries
        # to be skipped when due would keep a deadline's worth of requests (60 s by default).
        with self._wake:
            try:
                self._pending.remove(entry)
            except ValueError:
                return  # already taken out to fire
            heapq.heapify(self._pending)

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    now = time.monotonic()
                    if self._pending and self._pending[0][0] <= now:
                        break
                    # Capped: Condition.wait refuses a timeout past threading.TIMEOUT_MAX, and
                    # a deadline of years would otherwise end this thread, and every deadline.
                    wait = self._pending[0][0] - now if self._pending else None
                    self._wake.wait(None if wait is None else min(wait, LONGEST_SLEEP))
                deadline = heapq.heappop(self._pending)[2]
            try:
                deadline._fire()  # outside the lock: it watches itself again (REFIRE)
            except Exception:  # never let one exchange stop every other's deadline
                logger.exception("A request deadline could not fire")


_WATCHDOG = _Watchdog()


def _new_watchdog() -> None:
    """In a forked child: the parent's thread is not there, and its lock may be held."""
    global _WATCHDOG
    _WATCHDOG = _Watchdog()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_watchdog)


class Deadline:
    """A watchdog for one exchange: when it fires, the connection's socket is shut down, which
    wakes any blocked read or write with an error; ``fired`` then tells that error apart."""

    def __init__(self, seconds: float) -> None:
        if not math.isfinite(seconds):
            # NaN would never compare as due, and would disorder the watchdog's heap.
            raise ValueError(f"a request deadline must be a finite number of seconds: {seconds}")
        self.seconds = seconds
        self.fired = False
        self.connection: Any = None
        self._lock = threading.Lock()
        self._done = False
        self._entry: tuple[float, int, Deadline] | None = None

    def __enter__(self) -> Deadline:
        with self._lock:
            self._entry = _WATCHDOG.watch(self, self.seconds)
        _current.deadline = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current.deadline = None
        with self._lock:
            self._done = True
            entry = self._entry
        if entry is not None:
            _WATCHDOG.forget(entry)

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
            self._entry = _WATCHDOG.watch(self, REFIRE)

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


@dataclass(frozen=True)
class Lookup:
    """One finished lookup: the record, or ``None`` when the service does not know the order.

    ``sent_at``: when its request was sent (the mirror refuses an answer to a request sent
    before the one whose answer it holds: ``mirror.store``); ``None`` counts as when the
    answer is stored.
    """

    order_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None

    @property
    def record_id(self) -> str:
        """The id looked up, under the name every kind of lookup shares (``RecordLookup``)."""
        return self.order_id


@dataclass(frozen=True)
class RecordLookup:
    """One finished lookup of a raw resource's record (``None``: the service does not know it)."""

    record_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None


@dataclass(frozen=True)
class RefundLookup:
    """One finished refund lookup: the record, or ``None`` when the service does not know it."""

    refund_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None
