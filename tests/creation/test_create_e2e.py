"""create_order end to end against the sandbox over real loopback HTTP."""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.exceptions import (
    AuthenticationFailed,
    OrderRequestPending,
    OrderRequestRejected,
    ReferenceConflict,
)
from django_orders.models import Customer, Order, OrderRequest
from django_orders.services import create_order, resend_order_request, resume_order_requests
from django_orders.signals import order_created
from tests.creation.conftest import upstream_orders_by_key
from tests.fixtures.mirror import statement_text
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State
LATER = timedelta(hours=2)  # past any backoff and claim, well inside KEY_LIFETIME


def test_success_stores_request_customer_and_order(live_orders, received, order_input):
    order = create_order(**order_input, reference="cart-1")

    request = OrderRequest.objects.get()
    assert request.state == State.SUCCEEDED
    assert request.reference == "cart-1"
    assert request.order_id == order.pk
    assert request.attempts == 1
    assert request.claimed_until is None
    assert request.next_attempt_at is None
    upstream = live_orders.store.order(order.pk)
    assert upstream is not None
    assert Order.objects.get().raw == upstream
    assert Customer.objects.get().pk == upstream["customer"]["id"]
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [order.pk]}
    # The stored payload is byte for byte what the sandbox read off the socket.
    assert received.creates() == [request.payload.encode()]
    sent = json.loads(request.payload)
    assert sent["customer_data"] == order_input["customer"]
    assert sent["line_items"] == order_input["line_items"]
    assert sent["finalize"] is False


def test_finalize_is_sent(live_orders, order_input):
    order = create_order(**order_input, finalize=True, reference=new_reference())
    assert json.loads(OrderRequest.objects.get().payload)["finalize"] is True
    assert "sealed_at" in order.raw


def test_success_path_statements_in_a_test_transaction(
    live_orders, order_input, django_assert_num_queries
):
    # INSERT request (in a savepoint: under the test's own atomic block a repeated reference's
    # IntegrityError must not poison it); SELECT: no other request holds the answered order;
    # upsert customer; upsert order; UPDATE request; the order.created event and its fan-out
    # to the subscribed endpoints (events out); the request's entry on the timeline.
    with django_assert_num_queries(10) as captured:
        create_order(**order_input, reference=new_reference())
    sql = [statement_text(q["sql"]).split()[0].upper() for q in captured.captured_queries]
    assert sql == [
        "SAVEPOINT",
        "INSERT",
        "RELEASE",
        "SELECT",
        "INSERT",
        "INSERT",
        "UPDATE",
        "INSERT",
        "INSERT",
        "INSERT",
    ]


@pytest.mark.django_db(transaction=True)
def test_success_path_statements_in_autocommit(live_orders, order_input, django_assert_num_queries):
    # As in production (no test transaction), with a reference: the request row commits on
    # its own before the send, then one transaction (Django logs its BEGIN and COMMIT too).
    # The last INSERTs: the order.created event, its fan-out, the request's entry on the
    # order's timeline, in the same transaction.
    with django_assert_num_queries(10) as captured:
        create_order(**order_input, reference="cart-autocommit")
    sql = [statement_text(q["sql"]).split()[0].upper() for q in captured.captured_queries]
    assert sql == [
        "INSERT",
        "SELECT",
        "BEGIN",
        "INSERT",
        "INSERT",
        "UPDATE",
        "INSERT",
        "INSERT",
        "INSERT",
        "COMMIT",
    ]
    assert OrderRequest.objects.get().state == State.SUCCEEDED


def test_order_created_signal_after_commit(
    live_orders, order_input, django_capture_on_commit_callbacks
):
    seen = []

    def receiver(sender, order, order_request, **kwargs):
        seen.append((order.pk, order_request.pk))

    order_created.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            order = create_order(**order_input, reference=new_reference())
        assert seen == []  # nothing before the commit
        for callback in callbacks:
            callback()
    finally:
        order_created.disconnect(receiver)
    assert seen == [(order.pk, OrderRequest.objects.get().pk)]


def test_same_reference_after_success_returns_order_without_sending(
    live_orders, received, order_input
):
    first = create_order(**order_input, reference="cart-2")
    second = create_order(**order_input, reference="cart-2")
    assert second.pk == first.pk
    assert len(received.creates()) == 1
    assert OrderRequest.objects.count() == 1


def test_lost_answer_is_pending_then_resumed_with_same_key_and_bytes(
    live_orders, received, order_input
):
    live_orders.add_fault("drop_after_commit", "/orders/create", times=4)  # client retries too
    with pytest.raises(OrderRequestPending) as caught:
        create_order(**order_input, reference="cart-3")
    request = caught.value.order_request
    request.refresh_from_db()
    assert request.state == State.PENDING
    assert request.attempts == 1
    assert "OutcomeUnknown" in request.last_error
    assert request.next_attempt_at > request.last_attempt_at
    assert request.claimed_until is None
    # The order exists upstream already, once.
    assert len(upstream_orders_by_key(live_orders)[request.idempotency_key]) == 1

    summary = resume_order_requests(now=timezone.now() + LATER)
    assert (summary.resent, summary.succeeded) == (1, 1)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    keys = upstream_orders_by_key(live_orders)
    assert keys == {request.idempotency_key: [request.order_id]}
    bodies = received.creates()
    assert len(bodies) == 5
    assert set(bodies) == {request.payload.encode()}


def test_server_error_before_write_stays_pending_then_succeeds(live_orders, order_input):
    live_orders.add_fault("error_before_write", "/orders/create", times=4, status=503)
    with pytest.raises(OrderRequestPending) as caught:
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert caught.value.order_request.pk == request.pk
    assert (request.state, request.last_status_code) == (State.PENDING, 503)
    assert live_orders.store.orders_created_via_api() == []
    resume_order_requests(now=timezone.now() + LATER)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [request.order_id]}


def test_server_error_after_write_leaves_one_upstream_order(live_orders, order_input):
    live_orders.add_fault("error_after_write", "/orders/create", times=4, status=500)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.last_status_code == 500
    resume_order_requests(now=timezone.now() + LATER)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [request.order_id]}


def test_rate_limited_after_retries_stays_pending(live_orders, order_input, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "MAX_RETRIES": 0}
    live_orders.add_fault("rate_limit", "/orders/create", retry_after=120)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert (request.state, request.last_status_code, request.last_error_code) == (
        State.PENDING,
        429,
        "rate_limited",
    )
    # Retry-After beyond the backoff is honoured.
    assert request.next_attempt_at - request.last_attempt_at >= timedelta(seconds=120)
    assert live_orders.store.orders_created_via_api() == []


def test_definitive_rejection_is_failed_and_not_resent(live_orders, received, order_input):
    # Valid for us, refused upstream (the fault stands in for the service's refusal).
    order_input["line_items"].append(
        {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 100}, "label": "Service"}}
    )
    live_orders.add_fault("error_before_write", "/orders/create", status=400)
    with pytest.raises(OrderRequestRejected) as caught:
        create_order(**order_input, reference="cart-4")
    request = OrderRequest.objects.get()
    assert request.state == State.FAILED
    assert request.last_status_code == 400
    assert request.last_request_id.startswith("req_")
    assert caught.value.error.request_id == request.last_request_id
    # The same reference again: the stored rejection, nothing sent.
    with pytest.raises(OrderRequestRejected) as again:
        create_order(**order_input, reference="cart-4")
    assert again.value.error.status_code == 400
    assert len(received.creates()) == 1
    assert resume_order_requests().resent == 0


def test_idempotency_conflict_after_tampering_needs_review(live_orders, order_input):
    live_orders.add_fault("drop_after_commit", "/orders/create", times=4)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    tampered = json.loads(request.payload)
    tampered["line_items"][0]["product"]["quantity"] = 3
    OrderRequest.objects.filter(pk=request.pk).update(payload=json.dumps(tampered))

    summary = resume_order_requests(now=timezone.now() + LATER)
    assert (summary.resent, summary.needs_review) == (1, 1)
    request.refresh_from_db()
    assert request.state == State.NEEDS_REVIEW
    assert (request.last_status_code, request.last_error_code) == (422, "idempotency_key_conflict")
    assert len(upstream_orders_by_key(live_orders)[request.idempotency_key]) == 1


def test_in_progress_409_stays_pending_then_replays(live_orders, received, order_input, settings):
    # The server holds the first send (its key stays "running"); the client's read timeout
    # ends that send as unknown, and a resend meanwhile gets 409 in progress.
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "TIMEOUT": (2, 0.5), "MAX_RETRIES": 0}
    live_orders.add_fault("slow", "/orders/create", seconds=2)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.last_error.startswith("OutcomeUnknown")
    request = resend_order_request(request)
    assert request.state == State.PENDING
    assert (request.last_status_code, request.last_error_code) == (
        409,
        "idempotency_key_in_progress",
    )
    assert request.attempts == 2
    # Wait (not timed: polled) until the slow first request has finished upstream.
    for _ in range(200):
        if live_orders.store.orders_created_via_api():
            break
        threading.Event().wait(0.05)
    request = resend_order_request(request)
    assert request.state == State.SUCCEEDED
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [request.order_id]}
    assert set(received.creates()) == {request.payload.encode()}


def test_a_checkout_refused_with_401_fails_and_reopens_under_a_new_key_once_the_key_is_fixed(
    live_orders, received, order_input, settings, caplog
):
    good_key = settings.DJANGO_ORDERS["API_KEY"]
    wrong = "sk_test_wrong_" + "x" * 20
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": wrong}
    caplog.set_level(logging.DEBUG)
    reference = new_reference()
    with pytest.raises(AuthenticationFailed) as caught:
        create_order(**order_input, reference=reference)
    request = OrderRequest.objects.get()
    assert (request.state, request.last_status_code, request.last_error_code) == (
        State.FAILED,
        401,
        "authentication_failed",
    )
    for text in (str(caught.value), repr(caught.value), request.last_error, caplog.text):
        assert wrong not in text
        assert good_key not in text
    refused_key = request.idempotency_key

    # Fixed key: nothing resends the failed checkout behind the customer's back...
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": good_key}
    summary = resume_order_requests(now=timezone.now() + LATER)
    assert (summary.resent, summary.succeeded) == (0, 0)
    assert upstream_orders_by_key(live_orders) == {}
    # ... a different cart under the same reference is still a conflict ...
    with pytest.raises(ReferenceConflict):
        create_order(
            **{**order_input, "finalize": not order_input.get("finalize")}, reference=reference
        )
    # ... and the customer's repeated checkout sends it afresh, under a new key.
    order = create_order(**order_input, reference=reference)
    request.refresh_from_db()
    assert (request.state, request.order_id) == (State.SUCCEEDED, order.pk)
    assert request.idempotency_key != refused_key
    assert json.loads(request.payload)["request_meta"]["idempotency_key"] == request.idempotency_key
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [order.pk]}
    assert OrderRequest.objects.count() == 1


def test_a_401_after_a_send_that_may_have_reached_the_service_stays_pending(
    live_orders, received, order_input, settings
):
    good_key = settings.DJANGO_ORDERS["API_KEY"]
    live_orders.add_fault("drop_after_commit", "/orders/create", times=4)  # made, answer lost
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    key = request.idempotency_key
    # The key is rotated wrongly before the resume: a 401 now proves nothing about the order.
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": "sk_test_wrong_" + "y" * 20}
    resume_order_requests(now=timezone.now() + LATER)
    request.refresh_from_db()
    assert (request.state, request.last_status_code) == (State.PENDING, 401)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": good_key}
    summary = resume_order_requests(now=timezone.now() + 2 * LATER)
    request.refresh_from_db()
    assert (summary.succeeded, request.state, request.idempotency_key) == (1, State.SUCCEEDED, key)
    assert list(upstream_orders_by_key(live_orders)) == [key]
    assert len(upstream_orders_by_key(live_orders)[key]) == 1


def test_key_lifetime_expiry_is_never_resent(live_orders, received, order_input):
    live_orders.add_fault("drop_after_commit", "/orders/create", times=4)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-5")
    request = OrderRequest.objects.get()
    OrderRequest.objects.filter(pk=request.pk).update(
        first_sent_at=timezone.now() - timedelta(hours=23, minutes=1),
        next_attempt_at=None,
    )
    sent_before = len(received.creates())
    summary = resume_order_requests()
    assert (summary.resent, summary.needs_review) == (0, 1)
    request.refresh_from_db()
    assert request.state == State.NEEDS_REVIEW
    assert "KEY_LIFETIME" in request.last_error and "second order" in request.last_error
    assert len(received.creates()) == sent_before
    # Nor through the same reference.
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-5")
    assert len(received.creates()) == sent_before


def test_pending_reference_is_resent_with_its_own_key(live_orders, received, order_input):
    live_orders.add_fault("error_before_write", "/orders/create", times=4, status=502)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-6")
    request = OrderRequest.objects.get()
    sent = len(received.creates())
    # Another payload under the same reference is a conflict: refused, nothing sent.
    other = dict(order_input, customer={**order_input["customer"], "name": "Someone Else"})
    with pytest.raises(ReferenceConflict, match="cart-6"):
        create_order(**other, reference="cart-6")
    assert len(received.creates()) == sent
    # The same payload again resends the stored request with its own key.
    order = create_order(**order_input, reference="cart-6")
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED and request.order_id == order.pk
    assert OrderRequest.objects.count() == 1
    assert set(received.creates()) == {request.payload.encode()}
    assert order.raw["customer"]["name"] == "Ama Mensah"


def test_resend_refuses_a_request_that_is_not_pending(live_orders, order_input):
    create_order(**order_input, reference=new_reference())
    with pytest.raises(ValueError, match="only pending"):
        resend_order_request(OrderRequest.objects.get())


def test_claimed_request_is_not_sent_twice(live_orders, received, order_input):
    live_orders.add_fault("error_before_write", "/orders/create", times=4, status=503)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-7")
    OrderRequest.objects.update(claimed_until=timezone.now() + timedelta(minutes=5))
    sent = len(received.creates())
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-7")
    with pytest.raises(OrderRequestPending):
        resend_order_request(OrderRequest.objects.get())
    assert resume_order_requests(now=timezone.now() + timedelta(minutes=1)).resent == 0
    assert len(received.creates()) == sent
    assert connection.vendor in ("sqlite", "postgresql")
