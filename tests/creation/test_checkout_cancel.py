"""cancel_order with ``responses`` standing in for the service: every branch, exactly."""

from __future__ import annotations

import json

import pytest
import requests
from django.db import transaction
from django.db.transaction import TransactionManagementError

from django_orders.creation.checkout import cancel_key
from django_orders.exceptions import OrderNotCancellable, RequestRejected, ServerError
from django_orders.models import Order
from django_orders.services import cancel_order

from .conftest import CANCEL, LOOKUP, mirror, record

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    return mocked_settings(MAX_RETRIES=2)


def refusal(status=400, code="order_not_cancelable"):
    return {
        "status": status,
        "json": {"error": {"type": "invalid_request_error", "code": code, "message": "No."}},
        "headers": {"X-Request-Id": "req_cancel_1"},
    }


def test_an_unpaid_order_is_cancelled_and_the_mirror_updated(http_mock, status_changes):
    order = mirror()
    http_mock.post(CANCEL, json={"order": record(status="canceled")})

    cancelled = cancel_order(order, reason="Out of stock")

    body = json.loads(http_mock.calls[0].request.body)
    assert body == {
        "order_id": "or_unit1",
        "reason": "Out of stock",
        "request_meta": {"idempotency_key": cancel_key("or_unit1", "Out of stock")},
    }
    stored = Order.objects.get()
    assert cancelled == stored
    assert stored.status == "canceled"
    assert stored.canceled_at.isoformat() == "2026-01-02T03:07:00+00:00"
    assert stored.raw["status"] == "canceled"
    assert stored.fingerprint != order.fingerprint and stored.changed_at > order.changed_at
    assert status_changes == [("or_unit1", "requires_payment", "canceled")]


def test_an_order_id_is_accepted_and_no_reason_is_not_sent(http_mock):
    mirror()
    http_mock.post(CANCEL, json={"order": record(status="canceled")})

    assert cancel_order("or_unit1").status == "canceled"

    body = json.loads(http_mock.calls[0].request.body)
    assert "reason" not in body and body["order_id"] == "or_unit1"


def test_the_key_is_the_same_for_a_repeat_and_differs_per_reason():
    assert cancel_key("or_1", None) == cancel_key("or_1", None)
    assert cancel_key("or_1", "a") != cancel_key("or_1", "b")
    assert cancel_key("or_1", None) != cancel_key("or_2", None)
    assert len(cancel_key("o" * 64, "x" * 5000)) <= 255


def test_a_lost_answer_is_resent_with_the_same_key(http_mock, sleeps):
    mirror()
    http_mock.post(CANCEL, body=requests.exceptions.ConnectionError("reset by peer"))
    http_mock.post(CANCEL, json={"order": record(status="canceled")})

    assert cancel_order("or_unit1").status == "canceled"

    bodies = [call.request.body for call in http_mock.calls]
    assert len(bodies) == 2 and bodies[0] == bodies[1]


def test_an_order_already_cancelled_is_returned_and_nothing_is_sent(http_mock, status_changes):
    mirror(status="canceled")

    assert cancel_order("or_unit1").status == "canceled"
    assert len(http_mock.calls) == 0
    assert status_changes == []


@pytest.mark.parametrize("status", ["paid", "completed", "expired"])
def test_a_paid_or_closed_order_is_refused_before_anything_is_sent(http_mock, status):
    mirror(status=status)

    with pytest.raises(OrderNotCancellable) as caught:
        cancel_order("or_unit1")

    assert (caught.value.order_id, caught.value.status, caught.value.error) == (
        "or_unit1",
        status,
        None,
    )
    assert f"it is {status}" in str(caught.value)
    assert len(http_mock.calls) == 0
    assert Order.objects.get().status == status


def test_a_refusal_for_an_order_paid_meanwhile_is_order_not_cancellable(http_mock, status_changes):
    mirror()  # the mirror still says requires_payment: the customer paid a moment ago
    http_mock.post(CANCEL, **refusal())
    http_mock.post(LOOKUP, json={"order": record(status="paid")})

    with pytest.raises(OrderNotCancellable) as caught:
        cancel_order("or_unit1")

    assert caught.value.status == "paid"
    assert isinstance(caught.value.error, RequestRejected)
    assert caught.value.error.request_id == "req_cancel_1"
    assert [call.request.url for call in http_mock.calls] == [CANCEL, LOOKUP]
    # The lookup's answer is in the mirror, announced like any refresh.
    assert Order.objects.get().status == "paid"
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


def test_a_refusal_for_an_order_cancelled_meanwhile_returns_it(http_mock):
    mirror()
    http_mock.post(CANCEL, **refusal(code="order_already_canceled"))
    http_mock.post(LOOKUP, json={"order": record(status="canceled")})

    assert cancel_order("or_unit1").status == "canceled"


def test_a_refusal_of_an_order_still_open_is_raised_as_it_came(http_mock):
    mirror()
    http_mock.post(CANCEL, **refusal(code="parameter_invalid"))
    http_mock.post(LOOKUP, json={"order": record()})

    with pytest.raises(RequestRejected) as caught:
        cancel_order("or_unit1")

    assert not isinstance(caught.value, OrderNotCancellable)
    assert caught.value.code == "parameter_invalid"


def test_a_server_error_propagates_and_the_mirror_is_unchanged(http_mock, sleeps):
    order = mirror()
    http_mock.post(CANCEL, status=503, json={"error": {"code": "unavailable", "message": "Down."}})

    with pytest.raises(ServerError):
        cancel_order("or_unit1")

    assert len(http_mock.calls) == 3  # MAX_RETRIES 2, the same key each time
    assert len({call.request.body for call in http_mock.calls}) == 1
    assert Order.objects.get().fingerprint == order.fingerprint


def test_an_order_the_mirror_does_not_hold_is_does_not_exist(http_mock):
    with pytest.raises(Order.DoesNotExist):
        cancel_order("or_nobody")
    assert len(http_mock.calls) == 0


def test_a_bad_reason_is_refused(http_mock):
    mirror()
    with pytest.raises(ValueError, match="reason"):
        cancel_order("or_unit1", reason="  ")
    assert len(http_mock.calls) == 0


def test_inside_a_transaction_it_is_refused_before_sending(http_mock):
    mirror()
    with pytest.raises(TransactionManagementError), transaction.atomic():
        cancel_order("or_unit1")
    assert len(http_mock.calls) == 0
