"""Reading an answer within bounds, and decoding it into JSON the mirror can store.

Split from ``client.py``: this is what stands between a broken or hostile service and the rest
of the app. Every answer is read as a stream, its size counted before and after decompression
(``MAX_RESPONSE_BYTES``), under a deadline for the whole exchange (``REQUEST_DEADLINE``: a
watchdog shuts the connection's socket when it passes, whatever phase the exchange is in, since
connect and read timeouts bound each socket operation, not their sum). The body is then
decoded as RFC 8259 JSON, nesting bounded (``MAX_JSON_DEPTH``), and the two things in valid
JSON that no database column takes are made storable: lone surrogates (``"\\ud83d"``) and NUL
characters (``"\\u0000"``) become U+FFFD, in keys and values alike. Replaced, not removed: an
id ``"or_1\\u0000"`` must not become another order's ``"or_1"``, and the mark stays visible.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import zlib
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import urllib3
import urllib3.connection

from .page_parsing import NOT_PLAIN, decode_plain

#: Objects and arrays nested deeper than this are refused: real answers nest about 6 deep.
MAX_JSON_DEPTH = 64
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


# --- JSON -----------------------------------------------------------------------------------------

#: Only what matters to nesting: quotes (to skip strings) and brackets.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTED = re.compile(rb'"[^"]*"')
_DELTA = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
#: Escapes that decode to text no database stores: NUL, and (lone) surrogates.
_UNSTORABLE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_SURROGATE = re.compile("[\ud800-\udfff]")


def nesting_depth_exceeds(body: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests objects and arrays deeper than ``limit``.

    Done on the text, before decoding: the standard decoder recurses once per level and
    raises ``RecursionError`` (or exhausts a thread's small stack) long before it says
    anything useful. All in C but the last step: escaped backslashes and quotes are dropped,
    then everything but quotes and brackets, then the strings (a bracket inside one is not
    nesting); what is left is brackets only, a few per record.
    """
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    skeleton = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = _QUOTED.sub(b"", skeleton).replace(b'"', b"")  # an unclosed one: not JSON anyway
    depth = 0
    for start in range(0, len(brackets), 65536):  # a slice at a time: a bomb fails fast
        levels = list(
            accumulate(map(_DELTA.__getitem__, brackets[start : start + 65536]), initial=depth)
        )
        if max(levels) > limit:
            return True
        depth = levels[-1]
    return False


def decode_json(body: bytes | str) -> Any:
    """An answer's body as JSON as RFC 8259 defines it, made storable; ``ValueError`` if not.

    ``NaN`` and ``Infinity`` are refused (neither database stores them in a JSON column), as is
    nesting deeper than ``MAX_JSON_DEPTH``. The bytes are read as RFC 8259 has them, UTF-8
    (UTF-16 and -32 detected), whatever charset the Content-Type names. Lone surrogates and
    NULs are replaced (see the module docstring): only answers whose text holds
    such an escape are walked, so the cost on ordinary answers is one regular-expression scan.
    """
    if nesting_depth_exceeds(body):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if _UNSTORABLE.search(data):
        value = storable(value)
    return value


def decode_answer(body: bytes) -> tuple[Any, bool]:
    """``decode_json(body)``, and whether msgspec decoded it (``Page.plain``).

    A body without NUL or surrogate escapes goes to ``page_parsing.decode_plain`` first: it
    reads only bodies without floats nested at most ``PLAIN_DEPTH`` (< ``MAX_JSON_DEPTH``)
    deep, the same values as ``decode_json``, without its nesting scan of the text. Anything
    else is ``decode_json``'s, errors and replacements included.
    """
    if not _UNSTORABLE.search(body):
        value = decode_plain(body)
        if value is not NOT_PLAIN:
            return value, True
    return decode_json(body), False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def storable_text(text: str) -> str:
    """``text`` with NULs and lone surrogates replaced by U+FFFD (see the module docstring)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def storable(value: Any) -> Any:
    """A decoded JSON value with every key and string made ``storable_text``."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def why_not_json(exc: ValueError, body: bytes) -> str:
    """The decoder's reason, and where the body does not even start like JSON (a web page, an
    empty answer) the likely cause."""
    if body.lstrip()[:1] not in (b"{", b"["):
        return f"{exc}; is BASE_URL the address of the API?"
    return str(exc)[:300]
