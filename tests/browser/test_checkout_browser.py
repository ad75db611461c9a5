"""The customer's whole journey in a real browser: shop, the sandbox's payment page, and back.

Run: ``.venv/bin/pytest tests/browser -m browser``. The shop runs on ``live_server``, the
payment page on the sandbox (another port): the browser follows the real redirects between
them, as a customer's would. Screenshots go to ``$DJANGO_ORDERS_ARTIFACTS``.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from django_orders.models import Order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect = pytest.importorskip("playwright.sync_api").expect
PASSWORD = "browser-test-password"


def shop_checkout(page, live_server, shot, prefix: str, *slugs: str) -> None:
    """Fill the cart with ``slugs`` and place the order; ends on the payment page."""
    page.goto(f"{live_server.url}/")
    for slug in slugs:
        page.locator(f"#add-{slug}").click()
        expect(page.locator("ul.messages")).to_contain_text("Added")
    shot(page, f"{prefix}-01-cart")
    page.locator("#checkout").click()
    page.fill("#id_name", "Ama Mensah")
    page.fill("#id_email_address", "ama@example.com")
    page.fill("#id_phone_number", "+233201234567")
    page.locator("#place-order").click()


def test_add_two_products_pay_and_come_back_to_paid(page, live_server, shot, live_orders):
    shop_checkout(page, live_server, shot, "journey-pay", "espresso-beans", "gift-card")
    # 24.50 + 25.00 + 4.90 shipping
    expect(page.locator("#cart-total")).to_have_count(0)  # we left the shop

    expect(page).to_have_url(re.compile(re.escape(live_orders.url) + r"/pay/or_\w+$"))
    expect(page.locator("#total")).to_have_text("EUR 54.40")
    shot(page, "journey-pay-02-payment-page")
    page.locator("#pay").click()

    expect(page).to_have_url(re.compile(r"/payment/return/\?order_id=or_\w+$"))
    expect(page.locator("h2")).to_have_text("Paid")
    expect(page.locator(".django-orders-total")).to_have_text("EUR 54.40")
    shot(page, "journey-pay-03-back-in-the-shop")
    order = Order.objects.get()
    assert (order.status, order.total, order.currency) == ("paid", 5440, "eur")
    assert live_orders.store.order(order.id)["status"] == "paid"

    # The same order in the admin, with its formatted total.
    get_user_model().objects.create_superuser("boss", "boss@example.com", PASSWORD)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/django_orders/order/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    row = page.locator("#result_list tbody tr").filter(has_text=order.id)
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Paid")
    expect(row).to_contain_text("EUR 54.40")
    shot(page, "journey-pay-04-admin")


def test_cancel_on_the_payment_page_then_cancel_the_order(page, live_server, shot, live_orders):
    shop_checkout(page, live_server, shot, "journey-cancel", "brewing-course")
    expect(page.locator("#total")).to_have_text("EUR 89.00")  # a course: nothing to ship
    page.locator("#cancel").click()

    expect(page).to_have_url(re.compile(r"/payment/cancel/\?order_id=or_\w+$"))
    expect(page.locator("h2")).to_have_text("Payment not completed")
    order = Order.objects.get()
    expect(page.get_by_role("link", name="Return to the payment page")).to_have_attribute(
        "href", order.payment_url
    )
    shot(page, "journey-cancel-02-not-completed")
    assert live_orders.store.order(order.id)["status"] == "requires_payment"

    page.get_by_role("button", name="Cancel this order").click()

    expect(page.locator("h2")).to_have_text("Order canceled")
    shot(page, "journey-cancel-03-canceled")
    assert live_orders.store.order(order.id)["status"] == "canceled"
    assert Order.objects.get().status == "canceled"
    # The payment page no longer takes a payment.
    page.goto(order.payment_url)
    expect(page.locator("#status")).to_have_text("canceled")
    expect(page.locator("#pay")).to_have_count(0)
