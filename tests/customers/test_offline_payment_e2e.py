"""``record_offline_payment`` end to end over loopback HTTP against the sandbox."""

from __future__ import annotations

import pytest

from django_orders.exceptions import OrderNotPayable, OrderRequestPending
from django_orders.models import Order, OrderEvent, OrderRequest
from django_orders.services import (
    cancel_order,
    confirm_order,
    create_order,
    record_offline_payment,
    resume_order_requests,
)
from django_orders.signals import order_status_changed
from tests.fixtures.payloads import create_order_input, new_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State
PAY = "/orders/pay"


@pytest.fixture
def unpaid(live_orders) -> Order:
    return create_order(**create_order_input(), reference=new_reference(), finalize=True)


def test_a_cash_payment_marks_the_order_paid_upstream_and_in_the_mirror(
    live_orders, unpaid, received, django_user_model, django_capture_on_commit_callbacks
):
    clerk = django_user_model.objects.create_user("clerk", is_staff=True)
    seen = []

    def receiver(**kwargs):
        seen.append(kwargs["order"].status)

    order_status_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            order = record_offline_payment(unpaid.pk, note="Cash, receipt 0042", actor=clerk)
    finally:
        order_status_changed.disconnect(receiver)

    assert order.status == "paid"
    upstream = live_orders.store.order(unpaid.pk)
    assert upstream["status"] == "paid"
    assert upstream["payment"]["paid_offline"] is True
    (body,) = received.bodies(PAY)
    request = OrderRequest.objects.get(kind=OrderRequest.Kind.ORDER_PAY)
    assert body == {
        "order_id": unpaid.pk,
        "paid_out_of_band": True,
        "request_meta": {"idempotency_key": request.idempotency_key},
    }
    assert request.state == State.SUCCEEDED
    assert seen == ["paid"]  # announced like any payment
    entry = OrderEvent.objects.get(order=unpaid, kind=OrderEvent.Kind.STAFF_ACTION)
    assert (entry.actor, entry.to_status) == ("clerk", "record_offline_payment")
    assert entry.detail == {"note": "Cash, receipt 0042"}
    # Repeating it sends nothing more.
    assert record_offline_payment(unpaid.pk).status == "paid"
    assert len(received.bodies(PAY)) == 1


def test_a_lost_answer_makes_one_pay_call_and_leaves_the_order_paid(live_orders, unpaid, received):
    live_orders.add_fault("drop_after_commit", PAY)

    order = record_offline_payment(unpaid.pk, note="Bank transfer")

    assert order.status == "paid"
    assert len(received.bodies(PAY)) == 1  # settled by a lookup, not by a second pay call
    assert len(live_orders.app.customers.pay_calls) == 1
    assert live_orders.store.order(unpaid.pk)["status"] == "paid"
    assert Order.objects.get(pk=unpaid.pk).status == "paid"
    assert OrderRequest.objects.get(kind=OrderRequest.Kind.ORDER_PAY).state == State.SUCCEEDED


def test_a_lost_answer_whose_lookup_fails_is_resumed_with_the_same_key(
    live_orders, unpaid, received
):
    live_orders.add_fault("drop_after_commit", PAY)
    live_orders.add_fault("error_before_write", "/orders/lookup", times=4, status=503)
    with pytest.raises(OrderRequestPending):
        record_offline_payment(unpaid.pk)
    OrderRequest.objects.update(claimed_until=None, next_attempt_at=None)

    summary = resume_order_requests()

    assert summary.succeeded == 1
    keys = {b["request_meta"]["idempotency_key"] for b in received.bodies(PAY)}
    assert len(keys) == 1  # never two pay calls with two keys
    assert Order.objects.get(pk=unpaid.pk).status == "paid"
    assert live_orders.store.order(unpaid.pk)["payment"]["paid_offline"] is True


def test_an_order_not_finalized_is_refused_before_anything_is_sent(live_orders, received):
    preparing = create_order(**create_order_input(), reference=new_reference(), finalize=False)
    with pytest.raises(OrderNotPayable) as caught:
        record_offline_payment(preparing.pk)
    assert caught.value.status == "preparing"
    assert received.bodies(PAY) == []
    assert not OrderRequest.objects.filter(kind=OrderRequest.Kind.ORDER_PAY).exists()


def test_a_paid_order_is_refused_before_anything_is_sent(live_orders, unpaid, received):
    live_orders.pay_order(unpaid.pk)
    confirm_order(unpaid.pk, wait=0)
    with pytest.raises(OrderNotPayable):
        record_offline_payment(unpaid.pk)
    assert received.bodies(PAY) == []


def test_an_order_canceled_upstream_is_not_payable(live_orders, unpaid, received):
    live_orders.set_order_status(unpaid.pk, "canceled")  # the mirror still says unpaid
    with pytest.raises(OrderNotPayable) as caught:
        record_offline_payment(unpaid.pk)
    assert caught.value.status == "canceled"
    assert Order.objects.get(pk=unpaid.pk).status == "canceled"  # brought up to date
    assert len(received.bodies(PAY)) == 1


def test_a_canceled_order_in_the_mirror_is_refused(live_orders, unpaid, received):
    cancel_order(unpaid)
    with pytest.raises(OrderNotPayable):
        record_offline_payment(unpaid.pk)
    assert received.bodies(PAY) == []
