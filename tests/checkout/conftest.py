"""Fixtures for the checkout services (confirm_order, cancel_order) and the customer pages."""

from __future__ import annotations

from typing import Any

import pytest
import responses

from django_orders.mirror.parsing import parse_order
from django_orders.mirror.store import store_orders
from django_orders.models import Order
from django_orders.signals import order_status_changed
from tests.creation.conftest import received  # noqa: F401  (the raw bodies the sandbox read)

KEY = "sk_test_checkout_unit_secret_0123456789"
BASE = "https://orders.test"
LOOKUP = BASE + "/orders/lookup"
CANCEL = BASE + "/orders/cancel"


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


@pytest.fixture
def unit_settings(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE, "MAX_RETRIES": 2}
    return settings.DJANGO_ORDERS


@pytest.fixture
def mocked(unit_settings):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


@pytest.fixture
def status_changes():
    """``order_status_changed`` as received: (order id, previous, status)."""
    seen: list[tuple[str, str, str]] = []

    def receiver(sender, order, previous_status, status, **kwargs):
        seen.append((order.pk, previous_status, status))

    order_status_changed.connect(receiver, weak=False)
    yield seen
    order_status_changed.disconnect(receiver)
