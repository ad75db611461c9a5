"""Lookups several at a time, against the sandbox over loopback with latency and a rate limit.

The sandbox counts the API requests it is answering at once (``pacing.peak_in_flight``), so the
pool's concurrency is seen from the server side, without timing anything.
"""

from __future__ import annotations

import threading

import pytest

from django_orders.client import lookups
from django_orders.client.lookups import lookup_orders
from django_orders.exceptions import ServerError
from django_orders.models import Order, SyncRun
from django_orders.services import refresh_orders, sync_orders
from tests.fixtures.mirror import IN_THREAD, assert_mirror_matches, store_orders_by_id

pytestmark = pytest.mark.django_db(transaction=True)


def lookup_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("django-orders-lookup")]


@pytest.fixture
def slow(sandbox_factory, orders_settings_for, tmp_path):
    """A sandbox 200 ms away, with orders mirrored by an uncapped walk before the clock starts."""

    def start(concurrency: int, orders: int = 16, **sandbox_options):
        server = sandbox_factory(db_path=tmp_path / "slow.sqlite3", page_cap=None)
        server.seed(orders)
        orders_settings_for(server, PAGE_SIZE=100, REFRESH_CONCURRENCY=concurrency, **IN_THREAD)
        sync_orders()
        pacing = server.app.pacing
        pacing.latency = sandbox_options.get("latency", 0.2)
        pacing.peak_in_flight = 0
        return server

    return start


@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_refresh_keeps_concurrency_lookups_in_flight(slow, concurrency):
    # Half a second an answer: long enough for every worker of a loaded machine to have sent
    # its request before the first answer comes back (at 200 ms one of eight sometimes had not).
    server = slow(concurrency, orders=2 * concurrency, latency=0.5)
    ids = list(Order.objects.values_list("id", flat=True))
    result = refresh_orders(ids)
    assert result.refreshed == len(ids) == 2 * concurrency
    assert server.app.pacing.peak_in_flight == concurrency
    assert Order.objects.filter(refreshed_at__isnull=False).count() == 2 * concurrency
    assert lookup_threads() == []


def test_the_syncs_refresh_runs_through_the_pool(capped, orders_settings_for):
    """Orders pushed out of the page window are refreshed four at a time (the refresh the
    change feed replaces when it can be trusted: off here)."""
    orders_settings_for(
        capped,
        PAGE_SIZE=10,
        MAX_PAGE_NUMBER=10,
        REFRESH_CONCURRENCY=4,
        CHANGE_FEED=False,
        **IN_THREAD,
    )
    capped.seed(60)
    sync_orders()
    capped.store.insert_orders(100, capped.clock.timestamp())
    waiting = Order.objects.exclude(status__in=["paid", "completed", "canceled", "expired"])
    count = waiting.count()
    assert count > 4
    capped.app.pacing.latency = 0.2
    capped.app.pacing.peak_in_flight = 0
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.refreshed == count
    # The page walk is one request at a time; only the refresh can reach four.
    assert capped.app.pacing.peak_in_flight == 4
    assert run.refresh_waiting == 0
    upstream = store_orders_by_id(capped)
    for order in Order.objects.all():
        assert order.raw == upstream[order.id]


def test_a_rate_limit_below_the_pools_pace_is_met_by_backing_off_together(
    sandbox_factory, orders_settings_for, tmp_path
):
    """10 requests a second against 8 in flight: 429s come, the pool waits them out, and every
    order is refreshed within MAX_RETRIES (real waits: about two seconds)."""
    server = sandbox_factory(db_path=tmp_path / "limited.sqlite3", page_cap=None, rate_limit=10)
    server.seed(30)
    orders_settings_for(server, PAGE_SIZE=100, REFRESH_CONCURRENCY=8, MAX_RETRIES=5, **IN_THREAD)
    sync_orders()  # one page request
    result = refresh_orders(list(Order.objects.values_list("id", flat=True)))
    assert result.refreshed == 30
    assert server.app.pacing.rate_limited > 0
    assert_mirror_matches(server)


def test_a_failing_lookup_stops_the_pool_and_raises(slow):
    server = slow(4)
    server.add_fault("error_before_write", path="/orders/lookup", times=None, status=500)
    with pytest.raises(ServerError):
        refresh_orders(list(Order.objects.values_list("id", flat=True)))
    assert lookup_threads() == []


def test_a_heartbeat_while_no_lookup_finishes(slow, monkeypatch):
    slow(2, orders=2, latency=0.5)
    monkeypatch.setattr(lookups, "HEARTBEAT_SECONDS", 0.05)
    beats: list[int] = []
    found = list(
        lookup_orders(Order.objects.values_list("id", flat=True), heartbeat=lambda: beats.append(1))
    )
    assert len(found) == 2 and all(lookup.record for lookup in found)
    assert beats  # 0.5 s of latency, a heartbeat every 0.05 s with nothing finished


def test_unknown_orders_come_back_as_none_and_ids_are_looked_up_once(slow):
    server = slow(4, orders=3, latency=0.0)
    ids = list(Order.objects.values_list("id", flat=True))
    found = {lookup.order_id: lookup.record for lookup in lookup_orders([*ids, ids[0], "or_nope"])}
    assert set(found) == {*ids, "or_nope"}
    assert found["or_nope"] is None
    assert all(found[i]["id"] == i for i in ids)
    assert server.app.pacing.peak_in_flight <= 4


def test_no_ids_start_no_threads():
    assert list(lookup_orders([])) == []
    assert lookup_threads() == []
