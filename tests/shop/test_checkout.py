"""The example shop's checkout, end to end against the sandbox over real HTTP."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from django_orders.models import Order, OrderRequest

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMER = {
    "name": "Ama Mensah",
    "email_address": "ama@example.com",
    "phone_number": "+233201234567",
    "finalize": "on",
}


def _fill_cart(client, *slugs):
    for slug in slugs:
        client.post(reverse("shop:add_to_cart", args=[slug]))


def test_checkout_creates_one_upstream_order_and_shows_it(client, live_orders):
    _fill_cart(client, "espresso-beans", "espresso-beans", "gift-card")

    response = client.post(reverse("shop:checkout"), CUSTOMER, follow=True)

    request = OrderRequest.objects.get()
    assert request.state == OrderRequest.State.SUCCEEDED
    assert request.reference.startswith("cart_")
    order = Order.objects.get()
    assert request.order == order
    assert order.id in response.content.decode()
    upstream = live_orders.store.order(order.id)
    # Prices come from the server-side catalogue: 2 x 24.50 + 25.00 EUR.
    assert upstream["line_item_group"]["total"] == {"currency": "eur", "value": 7400}
    assert [r["order_id"] for r in live_orders.store.orders_created_via_api()] == [order.id]


def test_checkout_under_atomic_requests_still_commits_the_request_first(
    client, live_orders, monkeypatch
):
    """The checkout view is non_atomic_requests, so ATOMIC_REQUESTS does not wrap create_order."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    _fill_cart(client, "gift-card")

    response = client.post(reverse("shop:checkout"), CUSTOMER, follow=True)

    assert response.status_code == 200
    assert OrderRequest.objects.get().state == OrderRequest.State.SUCCEEDED


def test_invalid_phone_number_is_shown_on_the_form_and_nothing_is_sent(client, live_orders):
    _fill_cart(client, "gift-card")

    response = client.post(reverse("shop:checkout"), {**CUSTOMER, "phone_number": "0201234567"})

    assert response.status_code == 200
    assert response.context["form"].errors["phone_number"]
    assert not OrderRequest.objects.exists()
    assert live_orders.store.orders_created_via_api() == []


def test_lost_answer_shows_the_confirming_page_and_resume_completes_it(client, live_orders):
    from django_orders.services import resume_order_requests

    live_orders.add_fault("drop_after_commit", path="/orders/create", times=None)
    _fill_cart(client, "brewing-course")

    response = client.post(reverse("shop:checkout"), CUSTOMER, follow=True)

    assert "We are confirming your order" in response.content.decode()
    request = OrderRequest.objects.get()
    assert request.state == OrderRequest.State.PENDING
    live_orders.faults.clear()
    OrderRequest.objects.update(next_attempt_at=None)
    resume_order_requests()
    request.refresh_from_db()
    assert request.state == OrderRequest.State.SUCCEEDED
    created = live_orders.store.orders_created_via_api()
    assert [c["order_id"] for c in created] == [request.order_id]
    page = client.get(reverse("shop:order_status", args=[request.reference]))
    assert request.order_id in page.content.decode()


def test_order_status_is_only_shown_to_the_session_that_placed_it(client, live_orders):
    _fill_cart(client, "gift-card")
    client.post(reverse("shop:checkout"), CUSTOMER)
    reference = OrderRequest.objects.get().reference

    client.cookies.clear()
    response = client.get(reverse("shop:order_status", args=[reference]))

    assert response.status_code == 404


def test_prices_cannot_come_from_the_browser(client, live_orders):
    _fill_cart(client, "gift-card")

    client.post(reverse("shop:checkout"), {**CUSTOMER, "price": "1", "value": "1"})

    order = Order.objects.get()
    assert live_orders.store.order(order.id)["line_item_group"]["total"]["value"] == 2500


def test_unknown_product_is_refused(client, live_orders):
    response = client.post(reverse("shop:add_to_cart", args=["no-such-thing"]), follow=True)

    assert "That product does not exist." in response.content.decode()
    assert client.session.get("cart") is None


def test_after_a_refusal_the_visitor_can_try_again(client, live_orders):
    live_orders.add_fault("error_before_write", path="/orders/create", status=400)
    _fill_cart(client, "gift-card")

    refused = client.post(reverse("shop:checkout"), CUSTOMER)

    assert "refused this order" in refused.content.decode()
    assert OrderRequest.objects.get().state == OrderRequest.State.FAILED
    placed = client.post(reverse("shop:checkout"), CUSTOMER, follow=True)
    assert placed.status_code == 200
    succeeded = OrderRequest.objects.get(state=OrderRequest.State.SUCCEEDED)
    assert succeeded.order_id in placed.content.decode()
    assert len(live_orders.store.orders_created_via_api()) == 1
