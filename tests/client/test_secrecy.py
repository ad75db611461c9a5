"""The key's text appears in no log record, exception text, repr or pickle that we produce."""

from __future__ import annotations

import json
import logging
import pickle
import traceback

import pytest
import requests

from django_orders.client.paging import iter_pages
from django_orders.client.transport import OrdersClient
from django_orders.conf import orders_settings
from django_orders.exceptions import (
    AuthenticationFailed,
    OrdersAPIError,
    OrdersError,
    RateLimited,
    RequestRejected,
    error_name,
)
from tests.fixtures.http import BASE, KEY, assert_key_absent
from tests.fixtures.secrecy import error_report, raised_by

from .conftest import error, ok, page_of

CREATE = {"request_meta": {"idempotency_key": "idem-secret"}, "line_items": []}


def everything_printable(exc: BaseException) -> str:
    """All the text an error handler, a log formatter or a report could get from ``exc``."""
    parts = [str(exc), repr(exc), "".join(traceback.format_exception(exc)), repr(vars(exc))]
    for holder in (exc, getattr(exc, "response", None)):
        request = getattr(holder, "request", None)
        if request is not None:
            parts += [repr(dict(request.headers)), repr(request.body), str(request.url)]
    parts.append(repr(pickle.dumps(exc)))
    restored = pickle.loads(pickle.dumps(exc))  # noqa: S301  (our own bytes)
    parts += [str(restored), repr(restored), repr(vars(restored))]
    return "\n".join(parts)


def run_failures(client: OrdersClient) -> list[OrdersError]:
    """Call every operation until the scripted failures run out; collect what was raised."""
    caught: list[OrdersError] = []
    calls = [
        lambda: client.fetch_page("orders", 1, 5),
        lambda: client.lookup_order("or_1"),
        lambda: client.create_order(CREATE),
    ]
    for call in calls * 6:
        try:
            call()
        except OrdersError as exc:
            caught.append(exc)
    return caught


@pytest.fixture
def debug_logs(caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("django_orders", "urllib3", "requests"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def assert_logs_clean(caplog) -> None:
    assert caplog.records, "expected some log records to inspect"
    for record in caplog.records:
        assert_key_absent(record.getMessage(), f"log record {record.name}")
        assert_key_absent(repr(record.args), f"log record args {record.name}")
        if record.exc_info:
            assert_key_absent("".join(traceback.format_exception(*record.exc_info)), "exc_info")
    assert_key_absent(caplog.text, "captured log text")


def test_no_error_or_log_from_mocked_answers_holds_the_key(api, make_client, debug_logs):
    for path in ("/orders/page", "/orders/lookup", "/orders/create"):
        api.script(
            path,
            error(401, "unauthorized", "Invalid credential."),
            error(429, "rate_limited", "Slow.", **{"Retry-After": "1"}),
            error(400, "parameter_invalid", "Bad.", request_id="req_b"),
            (502, {"Content-Type": "text/html"}, "<html>bad gateway</html>"),
            requests.exceptions.ConnectTimeout("connect timed out"),
            requests.exceptions.ReadTimeout("read timed out"),
            requests.exceptions.ConnectionError("Connection reset by peer"),
            (200, {}, "not json"),
            ok({"nothing": True}),
        )
    client = make_client(max_retries=1)
    caught = run_failures(client)
    assert {error_name(e) for e in caught} >= {
        "AuthenticationFailed",
        "RequestRejected",
        "RequestNotSent",
        "OutcomeUnknown",
        "InvalidResponse",
    }
    for exc in caught:
        assert_key_absent(everything_printable(exc), f"{type(exc).__name__}")
    assert_logs_clean(debug_logs)


def test_the_http_error_keeps_a_request_whose_header_is_redacted(api, make_client):
    api.script("/orders/page", error(401, "unauthorized", "Invalid credential."))
    with pytest.raises(AuthenticationFailed) as caught:
        make_client().fetch_page("orders", 1, 5)
    exc = caught.value
    assert isinstance(exc, requests.HTTPError)
    assert exc.response.request is exc.request
    assert exc.request.headers["Authorization"] == "Bearer [hidden]"
    # ...yet the wire carried the real header (recorded at send time).
    assert api.sent[0].headers["Authorization"] == f"Bearer {KEY}"


def test_a_key_echoed_by_the_server_is_scrubbed_from_errors(api, make_client):
    echoed = {
        "error": {
            "code": f"bad_key_{KEY}",
            "message": f"Invalid API key provided: {KEY}",
            "param": KEY,
        }
    }
    api.script("/orders/page", (401, {}, json.dumps(echoed)))
    api.script("/orders/lookup", (307, {"Location": f"https://x.test/?k={KEY}"}, ""))
    client = make_client(max_retries=0)
    caught: list[OrdersError] = []
    for call in (lambda: client.fetch_page("orders", 1, 5), lambda: client.lookup_order("or_1")):
        with pytest.raises(OrdersError) as info:
            call()
        caught.append(info.value)
    assert [type(e) for e in caught] == [AuthenticationFailed, RequestRejected]
    for exc in caught:
        assert_key_absent(everything_printable(exc), type(exc).__name__)
    assert "Invalid API key provided: [hidden]" in str(caught[0])


def test_real_loopback_failures_hold_no_key(
    make_client, debug_logs, raw_server, closed_port_url, sandbox
):
    dropped = raw_server("close")
    assert dropped.url != closed_port_url  # the closed port stays reserved (closed_port_url)
    caught: list[OrdersError] = []
    for base_url in (closed_port_url, dropped.url):
        caught += run_failures(make_client(base_url=base_url, max_retries=1))
    # The sandbox knows another key: a real 401 over HTTP.
    caught += run_failures(make_client(base_url=sandbox.url, max_retries=1))
    assert {error_name(e) for e in caught} == {
        "RequestNotSent",
        "OutcomeUnknown",
        "AuthenticationFailed",
    }
    for exc in caught:
        assert_key_absent(everything_printable(exc), type(exc).__name__)
    assert_logs_clean(debug_logs)


def test_successful_traffic_logs_no_key(sandbox, make_client, debug_logs):
    # The sandbox's key is the one under test here.
    sandbox.seed(3)
    client = make_client(api_key=sandbox.api_key, base_url=sandbox.url)
    list(iter_pages(client, "orders", page_size=2))
    for record in debug_logs.records:
        assert sandbox.api_key not in record.getMessage()
    assert sandbox.api_key not in debug_logs.text
    assert any(r.name.startswith("urllib3") for r in debug_logs.records)


def test_client_auth_and_settings_reprs_hide_the_key(make_client, settings):
    client = make_client()
    for text in (repr(client), repr(client._auth), repr(vars(client)), str(client)):
        assert_key_absent(text, "a repr")
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE}
    assert orders_settings.API_KEY.reveal() == KEY  # the value is there...
    assert_key_absent(repr(orders_settings), "repr(orders_settings)")  # ...but not shown
    assert "API_KEY" in repr(orders_settings)
    assert_key_absent(repr(OrdersClient.from_settings()), "repr(from_settings())")


@pytest.mark.parametrize(
    "exc",
    [
        AuthenticationFailed("Denied", status_code=401, code="unauthorized", request_id="r1"),
        RequestRejected("Bad", status_code=400, code="x", request_id="r2", param="page_number"),
        RateLimited("Slow", retry_after=4.0, status_code=429, request_id="r3"),
    ],
)
def test_api_errors_survive_pickling_with_their_attributes(exc):
    restored = pickle.loads(pickle.dumps(exc))  # noqa: S301  (our own bytes)
    assert type(restored) is type(exc)
    assert str(restored) == str(exc)
    for name in ("message", "status_code", "code", "request_id", "param"):
        assert getattr(restored, name) == getattr(exc, name)
    assert getattr(restored, "retry_after", None) == getattr(exc, "retry_after", None)
    assert restored.response is None


def test_a_pickled_error_from_a_real_answer_drops_the_response(api, make_client):
    api.script("/orders/page", page_of(1, 5, 0))
    api.script("/orders/lookup", error(404, "resource_missing", "No such order."))
    client = make_client()
    client.fetch_page("orders", 1, 5)
    with pytest.raises(OrdersAPIError) as caught:
        client.lookup_order("or_x")
    data = pickle.dumps(caught.value)
    assert_key_absent(repr(data), "pickle")
    restored = pickle.loads(data)  # noqa: S301  (our own bytes)
    assert restored.code == "resource_missing" and restored.response is None


# --- Django's error reports print the local variables of every frame ---------------------------


def test_client_frames_hide_the_key_in_error_reports():
    exc = raised_by(lambda: OrdersClient(api_key=KEY, base_url="not a url"))
    report = error_report(exc)
    assert "base_url must be an absolute" in report  # the report really shows this frame
    assert "api_key" in report  # ...and its locals, with the key's value cleansed
    assert KEY not in report


def test_from_settings_frames_hide_the_key_in_error_reports(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE}
    exc = raised_by(lambda: OrdersClient.from_settings(timeout=None))
    report = error_report(exc)
    assert "timeout is required" in report
    assert KEY not in report


def test_settings_frames_hide_the_key_in_error_reports(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY + " trailing", "BASE_URL": BASE}
    exc = raised_by(lambda: orders_settings.API_KEY)
    report = error_report(exc)
    assert 'DJANGO_ORDERS["API_KEY"] must be the complete key' in report
    assert KEY not in report
