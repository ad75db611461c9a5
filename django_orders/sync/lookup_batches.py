"""A batch of looked-up orders into the mirror in one transaction, with the run's counts.

The backfill's writes (``backfill_pipeline``): ``store_for_run`` for several lookups at once,
with the projections they answered settled (``settle``) in the same transaction, so a batch
and what it settles commit or vanish together. A batch the database refuses, or one with an
answer the app cannot use, is rolled back and written lookup by lookup (``store_for_run``,
which sets the failing one aside).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ..client.lookups import Lookup
from ..exceptions import InvalidRecord
from ..mirror.events import FEED, Origin
from ..mirror.refresh import store_lookups
from ..mirror.resources.registry import Resource
from ..mirror.store import MirrorResult
from ..models import SyncRun
from .lease import Lease
from .lookup_store import store_for_run
from .problems import REFUSALS
from .progress import add_counts, counts_kept_on_commit, progress_values

logger = logging.getLogger("django_orders.sync")

__all__ = ["store_batch"]

#: Called in the batch's transaction with the moment each stored order's projection showed.
Settle = Callable[[dict[str, datetime]], None]


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
            store_lookups(lookups, within=count, origin=origin)
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
