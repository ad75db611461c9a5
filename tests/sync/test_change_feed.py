"""The change feed of each orders sync, end to end against the sandbox's search index: what
changed outside the page window is looked up, nothing else is, and the watermark moves only as
far as the index is known fresh."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
import requests

from django_orders.client.transport import OrdersClient
from django_orders.models import TERMINAL_STATUSES, Order, OrderEvent, Refund, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.mirror import IN_THREAD

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 10  # PAGE_SIZE 5 x MAX_PAGE_NUMBER 2
SEARCHED = "/orders/search"
LOOKUP = "/orders/lookup"


#: The overlap is short so that a few seconds on the sandbox clock put later changes past it:
#: the sandbox's clock runs ahead of the shop's by what a test advances, and more than
#: ``CLOCK_SKEW`` ahead its answers would be a provider with a wrong clock.
OVERLAP = timedelta(seconds=2)
NARROW = {
    "PAGE_SIZE": 5,
    "MAX_PAGE_NUMBER": 2,
    "SEARCH_PAGE_SIZE": 4,
    "MAX_RETRIES": 1,
    "CHANGE_FEED_OVERLAP": OVERLAP,
}


@pytest.fixture
def feed(sandbox, orders_settings_for, sleeps):
    """50 orders, all mirrored by an install run that walked past the window (it sets the
    first watermark), then a first trusted run through a window of 10 (``WINDOW``), with
    search answers of 4."""
    sandbox.seed(40, seed=3)
    sandbox.insert_orders(10)  # the window's orders; the seeded ones are outside it
    # Later changes are past the overlap behind the first watermark: only they are read.
    sandbox.advance_clock(5)
    orders_settings_for(
        sandbox, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, CHANGE_FEED_OVERLAP=OVERLAP, **IN_THREAD
    )
    first = sync_orders()
    assert first.watermark_before is None and first.watermark_after is not None
    assert Order.objects.count() == 50
    orders_settings_for(sandbox, **NARROW, **IN_THREAD)
    sync_orders()
    return sandbox


def outside_window(sandbox, status: str | None = None) -> list[str]:
    """Mirrored orders the page walk no longer reaches, oldest first."""
    newest = set(sandbox.store.newest_order_ids(WINDOW))
    orders = Order.objects.exclude(pk__in=newest).order_by("initiated_at", "id")
    if status is not None:
        orders = orders.filter(status=status)
    return list(orders.values_list("id", flat=True))


def paid_outside(sandbox, count: int) -> list[str]:
    """``count`` open orders outside the window paid upstream and mirrored as paid."""
    ids = outside_window(sandbox, "requires_payment")[:count]
    for order_id in ids:
        sandbox.pay_order(order_id)
    sync_orders()
    assert set(Order.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"paid"}
    return ids


def upstream_status(sandbox, order_id: str) -> str:
    return sandbox.store.order(order_id)["status"]


def moment(text: str | None) -> datetime:
    assert text is not None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_run_with_nothing_changed_and_a_current_index_looks_nothing_up(feed, sandbox_paths):
    open_outside = Order.objects.filter(pk__in=outside_window(feed)).exclude(
        status__in=TERMINAL_STATUSES
    )
    assert open_outside.exists()  # what the open-order refresh would look up
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert sandbox_paths.count(LOOKUP) == 0
    assert sandbox_paths.count(SEARCHED) == 1  # the first answer already reaches the watermark
    assert (run.index_freshness, run.warning, run.refreshed, run.feed_lookups) == (
        "current",
        "",
        0,
        0,
    )
    assert run.watermark_before < run.watermark_after
    assert (run.service_total, run.service_total_exact, run.mirror_total) == (50, True, 50)


def test_orders_outside_the_window_that_changed_are_looked_up_and_only_they(feed, sandbox_paths):
    """A paid order completed, another refunded (neither status nor amount changes: only
    updated_at shows it), an open one paid; the rest are not looked up."""
    completed = paid_outside(feed, 1)[0]
    refunded = outside_window(feed, "completed")[0]
    newly_paid = outside_window(feed, "requires_payment")[0]
    sandbox_paths.clear()
    feed.set_order_status(completed, "completed")
    refund = _refund_upstream(feed, refunded)
    feed.pay_order(newly_paid)
    last_event = OrderEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    run = sync_orders()
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == 3
    assert Order.objects.get(pk=completed).status == "completed"
    assert Order.objects.get(pk=newly_paid).status == "paid"
    assert Refund.objects.filter(pk=refund["id"], order_id=refunded).exists()
    for order_id in (completed, refunded, newly_paid):
        stored = Order.objects.get(pk=order_id).search_updated_at
        assert stored == moment(feed.updated_at("orders", order_id))
    # The timeline says the feed found them: each status change once, and the refund.
    found = OrderEvent.objects.filter(id__gt=last_event)
    assert set(found.values_list("source", flat=True)) == {OrderEvent.Source.FEED}
    assert sorted(
        found.filter(kind=OrderEvent.Kind.STATUS_CHANGED).values_list("order_id", "to_status")
    ) == sorted([(completed, "completed"), (newly_paid, "paid")])
    assert list(
        found.filter(kind=OrderEvent.Kind.REFUND_STATUS_CHANGED).values_list(
            "order_id", "refund_id"
        )
    ) == [(refunded, refund["id"])]
    sandbox_paths.clear()
    again = sync_orders()  # read again within the overlap: settled, not looked up again
    assert sandbox_paths.count(LOOKUP) == again.feed_lookups == 0


def _refund_upstream(sandbox, order_id: str) -> dict:
    """A refund made outside this shop (the provider's dashboard): one line, 100 minor units."""
    order = sandbox.store.order(order_id)
    line = order["line_item_group"]["line_items"][0]
    body = {
        "order_id": order_id,
        "reason": "item_returned",
        "line_items": [
            {
                "order_line_item_id": line[line["type"]]["id"],
                "refund_amount": {
                    "currency": order["line_item_group"]["total"]["currency"],
                    "value": 100,
                },
            }
        ],
    }
    answer = requests.post(
        sandbox.url + "/refunds/create",
        json=body,
        headers={
            "Authorization": f"Bearer {sandbox.api_key}",
            "Idempotency-Key": str(uuid.uuid4()),
        },
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["refund"]


def test_a_delayed_index_stops_the_watermark_and_a_later_current_run_catches_up(
    feed, sandbox_paths
):
    paid = paid_outside(feed, 1)
    feed.configure_search(lag_seconds=60)
    feed.set_order_status(paid[0], "completed")  # after last_indexed_at: not in the index yet
    delayed = sync_orders()
    assert delayed.outcome == SyncRun.Outcome.SUCCEEDED
    assert delayed.index_freshness == "delayed"
    assert "delayed" in delayed.warning
    changed_at = moment(feed.updated_at("orders", paid[0]))
    assert delayed.watermark_before <= delayed.watermark_after < changed_at
    assert Order.objects.get(pk=paid[0]).status == "paid"  # not seen yet, not skipped either
    assert delayed.refreshed > 0  # the open-order refresh ran: the feed cannot be trusted

    feed.configure_search(state="current")
    current = sync_orders()
    assert (current.index_freshness, current.warning) == ("current", "")
    assert current.watermark_before == delayed.watermark_after
    assert Order.objects.get(pk=paid[0]).status == "completed"
    assert current.refreshed == 0


@pytest.mark.parametrize("error", [False, True], ids=["finds-nothing", "answers-503"])
def test_an_unavailable_index_keeps_the_watermark_and_refreshes_open_orders(feed, error):
    before = SyncRun.objects.filter(watermark_after__isnull=False).first().watermark_after
    feed.configure_search(state="unavailable", error=error)
    opened = outside_window(feed, "requires_payment")[0]
    feed.pay_order(opened)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.index_freshness == "unavailable"
    assert "unavailable" in run.warning or "did not answer" in run.warning
    assert run.watermark_before == run.watermark_after == before
    assert run.feed_lookups == 0
    assert run.refreshed > 0
    assert Order.objects.get(pk=opened).status == "paid"  # through the open-order refresh


def test_an_expired_cursor_reads_again_from_the_top_and_misses_nothing(
    feed, sandbox_paths, monkeypatch
):
    changed = outside_window(feed, "requires_payment")[:6]
    for order_id in changed:
        feed.pay_order(order_id)
    original = OrdersClient.search
    expired: list[str] = []

    def expiring(self, resource, **kwargs):
        if kwargs.get("cursor") and not expired:
            expired.append(kwargs["cursor"])
            feed.expire_search_cursors()
        return original(self, resource, **kwargs)

    monkeypatch.setattr(OrdersClient, "search", expiring)
    run = sync_orders()
    assert expired  # the second answer's request carried a cursor, refused as expired
    assert (run.index_freshness, run.warning) == ("current", "")
    assert set(Order.objects.filter(pk__in=changed).values_list("status", flat=True)) == {"paid"}
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == 6  # each once
    # Read again from the top: the first answer twice, then on to the watermark.
    assert sandbox_paths.count(SEARCHED) == 2 + 2


def test_cursors_that_keep_expiring_leave_the_watermark_and_say_so(feed):
    for order_id in outside_window(feed, "requires_payment")[:6]:
        feed.pay_order(order_id)
    feed.configure_search(cursor_ttl_seconds=0)
    feed.advance_clock(0.01)
    original = OrdersClient.search

    def aging(self, resource, **kwargs):
        feed.advance_clock(1)  # every cursor is older than its lifetime of 0 s
        return original(self, resource, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OrdersClient, "search", aging)
        run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.watermark_after == run.watermark_before
    assert "cursor" in run.warning


def test_orders_tied_on_updated_at_across_answers_are_each_looked_up_once(feed, sandbox_paths):
    tied = outside_window(feed, "requires_payment")[:7]
    for order_id in tied:
        feed.pay_order(order_id)
    same = max(int(moment(feed.updated_at("orders", i)).timestamp() * 1000) for i in tied)
    with feed.store.transaction() as db:
        db.executemany("UPDATE orders SET updated_ms = ? WHERE id = ?", [(same, i) for i in tied])
    run = sync_orders()  # 7 tied results over answers of 4
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == 7
    assert set(Order.objects.filter(pk__in=tied).values_list("status", flat=True)) == {"paid"}


def test_an_order_changed_while_the_feed_is_read_is_seen_by_the_next_run(
    feed, sandbox_paths, monkeypatch
):
    paid = paid_outside(feed, 1)
    for order_id in outside_window(feed, "requires_payment")[:5]:
        feed.pay_order(order_id)
    late = paid[0]
    original = OrdersClient.search

    def changing(self, resource, **kwargs):
        answer = original(self, resource, **kwargs)
        if not kwargs.get("cursor") and upstream_status(feed, late) == "paid":
            feed.set_order_status(late, "completed")  # moves to the front, behind the reader
        return answer

    monkeypatch.setattr(OrdersClient, "search", changing)
    first = sync_orders()
    assert first.feed_lookups == 5
    assert Order.objects.get(pk=late).status == "paid"
    # Not past the change (the same millisecond is possible on a fast machine: the next read
    # goes back to the watermark minus the overlap, inclusive).
    assert first.watermark_after <= moment(feed.updated_at("orders", late))
    monkeypatch.setattr(OrdersClient, "search", original)
    second = sync_orders()
    assert second.feed_lookups == 1
    assert Order.objects.get(pk=late).status == "completed"


def test_with_the_feed_off_the_open_order_refresh_runs_and_no_search_is_made(
    feed, orders_settings_for, sandbox_paths
):
    orders_settings_for(feed, **NARROW, CHANGE_FEED=False, **IN_THREAD)
    run = sync_orders()
    assert sandbox_paths.count(SEARCHED) == 0
    assert run.refreshed > 0
    assert (run.index_freshness, run.watermark_after) == ("", None)
