"""Every kind of error answer maps to the exception class callers branch on."""

from __future__ import annotations

import json
import re

import pytest
import requests

from django_orders.exceptions import (
    AuthenticationFailed,
    InvalidResponse,
    OrdersAPIError,
    OrdersError,
    RateLimited,
    RequestInProgress,
    RequestRejected,
    ServerError,
)

from .conftest import error, ok

HTML_502 = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


def fetch(make_client):
    # max_retries=0: these tests look at the mapping, not at the retry policy.
    return make_client(max_retries=0).fetch_page("orders", 1, 10)


def test_401_names_the_causes_to_check(api, make_client):
    api.script(
        "/orders/page",
        error(401, "unauthorized", "Invalid credential.", request_id="req_401"),
    )
    with pytest.raises(AuthenticationFailed) as caught:
        fetch(make_client)
    exc = caught.value
    assert (exc.status_code, exc.code, exc.request_id) == (401, "unauthorized", "req_401")
    text = str(exc)
    assert text.startswith("Invalid credential. Check that")  # no doubled full stop
    assert "exactly 'Bearer <token>'" in text
    assert "complete key" in text
    assert "still active" in text
    assert "HTTP 401" in text and "req_401" in text
    assert isinstance(exc, OrdersAPIError) and isinstance(exc, requests.HTTPError)


@pytest.mark.parametrize("status", [400, 403, 404, 405, 413, 415, 422])
def test_other_4xx_are_rejections_with_code_message_param_and_request_id(api, make_client, status):
    body = {
        "error": {
            "type": "invalid_request_error",
            "code": "parameter_invalid",
            "message": "page_size must be an integer from 1 to 256.",
            "param": "page_size",
        }
    }
    api.script("/orders/page", (status, {"X-Request-Id": "req_rej"}, json.dumps(body)))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    exc = caught.value
    assert exc.status_code == status
    assert exc.code == "parameter_invalid"
    assert exc.message == "page_size must be an integer from 1 to 256."
    assert exc.param == "page_size"
    assert exc.request_id == "req_rej"
    assert exc.response is not None and exc.response.status_code == status
    assert f"HTTP {status}" in str(exc) and "code parameter_invalid" in str(exc)


def test_422_idempotency_conflict_is_flagged(api, make_client):
    api.script("/orders/page", error(422, "idempotency_key_conflict", "Key reused."))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    assert caught.value.is_idempotency_conflict
    assert not caught.value.is_page_out_of_window


def test_409_is_in_progress(api, make_client):
    api.script("/orders/page", error(409, "idempotency_key_in_progress", "Still running."))
    with pytest.raises(RequestInProgress) as caught:
        fetch(make_client)
    assert caught.value.code == "idempotency_key_in_progress"
    assert caught.value.status_code == 409


@pytest.mark.parametrize(
    ("header", "expected"),
    [({"Retry-After": "7"}, 7.0), ({"Retry-After": "soon"}, None), ({}, None)],
)
def test_429_carries_retry_after(api, make_client, header, expected):
    api.script("/orders/page", error(429, "rate_limited", "Slow down.", **header))
    with pytest.raises(RateLimited) as caught:
        fetch(make_client)
    assert caught.value.retry_after == expected
    assert caught.value.status_code == 429


def test_429_retry_after_as_an_http_date_is_understood(api, make_client):
    # RFC 9110 allows a date; one in the past means "now".
    api.script(
        "/orders/page",
        error(
            429, "rate_limited", "Slow down.", **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
        ),
    )
    with pytest.raises(RateLimited) as caught:
        fetch(make_client)
    assert caught.value.retry_after == 0.0


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_are_server_errors(api, make_client, status):
    api.script("/orders/page", error(status, "internal_error", "Try again later."))
    with pytest.raises(ServerError) as caught:
        fetch(make_client)
    assert caught.value.status_code == status
    assert caught.value.code == "internal_error"


def test_an_html_502_from_a_proxy_is_a_server_error_that_says_so(api, make_client):
    api.script("/orders/page", (502, {"Content-Type": "text/html"}, HTML_502))
    with pytest.raises(ServerError) as caught:
        fetch(make_client)
    exc = caught.value
    assert exc.status_code == 502
    assert exc.code is None and exc.request_id is None
    assert "answered 502 Bad Gateway with no JSON error body" in str(exc)


def test_an_error_object_without_the_error_envelope_is_read(api, make_client):
    bare = {
        "type": "invalid_request_error",
        "code": "resource_missing",
        "message": "No such order.",
    }
    api.script("/orders/lookup", (404, {"X-Request-Id": "req_bare"}, json.dumps(bare)))
    with pytest.raises(RequestRejected) as caught:
        make_client(max_retries=0).lookup_order("or_x")
    assert caught.value.code == "resource_missing"
    assert caught.value.message == "No such order."


def test_an_error_envelope_holding_a_string_is_read_as_the_message(api, make_client):
    api.script("/orders/page", (403, {}, json.dumps({"error": "Forbidden here"})))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    assert caught.value.message == "Forbidden here"
    assert caught.value.code is None


def test_an_error_body_without_a_message_says_so(api, make_client):
    api.script("/orders/page", (400, {}, json.dumps({"error": {"code": "bad"}})))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    assert "an error body without a message" in caught.value.message
    assert caught.value.code == "bad"


@pytest.mark.parametrize(
    ("body", "hint"),
    [
        ("<html>ok</html>", True),
        ("", True),
        ("\n  <!DOCTYPE html>", True),
        (b"<html>caf\xe9</html>", True),  # Latin-1 bytes: not even UTF-8
        ('{"page": {"orders": [', False),
        ("  [1, 2", False),
    ],
)
def test_a_2xx_that_is_not_json_is_an_invalid_response_that_says_why(api, make_client, body, hint):
    api.script("/orders/page", (200, {"X-Request-Id": "req_bad"}, body))
    with pytest.raises(InvalidResponse) as caught:
        fetch(make_client)
    assert "not JSON" in str(caught.value)
    assert caught.value.status_code == 200 and caught.value.request_id == "req_bad"
    assert caught.value.message.startswith(
        "POST /orders/page answered 200 with a body that is not JSON ("
    )
    reason = caught.value.message.split("not JSON (", 1)[1]
    assert re.search(r"line \d+ column \d+", reason) or "can't decode byte 0xe9" in reason
    # A body that does not even start like JSON is most likely not the API at all.
    assert ("is BASE_URL the address of the API?" in caught.value.message) is hint


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(api, make_client, word):
    """Python's decoder accepts them; RFC 8259 and both databases' JSON columns do not."""
    record = (
        '{"id": "or_1", "status": "paid", "initiated_at": "2026-01-01T00:00:00Z", '
        '"customer": {"id": "cu_1", "guest": false, "name": "A"}, '
        f'"custom_data": {{"x": {word}}}}}'
    )
    body = f'{{"page": {{"number": 1, "size": 10, "orders": [{record}]}}}}'
    api.script("/orders/page", (200, {"X-Request-Id": "req_nan"}, body))
    with pytest.raises(InvalidResponse) as caught:
        fetch(make_client)
    assert caught.value.message == (
        f"POST /orders/page answered 200 with a body that is not JSON ({word} is not a JSON value)"
    )
    assert "BASE_URL" not in caught.value.message
    assert caught.value.request_id == "req_nan"


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({}, "'page' envelope"),
        ({"orders": []}, "'page' envelope"),
        ({"page": []}, "'page' envelope"),
        ({"page": {"number": 1, "size": 10}}, "'orders' list"),
        ({"page": {"orders": {"id": "or_1"}}}, "'orders' list"),
        ({"page": {"orders": ["or_1"]}}, "non-object in 'orders'"),
        ({"page": {"number": 2, "size": 10, "orders": []}}, "page.number 2 for the requested 1"),
        (
            {"page": {"number": 1, "size": 25, "orders": []}},
            "page 1 with page.size 25: expected the requested page_size 10 or the number of "
            "records returned (0)",
        ),
    ],
)
def test_a_page_without_its_envelope_or_collection_names_what_is_missing(
    api, make_client, body, missing
):
    api.script("/orders/page", ok(body, request_id="req_pg"))
    with pytest.raises(InvalidResponse) as caught:
        fetch(make_client)
    assert missing in str(caught.value)
    assert caught.value.request_id == "req_pg"


def test_every_error_shares_one_base(api, make_client):
    for cls in (AuthenticationFailed, RequestRejected, RequestInProgress, RateLimited):
        assert issubclass(cls, OrdersError)
    api.script("/orders/page", error(418, "teapot", "No."))
    with pytest.raises(OrdersError):
        fetch(make_client)
