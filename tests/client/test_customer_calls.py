"""The known-customer and offline-payment calls of the transport: paths, where each key
travels (as the provider's SDK sends it: the body on create and pay, the header on update),
retries (a pay call is asked once)."""

from __future__ import annotations

import pytest
import requests

from django_orders.exceptions import ConnectionLost, ServerError
from tests.client.conftest import error, ok

CUSTOMER = {"id": "cu_1", "guest": False, "name": "Ama", "reference": "user-42"}
CREATE = '{"request_meta":{"idempotency_key":"key-1"},"name":"Ama","reference":"user-42"}'
PAY = '{"order_id":"or_1","paid_out_of_band":true,"request_meta":{"idempotency_key":"pay-or_1"}}'


def test_create_sends_the_stored_bytes_with_the_key_in_the_body(api, make_client):
    api.script("/customers/create", ok({"customer": CUSTOMER}))
    assert make_client().create_customer(CREATE) == CUSTOMER
    [sent] = api.sent
    assert sent.body == CREATE.encode()
    assert "Idempotency-Key" not in sent.headers


def test_create_is_retried_with_the_same_bytes_after_a_5xx(api, make_client):
    api.script("/customers/create", error(503, "unavailable"), ok({"customer": CUSTOMER}))
    make_client().create_customer(CREATE)
    assert [s.body for s in api.sent] == [CREATE.encode()] * 2


def test_create_and_pay_need_a_key_in_the_body(make_client):
    with pytest.raises(ValueError, match="idempotency_key"):
        make_client().create_customer('{"name":"Ama"}')
    with pytest.raises(ValueError, match="idempotency_key"):
        make_client().pay_order('{"order_id":"or_1","paid_out_of_band":true}')


def test_update_sends_the_key_in_the_header(api, make_client):
    api.script("/customers/update", ok({"customer": CUSTOMER}))
    body = '{"customer_id":"cu_1","name":"Ama K."}'
    make_client().update_customer(body, idempotency_key="upd-1")
    [sent] = api.sent
    assert sent.body == body.encode()
    assert sent.headers["Idempotency-Key"] == "upd-1"
    with pytest.raises(ValueError, match="idempotency key"):
        make_client().update_customer(body, idempotency_key="")


def test_pay_is_asked_once(api, make_client):
    api.script("/orders/pay", requests.ConnectionError("reset by peer"))
    with pytest.raises(ConnectionLost):
        make_client().pay_order(PAY)
    api.script("/orders/pay", error(503, "unavailable"))
    with pytest.raises(ServerError):
        make_client().pay_order(PAY)
    assert [s.body for s in api.sent] == [PAY.encode()] * 2  # no retry of either


def test_pay_returns_the_order(api, make_client):
    order = {"id": "or_1", "status": "paid"}
    api.script("/orders/pay", ok({"order": order}))
    assert make_client().pay_order(PAY) == order
