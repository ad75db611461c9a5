"""One looked-up record written inside a sync run: its resource's ``store_lookup`` with the
run's counts and the lease renewal in the record's transaction. The refresh, the change feed
and the backfill all store their lookups this way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..client.lookup_results import Lookup, RecordLookup
from ..exceptions.wire import InvalidRecord
from ..mirror.events import LOOKUP, Origin
from ..mirror.resources.registry import Resource
from ..mirror.store import MirrorResult
from ..models import SyncRun
from .lease import Lease
from .problems import MALFORMED, REFUSALS, set_aside
from .progress import add_counts, counts_kept_on_commit, progress_values


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
    transaction after a stored record; ``kind``: the resource looked up (``kind.searched``
    writes it). A record the database refuses, or a malformed one, is set
    aside as a page's record is (``problems``), and an order goes to the back of the refresh
    queue.
    """
    searched = kind.searched
    assert searched is not None, f"{kind.name} is not looked up by id here"

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
            return searched.store_lookup(lookup, within=count, origin=origin)
    except (*REFUSALS, InvalidRecord) as exc:
        refused = not isinstance(exc, InvalidRecord)
        why = "the database refused it" if refused else MALFORMED
        set_aside(run, f"lookup of {kind.noun[0]} {lookup.record_id}", exc, why=why)

        def note(result: MirrorResult | None, now: datetime) -> None:
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run), problems=run.problems)
            lease.renew(now=now)

        searched.set_aside(lookup.record_id, within=note)
        return MirrorResult()
