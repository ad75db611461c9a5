"""The payment watches served by the change feed (``WATCH_FEED_INTERVAL``, issue 50 item 2):
one ``/orders/search`` an interval ends every watch whose order changed, with one lookup each;
the watches' own steps look nothing up while the feed is trusted, and poll again when it is
not (stale, not current, dated ahead, a read that leads nowhere); the sync's watermark is never
touched. Against the sandbox over loopback HTTP, with a backend that records what is enqueued.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from django_orders.models import Order, PaymentWatch, PaymentWatchFeed
from django_orders.services import read_watch_feed, sync_orders, watch_due_payments
from django_orders.sync.payment_watch import FEED_TRUST, WATCH_FEED, WATCH_SPAN, watch_pause
from django_orders.sync.settling import stored_watermark
from django_orders.tasks import watch_payment

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL = timedelta(seconds=15)


@pytest.fixture
def watched(new_order, enqueued, settings):
    """``n`` new orders with WATCH_PAYMENTS on (their watch rows written with them), the
    enqueued first steps forgotten: the tests run the sweep and the steps themselves."""

    def create(n: int) -> list[Order]:
        settings.DJANGO_ORDERS = {
            **settings.DJANGO_ORDERS,
            "WATCH_PAYMENTS": True,
            "WATCH_FEED_INTERVAL": INTERVAL,
        }
        orders = [new_order() for _ in range(n)]
        enqueued.clear()
        return orders

    return create


def lookups(paths: list[str]) -> int:
    return paths.count("/orders/lookup")


def test_one_search_ends_every_paid_watch_with_one_lookup_each(watched, live_orders, sandbox_paths):
    """The issue's figure in one process: 20 watched checkouts, 15 paid: one search, 15
    lookups, 1.0 lookup per paid checkout; the unpaid watches are not looked up."""
    orders = watched(20)
    paid = orders[:15]
    for order in paid:
        live_orders.pay_order(order.pk)
    sandbox_paths.clear()

    sweep = watch_due_payments()

    assert sweep.feed is not None
    assert (sweep.feed.searches, sweep.feed.changed, sweep.feed.ended) == (1, 15, 15)
    assert sweep.feed.problem == ""
    assert sweep.claimed == 0  # no watch's own step was due yet
    assert lookups(sandbox_paths) == 15
    assert sandbox_paths.count("/orders/search") == 1
    assert set(Order.objects.filter(status="paid").values_list("pk", flat=True)) == {
        order.pk for order in paid
    }
    ended = PaymentWatch.objects.filter(finished_at__isnull=False)
    assert set(ended.values_list("pk", "lookups", "end_reason")) == {
        (order.pk, 1, "status") for order in paid
    }
    assert PaymentWatch.objects.filter(finished_at__isnull=True, lookups=0).count() == 5


def test_while_the_feed_is_trusted_a_step_looks_nothing_up_and_is_not_counted(
    watched, enqueued, sandbox_paths
):
    [order] = watched(1)
    read_watch_feed()  # current: the feed serves the watches
    sandbox_paths.clear()
    before = timezone.now()

    result = watch_payment.call(order.pk)

    assert (result["ran"], result["served"], result["status"]) == (True, True, "requires_payment")
    assert lookups(sandbox_paths) == 0
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert (watch.lookups, watch.steps, watch.finished_at) == (0, 1, None)
    assert watch.next_lookup_at >= before + watch_pause(1)  # served steps back off too
    [following] = enqueued
    assert following.kwargs == {"step": 1}
    # A duplicate (or redelivered) task of the step just run finds nothing to take.
    assert watch_payment.call(order.pk, step=0)["ran"] is False
    assert PaymentWatch.objects.get(pk=order.pk).steps == 1
    assert len(enqueued) == 1


def test_served_steps_end_at_the_watch_deadline(watched, sandbox_paths):
    [order] = watched(1)
    read_watch_feed()
    PaymentWatch.objects.filter(pk=order.pk).update(started_at=timezone.now() - WATCH_SPAN)

    result = watch_payment.call(order.pk)

    assert (result["served"], result["ended_by"]) == (True, "deadline")
    assert lookups(sandbox_paths) == 0


def test_a_changed_order_whose_lookup_fails_is_read_again_and_looked_up_next_time(
    watched, live_orders, sandbox_paths
):
    """The feed saw the payment, the lookup failed: the read is complete only to before that
    change, so the next read finds it again and looks it up, and its own steps meanwhile stay
    served (they must not be the only way left to see it)."""
    [order] = watched(1)
    live_orders.pay_order(order.pk)
    live_orders.add_fault("error_before_write", "/orders/lookup", times=1)

    first = read_watch_feed()

    assert (first.problem, first.changed, first.ended) == ("", 1, 0)
    feed = PaymentWatchFeed.objects.get(pk=WATCH_FEED)
    paid_at = datetime.fromisoformat(live_orders.updated_at("orders", order.pk))
    assert feed.covered_to < paid_at
    PaymentWatchFeed.objects.filter(pk=WATCH_FEED).update(
        read_at=timezone.now() - INTERVAL - timedelta(seconds=1)
    )
    sandbox_paths.clear()

    second = read_watch_feed()

    assert (second.changed, second.ended, lookups(sandbox_paths)) == (1, 1, 1)
    assert Order.objects.get(pk=order.pk).status == "paid"
    assert PaymentWatchFeed.objects.get(pk=WATCH_FEED).covered_to >= paid_at


def test_a_feed_that_breaks_never_stops_the_sweep(watched, monkeypatch):
    """Anything the feed's read raises (here a bug; a naive date, a lost connection) is logged
    and recorded, the row released, and the sweep still runs the due steps."""
    from django_orders.sync import payment_watch

    [order] = watched(1)
    PaymentWatch.objects.filter(pk=order.pk).update(
        next_lookup_at=timezone.now() - timedelta(minutes=1)
    )

    def broken(*args, **kwargs):
        raise RuntimeError("not expected")

    monkeypatch.setattr(payment_watch, "_search_ended", broken)

    sweep = watch_due_payments()

    assert "RuntimeError: not expected" in sweep.feed.problem
    assert sweep.claimed == 1  # the due step ran, polling
    feed = PaymentWatchFeed.objects.get(pk=WATCH_FEED)
    assert (feed.freshness, feed.claimed_until) == ("unavailable", None)
    assert PaymentWatch.objects.get(pk=order.pk).lookups == 1


def test_a_stale_feed_hands_the_watches_back_to_their_lookups(watched, sandbox_paths):
    [order] = watched(1)
    read_watch_feed()
    PaymentWatchFeed.objects.filter(pk=WATCH_FEED).update(
        read_at=timezone.now() - FEED_TRUST * INTERVAL - timedelta(seconds=1)
    )
    sandbox_paths.clear()

    result = watch_payment.call(order.pk)

    assert (result["served"], lookups(sandbox_paths)) == (False, 1)
    assert PaymentWatch.objects.get(pk=order.pk).lookups == 1


@pytest.mark.parametrize(
    ("switches", "said"),
    [
        ({"lag_seconds": 120}, "the search index is delayed, not current"),
        ({"state": "partial"}, "the search index is partial, not current"),
        ({"state": "unavailable", "error": True}, "the search index could not be read"),
    ],
)
def test_an_index_that_is_not_current_is_not_used_and_the_watches_poll(
    watched, live_orders, sandbox_paths, switches, said
):
    [order] = watched(1)
    live_orders.pay_order(order.pk)
    live_orders.configure_search(**switches)
    sandbox_paths.clear()

    read = read_watch_feed()

    assert said in read.problem
    assert (read.changed, lookups(sandbox_paths)) == (0, 0)  # nothing of the read is used
    feed = PaymentWatchFeed.objects.get(pk=WATCH_FEED)
    assert feed.freshness != "current" and said in feed.problem
    result = watch_payment.call(order.pk)  # the watch polls, and sees the payment
    assert (result["served"], result["ended_by"], lookups(sandbox_paths)) == (False, "status", 1)


def test_a_read_that_leads_nowhere_or_is_dated_ahead_never_stalls_or_blinds_the_watches(
    watched, live_orders, sandbox_paths, settings
):
    [order] = watched(1)
    live_orders.pay_order(order.pk)
    live_orders.add_fault("search_repeat_cursor", "/orders/search", times=None)
    sandbox_paths.clear()

    read = read_watch_feed()

    assert "could not be read" in read.problem and "the read would never end" in read.problem
    assert sandbox_paths.count("/orders/search") <= 2 and lookups(sandbox_paths) == 0
    live_orders.faults.clear()
    live_orders.add_fault("search_future_freshness", "/orders/search", seconds=86400)
    PaymentWatchFeed.objects.filter(pk=WATCH_FEED).update(read_at=None)

    read = read_watch_feed()

    assert "ahead of this shop's clock" in read.problem
    assert read.changed == 0
    assert PaymentWatchFeed.objects.get(pk=WATCH_FEED).freshness == "unknown"
    assert watch_payment.call(order.pk)["ended_by"] == "status"  # polled: mirrored as paid


def test_the_feed_never_moves_the_syncs_watermark(watched, live_orders):
    [order] = watched(1)
    sync_orders()
    watermark = stored_watermark("orders")
    assert watermark is not None
    live_orders.pay_order(order.pk)

    assert read_watch_feed().ended == 1

    assert stored_watermark("orders") == watermark


def test_one_read_an_interval_whatever_the_number_of_sweeps(watched, sandbox_paths):
    watched(2)
    sandbox_paths.clear()

    first, second = watch_due_payments(), watch_due_payments()

    assert (first.feed.searches, second.feed.searches) == (1, 0)
    PaymentWatchFeed.objects.filter(pk=WATCH_FEED).update(
        read_at=timezone.now() - INTERVAL - timedelta(seconds=1)
    )
    assert watch_due_payments().feed.searches == 1
    # another sweep reading now holds the row: this one leaves it
    PaymentWatchFeed.objects.filter(pk=WATCH_FEED).update(
        read_at=None, claimed_until=timezone.now() + timedelta(minutes=1)
    )
    assert watch_due_payments().feed.searches == 0


def test_nothing_watched_or_the_feed_off_sends_no_search(watched, live_orders, settings):
    assert read_watch_feed().searches == 0  # no watch at all
    [order] = watched(1)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_FEED_INTERVAL": None}
    live_orders.pay_order(order.pk)

    assert read_watch_feed().searches == 0
    assert not PaymentWatchFeed.objects.exists()
    assert watch_payment.call(order.pk)["ended_by"] == "status"  # polled


def test_an_order_the_mirror_already_holds_paid_is_not_looked_up_again(
    watched, live_orders, sandbox_paths
):
    """The sync's feed (or the return page) stored the payment first: the index and the mirror
    agree, so the watch feed looks nothing up; the watch's next step ends it from the mirror."""
    [order] = watched(1)
    live_orders.pay_order(order.pk)
    sync_orders()
    assert Order.objects.get(pk=order.pk).status == "paid"
    sandbox_paths.clear()

    read = read_watch_feed()

    assert (read.searches, read.changed, lookups(sandbox_paths)) == (1, 0, 0)
    assert watch_payment.call(order.pk)["ended_by"] == "status"
    assert lookups(sandbox_paths) == 0
