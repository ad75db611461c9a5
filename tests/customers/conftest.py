"""Fixtures for the known-customer and offline-payment tests: the bodies the sandbox read, by
path, and no real sleeping in the client's retries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from django_orders.testing.sandbox.handler import Handler

#: ``ensure_customer``'s usual input.
AMA = {
    "reference": "user-42",
    "name": "Ama Mensah",
    "email_address": "ama@example.com",
    "phone_number": "+233241234567",
}


@pytest.fixture(autouse=True)
def no_client_sleep(fresh_client) -> list[float]:
    return fresh_client


class Received:
    """What the in-process sandbox read off the socket: (path, headers, body), in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for p, _h, body in self.requests if p == path]

    def headers(self, path: str) -> list[dict[str, str]]:
        with self.lock:
            return [headers for p, headers, _b in self.requests if p == path]

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _h, _b in self.requests]


@pytest.fixture
def received(monkeypatch) -> Iterator[Received]:
    log = Received()
    original = Handler._read_body

    def recording(self):
        raw = original(self)
        with log.lock:
            log.requests.append((self.path, dict(self.headers.items()), raw))
        return raw

    monkeypatch.setattr(Handler, "_read_body", recording)
    yield log
