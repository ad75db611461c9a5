"""The sandbox's distance and load: latency on every answer, and a rate limit answering 429."""

from __future__ import annotations

import argparse

import pytest

from django_orders.testing.sandbox import pacing as pacing_module
from django_orders.testing.sandbox.cli import add_arguments, build_server
from django_orders.testing.sandbox.pacing import Pacing

from .conftest import error_of


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_holds_one_seconds_worth_and_refills():
    clock = FakeClock()
    pacing = Pacing(rate_limit=2, clock=clock)
    assert [pacing.admit(), pacing.admit()] == [None, None]
    assert pacing.admit() == 1  # Retry-After in whole seconds, never 0
    clock.now += 0.5  # half a second refills one request
    assert pacing.admit() is None
    assert pacing.admit() == 1
    clock.now += 60  # never more than one second's worth saved up
    assert [pacing.admit(), pacing.admit(), pacing.admit()] == [None, None, 1]
    assert pacing.rate_limited == 3


def test_a_slow_limit_asks_for_a_longer_wait():
    clock = FakeClock()
    pacing = Pacing(rate_limit=0.25, clock=clock)  # one request every four seconds
    # The bucket starts with one second's worth (a quarter of a request): three seconds short.
    assert pacing.admit() == 3
    clock.now += 3
    assert pacing.admit() is None


def test_no_limit_admits_everything():
    pacing = Pacing()
    assert all(pacing.admit() is None for _ in range(1000))
    assert pacing.rate_limited == 0


def test_latency_sleeps_in_the_handlers_thread(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(pacing_module.time, "sleep", slept.append)
    Pacing(latency_ms=50).delay()
    Pacing().delay()
    assert slept == [0.05]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"latency_ms": -1}, "latency_ms"),
        ({"latency_ms": float("inf")}, "latency_ms"),
        ({"rate_limit": 0}, "rate_limit"),
        ({"rate_limit": float("nan")}, "rate_limit"),
    ],
)
def test_bad_settings_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        Pacing(**options)


def test_over_the_limit_the_sandbox_answers_429_with_retry_after(sandbox_factory, tmp_path):
    from .conftest import Api

    server = sandbox_factory(db_path=tmp_path / "limited.sqlite3", rate_limit=2)
    api = Api(server)
    statuses = [api.page(page_number=1, page_size=5).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    limited = api.page(page_number=1, page_size=5)
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "1"
    assert error_of(limited)["code"] == "rate_limited"
    assert server.app.pacing.rate_limited == 2
    api.session.close()


def test_peak_in_flight_counts_answers_at_once(api, sandbox):
    for _ in range(3):
        assert api.page(page_number=1, page_size=5).status_code == 200
    assert sandbox.app.pacing.peak_in_flight == 1  # one after the other
    assert sandbox.app.pacing.in_flight == 0


def test_the_cli_options(tmp_path):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args(
        ["--port", "0", "--db", str(tmp_path / "cli.sqlite3"), "--latency-ms", "25"]
    )
    assert options.rate_limit is None
    server = build_server(options)
    try:
        assert server.app.pacing.latency == 0.025
        assert server.app.pacing.rate_limit is None
    finally:
        server.stop()
    options = parser.parse_args(
        ["--port", "0", "--db", str(tmp_path / "cli2.sqlite3"), "--rate-limit", "100"]
    )
    server = build_server(options)
    try:
        assert (server.app.pacing.latency, server.app.pacing.rate_limit) == (0.0, 100.0)
    finally:
        server.stop()


def test_a_pools_connections_wait_in_the_backlog_while_the_sandbox_is_busy(tmp_path):
    """A lookup pool opens its connections at once. While the sandbox's accepting thread lags
    (here: not started), they wait in the listen backlog; past ``socketserver``'s default of 5,
    a connection would be dropped and retried a second later by its client."""
    import socket

    from django_orders.testing.sandbox.server import SandboxServer

    server = SandboxServer(db_path=tmp_path / "backlog.sqlite3")  # listening, not accepting
    connections = []
    try:
        for _ in range(16):  # twice the default REFRESH_CONCURRENCY
            connection = socket.socket()
            connections.append(connection)
            connection.settimeout(0.5)
            connection.connect((server.host, server.port))  # times out if dropped
    finally:
        for connection in connections:
            connection.close()
        server.stop()
