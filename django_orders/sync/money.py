"""What a sync of payouts or balance transactions looks up by id after its walk, and the run of
the balance, which is not walked.

The window shows only the newest pages; a payout's items name transactions past it, and
transactions name orders and refunds the mirror may lack. After each walk of payouts or
transactions the sync looks them up, in that order (the transactions first: they name the
orders and refunds), at most ``limit`` of each kind a run (the run's ``refresh_limit``:
``REFRESH_LIMIT``, ``sync_orders --refresh-limit``), oldest first; what is left waits for the
next run and stays "cannot verify" in ``reconcile()`` meanwhile. Each lookup is written in its
own short transaction with the run's counts (``refreshed``) and the lease renewal, a
malformed answer set aside with its reason. An order lookup brings its refunds and its
embedded payment transaction along (``mirror.refresh``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..client.lookups import lookup_orders, lookup_records, lookup_refunds
from ..client.transport import new_client
from ..db import app_atomic
from ..mirror.money_store import missing_count, missing_ids
from ..mirror.resources.registry import RESOURCES, Resource
from ..models import SyncRun
from .lease import Lease, run_gate
from .progress import ProgressCallback, add_counts, progress_values
from .settling import store_for_run

logger = logging.getLogger("django_orders.sync")

__all__ = ["look_up_named", "take_answer"]


def look_up_named(
    run: SyncRun,
    lease: Lease,
    limit: int,
    progress: ProgressCallback | None,
    *,
    store_refund: Callable[[Any, SyncRun, Lease], object],
) -> None:
    """Look up the transactions payout items name, then the orders and refunds transactions
    name, that the mirror lacks: at most ``limit`` of each kind. ``run.refresh_waiting``
    counts those left for a later run (not looked up in this one): ``reconcile()`` takes only
    a transactions sync that left none as one that looked everything up. ``store_refund``:
    the refund refresh's writer (``refresh.store_refund_for_run``), given by the engine,
    which imports it already."""
    waiting = 0
    lookups = (*_LOOKUPS, ("refunds", lookup_refunds, store_refund))
    for kind, look_up, store in lookups:
        ids = missing_ids(kind, limit)
        for lookup in look_up(ids, heartbeat=lease.renew, gate=run_gate(run)):
            store(lookup, run, lease)
            if progress is not None:
                progress(run)
        # Those looked up and still missing are unknown to the service: not waiting.
        waiting += max(0, missing_count(kind) - len(set(ids) & set(missing_ids(kind, limit))))
    run.refresh_waiting = waiting
    if waiting:
        logger.info(
            "%d records named by the mirror's payouts and transactions wait for a later run's "
            "lookups (at most %d of each kind a run)",
            waiting,
            limit,
        )


def _store_transaction(lookup: Any, run: SyncRun, lease: Lease) -> None:
    store_for_run(lookup, run, lease, kind=RESOURCES["balance_transactions"])


def _store_order(lookup: Any, run: SyncRun, lease: Lease) -> None:
    store_for_run(lookup, run, lease, kind=RESOURCES["orders"])


def _look_up_transactions(ids: list[str], *, heartbeat: Any, gate: Any) -> Any:
    return lookup_records("balance_transactions", ids, heartbeat=heartbeat, gate=gate)


#: In this order, the refunds last: transactions name orders and refunds, and an order's
#: lookup brings its refunds along.
_LOOKUPS: tuple[tuple[str, Callable[..., Any], Callable[..., Any]], ...] = (
    ("transactions", _look_up_transactions, _store_transaction),
    ("orders", lookup_orders, _store_order),
)


def take_answer(kind: Resource, run: SyncRun, lease: Lease) -> None:
    """The one call of a resource that is not walked (the balance: ``POST /balances``),
    stored by the resource (``take``) with the run's counts and the lease renewal."""
    with new_client(gate=run_gate(run)) as client:
        answer = client.balances()
    with app_atomic():
        result = kind.take(answer)
        add_counts(run, result)
        # What the one answer held (a snapshot row per currency), as a walk counts its records.
        run.seen += result.created + result.updated + result.unchanged
        run.pages += 1
        SyncRun.objects.filter(pk=run.pk).update(**progress_values(run))
        lease.renew()
