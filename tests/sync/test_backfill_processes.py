"""Real processes on PostgreSQL: while ``sync_orders --backfill`` of 3,000 orders runs at 20 ms a
request, the scheduled ``sync_orders`` beside it exits 0 after its window walk and feed read, and
the backfill ends with the whole history mirrored."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from django_orders.models import Order, SyncRun
from django_orders.sync.settling import stored_watermark

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL"),
]

ORDERS = 3_000
#: A bound on the waits, not a measurement.
PATIENCE = 120


def _backfill_run() -> SyncRun | None:
    return SyncRun.objects.filter(end_reason="backfill").order_by("-started_at").first()


def test_the_scheduled_sync_runs_beside_a_backfill_of_3000_orders(sandbox_factory, run_manage):
    sandbox = sandbox_factory(latency_ms=20)
    sandbox.seed(ORDERS, seed=11)
    backfilling = run_manage("sync_orders", "--backfill", server=sandbox, background=True)
    try:
        end = time.monotonic() + PATIENCE
        while (_backfill_run() is None or _backfill_run().feed_read == 0) and (
            time.monotonic() < end and backfilling.poll() is None
        ):
            time.sleep(0.1)
        assert backfilling.poll() is None, backfilling.communicate()
        scheduled = run_manage("sync_orders", server=sandbox)
        assert scheduled.returncode == 0, scheduled.stdout + scheduled.stderr
        out, err = backfilling.communicate(timeout=PATIENCE)
    finally:
        if backfilling.poll() is None:
            backfilling.kill()
            backfilling.communicate()
    assert backfilling.returncode == 0, out + err
    backfill = _backfill_run()
    cron = SyncRun.objects.exclude(pk=backfill.pk).get()
    # The scheduled run began and ended while the backfill was running.
    assert backfill.started_at < cron.started_at < cron.finished_at < backfill.finished_at
    assert cron.outcome == backfill.outcome == SyncRun.Outcome.SUCCEEDED
    assert cron.pages == 10  # the whole window walked (10 pages of 100)
    # Its feed read was the first: the backfill leaves the first watermark, as of its start.
    assert cron.index_freshness == "current" and cron.watermark_after is None
    assert "a backfill of orders is under way" in cron.warning
    assert backfill.feed_read == ORDERS
    assert backfill.watermark_after is not None and backfill.watermark_after < cron.started_at
    assert stored_watermark("orders") == backfill.watermark_after
    assert Order.objects.count() == ORDERS
