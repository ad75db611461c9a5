"""Refunds in the admin: on the order's page (with a constant number of queries), the Refund
list (filters, search) and its "Cancel refund" action."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders.models import Refund
from django_orders.services import refund_order
from tests.refunds.conftest import line_ids, place_paid_order

from .factories import ADMIN_MODELS, BASE_TIME, make_customer, make_order, staff_user
from .test_actions import messages_of, run_action

REFUNDS = reverse("admin:django_orders_refund_changelist")
LINES = {
    "line_item_group": {
        "total": {"currency": "ghs", "value": 10990},
        "line_items": [
            {
                "type": "product",
                "product": {
                    "id": "oli_prod",
                    "name": "Mug",
                    "quantity": 2,
                    "price": {"currency": "ghs", "value": 5000},
                },
            },
            {
                "type": "shipping",
                "shipping": {"id": "oli_ship", "fee": {"currency": "ghs", "value": 990}},
            },
        ],
    }
}


@pytest.fixture
def viewer_client(client, db):
    """Staff with the view permissions, the refunds' included (no refund_order)."""
    client.force_login(staff_user("viewer", *(f"view_{m}" for m in ADMIN_MODELS), "view_refund"))
    return client


def make_refund(order, index: int, *, amount: int = 10, status: str = "succeeded", **fields):
    refund_id = f"rf_{order.pk}_{index:03d}"
    raw = {
        "id": refund_id,
        "order_id": order.pk,
        "status": status,
        "total": {"currency": "ghs", "value": amount},
        "line_items": [
            {
                "order_line_item_id": "oli_prod",
                "refund_amount": {"currency": "ghs", "value": amount},
            }
        ],
    }
    defaults = {
        "status": status,
        "total": amount,
        "currency": "ghs",
        "reason": "item_returned",
        "reference": f"ret-{index}",
        "created_at": BASE_TIME + timedelta(minutes=index),
    }
    return Refund.objects.create(id=refund_id, order=order, raw=raw, **{**defaults, **fields})


def paid_order(order_id: str = "or_paid"):
    order = make_order(order_id, make_customer("cu_" + order_id), status="paid", **LINES)
    order.currency, order.total = "ghs", 10990
    order.save()
    return order


def order_page(client, order) -> str:
    url = reverse("admin:django_orders_order_change", args=(quote(order.pk),))
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_the_order_page_lists_its_refunds_and_each_lines_remainder(viewer_client):
    order = paid_order()
    make_refund(order, 1, amount=1250, status="succeeded", succeeded_at=BASE_TIME)
    make_refund(order, 2, amount=500, status="pending", reference="ret-<b>2</b>")
    make_refund(
        order,
        3,
        amount=2000,
        status="failed",
        failure_reason="insufficient_balance",
        failure_detail="The balance is too low.",
    )
    make_refund(order, 4, amount=100, status="canceled")

    page = order_page(viewer_client, order)

    assert "GHS 12.50" in page and "GHS 5.00" in page and "GHS 20.00" in page
    assert "insufficient_balance: The balance is too low." in page
    assert "ret-&lt;b&gt;2&lt;/b&gt;" in page  # escaped
    assert "2026-03-14 09:31:00 UTC" in page  # the first refund's creation, local form
    # Product: 100.00 paid - 12.50 succeeded - 5.00 pending (failed and canceled do not count).
    assert "<td>Mug</td><td>Product</td>" in page and "<code>oli_prod</code>" in page
    assert "GHS 82.50" in page
    nowrap = '<td class="orders-number" style="white-space:nowrap">'
    assert f"{nowrap}GHS 9.90</td>{nowrap}GHS 0.00</td>{nowrap}GHS 9.90</td>" in page


@pytest.mark.django_db
def test_an_order_without_refunds_says_so(viewer_client):
    assert "No refunds." in order_page(viewer_client, paid_order())


@pytest.mark.django_db
def test_the_order_page_costs_the_same_queries_with_1_or_50_refunds(
    viewer_client, django_assert_num_queries
):
    one, many = paid_order("or_one"), paid_order("or_many")
    make_refund(one, 0)
    for index in range(50):
        make_refund(many, index, amount=1)
    order_page(viewer_client, one)  # warm the session and content type caches

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        page_one = order_page(viewer_client, one)
    with django_assert_num_queries(len(first.captured_queries)):
        page_many = order_page(viewer_client, many)

    assert page_one.count("rf_or_one_") >= 1
    assert all(f"rf_or_many_{index:03d}" in page_many for index in range(50))
    assert "GHS 99.50" in page_many  # 100.00 - 50 x 0.01


@pytest.mark.django_db
def test_the_refund_list_filters_and_searches(viewer_client):
    order, other = paid_order("or_a"), paid_order("or_b")
    make_refund(order, 1, status="succeeded", reason="duplicate", reference="RET-77")
    make_refund(other, 2, status="pending", currency="usd")

    def listed(query: str) -> set[str]:
        page = viewer_client.get(REFUNDS + query).content.decode()
        return {rid for rid in ("rf_or_a_001", "rf_or_b_002") if rid in page}

    assert listed("") == {"rf_or_a_001", "rf_or_b_002"}
    assert listed("?status__exact=pending") == {"rf_or_b_002"}
    assert listed("?reason=duplicate") == {"rf_or_a_001"}
    assert listed("?currency=usd") == {"rf_or_b_002"}
    assert listed("?q=RET-77") == {"rf_or_a_001"}
    assert listed("?q=or_b") == {"rf_or_b_002"}
    assert listed("?q=rf_or_a_001") == {"rf_or_a_001"}


@pytest.mark.django_db
def test_the_refund_list_names_reasons_by_their_labels(viewer_client):
    make_refund(paid_order("or_a"), 1, reason="item_not_as_described")
    page = viewer_client.get(REFUNDS).content.decode()
    # The filter's choices and the column: labels, the code only in the filter's query string.
    assert '<a href="?reason=requested_by_customer">Requested by the customer</a>' in page
    assert '<a href="?reason=custom">Other (give details)</a>' in page
    assert '<td class="field-reason_column">Item not as described</td>' in page
    assert ">item_not_as_described<" not in page
    assert ">requested_by_customer<" not in page


@pytest.mark.django_db
def test_the_refund_list_is_read_only_and_has_no_cancel_without_the_permission(viewer_client):
    make_refund(paid_order(), 1, status="pending")
    page = viewer_client.get(REFUNDS).content.decode()
    detail = viewer_client.get(
        reverse("admin:django_orders_refund_change", args=(quote("rf_or_paid_001"),))
    ).content.decode()

    assert 'value="cancel_refunds"' not in page
    assert "GHS 0.10" in page
    assert 'name="_save"' not in detail and "Item returned" in detail


# --- the cancel action, end to end against the sandbox --------------------------------------


@pytest.fixture
def refunder_client(client):
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["view_refund", "refund_order"]
    client.force_login(staff_user("refunder", *codenames))
    return client


@pytest.fixture
def pending_refund(live_orders, fresh_client):
    order = place_paid_order(live_orders)
    return refund_order(
        order.pk,
        reference="ret-cancel",
        reason="duplicate",
        lines=[{"line_item_id": line_ids(order)["shipping"], "amount": 990}],
    )


@pytest.mark.django_db(transaction=True)
def test_cancel_needs_the_permission(client, pending_refund, live_orders):
    client.force_login(staff_user("viewer", "view_refund", "view_order"))

    page = client.get(REFUNDS).content.decode()
    run_action(client, REFUNDS, "cancel_refunds", [pending_refund.pk], post="yes")

    assert 'value="cancel_refunds"' not in page
    assert live_orders.refund(pending_refund.pk)["status"] == "pending"


@pytest.mark.django_db(transaction=True)
def test_cancel_confirms_then_cancels_a_pending_refund(
    refunder_client, pending_refund, live_orders
):
    confirmation = run_action(refunder_client, REFUNDS, "cancel_refunds", [pending_refund.pk])
    page = confirmation.content.decode()
    assert "Cancel this pending refund at the payment service?" in page
    assert "GHS 9.90" in page and 'name="post" value="yes"' in page
    assert live_orders.refund(pending_refund.pk)["status"] == "pending"  # nothing sent yet

    done = run_action(refunder_client, REFUNDS, "cancel_refunds", [pending_refund.pk], post="yes")

    assert live_orders.refund(pending_refund.pk)["status"] == "canceled"
    assert Refund.objects.get(pk=pending_refund.pk).status == "canceled"
    assert ("success", f"Canceled: {pending_refund.pk}.") in messages_of(done)


@pytest.mark.django_db(transaction=True)
def test_cancel_refuses_a_refund_no_longer_pending(refunder_client, pending_refund, live_orders):
    Refund.objects.filter(pk=pending_refund.pk).update(status="succeeded")

    response = run_action(refunder_client, REFUNDS, "cancel_refunds", [pending_refund.pk])

    assert response.status_code == 302
    assert messages_of(response)[0][0] == "warning"
    assert "no longer pending" in messages_of(response)[0][1]
    assert live_orders.refund(pending_refund.pk)["status"] == "pending"
