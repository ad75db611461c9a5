"""Numbers and dates on the admin's pages: counts with thousands separators (in the locale's
form), dates with minutes and the zone, and the fields' help text kept on detail pages."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders.models import Order, OrderRequest, SyncRun

from .factories import BASE_TIME, make_customer, make_order, make_request, make_sync_run
from .helpers import result_rows, text

pytestmark = pytest.mark.django_db

COUNTS = ("pages", "seen", "created", "updated", "unchanged", "refreshed")


def admin_url(model, view: str, *args) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


def form_row(html: str, name: str) -> str:
    """The detail page's row of the (read-only) field ``name``: its label, value and help."""
    start = html.index(f'class="form-row field-{name}"')
    following = html.find('class="form-row ', start + 1)
    return html[start : following if following != -1 else len(html)]


def big_run() -> SyncRun:
    return make_sync_run(
        pages=12_345,
        seen=3_158_016,
        created=1_000_000,
        updated=2_048,
        unchanged=2_155_968,
        refreshed=1_234,
        refresh_waiting=56_789,
        refunds_refreshed=4_321,
        refunds_waiting=12_000,
        skipped=10_001,
        problems="or_1: value too long",
    )


def test_sync_run_counts_have_thousands_separators(admin_client):
    run = big_run()
    row = result_rows(admin_client.get(admin_url(SyncRun, "changelist")))[str(run.pk)]
    shown = [text(row[f"{name}_column"]) for name in COUNTS]
    assert shown == ["12,345", "3,158,016", "1,000,000", "2,048", "2,155,968", "1,234"]


def test_sync_run_counts_follow_the_locale(admin_client, settings):
    settings.LANGUAGE_CODE = "de"
    run = big_run()
    row = result_rows(admin_client.get(admin_url(SyncRun, "changelist")))[str(run.pk)]
    assert text(row["seen_column"]) == "3.158.016"


def test_sync_run_detail_groups_its_counts_and_keeps_their_help(admin_client):
    run = big_run()
    html = admin_client.get(admin_url(SyncRun, "change", run.pk)).content.decode()
    for name, value in (
        ("seen", "3,158,016"),
        ("refresh_waiting", "56,789"),
        ("refunds_refreshed", "4,321"),
        ("refunds_waiting", "12,000"),
    ):
        assert f'<div class="readonly">{value}</div>' in form_row(html, f"{name}_grouped")
    skipped = form_row(html, "skipped_grouped")
    assert "<label>Set aside:</label>" in skipped
    assert '<div class="readonly">10,001</div>' in skipped
    assert "Records the database refused; the walk went on without them." in skipped
    assert '<div class="readonly">100</div>' in form_row(html, "page_size")  # a size


def test_order_detail_dates_keep_minutes_zone_and_help_text(admin_client):
    customer = make_customer("cu_ama", "Ama Mensah")
    order = make_order("or_dates", customer)
    Order.objects.filter(pk=order.pk).update(changed_at=BASE_TIME, refreshed_at=BASE_TIME)
    html = admin_client.get(admin_url(Order, "change", quote(order.pk))).content.decode()

    changed = form_row(html, "changed_at_local")
    assert "<label>Changed:</label>" in changed
    assert '<div class="readonly">2026-03-14 09:30:00 UTC</div>' in changed
    assert "When the mirror last changed; an unchanged record is not rewritten." in changed
    refreshed = form_row(html, "refreshed_at_local")
    assert '<div class="readonly">2026-03-14 09:30:00 UTC</div>' in refreshed
    assert "Last lookup by id." in refreshed
    # A date without help text gets none, nor someone else's.
    initiated = form_row(html, "initiated_at_local")
    assert "2026-03-14 09:30:00 UTC" in initiated
    assert 'class="help"' not in initiated


def test_order_request_detail_dates_keep_their_help_text(admin_client):
    request = make_request("key-help", first_sent_at=BASE_TIME)
    html = admin_client.get(admin_url(OrderRequest, "change", request.pk)).content.decode()
    first_sent = form_row(html, "first_sent_at_local")
    assert '<div class="readonly">2026-03-14 09:30:00 UTC</div>' in first_sent
    assert re.search(r"KEY_LIFETIME\s+counts from it", first_sent)
    assert "A worker sending this request holds it until then" in form_row(
        html, "claimed_until_local"
    )


@pytest.mark.parametrize(
    ("status", "shown"),
    [("requires_payment", True), ("expired", True), ("paid", False), ("canceled", False)],
)
def test_the_expiry_is_shown_only_while_it_can_matter(admin_client, status, shown):
    # A paid order no longer expires: its date would read as a pending deadline.
    order = make_order(f"or_{status}", make_customer(f"cu_{status}"), status=status)
    Order.objects.filter(pk=order.pk).update(expires_at=BASE_TIME)
    html = admin_client.get(admin_url(Order, "change", quote(order.pk))).content.decode()
    assert ('class="form-row field-expires_at_local"' in html) is shown
    assert "initiated_at_local" in html


def test_a_sync_failure_is_shown_whole_in_the_list(admin_client):
    error = (
        "CouldNotConnect: POST /orders/page: could not connect (127.0.0.1:9: Failed to "
        "establish a new connection: [Errno 111] Connection refused)"
    )
    run = make_sync_run(outcome=SyncRun.Outcome.FAILED, error=error)
    row = result_rows(admin_client.get(admin_url(SyncRun, "changelist")))[str(run.pk)]
    assert text(row["error_column"]) == error
