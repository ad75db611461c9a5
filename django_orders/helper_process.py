"""Fetching and parsing a walk's pages in a helper process (``SYNC_HELPER = "process"``).

Why a process and not only a thread: a page walk overlaps fetching and parsing page n + 1 with
writing page n, but in one process the two share the interpreter lock. Parsing a page of 256
orders (decoding about 200 KB of JSON, checking each record, encoding and hashing it) is about
15 ms of Python, and each time one of the writer's statements returns, the writer waits for the
lock behind it: measured on 2 cores, a page's statements took 30 ms during a threaded walk
against 17 ms with the parser elsewhere (benchmarks/README.md). A helper process has its own
interpreter, so the writer's process does little more than run the page's statements.

How it works: the sync starts ``python -c BOOTSTRAP`` with the same interpreter and ``sys.path``
and sends it a job (the client's options, the walk's parameters) as a pickle on its stdin, never
on its command line or in its environment, since the job holds the API key. The helper builds
its own client, walks, parses and answers with one frame per page on its stdout (length-prefixed
pickles): the values the mirror stores, records as their canonical JSON, not as decoded objects
(cheap to send and to receive). The helper's log records and its error, if any, travel as frames
too: the sync raises the very error a threaded walk would raise.

Lifetime: the helper is at most one page ahead (a pipe holds less than a page, and the helper
blocks on it), and it ends with the walk. It ignores Ctrl-C (the sync decides when to stop it),
and it exits as soon as its stdin closes: when the sync stops it, and when the sync's process
dies, even by SIGKILL. It never touches the database.

If the helper cannot start (no usable ``sys.executable``, an embedded interpreter...), the walk
falls back to the helper thread and logs a warning: the mirror is the same either way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import IO, Any

from django.views.decorators.debug import sensitive_variables

from .exceptions import OrdersError
from .paging import PageWalk
from .parsing import ParsedCustomer, ParsedOrder, ParsedRecord

logger = logging.getLogger("django_orders.sync")

#: Seconds to wait for the helper to start (import its modules) before walking in a thread.
START_TIMEOUT = 30.0
#: Seconds to wait for a stopped helper to exit before killing it.
STOP_TIMEOUT = 5.0

#: The loggers the helper's code logs to (client retries, the page window, page re-reads).
HELPER_LOGGERS = ("django_orders.client", "django_orders.paging", "django_orders.sync")

_FRAME_HEADER = struct.Struct("!I")

#: Run by the helper's interpreter. Only builtins come before ``sys.path`` is set: the job is a
#: dict of plain values. A failure to import is reported as a frame, so the sync can say why.
BOOTSTRAP = """\
import pickle, struct, sys
out = sys.stdout.buffer
try:
    job = pickle.load(sys.stdin.buffer)
    sys.path[:0] = [p for p in job["path"] if p not in sys.path]
    from django_orders.helper_process import serve
except BaseException as exc:
    data = pickle.dumps(("unavailable", f"{type(exc).__name__}: {exc}"))
    out.write(struct.pack("!I", len(data)) + data)
    out.flush()
    raise SystemExit(1)
serve(job, sys.stdin.buffer, out)
"""


class HelperUnavailable(OrdersError):
    """The helper process could not be started; the walk uses a helper thread instead."""


class HelperProcessError(OrdersError):
    """The helper process ended without finishing the walk or reporting an error."""


# --- the sync's side ----------------------------------------------------------------------------


# The job holds the API key; Django's error reports print frame locals.
@sensitive_variables("client_options", "job")
def fetched_in_process(walk: PageWalk, client_options: dict[str, Any]) -> Iterator[list]:
    """Start a helper process for ``walk`` and return an iterator over its parsed pages.

    Yields lists of ``ParsedOrder`` (resource ``orders``) or ``ParsedRecord``, as
    ``prefetch.fetched_ahead`` does; when the walk ends, ``walk.end_reason`` and
    ``walk.pages_read`` say what they would have said after a walk in this process. Raises
    ``HelperUnavailable`` (before anything is fetched) if the helper cannot start.
    ``client_options`` are ``OrdersClient``'s keyword arguments (``settings_options()``).
    """
    from .prefetch import run_ahead  # prefetch imports the client; keep this module light

    job = {
        "path": list(sys.path),
        "client": client_options,
        "walk": {
            "resource": walk.resource,
            "collection": walk.collection,
            "page_size": walk.page_size,
            "max_pages": walk.max_pages,
        },
        # The lowest level any of the helper's loggers would pass here: records below it would
        # be dropped on arrival anyway, so they are not sent.
        "log_level": min(logging.getLogger(name).getEffectiveLevel() for name in HELPER_LOGGERS),
    }
    process = _start(job)

    def stop() -> None:
        _stop(process)

    return run_ahead(_pages(process, walk), name="django-orders-page-helper", on_stop=stop)


@sensitive_variables("job")
def _start(job: dict[str, Any]) -> subprocess.Popen:
    # Embedded interpreters (uWSGI, mod_wsgi) set sys.executable to their own binary, or to
    # nothing; started with "-c", it would not run Python at all.
    name = os.path.basename(sys.executable or "").lower()
    if not name.startswith(("python", "pypy")):
        raise HelperUnavailable(f"sys.executable {sys.executable!r} is not a Python interpreter")
    try:
        # This interpreter, running fixed code: nothing here comes from outside.
        process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError) as exc:
        raise HelperUnavailable(f"could not start {sys.executable!r}: {exc}") from None
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        process.stdin.flush()
        # A helper that hangs while starting is killed, which ends the read below.
        timer = threading.Timer(START_TIMEOUT, process.kill)
        timer.start()
        try:
            first = _read_frame(process.stdout)
        finally:
            timer.cancel()
    except OSError as exc:
        first = ("unavailable", f"{type(exc).__name__}: {exc}")
    if first != ("ready",):
        _stop(process)
        reason = first[1] if first is not None and first[0] == "unavailable" else None
        raise HelperUnavailable(reason or f"it exited with code {process.returncode}")
    return process


def _stop(process: subprocess.Popen) -> None:
    """Close the helper's stdin (it exits at once), wait for it, kill it if it does not.

    Its stdout is closed last: a reader blocked on it returns once the helper has exited.
    """
    with contextlib.suppress(OSError):  # it has exited already (a broken pipe)
        process.stdin.close()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stdout.close()


def _pages(process: subprocess.Popen, walk: PageWalk) -> Iterator[list]:
    """The helper's frames as parsed pages; runs on the reader thread of ``run_ahead``."""
    decode = _decode_orders if walk.resource == "orders" else _decode_records
    while True:
        try:
            frame = _read_frame(process.stdout)
        except (OSError, ValueError):
            frame = None  # the stream was closed: the sync is stopping the helper
        if frame is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_TIMEOUT)
            raise HelperProcessError(
                "The page helper process ended before the walk was done "
                f"(exit code {process.returncode})."
            )
        kind = frame[0]
        if kind == "page":
            yield decode(frame[1])
        elif kind == "log":
            record = logging.makeLogRecord(frame[1])
            logging.getLogger(record.name).handle(record)
        elif kind == "end":
            walk.end_reason, walk.pages_read = frame[1], frame[2]
            return
        elif kind == "error":
            raise frame[1]
        else:
            raise HelperProcessError(f"The page helper process sent an unknown frame {kind!r}.")


def _read_frame(stream: IO[bytes]) -> tuple | None:
    """The next frame, or None at the end of the stream."""
    header = stream.read(_FRAME_HEADER.size)
    if len(header) < _FRAME_HEADER.size:
        return None
    (size,) = _FRAME_HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 (our own child process, started just above)


def _decode_orders(rows: list[tuple]) -> list[ParsedOrder]:
    return [
        ParsedOrder(
            id=order_id,
            status=status,
            initiated_at=initiated_at,
            completed_at=completed_at,
            customer=ParsedCustomer.from_json(*customer),
            raw=None,
            fingerprint=fingerprint,
            raw_json=raw_json,
            total=total,
            currency=currency,
            number=number,
            payment_url=payment_url,
            paid_at=paid_at,
            canceled_at=canceled_at,
            expires_at=expires_at,
        )
        for (
            order_id,
            status,
            initiated_at,
            completed_at,
            fingerprint,
            raw_json,
            customer,
            (total, currency, number, payment_url, paid_at, canceled_at, expires_at),
        ) in rows
    ]


def _decode_records(rows: list[tuple]) -> list[ParsedRecord]:
    return [ParsedRecord(id_, None, fingerprint, text) for id_, fingerprint, text in rows]


# --- the helper's side --------------------------------------------------------------------------


def serve(job: dict[str, Any], stdin: IO[bytes], out: IO[bytes]) -> None:
    """The helper process: walk, parse, and send one frame per page (see the module docstring)."""
    import signal

    from .client import OrdersClient
    from .page_parsing import parse_fetched
    from .parsing import parse_order, parse_record
    from .prefetch import page_walk

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sync decides when the helper stops

    def exit_when_closed() -> None:
        # The sync closes our stdin to stop us, and so does its death: exit at once, even in
        # the middle of a request or a backoff sleep. A raw read: a buffered one would hold the
        # stream's lock, which the interpreter's own shutdown waits for.
        while os.read(stdin.fileno(), 65536):
            pass
        os._exit(0)

    threading.Thread(target=exit_when_closed, daemon=True).start()
    lock = threading.Lock()

    def send(frame: tuple) -> None:
        data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        with lock:
            out.write(_FRAME_HEADER.pack(len(data)) + data)
            out.flush()

    _forward_logs(send, job["log_level"])
    send(("ready",))
    try:
        client = OrdersClient(**job["client"])
        try:
            walk = page_walk(client, **job["walk"])
            is_orders = walk.resource == "orders"
            parse = parse_order if is_orders else parse_record
            encode = _encode_orders if is_orders else _encode_records
            for page in walk:
                parsed = parse_fetched(page, parse, resource=walk.resource)
                send(("page", encode(parsed)))
            send(("end", walk.end_reason, walk.pages_read))
        finally:
            client.close()
    except BrokenPipeError:
        pass  # the sync is gone
    except BaseException as exc:  # handed to the sync, raised there
        with contextlib.suppress(BrokenPipeError):
            send(("error", _transportable(exc)))
    # Every frame is flushed; nothing else is left to do, so no interpreter shutdown either.
    os._exit(0)


def _encode_orders(orders: list[ParsedOrder]) -> list[tuple]:
    return [
        (
            order.id,
            order.status,
            order.initiated_at,
            order.completed_at,
            order.fingerprint,
            order.raw_json,
            (c.id, c.guest, c.name, c.raw_json, c.fingerprint, c.email_address, c.phone_number),
            (
                order.total,
                order.currency,
                order.number,
                order.payment_url,
                order.paid_at,
                order.canceled_at,
                order.expires_at,
            ),
        )
        for order in orders
        for c in (order.customer,)
    ]


def _encode_records(records: list[ParsedRecord]) -> list[tuple]:
    return [(record.id, record.fingerprint, record.raw_json) for record in records]


def _transportable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling; otherwise a ``HelperProcessError`` with its text. An
    error that is not one of ours carries the helper's traceback as a note, for debugging."""
    if not isinstance(exc, OrdersError):
        exc.add_note("In the page helper process:\n" + "".join(traceback.format_exception(exc)))
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301
    except Exception:
        return HelperProcessError(f"{type(exc).__name__}: {exc}")
    return exc


class _FrameHandler(logging.Handler):
    def __init__(self, send: Callable[[tuple], None]) -> None:
        super().__init__()
        self.send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # The record as logging.makeLogRecord rebuilds it: the message already formatted
            # (its arguments may not pickle), a traceback as text.
            values = dict(record.__dict__, msg=record.getMessage(), args=None, exc_info=None)
            if record.exc_info and not record.exc_text:
                values["exc_text"] = logging.Formatter().formatException(record.exc_info)
            self.send(("log", values))
        except Exception:
            self.handleError(record)


def _forward_logs(send: Callable[[tuple], None], level: int) -> None:
    """Send the helper's ``django_orders`` log records to the sync, which logs them again under
    the same logger names, so they reach the project's own logging configuration."""
    package = logging.getLogger("django_orders")
    package.setLevel(level)
    package.addHandler(_FrameHandler(send))
    package.propagate = False
