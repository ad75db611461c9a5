"""refund_order and cancel_refund end to end against the sandbox over real loopback HTTP."""

from __future__ import annotations

import pytest

from django_orders.exceptions import (
    InvalidRefundRequest,
    OrderNotRefundable,
    ReferenceConflict,
    RefundNotCancelable,
    RefundRejected,
)
from django_orders.models import Order, OrderRequest, Refund
from django_orders.services import cancel_refund, create_order, refresh_orders, refund_order
from tests.fixtures.payloads import create_order_input, new_reference
from tests.refunds.conftest import PAID, upstream_refunds_by_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State


def test_refund_one_line_is_stored_sent_with_its_key_and_mirrored(
    live_orders, paid_order, lines, refund_changes, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        refund = refund_order(
            paid_order.pk,
            reference="rma-1",
            reason="item_returned",
            lines=[{"line_item_id": lines["product"], "amount": 2500}],
        )

    assert refund.status == "pending"
    assert (refund.total, refund.currency, refund.reference) == (2500, "ghs", "rma-1")
    assert refund.order_id == paid_order.pk
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert (request.state, request.refund_id, request.reference, request.attempts) == (
        State.SUCCEEDED,
        refund.pk,
        "rma-1",
        1,
    )
    [upstream] = live_orders.refunds_created_via_api()
    # The key went in the Idempotency-Key header (the payload carries none).
    assert upstream["idempotency_key"] == request.idempotency_key
    assert "request_meta" not in request.payload
    assert upstream_refunds_by_reference(live_orders) == {"rma-1": [refund.pk]}
    assert refund_changes.seen == [(refund.pk, None, "pending")]
    assert Order.objects.with_refunded_total().get().refunded_total == 0


def test_lines_none_refunds_every_remainder_and_the_order_shows_it_once_settled(
    live_orders, paid_order, lines, refund_changes, django_capture_on_commit_callbacks
):
    first = refund_order(
        paid_order.pk,
        reference="part",
        reason="item_damaged",
        lines=[{"line_item_id": lines["product"], "amount": 4000}],
    )
    rest = refund_order(paid_order.pk, reference="rest", reason="requested_by_customer")

    assert rest.total == PAID["product"] - 4000 + PAID["shipping"]
    sent = {
        line["order_line_item_id"]: line["refund_amount"]["value"]
        for line in rest.raw["line_items"]
    }
    assert sent == {lines["product"]: 6000, lines["shipping"]: PAID["shipping"]}
    with pytest.raises(InvalidRefundRequest) as nothing_left:
        refund_order(paid_order.pk, reference="more", reason="duplicate")
    assert "lines" in nothing_left.value.errors

    live_orders.settle_refund(first.pk)
    live_orders.fail_refund(rest.pk, "insufficient_balance")
    with django_capture_on_commit_callbacks(execute=True):
        refresh_orders([paid_order.pk])  # the order lookup's embedded refunds[]

    first.refresh_from_db()
    rest.refresh_from_db()
    assert first.status == "succeeded" and first.succeeded_at is not None
    assert first.processing_at is not None  # kept, set on the way
    assert rest.status == "failed" and rest.failed_at is not None
    assert rest.failure_reason == "insufficient_balance"
    assert rest.failure_detail == "The balance is too low to fund this refund."
    assert rest.failure_retryable is True
    order = Order.objects.with_refunded_total().get(pk=paid_order.pk)
    assert order.refunded_total == 4000
    assert Order.objects.get(pk=paid_order.pk).refunded_total == 4000  # without annotation
    assert sorted(refund_changes.seen) == sorted(
        [(first.pk, "pending", "succeeded"), (rest.pk, "pending", "failed")]
    )
    # The same record again changes nothing, and announces nothing.
    with django_capture_on_commit_callbacks(execute=True):
        refresh_orders([paid_order.pk])
    assert len(refund_changes.seen) == 2
    # A failed refund frees its amounts: a retry is a new refund with a new reference.
    again = refund_order(paid_order.pk, reference="rest-2", reason="requested_by_customer")
    assert again.total == rest.total


def test_same_reference_same_arguments_returns_the_stored_refund_without_http(
    live_orders, paid_order, lines, sandbox_paths
):
    arguments = {"lines": [{"line_item_id": lines["shipping"], "amount": 990}]}
    refund = refund_order(paid_order.pk, reference="r", reason="duplicate", **arguments)
    sent = list(sandbox_paths)

    again = refund_order(paid_order.pk, reference="r", reason="duplicate", **arguments)

    assert again.pk == refund.pk
    assert sandbox_paths == sent  # no lookup, no create
    assert len(live_orders.refunds_created_via_api()) == 1


@pytest.mark.parametrize(
    "changed",
    [
        {"lines": None},  # None stays None: not the same as the lines it resolved to
        {"reason": "fraudulent"},
        {"reason_details": "broken"},
        {"custom_data": {"ticket": "7"}},
        {"lines": [{"line_item_id": "SHIPPING", "amount": 900}]},
    ],
)
def test_same_reference_other_arguments_is_a_conflict_and_nothing_is_sent(
    live_orders, paid_order, lines, sandbox_paths, changed
):
    arguments = {
        "reason": "duplicate",
        "lines": [{"line_item_id": lines["shipping"], "amount": 990}],
    }
    refund_order(paid_order.pk, reference="r", **arguments)
    if changed.get("lines"):
        changed = {"lines": [{"line_item_id": lines["shipping"], "amount": 900}]}
    sent = list(sandbox_paths)

    with pytest.raises(ReferenceConflict) as caught:
        refund_order(paid_order.pk, reference="r", **{**arguments, **changed})

    # A refund's conflict, named so: the message says "refund", never "order request".
    assert caught.value.kind == "refund"
    assert str(caught.value).startswith("Invalid refund request: reference: Reference 'r' ")
    assert "order request" not in str(caught.value)
    assert sandbox_paths == sent
    assert OrderRequest.objects.filter(kind=OrderRequest.Kind.REFUND_CREATE).count() == 1


def test_the_same_reference_for_an_order_create_and_a_refund_is_no_conflict(
    live_orders, paid_order, lines
):
    reference = OrderRequest.objects.get().reference  # the order create's
    refund = refund_order(paid_order.pk, reference=reference, reason="duplicate")
    assert refund.reference == reference


def test_unpaid_order_is_not_refundable_and_nothing_is_stored(live_orders, sandbox_paths):
    order = create_order(**create_order_input(), reference=new_reference(), finalize=True)
    with pytest.raises(OrderNotRefundable) as refused:
        refund_order(order.pk, reference="r", reason="duplicate")
    assert refused.value.status == "requires_payment"
    assert "/refunds/create" not in sandbox_paths
    assert not OrderRequest.objects.filter(kind=OrderRequest.Kind.REFUND_CREATE).exists()


def test_a_refusal_by_the_service_is_refund_rejected_with_its_code(live_orders, paid_order, lines):
    # The sandbox completes nothing on its own; make the order unrefundable upstream only
    # after the lookup by refusing the create itself: a 400 is a verdict.
    live_orders.add_fault("error_before_write", "/refunds/create", status=400)
    with pytest.raises(RefundRejected):
        refund_order(paid_order.pk, reference="r", reason="duplicate")
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    assert request.state == State.FAILED
    with pytest.raises(RefundRejected):  # the stored outcome, nothing sent
        refund_order(paid_order.pk, reference="r", reason="duplicate")


def test_cancel_refund_pending_only(
    live_orders, paid_order, lines, refund_changes, django_capture_on_commit_callbacks
):
    pending = refund_order(
        paid_order.pk,
        reference="a",
        reason="duplicate",
        lines=[{"line_item_id": lines["shipping"], "amount": 990}],
    )
    moving = refund_order(
        paid_order.pk,
        reference="b",
        reason="duplicate",
        lines=[{"line_item_id": lines["product"], "amount": 100}],
    )
    with django_capture_on_commit_callbacks(execute=True):
        canceled = cancel_refund(pending.pk, reason="typo")
    assert canceled.status == "canceled" and canceled.canceled_at is not None
    assert live_orders.refund(pending.pk)["status"] == "canceled"
    assert cancel_refund(pending.pk).status == "canceled"  # safe to repeat
    assert refund_changes.seen == [(pending.pk, "pending", "canceled")]

    # Processing upstream, pending in the mirror: the service refuses, the refund is looked up.
    live_orders.process_refund(moving.pk)
    with pytest.raises(RefundNotCancelable) as refused:
        cancel_refund(moving.pk)
    assert refused.value.refund.status == "processing"
    assert Refund.objects.get(pk=moving.pk).status == "processing"
    # Known to have moved on: refused before anything is sent.
    with pytest.raises(RefundNotCancelable):
        cancel_refund(moving.pk)
