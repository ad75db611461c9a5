"""The example shop's checkout, end to end against the sandbox over real HTTP."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from django_orders.models import Order, OrderRequest
from tests.admin.factories import staff_user

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


def test_checkout_creates_one_upstream_order_and_sends_the_customer_to_pay(client, live_orders):
    _fill_cart(client, "espresso-beans", "espresso-beans", "gift-card")

    response = client.post(reverse("shop:checkout"), CUSTOMER)

    request = OrderRequest.objects.get()
    assert request.state == OrderRequest.State.SUCCEEDED
    assert request.reference.startswith("cart_")
    order = Order.objects.get()
    assert request.order == order
    # Off to the service's hosted payment page.
    assert order.payment_url.startswith(live_orders.url + "/pay/")
    assert response.status_code == 302 and response["Location"] == order.payment_url
    upstream = live_orders.store.order(order.id)
    # Prices come from the server-side catalogue: 2 x 24.50 + 25.00 EUR, and 4.90 shipping.
    assert upstream["line_item_group"]["total"] == {"currency": "eur", "value": 7890}
    assert [item["type"] for item in upstream["line_item_group"]["line_items"]] == [
        "product",
        "product",
        "shipping",
    ]
    assert (order.total, order.currency) == (7890, "eur")
    assert upstream["number"] == order.number == "EX-" + request.reference[5:17].upper()
    # The payment page sends the customer back to django-orders' pages of this shop.
    assert upstream["checkout_settings"] == {
        "redirect_url": "http://testserver" + reverse("django_orders:return"),
        "cancel_url": "http://testserver" + reverse("django_orders:cancel"),
    }
    assert [r["order_id"] for r in live_orders.store.orders_created_via_api()] == [order.id]
    # The cart is emptied, the order remembered for the return pages.
    assert client.session.get("cart") is None
    assert client.session["django_orders_checkout"] == [order.id]


def test_cart_shows_quantities_line_totals_shipping_and_total(client):
    _fill_cart(client, "espresso-beans", "espresso-beans", "gift-card")
    client.post(reverse("shop:update_cart", args=["gift-card"]), {"quantity": "3"})

    page = client.get(reverse("shop:products")).content.decode()

    assert 'value="2"' in page and 'value="3"' in page
    assert "EUR 49.00" in page  # 2 x 24.50
    assert "EUR 75.00" in page  # 3 x 25.00
    assert "EUR 4.90" in page  # shipping
    assert '<th id="cart-total">EUR 128.90</th>' in page


def test_a_quantity_of_zero_removes_the_line_and_a_bad_one_is_refused(client):
    _fill_cart(client, "espresso-beans", "gift-card")
    client.post(reverse("shop:update_cart", args=["gift-card"]), {"quantity": "0"})
    refused = client.post(
        reverse("shop:update_cart", args=["espresso-beans"]), {"quantity": "x"}, follow=True
    )

    assert "Enter a quantity" in refused.content.decode()
    assert client.session["cart"]["items"] == {"espresso-beans": 1}


def test_checkout_under_atomic_requests_still_commits_the_request_first(
    client, live_orders, monkeypatch
):
    """The checkout view is non_atomic_requests, so ATOMIC_REQUESTS does not wrap create_order."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    _fill_cart(client, "gift-card")

    response = client.post(reverse("shop:checkout"), CUSTOMER)

    assert response.status_code == 302
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
    client.post(reverse("shop:checkout"), {**CUSTOMER, "finalize": ""})
    reference = OrderRequest.objects.get().reference

    client.cookies.clear()
    response = client.get(reverse("shop:order_status", args=[reference]))

    assert response.status_code == 404


def test_prices_cannot_come_from_the_browser(client, live_orders):
    _fill_cart(client, "gift-card")

    client.post(reverse("shop:checkout"), {**CUSTOMER, "price": "1", "value": "1"})

    order = Order.objects.get()
    # 25.00 for the gift card (nothing to ship), whatever the browser posted.
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
    placed = client.post(reverse("shop:checkout"), CUSTOMER)
    succeeded = OrderRequest.objects.get(state=OrderRequest.State.SUCCEEDED)
    assert placed["Location"] == succeeded.order.payment_url
    assert len(live_orders.store.orders_created_via_api()) == 1


def test_an_order_not_finalized_shows_its_status_page_instead_of_a_payment_page(
    client, live_orders
):
    client.force_login(staff_user("dev"))  # the "Seal the order" box is for staff only
    _fill_cart(client, "gift-card")

    response = client.post(reverse("shop:checkout"), {**CUSTOMER, "finalize": ""}, follow=True)

    order = Order.objects.get()
    assert (order.status, order.payment_url) == ("preparing", "")
    page = response.content.decode()
    assert order.number in page and "Preparing" in page and "EUR 25.00" in page


def test_shoppers_get_no_developer_option_and_always_a_sealed_order(client, live_orders):
    _fill_cart(client, "espresso-beans")
    assert "Seal the order" not in client.get(reverse("shop:checkout")).content.decode()

    response = client.post(reverse("shop:checkout"), {**CUSTOMER, "finalize": ""})

    order = Order.objects.get()
    assert order.payment_url and response["Location"] == order.payment_url
    client.force_login(staff_user("dev"))
    _fill_cart(client, "espresso-beans")
    assert "Seal the order" in client.get(reverse("shop:checkout")).content.decode()


@pytest.mark.parametrize(
    ("slugs", "shipping", "total", "types"),
    [
        (["gift-card"], None, 2500, ["product"]),
        (["gift-card", "brewing-course"], None, 11400, ["product", "product"]),
        (["gift-card", "espresso-beans"], "EUR 4.90", 5440, ["product", "product", "shipping"]),
    ],
)
def test_shipping_is_charged_only_for_a_cart_with_something_to_ship(
    client, live_orders, slugs, shipping, total, types
):
    _fill_cart(client, *slugs)
    page = client.get(reverse("shop:checkout")).content.decode()
    assert ("<td>None: nothing to ship</td>" in page) is (shipping is None)
    if shipping:
        assert f"<td>{shipping}</td>" in page

    client.post(reverse("shop:checkout"), CUSTOMER)

    upstream = live_orders.store.order(Order.objects.get().id)["line_item_group"]
    assert upstream["total"]["value"] == total
    assert [item["type"] for item in upstream["line_items"]] == types
