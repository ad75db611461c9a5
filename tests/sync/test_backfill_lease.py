"""A backfill holds a lease of its own (``orders:backfill``): the scheduled sync walks, reads the
feed and refreshes beside it. Every write made under a lease (the feed's watermark, search
settlements, the backfill's checkpoint, as the pages already did) checks the holder in its
transaction, so a run paused past its lease writes nothing once another run took it over."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.client.transport import new_client
from django_orders.exceptions import SyncAlreadyRunning
from django_orders.mirror.resources import resource_for
from django_orders.models import Order, SyncCheckpoint, SyncLease, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import backfill, feed
from django_orders.sync.feed_rules import FeedOutcome, decide, stored_watermark
from django_orders.sync.lease import Lease, LeaseLost

pytestmark = pytest.mark.django_db(transaction=True)

BACKFILL_LEASE = "orders:backfill"
NEW_HOLDER = "other-host:1:new"


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
    # The watermark never moves back: the next read starts from the later of the two.
    assert stored_watermark("orders") == max(run.watermark_after, scheduled.watermark_after)


def test_a_backfill_whose_holder_died_is_closed_by_the_next_backfill(history):
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

    if holds:
        settle()
    else:
        with pytest.raises(LeaseLost):
            settle()
    settled = Order.objects.filter(search_updated_at__isnull=False).count()
    # The window's 10 orders are held as search shows them: settled without a lookup.
    assert settled == (10 if holds else 0)
