"""The change feed: what changed upstream since the last run, from the provider's search index.

The page window shows only the newest orders and nothing is final (a refund shows only in
``updated_at``), so after the window walk each orders run reads ``/orders/search`` newest
change first, back to the stored watermark, and looks up what changed since the mirror settled
it. The rules and their reasons: docs/architecture/change-feed.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from ..client.factory import new_client
from ..client.rate_gate import RateGate
from ..client.search_structs import FRESHNESS_STATES, SearchPage, SearchResult
from ..client.transport import OrdersClient
from ..conf import orders_settings
from ..db import app_database
from ..exceptions.wire import OrdersNetworkError, RequestRejected, ServerError
from ..mirror.events import FEED
from ..mirror.resources.registry import Resource
from ..mirror.searched import SearchedMirror
from ..models import SyncRun
from .lease import Lease
from .lookup_store import store_for_run
from .progress import ProgressCallback

logger = logging.getLogger("django_orders.sync")

__all__ = ["FeedOutcome", "read_change_feed", "stored_watermark"]

#: Times an expired cursor makes the feed read again from the top before the run gives up on
#: the feed (and says so): each restart reads back to the same watermark.
RESTARTS = 3


@dataclass
class FeedOutcome:
    """What one read of the feed found and decided (also written to the ``SyncRun``)."""

    freshness: str = "unavailable"
    watermark_before: datetime | None = None
    watermark_after: datetime | None = None
    read: int = 0
    warning: str = ""
    #: An index known current read back to a stored watermark: nothing outside the window
    #: changed unseen, so the open-order refresh is not needed.
    replaces_refresh: bool = False
    service_total: int | None = None
    service_total_exact: bool | None = None
    changed: dict[str, datetime] = field(default_factory=dict)


def stored_watermark(resource: str) -> datetime | None:
    """The watermark the last run of ``resource`` left (``None``: the feed never ran)."""
    return (
        SyncRun.objects.using(app_database())
        .filter(resource=resource, watermark_after__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("watermark_after", flat=True)
        .first()
    )


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
    answer (5xx, no search endpoint) or cursors that keep expiring propagate and fail the run.
    """
    searched = searched_of(kind)
    outcome = FeedOutcome(watermark_before=stored_watermark(kind.name))
    outcome.watermark_after = outcome.watermark_before
    gate = RateGate()  # the searches and the lookups back off together on a 429
    with new_client(gate=gate) as client:
        _read(client, outcome, kind, walked, walk_began, lease)
    lookups = searched.look_up(list(outcome.changed), heartbeat=lease.renew, gate=gate)
    for lookup in lookups:
        stamp = searched.stamp(lookup.record_id, outcome.changed[lookup.record_id])
        result = store_for_run(
            lookup, run, lease, counter="feed_lookups", also=stamp, origin=FEED, kind=kind
        )
        if result is not None and progress is not None:
            progress(run)
    _record(run, outcome, searched)
    return outcome


def searched_of(kind: Resource) -> SearchedMirror:
    """What the mirror keeps of ``kind``'s search index; ``ValueError`` if it has none."""
    if kind.search_type is None or kind.searched is None:
        raise ValueError(f"{kind.name} has no search index here")
    return kind.searched


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
    while True:
        try:
            page = client.search(kind.name, page_size=size, cursor=cursor)
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
        if first is None:
            first = page
            since = time.monotonic() - walk_began
            walk_seen_at = first_answer(outcome, page, kind.search_type, since)
        if floor is None:
            return
        decide(kind, outcome, page.results, floor, decided, walked, walk_seen_at)
        lease.renew()  # a long read (after an outage) holds the lease like a long walk
        if not page.has_more or (page.results and page.results[-1].updated_at < floor):
            break
        cursor = page.next_cursor
    outcome.read = len(decided)


def first_answer(
    outcome: FeedOutcome, page: SearchPage, search_type: str, since_walk: float
) -> datetime | None:
    """Take the freshness, the total and the new watermark from the read's first answer;
    return a moment (on the service's clock) no later than when the walk began: the answer
    was stamped before it came back, ``since_walk`` seconds after the walk began."""
    fresh = page.freshness.of(search_type)
    state = fresh.state if fresh.state in FRESHNESS_STATES else "unknown"
    outcome.freshness = state
    if page.total is not None:
        outcome.service_total = page.total.value
        outcome.service_total_exact = page.total.exact
    started = fresh.observed_at or page.freshness.observed_at
    indexed = fresh.last_indexed_at
    candidate = None
    if state == "current":
        candidate = started or timezone.now()
        if indexed is not None:
            candidate = min(candidate, indexed)
    elif state == "delayed":
        candidate = indexed
        outcome.warning = "the search index is delayed"
        if indexed is None:
            outcome.warning += " and does not say how far"
        else:
            outcome.warning += f" (last indexed at {indexed:%Y-%m-%d %H:%M:%S} UTC)"
    else:
        outcome.warning = f"the search index is {state}"
    if state == "delayed" and indexed is not None:
        outcome.warning += ": the watermark stops there and open orders are refreshed by lookup"
    elif outcome.warning:
        outcome.warning += ": the watermark is kept and open orders are refreshed by lookup"
    before = outcome.watermark_before
    if candidate is not None:
        outcome.watermark_after = candidate if before is None else max(before, candidate)
    outcome.replaces_refresh = state == "current" and before is not None
    if started is None:
        return None  # no clock of the service's to place the walk on: look everything up
    return started - timedelta(seconds=since_walk)


def _untrusted(outcome: FeedOutcome, state: str, why: str) -> None:
    outcome.freshness = state
    outcome.watermark_after = outcome.watermark_before
    outcome.replaces_refresh = False
    outcome.changed.clear()
    outcome.warning = f"{why}; the watermark is kept and open orders are refreshed by lookup"


def decide(
    kind: Resource,
    outcome: FeedOutcome,
    results: list[SearchResult],
    floor: datetime,
    decided: dict[str, datetime],
    walked: set[str],
    walk_seen_at: datetime | None,
    *,
    compare: bool = False,
) -> None:
    """Sort one answer's projections of ``kind``'s records into to look up, settled, and
    unchanged, by what the mirror holds of each (``kind.searched``).

    ``compare`` (the backfill): a record the feed never settled but the mirror holds as the
    projection shows it (an order's status and amount) is settled without a lookup.
    """
    searched = searched_of(kind)
    fresh = [
        r
        for r in results
        if r.updated_at >= floor and (r.id not in decided or r.updated_at > decided[r.id])
    ]
    if not fresh:
        return
    held = searched.held(r.id for r in fresh)
    settled: dict[str, datetime] = {}
    for result in fresh:
        decided[result.id] = result.updated_at
        row = held.get(result.id)
        if row is not None and row[0] is not None and result.updated_at <= row[0]:
            continue  # the mirror settled this version, or a newer one
        if row is not None and (
            (result.id in walked and walk_seen_at is not None and result.updated_at < walk_seen_at)
            or (compare and row[0] is None and searched.same(result, row[1]))
        ):
            settled[result.id] = result.updated_at  # the walk just read it, or holds it so
            continue
        outcome.changed[result.id] = result.updated_at
    if settled:
        searched.settle(settled)


def _record(run: SyncRun, outcome: FeedOutcome, searched: SearchedMirror) -> None:
    run.watermark_before = outcome.watermark_before
    run.watermark_after = outcome.watermark_after
    run.index_freshness = outcome.freshness
    run.feed_read = outcome.read
    run.warning = outcome.warning
    run.service_total = outcome.service_total
    run.service_total_exact = outcome.service_total_exact
    run.mirror_total = searched.count()
    SyncRun.objects.filter(pk=run.pk).update(**feed_values(run))


def feed_values(run: SyncRun) -> dict[str, object]:
    return {name: getattr(run, name) for name in FEED_FIELDS}


FEED_FIELDS = [
    "watermark_before",
    "watermark_after",
    "index_freshness",
    "feed_read",
    "feed_lookups",
    "warning",
    "service_total",
    "service_total_exact",
    "mirror_total",
]
