"""The issue's remaining "Services" bullets, each proved end to end against the sandbox: a
repeat answers with its stored outcome before any lookup, whatever that outcome; a key is
never resent past ``KEY_LIFETIME``; an order lookup's ``refunds[]`` settles a request whose
outcome was unknown; a completed order is refundable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.conf import orders_settings
from django_orders.exceptions import RefundRejected, RefundRequestPending
from django_orders.models import OrderRequest
from django_orders.services import refresh_orders, refund_order, resume_order_requests
from tests.refunds.conftest import upstream_refunds_by_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State


def _refund(order, lines, reference="r"):
    return refund_order(
        order.pk,
        reference=reference,
        reason="item_returned",
        lines=[{"line_item_id": lines["product"], "amount": 1500}],
    )


def _pending(live_orders, order, lines) -> OrderRequest:
    """A refund request whose answer was lost (the refund exists upstream), its claim free."""
    live_orders.add_fault("drop_after_commit", "/refunds/create", times=4)
    with pytest.raises(RefundRequestPending):
        _refund(order, lines)
    live_orders.faults.clear()
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == State.PENDING and request.first_sent_at is not None
    return request


@pytest.mark.parametrize("stored", ["failed", "needs_review", "held_by_another"])
def test_a_repeat_answers_with_the_stored_outcome_before_any_lookup(
    live_orders, paid_order, lines, sandbox_paths, stored
):
    if stored == "failed":
        live_orders.add_fault("error_before_write", "/refunds/create", status=400)
        with pytest.raises(RefundRejected):
            _refund(paid_order, lines)
    else:
        request = _pending(live_orders, paid_order, lines)
        if stored == "needs_review":
            request.state = State.NEEDS_REVIEW
        else:  # another process is sending it right now
            request.claimed_until = timezone.now() + timedelta(minutes=5)
        request.save()
    sent = list(sandbox_paths)

    expected = RefundRejected if stored == "failed" else RefundRequestPending
    with pytest.raises(expected):
        _refund(paid_order, lines)

    assert sandbox_paths == sent  # no lookup of the order, nothing sent
    states = {"failed": State.FAILED, "needs_review": State.NEEDS_REVIEW}
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == states.get(stored, State.PENDING)


@pytest.mark.parametrize(("age", "resent"), [(timedelta(minutes=-5), True), (timedelta(0), False)])
def test_resume_resends_a_refund_until_key_lifetime_and_never_at_it(
    live_orders, paid_order, lines, age, resent
):
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    upstream = len(live_orders.refunds_created_via_api())

    now = request.first_sent_at + orders_settings.KEY_LIFETIME + age
    summary = resume_order_requests(now=now)

    request.refresh_from_db()
    if resent:
        assert (summary.resent, request.state) == (1, State.SUCCEEDED)
        assert upstream_refunds_by_reference(live_orders) == {"r": [request.refund_id]}
    else:
        assert (summary.resent, summary.needs_review, request.state) == (
            0,
            1,
            State.NEEDS_REVIEW,
        )
        assert len(live_orders.refunds_created_via_api()) == upstream


def test_a_repeat_of_a_pending_refund_past_key_lifetime_is_never_resent(
    live_orders, paid_order, lines, sandbox_paths
):
    live_orders.add_fault("error_after_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    # Its first send is now KEY_LIFETIME old: the service may have forgotten the key.
    request.first_sent_at = timezone.now() - orders_settings.KEY_LIFETIME
    request.next_attempt_at = request.claimed_until = None
    request.save()
    sent = list(sandbox_paths)

    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines)

    request.refresh_from_db()
    assert request.state == State.NEEDS_REVIEW and "KEY_LIFETIME" in request.last_error
    assert sandbox_paths == sent


def test_an_order_lookup_settles_a_pending_request_by_its_reference_and_resume_sends_nothing(
    live_orders, paid_order, lines, sandbox_paths
):
    request = _pending(live_orders, paid_order, lines)
    [upstream] = live_orders.refunds_created_via_api()

    refresh_orders([paid_order.pk])  # the order's refunds[] carry the refund's reference
    request.refresh_from_db()
    sent = list(sandbox_paths)
    summary = resume_order_requests(now=timezone.now() + timedelta(hours=2))

    assert (request.state, request.refund_id) == (State.SUCCEEDED, upstream["refund_id"])
    assert summary.resent == 0 and "/refunds/create" not in sandbox_paths[len(sent) :]
    assert len(live_orders.refunds_created_via_api()) == 1


def test_a_completed_order_is_refundable(live_orders, paid_order, lines):
    live_orders.set_order_status(paid_order.pk, "completed")

    refund = _refund(paid_order, lines)

    assert refund.status == "pending" and refund.total == 1500
    paid_order.refresh_from_db()
    assert paid_order.status == "completed"  # the refund's fresh lookup, stored
