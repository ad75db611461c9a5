"""A create's success path: a replayed answer never rolls the mirror back, ``order_created``
fires once, after the commit, with the recorded request, and a failing receiver is only logged."""

from __future__ import annotations

import logging

import pytest
import requests
from django.db import connection

from django_orders.exceptions import OrderRequestPending
from django_orders.mirror.parsing import parse_order
from django_orders.mirror.store import store_orders
from django_orders.models import Customer, Order, OrderRequest
from django_orders.services import create_order
from django_orders.signals import order_created
from tests.creation.test_outcomes_unit import URL, order_answer
from tests.fixtures.payloads import new_reference

State = OrderRequest.State


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    mocked_settings(MAX_RETRIES=0)


@pytest.fixture
def receivers():
    """Connect receivers for one test, disconnected afterwards."""
    connected = []

    def connect(func):
        order_created.connect(func, weak=False)
        connected.append(func)
        return func

    yield connect
    for func in connected:
        order_created.disconnect(func)


@pytest.mark.django_db
def test_replayed_first_answer_never_rolls_the_mirror_back(http_mock, order_input):
    # The create's answer is lost: the request stays pending with its key.
    http_mock.post(URL, body=requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference="cart-replay")
    # Meanwhile the sync mirrors the order, and later sees it completed.
    first_answer = order_answer()["order"]
    completed = {
        **first_answer,
        "status": "completed",
        "completed_at": "2026-01-03T10:00:00Z",
        "customer": {**first_answer["customer"], "name": "Ama Mensah (verified)"},
    }
    store_orders([parse_order(first_answer)])
    store_orders([parse_order(completed)])
    synced_order = Order.objects.values().get()
    synced_customer = Customer.objects.values().get()

    # The resend with the same key gets the FIRST answer back (requires_payment).
    http_mock.reset()
    http_mock.post(URL, json=order_answer(), headers={"Idempotent-Replayed": "true"})
    order = create_order(**order_input, reference="cart-replay")

    assert Order.objects.values().get() == synced_order
    assert Customer.objects.values().get() == synced_customer
    assert (order.pk, order.status, order.raw) == ("or_unit1", "completed", completed)
    request = OrderRequest.objects.get()
    assert (request.state, request.order_id, request.attempts) == (State.SUCCEEDED, order.pk, 2)
    # The next sync sees no status change, so order_status_changed does not fire again.
    assert store_orders([parse_order(completed)]).status_changes == []


@pytest.mark.django_db
def test_a_returning_customer_comes_back_as_stored_not_as_the_answers_copy(http_mock, order_input):
    """The create's answer embeds its customer; a customer the mirror already holds keeps its
    row (insert if absent), and the order returned holds that row, not the answer's copy."""
    answer = order_answer()
    earlier = {
        **answer["order"],
        "id": "or_earlier",
        "customer": {**answer["order"]["customer"], "name": "Ama Mensah (verified)"},
    }
    store_orders([parse_order(earlier)])
    http_mock.post(URL, json=answer)

    order = create_order(**order_input, reference=new_reference())

    assert order.customer.name == "Ama Mensah (verified)" != answer["order"]["customer"]["name"]
    assert order.customer.first_seen_at == Customer.objects.get().first_seen_at


@pytest.mark.django_db
def test_new_order_is_returned_as_stored(http_mock, order_input):
    http_mock.post(URL, json=order_answer())
    order = create_order(**order_input, reference=new_reference())
    assert order == Order.objects.get()
    assert (order.status, order.customer_id) == ("requires_payment", "cu_unit1")
    assert Customer.objects.get().name == "Ama Mensah"


@pytest.mark.django_db(transaction=True)
def test_receiver_sees_the_recorded_request_after_commit(http_mock, order_input, receivers):
    http_mock.post(URL, json=order_answer())
    seen = []

    @receivers
    def receiver(sender, order, order_request, **kwargs):
        seen.append(
            {
                "in_transaction": connection.in_atomic_block,
                "state": order_request.state,
                "attempts": order_request.attempts,
                "order_id": order_request.order_id,
                "order": order_request.order.pk,
                "claimed_until": order_request.claimed_until,
                "first_sent_at": order_request.first_sent_at is not None,
                "stored_state": OrderRequest.objects.get(pk=order_request.pk).state,
            }
        )

    order = create_order(**order_input, reference="cart-signal")
    assert seen == [
        {
            "in_transaction": False,
            "state": State.SUCCEEDED,
            "attempts": 1,
            "order_id": order.pk,
            "order": order.pk,
            "claimed_until": None,
            "first_sent_at": True,
            "stored_state": State.SUCCEEDED,
        }
    ]
    # Once per request: returning the stored order for the same reference sends nothing.
    assert create_order(**order_input, reference="cart-signal").pk == order.pk
    assert len(seen) == 1


@pytest.mark.django_db(transaction=True)
def test_failing_receiver_is_logged_not_raised(http_mock, order_input, receivers, caplog):
    http_mock.post(URL, json=order_answer())
    later = []

    @receivers
    def broken(sender, order, order_request, **kwargs):
        raise RuntimeError("the shop's mailer is down")

    @receivers
    def working(sender, order, order_request, **kwargs):
        later.append(order.pk)

    with caplog.at_level(logging.ERROR, logger="django_orders.order_requests"):
        order = create_order(**order_input, reference=new_reference())

    assert order.pk == "or_unit1"
    assert OrderRequest.objects.get().state == State.SUCCEEDED
    assert later == [order.pk]  # the other receivers still ran
    [record] = [r for r in caplog.records if r.name == "django_orders.order_requests"]
    assert record.levelno == logging.ERROR
    assert "order_created receiver" in record.getMessage() and "or_unit1" in record.getMessage()
    assert isinstance(record.exc_info[1], RuntimeError)


@pytest.mark.django_db
def test_reference_with_surrounding_whitespace_is_one_request(http_mock, order_input):
    http_mock.post(URL, json=order_answer())
    first = create_order(**order_input, reference="  cart-9 ")
    again = create_order(**order_input, reference="cart-9\t")
    assert again.pk == first.pk
    assert OrderRequest.objects.get().reference == "cart-9"
    assert len(http_mock.calls) == 1
