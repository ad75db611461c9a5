"""The orders changelist's "Cancel order" action: permission, confirmation page, result."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from django_orders.models import Order
from django_orders.services import create_order
from tests.fixtures.payloads import create_order_input, new_reference

from .factories import ADMIN_MODELS, staff_user
from .test_actions import messages_of, run_action

pytestmark = pytest.mark.django_db(transaction=True)
ORDERS = reverse("admin:django_orders_order_changelist")


@pytest.fixture
def canceller_client(client):
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["cancel_order"]
    client.force_login(staff_user("canceller", *codenames))
    return client


@pytest.fixture
def orders(live_orders):
    """Two unpaid orders of this shop and one paid (the mirror knows it)."""
    made = [
        create_order(**create_order_input(), finalize=True, reference=new_reference())
        for _ in range(3)
    ]
    live_orders.pay_order(made[2].id)
    Order.objects.filter(pk=made[2].id).update(status="paid")
    return made


def test_the_action_needs_the_cancel_permission(client, orders, live_orders):
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["change_order"]
    client.force_login(staff_user("operator", *codenames))

    changelist = client.get(ORDERS).content.decode()
    response = run_action(client, ORDERS, "cancel_orders", [orders[0].id], post="yes")

    assert 'value="cancel_orders"' not in changelist
    assert response.status_code == 302  # Django refuses an action not offered: nothing done
    assert live_orders.store.order(orders[0].id)["status"] == "requires_payment"


def test_the_permission_exists_with_a_readable_name():
    from django.contrib.auth.models import Permission

    permission = Permission.objects.get(codename="cancel_order")
    assert permission.content_type.model == "order"
    assert permission.name == "Can cancel orders upstream"


def test_the_action_is_offered_to_a_user_with_the_permission(canceller_client, orders):
    page = canceller_client.get(ORDERS).content.decode()
    assert 'value="cancel_orders"' in page and "Cancel order" in page


def test_the_confirmation_page_lists_the_orders_and_refuses_the_paid_one(
    canceller_client, orders, live_orders
):
    response = run_action(canceller_client, ORDERS, "cancel_orders", [o.id for o in orders])

    page = response.content.decode()
    assert response.status_code == 200
    assert "Cancel these 2 orders at the payment service?" in page
    assert orders[0].id in page and orders[1].id in page
    assert "GHS 100.00" in page  # the total, formatted
    assert f"<li>{orders[2].id} (Paid)</li>" in page
    assert 'name="post" value="yes"' in page
    assert 'name="action" value="cancel_orders"' in page
    assert f'name="_selected_action" value="{orders[0].id}"' in page
    assert 'value="Yes, cancel them"' in page and "&rsaquo; Cancel order" in page
    assert "cancel-confirmation" in page  # the page's body class
    # Times as on every other admin page: with seconds and the zone named.
    initiated = Order.objects.get(pk=orders[0].id).initiated_at
    assert f"<td>{timezone.localtime(initiated):%Y-%m-%d %H:%M:%S %Z}</td>" in page
    assert "a.m." not in page and "p.m." not in page
    # Nothing sent yet.
    assert [live_orders.store.order(o.id)["status"] for o in orders[:2]] == [
        "requires_payment",
        "requires_payment",
    ]


def test_confirming_cancels_the_open_orders_and_reports_the_refused_one(
    canceller_client, orders, live_orders
):
    response = run_action(
        canceller_client, ORDERS, "cancel_orders", [o.id for o in orders], post="yes"
    )

    assert response.status_code == 302
    assert [live_orders.store.order(o.id)["status"] for o in orders] == [
        "canceled",
        "canceled",
        "paid",
    ]
    assert set(Order.objects.values_list("status", flat=True)) == {"canceled", "paid"}
    reported = messages_of(response)
    assert ("warning", f"Not canceled, as they are paid or closed: {orders[2].id} (Paid).") in (
        reported
    )
    assert any(level == "success" and orders[0].id in text for level, text in reported)


def test_only_closed_orders_selected_sends_nothing(canceller_client, orders, live_orders):
    response = run_action(canceller_client, ORDERS, "cancel_orders", [orders[2].id])

    assert response.status_code == 302
    assert messages_of(response) == [
        ("warning", f"Not canceled, as they are paid or closed: {orders[2].id} (Paid).")
    ]


def test_an_order_paid_since_the_mirror_last_looked_is_refused_by_the_service(
    canceller_client, orders, live_orders
):
    live_orders.pay_order(orders[0].id)

    response = run_action(canceller_client, ORDERS, "cancel_orders", [orders[0].id], post="yes")

    assert messages_of(response) == [
        ("warning", f"Order {orders[0].id} cannot be canceled: it is paid.")
    ]
    assert Order.objects.get(pk=orders[0].id).status == "paid"


def test_the_confirmation_for_one_order_speaks_of_it(canceller_client, orders):
    response = run_action(canceller_client, ORDERS, "cancel_orders", [orders[0].id])
    page = response.content.decode()
    assert "Cancel this order at the payment service?" in page
    assert 'value="Yes, cancel it"' in page and "cancel them" not in page
