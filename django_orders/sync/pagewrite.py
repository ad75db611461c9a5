"""Writing one page of a walk; a page the database refuses is written again record by record.

The records it refuses are set aside (counted on the ``SyncRun`` with the reason) and the walk
goes on; errors of the database itself fail the run. Why: docs/architecture/sync.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..db import app_atomic
from ..mirror.resources.registry import Resource
from ..mirror.result import MirrorResult
from ..models import SyncRun
from .problems import REFUSALS, reason_of, set_aside

logger = logging.getLogger("django_orders.sync")


def write_page(
    kind: Resource,
    records: Sequence[Any],
    run: SyncRun,
    *,
    now: datetime,
    sent_at: datetime | None = None,
    known_customers: set[str],
    commit: Callable[[list[MirrorResult]], None],
) -> list[MirrorResult]:
    """Store a page's ``records`` and, in the same transaction, call ``commit`` with what was
    written (the caller saves the run's progress and renews the lease there). ``sent_at``:
    when the page's request was sent (``store_orders``'s)."""
    sent_at = sent_at or now
    resource, known = kind.name, known_customers
    new_customers = kind.customers(records) - known_customers
    saved = {k: v for k, v in vars(run).items() if k != "_state"}
    try:
        with app_atomic():
            results = [kind.store(records, now=now, sent_at=sent_at, known_customers=known)]
            commit(results)
        return results
    except REFUSALS as exc:
        # Rolled back: so are the customers' rows, and whatever commit() counted on the run.
        known_customers.difference_update(new_customers)
        vars(run).update(saved)
        logger.warning(
            "%s page %d: the database refused the page (%s); writing it record by record",
            resource,
            run.pages + 1,
            reason_of(exc),
        )
    with app_atomic():
        results = []
        for record in records:
            added = kind.customers([record]) - known_customers
            try:
                with app_atomic():
                    results.append(
                        kind.store([record], now=now, sent_at=sent_at, known_customers=known)
                    )
            except REFUSALS as exc:
                known_customers.difference_update(added)
                set_aside(run, f"{resource} page {run.pages + 1}, id {record.id}", exc)
        commit(results)
    return results
