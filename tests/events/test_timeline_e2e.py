"""The timeline end to end over loopback HTTP against the sandbox: checkout, payment, staff
actions from the admin and the REST API, refunds and their requests, later syncs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.exceptions import RefundRejected, RefundRequestPending
from django_orders.models import Order, OrderEvent
from django_orders.services import (
    create_order,
    refresh_orders,
    refund_order,
    resume_order_requests,
    sync_orders,
)
from django_orders.signals import order_status_changed
from tests.admin.factories import ADMIN_MODELS, staff_user
from tests.admin.test_actions import run_action
from tests.fixtures.payloads import create_order_input, new_reference
from tests.refunds.conftest import line_ids, place_paid_order
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
LATER = timedelta(hours=2)  # past any backoff and claim, well inside KEY_LIFETIME


def timeline(order_id: str) -> list[tuple]:
    """The order's entries, oldest first: (kind, source, from, to, staff user)."""
    return list(
        OrderEvent.objects.filter(order_id=order_id)
        .order_by("at", "id")
        .values_list("kind", "source", "from_status", "to_status", "actor")
    )


def test_checkout_then_payment_is_the_request_and_the_change(live_orders, fresh_client):
    order = place_paid_order(live_orders)  # create_order, paid upstream, confirm_order

    assert timeline(order.pk) == [
        ("request", "checkout", None, "succeeded", ""),
        ("status_changed", "checkout", "requires_payment", "paid", ""),
    ]
    request_entry = OrderEvent.objects.get(kind="request")
    assert request_entry.order_request_id == order.requests.get().pk
    assert request_entry.detail["request_kind"] == "order_create"

    sync_orders()  # the walk finds the order as the mirror holds it: nothing to record
    assert len(timeline(order.pk)) == 2


def test_staff_cancel_in_the_admin_records_the_user(client, live_orders, fresh_client):
    order = create_order(**create_order_input(), finalize=True, reference=new_reference())
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["cancel_order"]
    client.force_login(staff_user("canceller", *codenames))

    changelist = "/admin/django_orders/order/"
    run_action(client, changelist, "cancel_orders", [order.pk], post="yes")

    assert Order.objects.get(pk=order.pk).status == "canceled"
    assert timeline(order.pk)[-1] == (
        "status_changed",
        "staff",
        "requires_payment",
        "canceled",
        "canceller",
    )


def test_a_staff_refund_records_the_request_and_the_refund_then_its_settlement(
    live_orders, fresh_client
):
    order = place_paid_order(live_orders)
    shipping = line_ids(order)["shipping"]

    refund = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": shipping, "amount": 990}],
        actor="ama",
    )
    live_orders.settle_refund(refund.pk)
    refresh_orders([order.pk])  # the lookup embeds the refund, now succeeded

    assert timeline(order.pk)[2:] == [
        ("refund_status_changed", "staff", None, "pending", "ama"),
        ("request", "staff", None, "succeeded", "ama"),
        ("refund_status_changed", "lookup", "pending", "succeeded", ""),
    ]
    entries = OrderEvent.objects.filter(order_id=order.pk, refund_id=refund.pk)
    assert entries.count() == 3  # the request's entry names the refund it created too


def test_a_refund_over_rest_records_the_api_user(live_orders, fresh_client):
    order = place_paid_order(live_orders)
    api = client_for(make_user("api-staff", "view_refund", "refund_order", staff=True))
    response = api.post(
        f"/api/orders/{order.pk}/refunds/",
        {
            "reference": new_reference(),
            "reason": "duplicate",
            "lines": [{"line_item_id": line_ids(order)["shipping"], "amount": 990}],
        },
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_reference(),
    )
    assert response.status_code == 201, response.content
    assert timeline(order.pk)[2:] == [
        ("refund_status_changed", "staff", None, "pending", "api-staff"),
        ("request", "staff", None, "succeeded", "api-staff"),
    ]


def test_an_unknown_outcome_then_the_resume_are_two_attempts(live_orders, fresh_client):
    order = place_paid_order(live_orders)
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        refund_order(
            order.pk,
            reference=new_reference(),
            reason="duplicate",
            lines=[{"line_item_id": line_ids(order)["shipping"], "amount": 990}],
        )
    pending = OrderEvent.objects.get(kind="request", to_status="pending")
    assert (pending.source, pending.detail["attempt"], pending.detail["status_code"]) == (
        "shop",
        1,
        503,
    )
    assert pending.detail["error"]  # the error recorded on the request, shortened

    resume_order_requests(now=timezone.now() + LATER)

    assert timeline(order.pk)[3:] == [
        ("refund_status_changed", "resume", None, "pending", ""),
        ("request", "resume", None, "succeeded", ""),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_later_sync_records_and_announces_each_change_once(live_orders, fresh_client):
    ids = live_orders.insert_orders(3)
    announced = []

    def receiver(sender, order, previous_status, status, **kwargs):
        announced.append((order.pk, previous_status, status))

    order_status_changed.connect(receiver, weak=False)
    try:
        sync_orders()  # the first sync discovers them: no entry, no change announced
        assert not OrderEvent.objects.exists()
        live_orders.pay_order(ids[0])
        sync_orders()
        sync_orders()
    finally:
        order_status_changed.disconnect(receiver)

    assert timeline(ids[0]) == [("status_changed", "page", "requires_payment", "paid", "")]
    assert OrderEvent.objects.count() == 1
    assert announced == [(ids[0], "requires_payment", "paid")]


def test_staff_cancel_of_a_refund_in_the_admin_records_the_user(client, live_orders, fresh_client):
    order = place_paid_order(live_orders)
    refund = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": line_ids(order)["shipping"], "amount": 990}],
    )
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["view_refund", "refund_order"]
    client.force_login(staff_user("kofi", *codenames))

    run_action(client, "/admin/django_orders/refund/", "cancel_refunds", [refund.pk], post="yes")

    assert timeline(order.pk)[2:] == [
        ("refund_status_changed", "shop", None, "pending", ""),
        ("request", "shop", None, "succeeded", ""),
        ("refund_status_changed", "staff", "pending", "canceled", "kofi"),
    ]


def test_a_rejected_refund_is_one_failed_attempt_and_no_refund(live_orders, fresh_client):
    order = place_paid_order(live_orders)
    live_orders.add_fault("error_before_write", "/refunds/create", status=400)
    reference = new_reference()
    with pytest.raises(RefundRejected):
        refund_order(order.pk, reference=reference, reason="duplicate", actor="ama")
    with pytest.raises(RefundRejected):  # the stored outcome: nothing sent, nothing recorded
        refund_order(order.pk, reference=reference, reason="duplicate", actor="ama")

    assert timeline(order.pk)[2:] == [("request", "staff", None, "failed", "ama")]
    failed = OrderEvent.objects.get(kind="request", to_status="failed")
    assert failed.detail["status_code"] == 400 and failed.refund_id is None
