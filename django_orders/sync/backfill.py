"""``sync_orders --backfill``: the whole history of a resource through its search index.

The page window hides every record past the newest ``MAX_PAGE_NUMBER x PAGE_SIZE``; search
reaches them all. The backfill reads ``/<resource>/search`` (orders, customers: the registry's
searched resources) newest change first to the end, and looks up every record the mirror lacks
or settled at an older ``updated_at`` (the change feed's rule, ``feed.decide``, without a
floor). After each answer's lookups are stored it saves a checkpoint (``SyncCheckpoint``: the
cursor and what was done), so a killed backfill goes on from there; a cursor refused as expired
makes it read again from the top, and what it already settled costs a search result, not a
lookup. When it finishes it leaves the feed's watermark where its first answer said the index
was fresh, so the next run reads only what changed since.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from ..client.factory import new_client
from ..client.rate_gate import RateGate
from ..client.search_structs import SearchPage
from ..conf import orders_settings
from ..db import app_database
from ..exceptions.wire import RequestRejected
from ..mirror.events import FEED
from ..mirror.resources.registry import Resource
from ..models import SyncCheckpoint, SyncRun
from .feed import (
    RESTARTS,
    FeedOutcome,
    decide,
    feed_values,
    first_answer,
    searched_of,
    stored_watermark,
)
from .lease import Lease
from .lookup_store import store_for_run
from .progress import ProgressCallback

logger = logging.getLogger("django_orders.sync")

__all__ = ["BACKFILL", "run_backfill"]

#: ``SyncRun.end_reason`` of a backfill run.
BACKFILL = "backfill"
_EVER = datetime.min.replace(tzinfo=UTC)


def run_backfill(
    run: SyncRun,
    lease: Lease,
    kind: Resource,
    progress: ProgressCallback | None,
) -> None:
    """Read the whole index into the mirror, from the saved checkpoint if there is one; the
    run's ``feed_read`` and ``service_total`` say how far it is ("done / at least N")."""
    resource = kind.name
    database = app_database()
    point, _ = SyncCheckpoint.objects.using(database).get_or_create(resource=resource)
    outcome = FeedOutcome(watermark_before=stored_watermark(resource))
    run.end_reason = BACKFILL
    run.feed_read, run.feed_lookups = point.done, point.looked_up
    run.service_total, run.service_total_exact = point.total, point.total_exact
    gate = RateGate()
    cursor = point.cursor or None
    restarts = 0
    with new_client(gate=gate) as client:
        while True:
            try:
                page = client.search(
                    resource, page_size=orders_settings.SEARCH_PAGE_SIZE, cursor=cursor
                )
            except RequestRejected as exc:
                if not exc.is_cursor_expired or restarts >= RESTARTS:
                    raise
                restarts += 1
                logger.info("The backfill's cursor expired; reading again from the top")
                cursor = None
                continue
            _first(point, page, kind, outcome)
            outcome.changed.clear()
            # Per answer, so memory stays flat over a history of millions: what an earlier
            # answer settled is in the mirror (search_updated_at), which decide reads.
            decide(kind, outcome, page.results, _EVER, {}, set(), None, compare=True)
            _look_up(kind, run, lease, outcome, gate)
            point.cursor = page.next_cursor or ""
            point.done += len(page.results)
            point.looked_up = run.feed_lookups
            point.save(using=database)
            run.feed_read = point.done
            SyncRun.objects.filter(pk=run.pk).update(
                feed_read=run.feed_read, end_reason=BACKFILL, **_totals(run, point)
            )
            lease.renew()
            if progress is not None:
                progress(run)
            if not page.has_more:
                break
            cursor = page.next_cursor
    _finish(kind, run, point, outcome)


def _first(point: SyncCheckpoint, page: SearchPage, kind: Resource, outcome) -> None:
    """The first answer of a backfill (not of a resumed one) fixes the watermark it leaves."""
    if page.total is not None:
        point.total, point.total_exact = page.total.value, page.total.exact
    if point.index_freshness:
        return
    assert kind.search_type is not None  # searched_of
    probe = FeedOutcome(watermark_before=None)
    first_answer(probe, page, kind.search_type, 0.0)
    point.index_freshness = probe.freshness
    point.watermark = probe.watermark_after


def _totals(run: SyncRun, point: SyncCheckpoint) -> dict[str, object]:
    run.service_total, run.service_total_exact = point.total, point.total_exact
    return {"service_total": point.total, "service_total_exact": point.total_exact}


def _look_up(
    kind: Resource, run: SyncRun, lease: Lease, outcome: FeedOutcome, gate: RateGate
) -> None:
    """The answer's new and changed records, through the lookup pool (one gate with the
    search)."""
    searched = searched_of(kind)
    lookups = searched.look_up(list(outcome.changed), heartbeat=lease.renew, gate=gate)
    for lookup in lookups:
        stamp = searched.stamp(lookup.record_id, outcome.changed[lookup.record_id])
        store_for_run(
            lookup, run, lease, counter="feed_lookups", also=stamp, origin=FEED, kind=kind
        )


def _finish(kind: Resource, run: SyncRun, point: SyncCheckpoint, outcome: FeedOutcome) -> None:
    """Leave the feed's watermark (never moved back) and drop the checkpoint."""
    before = outcome.watermark_before
    after = before
    if point.watermark is not None:
        after = point.watermark if before is None else max(before, point.watermark)
    run.watermark_before, run.watermark_after = before, after
    run.index_freshness = point.index_freshness
    if point.index_freshness not in ("current", "delayed") or point.watermark is None:
        run.warning = (
            f"the search index was {point.index_freshness or 'unknown'} when the backfill "
            "began: the feed's watermark is kept"
        )
    run.mirror_total = searched_of(kind).count()
    SyncRun.objects.filter(pk=run.pk).update(**feed_values(run))
    point.delete(using=app_database())
