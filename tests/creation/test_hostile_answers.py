"""Whatever a broken or hostile service answers a create with, the request's key lifecycle
goes on: ``first_sent_at`` recorded, the claim released, the request pending (resent with its
key) or for review, and ``create_order`` raises only the library's own exceptions. Over real
loopback HTTP against the hostile server (tests/fixtures/hostile.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from django_orders.conf import orders_settings
from django_orders.creation.records import MAX_BACKOFF, SENDERS, claim_duration
from django_orders.exceptions import OrderRequestPending
from django_orders.models import Customer, Order, OrderRequest
from django_orders.services import create_order, resume_order_requests
from tests.fixtures.hostile import (
    MIB,
    gzip_bomb,
    json_answer,
    text_answer,
    trickle,
    use_hostile_server,
)
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db
State = OrderRequest.State
KEY = "sk_test_hostile_answers_0123456789"


@pytest.fixture
def hostile(settings, hostile_server):
    use_hostile_server(settings, hostile_server, KEY, REQUEST_DEADLINE=2)
    return hostile_server


def order(**overrides):
    record = {
        "id": "or_hostile1",
        "status": "requires_payment",
        "initiated_at": "2026-01-02T03:04:05Z",
        "customer": {"id": "cu_hostile1", "guest": True, "name": "Ama Mensah"},
    }
    record.update(overrides)
    return record


def create_expecting_pending(order_input) -> OrderRequest:
    """``create_order`` raises ``OrderRequestPending``; the stored request, checked for what
    every such outcome must leave: the attempt counted, first_sent_at set, the claim free."""
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.attempts == 1
    assert request.first_sent_at is not None  # the key's lifetime runs
    assert request.claimed_until is None  # resendable at once by any worker, once due
    return request


def test_a_lone_surrogate_in_any_string_is_stored_replaced(hostile, order_input):
    text = json.dumps({"order": order(note="x")}).replace('"x"', '"a\\ud83db"')
    text = text.replace('"Ama Mensah"', '"Ama \\udc00"')
    hostile.script("/orders/create", text_answer(200, text))
    created = create_order(**order_input, reference=new_reference())
    assert created.raw["note"] == "a\ufffdb"
    assert Customer.objects.get().name == "Ama \ufffd"
    assert Order.objects.get().raw["note"] == "a\ufffdb"
    assert OrderRequest.objects.get().state == State.SUCCEEDED


def test_a_nul_in_any_string_is_stored_replaced(hostile, order_input):
    text = json.dumps({"order": order(note="x")}).replace('"x"', '"a\\u0000b"')
    text = text.replace('"note"', '"no\\u0000te"').replace('"Ama Mensah"', '"Ama\\u0000"')
    hostile.script("/orders/create", text_answer(200, text))
    create_order(**order_input, reference=new_reference())
    stored = Order.objects.get()
    assert stored.raw["no\ufffdte"] == "a\ufffdb"
    assert Customer.objects.get().name == "Ama\ufffd"


@pytest.mark.parametrize(
    "field", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"], ids=["end", "start"]
)
def test_a_timestamp_at_the_edge_of_the_calendar_needs_review(hostile, order_input, field):
    hostile.script("/orders/create", json_answer(200, {"order": order(initiated_at=field)}))
    request = create_expecting_pending(order_input)
    assert request.state == State.NEEDS_REVIEW
    assert "outside the dates that can be stored in UTC" in request.last_error


@pytest.mark.django_db(transaction=True)  # as in production: the success's own transaction
def test_a_value_the_database_refuses_keeps_the_request_pending(hostile, order_input):
    # 1e400 decodes to infinity, which neither database takes in a JSON column.
    text = json.dumps({"order": order(amount=1)}).replace('"amount": 1', '"amount": 1e400')
    hostile.script("/orders/create", text_answer(200, text))
    request = create_expecting_pending(order_input)
    assert request.state == State.PENDING
    assert request.last_error.startswith("InvalidResponse: POST /orders/create answered with")
    assert "could not be stored" in request.last_error
    assert request.next_attempt_at is not None
    assert not Order.objects.exists() and not Customer.objects.exists()


def test_an_unexpected_error_parsing_the_answer_keeps_the_request_pending(
    hostile, order_input, monkeypatch
):
    def broken(record):
        raise RuntimeError("a parser bug")

    monkeypatch.setattr("django_orders.creation.flow.parse_order", broken)
    hostile.script("/orders/create", json_answer(200, {"order": order()}))
    request = create_expecting_pending(order_input)
    assert request.state == State.PENDING
    assert "could not be parsed (RuntimeError: a parser bug)" in request.last_error


def test_an_error_object_of_many_fields_is_stored_bounded(hostile, order_input):
    fields = {f"field{i}": "v" * 1000 for i in range(5000)}  # 5 MB in small pieces
    error = {"error": {"code": "down", "message": "Down.", **fields}}
    hostile.script("/orders/create", json_answer(503, error))
    request = create_expecting_pending(order_input)
    body = request.last_error_body
    assert (body["code"], body["message"]) == ("down", "Down.")
    assert body["truncated"].startswith("the error object was 5,")
    assert len(json.dumps(body)) < 64 * 1024


def test_a_request_id_and_an_error_code_longer_than_their_columns_are_cut(hostile, order_input):
    answer = json_answer(
        503, {"error": {"code": "c" * 1000, "message": "Down."}}, **{"X-Request-Id": "r" * 5000}
    )
    hostile.script("/orders/create", answer)
    request = create_expecting_pending(order_input)
    assert request.last_request_id == "r" * 128
    assert request.last_error_code == "c" * 128


def test_a_5_mb_error_message_is_stored_cut_with_a_marker(hostile, order_input, admin_client):
    answer = json_answer(503, {"error": {"code": "down", "message": "m" * (5 * MIB)}})
    hostile.script("/orders/create", answer)
    request = create_expecting_pending(order_input)
    assert f"[cut: {5 * MIB:,} characters in all]" in request.last_error
    assert len(request.last_error) < 4200
    stored_message = request.last_error_body["message"]  # the stored error object: cut too
    assert stored_message.endswith(f"[cut: {5 * MIB:,} characters in all]")
    assert len(stored_message) < 2100
    page = admin_client.get(f"/admin/django_orders/orderrequest/{request.pk}/change/")
    assert page.status_code == 200
    assert f"[cut: {5 * MIB:,} characters in all]" in page.content.decode()


RETRY_AFTERS = {
    "1e12": "1e12",
    "inf": "inf",
    "nan": "nan",
    "year-9999": "Fri, 31 Dec 9999 23:59:59 GMT",
}


@pytest.mark.parametrize("value", RETRY_AFTERS.values(), ids=RETRY_AFTERS.keys())
def test_any_retry_after_keeps_the_backoff_cap(hostile, order_input, value):
    hostile.script("/orders/create", json_answer(429, {}, **{"Retry-After": value}))
    request = create_expecting_pending(order_input)
    assert request.state == State.PENDING
    # From when the outcome was recorded (updated_at), never more than the cap.
    assert request.next_attempt_at - request.updated_at <= MAX_BACKOFF


def test_a_retry_after_never_pushes_a_request_past_its_key_lifetime(hostile, order_input, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "KEY_LIFETIME": timedelta(minutes=30)}
    hostile.script("/orders/create", json_answer(429, {}, **{"Retry-After": "1e12"}))
    request = create_expecting_pending(order_input)
    expiry = request.first_sent_at + orders_settings.KEY_LIFETIME
    # Due while a whole claim still fits before the key expires, not an hour later.
    assert request.next_attempt_at == expiry - claim_duration()
    assert request.next_attempt_at - request.last_attempt_at < MAX_BACKOFF


def test_a_gzip_bomb_answering_a_create_keeps_the_request_pending(hostile, order_input):
    hostile.script("/orders/create", gzip_bomb(decompressed=1024 * MIB))
    request = create_expecting_pending(order_input)
    assert request.state == State.PENDING
    assert "larger than MAX_RESPONSE_BYTES" in request.last_error


def test_a_trickling_answer_keeps_the_request_pending_past_the_deadline(hostile, order_input):
    hostile.script("/orders/create", trickle())
    request = create_expecting_pending(order_input)
    assert request.state == State.PENDING
    assert "REQUEST_DEADLINE (2 s)" in request.last_error


@pytest.mark.django_db(transaction=True)
def test_one_failing_request_does_not_stop_a_resume_run(hostile, order_input, monkeypatch):
    hostile.script("/orders/create", json_answer(503, {}))
    for reference in ("cart-a", "cart-b"):
        with pytest.raises(OrderRequestPending):
            create_order(**order_input, reference=reference)
    OrderRequest.objects.update(next_attempt_at=None)
    first, second = OrderRequest.objects.order_by("created_at", "pk")
    original = SENDERS[OrderRequest.Kind.ORDER_CREATE]

    def failing_for_first(client, request, attempt):
        if request.pk == first.pk:
            raise RuntimeError("the database went away")
        return original(client, request, attempt)

    monkeypatch.setitem(SENDERS, OrderRequest.Kind.ORDER_CREATE, failing_for_first)
    hostile.script("/orders/create", json_answer(200, {"order": order()}))
    summary = resume_order_requests()
    assert (summary.resent, summary.succeeded, summary.still_pending) == (2, 1, 1)
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.state == State.SUCCEEDED
    assert first.state == State.PENDING and first.claimed_until is None
    assert "RuntimeError: the database went away" in first.last_error
