"""Refreshing by lookup, inside a sync run or not: the orders the page walk cannot reach (and the
admin's action), and the refunds still moving (pending, processing).

Lookups run ``REFRESH_CONCURRENCY`` at a time (``client.lookups``, one rate gate); each record
is written in its own short transaction as it comes (``mirror.refresh``; in a run, by
``settling.store_for_run``), with the run's counts and the lease renewal in that same
transaction when a sync run does the refresh.

No webhook says when a refund settles or fails, so every walk of a resource that carries
refunds (``Resource.refresh_refunds``: orders, refunds) ends by looking up the open refunds the
walk did not just read, a bounded number a run (``REFRESH_LIMIT``), the longest unconfirmed
first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import F, Q
from django.utils import timezone

from ..client.lookups import RefundLookup, lookup_orders, lookup_refunds
from ..db import app_atomic, app_database, refuse_outer_transaction
from ..exceptions.wire import InvalidRecord
from ..mirror.refresh import store_lookup
from ..mirror.refunds import FINAL, StoredRefunds, stamp_refund_refreshed, store_refund_lookup
from ..mirror.resources.registry import Resource
from ..models import TERMINAL_STATUSES, Order, Refund, SyncRun
from .lease import Lease, run_gate, shared_gate
from .progress import (
    MALFORMED,
    REFUSALS,
    ProgressCallback,
    counts_kept_on_commit,
    progress_values,
    set_aside,
)
from .settling import store_batch, store_for_run

__all__ = ["store_batch", "store_for_run"]


@dataclass
class RefreshResult:
    """What ``refresh_orders`` did. ``missing`` lists ids the service answered 404 for."""

    refreshed: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    missing: list[str] = field(default_factory=list)


#: How many unknown order ids the refresh's warning names.
UNKNOWN_SHOWN = 5


def refresh_outside_walk(
    run: SyncRun,
    lease: Lease,
    seen_ids: set[str],
    nonterminal_seen: int,
    limit: int,
    progress: ProgressCallback | None,
    *,
    kind: Resource,
) -> None:
    """Look up non-terminal orders the walk did not see (they left the page window); ``kind``:
    the orders' resource, which writes each lookup.

    Candidates are read completely before the first lookup, so no query or transaction is open
    during the HTTP calls. Orders are taken oldest refresh first (never refreshed first), so
    over several runs every waiting order gets its turn. ``REFRESH_CONCURRENCY`` lookups are in
    flight at once (``client.lookups``); each order is written in its own transaction as it comes.
    """
    # From the database the walk just wrote to, not a replica that may lag behind it.
    pending = Order.objects.using(app_database()).exclude(status__in=TERMINAL_STATUSES)
    waiting = max(0, pending.count() - nonterminal_seen)
    candidates: list[str] = []
    if limit and waiting:
        queue = pending.order_by(F("refreshed_at").asc(nulls_first=True), "initiated_at", "id")
        for order_id in queue.values_list("id", flat=True).iterator(chunk_size=2000):
            if order_id not in seen_ids:
                candidates.append(order_id)
                if len(candidates) >= limit:
                    break
    unknown: list[str] = []
    for lookup in lookup_orders(candidates, heartbeat=lease.renew, gate=run_gate(run)):
        result = store_for_run(lookup, run, lease, kind=kind)
        if result is None:
            unknown.append(lookup.order_id)
        elif progress is not None:
            progress(run)
    run.refresh_waiting = max(0, waiting - len(candidates))
    if unknown:
        # Lookups finish in any order; the warning names them in queue order.
        unknown.sort(key={order_id: n for n, order_id in enumerate(candidates)}.__getitem__)
        # One line a run, not one an order: a mirror synced against another account or
        # environment than the one that created its orders would print up to refresh_limit.
        shown = ", ".join(unknown[:UNKNOWN_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        logger.warning(
            "%d order(s) of the refresh queue are unknown to the service (404) and were left as "
            "they are, at the back of the queue: %s%s",
            len(unknown),
            shown,
            more,
        )


def refresh_orders(order_ids: Iterable[str]) -> RefreshResult:
    """Look up each order by id and store it, each in its own short transaction.

    For the admin's "refresh from the API" action (at most 100 ids). ``REFRESH_CONCURRENCY``
    lookups are in flight at once. An id the service does not know (404) is reported in
    ``missing``, not fatal; any other error propagates, with the lookups that finished before it
    already stored. Raises ``TransactionManagementError`` inside
    ``transaction.atomic()``, before any lookup: each lookup's write must commit on its own,
    and no lookup may run inside the caller's transaction.
    """
    refuse_outer_transaction(app_database())
    summary = RefreshResult()
    unique_ids = list(dict.fromkeys(order_ids))
    for lookup in lookup_orders(unique_ids, gate=shared_gate()):
        result = store_lookup(lookup)
        if result is None:
            summary.missing.append(lookup.order_id)
            continue
        summary.refreshed += 1
        summary.created += result.created
        summary.updated += result.updated
        summary.unchanged += result.unchanged
    # Lookups finish in any order; ``missing`` keeps the order the ids were given in.
    summary.missing.sort(key={order_id: n for n, order_id in enumerate(unique_ids)}.__getitem__)
    return summary


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
