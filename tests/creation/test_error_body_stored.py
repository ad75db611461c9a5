"""The service's whole error object is stored with the order request (``last_error_body``) and
comes back on the rejection a repeated call raises; the key never reaches the row."""

from __future__ import annotations

import json

import pytest
import requests
import responses

from django_orders.exceptions import OrderRequestPending, OrderRequestRejected
from django_orders.models import OrderRequest
from django_orders.services import create_order, resend_order_request
from tests.fixtures.http import BASE, KEY
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db

URL = BASE + "/orders/create"
State = OrderRequest.State

FULL = {
    "type": "invalid_request_error",
    "code": "currency_unsupported",
    "message": "The currency is not supported.",
    "detail": "Use one of ghs, usd, gbp, eur, cny (lower case).",
    "url": "https://docs.orders.test/errors/currency_unsupported",
    "fix_code": "use_supported_currency",
    "cause": {"field": "line_items[0].product.price.currency"},
}


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    mocked_settings(MAX_RETRIES=0)


def test_a_rejection_stores_every_field_and_a_repeat_returns_them(http_mock, order_input):
    http_mock.post(URL, status=400, json={"error": FULL}, headers={"X-Request-Id": "req_b1"})
    with pytest.raises(OrderRequestRejected) as first:
        create_order(**order_input, reference="cart-body")
    request = OrderRequest.objects.get()
    assert request.state == State.FAILED
    assert request.last_error_body == FULL
    assert (request.last_error_code, request.last_request_id) == ("currency_unsupported", "req_b1")
    assert first.value.error.detail == FULL["detail"]

    # The same reference again: nothing is sent, the stored rejection comes back whole.
    with pytest.raises(OrderRequestRejected) as again:
        create_order(**order_input, reference="cart-body")
    assert len(http_mock.calls) == 1
    stored = again.value.error
    assert stored.error_body == FULL
    assert (stored.error_type, stored.detail, stored.doc_url, stored.fix_code, stored.cause) == (
        FULL["type"],
        FULL["detail"],
        FULL["url"],
        FULL["fix_code"],
        FULL["cause"],
    )
    assert (stored.status_code, stored.code, stored.request_id) == (
        400,
        "currency_unsupported",
        "req_b1",
    )


def test_an_error_without_a_body_leaves_no_earlier_body_behind(http_mock, order_input):
    conflict = {"type": "invalid_request_error", "code": "idempotency_key_in_progress"}
    http_mock.post(URL, status=409, json={"error": conflict})
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.last_error_body == conflict

    http_mock.replace(responses.POST, URL, body=requests.exceptions.ConnectionError("reset"))
    request = resend_order_request(request)
    assert request.state == State.PENDING and request.attempts == 2
    assert request.last_error.startswith("OutcomeUnknown")
    assert request.last_error_body == {}
    assert OrderRequest.objects.get().last_error_body == {}


def test_the_key_echoed_in_the_body_never_reaches_the_row(http_mock, order_input):
    echoed = {"code": "forbidden", "detail": f"Bearer {KEY}", "cause": [KEY]}
    http_mock.post(URL, status=403, json={"error": echoed})
    with pytest.raises(OrderRequestRejected):
        create_order(**order_input, reference=new_reference())
    row = OrderRequest.objects.get()
    text = json.dumps(row.last_error_body) + row.last_error
    assert KEY not in text
    assert row.last_error_body == {
        "code": "forbidden",
        "detail": "Bearer [hidden]",
        "cause": ["[hidden]"],
    }


def test_a_nul_character_in_the_body_is_stored(http_mock, order_input):
    """PostgreSQL refuses NUL in text and JSON: the row must still be written."""
    http_mock.post(
        URL, status=400, json={"error": {"code": "x", "message": "a\x00b", "detail": "\x00"}}
    )
    with pytest.raises(OrderRequestRejected):
        create_order(**order_input, reference=new_reference())
    row = OrderRequest.objects.get()
    assert row.last_error_body == {"code": "x", "message": "a\ufffdb", "detail": "\ufffd"}
    assert row.last_error.startswith("RequestRejected: a\ufffdb")
