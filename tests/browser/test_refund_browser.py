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
    expect(page.locator("#id_line_0")).to_have_value("100.00")  # prefilled: the remainder
    expect(page.locator("#id_line_1")).to_have_value("9.90")
    shot(page, "refund-01-form")

    page.fill("#id_line_0", "12.50")
    page.fill("#id_line_1", "")  # keep the shipping line
    page.select_option("#id_reason", "item_damaged")
    page.get_by_role("button", name="Review the refund").click()
    expect(page.locator("#refund-lines")).to_contain_text("GHS 12.50")
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
    expect(refunds).to_contain_text("item_damaged")
    product = line_ids(order)["product"]
    expect(page.locator(".field-refundable_lines tr", has_text=product)).to_contain_text(
        "GHS 87.50"
    )
    shot(page, "refund-03-order-after-settlement")
    assert Refund.objects.get(pk=refund.pk).status == "succeeded"
