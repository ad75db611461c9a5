"""Network errors are also the matching ``requests`` exceptions (exceptions.py, "Transport").

Raised through the client: scripted failures of requests (``responses``) and real ones over
loopback (a closed port, a server that drops the connection or never answers).
"""

from __future__ import annotations

import pickle

import pytest
import requests

from django_orders.exceptions import (
    AnswerTimedOut,
    ConnectionLost,
    ConnectTimedOut,
    CouldNotConnect,
    OrdersError,
    OrdersNetworkError,
    OutcomeUnknown,
    RequestNotSent,
    error_name,
)
from tests.fixtures.http import assert_key_absent

#: A failure of requests -> the class raised, the requests classes it is also an instance of,
#: and the ones it must not be (a read timeout is no ConnectionError, as in requests).
CASES = [
    (
        requests.exceptions.ConnectionError("[Errno 111] Connection refused"),
        CouldNotConnect,
        (RequestNotSent, requests.ConnectionError),
        (requests.Timeout, OutcomeUnknown),
    ),
    (
        requests.exceptions.ConnectTimeout("connect timed out"),
        ConnectTimedOut,
        (RequestNotSent, requests.ConnectTimeout, requests.ConnectionError, requests.Timeout),
        (requests.ReadTimeout, OutcomeUnknown),
    ),
    (
        requests.exceptions.SSLError("handshake failed"),
        CouldNotConnect,
        (RequestNotSent, requests.ConnectionError),
        (requests.Timeout,),
    ),
    (
        requests.exceptions.ReadTimeout("read timed out"),
        AnswerTimedOut,
        (OutcomeUnknown, requests.ReadTimeout, requests.Timeout),
        (requests.ConnectionError, RequestNotSent),
    ),
    (
        requests.exceptions.ConnectionError("Connection reset by peer"),
        ConnectionLost,
        (OutcomeUnknown, requests.ConnectionError),
        (requests.Timeout, RequestNotSent),
    ),
    (
        requests.exceptions.InvalidHeader("bad header"),
        RequestNotSent,
        (requests.RequestException,),
        (requests.ConnectionError, requests.Timeout),
    ),
    (
        requests.exceptions.ChunkedEncodingError("invalid chunk"),
        OutcomeUnknown,
        (requests.RequestException,),
        (requests.ConnectionError, requests.Timeout),
    ),
]


@pytest.mark.parametrize(("failure", "raised", "also", "not_"), CASES)
def test_each_failure_is_also_the_matching_requests_exception(
    api, make_client, failure, raised, also, not_
):
    api.script("/orders/page", failure)
    with pytest.raises(requests.RequestException) as caught:
        make_client(max_retries=0).fetch_page("orders", 1, 5)
    exc = caught.value
    assert type(exc) is raised
    assert isinstance(exc, OrdersNetworkError) and isinstance(exc, OrdersError)
    for cls in also:
        assert isinstance(exc, cls), cls
    for cls in not_:
        assert not isinstance(exc, cls), cls
    # requests' own attributes are there, and hold no prepared request (it would hold the key).
    assert exc.response is None and exc.request is None
    assert_key_absent(str(exc) + repr(exc), "the error")


def test_except_requests_exception_catches_every_network_error(api, make_client):
    api.script("/orders/page", *(case[0] for case in CASES))
    client = make_client(max_retries=0)
    caught = []
    for _ in CASES:
        try:
            client.fetch_page("orders", 1, 5)
        except requests.RequestException as exc:  # what a user of requests writes
            caught.append(type(exc))
    assert caught == [case[1] for case in CASES]


def test_a_timeout_is_known_as_one(api, make_client):
    api.script(
        "/orders/page",
        requests.exceptions.ReadTimeout("read timed out"),
        requests.exceptions.ConnectionError("Connection reset by peer"),
    )
    client = make_client(max_retries=0)
    with pytest.raises(requests.Timeout) as timeout:
        client.fetch_page("orders", 1, 5)
    with pytest.raises(requests.ConnectionError) as lost:
        client.fetch_page("orders", 1, 5)
    assert timeout.value.is_timeout is True and lost.value.is_timeout is False
    assert timeout.value.may_have_reached_server and lost.value.may_have_reached_server


def test_the_errors_are_recorded_under_their_kind():
    assert error_name(ConnectTimedOut("x")) == "RequestNotSent"
    assert error_name(CouldNotConnect("x")) == "RequestNotSent"
    assert error_name(AnswerTimedOut("x")) == "OutcomeUnknown"
    assert error_name(ConnectionLost("x")) == "OutcomeUnknown"
    assert error_name(ValueError("x")) == "ValueError"


@pytest.mark.parametrize("cls", [CouldNotConnect, ConnectTimedOut, ConnectionLost, AnswerTimedOut])
def test_they_pickle_as_themselves(cls):
    exc = cls("POST /orders/page: something")
    copy = pickle.loads(pickle.dumps(exc))  # noqa: S301  (our own bytes)
    assert type(copy) is cls
    assert str(copy) == str(exc) == "POST /orders/page: something"
    if isinstance(exc, OutcomeUnknown):
        assert copy.is_timeout is exc.is_timeout is (cls is AnswerTimedOut)


# --- over loopback -------------------------------------------------------------------------------


def test_a_refused_connection_is_a_requests_connection_error(make_client, closed_port_url):
    client = make_client(base_url=closed_port_url, max_retries=0)
    with pytest.raises(requests.ConnectionError) as caught:
        client.lookup_order("or_1")
    assert type(caught.value) is CouldNotConnect
    assert not isinstance(caught.value, requests.Timeout)
    assert "could not connect" in str(caught.value)


def test_a_dropped_connection_is_a_requests_connection_error(make_client, raw_server):
    dropped = raw_server("close")
    client = make_client(base_url=dropped.url, max_retries=0)
    with pytest.raises(requests.ConnectionError) as caught:
        client.lookup_order("or_1")
    assert type(caught.value) is ConnectionLost
    assert len(dropped.requests) == 1  # it was sent: the outcome is unknown


def test_no_answer_in_the_read_timeout_is_a_requests_read_timeout(make_client, raw_server):
    hanging = raw_server("hang")
    client = make_client(base_url=hanging.url, max_retries=0, timeout=(2, 0.2))
    with pytest.raises(requests.ReadTimeout) as caught:
        client.lookup_order("or_1")
    assert type(caught.value) is AnswerTimedOut
    assert str(caught.value) == "POST /orders/lookup: no answer within the read timeout"


def test_the_request_deadline_is_a_requests_read_timeout(make_client, raw_server):
    hanging = raw_server("hang")
    client = make_client(base_url=hanging.url, max_retries=0, timeout=(2, 30), deadline=0.3)
    with pytest.raises(requests.Timeout) as caught:
        client.lookup_order("or_1")
    assert type(caught.value) is AnswerTimedOut
    assert "REQUEST_DEADLINE (0.3 s)" in str(caught.value)
    assert not isinstance(caught.value, requests.ConnectionError)
