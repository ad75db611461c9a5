"""Completions and document sends on the order's timeline, end to end against the sandbox:
from the admin and the REST API with the staff user, from shop code as ``shop``, each
delivery's channels and an unknown outcome; the order page's queries stay the same."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_orders.exceptions import DeliveryOutcomeUnknown, OrderRequestPending
from django_orders.models import DocumentDelivery, OrderEvent, OrderRequest
from django_orders.services import complete_order, send_invoice, send_receipt
from tests.admin.factories import ADMIN_MODELS, staff_user
from tests.admin.test_actions import run_action
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
ORDERS = reverse("admin:django_orders_order_changelist")
CHECKOUT = [
    ("request", "checkout", None, "succeeded", ""),
    ("status_changed", "checkout", "requires_payment", "paid", ""),
]


def timeline(order_id: str) -> list[tuple]:
    """The order's entries, oldest first: (kind, source, from, to, staff user)."""
    return list(
        OrderEvent.objects.filter(order_id=order_id)
        .order_by("at", "id")
        .values_list("kind", "source", "from_status", "to_status", "actor")
    )


def documents(order_id: str) -> list[dict]:
    entries = OrderEvent.objects.filter(order_id=order_id, kind="document_sent")
    return [entry.detail for entry in entries.order_by("at", "id")]


def order_page(client, order_id: str) -> str:
    response = client.get(reverse("admin:django_orders_order_change", args=(quote(order_id),)))
    assert response.status_code == 200
    return response.content.decode()


def test_staff_completion_and_receipt_in_the_admin_are_on_the_timeline_with_the_user(
    client, paid_order
):
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["complete_order", "send_receipt"]
    client.force_login(staff_user("fulfiller", *codenames))

    run_action(client, ORDERS, "mark_fulfilled", [paid_order.pk], post="yes")
    run_action(client, ORDERS, "send_receipts", [paid_order.pk], post="yes")

    assert timeline(paid_order.pk) == [
        *CHECKOUT,
        ("request", "staff", None, "succeeded", "fulfiller"),
        ("status_changed", "staff", "paid", "completed", "fulfiller"),
        ("document_sent", "staff", None, "receipt", "fulfiller"),
    ]
    complete_entry = OrderEvent.objects.get(order_id=paid_order.pk, kind="request", source="staff")
    assert complete_entry.detail["request_kind"] == "order_complete"
    delivery = DocumentDelivery.objects.get(order_id=paid_order.pk)
    assert documents(paid_order.pk) == [
        {"delivery": delivery.pk, "state": "delivered", "sent": ["email", "sms"], "failed": {}}
    ]
    page = order_page(client, paid_order.pk)
    table = page[page.index('class="orders-timeline"') :]
    receipt, completed = (
        table.index("Document sent: receipt"),
        table.index("Request to mark the order fulfilled"),
    )
    paid = table.index("requires_payment")
    assert receipt < completed < paid  # newest first
    assert "sent: email, sms" in table and "<td>fulfiller</td>" in table


def test_the_completion_attempt_is_recorded_once_and_a_repeat_as_a_staff_action(paid_order):
    complete_order(paid_order.pk)
    complete_order(paid_order.pk, actor="ama")  # already completed: nothing sent

    assert timeline(paid_order.pk) == [
        *CHECKOUT,
        ("request", "shop", None, "succeeded", ""),
        ("status_changed", "shop", "paid", "completed", ""),
        ("staff_action", "staff", None, "complete_order", "ama"),
    ]
    staff_entry = OrderEvent.objects.get(order_id=paid_order.pk, kind="staff_action")
    assert staff_entry.detail == {"outcome": "already completed"}


def test_a_completion_the_mirror_missed_is_the_staff_users_status_change_only(
    orders_sandbox, paid_order
):
    # Completed upstream, its request recorded succeeded, the mirror still says paid.
    orders_sandbox.set_order_status(paid_order.pk, "completed")
    OrderRequest.objects.create(
        kind="order_complete",
        idempotency_key=f"complete-{paid_order.pk}",
        payload="{}",
        order=paid_order,
        state="succeeded",
    )

    complete_order(paid_order.pk, actor="ama")  # the lookup brings the mirror up to date

    assert timeline(paid_order.pk) == [
        *CHECKOUT,
        ("status_changed", "staff", "paid", "completed", "ama"),
    ]


def test_a_dropped_completion_answer_then_the_staff_repeat_are_two_attempts(
    orders_sandbox, paid_order
):
    orders_sandbox.add_fault("drop_after_commit", "/orders/complete", times=10)
    with pytest.raises(OrderRequestPending):
        complete_order(paid_order.pk, actor="ama")
    orders_sandbox.faults.clear()

    complete_order(paid_order.pk, actor="ama")  # the same key: the service replays its answer

    assert timeline(paid_order.pk)[2:] == [
        ("request", "staff", None, "pending", "ama"),
        ("request", "staff", None, "succeeded", "ama"),
        ("status_changed", "staff", "paid", "completed", "ama"),
    ]
    attempts = OrderEvent.objects.filter(order_id=paid_order.pk, kind="request", source="staff")
    assert sorted(entry.detail["attempt"] for entry in attempts) == [1, 2]


def test_a_failed_channel_and_an_unknown_outcome_are_recorded_as_such(orders_sandbox, paid_order):
    orders_sandbox.fail_channel("sms", "sms_undeliverable: number out of service.", times=1)
    send_invoice(paid_order.pk)
    orders_sandbox.add_fault("drop_after_commit", "/orders/send_receipt", times=1)
    with pytest.raises(DeliveryOutcomeUnknown):
        send_receipt(paid_order.pk, actor="ama")

    invoice, receipt = documents(paid_order.pk)
    assert (invoice["state"], invoice["sent"], invoice["failed"]) == (
        "partly_delivered",
        ["email"],
        {"sms": "sms_undeliverable: number out of service."},
    )
    assert (receipt["state"], receipt["sent"], receipt["failed"]) == ("unknown", [], {})
    assert "OutcomeUnknown" in receipt["error"]
    assert timeline(paid_order.pk)[2:] == [
        ("document_sent", "shop", None, "invoice", ""),
        ("document_sent", "staff", None, "receipt", "ama"),
    ]


def test_the_rest_endpoints_record_the_api_user(paid_order):
    api = client_for(
        make_user("api-fulfil", "view_order", "complete_order", "send_invoice", staff=True)
    )

    assert api.post(f"/api/orders/{paid_order.pk}/complete/").status_code == 200
    assert (
        api.post(
            f"/api/orders/{paid_order.pk}/invoice/", HTTP_IDEMPOTENCY_KEY="timeline-invoice-1"
        ).status_code
        == 201
    )

    assert timeline(paid_order.pk)[2:] == [
        ("request", "staff", None, "succeeded", "api-fulfil"),
        ("status_changed", "staff", "paid", "completed", "api-fulfil"),
        ("document_sent", "staff", None, "invoice", "api-fulfil"),
    ]


def test_an_actor_that_names_no_one_is_refused_before_anything_is_sent(orders_sandbox, paid_order):
    with pytest.raises(ValueError, match="actor"):
        send_receipt(paid_order.pk, actor="  ")
    with pytest.raises(ValueError, match="actor"):
        complete_order(paid_order.pk, actor="")

    assert not DocumentDelivery.objects.exists()
    assert orders_sandbox.deliveries(paid_order.pk) == []
    assert timeline(paid_order.pk) == CHECKOUT


def test_the_order_page_costs_the_same_queries_after_completion_and_sends(
    client, paid_order, django_assert_num_queries
):
    client.force_login(staff_user("viewer", *(f"view_{m}" for m in ADMIN_MODELS)))
    order_page(client, paid_order.pk)  # warm the session and content type caches
    with CaptureQueriesContext(connection) as before:
        order_page(client, paid_order.pk)

    complete_order(paid_order.pk, actor="ama")
    for _ in range(3):
        send_receipt(paid_order.pk, actor="ama")
    send_invoice(paid_order.pk)

    with django_assert_num_queries(len(before.captured_queries)):
        page = order_page(client, paid_order.pk)
    assert page.count("Document sent: receipt") == 3
    assert page.count("Document sent: invoice") == 1
