"""Every event type, produced by the flows that cause it, end to end over loopback HTTP: the
sandbox as the provider, the runner posting to a loopback receiver, each delivery verified
with the ``standardwebhooks`` reference library."""

from __future__ import annotations

import json

import pytest
import standardwebhooks

from django_orders.models import EventDelivery, OrderRequest, OutboxEvent
from django_orders.services import (
    cancel_order,
    cancel_refund,
    complete_order,
    create_order,
    create_webhook_endpoint,
    refund_order,
    send_receipt,
    sync_orders,
)
from tests.fixtures.payloads import create_order_input, new_reference
from tests.refunds.conftest import line_ids, place_paid_order

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


def delivered_types(receiver, order_id=None):
    return [
        hook.payload["type"]
        for hook in receiver.accepted
        if order_id is None or _order_of(hook.payload) == order_id
    ]


def _order_of(payload):
    data = payload["data"]
    if payload["type"].startswith("refund."):
        return data["order"]
    if payload["type"] in ("document.sent", "request.needs_review"):
        return data["order"]
    return data["id"]


def check_with_reference_library(receiver):
    library = standardwebhooks.Webhook(receiver.secret)
    for hook in receiver.accepted:
        assert hook.problem == ""
        assert library.verify(hook.body, hook.headers) == json.loads(hook.body)


def test_checkout_payment_refund_and_receipt_send_their_events(subscriber, fresh_client):
    order = place_paid_order(subscriber._sandbox)
    shipping = line_ids(order)["shipping"]
    refund = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": shipping, "amount": 500}],
    )
    send_receipt(order.pk)
    drain()

    types = delivered_types(subscriber, order.pk)
    assert types[:2] == ["order.created", "order.paid"]
    assert "refund.created" in types
    assert "document.sent" in types
    check_with_reference_library(subscriber)
    created = next(h for h in subscriber.accepted if h.payload["type"] == "order.created")
    assert created.payload["data"]["id"] == order.pk
    assert created.payload["data"]["customer"]["id"] == order.customer_id
    refund_hook = next(h for h in subscriber.accepted if h.payload["type"] == "refund.created")
    assert refund_hook.payload["data"]["id"] == refund.pk
    assert refund_hook.payload["data"]["lines"] == [{"line_item_id": shipping, "amount": 500}]
    # one event, one id: the header is the stored id
    for hook in subscriber.accepted:
        assert OutboxEvent.objects.filter(webhook_id=hook.webhook_id).exists()


def test_cancel_complete_and_sync_changes_send_their_events(subscriber, fresh_client):
    sandbox = subscriber._sandbox
    unpaid = create_order(**create_order_input(), finalize=True, reference=new_reference())
    cancel_order(unpaid)
    paid = place_paid_order(sandbox)
    complete_order(paid.pk)
    # Upstream only: first seen by the sync; then one expires, one completes unpaid.
    found = sandbox.insert_orders(2)
    sync_orders()
    sandbox.set_order_status(found[0], "expired")
    sandbox.set_order_status(found[1], "completed")
    sync_orders()
    drain()

    assert delivered_types(subscriber, unpaid.pk) == ["order.created", "order.canceled"]
    assert delivered_types(subscriber, paid.pk) == [
        "order.created",
        "order.paid",
        "order.completed",
    ]
    assert delivered_types(subscriber, found[0]) == ["order.first_seen", "order.expired"]
    # unpaid straight to completed: order.paid goes out first
    assert delivered_types(subscriber, found[1]) == [
        "order.first_seen",
        "order.paid",
        "order.completed",
    ]
    check_with_reference_library(subscriber)


def test_refund_settlement_failure_and_cancel_send_their_events(subscriber, fresh_client):
    sandbox = subscriber._sandbox
    order = place_paid_order(sandbox)
    shipping, product = line_ids(order)["shipping"], line_ids(order)["product"]
    settled = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": shipping, "amount": 100}],
    )
    failed = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": shipping, "amount": 100}],
    )
    canceled = refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": product, "amount": 100}],
    )
    cancel_refund(canceled.pk)
    sandbox.settle_refund(settled.pk)
    sandbox.fail_refund(failed.pk)
    sync_orders()
    drain()

    by_refund = {}
    for hook in subscriber.accepted:
        if hook.payload["type"].startswith("refund."):
            by_refund.setdefault(hook.payload["data"]["id"], []).append(hook.payload["type"])
    assert by_refund[settled.pk] == ["refund.created", "refund.succeeded"]
    assert by_refund[failed.pk] == ["refund.created", "refund.failed"]
    assert by_refund[canceled.pk] == ["refund.created", "refund.canceled"]
    check_with_reference_library(subscriber)


def test_first_seen_goes_only_to_endpoints_that_name_it(
    live_orders, webhook_receiver, fast_webhooks
):
    default, _secret = create_webhook_endpoint(webhook_receiver.url)
    live_orders.insert_orders(3)
    sync_orders()

    assert OutboxEvent.objects.filter(type="order.first_seen").count() == 3
    assert not EventDelivery.objects.filter(endpoint=default).exists()


# --- request.needs_review: every way a request goes to review sends it -------------------------


def needs_review_hooks(receiver):
    return [h for h in receiver.accepted if h.payload["type"] == "request.needs_review"]


def test_a_refund_answered_with_another_refund_sends_needs_review(subscriber, fresh_client):
    from django_orders.exceptions import RefundAnswerMismatch

    sandbox = subscriber._sandbox
    order = place_paid_order(sandbox)
    shipping = line_ids(order)["shipping"]
    refund_order(
        order.pk,
        reference="first",
        reason="duplicate",
        lines=[{"line_item_id": shipping, "amount": 100}],
    )
    sandbox.add_fault("other_refund", "/refunds/create")
    with pytest.raises(RefundAnswerMismatch):
        refund_order(
            order.pk,
            reference="second",
            reason="duplicate",
            lines=[{"line_item_id": shipping, "amount": 200}],
        )
    drain()

    request = OrderRequest.objects.get(reference="second")
    [hook] = needs_review_hooks(subscriber)
    data = hook.payload["data"]
    assert (data["id"], data["kind"], data["reference"]) == (request.pk, "refund_create", "second")
    assert (data["state"], data["order"], data["refund"]) == ("needs_review", order.pk, None)
    assert data["error"].startswith("RefundAnswerMismatch: ")
    # in order with the order's other events: after the first refund's
    assert delivered_types(subscriber, order.pk)[-1] == "request.needs_review"
    check_with_reference_library(subscriber)


def test_an_order_create_answered_with_another_order_sends_needs_review(
    settings, hostile_server, webhook_receiver
):
    from django_orders.exceptions import OrderAnswerMismatch
    from tests.creation.test_answer_check import answer, sent
    from tests.fixtures.hostile import json_answer, use_hostile_server

    from .conftest import FAST

    use_hostile_server(
        settings,
        hostile_server,
        "sk_test_needs_review_0123456789",
        WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"],
        **FAST,
    )
    _endpoint, webhook_receiver.secret = create_webhook_endpoint(webhook_receiver.url)
    hostile_server.script("/orders/create", json_answer(200, answer(number="EX-2")))
    with pytest.raises(OrderAnswerMismatch):
        create_order(**sent(create_order_input()), reference="cart-1")
    drain()

    request = OrderRequest.objects.get()
    [hook] = webhook_receiver.accepted
    assert hook.payload["type"] == "request.needs_review"
    data = hook.payload["data"]
    assert (data["id"], data["kind"], data["reference"]) == (request.pk, "order_create", "cart-1")
    assert data["order"] is None  # a request that never made an order
    assert "its number is 'EX-2'" in data["error"]
    assert OutboxEvent.objects.get().order_id is None
    check_with_reference_library(webhook_receiver)


def test_a_request_whose_key_expired_is_sent_to_review_with_its_event(subscriber, fresh_client):
    from datetime import timedelta

    from django.utils import timezone

    from django_orders.exceptions import OrderRequestPending
    from django_orders.services import resume_order_requests

    sandbox = subscriber._sandbox
    sandbox.add_fault("drop_after_commit", "/orders/create", times=10)
    with pytest.raises(OrderRequestPending):
        create_order(**create_order_input(), reference="lost-answer")
    request = OrderRequest.objects.get(reference="lost-answer")
    assert request.state == "pending" and request.first_sent_at is not None
    assert not OutboxEvent.objects.exists()

    summary = resume_order_requests(now=timezone.now() + timedelta(hours=25))
    assert summary.needs_review == 1 and summary.resent == 0
    # written with the move: the event is there before any runner ran
    event = OutboxEvent.objects.get(type="request.needs_review")
    assert EventDelivery.objects.filter(event=event, endpoint=subscriber.endpoint).count() == 1
    drain()

    [hook] = needs_review_hooks(subscriber)
    data = hook.payload["data"]
    assert (data["id"], data["reference"], data["state"]) == (
        request.pk,
        "lost-answer",
        "needs_review",
    )
    assert "Not resent" in data["error"]
    # a second run finds nothing more to move and sends nothing more
    assert resume_order_requests(now=timezone.now() + timedelta(hours=25)).needs_review == 0
    assert OutboxEvent.objects.filter(type="request.needs_review").count() == 1
    check_with_reference_library(subscriber)
