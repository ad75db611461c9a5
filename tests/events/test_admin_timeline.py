"""The order page's timeline in the admin: newest first, one query whatever its length."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_orders.admin.order_tables import MAX_EVENTS_SHOWN
from django_orders.mirror import events
from django_orders.mirror.events import LOOKUP, PAGE
from django_orders.models import OrderEvent, OrderRequest
from tests.admin.factories import ADMIN_MODELS, BASE_TIME, make_customer, make_order, staff_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client(client):
    client.force_login(staff_user("viewer", *(f"view_{m}" for m in ADMIN_MODELS)))
    return client


def order_page(client, order) -> str:
    response = client.get(reverse("admin:django_orders_order_change", args=(quote(order.pk),)))
    assert response.status_code == 200
    return response.content.decode()


def status_entries(order, count: int) -> list[OrderEvent]:
    """``count`` status changes one minute apart, the last the newest."""
    return [
        events.order_status_change(
            order, f"step_{n:03d}", origin=PAGE, at=BASE_TIME + timedelta(minutes=n)
        )
        for n in range(count)
    ]


def test_an_order_without_entries_says_why(viewer_client):
    order = make_order("or_quiet", make_customer("cu_quiet", "Quiet"))
    assert "Nothing yet: the timeline records changes after" in order_page(viewer_client, order)


def test_the_timeline_is_newest_first_with_links_sources_and_users(viewer_client):
    order = make_order("or_story", make_customer("cu_story", "Story"), status="paid")
    request = OrderRequest.objects.create(
        idempotency_key="k-story", payload="{}", order=order, state="succeeded", attempts=1
    )
    events.record(
        [
            events.request_attempt(request, origin=events.CHECKOUT, at=BASE_TIME),
            events.order_status_change(
                order, "requires_payment", origin=LOOKUP, at=BASE_TIME + timedelta(minutes=5)
            ),
            events.document_sent(
                order.pk,
                "receipt",
                origin=events.by_staff("ama"),
                at=BASE_TIME + timedelta(minutes=9),
                detail={"sent": ["email"]},
            ),
        ]
    )
    page = order_page(viewer_client, order)
    table = page[page.index('class="orders-timeline"') :]

    request_url = reverse("admin:django_orders_orderrequest_change", args=(request.pk,))
    # The request's link reads what it did, not its internal number; statuses their labels.
    assert f'<a href="{request_url}">Request to create the order</a>' in table
    assert f">{request.pk}</a>" not in table
    assert re.search(r'title="requires_payment"[^>]*>Requires payment</span>', table)
    assert re.search(r'title="succeeded"[^>]*>Succeeded</span>', table)
    receipt, change, created = (
        table.index("Document sent: receipt"),
        table.index("Requires payment"),
        table.index("Request to create the order"),
    )
    assert receipt < change < created  # newest first
    assert "ama" in table and "Lookup" in table and "Checkout" in table


def test_the_page_costs_the_same_queries_with_1_or_150_entries(
    viewer_client, django_assert_num_queries
):
    one = make_order("or_one", make_customer("cu_one", "One"))
    many = make_order("or_many", make_customer("cu_many", "Many"))
    events.record(status_entries(one, 1))
    events.record(status_entries(many, 150))
    order_page(viewer_client, one)  # warm the session and content type caches

    with CaptureQueriesContext(connection) as first:
        page_one = order_page(viewer_client, one)
    with django_assert_num_queries(len(first.captured_queries)):
        page_many = order_page(viewer_client, many)

    assert "step_000" in page_one
    shown = [f"step_{n:03d}" for n in range(150) if f"step_{n:03d}" in page_many]
    # The newest MAX_EVENTS_SHOWN, newest first, and a note that older ones exist.
    assert shown == [f"step_{n:03d}" for n in range(150 - MAX_EVENTS_SHOWN, 150)]
    assert page_many.index("step_149") < page_many.index("step_148")
    assert f"Only the newest {MAX_EVENTS_SHOWN} entries are shown." in page_many
    assert "Only the newest" not in page_one


def test_a_details_keys_read_in_one_order_on_every_database(viewer_client):
    """PostgreSQL's jsonb keeps a mapping's keys in an order of its own: the page does not
    depend on it."""
    order = make_order("or_detail", make_customer("cu_detail", "Detail"), status="paid")
    events.record(
        [
            events.document_sent(
                order.pk,
                "invoice",
                origin=events.by_staff("ama"),
                at=BASE_TIME,
                detail={
                    "delivery": 7,
                    "failed": {"sms": "unreachable", "email": "bounced"},
                    "sent": [],
                    "state": "not_delivered",
                },
            )
        ]
    )
    page = order_page(viewer_client, order)
    assert (
        "Document sent: invoice (state: not_delivered; sent: -; "
        "failed: email: bounced, sms: unreachable; delivery: 7)"
    ) in page
