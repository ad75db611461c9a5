"""Refreshing the refunds still moving (pending, processing) by ``/refunds/lookup``.

No webhook says when a refund settles or fails, so every walk of a resource that carries
refunds (``Resource.refresh_refunds``: orders, refunds) ends by looking up the open refunds the
walk did not just read, a bounded number a run (``REFRESH_LIMIT``), the longest unconfirmed
first. The lookups run like the order refresh's (``client.lookups``: ``REFRESH_CONCURRENCY`` at
a time, one rate gate); each refund is written in its own short transaction as it comes, with
the run's counts and the lease renewal in that transaction.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import F, Q
from django.utils import timezone

from ..client.lookup_results import RefundLookup
from ..client.lookups import lookup_refunds
from ..db import app_atomic, app_database
from ..exceptions.wire import InvalidRecord
from ..mirror.refunds import FINAL, StoredRefunds, stamp_refund_refreshed, store_refund_lookup
from ..models import Refund, SyncRun
from .lease import Lease
from .problems import MALFORMED, REFUSALS, set_aside
from .progress import ProgressCallback, counts_kept_on_commit, progress_values
from .rate_hold import run_gate

logger = logging.getLogger("django_orders.sync")


def refresh_open_refunds(
    run: SyncRun, lease: Lease, limit: int, progress: ProgressCallback | None
) -> None:
    """Look up at most ``limit`` refunds not final that nothing confirmed since the run began.

    The candidates are read completely before the first lookup, so no query or transaction is
    open during the HTTP calls. ``run.refunds_refreshed`` counts the lookups stored,
    ``refunds_changed`` those that changed the mirror, ``refunds_waiting`` those left for a
    later run.
    """
    unconfirmed = (
        Refund.objects.using(app_database())
        .exclude(status__in=FINAL)
        .filter(Q(refreshed_at__isnull=True) | Q(refreshed_at__lt=run.started_at))
    )
    candidates: list[str] = []
    waiting = unconfirmed.count()
    if limit and waiting:
        queue = unconfirmed.order_by(F("refreshed_at").asc(nulls_first=True), "created_at", "id")
        candidates = list(queue.values_list("id", flat=True)[:limit])
    unknown = 0
    for lookup in lookup_refunds(candidates, heartbeat=lease.renew, gate=run_gate(run)):
        if not store_refund_for_run(lookup, run, lease):
            unknown += 1
        elif progress is not None:
            progress(run)
    run.refunds_waiting = waiting - len(candidates)
    if unknown:
        logger.warning(
            "%d refund(s) of the refresh queue are unknown to the service (404) and were left "
            "as they are, at the back of the queue",
            unknown,
        )


def store_refund_for_run(lookup: RefundLookup, run: SyncRun, lease: Lease) -> bool:
    """``store_refund_lookup`` with the run's counts and the lease renewal in the refund's
    transaction; False for a refund unknown upstream. A record the database refuses, or a
    malformed one, is set aside as a page's record is, and goes to the back of the queue."""

    def count(result: StoredRefunds | None, now: datetime) -> None:
        if result is not None:
            run.refunds_refreshed += 1
            run.refunds_changed += result.created + result.updated
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run))
        lease.renew(now=now)

    try:
        with counts_kept_on_commit(run):
            return store_refund_lookup(lookup, within=count) is not None
    except (*REFUSALS, InvalidRecord) as exc:
        why = MALFORMED if isinstance(exc, InvalidRecord) else "the database refused it"
        set_aside(run, f"lookup of refund {lookup.refund_id}", exc, why=why)
        now = timezone.now()
        with app_atomic():
            stamp_refund_refreshed(lookup.refund_id, now)
            SyncRun.objects.filter(pk=run.pk).update(**progress_values(run), problems=run.problems)
            lease.renew(now=now)
        return True
