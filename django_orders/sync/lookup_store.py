"""Looked-up records written inside a sync run, with the run's counts and the lease renewal in
the records' transaction: one a transaction (``store_for_run``: the refresh, the change feed,
the backfill of a resource without batches), or a batch in one (``store_batch``: the
backfill's, with the projections it answered settled in the same transaction, so a batch and
what it settles commit or vanish together). A batch the database refuses, or one with an answer
the app cannot use, is rolled back and written lookup by lookup, which sets that one aside.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ..client.lookup_results import Lookup, RecordLookup
from ..exceptions.wire import InvalidRecord
from ..mirror.events import FEED, LOOKUP, Origin
from ..mirror.resources.registry import Resource
from ..mirror.result import MirrorResult
from ..models import SyncRun
from .lease import Lease
from .problems import MALFORMED, REFUSALS, set_aside
from .progress import add_counts, counts_kept_on_commit, progress_values

logger = logging.getLogger("django_orders.sync")

__all__ = ["store_batch", "store_for_run"]

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
