"""A create's answer must be the order that was sent: otherwise the request goes to review,
``create_order`` raises ``OrderAnswerMismatch`` and nothing of the answer is stored or linked.
Over real loopback HTTP against the hostile server (tests/fixtures/hostile.py)."""

from __future__ import annotations

import pytest

from django_orders.exceptions import OrderAnswerMismatch, OrderRequestPending, OrdersError
from django_orders.models import Customer, Order, OrderRequest
from django_orders.services import create_order, resend_order_request, resume_order_requests
from tests.fixtures.hostile import json_answer, use_hostile_server

pytestmark = pytest.mark.django_db
State = OrderRequest.State
KEY = "sk_test_answer_check_0123456789"


@pytest.fixture
def hostile(settings, hostile_server):
    use_hostile_server(settings, hostile_server, KEY)
    return hostile_server


def answer(order_id: str = "or_victim", **overrides):
    """The order ``create_order_input`` asks for (2 x 5000 ghs, ama@example.com)."""
    record = {
        "id": order_id,
        "status": "requires_payment",
        "number": "EX-1",
        "initiated_at": "2026-01-02T03:04:05Z",
        "customer": {
            "id": "cu_victim",
            "guest": True,
            "name": "Ama Mensah",
            "email_address": "ama@example.com",
        },
        "line_item_group": {"total": {"currency": "ghs", "value": 10000}},
        "custom_data": {"cart": "c-1"},
    }
    record.update(overrides)
    return {"order": record}


def sent(order_input, **extra):
    return {**order_input, "number": "EX-1", "custom_data": {"cart": "c-1"}, **extra}


def test_the_order_sent_is_linked(hostile, order_input):
    victim = answer()
    victim["order"]["customer"]["email_address"] = "AMA@Example.COM"  # case does not matter
    hostile.script("/orders/create", json_answer(200, victim))
    order = create_order(**sent(order_input), reference="cart-1")
    assert order.pk == "or_victim"
    assert OrderRequest.objects.get().order_id == "or_victim"


MISMATCHES = {
    "total": ({"line_item_group": {"total": {"currency": "ghs", "value": 9999}}}, "its total"),
    "currency": (
        {"line_item_group": {"total": {"currency": "usd", "value": 10000}}},
        "its currency is 'usd'",
    ),
    "negative-total": (
        {"line_item_group": {"total": {"currency": "ghs", "value": -10000}}},
        "its total is negative (-10000)",
    ),
    "total-not-a-number": (
        {"line_item_group": {"total": {"currency": "ghs", "value": "10000"}}},
        "its total is not a whole number",
    ),
    "email": (
        {"customer": {"id": "cu_x", "name": "X", "email_address": "kofi@example.com"}},
        "e-mail address is not the one sent",
    ),
    "number": ({"number": "EX-2"}, "its number is 'EX-2'"),
    "custom_data": ({"custom_data": {"cart": "c-2"}}, "its custom_data is not the one sent"),
}


@pytest.mark.parametrize("overrides,reason", MISMATCHES.values(), ids=MISMATCHES.keys())
def test_an_answer_that_is_not_the_order_sent_needs_review(hostile, order_input, overrides, reason):
    hostile.script("/orders/create", json_answer(200, answer(**overrides)))
    with pytest.raises(OrderAnswerMismatch) as caught:
        create_order(**sent(order_input), reference="cart-1")
    request = OrderRequest.objects.get()
    assert isinstance(caught.value, OrdersError)
    assert caught.value.order_request.pk == request.pk
    assert caught.value.order_id == "or_victim"
    assert reason in str(caught.value)
    assert request.state == State.NEEDS_REVIEW
    assert request.last_error.startswith("OrderAnswerMismatch: The service answered with order")
    assert reason in request.last_error
    assert request.order_id is None and request.claimed_until is None
    assert not Order.objects.exists() and not Customer.objects.exists()
    # Asked again with the same reference: still for review, nothing sent, nothing linked.
    with pytest.raises(OrderRequestPending):
        create_order(**sent(order_input), reference="cart-1")
    assert len(hostile.received) == 1


def test_an_answer_without_the_optional_fields_is_linked(hostile, order_input):
    # The spec marks them optional: an answer that does not carry them cannot contradict.
    minimal = answer(number=None, custom_data=None)
    del minimal["order"]["line_item_group"], minimal["order"]["customer"]["email_address"]
    hostile.script("/orders/create", json_answer(200, minimal))
    assert create_order(**sent(order_input), reference="cart-1").pk == "or_victim"


def test_an_order_another_request_created_is_not_linked_again(hostile, order_input):
    hostile.script("/orders/create", json_answer(200, answer()))
    create_order(**sent(order_input), reference="victim")
    # The same cart from someone else: the answer matches it, but names the victim's order.
    with pytest.raises(OrderAnswerMismatch, match="another order request already created"):
        create_order(**sent(order_input), reference="stranger")
    victim, stranger = OrderRequest.objects.order_by("pk")
    assert (victim.state, victim.order_id) == (State.SUCCEEDED, "or_victim")
    assert (stranger.state, stranger.order_id) == (State.NEEDS_REVIEW, None)


@pytest.mark.django_db(transaction=True)
def test_resume_and_resend_check_the_answer_too(hostile, order_input):
    hostile.script("/orders/create", json_answer(503, {}))
    for reference in ("cart-a", "cart-b"):
        with pytest.raises(OrderRequestPending):
            create_order(**sent(order_input), reference=reference)
    OrderRequest.objects.update(next_attempt_at=None)
    first, second = OrderRequest.objects.order_by("pk")
    hostile.script("/orders/create", json_answer(200, answer(number="EX-9")))
    resent = resend_order_request(first)
    assert resent.state == State.NEEDS_REVIEW and "its number is 'EX-9'" in resent.last_error
    hostile.script("/orders/create", json_answer(200, answer(number="EX-9")))
    summary = resume_order_requests()
    assert (summary.resent, summary.succeeded, summary.needs_review) == (1, 0, 1)
    second.refresh_from_db()
    assert second.state == State.NEEDS_REVIEW and second.order_id is None
    assert not Order.objects.exists()


def test_a_refund_request_of_the_order_does_not_make_its_create_a_mismatch(hostile, order_input):
    # The create's first answer was lost; meanwhile the shop refunded the order (the sync had
    # mirrored it), and that refund request is linked to the order too. The create's resend is
    # answered with its own order: linked, not sent to review.
    hostile.script("/orders/create", json_answer(503, {}))
    with pytest.raises(OrderRequestPending):
        create_order(**sent(order_input), reference="cart-1")
    customer = Customer.objects.create(id="cu_victim", guest=True, name="Ama Mensah")
    order = Order.objects.create(
        id="or_victim", status="paid", customer=customer, initiated_at="2026-01-02T03:04:05Z"
    )
    OrderRequest.objects.create(
        kind=OrderRequest.Kind.REFUND_CREATE,
        idempotency_key="refund-key-1",
        reference="refund-1",
        payload="{}",
        state=State.SUCCEEDED,
        order=order,
    )
    hostile.script("/orders/create", json_answer(200, answer()))
    create = OrderRequest.objects.get(kind=OrderRequest.Kind.ORDER_CREATE)
    resent = resend_order_request(create)
    assert (resent.state, resent.order_id) == (State.SUCCEEDED, "or_victim")
