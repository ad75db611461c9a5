"""The change feed's rules, shared with the backfill: what a search answer says of the index
(``first_answer``: its freshness, the watermark it allows) and which of its records the mirror
must look up (``decide``). The reasons: docs/architecture/change-feed.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from ..client.search_structs import FRESHNESS_STATES, SearchPage, SearchResult
from ..db import app_database
from ..mirror.resources.registry import Resource
from ..mirror.searched import SearchedMirror
from ..models import SyncRun

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


def searched_of(kind: Resource) -> SearchedMirror:
    """What the mirror keeps of ``kind``'s search index; ``ValueError`` if it has none."""
    if kind.search_type is None or kind.searched is None:
        raise ValueError(f"{kind.name} has no search index here")
    return kind.searched


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
