"""What the change feed and the backfill do with what a search finds, and how a sync run writes a
looked-up record: the rules both read by (which records the mirror must look up, ``decide``;
what an answer says of the index, ``first_answer``: its freshness, the watermark it allows) and
the writers every run shares (``store_for_run``, ``store_batch``). Apart from the feed and the
backfill so that neither imports the other, nor the refresh. The rules and their reasons:
docs/architecture/change-feed.md.

A looked-up record is written with the run's counts and the lease renewal in the record's
transaction: one a transaction (``store_for_run``: the refresh, the change feed, the backfill of
a resource without batches), or a batch in one (``store_batch``: the backfill's, with the
projections it answered settled in the same transaction, so a batch and what it settles commit
or vanish together). A batch the database refuses, or one with an answer the app cannot use, is
rolled back and written lookup by lookup, which sets that one aside.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import msgspec
from django.utils import timezone

from ..client.reading import Lookup, RecordLookup
from ..client.search import FRESHNESS_STATES, SearchPage, SearchResult
from ..conf.table import CLOCK_SKEW
from ..db import app_database
from ..exceptions.wire import (
    InvalidRecord,
)
from ..mirror.events import FEED, LOOKUP, Origin
from ..mirror.resources.registry import Resource, SearchedMirror
from ..mirror.result import MirrorResult
from ..models import SyncRun
from .lease import Lease
from .progress import (
    MALFORMED,
    REFUSALS,
    add_counts,
    counts_kept_on_commit,
    progress_values,
    set_aside,
)

logger = logging.getLogger("django_orders.sync")

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
    #: This shop's clock when the read began (``None``: answers are not checked against it).
    began: datetime | None = None
    #: ``starting_watermark``'s warning: the stored watermark lay ahead and was pulled back.
    pulled_back: str = ""
    #: Projections set aside because their ``updated_at`` lies past ``not_after`` (id -> it).
    ahead: dict[str, datetime] = field(default_factory=dict)

    @property
    def not_after(self) -> datetime | None:
        """The latest moment an answer may date itself: ``began`` plus ``CLOCK_SKEW``."""
        return None if self.began is None else self.began + CLOCK_SKEW


def stored_watermark(resource: str) -> datetime | None:
    """The watermark the last run of ``resource`` left (``None``: the feed never ran)."""
    return (
        SyncRun.objects.using(app_database())
        .filter(resource=resource, watermark_after__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("watermark_after", flat=True)
        .first()
    )


def starting_watermark(resource: str, now: datetime) -> tuple[datetime | None, str]:
    """The watermark a read of ``resource`` starts from, given this shop's clock ``now``, and
    a warning when the stored one lay ahead of it.

    A search answer dated in the future (a provider host's clock in 2099) could move the
    watermark there before this rule existed; every later read would stop at its first result.
    Such a watermark is pulled back: the read starts from the last one stored that was not
    ahead (none: as a first read, from now), so what changed meanwhile is read again."""
    stored = stored_watermark(resource)
    limit = now + CLOCK_SKEW
    if stored is None or stored <= limit:
        return stored, ""
    earlier = (
        SyncRun.objects.using(app_database())
        .filter(resource=resource, watermark_after__lte=limit)
        .order_by("-started_at", "-id")
        .values_list("watermark_after", flat=True)
        .first()
    )
    warning = (
        f"the stored watermark ({stored:%Y-%m-%d %H:%M:%S} UTC) lay ahead of this shop's clock, "
        "left by a search answer dated in the future: pulled back to now"
    )
    if earlier is not None:
        warning += f", this read going back to {earlier:%Y-%m-%d %H:%M:%S} UTC"
    return earlier, warning


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
    pulled_back = outcome.pulled_back
    outcome.warning = ""
    outcome.freshness = state
    if page.total is not None:
        outcome.service_total = page.total.value
        outcome.service_total_exact = page.total.exact
    started = fresh.observed_at or page.freshness.observed_at
    indexed = fresh.last_indexed_at
    limit = outcome.not_after
    ahead = [m for m in (started, indexed) if m is not None and limit is not None and m > limit]
    if ahead:
        # The index's clock is wrong: nothing it says of its freshness can be believed.
        outcome.freshness = "unknown"
        outcome.replaces_refresh = False
        outcome.warning = joined(
            pulled_back,
            f"the search index dated its freshness {max(ahead):%Y-%m-%d %H:%M:%S} UTC, ahead of "
            "this shop's clock: the watermark is kept and open orders are refreshed by lookup",
        )
        return None
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
    outcome.warning = joined(pulled_back, outcome.warning)
    before = outcome.watermark_before
    if candidate is not None:
        outcome.watermark_after = candidate if before is None else max(before, candidate)
    # A pulled-back watermark: the open orders are looked up once more, in case.
    outcome.replaces_refresh = state == "current" and before is not None and not pulled_back
    if started is None:
        return None  # no clock of the service's to place the walk on: look everything up
    return started - timedelta(seconds=since_walk)


def joined(first: str, then: str) -> str:
    """Two warnings as one line (either may be empty)."""
    return f"{first}; {then}" if first and then else first or then


def decide(
    kind: Resource,
    outcome: FeedOutcome,
    results: list[SearchResult],
    floor: datetime,
    decided: dict[str, datetime],
    walked: set[str],
    walk_seen_at: datetime | None,
    *,
    lease: Lease,
    compare: bool = False,
) -> None:
    """Sort one answer's projections of ``kind``'s records into to look up, settled, and
    unchanged, by what the mirror holds of each (``kind.searched``).

    The settlements are written under ``lease`` (``Lease.fenced``): a run that lost it writes
    none. ``compare`` (the backfill): a record the feed never settled but the mirror holds as the
    projection shows it (an order's status and amount) is settled without a lookup.

    A projection dated past ``outcome.not_after`` has its date set aside (``outcome.ahead``),
    never stamped on the mirror: a stamp in 2099 would make the mirror take every later
    version of that record as one it already holds. The record is still looked up, as of when
    the read began (or the floor, if later: a service's clock a little ahead): the lookup, sent
    later, shows it at least that new, and an older stamp only costs a lookup more later.
    """
    searched = searched_of(kind)
    limit, began = outcome.not_after, outcome.began
    if limit is not None and began is not None and any(r.updated_at > limit for r in results):
        outcome.ahead.update((r.id, r.updated_at) for r in results if r.updated_at > limit)
        instead = max(began, floor)
        results = [
            msgspec.structs.replace(r, updated_at=instead) if r.updated_at > limit else r
            for r in results
        ]
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
        with lease.fenced():
            searched.settle(settled, lock_first=True)


def set_aside_ahead(run: SyncRun, outcome: FeedOutcome, kind: Resource) -> None:
    """Count on ``run`` the projections ``decide`` set aside as dated in the future (the
    caller saves the run), with their reason; one such record is not a reason to distrust
    the whole index."""
    for record_id, moment in outcome.ahead.items():
        reason = InvalidRecord(
            f"its search updated_at {moment:%Y-%m-%d %H:%M:%S} UTC lies ahead of this shop's "
            f"clock (past {outcome.not_after:%Y-%m-%d %H:%M:%S} UTC): looked up without it"
        )
        where = f"search result for {kind.noun[0]} {record_id}"
        set_aside(run, where, reason, why="it is dated in the future")
    outcome.ahead.clear()


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


#: Called in the batch's transaction with the moment each stored order's projection showed.
Settle = Callable[[dict[str, datetime]], None]


def store_for_run(
    lookup: Lookup | RecordLookup,
    run: SyncRun,
    lease: Lease,
    *,
    counter: str = "refreshed",
    also: Callable[[MirrorResult], None] | None = None,
    origin: Origin = LOOKUP,
    kind: Resource,
) -> MirrorResult | None:
    """``store_lookup`` with the run's counts and the lease renewal in the record's transaction.

    ``counter``: the run's count of these lookups (``refreshed``, or ``feed_lookups`` for the
    change feed's); ``origin``: what the timeline says found a change; ``also`` runs in the same
    transaction after a stored record; ``kind``: the resource looked up (``kind.store_lookup``
    writes it). A record the database refuses, or a malformed one, is set
    aside as a page's record is (``problems``), and an order goes to the back of the refresh
    queue.
    """

    def count(result: MirrorResult | None, now: datetime) -> None:
        if result is not None:
            setattr(run, counter, getattr(run, counter) + 1)
            add_counts(run, result)
            if also is not None:
                also(result)
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run))
        lease.renew(now=now)

    try:
        with counts_kept_on_commit(run):
            return kind.store_lookup(lookup, within=count, origin=origin)
    except (*REFUSALS, InvalidRecord) as exc:
        refused = not isinstance(exc, InvalidRecord)
        why = "the database refused it" if refused else MALFORMED
        set_aside(run, f"lookup of {kind.noun[0]} {lookup.record_id}", exc, why=why)

        def note(result: MirrorResult | None, now: datetime) -> None:
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run), problems=run.problems)
            lease.renew(now=now)

        kind.set_aside(lookup.record_id, within=note)
        return MirrorResult()


def store_batch(
    lookups: Sequence[Lookup],
    moments: Mapping[str, datetime],
    run: SyncRun,
    lease: Lease,
    *,
    kind: Resource,
    settle: Settle | None = None,
    counter: str = "feed_lookups",
    origin: Origin = FEED,
) -> None:
    """Store ``lookups`` (each order once), count them on ``run`` (``counter``, as
    ``store_for_run`` does), settle each stored order at its ``moments`` entry (``settle``,
    the resource's ``searched.settle`` by default), and renew the lease, all in one
    transaction. An order the service does not know (404) is stamped, not counted or settled,
    as ``store_for_run`` leaves it."""

    if settle is None:
        assert kind.searched is not None, f"{kind.name} is not looked up by id here"
        settle = kind.searched.settle

    def count(result: MirrorResult | None, now: datetime) -> None:
        found = {
            lookup.order_id: moments[lookup.order_id]
            for lookup in lookups
            if lookup.record is not None
        }
        setattr(run, counter, getattr(run, counter) + len(found))
        if result is not None:
            add_counts(run, result)
        if found:
            settle(found)
        SyncRun.objects.filter(pk=run.pk).update(**progress_values(run))
        lease.renew(now=now)

    try:
        with counts_kept_on_commit(run):
            kind.store_lookups(lookups, within=count, origin=origin)
        return
    except (*REFUSALS, InvalidRecord) as exc:
        logger.info(
            "A batch of %d lookups was refused (%s); writing it one by one", len(lookups), exc
        )
    for lookup in lookups:
        also = _settling(settle, {lookup.order_id: moments[lookup.order_id]})
        store_for_run(lookup, run, lease, counter=counter, also=also, origin=origin, kind=kind)


def _settling(settle: Settle, moment: dict[str, datetime]) -> Callable[[MirrorResult], None]:
    def also(result: MirrorResult) -> None:
        settle(moment)

    return also
