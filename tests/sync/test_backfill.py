"""``sync_orders --backfill``: the whole history through the search index, resumable from its
checkpoint, leaving the change feed's watermark."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import OutputWrapper

from django_orders.management.commands.sync_orders import ProgressDisplay
from django_orders.models import Order, SyncCheckpoint, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import backfill
from django_orders.sync.backfill import BATCH

pytestmark = pytest.mark.django_db(transaction=True)

LOOKUP = "/orders/lookup"
SEARCHED = "/orders/search"


def test_a_backfill_mirrors_the_whole_history_and_leaves_the_watermark(history, sandbox_paths):
    run = sync_orders(backfill=True)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 60
    # The window's orders are held as search shows them: only the other 50 are looked up.
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == run.created == 50
    assert sandbox_paths.count(SEARCHED) == 8  # 60 results, 8 an answer
    assert (run.feed_read, run.service_total, run.service_total_exact) == (60, 60, True)
    assert run.watermark_after is not None and run.index_freshness == "current"
    assert not SyncCheckpoint.objects.exists()
    sandbox_paths.clear()
    after = sync_orders()  # the feed goes on from the backfill's watermark: nothing to do
    assert after.watermark_before == run.watermark_after
    assert sandbox_paths.count(LOOKUP) == 0


def _killed_after(monkeypatch, lookups: int) -> None:
    """The backfill stops (as on Ctrl-C) when it stores its ``lookups``-th lookup: the batch
    that reaches it is stored up to it, then the run is interrupted."""
    original = backfill.store_batch
    stored: list[str] = []

    def store(batch, *args, **kwargs):
        room = lookups - len(stored)
        if room <= 0:
            raise KeyboardInterrupt
        stored.extend(lookup.order_id for lookup in batch[:room])
        original(batch[:room], *args, **kwargs)
        if room < len(batch):
            raise KeyboardInterrupt

    monkeypatch.setattr(backfill, "store_batch", store)


@pytest.mark.parametrize("expire", [False, True], ids=["cursor-kept", "cursor-expired"])
def test_a_killed_backfill_goes_on_from_its_checkpoint(history, sandbox_paths, monkeypatch, expire):
    original = backfill.store_batch
    _killed_after(monkeypatch, 20)
    with pytest.raises(KeyboardInterrupt):
        sync_orders(backfill=True)
    killed = SyncRun.objects.order_by("-started_at", "-id").first()
    assert (killed.outcome, killed.error) == (
        SyncRun.Outcome.FAILED,
        "KeyboardInterrupt: interrupted",
    )
    point = SyncCheckpoint.objects.get(resource="orders")
    assert point.done > 0 and point.cursor
    assert Order.objects.count() == 10 + 20
    killed_lookups = sandbox_paths.count(LOOKUP)
    searches_before = sandbox_paths.count(SEARCHED)
    monkeypatch.setattr(backfill, "store_batch", original)
    if expire:
        history.expire_search_cursors()  # the rerun reads from the top, skipping what is settled
    run = sync_orders(backfill=True)  # no wait: the killed run released its lease
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 60
    assert run.feed_read == 60 + (point.done if expire else 0)
    # The 20 stored before the kill are settled, whatever the checkpoint says: the rerun looks
    # up exactly the other 30. Sent twice: only what the killed run had found but not stored
    # (its batch, and the lookups in flight).
    assert sandbox_paths.count(LOOKUP) - killed_lookups == 30
    assert 20 <= killed_lookups <= 20 + BATCH + 8
    resumed_searches = sandbox_paths.count(SEARCHED) - searches_before
    assert resumed_searches == (1 + 8 if expire else 8 - point.done // 8)
    assert not SyncCheckpoint.objects.exists()


def test_the_command_shows_done_and_the_services_count(history):
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_orders", "--backfill", "-v", "2", stdout=out, stderr=err)
    text = out.getvalue()
    assert "orders backfill: 8 / 60 done, " in text  # after the first answer
    assert "Backfilled orders: 60 / 60 done, 50 looked up (50 new, 0 changed, 0 unchanged)" in text
    assert "service: 60 orders; mirror: 60." in text
    assert history.api_key not in text + err.getvalue()


def test_a_backfill_of_a_resource_without_search_is_refused_naming_it(history):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(Exception, match="balance_transactions"):
        call_command(
            "sync_orders",
            "--backfill",
            "--resource",
            "balance_transactions",
            stdout=out,
            stderr=err,
        )


def test_off_a_terminal_progress_shows_every_tenth_answer_at_verbosity_1():
    """A backfill of millions reads tens of thousands of answers: a cron log gets the first
    and every tenth, as a walk's pages; -v 2 gets each one."""
    shown = {}
    for verbosity in (1, 2):
        out = io.StringIO()
        display = ProgressDisplay(OutputWrapper(out), verbosity)
        for answer in range(1, 22):
            display(SyncRun(resource="orders", end_reason="backfill", feed_read=answer * 100))
        shown[verbosity] = [
            line.split(": ")[1].split(" /")[0] for line in out.getvalue().split("\n") if line
        ]
    assert shown[1] == ["100", "1,100", "2,100"]
    assert len(shown[2]) == 21
