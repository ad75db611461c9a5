"""create_order and a lookup fill the mirror's checkout columns, end to end over loopback HTTP
against the sandbox (which answers in the provider's shapes)."""

from __future__ import annotations

import pytest

from django_orders.models import Order
from django_orders.services import create_order
from django_orders.sync.refresh import refresh_orders
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db


def test_a_finalized_create_mirrors_total_payment_page_and_contact(live_orders, order_input):
    order = create_order(**order_input, finalize=True, reference=new_reference())  # 2 x GHS 50.00

    stored = Order.objects.select_related("customer").get(pk=order.pk)
    for row in (order, stored):
        assert (row.total, row.currency) == (10000, "ghs")
        assert row.payment_url == live_orders.payment_url(order.pk)
        assert row.payment_url.startswith(live_orders.url + "/")
        assert row.expires_at is not None and row.expires_at > row.initiated_at
        assert (row.paid_at, row.canceled_at) == (None, None)
    assert stored.customer.email_address == "ama@example.com"
    assert stored.customer.phone_number == "+233241234567"


def test_a_lookup_after_payment_brings_paid_at(live_orders, order_input):
    order = create_order(**order_input, finalize=True, reference=new_reference())
    live_orders.pay_order(order.pk)

    result = refresh_orders([order.pk])

    assert result.refreshed == 1
    paid = Order.objects.get(pk=order.pk)
    assert paid.status == "paid"
    assert paid.paid_at is not None and paid.paid_at >= paid.initiated_at
    assert paid.total == 10000
