"""complete_order end to end against the sandbox over real loopback HTTP."""

from __future__ import annotations

import pytest

from django_orders.exceptions import OrderNotCompletable, OrderRequestPending
from django_orders.models import Order, OrderRequest
from django_orders.services import complete_order, resume_order_requests

pytestmark = pytest.mark.django_db
State = OrderRequest.State
KIND = OrderRequest.Kind.ORDER_COMPLETE


def tripwire(server, path: str):
    """A fault on ``path`` that counts every request reaching it (``.fired``)."""
    return server.add_fault("error_before_write", path, times=None, status=503)


def test_complete_a_paid_order_stores_its_key_first_and_mirrors_the_answer(
    orders_sandbox, paid_order
):
    order = complete_order(paid_order.pk)

    assert order.status == "completed"
    assert order.completed_at is not None
    assert Order.objects.get().status == "completed"
    [request] = OrderRequest.objects.filter(kind=KIND)
    assert (request.state, request.order_id, request.attempts) == (
        State.SUCCEEDED,
        paid_order.pk,
        1,
    )
    assert request.idempotency_key == f"complete-{paid_order.pk}"


def test_complete_repeated_is_safe_and_sends_nothing_more(orders_sandbox, paid_order):
    first = complete_order(paid_order.pk)
    wire = tripwire(orders_sandbox, "/orders/complete")
    again = complete_order(paid_order.pk)

    assert again.status == first.status == "completed"
    assert again.completed_at == first.completed_at
    assert wire.fired == 0
    assert OrderRequest.objects.filter(kind=KIND).count() == 1


def test_already_completed_upstream_counts_as_success(orders_sandbox, paid_order):
    # Completed elsewhere (the provider's dashboard): the mirror still says paid.
    orders_sandbox.set_order_status(paid_order.pk, "completed")
    assert Order.objects.get().status == "paid"

    order = complete_order(paid_order.pk)

    assert order.status == "completed"
    [request] = OrderRequest.objects.filter(kind=KIND)
    assert request.state == State.SUCCEEDED


def test_complete_of_an_unpaid_order_is_refused_with_nothing_stored_or_sent(
    orders_sandbox, unpaid_order
):
    wire = tripwire(orders_sandbox, "/orders/complete")

    with pytest.raises(OrderNotCompletable, match=r"requires_payment.*only a paid order") as info:
        complete_order(unpaid_order.pk)

    assert info.value.status == "requires_payment"
    assert info.value.error is None  # refused here, not by the service
    assert wire.fired == 0
    assert not OrderRequest.objects.filter(kind=KIND).exists()
    assert Order.objects.get().status == "requires_payment"


def test_a_payment_the_mirror_has_not_seen_is_looked_up_before_refusing(
    orders_sandbox, unpaid_order
):
    orders_sandbox.pay_order(unpaid_order.pk)  # paid upstream; the mirror still says unpaid

    assert complete_order(unpaid_order.pk).status == "completed"


def test_an_unknown_outcome_stays_pending_and_is_resumed_with_the_same_key(
    orders_sandbox, paid_order
):
    orders_sandbox.add_fault("drop_after_commit", "/orders/complete", times=10)

    with pytest.raises(OrderRequestPending):
        complete_order(paid_order.pk)

    [request] = OrderRequest.objects.filter(kind=KIND)
    assert request.state == State.PENDING
    assert request.first_sent_at is not None
    orders_sandbox.faults.clear()
    OrderRequest.objects.filter(pk=request.pk).update(next_attempt_at=None)

    summary = resume_order_requests()

    assert (summary.resent, summary.succeeded) == (1, 1)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    assert request.idempotency_key == f"complete-{paid_order.pk}"
    assert Order.objects.get().status == "completed"


def test_complete_inside_an_atomic_block_is_refused(orders_sandbox, paid_order):
    from django.db import transaction
    from django.db.transaction import TransactionManagementError

    with pytest.raises(TransactionManagementError), transaction.atomic():
        complete_order(paid_order.pk)
    assert not OrderRequest.objects.filter(kind=KIND).exists()


def test_an_order_the_mirror_does_not_hold(orders_sandbox):
    with pytest.raises(Order.DoesNotExist):
        complete_order("or_nope")


def test_a_repeat_after_a_dropped_answer_resends_the_same_key(orders_sandbox, paid_order):
    orders_sandbox.add_fault("drop_after_commit", "/orders/complete", times=10)
    with pytest.raises(OrderRequestPending):
        complete_order(paid_order.pk)
    orders_sandbox.faults.clear()

    order = complete_order(paid_order.pk)  # the same key: the service replays its answer

    assert order.status == "completed"
    [request] = OrderRequest.objects.filter(kind=KIND)
    assert (request.state, request.attempts) == (State.SUCCEEDED, 2)


def test_a_completion_whose_answer_the_mirror_missed_is_looked_up(orders_sandbox, paid_order):
    # Completed upstream, its request recorded succeeded, but the lookup after the provider's
    # "already completed" failed: the mirror still says paid.
    orders_sandbox.set_order_status(paid_order.pk, "completed")
    OrderRequest.objects.create(
        kind=KIND,
        idempotency_key=f"complete-{paid_order.pk}",
        payload="{}",
        order=paid_order,
        state=State.SUCCEEDED,
    )
    wire = tripwire(orders_sandbox, "/orders/complete")

    order = complete_order(paid_order.pk)

    assert order.status == "completed"
    assert wire.fired == 0
