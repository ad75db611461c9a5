"""Persist, then send; an unknown outcome is resent with the same key; the key's lifetime."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.client.transport import OrdersClient
from django_orders.exceptions import RefundRequestPending
from django_orders.models import OrderRequest, Refund
from django_orders.services import refresh_orders, refund_order, resume_order_requests
from tests.refunds.conftest import upstream_refunds_by_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State
LATER = timedelta(hours=2)  # past any backoff and claim, well inside KEY_LIFETIME


def _refund(order, lines, reference="r"):
    return refund_order(
        order.pk,
        reference=reference,
        reason="item_returned",
        lines=[{"line_item_id": lines["product"], "amount": 1500}],
    )


@pytest.mark.django_db(transaction=True)
def test_the_request_is_committed_before_it_leaves(live_orders, paid_order, lines, monkeypatch):
    seen = []
    original = OrdersClient.create_refund

    def spying(self, payload, *, idempotency_key):
        # Autocommit, no transaction open: what this reads is committed, what a crash leaves.
        assert not connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT idempotency_key, payload, reference, state FROM django_orders_orderrequest"
                " WHERE kind = 'refund_create'"
            )
            seen.extend(cursor.fetchall())
        return original(self, payload, idempotency_key=idempotency_key)

    monkeypatch.setattr(OrdersClient, "create_refund", spying)
    refund = _refund(paid_order, lines)

    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert seen == [(request.idempotency_key, request.payload, "r", "pending")]
    assert refund.pk == request.refund_id


@pytest.mark.parametrize("kind", ["error_after_write", "drop_after_commit"])
def test_unknown_outcome_then_resume_with_the_same_key_one_upstream_refund(
    live_orders, paid_order, lines, kind
):
    live_orders.add_fault(kind, "/refunds/create", times=4, status=503)  # every retry too
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == State.PENDING and request.first_sent_at is not None
    assert not Refund.objects.exists()

    summary = resume_order_requests(now=timezone.now() + LATER)

    assert (summary.resent, summary.succeeded) == (1, 1)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    keys = {row["idempotency_key"] for row in live_orders.refunds_created_via_api()}
    assert keys == {request.idempotency_key}
    assert upstream_refunds_by_reference(live_orders) == {"r": [request.refund_id]}
    assert Refund.objects.get().pk == request.refund_id


def test_a_repeat_of_a_pending_reference_resends_it_with_its_own_key(
    live_orders, paid_order, lines
):
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    OrderRequest.objects.update(claimed_until=None)

    refund = _refund(paid_order, lines)

    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.refund_id == refund.pk
    assert upstream_refunds_by_reference(live_orders) == {"r": [refund.pk]}


def test_key_lifetime_expired_needs_review_never_resent(live_orders, paid_order, lines):
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    upstream = len(live_orders.refunds_created_via_api())

    summary = resume_order_requests(now=timezone.now() + timedelta(hours=24))

    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == State.NEEDS_REVIEW
    assert summary.resent == 0 and summary.needs_review == 1
    assert len(live_orders.refunds_created_via_api()) == upstream
    with pytest.raises(RefundRequestPending):  # the stored outcome: review first
        _refund(paid_order, lines)


def test_an_order_lookup_settles_a_request_in_review_by_its_reference(
    live_orders, paid_order, lines
):
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    resume_order_requests(now=timezone.now() + timedelta(hours=24))  # expired: in review
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == State.NEEDS_REVIEW

    refresh_orders([paid_order.pk])  # the order's refunds[] show the refund, reference and all

    request.refresh_from_db()
    [upstream] = live_orders.refunds_created_via_api()
    assert (request.state, request.refund_id) == (State.SUCCEEDED, upstream["refund_id"])
    assert _refund(paid_order, lines).pk == upstream["refund_id"]  # the stored outcome now
    assert len(live_orders.refunds_created_via_api()) == 1
