"""The staff admin in a real browser: log in, list, filter, search, read, resend, view-only.

Run: ``.venv/bin/pytest tests/browser -m browser``. Screenshots go to
``$DJANGO_ORDERS_ARTIFACTS`` (default /tmp/django-orders-artifacts).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from django_orders import services
from django_orders.exceptions import OrderRequestPending
from django_orders.models import OrderRequest, RemoteRecord
from tests.admin.factories import (
    ADMIN_MODELS,
    make_customer,
    make_order,
    make_sync_run,
    staff_user,
)
from tests.fixtures.payloads import create_order_input

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect = pytest.importorskip("playwright.sync_api").expect
PASSWORD = "browser-test-password"


@pytest.fixture
def shop_rows():
    ama = make_customer("cu_ama", "Ama Mensah")
    kofi = make_customer("cu_kofi", "Kofi Boateng", guest=True)
    make_order(
        "or_ama_paid",
        ama,
        status="completed",
        initiated_at=datetime(2026, 5, 2, 8, 0, tzinfo=UTC),
        completed_at=datetime(2026, 5, 2, 8, 4, tzinfo=UTC),
        note="<script>document.title='owned'</script>",
    )
    make_order(
        "or_ama_waiting",
        ama,
        status="requires_payment",
        initiated_at=datetime(2026, 5, 3, 9, 0, tzinfo=UTC),
    )
    make_order(
        "or_kofi_waiting",
        kofi,
        status="requires_payment",
        initiated_at=datetime(2026, 4, 1, 12, 0, tzinfo=UTC),
    )
    make_order(
        "or_kofi_new_status",
        kofi,
        status="on_hold_for_review",
        initiated_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
    )
    make_sync_run()
    make_sync_run(
        started_at=datetime(2026, 3, 14, 9, 0, tzinfo=UTC),
        finished_at=datetime(2026, 3, 14, 9, 0, 2, tzinfo=UTC),
        pages=0,
        seen=0,
        created=0,
        updated=0,
        unchanged=0,
        refreshed=0,
        end_reason="",
        outcome="failed",
        error="AuthenticationFailed: 401 from the service; check the Authorization header form, "
        "that the key is complete, and that the credential is still active.",
    )


@pytest.fixture
def pending_request(live_orders, orders_settings_for):
    """A request the sandbox failed with a 503 before writing: pending, nothing upstream."""
    orders_settings_for(live_orders, MAX_RETRIES=0)
    live_orders.add_fault("error_before_write", "/orders/create", times=1, status=503)
    with pytest.raises(OrderRequestPending):
        services.create_order(
            **create_order_input(),
            reference="cart-browser-1",
        )
    return OrderRequest.objects.get(reference="cart-browser-1")


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(re.compile(r"/admin/$"))
    expect(page.locator("#user-tools")).to_contain_text(username)


def rows(page):
    return page.locator("#result_list tbody tr")


def test_staff_browse_filter_search_read_and_resend(
    page, live_server, shot, shop_rows, pending_request, live_orders
):
    get_user_model().objects.create_superuser("boss", "boss@example.com", PASSWORD)
    log_in(page, live_server, "boss")
    shot(page, "01-admin-index")

    page.locator("tr.model-order th a").click()
    expect(page.locator("h1")).to_have_text("Select order to view")
    expect(rows(page)).to_have_count(4)
    # newest first
    expect(rows(page).first.locator("th.field-id")).to_have_text("or_ama_waiting")
    expect(
        page.locator(".field-status_column").filter(has_text="on_hold_for_review")
    ).to_have_count(1)
    shot(page, "02-orders-list")

    page.locator("#changelist-filter").get_by_role("link", name="Requires payment").click()
    expect(page).to_have_url(re.compile(r"status__exact=requires_payment"))
    expect(rows(page)).to_have_count(2)
    expect(page.locator("td.field-status_column")).to_have_text(
        ["Requires payment", "Requires payment"]
    )
    shot(page, "03-orders-filtered-by-status")

    page.goto(f"{live_server.url}/admin/django_orders/order/")
    page.fill("#searchbar", "mensah")
    page.press("#searchbar", "Enter")
    expect(rows(page)).to_have_count(2)
    expect(page.locator("td.field-customer_column")).to_have_text(["Ama Mensah", "Ama Mensah"])
    shot(page, "04-orders-search-customer")

    page.get_by_role("link", name="or_ama_paid").click()
    expect(page.locator("h1")).to_have_text("View order")
    raw = page.locator("pre.orders-json")
    expect(raw).to_contain_text('"id": "or_ama_paid"')
    expect(raw).to_contain_text("<script>document.title='owned'</script>")  # shown as text
    assert page.title() != "owned"  # ...and not run
    expect(page.locator('input[name="_save"]')).to_have_count(0)
    shot(page, "05-order-detail-raw-record")

    page.goto(f"{live_server.url}/admin/django_orders/orderrequest/")
    expect(rows(page)).to_have_count(1)
    expect(page.locator("td.field-state_column")).to_have_text("Pending")
    page.locator(f'input.action-select[value="{pending_request.pk}"]').check()
    page.select_option('select[name="action"]', "resend_now")
    page.locator('button[name="index"]').click()
    expect(page.locator("h1")).to_have_text("Resend order requests?")
    expect(page.locator("#resend-requests")).to_contain_text(pending_request.idempotency_key)
    shot(page, "06-resend-confirmation")
    pending_request.refresh_from_db()
    assert pending_request.attempts == 1  # nothing sent before the confirmation

    page.get_by_role("button", name="Yes, resend now").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("Succeeded: cart-browser-1")
    expect(page.locator("td.field-state_column")).to_have_text("Succeeded")
    shot(page, "07-resend-done")
    pending_request.refresh_from_db()
    assert pending_request.state == OrderRequest.State.SUCCEEDED
    created = live_orders.store.orders_created_via_api()
    assert [row["idempotency_key"] for row in created] == [pending_request.idempotency_key]


def test_view_only_staff_see_no_action_that_changes_anything(
    page, live_server, shot, shop_rows, pending_request
):
    user = staff_user("viewer", *(f"view_{model}" for model in ADMIN_MODELS))
    user.set_password(PASSWORD)
    user.save()
    RemoteRecord.objects.create(resource="payouts", remote_id="po_browser", raw={"id": "po_1"})
    log_in(page, live_server, "viewer")
    for model in ADMIN_MODELS:
        page.goto(f"{live_server.url}/admin/django_orders/{model}/")
        expect(page.locator("#result_list")).to_be_visible()
        expect(page.locator('select[name="action"]')).to_have_count(0)
        expect(page.locator("input.action-select")).to_have_count(0)
        expect(page.locator("a.addlink")).to_have_count(0)
        shot(page, f"08-view-only-{model}-list")
    page.goto(f"{live_server.url}/admin/django_orders/orderrequest/{pending_request.pk}/change/")
    expect(page.locator("h1")).to_have_text("View order request")
    expect(page.locator('input[type="submit"]')).to_have_count(0)
    expect(page.locator("a.deletelink")).to_have_count(0)
    expect(page.locator("textarea")).to_have_count(0)
    shot(page, "09-view-only-request-detail")
    pending_request.refresh_from_db()
    assert pending_request.attempts == 1
