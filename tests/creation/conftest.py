"""Fixtures for the order creation tests: valid input, and the raw bodies the sandbox received."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
import responses

from django_orders.testing.sandbox.handler import Handler
from tests.fixtures.payloads import create_order_input


@pytest.fixture
def mocked():
    """``responses`` for the unit tests of the create path: every HTTP call is scripted."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


@pytest.fixture
def order_input() -> dict:
    """Fresh, valid keyword arguments for ``create_order`` (tests may mutate them)."""
    return create_order_input()


class ReceivedBodies:
    """Every raw request body the in-process sandbox read, in order, with its path."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def creates(self) -> list[bytes]:
        with self.lock:
            return [body for path, body in self.bodies if path == "/orders/create"]

    def creates_for_key(self, key: str) -> list[bytes]:
        return [
            body
            for body in self.creates()
            if json.loads(body)["request_meta"]["idempotency_key"] == key
        ]


@pytest.fixture
def received(monkeypatch) -> Iterator[ReceivedBodies]:
    """Record the bytes the sandbox read off the socket (test-side wrapper, sandbox untouched)."""
    log = ReceivedBodies()
    original = Handler._read_body

    def recording(self):
        raw = original(self)
        with log.lock:
            log.bodies.append((self.path, raw))
        return raw

    monkeypatch.setattr(Handler, "_read_body", recording)
    yield log


def upstream_orders_by_key(sandbox) -> dict[str, list[str]]:
    """Upstream order ids created through the API, grouped by idempotency key."""
    grouped: dict[str, list[str]] = {}
    for row in sandbox.store.orders_created_via_api():
        grouped.setdefault(row["idempotency_key"], []).append(row["order_id"])
    return grouped


@pytest.fixture(autouse=True)
def no_client_sleep(sleeps) -> list[float]:
    """The client's retry backoff waits are recorded instead of slept (``sleeps`` in
    tests/conftest.py); the per-thread client is rebuilt so it picks that up."""
    from django_orders.testing import reset_clients

    reset_clients()
    yield sleeps
    reset_clients()
