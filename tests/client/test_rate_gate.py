"""A 429 to one client of a lookup pool holds every client that shares its gate."""

from __future__ import annotations

import pytest

from django_orders.client.rate_gate import RateGate

from .conftest import error, ok, page_of


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_hold_lasts_its_seconds_and_only_grows(clock):
    gate = RateGate(clock)
    assert gate.remaining() == 0.0
    gate.hold(3)
    gate.hold(1)  # a shorter hold does not cut the longer one short
    assert gate.remaining() == 3.0
    clock.now += 2
    assert gate.remaining() == 1.0
    clock.now += 5
    assert gate.remaining() == 0.0


def test_wait_sleeps_out_the_hold_once(clock):
    gate = RateGate(clock)
    slept: list[float] = []
    assert gate.wait(slept.append) == 0.0
    gate.hold(2.5)
    assert gate.wait(slept.append) == 2.5
    assert slept == [2.5]


def rate_limited(retry_after: str):
    return error(429, "rate_limited", "Slow down.", **{"Retry-After": retry_after})


def test_a_429_to_one_client_holds_the_other(api, make_client, clock):
    """Client A is told to wait 3 s; B, sharing the gate, waits before its first request."""
    gate = RateGate(clock)
    a_slept: list[float] = []
    b_slept: list[float] = []
    a = make_client(gate=gate, sleep=a_slept.append)
    b = make_client(gate=gate, sleep=b_slept.append)
    api.script("/orders/page", rate_limited("3"), page_of(1, 5, 1), page_of(1, 5, 2))
    assert len(a.fetch_page("orders", 1, 5).records) == 1
    assert a_slept == [3.0]  # A waited at the gate, not on its own
    # The clock did not move (the sleeps were recorded, not slept): the hold still stands.
    assert len(b.fetch_page("orders", 1, 5).records) == 2
    assert b_slept == [3.0]
    assert len(api.sent) == 3


def test_the_hold_counts_against_max_retries(api, make_client, clock):
    from django_orders.exceptions import RateLimited

    gate = RateGate(clock)
    slept: list[float] = []
    client = make_client(gate=gate, sleep=slept.append, max_retries=2)
    api.script("/orders/page", *[rate_limited("1") for _ in range(3)])
    with pytest.raises(RateLimited):
        client.fetch_page("orders", 1, 5)
    assert len(api.sent) == 3  # 1 + max_retries
    assert slept == [1.0, 1.0]


def test_server_errors_are_not_shared(api, make_client, clock, sleeps):
    """A 5xx is one client's trouble: it backs off alone and the gate stays open."""
    gate = RateGate(clock)
    client = make_client(gate=gate)
    api.script("/orders/lookup", error(503, "busy", "Busy."), ok({"order": {"id": "or_1"}}))
    assert client.lookup_order("or_1") == {"id": "or_1"}
    assert len(sleeps) == 1
    assert gate.remaining() == 0.0


def test_without_a_gate_a_429_is_the_clients_own_wait(api, make_client, sleeps):
    api.script("/orders/page", rate_limited("2"), page_of(1, 5, 0))
    make_client().fetch_page("orders", 1, 5)
    assert sleeps == [2.0]
