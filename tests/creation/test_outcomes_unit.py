"""Each upstream outcome, precisely, with ``responses`` standing in for the service."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
import requests
import responses

from django_orders.creation.records import backoff, claim_duration
from django_orders.exceptions import (
    OrderRequestPending,
    OrderRequestRejected,
    OrdersConfigurationError,
    RequestRejected,
)
from django_orders.models import OrderRequest
from django_orders.services import create_order, resend_order_request
from tests.fixtures.http import BASE, KEY
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db

URL = BASE + "/orders/create"
State = OrderRequest.State


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    mocked_settings(MAX_RETRIES=2)


def error(status, code, message="Refused.", **headers):
    return {
        "status": status,
        "json": {"error": {"type": "invalid_request_error", "code": code, "message": message}},
        "headers": {"X-Request-Id": "req_unit_1", **headers},
    }


def order_answer(order_id="or_unit1"):
    return {
        "order": {
            "id": order_id,
            "status": "requires_payment",
            "initiated_at": "2026-01-02T03:04:05.123Z",
            "customer": {"id": "cu_unit1", "guest": True, "name": "Ama Mensah"},
        }
    }


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "parameter_invalid"), (403, "forbidden"), (404, "not_found"), (422, "unprocessable")],
)
def test_definitive_rejection_is_failed(http_mock, order_input, status, code):
    http_mock.post(URL, **error(status, code, "Nope."))
    with pytest.raises(OrderRequestRejected) as caught:
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert (request.state, request.last_status_code, request.last_error_code) == (
        State.FAILED,
        status,
        code,
    )
    assert request.last_request_id == "req_unit_1"
    assert "Nope." in request.last_error
    assert request.next_attempt_at is None and request.claimed_until is None
    assert isinstance(caught.value.error, RequestRejected)
    assert caught.value.order_request.pk == request.pk
    assert len(http_mock.calls) == 1


def test_idempotency_conflict_needs_review(http_mock, order_input):
    http_mock.post(URL, **error(422, "idempotency_key_conflict"))
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert (request.state, request.last_error_code) == (
        State.NEEDS_REVIEW,
        "idempotency_key_conflict",
    )
    assert request.next_attempt_at is None


@pytest.mark.parametrize(
    ("answer", "calls", "expected_status", "expected_error"),
    [
        (error(409, "idempotency_key_in_progress"), 1, 409, "RequestInProgress"),
        (error(503, "unavailable"), 3, 503, "ServerError"),  # the client retried twice
        (error(429, "rate_limited", **{"Retry-After": "0"}), 3, 429, "RateLimited"),
        ({"status": 200, "body": "<html>oops</html>"}, 1, 200, "InvalidResponse"),
        ({"body": requests.exceptions.ReadTimeout("read timed out")}, 1, None, "OutcomeUnknown"),
        (
            {"body": requests.exceptions.ConnectionError("Connection refused")},
            3,
            None,
            "RequestNotSent",
        ),
    ],
    ids=["409", "503", "429", "not-json", "read-timeout", "refused"],
)
def test_unknown_outcome_stays_pending_with_backoff(
    http_mock, order_input, answer, calls, expected_status, expected_error
):
    http_mock.post(URL, **answer)
    with pytest.raises(OrderRequestPending) as caught:
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.state == State.PENDING
    assert request.attempts == 1
    assert request.last_status_code == expected_status
    assert request.last_error.startswith(expected_error)
    assert request.next_attempt_at - request.last_attempt_at >= timedelta(seconds=30)
    assert request.claimed_until is None
    assert caught.value.order_request.pk == request.pk
    assert len(http_mock.calls) == calls
    # Every call carried the stored body, byte for byte, with the same key.
    assert {call.request.body for call in http_mock.calls} == {request.payload.encode()}


def test_backoff_doubles_per_attempt_and_is_capped(http_mock, order_input):
    http_mock.post(URL, **error(409, "idempotency_key_in_progress"))
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    waits = [request.next_attempt_at - request.last_attempt_at]
    for _ in range(2):
        request = resend_order_request(request)
        waits.append(request.next_attempt_at - request.last_attempt_at)
    assert request.attempts == 3
    assert [round(w.total_seconds()) for w in waits] == [30, 60, 120]
    assert backoff(30) == timedelta(hours=1)


def test_answer_that_breaks_the_spec_needs_review(http_mock, order_input):
    http_mock.post(URL, json=order_answer(order_id="12345"))
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    request = OrderRequest.objects.get()
    assert request.state == State.NEEDS_REVIEW
    assert "InvalidRecord" in request.last_error


def test_success_and_replay_header(http_mock, order_input):
    http_mock.post(URL, json=order_answer(), headers={"Idempotent-Replayed": "true"})
    order = create_order(**order_input, reference=new_reference())
    assert order.pk == "or_unit1"
    assert order.customer_id == "cu_unit1"
    sent = json.loads(http_mock.calls[0].request.body)
    assert sent["request_meta"]["idempotency_key"] == OrderRequest.objects.get().idempotency_key


def test_claim_outlasts_the_longest_send(settings):
    # Each try bounded by REQUEST_DEADLINE (60 s; the timeouts bound single socket reads, not
    # a trickling answer), 4 tries, up to 3 Retry-After waits of 60 s, plus a margin.
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE}
    assert claim_duration() == timedelta(seconds=60 * 4 + 180 + 60)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "REQUEST_DEADLINE": 10}
    assert claim_duration() == timedelta(seconds=10 * 4 + 180 + 60)


def test_api_key_never_in_errors_rows_or_logs(http_mock, order_input, caplog):
    caplog.set_level(logging.DEBUG)
    texts = []
    answers = [
        error(401, "unauthorized", f"Bad credential: Bearer {KEY}"),
        error(403, "forbidden"),
        error(500, "boom"),
        {"body": requests.exceptions.ConnectionError("connection reset")},
    ]
    for answer in answers:
        http_mock.reset()
        http_mock.post(URL, **answer)
        try:
            create_order(**order_input, reference=new_reference())
        except Exception as exc:  # every kind is inspected
            texts += [str(exc), repr(exc), repr(getattr(exc, "cause", None))]
    for request in OrderRequest.objects.all():
        texts += [request.last_error, request.payload, str(request)]
    texts.append(caplog.text)
    assert len(OrderRequest.objects.all()) == 4
    assert all(KEY not in text for text in texts)


WEB_PAGE = {"content_type": "text/html; charset=utf-8", "body": "<!doctype html><h1>Shop</h1>"}


@pytest.mark.parametrize(
    "answer",
    [
        {"status": 404, **WEB_PAGE},
        {"status": 405, **WEB_PAGE},
        {"status": 301, "headers": {"Location": "https://www.orders.test/"}, "body": ""},
    ],
    ids=["404-page", "405-page", "redirect"],
)
def test_a_web_page_at_base_url_stores_nothing_and_says_so(http_mock, order_input, answer):
    """Such an answer proves no API handled the request: no order exists upstream, so keeping
    the request would only burn its reference and leave staff a 'failed' row to explain."""
    http_mock.post(URL, **answer)
    with pytest.raises(OrdersConfigurationError) as caught:
        create_order(**order_input, reference="cart-web-page")
    assert str(caught.value).startswith("No order was created and nothing was stored: ")
    assert 'DJANGO_ORDERS["BASE_URL"]' in str(caught.value)
    assert KEY not in str(caught.value)
    assert OrderRequest.objects.count() == 0
    assert len(http_mock.calls) == 1

    # Once BASE_URL points at the API, the same reference creates the order.
    http_mock.replace(responses.POST, URL, json=order_answer(), status=200)
    order = create_order(**order_input, reference="cart-web-page")
    assert order.id == "or_unit1"
    assert OrderRequest.objects.get().state == State.SUCCEEDED


def test_a_5xx_web_page_keeps_the_request_pending_and_gives_the_hint(http_mock, order_input):
    """A proxy's error page may stand in front of an API that did receive the request."""
    http_mock.post(URL, status=500, **WEB_PAGE)
    with pytest.raises(OrderRequestPending) as caught:
        create_order(**order_input, reference=new_reference())
    assert OrderRequest.objects.get().state == State.PENDING
    assert "The answer is a web page, not the API's" in str(caught.value.cause)


def test_the_apis_own_404_is_a_rejection_that_is_kept(http_mock, order_input):
    http_mock.post(URL, **error(404, "resource_missing"))
    with pytest.raises(OrderRequestRejected):
        create_order(**order_input, reference=new_reference())
    assert OrderRequest.objects.get().state == State.FAILED


def test_every_kind_of_request_has_its_sender_and_an_unknown_kind_is_named():
    """The journal picks the sender by kind (``records.SENDERS``, filled by the flows that
    ``services`` imports): a kind without one would never be resumed."""
    from django_orders.creation.records import SENDERS, Attempt, send_request
    from django_orders.creation.refunds import send_refund_request

    assert set(SENDERS) == set(OrderRequest.Kind.values)
    assert SENDERS[OrderRequest.Kind.REFUND_CREATE] is send_refund_request
    request = OrderRequest(kind="order_teleport", reference="r", payload="{}")
    with pytest.raises(LookupError, match="No sender for order requests of kind 'order_teleport'"):
        send_request(None, request, Attempt.begin("default"))
