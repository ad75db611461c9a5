"""Helpers for the client tests: a client with a recorded sleep, a recording mock API.

``Recorder`` scripts ``http_mock`` (tests/fixtures/http.py) with replies and keeps a copy of what
each attempt put on the wire (headers and body bytes) at the moment it was sent, before the
client overwrites the Authorization header of the prepared request.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import responses

from django_orders.client.transport import OrdersClient
from tests.fixtures.http import BASE, KEY, HttpMock, error_body


@dataclass
class Sent:
    url: str
    headers: dict[str, str]
    body: bytes
    kwargs: dict[str, Any]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Reply = tuple[int, dict[str, str], str] | BaseException


@dataclass
class Recorder:
    """A scripted fake of the service over ``responses``: one reply per request, in order."""

    mock: HttpMock
    sent: list[Sent] = field(default_factory=list)

    def script(self, path: str, *replies: Reply) -> None:
        queue = list(replies)

        def answer(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
            body = request.body or b""
            self.sent.append(
                Sent(
                    url=request.url or "",
                    headers=dict(request.headers),
                    body=body if isinstance(body, bytes) else body.encode(),
                    kwargs=dict(getattr(request, "req_kwargs", {})),
                )
            )
            assert queue, f"more requests to {path} than scripted"
            reply = queue.pop(0)
            if isinstance(reply, BaseException):
                raise reply
            return reply

        self.mock.add_callback(responses.POST, BASE + path, callback=answer)


def ok(obj: Any, status: int = 200, request_id: str = "req_ok", **headers: str) -> Reply:
    return (status, {"X-Request-Id": request_id, **headers}, json.dumps(obj))


def error(
    status: int,
    code: str = "some_code",
    message: str = "Something is wrong.",
    request_id: str = "req_err",
    **headers: str,
) -> Reply:
    return (status, {"X-Request-Id": request_id, **headers}, json.dumps(error_body(code, message)))


def page_of(number: int, size: int, count: int, collection: str = "orders") -> Reply:
    records = [{"id": f"or_{number}_{i}"} for i in range(count)]
    return ok(
        {"page": {"number": number, "size": size, collection: records}}, request_id=f"req_p{number}"
    )


@pytest.fixture
def api(http_mock: HttpMock) -> Recorder:
    return Recorder(http_mock)


@pytest.fixture
def make_client(sleeps: list[float]) -> Iterator[Callable[..., OrdersClient]]:
    clients: list[OrdersClient] = []

    def make(**overrides: Any) -> OrdersClient:
        options: dict[str, Any] = {
            "api_key": KEY,
            "base_url": BASE,
            "timeout": (1.5, 7),
            "max_retries": 3,
            "sleep": sleeps.append,
        }
        options.update(overrides)
        client = OrdersClient(**options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


class RawServer:
    """A loopback TCP server that reads one HTTP request per connection and then misbehaves.

    ``mode="close"`` closes the connection without answering (the connection drops after the
    request was sent); ``mode="hang"`` keeps it open without answering until stopped.
    ``requests`` holds the raw bytes of every request received.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: list[bytes] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            self.requests.append(_read_request(conn))
            if self.mode == "close":
                conn.close()
            else:
                self._open.append(conn)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._open:
            conn.close()
        self._sock.close()


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def raw_server() -> Iterator[Callable[[str], RawServer]]:
    servers: list[RawServer] = []

    def start(mode: str) -> RawServer:
        server = RawServer(mode)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def closed_port_url() -> Iterator[str]:
    """A loopback address where nothing listens: connecting is refused at once.

    The port stays bound, without ``listen()``, for the whole test: the kernel refuses
    connections to it, and no server the test starts later can be given it (a port closed at
    once was handed straight to the test's next ``bind(0)``, whose server then answered).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
