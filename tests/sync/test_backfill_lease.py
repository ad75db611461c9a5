"""A backfill holds a lease of its own (``orders:backfill``): the scheduled sync walks, reads the
feed and refreshes beside it. Every write made under a lease (the feed's watermark, search
settlements, the backfill's checkpoint, as the pages already did) checks the holder in its
transaction, so a run paused past its lease writes nothing once another run took it over."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_orders.client.transport import new_client
from django_orders.exceptions import SyncAlreadyRunning
from django_orders.mirror.resources import resource_for
from django_orders.models import Order, SyncCheckpoint, SyncLease, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import backfill, feed
from django_orders.sync.lease import Lease, LeaseLost
from django_orders.sync.settling import FeedOutcome, decide, stored_watermark

pytestmark = pytest.mark.django_db(transaction=True)

BACKFILL_LEASE = "orders:backfill"
NEW_HOLDER = "other-host:1:new"
#: The settlements of the window's 10 orders: one statement text, run once an order.
UPDATE_SETTLED = '10 times: UPDATE "django_orders_order" SET "search_updated_at" = %s'


def take_over(resource: str) -> None:
    """Another run takes the lease, as after this one paused past its expiry."""
    SyncLease.objects.filter(resource=resource).update(
        owner=NEW_HOLDER, expires_at=timezone.now() + timedelta(hours=1)
    )


def test_the_scheduled_sync_runs_beside_a_backfill_and_spares_its_run(history):
    beside: list[SyncRun] = []
    refused: list[str] = []

    def during_the_backfill(run: SyncRun) -> None:
        if beside:
            return
        backfilling = SyncRun.objects.get(pk=run.pk)
        assert backfilling.outcome == SyncRun.Outcome.RUNNING
        assert SyncLease.objects.get(resource=BACKFILL_LEASE).owner == backfilling.host
        beside.append(sync_orders())  # the cron sync, while the backfill holds its lease
        try:
            sync_orders(backfill=True)
        except SyncAlreadyRunning as exc:
            refused.append(str(exc))
        # The sync's clean-up of abandoned runs left the live backfill's run alone.
        assert SyncRun.objects.get(pk=run.pk).outcome == SyncRun.Outcome.RUNNING

    run = sync_orders(backfill=True, progress=during_the_backfill)
    (scheduled,) = beside
    assert scheduled.outcome == SyncRun.Outcome.SUCCEEDED
    assert scheduled.pages == 2  # the window walk, done beside the backfill
    assert scheduled.index_freshness == "current" and scheduled.watermark_after is not None
    (message,) = refused  # a second backfill is refused while the first holds its lease
    assert message.startswith(f"A sync of {BACKFILL_LEASE} is already running (lease held by ")
    assert run.host in message
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 60
    # The scheduled run began last: the next read starts from its watermark, and its read went
    # back to the one the fixture's walk left, so nothing changed since is skipped.
    assert stored_watermark("orders") == scheduled.watermark_after
    assert scheduled.watermark_before is not None


def test_a_backfill_whose_holder_died_is_closed_by_the_next_sync(history):
    dead = Lease(BACKFILL_LEASE, duration=timedelta(seconds=1))
    dead.acquire(now=timezone.now() - timedelta(minutes=5))  # expired long ago
    stranded = SyncRun.objects.create(resource="orders", host=dead.owner, page_size=5)
    assert sync_orders().outcome == SyncRun.Outcome.SUCCEEDED
    stranded.refresh_from_db()
    # Its lease expired: the sync closes it (no live holder), and a backfill can start.
    assert stranded.outcome == SyncRun.Outcome.FAILED
    assert sync_orders(backfill=True).outcome == SyncRun.Outcome.SUCCEEDED


def test_a_backfill_paused_past_its_lease_moves_no_checkpoint(history, monkeypatch):
    made: list[int] = []
    pipeline = backfill.Pipeline

    def pausing(*args, checkpoint, **kwargs):
        def paused_before_the_second(answer):
            made.append(SyncCheckpoint.objects.get(resource="orders").done)
            if len(made) == 2:
                take_over(BACKFILL_LEASE)  # paused past its lease, then writes its checkpoint
            checkpoint(answer)

        return pipeline(*args, checkpoint=paused_before_the_second, **kwargs)

    monkeypatch.setattr(backfill, "Pipeline", pausing)
    with pytest.raises(LeaseLost) as lost:
        sync_orders(backfill=True)
    assert "paused_before_the_second" in [entry.name for entry in lost.traceback]
    point = SyncCheckpoint.objects.get(resource="orders")
    # The first answer's checkpoint landed; the second, written after the takeover, did not.
    assert made == [0, 8] and point.done == 8
    failed = SyncRun.objects.order_by("-started_at", "-id").first()
    assert failed.outcome == SyncRun.Outcome.FAILED and "LeaseLost" in failed.error
    assert failed.feed_read == 8
    assert SyncLease.objects.get(resource=BACKFILL_LEASE).owner == NEW_HOLDER


def test_a_sync_paused_past_its_lease_leaves_the_watermark_alone(history, monkeypatch):
    first = sync_orders()  # nothing changed since: the next feed read looks nothing up
    original = feed._read

    def read_then_pause(*args, **kwargs):
        original(*args, **kwargs)
        take_over("orders")

    monkeypatch.setattr(feed, "_read", read_then_pause)
    with pytest.raises(LeaseLost):
        sync_orders()
    late = SyncRun.objects.order_by("-started_at", "-id").first()
    assert late.pk != first.pk and late.outcome == SyncRun.Outcome.FAILED
    assert late.watermark_after is None  # refused in its transaction
    assert stored_watermark("orders") == first.watermark_after


@pytest.mark.parametrize("holds", [True, False], ids=["holder", "paused-past-its-lease"])
def test_search_settlements_are_written_only_by_the_holder(history, holds):
    kind = resource_for("orders")
    with new_client() as client:
        results = client.search("orders", page_size=100).results
    lease = Lease("orders")
    lease.acquire()
    if not holds:
        take_over("orders")
    outcome = FeedOutcome(watermark_before=None, began=timezone.now())
    floor = timezone.now() - timedelta(days=3650)

    def settle() -> None:
        decide(kind, outcome, results, floor, {}, set(), None, lease=lease, compare=True)

    with CaptureQueriesContext(connection) as captured:
        if holds:
            settle()
        else:
            with pytest.raises(LeaseLost):
                settle()
    settled = Order.objects.filter(search_updated_at__isnull=False).count()
    # The window's 10 orders are held as search shows them: settled without a lookup.
    assert settled == (10 if holds else 0)
    statements = [q["sql"] for q in captured.captured_queries]
    (renewal,) = [n for n, sql in enumerate(statements) if "django_orders_synclease" in sql]
    after = [sql.split(" WHERE ")[0] for sql in statements[renewal + 1 :]]
    if not holds:
        # Refused at the renewal, before any order row is touched.
        assert not [sql for sql in after if "django_orders_order" in sql], after
    elif connection.vendor == "postgresql":
        # Locked in key order first, as page writes lock theirs: no deadlock beside a backfill.
        assert statements[renewal + 1].endswith('ORDER BY "id" FOR UPDATE')
        assert after == ['SELECT "id" FROM "django_orders_order"', UPDATE_SETTLED, "COMMIT"]
    else:
        assert after == [UPDATE_SETTLED, "COMMIT"], after


def test_a_first_feed_read_beside_a_backfill_leaves_the_watermark_to_it(
    sandbox, orders_settings_for, sleeps
):
    # No walk before: the feed has no watermark yet, as on a shop just installed.
    orders_settings_for(sandbox, PAGE_SIZE=5, MAX_PAGE_NUMBER=2, SEARCH_PAGE_SIZE=8, MAX_RETRIES=1)
    sandbox.seed(60, seed=5)
    beside: list[SyncRun] = []
    changed: list[str] = []

    def during_the_backfill(run: SyncRun) -> None:
        if run.feed_read < 24 or beside:
            return
        # An order past the window that the backfill has already read changes, and then the
        # cron sync reads the feed for the first time.
        window = set(Order.objects.order_by("-initiated_at").values_list("pk", flat=True)[:10])
        # One still open, so that canceling it is a move forward the mirror takes.
        passed = (
            Order.objects.exclude(pk__in=window)
            .filter(status="requires_payment")
            .order_by("initiated_at")
            .first()
        )
        assert passed is not None
        sandbox.store.set_order_status(passed.pk, "canceled")
        changed.append(passed.pk)
        beside.append(sync_orders())

    run = sync_orders(backfill=True, progress=during_the_backfill)
    (scheduled,) = beside
    assert scheduled.outcome == SyncRun.Outcome.SUCCEEDED
    assert scheduled.watermark_after is None  # not "now": that would pass over the change
    assert stored_watermark("orders") == run.watermark_after < scheduled.started_at
    after = sync_orders()  # the feed goes on from when the backfill began
    assert after.watermark_before == run.watermark_after
    assert Order.objects.get(pk=changed[0]).status == "canceled"
