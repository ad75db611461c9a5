"""The provider's page window, and refreshing what it hides by lookup."""

from __future__ import annotations

import logging

import pytest
from django.utils import timezone

from django_orders.exceptions import AuthenticationFailed, RequestRejected
from django_orders.mirror.parsing import parse_order
from django_orders.mirror.store import store_orders
from django_orders.models import TERMINAL_STATUSES, Order, RemoteRecord, SyncRun
from django_orders.services import refresh_orders, sync_orders
from django_orders.signals import order_status_changed
from tests.fixtures.http import BASE, error_body
from tests.fixtures.mirror import assert_mirror_matches, page_of_records

pytestmark = pytest.mark.django_db(transaction=True)


def rejection(code: str, message: str, param: str) -> dict:
    body = error_body(code, message)
    body["error"]["param"] = param
    return body


def push_out_of_window(server, count=100):
    """Orders created upstream push the ones already mirrored past page 10 (size 10)."""
    server.store.insert_orders(count, server.clock.timestamp())


def waiting_queue():
    """Non-terminal mirrored orders in the order the refresh takes them."""
    return list(
        Order.objects.exclude(status__in=TERMINAL_STATUSES)
        .order_by("initiated_at", "id")
        .values_list("id", flat=True)
    )


@pytest.mark.parametrize("max_page_number", [10, None])
def test_the_window_ends_the_walk_without_failing(capped, orders_settings_for, max_page_number):
    """With the setting at 10 the walk stops there; without it, the sandbox's 400 ends it."""
    orders_settings_for(capped, PAGE_SIZE=10, MAX_PAGE_NUMBER=max_page_number)
    capped.seed(150)
    run = sync_orders(refresh_limit=0)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.pages, run.seen, run.end_reason) == (10, 100, "page_window")
    assert set(Order.objects.values_list("id", flat=True)) == set(
        capped.store.newest_order_ids(100)
    )


def test_non_terminal_orders_outside_the_window_are_refreshed_oldest_first(
    capped, orders_settings_for
):
    # The refresh the change feed replaces when it can be trusted: the feed is off here.
    orders_settings_for(capped, PAGE_SIZE=10, MAX_PAGE_NUMBER=10, CHANGE_FEED=False)
    capped.seed(60)
    sync_orders()
    assert_mirror_matches(capped)
    queue = waiting_queue()
    assert len(queue) > 10
    # The five oldest waiting orders change upstream, then leave the window.
    for order_id in queue[:5]:
        capped.store.set_order_status(order_id, "paid", "2026-07-01T00:00:00Z")
    push_out_of_window(capped)
    changes = []
    order_status_changed.connect(lambda **kw: changes.append(kw["order"].id), weak=False)
    try:
        run = sync_orders(refresh_limit=5)
    finally:
        order_status_changed.receivers.clear()
    assert run.end_reason == "page_window"
    assert run.refreshed == 5
    assert run.refresh_waiting == len(queue) - 5
    assert sorted(changes) == sorted(queue[:5])
    for order in Order.objects.filter(pk__in=queue[:5]):
        assert order.status == "paid"
        assert order.refreshed_at is not None
    assert not Order.objects.filter(pk__in=queue[5:], refreshed_at__isnull=False).exists()

    # The next run takes the next five (never refreshed first), not the same five again.
    second = sync_orders(refresh_limit=5)
    refreshed_now = set(
        Order.objects.filter(refreshed_at__gte=second.started_at).values_list("id", flat=True)
    )
    assert refreshed_now == set(queue[5:10])
    assert second.refresh_waiting == len(queue) - 5 - 5


def test_an_order_unknown_upstream_is_reported_not_fatal(capped):
    capped.seed(5)
    ghost = parse_order(
        {
            "id": "or_gone",
            "status": "requires_payment",
            "initiated_at": "2025-01-01T00:00:00Z",
            "customer": {"id": "cu_gone", "guest": True, "name": "Ghost"},
        }
    )
    store_orders([ghost])
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.refreshed == 0
    gone = Order.objects.get(pk="or_gone")
    assert gone.status == "requires_payment"  # nothing deleted or changed
    assert gone.refreshed_at is not None  # but it went to the back of the queue

    result = refresh_orders(["or_gone", capped.store.newest_order_ids(1)[0]])
    assert result.missing == ["or_gone"]
    assert (result.refreshed, result.unchanged) == (1, 1)


def test_orders_unknown_upstream_make_one_warning_a_run(capped, caplog):
    """Each unknown order is logged at INFO; the run warns once, with the count and some ids."""
    capped.seed(5)
    ghosts = [
        parse_order(
            {
                "id": f"or_gone{n}",
                "status": "requires_payment",
                "initiated_at": f"2025-01-0{n + 1}T00:00:00Z",
                "customer": {"id": f"cu_gone{n}", "guest": True, "name": "Ghost"},
            }
        )
        for n in range(7)
    ]
    store_orders(ghosts)
    with caplog.at_level(logging.INFO, logger="django_orders.sync"):
        run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "7 order(s) of the refresh queue are unknown to the service (404) and were left as they "
        "are, at the back of the queue: or_gone0, or_gone1, or_gone2, or_gone3, or_gone4 "
        "and 2 more"
    ]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("unknown to the service (404)" in message for message in infos) == 7
    assert Order.objects.filter(pk__startswith="or_gone", refreshed_at__isnull=False).count() == 7


def test_refresh_orders_stores_each_lookup(capped):
    capped.seed(20)
    ids = capped.store.newest_order_ids(3)
    before = timezone.now()
    result = refresh_orders([*ids, ids[0]])  # a repeated id is looked up once
    assert (result.refreshed, result.created, result.missing) == (3, 3, [])
    for order in Order.objects.all():
        assert order.refreshed_at >= before
    capped.store.set_order_status(ids[1], "canceled", "2026-08-01T00:00:00Z")
    result = refresh_orders(ids)
    assert (result.updated, result.unchanged) == (1, 2)
    assert Order.objects.get(pk=ids[1]).status == "canceled"


def test_refresh_orders_propagates_an_auth_failure(capped, orders_settings_for):
    capped.seed(2)
    orders_settings_for(capped, API_KEY="sk_test_wrong_key")
    with pytest.raises(AuthenticationFailed):
        refresh_orders(capped.store.newest_order_ids(1))
    assert Order.objects.count() == 0


def test_a_page_number_400_past_page_one_ends_the_walk(mocked_walk):
    url = BASE + "/disputes/page"
    mocked_walk.post(url, json=page_of_records(1, 2, "disputes", ["dp_1", "dp_2"]))
    mocked_walk.post(
        url,
        status=400,
        json=rejection("parameter_invalid", "page_number 2 is past the window.", "page_number"),
    )
    run = sync_orders(resource="disputes", collection="disputes")
    assert (run.outcome, run.end_reason, run.seen) == (SyncRun.Outcome.SUCCEEDED, "page_window", 2)


def test_a_page_size_400_past_page_one_fails_the_walk(mocked_walk):
    url = BASE + "/disputes/page"
    mocked_walk.post(url, json=page_of_records(1, 2, "disputes", ["dp_1", "dp_2"]))
    mocked_walk.post(
        url,
        status=400,
        json=rejection("parameter_invalid", "page_size 2 invalid at page_number 2", "page_size"),
    )
    with pytest.raises(RequestRejected):
        sync_orders(resource="disputes", collection="disputes")
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.FAILED and "page_size" in run.error
    assert RemoteRecord.objects.count() == 2  # page 1 stays written
