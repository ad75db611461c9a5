"""Retry counts and waits (sleep is injected and recorded, never real)."""

from __future__ import annotations

import pytest
import requests

from django_orders.client import transport as client_module
from django_orders.client.transport import BACKOFF_BASE, BACKOFF_CAP, MAX_RETRY_AFTER
from django_orders.exceptions import (
    OrdersAPIError,
    OutcomeUnknown,
    RateLimited,
    RequestNotSent,
    ServerError,
)

from .conftest import error, ok, page_of

ORDER = {"id": "or_1", "status": "requires_payment"}
CREATE = {"request_meta": {"idempotency_key": "idem-retry"}, "finalize": True, "line_items": []}


class TopOfRange:
    """Stands in for ``random`` so each wait is the top of its jitter range (exact numbers)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, low: float, high: float) -> float:
        self.ranges.append((low, high))
        return high


@pytest.fixture
def top_of_range(monkeypatch):
    fake = TopOfRange()
    monkeypatch.setattr(client_module, "random", fake)
    return fake


def server_errors(n: int) -> list:
    return [error(503, "service_unavailable", "Busy.") for _ in range(n)]


def test_page_reads_retry_5xx_with_capped_exponential_backoff(
    api, make_client, sleeps, top_of_range
):
    api.script("/orders/page", *server_errors(6), page_of(1, 5, 2))
    page = make_client(max_retries=6).fetch_page("orders", 1, 5)
    assert len(page.records) == 2
    assert len(api.sent) == 7
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]  # doubles from BACKOFF_BASE, capped
    # "Equal jitter": each wait is drawn from the upper half of its ceiling.
    assert top_of_range.ranges == [(c / 2, c) for c in sleeps]
    assert (BACKOFF_BASE, BACKOFF_CAP) == (0.5, 8.0)


def test_jittered_waits_stay_within_their_range(api, make_client, sleeps):
    api.script("/orders/page", *server_errors(3), page_of(1, 5, 0))
    make_client(max_retries=3).fetch_page("orders", 1, 5)
    ceilings = [0.5, 1.0, 2.0]
    assert len(sleeps) == 3
    for wait, ceiling in zip(sleeps, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling


def test_page_reads_give_up_after_max_retries(api, make_client, sleeps):
    api.script("/orders/page", *server_errors(4))
    with pytest.raises(ServerError):
        make_client(max_retries=3).fetch_page("orders", 1, 5)
    assert len(api.sent) == 4  # 1 + MAX_RETRIES
    assert len(sleeps) == 3


def test_max_retries_zero_sends_once(api, make_client, sleeps):
    api.script("/orders/page", *server_errors(1))
    with pytest.raises(ServerError):
        make_client(max_retries=0).fetch_page("orders", 1, 5)
    assert len(api.sent) == 1 and sleeps == []


@pytest.mark.parametrize(
    "failure",
    [
        requests.exceptions.ConnectTimeout("connect"),
        requests.exceptions.ReadTimeout("read"),
        requests.exceptions.ConnectionError("Connection reset by peer"),
    ],
)
def test_page_reads_and_lookups_retry_network_errors(api, make_client, sleeps, failure):
    api.script("/orders/page", failure, page_of(1, 5, 1))
    api.script("/orders/lookup", failure, ok({"order": ORDER}))
    client = make_client()
    assert len(client.fetch_page("orders", 1, 5).records) == 1
    assert client.lookup_order("or_1") == ORDER
    assert len(api.sent) == 4 and len(sleeps) == 2


def test_retry_after_is_honoured_instead_of_the_backoff(api, make_client, sleeps):
    api.script(
        "/orders/page",
        error(429, "rate_limited", "Slow down.", **{"Retry-After": "3"}),
        error(429, "rate_limited", "Slow down.", **{"Retry-After": "0"}),
        error(429, "rate_limited", "Slow down."),  # no header: the backoff for attempt 2
        page_of(1, 5, 0),
    )
    make_client().fetch_page("orders", 1, 5)
    assert sleeps[:2] == [3.0, 0.0]
    assert 1.0 <= sleeps[2] <= 2.0


def test_retry_after_up_to_the_bound_is_waited_for(api, make_client, sleeps):
    api.script(
        "/orders/page",
        error(429, "rate_limited", "Slow down.", **{"Retry-After": str(int(MAX_RETRY_AFTER))}),
        page_of(1, 5, 0),
    )
    make_client().fetch_page("orders", 1, 5)
    assert sleeps == [MAX_RETRY_AFTER]


def test_a_retry_after_beyond_the_bound_is_raised_not_waited_for(api, make_client, sleeps):
    api.script(
        "/orders/page",
        error(429, "rate_limited", "Come back later.", **{"Retry-After": "3600"}),
    )
    with pytest.raises(RateLimited) as caught:
        make_client().fetch_page("orders", 1, 5)
    assert caught.value.retry_after == 3600.0
    assert len(api.sent) == 1 and sleeps == []


@pytest.mark.parametrize(
    "answer",
    [
        error(400, "parameter_invalid", "No."),
        error(401, "unauthorized", "No."),
        error(404, "resource_missing", "No."),
        error(409, "idempotency_key_in_progress", "Wait."),
        error(422, "idempotency_key_conflict", "No."),
    ],
)
def test_definitive_answers_are_not_retried(api, make_client, sleeps, answer):
    api.script("/orders/page", answer)
    api.script("/orders/create", answer)
    client = make_client()
    with pytest.raises(OrdersAPIError):
        client.fetch_page("orders", 1, 5)
    with pytest.raises(OrdersAPIError):
        client.create_order(CREATE)
    assert len(api.sent) == 2 and sleeps == []


# --- creates ---------------------------------------------------------------------------------


def test_a_create_is_retried_only_with_the_identical_body(api, make_client, sleeps):
    api.script(
        "/orders/create",
        error(503, "service_unavailable", "Busy."),
        error(429, "rate_limited", "Slow down.", **{"Retry-After": "1"}),
        requests.exceptions.ConnectionError("Connection reset by peer"),
        requests.exceptions.ConnectTimeout("connect"),
        ok({"order": ORDER}),
    )
    assert make_client(max_retries=4).create_order(CREATE) == ORDER
    assert len(api.sent) == 5
    assert len({s.body for s in api.sent}) == 1  # byte for byte the same every time
    keys = {s.json["request_meta"]["idempotency_key"] for s in api.sent}
    assert keys == {"idem-retry"}
    assert len(sleeps) == 4 and sleeps[1] == 1.0


def test_a_create_is_never_resent_after_a_read_timeout(api, make_client, sleeps):
    api.script("/orders/create", requests.exceptions.ReadTimeout("read"), ok({"order": ORDER}))
    with pytest.raises(OutcomeUnknown) as caught:
        make_client().create_order(CREATE)
    assert caught.value.is_timeout
    assert len(api.sent) == 1 and sleeps == []


def test_a_create_gives_up_after_max_retries_with_the_last_error(api, make_client, sleeps):
    api.script("/orders/create", *[requests.exceptions.ConnectTimeout("c")] * 3)
    with pytest.raises(RequestNotSent):
        make_client(max_retries=2).create_order(CREATE)
    assert len(api.sent) == 3 and len(sleeps) == 2


def test_retries_are_logged_with_the_request_id(api, make_client, caplog):
    caplog.set_level("WARNING", logger="django_orders")
    api.script(
        "/orders/page", error(502, "bad_gateway", "Oops.", request_id="req_r1"), page_of(1, 5, 0)
    )
    make_client().fetch_page("orders", 1, 5)
    (record,) = [r for r in caplog.records if r.name == "django_orders.client"]
    assert "retry 1 of 3" in record.getMessage()
    assert "req_r1" in record.getMessage()
