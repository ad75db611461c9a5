"""The refund calls of the transport: paths, bodies, the Idempotency-Key header, retries."""

from __future__ import annotations

import pytest
import requests

from django_orders.exceptions import AnswerTimedOut, InvalidRecord, InvalidResponse
from django_orders.mirror.refunds import decode_refund, embedded_refunds
from tests.client.conftest import error, ok

REFUND = {
    "id": "rf_1",
    "order_id": "or_1",
    "status": "pending",
    "total": {"currency": "ghs", "value": 500},
    "created_at": "2026-11-26T10:00:00Z",
    "reference": "rma-1",
    "future_field": {"kept": True},
}
PAYLOAD = '{"order_id":"or_1","reason":"duplicate","reference":"rma-1","line_items":[]}'


def test_create_sends_the_stored_bytes_with_the_key_in_the_header(api, make_client):
    api.script("/refunds/create", ok({"refund": REFUND}))
    refund = make_client().create_refund(PAYLOAD, idempotency_key="key-1")
    assert refund == REFUND
    [sent] = api.sent
    assert sent.body == PAYLOAD.encode()
    assert sent.headers["Idempotency-Key"] == "key-1"
    assert sent.headers["Content-Type"] == "application/json"


def test_create_is_retried_with_the_same_bytes_and_key_after_a_dropped_connection(api, make_client):
    api.script("/refunds/create", requests.ConnectionError("reset by peer"), ok({"refund": REFUND}))
    make_client().create_refund(PAYLOAD, idempotency_key="key-1")
    assert [(s.body, s.headers["Idempotency-Key"]) for s in api.sent] == [
        (PAYLOAD.encode(), "key-1")
    ] * 2


def test_create_is_not_retried_after_a_read_timeout(api, make_client):
    api.script("/refunds/create", requests.ReadTimeout("slow"))
    with pytest.raises(AnswerTimedOut):
        make_client().create_refund(PAYLOAD, idempotency_key="key-1")
    assert len(api.sent) == 1


def test_create_needs_a_key(make_client):
    with pytest.raises(ValueError, match="idempotency key"):
        make_client().create_refund(PAYLOAD, idempotency_key="")


def test_an_answer_without_the_refund_is_invalid(api, make_client):
    api.script("/refunds/create", ok({"order": {}}))
    with pytest.raises(InvalidResponse, match="'refund'"):
        make_client().create_refund(PAYLOAD, idempotency_key="key-1")


def test_cancel_and_lookup(api, make_client):
    api.script("/refunds/cancel", ok({"refund": {**REFUND, "status": "canceled"}}))
    api.script("/refunds/lookup", ok({"refund": REFUND}))
    client = make_client()
    assert client.cancel_refund("rf_1", idempotency_key="c-1", reason="typo")["status"] == (
        "canceled"
    )
    assert client.lookup_refund("rf_1")["id"] == "rf_1"
    cancel, lookup = api.sent
    assert cancel.json == {"refund_id": "rf_1", "reason": "typo"}
    assert cancel.headers["Idempotency-Key"] == "c-1"
    assert lookup.json == {"refund_id": "rf_1"}
    assert "Idempotency-Key" not in lookup.headers


def test_a_refusal_is_raised(api, make_client):
    api.script("/refunds/cancel", error(400, "refund_not_cancelable", "It is processing."))
    with pytest.raises(requests.HTTPError) as raised:
        make_client().cancel_refund("rf_1", idempotency_key="c-1")
    assert raised.value.code == "refund_not_cancelable"


def test_the_wire_schema_reads_a_refund_and_names_what_is_wrong():
    refund = decode_refund(REFUND)
    assert (refund.id, refund.status, refund.total.value, refund.failure) == (
        "rf_1",
        "pending",
        500,
        None,
    )
    assert decode_refund({**REFUND, "status": "reversed"}).status == "reversed"
    with pytest.raises(InvalidRecord, match="rf_1"):
        decode_refund({**REFUND, "total": {"currency": "ghs", "value": "500"}})
    with pytest.raises(InvalidRecord, match="rf_"):
        decode_refund({**REFUND, "id": "or_1"})
    assert embedded_refunds({"id": "or_1"}) == []
    with pytest.raises(InvalidRecord):
        embedded_refunds({"refunds": {}})
