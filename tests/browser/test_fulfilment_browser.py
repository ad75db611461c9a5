"""After the sale in a real browser: checkout in the shop, pay on the sandbox's payment page and
never come back, the payment watcher mirrors the payment, staff mark the order fulfilled and
send its receipt through the admin's confirmation pages, and the order's timeline tells it all.

The watcher is the one ``WATCH_PAYMENTS`` enqueues at checkout (in the shop's server thread,
on django-tasks-db's database backend); django-tasks-db's ``db_worker`` runs it (``--batch``:
what is due, then exit), its first lookup's delay moved back rather than waited for. A worker
in a process of its own, waiting for the delay, is tests/tasks/test_worker.py.

Run: ``.venv/bin/pytest tests/browser/test_fulfilment_browser.py -m browser``.
"""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone

from django_orders.models import Order
from tests.admin.factories import ADMIN_MODELS, staff_user
from tests.tasks.conftest import DATABASE

from .test_admin_browser import PASSWORD, log_in
from .test_checkout_browser import shop_checkout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect = pytest.importorskip("playwright.sync_api").expect


def run_action(page, order_id: str, action: str, confirm: str) -> None:
    """Select the order on the changelist, run ``action``, confirm on its intermediate page."""
    page.locator(f'input.action-select[value="{order_id}"]').check()
    page.select_option('select[name="action"]', action)
    page.locator('button[name="index"]').click()
    expect(page.locator("#fulfilment-orders")).to_contain_text(order_id)
    page.get_by_role("button", name=confirm).click()


def test_pay_close_the_tab_watcher_marks_paid_staff_fulfil_and_send_the_receipt(
    page, live_server, shot, live_orders, fresh_client, settings
):
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = DATABASE
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}

    shop_checkout(page, live_server, shot, "after-sale", "espresso-beans")
    expect(page).to_have_url(re.compile(re.escape(live_orders.url) + r"/pay/or_\w+$"))
    order = Order.objects.get()
    # The payer pays, then closes the tab: the redirect back to the shop is never followed.
    payment = re.compile(re.escape(live_orders.url) + r"/pay/or_\w+/pay$")
    way_back: list[str] = []

    def pay_then_close(route) -> None:
        answer = route.fetch(max_redirects=0)  # the payment reaches the sandbox
        way_back.append(answer.headers.get("location", ""))
        route.fulfill(status=200, content_type="text/plain", body="(tab closed)")

    page.route(payment, pay_then_close)
    page.locator("#pay").click()
    expect(page.locator("body")).to_have_text("(tab closed)")
    page.unroute(payment)
    assert "/payment/return/?order_id=" + order.pk in way_back[0]  # where the payer would go
    assert live_orders.store.order(order.pk)["status"] == "paid"
    assert Order.objects.get(pk=order.pk).status == "requires_payment"  # nobody came back

    [enqueued] = DBTaskResult.objects.all()  # by the checkout, deferred
    assert enqueued.task_path.endswith("watch_payment") and enqueued.args_kwargs["args"] == [
        order.pk
    ]
    DBTaskResult.objects.filter(pk=enqueued.pk).update(run_after=timezone.now())
    call_command("db_worker", "--batch", "--no-startup-delay", stdout=io.StringIO())
    enqueued.refresh_from_db()
    assert enqueued.status == "SUCCESSFUL", enqueued.traceback
    assert enqueued.return_value["ended_by"] == "status"
    assert Order.objects.get(pk=order.pk).status == "paid"

    user = staff_user("fulfiller", *(f"view_{m}" for m in ADMIN_MODELS))
    user.set_password(PASSWORD)
    user.save()
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["complete_order", "send_receipt"])
    )
    log_in(page, live_server, "fulfiller")
    page.goto(f"{live_server.url}/admin/django_orders/order/")

    run_action(page, order.pk, "mark_fulfilled", "Yes, mark them fulfilled")
    expect(page.locator("ul.messagelist li.success")).to_contain_text(
        f"Marked fulfilled: {order.pk}."
    )
    run_action(page, order.pk, "send_receipts", "Yes, send the receipts")
    expect(page.locator("ul.messagelist li.success")).to_contain_text(
        f"Receipt of {order.pk}: sent by email, sms."
    )

    page.goto(f"{live_server.url}/admin/django_orders/order/{quote(order.pk)}/change/")
    entries = page.locator("table.orders-timeline tbody tr")
    expected = [  # newest first: what happened, source, staff user
        (r"Document sent: receipt \(.*state: delivered; sent: email, sms", "Staff", "fulfiller"),
        (r"Status\s+Paid\s+→\s+Completed", "Staff", "fulfiller"),
        (r"Request to mark the order fulfilled Succeeded", "Staff", "fulfiller"),
        (r"Status\s+Requires payment\s+→\s+Paid", "Lookup", "-"),  # the watcher's lookup
        (r"Request to create the order Succeeded", "Checkout", "-"),
    ]
    expect(entries).to_have_count(len(expected))
    for row, (what, source, staff) in zip(entries.all(), expected, strict=True):
        cells = row.locator("td")
        expect(cells.nth(1)).to_have_text(re.compile(what, re.IGNORECASE))
        expect(cells.nth(2)).to_have_text(source)
        expect(cells.nth(3)).to_have_text(staff)
    shot(page, "after-sale-timeline")
