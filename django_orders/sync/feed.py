"""The change feed: what changed upstream since the last run, from the provider's search index.

The page window shows only the newest orders and nothing is final (a refund shows only in
``updated_at``), so after the window walk each orders run reads ``/orders/search`` newest
change first, back to the stored watermark, and looks up what changed since the mirror settled
it, by the rules it shares with the backfill (``settling``). The rules and their reasons:
docs/architecture/change-feed.md.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.utils import timezone

from ..client.search import SearchPage, SearchTrail
from ..client.transport import OrdersClient, new_client
from ..conf import orders_settings
from ..db import app_database
from ..exceptions.wire import (
    InvalidResponse,
    OrdersNetworkError,
    RequestRejected,
    ServerError,
)
from ..mirror.events import FEED
from ..mirror.resources.registry import Resource, SearchedMirror
from ..models import SyncCheckpoint, SyncRun
from .lease import Lease, run_gate
from .progress import ProgressCallback
from .settling import (
    RESTARTS,
    FeedOutcome,
    decide,
    feed_values,
    first_answer,
    joined,
    searched_of,
    set_aside_ahead,
    starting_watermark,
    store_for_run,
    stored_watermark,
)

__all__ = ["FeedOutcome", "read_change_feed", "stored_watermark"]


logger = logging.getLogger("django_orders.sync")


def read_change_feed(
    run: SyncRun,
    lease: Lease,
    kind: Resource,
    walked: set[str],
    walk_began: float,
    progress: ProgressCallback | None,
) -> FeedOutcome:
    """Read the feed of ``kind`` (a searched resource) after the window walk and look up what
    changed.

    ``walked``: the ids the walk saw; ``walk_began``: ``time.monotonic()`` when it began. The
    outcome is stored on ``run`` before this returns. Errors other than an index that cannot
    answer or cannot be trusted (5xx, no search endpoint, an unreadable answer, cursors that
    keep expiring or lead nowhere) propagate and fail the run.

    Nothing the index says moves the watermark past this shop's clock when the read began
    (plus ``CLOCK_SKEW``); a stored watermark already past it is pulled back
    (``starting_watermark``).
    """
    searched = searched_of(kind)
    began = timezone.now()
    before, pulled_back = starting_watermark(kind.name, began)
    if pulled_back:
        logger.warning("The change feed of %s: %s", kind.name, pulled_back)
    outcome = FeedOutcome(watermark_before=before, began=began, pulled_back=pulled_back)
    outcome.watermark_after = outcome.watermark_before
    outcome.warning = pulled_back
    gate = run_gate(run)  # the searches and the lookups back off together on a 429
    with new_client(gate=gate) as client:
        _read(client, outcome, kind, walked, walk_began, lease)
    if outcome.watermark_before is None and _backfill_under_way(kind.name):
        # A first read reads nothing back: its watermark ("now") would pass over every change
        # since the backfill began to records the backfill had already read. The backfill
        # leaves the first watermark, as of when it began.
        outcome.watermark_after = None
        outcome.warning = joined(
            outcome.warning,
            f"a backfill of {kind.name} is under way or was stopped (its checkpoint is kept): "
            "it leaves the feed's first watermark (finish it with sync_orders --backfill)",
        )
    assert kind.look_up is not None  # a searched resource is looked up (Resource.backfilled)
    lookups = kind.look_up(list(outcome.changed), heartbeat=lease.renew, gate=gate)
    for lookup in lookups:
        stamp = searched.stamp(lookup.record_id, outcome.changed[lookup.record_id])
        result = store_for_run(
            lookup, run, lease, counter="feed_lookups", also=stamp, origin=FEED, kind=kind
        )
        if result is not None and progress is not None:
            progress(run)
    set_aside_ahead(run, outcome, kind)
    _record(run, outcome, searched, lease)
    return outcome


def _backfill_under_way(resource: str) -> bool:
    return SyncCheckpoint.objects.using(app_database()).filter(resource=resource).exists()


def _read(
    client: OrdersClient,
    outcome: FeedOutcome,
    kind: Resource,
    walked: set[str],
    walk_began: float,
    lease: Lease,
) -> None:
    """Read the index back to the watermark (the first run: one result, for its freshness)."""
    assert kind.search_type is not None  # searched_of
    size = orders_settings.SEARCH_PAGE_SIZE if outcome.watermark_before else 1
    floor = None
    if outcome.watermark_before is not None:
        floor = outcome.watermark_before - orders_settings.CHANGE_FEED_OVERLAP
    decided: dict[str, datetime] = {}
    restarts = 0
    cursor: str | None = None
    first: SearchPage | None = None
    walk_seen_at: datetime | None = None
    trail = SearchTrail(f"/{kind.name}/search", size)
    while True:
        try:
            page = client.search(kind.name, page_size=size, cursor=cursor, trail=trail)
        except RequestRejected as exc:
            if exc.is_cursor_expired and restarts < RESTARTS:
                restarts += 1
                logger.info("A search cursor expired; reading the feed again from the top")
                cursor = None
                continue
            if exc.status_code in (404, 405, 501) or exc.is_cursor_expired:
                _untrusted(outcome, "unavailable", f"the search could not be read: {exc}")
                return
            raise
        except (ServerError, OrdersNetworkError) as exc:
            _untrusted(outcome, "unavailable", f"the search index did not answer: {exc}")
            return
        except InvalidResponse as exc:
            # An answer that breaks the contract, or one that leads the read nowhere (a
            # cursor given again, has_more with nothing new): the index cannot be trusted.
            _untrusted(outcome, "unavailable", f"the search index could not be trusted: {exc}")
            return
        if first is None:
            first = page
            since = time.monotonic() - walk_began
            walk_seen_at = first_answer(outcome, page, kind.search_type, since)
        if floor is None:
            return
        decide(kind, outcome, page.results, floor, decided, walked, walk_seen_at, lease=lease)
        # A long read (after an outage) holds the lease like a long walk; an answer that made
        # no progress never comes here (the trail refused it).
        lease.renew()
        if not page.has_more or (page.results and page.results[-1].updated_at < floor):
            break
        cursor = page.next_cursor
    outcome.read = len(decided)


def _untrusted(outcome: FeedOutcome, state: str, why: str) -> None:
    outcome.freshness = state
    outcome.watermark_after = outcome.watermark_before
    outcome.replaces_refresh = False
    outcome.changed.clear()  # nothing of a read the index spoilt is used
    outcome.ahead.clear()
    outcome.warning = joined(
        outcome.pulled_back,
        f"{why}; the watermark is kept and open orders are refreshed by lookup",
    )


def _record(run: SyncRun, outcome: FeedOutcome, searched: SearchedMirror, lease: Lease) -> None:
    """Store the read on the run: its watermark is the next read's start, so only while this
    run still holds the lease (a run paused past it must not move the feed of its successor)."""
    run.watermark_before = outcome.watermark_before
    run.watermark_after = outcome.watermark_after
    run.index_freshness = outcome.freshness
    run.feed_read = outcome.read
    run.warning = outcome.warning
    run.service_total = outcome.service_total
    run.service_total_exact = outcome.service_total_exact
    run.mirror_total = searched.count()
    with lease.fenced():
        SyncRun.objects.filter(pk=run.pk).update(**feed_values(run))
