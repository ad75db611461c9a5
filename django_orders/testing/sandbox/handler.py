"""HTTP plumbing: request ids, body parsing, auth, routing and fault application.

Order of checks follows the real service: unknown path (404), wrong method (405),
credential (401), body (400), then the operation. Faults are applied after auth,
so an armed fault never fires for a request that would have been refused anyway.
The hosted payment page under ``/pay/`` is the customer's browser, not the API:
no key, HTML answers, no faults. What answers each path comes in a routing table (``Routes``),
built one level up by ``server``, so this module imports none of the modules that answer.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .errors import ApiError, Reply, not_found, server_error
from .faults import MISANSWER_KINDS, RESPONSE_KINDS, Fault, FaultRegistry
from .idempotency import request_key
from .pacing import Pacing

logger = logging.getLogger("django_orders.testing.sandbox")

MAX_BODY = 1024 * 1024
#: The key the sandbox accepts unless started with another (``--api-key``).
DEFAULT_API_KEY = "sk_test_sandbox"
#: The 401's ``detail``: what a wrong key means here (``check_orders_api`` prints it).
WRONG_KEY_DETAIL = (
    "This is the django-orders sandbox: it accepts only the key it was started with (--api-key, "
    f"else $ORDERS_SANDBOX_API_KEY, else {DEFAULT_API_KEY}; it says which when it starts). Set "
    'DJANGO_ORDERS["API_KEY"] (ORDERS_API_KEY in the README\'s settings) to that key.'
)
DRAIN_LIMIT = 16 * MAX_BODY
HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


@dataclass(frozen=True)
class Routes:
    """What answers a request, and what the plumbing checks first, for one sandbox."""

    api_key: str
    #: The API's paths, and those of its writes that store their answer under a key.
    api_paths: frozenset[str]
    keyed_paths: frozenset[str]
    #: ``(path, payload, delay, Idempotency-Key header) -> Reply``: one API call.
    api: Callable[[str, dict[str, Any], float, str | None], Reply]
    #: Drops a stored answer (the ``error_after_write`` fault without ``keep_key``).
    forget_key: Callable[[str, str], None]
    pacing: Pacing
    faults: FaultRegistry
    #: The hosted payment page: its path prefix and ``(method, path) -> Reply``.
    browser: tuple[str, Callable[[str, str], Reply]]
    #: The control endpoints, None unless enabled: prefix and ``(path, payload) -> Reply``.
    control: tuple[str, Callable[[str, dict[str, Any]], Reply]] | None = None
    #: ``(fault kind, reply) -> Reply``: the answer a ``MISANSWER_KINDS`` fault sends instead.
    misanswer: Callable[[str, Reply], Reply] | None = None


class AppServer(ThreadingHTTPServer):
    """A threaded HTTP server whose handlers find what answers as ``self.server.routes``."""

    daemon_threads = True
    allow_reuse_address = True
    #: The listen backlog. ``socketserver``'s default of 5 is fewer than the lookups a refresh
    #: pool opens at once (``REFRESH_CONCURRENCY``, 8 by default): when the accepting thread
    #: lags (a busy interpreter), a connection past the backlog is dropped and its client tries
    #: again a second later, which shows as a pool with fewer lookups in flight.
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], routes: Routes
    ) -> None:
        self.routes = routes
        super().__init__(address, handler)


class Handler(BaseHTTPRequestHandler):
    """One request per call; keep-alive (HTTP/1.1) like a real API front end."""

    protocol_version = "HTTP/1.1"
    server: AppServer
    server_version = "orders-sandbox"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every answer on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def log_message(self, format: str, *args: Any) -> None:
        # The stdlib logs the request line only (never headers), to stderr; route it to logging.
        logger.debug("%s - " + format, self.client_address[0], *args)

    # -------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        self.request_id = "req_" + secrets.token_hex(12)
        routes = self.server.routes
        path = urlsplit(self.path).path
        try:
            raw = self._read_body()
            browser_prefix, browser = routes.browser
            if path.startswith(browser_prefix):
                # The customer's browser: no key, form posts, HTML answers, never a fault.
                self._send(browser(method, path))
            elif routes.control is not None and path.startswith(routes.control[0]):
                self._require_post(method)
                self._send(routes.control[1](path, self._parse(raw)))
            elif path not in routes.api_paths:
                raise not_found(path)
            else:
                self._require_post(method)
                self._authenticate(routes)
                self._require_json(raw)
                self._api(routes, path, self._parse(raw))
        except ApiError as exc:
            self._send(exc.reply())
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. its read timeout during a `slow` fault): nothing to send.
            logger.debug(
                "client went away during %s %s (request %s)", method, path, self.request_id
            )
            self.close_connection = True
        except Exception:
            logger.exception("sandbox failed on %s %s (request %s)", method, path, self.request_id)
            self._send(server_error(500).reply())

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True  # the unread chunks would poison the next request
            raise ApiError(411, "length_required", "Send the body with a Content-Length.")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise ApiError(400, "invalid_request", "Content-Length is not a number.") from None
        if length > MAX_BODY:
            self.close_connection = True
            # Read (and drop) a body of sane size first: a client still sending when the
            # connection closes sees a broken pipe instead of the 413.
            remaining = length if length <= DRAIN_LIMIT else 0
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
            raise ApiError(
                413,
                "payload_too_large",
                f"The request body is too large: at most {MAX_BODY} bytes.",
            )
        return self.rfile.read(length) if length else b""

    @staticmethod
    def _require_post(method: str) -> None:
        if method != "POST":
            raise ApiError(
                405,
                "method_not_allowed",
                f"{method} is not allowed; use POST.",
                headers={"Allow": "POST"},
            )

    def _require_json(self, raw: bytes) -> None:
        """A body must say it is JSON (415 otherwise, like the provider's front end)."""
        media = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if raw and media != "application/json":
            raise ApiError(
                415,
                "unsupported_media_type",
                f"Content-Type {media or '(none)'!r} is not supported; send application/json.",
                detail="Every request body is a JSON object sent as application/json.",
            )

    def _authenticate(self, routes: Routes) -> None:
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {routes.api_key}".encode()):
            raise ApiError(
                401,
                "unauthorized",
                "Invalid credential: send 'Authorization: Bearer <API key>' with the"
                " complete, active key.",
                type="authentication_error",
                # Said by the sandbox only: the usual mistake against it is pointing a project
                # with its real (or no) key at it. The key itself is never quoted.
                detail=WRONG_KEY_DETAIL,
            )

    @staticmethod
    def _parse(raw: bytes) -> dict[str, Any]:
        if not raw.strip():
            return {}
        try:
            payload = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(
                400, "invalid_request", f"The request body is not valid JSON: {exc}."
            ) from None
        if not isinstance(payload, dict):
            raise ApiError(400, "invalid_request", "The request body must be a JSON object.")
        return payload

    def _api(self, routes: Routes, path: str, payload: dict[str, Any]) -> None:
        # Counted as in flight while the latency passes, and no longer once the answer goes
        # out: a client that sends its next request on receiving this answer never finds
        # this one still counted.
        with routes.pacing.answering():
            routes.pacing.delay()
        retry_after = routes.pacing.admit()
        if retry_after is not None:
            raise ApiError(
                429,
                "rate_limited",
                "Too many requests; retry later.",
                type="rate_limit_error",
                headers={"Retry-After": str(retry_after)},
            )
        fault = routes.faults.take(path, RESPONSE_KINDS)
        if fault is not None:
            logger.info("fault %s fires on %s (request %s)", fault.kind, path, self.request_id)
            if self._fault_before(fault):
                return
        delay = fault.seconds if fault is not None and fault.kind == "slow" else 0.0
        header_key = self.headers.get("Idempotency-Key")
        try:
            reply = routes.api(path, payload, delay, header_key)
        except ApiError as exc:
            reply = exc.reply()
        if fault is None or fault.kind == "slow":
            self._send(reply)
        elif fault.kind == "hold_answer":
            time.sleep(fault.seconds)  # read before the wait: the answer is old when it lands
            self._send(reply)
        elif fault.kind == "drop_after_commit":
            self.close_connection = True  # nothing written: the client sees the socket close
        elif fault.kind == "error_after_write":
            if not fault.keep_key and path in routes.keyed_paths:
                key = request_key(payload, header_key)
                if key is not None:
                    routes.forget_key(path, key)
            self._send(server_error(fault.status).reply())
        elif fault.kind == "malformed_json":
            self._send(Reply(200, reply.body[: max(1, len(reply.body) // 2)]))
        elif fault.kind in MISANSWER_KINDS and routes.misanswer is not None:
            self._send(routes.misanswer(fault.kind, reply))
        else:
            self._send(reply)

    def _fault_before(self, fault: Fault) -> bool:
        """Send the answer of a fault that replaces the operation; True if sent."""
        if fault.kind == "error_before_write":
            self._send(server_error(fault.status).reply())
        elif fault.kind == "rate_limit":
            self._send(
                ApiError(
                    429,
                    "rate_limited",
                    "Too many requests; retry later.",
                    type="rate_limit_error",
                    headers={"Retry-After": str(fault.retry_after)},
                ).reply()
            )
        elif fault.kind == "html_502":
            self._send(Reply(502, HTML_502, content_type="text/html"), request_id=False)
        else:
            return False
        return True

    def _send(self, reply: Reply, *, request_id: bool = True) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        if request_id:
            self.send_header("X-Request-Id", self.request_id)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)
