"""One order lookup written inside a sync run: ``store_lookup`` with the run's counts and the
lease renewal in the order's transaction. The refresh, the change feed and the backfill all
store their lookups this way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..client.lookup_results import Lookup
from ..exceptions.wire import InvalidRecord
from ..mirror.events import LOOKUP, Origin
from ..mirror.refresh import stamp_refreshed, store_lookup
from ..mirror.store import MirrorResult
from ..models import SyncRun
from .lease import Lease
from .problems import MALFORMED, REFUSALS, set_aside
from .progress import add_counts, counts_kept_on_commit, progress_values


def store_for_run(
    lookup: Lookup,
    run: SyncRun,
    lease: Lease,
    *,
    counter: str = "refreshed",
    also: Callable[[MirrorResult], None] | None = None,
    origin: Origin = LOOKUP,
) -> MirrorResult | None:
    """``store_lookup`` with the run's counts and the lease renewal in the order's transaction.

    ``counter``: the run's count of these lookups (``refreshed``, or ``feed_lookups`` for the
    change feed's); ``origin``: what the timeline says found a change; ``also`` runs in the same
    transaction after a stored order. A record the database refuses, or a malformed one, is set
    aside as a page's record is (``problems``), and the order goes to the back of the refresh
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
            return store_lookup(lookup, within=count, origin=origin)
    except (*REFUSALS, InvalidRecord) as exc:
        refused = not isinstance(exc, InvalidRecord)
        why = "the database refused it" if refused else MALFORMED
        set_aside(run, f"lookup of order {lookup.order_id}", exc, why=why)

        def note(result: MirrorResult | None, now: datetime) -> None:
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run), problems=run.problems)
            lease.renew(now=now)

        stamp_refreshed(lookup.order_id, within=note)
        return MirrorResult()
