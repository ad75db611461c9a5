"""The customer's pages in the example shop's layout: a way back to the shop, and on the
payment-not-completed page, paying is the primary action and cancelling the secondary one."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_orders.models import Order
from django_orders.views import SESSION_KEY

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMER = {
    "name": "Ama Mensah",
    "email_address": "ama@example.com",
    "phone_number": "+233201234567",
    "finalize": "on",
}


@pytest.fixture
def order(client, live_orders, sleeps) -> Order:
    """An unpaid order placed through the shop's checkout, remembered by this browser."""
    client.post(reverse("shop:add_to_cart", args=["espresso-beans"]))
    client.post(reverse("shop:checkout"), CUSTOMER)
    order = Order.objects.get()
    assert order.pk in client.session[SESSION_KEY]
    return order


@pytest.mark.parametrize(("status", "page"), [("paid", "return"), ("canceled", "cancel")])
def test_paid_and_canceled_pages_lead_back_to_the_shop(client, order, live_orders, status, page):
    if status == "paid":
        live_orders.pay_order(order.id)
    else:
        live_orders.set_order_status(order.id, status)
    html = client.get(reverse(f"django_orders:{page}"), {"order_id": order.id}).content.decode()
    assert ("<h2>Paid</h2>" if status == "paid" else "<h2>Order canceled</h2>") in html
    assert f'<a href="{reverse("shop:products")}">Back to the shop</a>' in html


def test_on_the_cancel_page_paying_is_primary_and_cancelling_secondary(client, order):
    html = client.get(reverse("django_orders:cancel"), {"order_id": order.id}).content.decode()
    # The pay link first, styled as the shop's primary button; the cancel button outlined.
    assert html.index('class="django-orders-pay"') < html.index("Cancel this order")
    styles = " ".join(re.findall(r"<style>(.*?)</style>", html, re.S))
    assert re.search(r"a\.django-orders-pay \{[^}]*background: #2b5f8a", styles)
    assert re.search(r"button\.django-orders-cancel-button \{[^}]*background: none", styles)
