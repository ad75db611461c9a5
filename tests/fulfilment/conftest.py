"""Fixtures for fulfilment and document tests: a paid order in the ``orders_sandbox`` and the
mirror, and an unpaid one."""

from __future__ import annotations

import pytest

from django_orders.models import Order
from django_orders.services import confirm_order, create_order
from tests.fixtures.payloads import create_order_input, new_reference


@pytest.fixture(autouse=True)
def no_client_sleep(fresh_client) -> list[float]:
    """Clients are rebuilt from the test's settings; retry waits are recorded, not slept."""
    return fresh_client


def place_order(server, *, paid: bool) -> Order:
    """An order created through ``create_order`` (finalized), paid in the sandbox if ``paid``,
    and mirrored."""
    order = create_order(**create_order_input(), reference=new_reference(), finalize=True)
    if paid:
        server.pay_order(order.pk)
    return confirm_order(order.pk, wait=0)


@pytest.fixture
def paid_order(orders_sandbox) -> Order:
    return place_order(orders_sandbox, paid=True)


@pytest.fixture
def unpaid_order(orders_sandbox) -> Order:
    return place_order(orders_sandbox, paid=False)
