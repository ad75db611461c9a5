"""The change feed and the backfill against a search index that misbehaves, end to end over
loopback HTTP (the sandbox's ``search_*`` faults): a cursor that leads nowhere, an answer dated
in the future, a record dated in the future, an unreadable answer. Each ends as an index the
sync cannot trust for the run (or one record's date set aside), never as a run that does not
end, a watermark in 2100 or a failed run."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from health_check.exceptions import ServiceWarning

from django_orders.client.transport import OrdersClient
from django_orders.conf.table import CLOCK_SKEW
from django_orders.health import SearchIndexFreshness
from django_orders.models import Order, Refund, SyncCheckpoint, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import backfill
from django_orders.sync.lease import Lease
from tests.sync.test_backfill import _killed_after
from tests.sync.test_change_feed import (
    LOOKUP,
    SEARCHED,
    _refund_upstream,
    feed,
    moment,
    outside_window,
    paid_outside,
)

pytestmark = pytest.mark.django_db(transaction=True)

#: How far ahead the faults date an answer: a provider host whose clock says 2100.
FUTURE = 75 * 365 * 24 * 3600
#: A fault that a sync on the old code would have followed this many times before moving on.
MANY = 40

__all__ = ["feed"]  # the fixture, shared with test_change_feed


def last_run() -> SyncRun:
    return SyncRun.objects.order_by("-started_at", "-id").first()


def watermark() -> object:
    return (
        SyncRun.objects.filter(watermark_after__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("watermark_after", flat=True)
        .first()
    )


def sync_command(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_orders", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def health_failure():
    try:
        SearchIndexFreshness().run()
    except ServiceWarning as exc:
        return exc
    return None


@pytest.fixture
def renewals(monkeypatch) -> list[str]:
    """Every renewal of a sync lease, by the lease's name."""
    renewed: list[str] = []
    original = Lease.renew

    def renew(self, *args, **kwargs):
        renewed.append(self.resource)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Lease, "renew", renew)
    return renewed


# --- 1. a search answer that repeats its cursor ---------------------------------------------


def test_a_repeating_cursor_ends_the_feed_as_an_index_it_cannot_trust(feed, sandbox_paths):
    before = watermark()
    opened = outside_window(feed, "requires_payment")[0]
    feed.pay_order(opened)
    feed.add_fault("search_repeat_cursor", SEARCHED, times=MANY)
    sandbox_paths.clear()
    text = sync_command()  # exit 0: no CommandError
    run = last_run()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert sandbox_paths.count(SEARCHED) == 1  # not one search more
    assert run.warning.startswith(
        "the search index could not be trusted: POST /orders/search answered has_more with "
        "no record (next cursor '"
    )
    assert "'): the read would never end (HTTP 200, request id req_" in run.warning
    assert run.warning.endswith("the watermark is kept and open orders are refreshed by lookup")
    assert run.warning in text
    assert (run.index_freshness, run.watermark_before, run.watermark_after) == (
        "unavailable",
        before,
        before,
    )
    assert run.refreshed > 0
    assert Order.objects.get(pk=opened).status == "paid"  # through the open-order refresh


def test_a_cursor_given_again_after_real_answers_ends_the_feed(feed, sandbox_paths, monkeypatch):
    """The first answer is the index's own; from the second on, the cursor it gave is answered
    with itself: the read stops at the second answer."""
    for order_id in outside_window(feed, "requires_payment")[:6]:
        feed.pay_order(order_id)
    original = OrdersClient.search
    cursors: list[str] = []

    def from_the_second(self, resource, **kwargs):
        if kwargs.get("cursor") and len(cursors) < MANY:
            cursors.append(kwargs["cursor"])
            feed.add_fault("search_repeat_cursor", SEARCHED, times=1)
        return original(self, resource, **kwargs)

    monkeypatch.setattr(OrdersClient, "search", from_the_second)
    sandbox_paths.clear()
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert sandbox_paths.count(SEARCHED) == len(cursors) + 1 == 2
    assert f"gave the cursor {cursors[0][:60]!r}"[:-1] in run.warning
    assert "already followed in this read: the read would never end" in run.warning
    assert run.watermark_after == run.watermark_before
    assert run.refreshed > 0


def test_a_repeating_cursor_fails_the_backfill_naming_it_and_a_rerun_stops_there(
    history, sandbox_paths, monkeypatch, renewals
):
    """Killed once (a checkpoint with a cursor), then rerun against a provider that answers
    that cursor with itself: exit 1 naming it, the checkpoint as it was, the lease never
    renewed by the read; the same again on a rerun; once the provider behaves, it finishes."""
    original = backfill.store_batch
    _killed_after(monkeypatch, 20)
    with pytest.raises(KeyboardInterrupt):
        sync_orders(backfill=True)
    monkeypatch.setattr(backfill, "store_batch", original)
    point = SyncCheckpoint.objects.get(resource="orders")
    assert point.cursor and point.done > 0
    history.add_fault("search_repeat_cursor", SEARCHED, times=MANY)
    for _rerun in range(2):
        sandbox_paths.clear()
        renewals.clear()
        with pytest.raises(CommandError) as caught:
            sync_command("--backfill")
        assert caught.value.returncode == 1
        message = str(caught.value)
        assert message.startswith("Sync failed: POST /orders/search gave the cursor ")
        assert point.cursor[:60] in message
        assert "already followed in this read: the read would never end" in message
        assert sandbox_paths.count(SEARCHED) == 1
        assert renewals == []  # no progress, no renewal
        again = SyncCheckpoint.objects.get(resource="orders")
        assert (again.cursor, again.done) == (point.cursor, point.done)
        assert last_run().outcome == SyncRun.Outcome.FAILED
    history.faults.clear()
    run = sync_orders(backfill=True)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 60
    assert not SyncCheckpoint.objects.exists()


# --- 2. a search answer dated in the future -------------------------------------------------


def test_one_answer_dated_in_the_future_never_moves_the_watermark_there(feed):
    before = watermark()
    feed.add_fault("search_future_freshness", SEARCHED, seconds=FUTURE)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.index_freshness == "unknown"
    assert run.warning.startswith("the search index dated its freshness 21")
    assert run.warning.endswith(
        "UTC, ahead of this shop's clock: the watermark is kept and open orders are refreshed "
        "by lookup"
    )
    assert run.watermark_before == run.watermark_after == before
    assert run.refreshed > 0
    assert health_failure() is None

    # The provider's clock is right again: an order outside the window paid since is read.
    paid = outside_window(feed, "requires_payment")[0]
    feed.pay_order(paid)
    later = sync_orders()
    assert (later.index_freshness, later.warning) == ("current", "")
    assert later.watermark_before == before
    assert before < later.watermark_after <= timezone.now() + CLOCK_SKEW
    assert (later.feed_lookups, later.refreshed) == (1, 0)
    assert Order.objects.get(pk=paid).status == "paid"


def test_a_watermark_left_in_the_future_is_pulled_back_and_what_changed_meanwhile_is_read(
    feed, sandbox_paths
):
    """As a run before the fix left it: the watermark in 2100. The next run reads back to the
    last watermark before it, looks up what changed since, and leaves one no later than now."""
    sane = watermark()
    now = timezone.now()
    SyncRun.objects.create(
        resource="orders",
        outcome=SyncRun.Outcome.SUCCEEDED,
        started_at=now,
        finished_at=now,
        watermark_before=sane,
        watermark_after=now + timedelta(seconds=FUTURE),
        index_freshness="current",
    )
    failed = health_failure()
    assert isinstance(failed, ServiceWarning)
    assert "lies ahead of this shop's clock" in failed.message
    assert "Run manage.py sync_orders (it pulls the watermark back to now" in failed.message
    changed = outside_window(feed, "requires_payment")[:2]
    for order_id in changed:
        feed.pay_order(order_id)
    sandbox_paths.clear()
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.warning.startswith("the stored watermark (21")
    assert (
        "UTC) lay ahead of this shop's clock, left by a search answer dated in the future: "
        f"pulled back to now, this read going back to {sane:%Y-%m-%d %H:%M:%S} UTC"
    ) in run.warning
    assert run.watermark_before == sane
    assert sane < run.watermark_after <= timezone.now() + CLOCK_SKEW
    assert run.feed_lookups == 2
    assert set(Order.objects.filter(pk__in=changed).values_list("status", flat=True)) == {"paid"}
    assert run.refreshed > 0  # once more, in case
    assert health_failure() is None


def test_a_record_dated_in_the_future_has_its_date_set_aside_not_the_index(feed):
    ahead, other = outside_window(feed, "requires_payment")[:2]
    feed.pay_order(other)
    feed.pay_order(ahead)  # the newest change: the first result, which the fault dates ahead
    feed.add_fault("search_future_record", SEARCHED, seconds=FUTURE)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.index_freshness, run.warning) == ("current", "")
    assert run.watermark_before < run.watermark_after <= timezone.now() + CLOCK_SKEW
    assert run.skipped == 1
    assert run.problems.startswith(
        f"search result for order {ahead}: InvalidRecord: its search updated_at 21"
    )
    assert "lies ahead of this shop's clock" in run.problems
    assert run.problems.endswith("UTC): looked up without it")
    assert run.feed_lookups == 2
    assert set(Order.objects.filter(pk__in=[ahead, other]).values_list("status", flat=True)) == {
        "paid"
    }
    stamped = Order.objects.get(pk=ahead).search_updated_at
    assert stamped is not None and stamped <= timezone.now() + CLOCK_SKEW
    # Its next change is seen: the mirror was not told it holds a version from 2100.
    feed.set_order_status(ahead, "completed")
    again = sync_orders()
    assert again.skipped == 0
    assert Order.objects.get(pk=ahead).status == "completed"
    assert Order.objects.get(pk=ahead).search_updated_at == moment(feed.updated_at("orders", ahead))


def test_a_backfill_begun_with_an_answer_dated_in_the_future_keeps_the_watermark(history):
    watermark_before = watermark()  # the fixture's sync read the feed
    history.add_fault("search_future_freshness", SEARCHED, seconds=FUTURE)
    run = sync_orders(backfill=True)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 60
    assert run.index_freshness == "unknown"
    assert run.watermark_after == run.watermark_before == watermark_before
    assert run.warning == (
        "the search index was unknown when the backfill began: the feed's watermark is kept"
    )


# --- 4. an unreadable search answer ---------------------------------------------------------


def test_an_unreadable_search_answer_is_an_untrusted_index_and_the_refreshes_run(
    feed, sandbox_paths
):
    refunded = paid_outside(feed, 1)[0]
    refund = _refund_upstream(feed, refunded)
    sync_orders()  # the feed finds the refund: mirrored pending
    assert Refund.objects.get(pk=refund["id"]).status == "pending"
    feed.settle_refund(refund["id"])
    before = watermark()
    opened = outside_window(feed, "requires_payment")[0]
    feed.pay_order(opened)
    feed.add_fault("search_unreadable", SEARCHED, times=None)
    sandbox_paths.clear()
    text = sync_command()  # exit 0
    run = last_run()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.warning.startswith(
        "the search index could not be trusted: POST /orders/search answered a search that "
        "breaks the contract"
    )
    assert "the watermark is kept and open orders are refreshed by lookup" in run.warning
    assert run.warning[:60] in text
    assert (run.index_freshness, run.watermark_after) == ("unavailable", before)
    assert run.pages > 0  # the window walk ran
    assert run.refreshed > 0
    assert Order.objects.get(pk=opened).status == "paid"
    assert sandbox_paths.count(LOOKUP) >= run.refreshed
    # And the refresh of open refunds, after the feed.
    assert run.refunds_refreshed == 1
    assert Refund.objects.get(pk=refund["id"]).status == "succeeded"
