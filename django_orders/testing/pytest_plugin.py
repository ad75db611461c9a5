"""A pytest plugin for a shop's own tests: ``orders_sandbox``, a running sandbox of the service,
and ``webhook_receiver``, a loopback receiver of django-orders' webhooks.

Registered as a ``pytest11`` entry point (or ``-p django_orders.testing.pytest_plugin``). Tests
that call ``create_order`` need ``@pytest.mark.django_db(transaction=True)``. What the fixture
does and offers: docs/reference/testing.md.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from django_orders.testing.sandbox.server import SandboxServer
from django_orders.webhooks import WebhookVerificationError, verify

__all__ = ["WebhookReceiver", "orders_sandbox", "webhook_receiver"]


@pytest.fixture
def orders_sandbox(settings: Any, tmp_path: Path) -> Iterator[SandboxServer]:
    """A running sandbox, with ``DJANGO_ORDERS["API_KEY"]`` and ``["BASE_URL"]`` pointing at it.

    The provider's page window is on (pages past 10 answer 400; ``.page_cap = None`` lifts it
    for a test that walks more pages), the search index is current (``.configure_search(...)``
    delays it, makes it partial or unavailable, expires cursors) and the control switches
    (faults, clock, seeding) are enabled.
    """
    key = "sk_test_" + secrets.token_urlsafe(24)
    server = SandboxServer(
        tmp_path / "orders-sandbox.sqlite3", key, host="127.0.0.1", port=0, enable_control=True
    ).start()
    try:
        configured = getattr(settings, "DJANGO_ORDERS", None) or {}
        settings.DJANGO_ORDERS = {**configured, "API_KEY": key, "BASE_URL": server.url}
        yield server
    finally:
        server.stop()


@dataclass
class ReceivedWebhook:
    """One POST the receiver got: its headers, raw body, the answer it gave and, when the
    receiver has a ``secret``, the verified body (``payload``) or why it did not verify."""

    headers: dict[str, str]
    body: bytes
    status: int | None
    payload: dict[str, Any] | None = None
    problem: str = ""
    #: Whether it was answered 2xx (what counts as delivered).
    accepted: bool = False

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def type(self) -> str:
        return (self.payload or json.loads(self.body)).get("type", "")


@dataclass
class WebhookReceiver:
    """A loopback receiver: records every delivery, verifies it with ``secret`` (set it to the
    secret ``create_webhook_endpoint`` returned), and fails on command.

    ``fail_next(n, status=500)``, ``drop_next(n)`` (the connection closed, no answer),
    ``hang_next(n, seconds)`` (the answer comes after ``seconds``), ``fail_rate(p, seed=...)``
    (each delivery fails with probability ``p``, half of them as a dropped connection), and
    ``answer_gone()`` (410 from now on), ``delay_answers(seconds)`` (every answer waits that
    long, as a receiver doing work would). ``accepted`` lists the deliveries answered 2xx;
    ``wait_for(n)`` waits until that many (bounded). ``overlaps`` lists the ``webhook-id`` of
    every delivery that arrived while another of the same event was still being answered (a
    runner's claim prevents it; only a retry after a timed-out, still hanging answer shows).
    """

    url: str = ""
    secret: str | None = field(default=None, repr=False)
    received: list[ReceivedWebhook] = field(default_factory=list)
    _plan: list[tuple[str, float]] = field(default_factory=list)
    _rate: float = 0.0
    _random: random.Random = field(default_factory=random.Random)
    _gone: bool = False
    _delay: float = 0.0
    overlaps: list[str] = field(default_factory=list)
    _in_flight: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        self._plan.extend([("status", float(status))] * count)

    def drop_next(self, count: int = 1) -> None:
        self._plan.extend([("drop", 0.0)] * count)

    def hang_next(self, count: int = 1, seconds: float = 5.0) -> None:
        self._plan.extend([("hang", seconds)] * count)

    def fail_rate(self, rate: float, *, seed: int = 0) -> None:
        self._rate, self._random = rate, random.Random(seed)

    def answer_gone(self) -> None:
        self._gone = True

    def delay_answers(self, seconds: float) -> None:
        self._delay = seconds

    def _arrived(self, webhook_id: str) -> None:
        with self._lock:
            if self._in_flight.get(webhook_id):
                self.overlaps.append(webhook_id)
            self._in_flight[webhook_id] = self._in_flight.get(webhook_id, 0) + 1

    def _answered(self, webhook_id: str) -> None:
        with self._lock:
            self._in_flight[webhook_id] -= 1

    @property
    def accepted(self) -> list[ReceivedWebhook]:
        with self._lock:
            return [hook for hook in self.received if hook.accepted]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedWebhook]:
        deadline = time.monotonic() + timeout
        while len(self.accepted) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.accepted

    def _decide(self) -> tuple[str, float]:
        with self._lock:
            if self._gone:
                return "status", 410.0
            if self._plan:
                return self._plan.pop(0)
            if self._rate and self._random.random() < self._rate:
                return ("drop", 0.0) if self._random.random() < 0.5 else ("status", 503.0)
        return "status", 200.0

    def _record(self, headers: dict[str, str], body: bytes, status: int | None) -> None:
        hook = ReceivedWebhook(headers, body, status, accepted=status is not None and status < 300)
        if self.secret is not None:
            try:
                hook.payload = verify(body, headers, self.secret)
            except WebhookVerificationError as exc:
                hook.problem = str(exc)
        with self._lock:
            self.received.append(hook)


def _handler(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if len(body) < length:
                # The sender went away mid-request (a killed runner): a real server drops such
                # a request unread, so it is neither received nor answered.
                self.close_connection = True
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            webhook_id = headers.get("webhook-id", "")
            receiver._arrived(webhook_id)
            try:
                self._answer(headers, body)
            finally:
                receiver._answered(webhook_id)

        def _answer(self, headers: dict[str, str], body: bytes) -> None:
            if receiver._delay:
                time.sleep(receiver._delay)
            action, value = receiver._decide()
            if action == "drop":
                receiver._record(headers, body, None)
                self.close_connection = True
                self.connection.close()
                return
            if action == "hang":
                time.sleep(value)
                action, value = "status", 200.0
            status = int(value)
            receiver._record(headers, body, status)
            answer = b'{"ok": true}' if status < 300 else b'{"error": "as told"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            try:
                self.wfile.write(answer)
            except OSError:  # the sender gave up (its timeout): what a real receiver sees
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def webhook_receiver(settings: Any) -> Iterator[WebhookReceiver]:
    """A running ``WebhookReceiver`` on a free loopback port, its host added to
    ``DJANGO_ORDERS["WEBHOOK_ALLOWED_HOSTS"]`` (loopback is refused otherwise)."""
    receiver = WebhookReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    configured = dict(getattr(settings, "DJANGO_ORDERS", None) or {})
    allowed = list(configured.get("WEBHOOK_ALLOWED_HOSTS") or ())
    settings.DJANGO_ORDERS = {**configured, "WEBHOOK_ALLOWED_HOSTS": [*allowed, "127.0.0.1"]}
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
