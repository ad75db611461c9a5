"""Fixtures for the order creation and checkout tests: valid input, the raw bodies the sandbox
received, and order records as the service sends them (``status_changes``: fixtures/mirror.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from django_orders.mirror.parsing import parse_order
from django_orders.mirror.store import store_orders
from django_orders.models import Order
from django_orders.testing.sandbox.handler import Handler
from tests.fixtures.http import BASE
from tests.fixtures.payloads import create_order_input

LOOKUP = BASE + "/orders/lookup"
CANCEL = BASE + "/orders/cancel"


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
def no_client_sleep(fresh_client) -> list[float]:
    """The client's retry backoff waits are recorded instead of slept (``fresh_client`` in
    tests/conftest.py)."""
    return fresh_client


def record(order_id: str = "or_unit1", status: str = "requires_payment", **extra: Any) -> dict:
    """An order record as the service sends it (the provider's shape, trimmed)."""
    body = {
        "id": order_id,
        "status": status,
        "number": "EX-1001",
        "initiated_at": "2026-01-02T03:04:05Z",
        "customer": {"id": "cu_unit1", "guest": True, "name": "Ama Mensah"},
        "line_item_group": {
            "line_items": [
                {"type": "shipping", "shipping": {"fee": {"currency": "eur", "value": 490}}}
            ],
            "total": {"currency": "eur", "value": 2940},
        },
        "invoice": {"format": {"web": {"url": f"{BASE}/pay/{order_id}"}}},
    }
    if status == "paid":
        body["paid_at"] = "2026-01-02T03:06:00Z"
    if status == "canceled":
        body["canceled_at"] = "2026-01-02T03:07:00Z"
    body.update(extra)
    return body


def mirror(order_id: str = "or_unit1", status: str = "requires_payment", **extra: Any) -> Order:
    """Store the order as a sync would have."""
    store_orders([parse_order(record(order_id, status, **extra))])
    return Order.objects.get(pk=order_id)
