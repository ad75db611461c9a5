"""Fixtures for the refund tests: a paid order in the sandbox and the mirror, its line ids and
what each line cost, and ``refund_status_changed`` as received."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from django_orders.models import Order
from django_orders.services import confirm_order, create_order
from django_orders.signals import refund_status_changed
from tests.fixtures.payloads import create_order_input, new_reference

#: Two lines: a product (2 x 5000) and a shipping fee (990).
SHIPPING = {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 990}}}
PAID = {"product": 10_000, "shipping": 990}


@pytest.fixture(autouse=True)
def no_client_sleep(fresh_client) -> list[float]:
    """The client's retry backoff waits are recorded instead of slept."""
    return fresh_client


def place_paid_order(server) -> Order:
    """An order created through ``create_order``, paid in the sandbox, confirmed (mirrored)."""
    data = create_order_input()
    data["line_items"].append(dict(SHIPPING))
    order = create_order(**data, reference=new_reference(), finalize=True)
    server.pay_order(order.pk)
    return confirm_order(order.pk, wait=0)


def line_ids(order: Order) -> dict[str, str]:
    """The order's line ids by line type (``product``, ``shipping``)."""
    items = order.raw["line_item_group"]["line_items"]
    return {item["type"]: item[item["type"]]["id"] for item in items}


@pytest.fixture
def paid_order(live_orders) -> Order:
    return place_paid_order(live_orders)


@pytest.fixture
def lines(paid_order) -> dict[str, str]:
    return line_ids(paid_order)


def upstream_refunds_by_reference(server) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for row in server.refunds_created_via_api():
        grouped.setdefault(row["reference"], []).append(row["refund_id"])
    return grouped


class StatusChanges:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str]] = []
        self.lock = threading.Lock()

    def __call__(self, sender, refund, previous_status, status, **kwargs: Any) -> None:
        with self.lock:
            self.seen.append((refund.pk, previous_status, status))


@pytest.fixture
def refund_changes() -> Iterator[StatusChanges]:
    receiver = StatusChanges()
    refund_status_changed.connect(receiver, weak=False)
    yield receiver
    refund_status_changed.disconnect(receiver)
