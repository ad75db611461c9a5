"""A refund answer that names another refund is never this request's success (issue 44, item 3).

Over loopback HTTP against the sandbox, whose ``other_refund`` fault does the work and then
answers with the oldest other refund of the same order: a create, its resend, a cancel; and a
lookup that shows a refund carrying a pending request's reference but other amounts.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.exceptions import RefundAnswerMismatch, RefundRequestPending
from django_orders.models import OrderRequest, Refund
from django_orders.services import (
    cancel_refund,
    refresh_orders,
    refund_order,
    resume_order_requests,
)
from tests.refunds.conftest import upstream_refunds_by_reference
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
State = OrderRequest.State
Kind = OrderRequest.Kind
LATER = timedelta(hours=2)


def _refund(order, lines, reference, amount=1000, line="product"):
    return refund_order(
        order.pk,
        reference=reference,
        reason="item_returned",
        lines=[{"line_item_id": lines[line], "amount": amount}],
    )


def _request(reference: str) -> OrderRequest:
    return OrderRequest.objects.get(kind=Kind.REFUND_CREATE, reference=reference)


def test_a_create_answered_with_an_earlier_refund_goes_to_review_and_links_nothing(
    live_orders, paid_order, lines
):
    first = _refund(paid_order, lines, "a")
    live_orders.add_fault("other_refund", "/refunds/create")

    with pytest.raises(RefundAnswerMismatch) as raised:
        _refund(paid_order, lines, "b", amount=2500)

    request = _request("b")
    assert raised.value.order_request.pk == request.pk
    assert raised.value.refund_id == first.pk
    assert (request.state, request.refund_id) == (State.NEEDS_REVIEW, None)
    assert request.last_error.startswith("RefundAnswerMismatch: ")
    assert f"refund {first.pk}" in request.last_error
    assert "its reference is 'a', not 'b'" in request.last_error
    assert _request("a").refund_id == first.pk  # the earlier refund keeps its own request
    # The refund B was made upstream; the mirror holds only what it could trust.
    assert list(upstream_refunds_by_reference(live_orders)) == ["a", "b"]
    assert list(Refund.objects.values_list("pk", flat=True)) == [first.pk]
    # Nothing resumes it (not pending), and a repeat sends nothing and says it is held.
    assert resume_order_requests(now=timezone.now() + LATER).resent == 0
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines, "b", amount=2500)
    assert len(live_orders.refunds_created_via_api()) == 2


def test_a_resend_answered_with_another_refund_goes_to_review(live_orders, paid_order, lines):
    first = _refund(paid_order, lines, "a")
    live_orders.add_fault("drop_after_commit", "/refunds/create", times=4)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines, "b", amount=2500)
    assert _request("b").state == State.PENDING
    live_orders.add_fault("other_refund", "/refunds/create")

    summary = resume_order_requests(now=timezone.now() + LATER)

    assert summary.resent == 1 and summary.succeeded == 0
    request = _request("b")
    assert (request.state, request.refund_id) == (State.NEEDS_REVIEW, None)
    assert f"refund {first.pk}" in request.last_error


def test_a_cancel_answered_with_another_refund_changes_nothing(live_orders, paid_order, lines):
    first = _refund(paid_order, lines, "a")
    second = _refund(paid_order, lines, "b", amount=2500)
    live_orders.add_fault("other_refund", "/refunds/cancel")

    with pytest.raises(RefundAnswerMismatch) as raised:
        cancel_refund(second.pk)

    assert raised.value.refund_id == first.pk
    assert f"cancel of refund {second.pk}" in str(raised.value)
    assert Refund.objects.get(pk=first.pk).status == "pending"
    # The service did cancel B: the next lookup of the order says so, nothing was lost.
    refresh_orders([paid_order.pk])
    assert Refund.objects.get(pk=second.pk).status == "canceled"


def test_a_lookup_showing_the_reference_with_other_amounts_does_not_settle_it(
    live_orders, paid_order, lines
):
    # Another system used the reference first, for another amount (the sandbox's own API).
    made = live_orders.app.service.handle(
        "/refunds/create",
        {
            "order_id": paid_order.pk,
            "reason": "duplicate",
            "reference": "b",
            "line_items": [
                {
                    "order_line_item_id": lines["shipping"],
                    "refund_amount": {"currency": "ghs", "value": 990},
                }
            ],
        },
        0.0,
        "other-system-key",
    )
    assert made.status == 200
    live_orders.add_fault("error_before_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        _refund(paid_order, lines, "b", amount=2500)

    refresh_orders([paid_order.pk])  # the order lookup's refunds[] carries reference "b"

    request = _request("b")
    assert (request.state, request.refund_id) == (State.NEEDS_REVIEW, None)
    assert "RefundAnswerMismatch" in request.last_error
    assert "its lines are " in request.last_error


@pytest.mark.django_db(transaction=True)
def test_the_rest_api_answers_502_and_never_the_other_refund(live_orders, paid_order, lines):
    first = _refund(paid_order, lines, "a")
    live_orders.add_fault("other_refund", "/refunds/create")
    api = client_for(make_user("refunder", "refund_order", "view_refund", staff=True))
    body = {
        "reference": "b",
        "reason": "item_returned",
        "lines": [{"line_item_id": lines["product"], "amount": 2500}],
    }

    answer = api.post(
        f"/api/orders/{paid_order.pk}/refunds/",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY="5f8e3c1a-64b8-4b6f-9d52-3c1e0b7a2d10",
    )

    assert answer.status_code == 502
    assert answer.json()["code"] == "refund_answer_mismatch"
    assert first.pk not in answer.content.decode()
    assert (_request("b").state, _request("b").refund_id) == (State.NEEDS_REVIEW, None)
