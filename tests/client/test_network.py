"""Network failures split in two: surely not sent, or outcome unknown."""

from __future__ import annotations

import pytest
import requests
import urllib3.exceptions

from django_orders.exceptions import OrdersNetworkError, OutcomeUnknown, RequestNotSent
from tests.fixtures.http import KEY

CREATE = {"request_meta": {"idempotency_key": "idem-net"}, "line_items": []}


def refused() -> requests.exceptions.ConnectionError:
    reason = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 111] Connection refused"
    )
    return requests.exceptions.ConnectionError(
        urllib3.exceptions.MaxRetryError(None, "/orders/page", reason)
    )


def unresolvable() -> requests.exceptions.ConnectionError:
    reason = urllib3.exceptions.NameResolutionError("api.orders.test", None, OSError("no name"))
    return requests.exceptions.ConnectionError(
        urllib3.exceptions.MaxRetryError(None, "/orders/page", reason)
    )


def dropped() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError(
        urllib3.exceptions.ProtocolError(
            "Connection aborted.", ConnectionResetError(104, "Connection reset by peer")
        )
    )


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(requests.exceptions.ConnectTimeout("connect timed out"), id="connect-timeout"),
        pytest.param(refused(), id="refused"),
        pytest.param(unresolvable(), id="dns"),
        pytest.param(requests.exceptions.ConnectionError("Connection refused"), id="refused-text"),
        pytest.param(requests.exceptions.SSLError("handshake failed"), id="tls-handshake"),
    ],
)
def test_failures_before_sending_are_request_not_sent(api, make_client, failure):
    api.script("/orders/page", failure)
    with pytest.raises(RequestNotSent) as caught:
        make_client(max_retries=0).fetch_page("orders", 1, 5)
    assert caught.value.may_have_reached_server is False
    assert str(caught.value).startswith("POST /orders/page: could not connect (")
    assert caught.value.__cause__ is None  # requests' exception (holding the request) not chained


@pytest.mark.parametrize(
    ("failure", "is_timeout"),
    [
        pytest.param(requests.exceptions.ReadTimeout("read timed out"), True, id="read-timeout"),
        pytest.param(dropped(), False, id="reset-after-send"),
        pytest.param(
            requests.exceptions.ConnectionError(
                urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionError("x"))
            ),
            False,
            id="aborted",
        ),
        pytest.param(requests.exceptions.ChunkedEncodingError("truncated"), False, id="truncated"),
        pytest.param(requests.exceptions.ConnectionError("something odd"), False, id="unclear"),
    ],
)
def test_failures_after_sending_are_outcome_unknown(api, make_client, failure, is_timeout):
    api.script("/orders/page", failure)
    with pytest.raises(OutcomeUnknown) as caught:
        make_client(max_retries=0).fetch_page("orders", 1, 5)
    assert caught.value.may_have_reached_server is True
    assert caught.value.is_timeout is is_timeout
    assert isinstance(caught.value, OrdersNetworkError)


# --- real loopback sockets ----------------------------------------------------------------------


def test_a_closed_port_is_request_not_sent(make_client, closed_port_url):
    client = make_client(base_url=closed_port_url, max_retries=0)
    with pytest.raises(RequestNotSent) as caught:
        client.fetch_page("orders", 1, 5)
    assert "Connection refused" in str(caught.value)
    # Where, in the operator's terms; not our internal connection class (nor an object's id).
    port = closed_port_url.rsplit(":", 1)[1]
    assert f"could not connect (127.0.0.1:{port}: Failed to establish" in str(caught.value)
    assert "_Tracked" not in str(caught.value) and "Connection(" not in str(caught.value)


def test_a_connection_closed_after_the_request_is_outcome_unknown(make_client, raw_server):
    server = raw_server("close")
    client = make_client(base_url=server.url, max_retries=0)
    with pytest.raises(OutcomeUnknown) as caught:
        client.create_order(CREATE)
    assert caught.value.is_timeout is False
    # The request did reach the server, with the exact header on the wire.
    assert len(server.requests) == 1
    head = server.requests[0].split(b"\r\n\r\n")[0].decode()
    assert f"\r\nAuthorization: Bearer {KEY}\r\n" in head + "\r\n"
    assert head.startswith("POST /orders/create HTTP/1.1")


def test_no_answer_within_the_read_timeout_is_outcome_unknown(make_client, raw_server):
    server = raw_server("hang")
    client = make_client(base_url=server.url, max_retries=0, timeout=(2, 0.2))
    with pytest.raises(OutcomeUnknown) as caught:
        client.fetch_page("orders", 1, 5)
    assert caught.value.is_timeout is True
    assert "read timeout" in str(caught.value)
    assert len(server.requests) == 1


def test_a_dropped_create_is_resent_with_the_same_bytes_only_as_often_as_allowed(
    make_client, raw_server, sleeps
):
    server = raw_server("close")
    client = make_client(base_url=server.url, max_retries=2)
    with pytest.raises(OutcomeUnknown):
        client.create_order(CREATE)
    # One send plus two retries, each a fresh connection: urllib3 added none of its own.
    assert len(server.requests) == 3
    bodies = {r.split(b"\r\n\r\n", 1)[1] for r in server.requests}
    assert len(bodies) == 1
    assert len(sleeps) == 2
