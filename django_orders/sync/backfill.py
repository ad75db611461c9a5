"""``sync_orders --backfill``: the whole history of a resource through its search index.

The page window hides every record past the newest ``MAX_PAGE_NUMBER x PAGE_SIZE``; search
reaches them all. The backfill reads ``/<resource>/search`` to its end, looks up what the mirror
lacks or settled older (``feed_rules.decide`` without a floor) and saves checkpoints, so a killed
backfill goes on from there. How: docs/architecture/change-feed.md, "Backfill".
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from ..client.lookup_stream import lookup_stream
from ..client.search import SearchTrail
from ..client.search_structs import SearchPage
from ..client.transport import new_client
from ..conf import orders_settings
from ..conf.table import CLOCK_SKEW
from ..db import app_database
from ..mirror.events import FEED
from ..mirror.resources.registry import Resource
from ..models import SyncCheckpoint, SyncRun
from .backfill_pipeline import Answer, Pipeline
from .feed_rules import (
    RESTARTS,
    FeedOutcome,
    decide,
    feed_values,
    first_answer,
    joined,
    searched_of,
    set_aside_ahead,
    starting_watermark,
)
from .lease import Lease
from .lookup_store import store_batch, store_for_run
from .progress import ProgressCallback
from .rate_hold import run_gate

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
    run's ``feed_read`` and ``service_total`` say how far it is ("done / at least N").

    A search answer that leads nowhere (``client.search.SearchTrail``: a cursor given again,
    ``has_more`` with nothing new, more answers than the exact total allows) or breaks the
    contract raises ``InvalidResponse`` naming the cursor, and the run fails with the
    checkpoint kept: a rerun goes on from the last answer stored, and stops at the same place
    while the provider answers so."""
    resource = kind.name
    database = app_database()
    point, _ = SyncCheckpoint.objects.using(database).get_or_create(resource=resource)
    began = timezone.now()
    before, pulled_back = starting_watermark(resource, began)
    if pulled_back:
        logger.warning("The backfill of %s: %s", resource, pulled_back)
    outcome = FeedOutcome(watermark_before=before, began=began, pulled_back=pulled_back)
    run.end_reason = BACKFILL
    run.feed_read, run.feed_lookups = point.done, point.looked_up
    run.service_total, run.service_total_exact = point.total, point.total_exact
    gate = run_gate(run)
    searched = searched_of(kind)

    def answered(page: SearchPage) -> dict[str, datetime]:
        _first(point, page, kind, outcome)
        outcome.changed.clear()
        # Per answer, so memory stays flat over a history of millions: what an earlier
        # answer settled is in the mirror (search_updated_at), which decide reads.
        decide(kind, outcome, page.results, _EVER, {}, set(), None, lease=lease, compare=True)
        set_aside_ahead(run, outcome, kind)
        return dict(outcome.changed)

    def checkpoint(answer: Answer) -> None:
        # Fenced: a backfill paused past its lease must not move the checkpoint of the run
        # that took over (nor count its answers twice).
        with lease.fenced():
            point.cursor = answer.next_cursor or ""
            point.done += answer.results
            point.looked_up = run.feed_lookups
            point.save(using=database)
            run.feed_read = point.done
            SyncRun.objects.filter(pk=run.pk).update(
                feed_read=run.feed_read, end_reason=BACKFILL, **_totals(run, point)
            )
        if progress is not None:
            progress(run)

    def store(lookups: list[Any], moments: dict[str, datetime]) -> None:
        if kind.batched_lookups:  # a batch a transaction
            store_batch(lookups, moments, run, lease, kind=kind)
            return
        for lookup in lookups:
            stamp = searched.stamp(lookup.record_id, moments[lookup.record_id])
            store_for_run(
                lookup, run, lease, counter="feed_lookups", also=stamp, origin=FEED, kind=kind
            )

    size = orders_settings.SEARCH_PAGE_SIZE
    # Used on the pipeline's search thread only, one search after the other.
    trail = SearchTrail(f"/{resource}/search", size)
    with new_client(gate=gate) as client, lookup_stream(resource, gate=gate) as lookups:
        Pipeline(
            lookups,
            search=lambda cursor: client.search(
                resource, page_size=size, cursor=cursor, trail=trail
            ),
            decide=answered,
            store=store,
            checkpoint=checkpoint,
            heartbeat=lease.renew,
            restarts=RESTARTS,
        ).run(point.cursor or None)
    _finish(kind, run, point, outcome, lease)


def _first(point: SyncCheckpoint, page: SearchPage, kind: Resource, outcome) -> None:
    """The first answer of a backfill (not of a resumed one) fixes the watermark it leaves."""
    if page.total is not None:
        point.total, point.total_exact = page.total.value, page.total.exact
    if point.index_freshness:
        return
    assert kind.search_type is not None  # searched_of
    probe = FeedOutcome(watermark_before=None, began=outcome.began)
    first_answer(probe, page, kind.search_type, 0.0)
    if probe.warning:
        logger.warning("The backfill of %s began with %s", kind.name, probe.warning)
    point.index_freshness = probe.freshness
    point.watermark = probe.watermark_after


def _totals(run: SyncRun, point: SyncCheckpoint) -> dict[str, object]:
    run.service_total, run.service_total_exact = point.total, point.total_exact
    return {"service_total": point.total, "service_total_exact": point.total_exact}


def _finish(
    kind: Resource, run: SyncRun, point: SyncCheckpoint, outcome: FeedOutcome, lease: Lease
) -> None:
    """Leave the feed's watermark (never moved back) and drop the checkpoint, both under the
    lease (``Lease.fenced``)."""
    before = outcome.watermark_before
    after = before
    if point.watermark is not None and point.watermark > timezone.now() + CLOCK_SKEW:
        # Saved by a backfill begun before the rule (first_answer) refused such answers.
        point.index_freshness, point.watermark = "unknown", None
    if point.watermark is not None:
        after = point.watermark if before is None else max(before, point.watermark)
    run.watermark_before, run.watermark_after = before, after
    run.index_freshness = point.index_freshness
    if point.index_freshness not in ("current", "delayed") or point.watermark is None:
        run.warning = (
            f"the search index was {point.index_freshness or 'unknown'} when the backfill "
            "began: the feed's watermark is kept"
        )
    run.warning = joined(outcome.pulled_back, run.warning)
    run.mirror_total = searched_of(kind).count()
    with lease.fenced():
        SyncRun.objects.filter(pk=run.pk).update(**feed_values(run))
        point.delete(using=app_database())
