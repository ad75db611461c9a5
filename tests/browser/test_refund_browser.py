"""A refund in a real browser: pay in the sandbox, refund one line on the admin's Refund… page,
settle it in the sandbox, bring the mirror up to date, and read the outcome on the order page.

Run: ``.venv/bin/pytest tests/browser/test_refund_browser.py -m browser``.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote

from django_orders import services
from django_orders.models import Refund
from tests.admin.factories import ADMIN_MODELS, staff_user
from tests.refunds.conftest import line_ids, place_paid_order

from .test_admin_browser import PASSWORD, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect = pytest.importorskip("playwright.sync_api").expect


def test_pay_refund_one_line_settle_sync_and_read_the_outcome(
    page, live_server, shot, live_orders, fresh_client
):
    order = place_paid_order(live_orders)  # 2 x GHS 50.00 and GHS 9.90 shipping, paid
    user = staff_user("refunder", *(f"view_{m}" for m in ADMIN_MODELS), "view_refund")
    user.set_password(PASSWORD)
    user.save()
    from django.contrib.auth.models import Permission

    user.user_permissions.add(Permission.objects.get(codename="refund_order"))
    log_in(page, live_server, "refunder")

    order_url = f"{live_server.url}/admin/django_orders/order/{quote(order.pk)}/change/"
    page.goto(order_url)
    expect(page.locator(".field-refunds_list")).to_contain_text("No refunds.")
    page.get_by_role("link", name="Refund…").click()
    expect(page).to_have_url(re.compile(r"/refund/$"))
    expect(page.locator("#id_line_0")).to_have_value("")  # nothing refunded unless filled in
    expect(page.locator("#id_line_1")).to_have_value("")
    expect(page.get_by_label("Kente scarf (Product, quantity 2)")).to_be_visible()
    shot(page, "refund-01-form")

    # Only a reason: nothing is refunded, and the page says so.
    page.select_option("#id_reason", label="Item damaged")
    page.get_by_role("button", name="Review the refund").click()
    expect(page.locator(".errorlist")).to_contain_text("nothing was refunded")

    # Two lines above their remainders: both reported before any confirmation.
    page.fill("#id_line_0", "100.01")
    page.fill("#id_line_1", "10.00")
    page.get_by_role("button", name="Review the refund").click()
    errors = page.locator(".errorlist")
    expect(errors.nth(0)).to_contain_text("GHS 100.01 is more than the GHS 100.00 left on")
    expect(errors.nth(1)).to_contain_text("GHS 10.00 is more than the GHS 9.90 left on")
    expect(page.get_by_role("button", name="Yes, refund")).to_have_count(0)
    shot(page, "refund-01b-form-errors")

    page.fill("#id_line_0", "12.50")
    page.fill("#id_line_1", "")  # keep the shipping line
    page.get_by_role("button", name="Review the refund").click()
    expect(page.locator("#refund-lines")).to_contain_text("GHS 12.50")
    expect(page.locator("#refund-reason")).to_have_text("Item damaged")
    shot(page, "refund-02-confirmation")
    page.get_by_role("button", name="Yes, refund").click()

    expect(page).to_have_url(re.compile(r"/change/$"))
    refund = Refund.objects.get(order=order)
    expect(page.locator(".messagelist")).to_contain_text(f"Refund {refund.pk} requested (Pending)")
    expect(page.locator(".field-refunds_list")).to_contain_text("Pending")

    live_orders.settle_refund(refund.pk)
    services.refresh_orders([order.pk])  # the order's lookup brings its refunds[] to the mirror

    page.goto(order_url)
    refunds = page.locator(".field-refunds_list")
    expect(refunds).to_contain_text(refund.pk)
    expect(refunds).to_contain_text("Succeeded")
    expect(refunds).to_contain_text("GHS 12.50")
    expect(refunds).to_contain_text("Item damaged")
    product = line_ids(order)["product"]
    expect(page.locator(".field-refundable_lines tr", has_text=product)).to_contain_text(
        "GHS 87.50"
    )
    shot(page, "refund-03-order-after-settlement")
    assert Refund.objects.get(pk=refund.pk).status == "succeeded"


@pytest.mark.parametrize("width", [1400, 1920])
def test_the_order_list_page_and_refund_form_fit_the_window(
    browser, live_server, live_orders, fresh_client, shot, width
):
    """No horizontal overflow at common desktop widths: the customer and the dates are on
    screen, and the order page shows the customer's e-mail and phone and the staff buttons."""
    order = place_paid_order(live_orders)
    user = staff_user(
        "wide",
        *(f"view_{m}" for m in ADMIN_MODELS),
        "refund_order",
        "complete_order",
        "send_receipt",
    )
    user.set_password(PASSWORD)
    user.save()
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        log_in(page, live_server, "wide")
        page.goto(f"{live_server.url}/admin/django_orders/order/?status__exact=paid")
        shot(page, f"width-{width}-orders")
        shown = page.locator("#changelist .results").bounding_box()
        columns = ["customer_column", "initiated_column", "completed_column"]
        for column in columns + (["last_synced"] if width >= 1600 else []):
            box = page.locator(f"#result_list td.field-{column}").first.bounding_box()
            # Inside the list's box, not scrolled out of it (nor off the window).
            assert box["x"] + box["width"] <= min(shown["x"] + shown["width"], width), column
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        expect(page.locator("#orders-totals")).to_contain_text("GHS 109.90")

        page.goto(f"{live_server.url}/admin/django_orders/order/{quote(order.pk)}/change/")
        expect(page.locator(".field-customer_email")).to_contain_text("@")
        expect(page.get_by_role("button", name="Mark fulfilled…")).to_be_visible()
        expect(page.get_by_role("button", name="Send receipt…")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        shot(page, f"width-{width}-order-page")

        page.get_by_role("link", name="Refund…").click()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        shot(page, f"width-{width}-refund-form")
    finally:
        context.close()
