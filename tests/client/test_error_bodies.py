"""Every field of the service's error body reaches the exception (api-notes.md, "Error bodies
as the SDK reads them"), the key never does, and the page window's 400 is recognised with and
without ``param``."""

from __future__ import annotations

import json
import pickle

import pytest

from django_orders.client.paging import iter_pages
from django_orders.exceptions import (
    AuthenticationFailed,
    RateLimited,
    RequestRejected,
    ServerError,
)
from tests.fixtures.http import KEY, assert_key_absent

from .conftest import page_of

#: An error object as the provider's SDK documents it, every field present.
FULL = {
    "type": "invalid_request_error",
    "code": "parameter_invalid",
    "message": "The currency is not supported.",
    "detail": "Use one of ghs, usd, gbp, eur, cny (lower case).",
    "url": "https://docs.orders.test/errors/parameter_invalid",
    "fix_code": "use_supported_currency",
    "cause": {"field": "line_items[0].product.price.currency", "value": "xyz"},
    "param": "line_items[0].product.price.currency",
}


def reply(status: int, body: object, request_id: str = "req_body") -> tuple:
    text = body if isinstance(body, str) else json.dumps(body)
    return (status, {"X-Request-Id": request_id}, text)


def fetch(make_client, number: int = 1):
    return make_client(max_retries=0).fetch_page("orders", number, 10)


@pytest.mark.parametrize(
    ("status", "cls"),
    [(400, RequestRejected), (401, AuthenticationFailed), (429, RateLimited), (503, ServerError)],
)
@pytest.mark.parametrize("enveloped", [True, False])
def test_every_field_is_kept_as_attributes_and_as_a_dict(api, make_client, status, cls, enveloped):
    api.script("/orders/page", reply(status, {"error": FULL} if enveloped else FULL))
    with pytest.raises(cls) as caught:
        fetch(make_client)
    exc = caught.value
    assert exc.error_body == FULL
    assert (exc.error_type, exc.code, exc.detail, exc.doc_url, exc.fix_code, exc.param) == (
        "invalid_request_error",
        "parameter_invalid",
        "Use one of ghs, usd, gbp, eur, cny (lower case).",
        "https://docs.orders.test/errors/parameter_invalid",
        "use_supported_currency",
        "line_items[0].product.price.currency",
    )
    assert exc.cause == {"field": "line_items[0].product.price.currency", "value": "xyz"}
    assert exc.message.startswith("The currency is not supported.")
    assert (exc.status_code, exc.request_id) == (status, "req_body")


def test_the_sdk_shape_without_param_or_optional_fields(api, make_client):
    body = {"type": "api_error", "code": "not_found", "url": "https://docs.orders.test/e/404"}
    api.script("/orders/lookup", reply(404, {"error": body}))
    with pytest.raises(RequestRejected) as caught:
        make_client(max_retries=0).lookup_order("or_x")
    exc = caught.value
    assert exc.error_body == body
    assert (exc.error_type, exc.code, exc.doc_url) == ("api_error", "not_found", body["url"])
    assert exc.detail is exc.fix_code is exc.cause is exc.param is None
    assert (
        exc.message
        == "POST /orders/lookup answered 404 Not Found with an error body without a message"
    )


def test_unknown_fields_and_non_string_values_are_kept_in_the_dict_only(api, make_client):
    body = {"code": 17, "message": "Odd.", "detail": ["a", "b"], "retry_hint": {"after": 3}}
    api.script("/orders/page", reply(400, {"error": body}))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    exc = caught.value
    assert exc.error_body == body
    assert exc.code is None and exc.detail is None  # attributes hold text only


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<html><body>502 Bad Gateway</body></html>", "with no JSON error body"),
        ("", "with no JSON error body"),
        ('{"error": {"code": "x", "detail": NaN}}', "with no JSON error body"),
        (json.dumps({"error": "Forbidden here"}), "Forbidden here"),
        (json.dumps([1, 2]), "with an error body without a message"),
    ],
)
def test_bodies_without_an_error_object(api, make_client, text, message):
    api.script("/orders/page", reply(403, text))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    exc = caught.value
    assert message in exc.message
    expected = {"message": "Forbidden here"} if message == "Forbidden here" else {}
    assert exc.error_body == expected
    assert exc.error_type is exc.detail is exc.doc_url is exc.fix_code is exc.cause is None


def test_the_key_echoed_in_any_field_is_scrubbed_everywhere(api, make_client):
    echoed = {
        "type": "authentication_error",
        "code": "invalid_key",
        "message": f"Key {KEY} is not valid.",
        "detail": f"Bearer {KEY}",
        "url": f"https://docs.orders.test/keys?key={KEY}",
        "fix_code": KEY,
        "cause": {"header": [f"Authorization: Bearer {KEY}"], KEY: KEY},
    }
    api.script("/orders/page", reply(401, {"error": echoed}))
    with pytest.raises(AuthenticationFailed) as caught:
        fetch(make_client)
    exc = caught.value
    for text in (json.dumps(exc.error_body), str(exc), repr(exc), exc.detail, exc.doc_url):
        assert_key_absent(text, "the exception")
    assert exc.detail == "Bearer [hidden]"
    assert exc.cause == {"header": ["Authorization: Bearer [hidden]"], "[hidden]": "[hidden]"}


def test_a_nul_character_is_replaced_so_the_body_can_be_stored(api, make_client):
    api.script("/orders/page", reply(400, {"error": {"code": "x", "detail": "a\x00b"}}))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    assert caught.value.detail == "a\ufffdb"


def test_the_fields_survive_pickling(api, make_client):
    api.script("/orders/page", reply(400, {"error": FULL}))
    with pytest.raises(RequestRejected) as caught:
        fetch(make_client)
    copy = pickle.loads(pickle.dumps(caught.value))  # noqa: S301  (our own bytes)
    assert type(copy) is RequestRejected
    assert copy.error_body == FULL
    assert (copy.detail, copy.doc_url, copy.fix_code, copy.cause, copy.error_type) == (
        FULL["detail"],
        FULL["url"],
        FULL["fix_code"],
        FULL["cause"],
        FULL["type"],
    )
    assert str(copy) == str(caught.value)


def test_explicit_code_and_param_win_over_the_body():
    exc = RequestRejected(
        "Stored.", status_code=400, code="a", param="p", error_body={"code": "b", "param": "q"}
    )
    assert (exc.code, exc.param) == ("a", "p")
    assert RequestRejected("Stored.", error_body={"code": "b"}).code == "b"


# --- the page window's 400 -----------------------------------------------------------------------


def window_400(**fields: str) -> tuple:
    body = {"type": "invalid_request_error", "code": "parameter_invalid", **fields}
    return reply(400, {"error": body}, request_id="req_window")


@pytest.mark.parametrize(
    "fields",
    [
        # The provider's shape: no param, the message names page_number.
        {"message": "page_number must be between 1 and 10.", "url": "https://docs.test/e"},
        # No param, a generic message, the detail names page_number.
        {"message": "Invalid request.", "detail": "page_number 11 is past the page window."},
        # The spec-era shape, with param.
        {"message": "Out of range.", "param": "page_number"},
    ],
)
def test_the_page_window_400_ends_a_walk_with_and_without_param(api, make_client, fields):
    api.script("/orders/page", *[page_of(n, 10, 10) for n in range(1, 11)], window_400(**fields))
    walk = iter_pages(make_client(max_page_number=None), "orders", page_size=10)
    assert len(list(walk)) == 10
    assert walk.end_reason == "page_window" and len(api.sent) == 11


@pytest.mark.parametrize(
    "fields",
    [
        {"message": "page_size must be from 1 to 256.", "param": "page_size"},
        {"message": "page_size too large for page_number 2", "param": "page_size"},
        {"message": "Invalid request.", "detail": "page_size must be from 1 to 256."},
    ],
)
def test_another_400_is_not_the_page_window(api, make_client, fields):
    api.script("/orders/page", page_of(1, 10, 10), window_400(**fields))
    walk = iter_pages(make_client(max_page_number=None), "orders", page_size=10)
    with pytest.raises(RequestRejected) as caught:
        list(walk)
    assert not caught.value.is_page_out_of_window
    assert walk.end_reason is None and walk.pages_read == 1


@pytest.mark.parametrize(
    ("code", "message", "param", "expected"),
    [
        # The sandbox's (and the service's) answer past the window.
        ("parameter_invalid", "page_number 11 is past the page window.", "page_number", True),
        ("parameter_invalid", "page_number 11 is past the page window.", None, True),
        ("invalid_request", "page_number out of range", None, True),
        ("anything", "out of range", "page_number", True),
        # About another parameter, even when the message mentions page_number in passing.
        ("parameter_invalid", "page_size too large for page_number 2", "page_size", False),
        ("parameter_invalid", "page_size must be from 1 to 256.", "page_size", False),
        ("rate_plan_exceeded", "page_number quota reached", None, False),
    ],
)
def test_page_window_recognition(code, message, param, expected):
    exc = RequestRejected(message, status_code=400, code=code, param=param)
    assert exc.is_page_out_of_window is expected
    other = RequestRejected(message, status_code=404, code=code, param=param)
    assert not other.is_page_out_of_window
