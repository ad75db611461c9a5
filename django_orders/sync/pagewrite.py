"""Writing one page of a walk, and what happens when the database refuses a record of it.

A page is written in one short transaction with the run's progress and the lease renewal (the
statement counts in ``engine``'s docstring). If the database refuses that write because of the
data (a value a column cannot hold: an integrity or data error, or text the driver cannot
encode), the page is written again record by record, each in a savepoint of one transaction:
the records it takes are stored, those it refuses are set aside, counted on the ``SyncRun``
(``skipped``) with the reason (``problems``), and the walk goes on. Without this, one bad record
would roll its whole page back on every run, forever, and nothing after it would be mirrored.
The same path takes a page whose new rows went in by ``COPY`` (PostgreSQL) when another process
stored one of them after the page's read: record by record, that row reads as stored and is
updated (logged at INFO, since nothing is wrong with the data).

Errors of the database itself (locked, connection lost, a deadlock) are not the data's fault:
they fail the run as before, so that nothing is set aside for a reason that would pass on the
next run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError

from ..client.decoding import storable_text
from ..db import app_atomic
from ..mirror.store import MirrorResult, store_orders, store_records
from ..models import SyncRun

logger = logging.getLogger("django_orders.sync")

#: ``set_aside``'s ``why`` for a record that breaks the spec (``mirror.parsing``).
MALFORMED = "it breaks the spec"
#: What the database raises for a value it will not store.
REFUSALS = (DataError, IntegrityError, UnicodeError)
#: Reasons listed in ``SyncRun.problems``; past this, only counted.
MAX_PROBLEMS_LISTED = 50
#: The longest reason kept for one record.
REASON_LENGTH = 300


def write_page(
    resource: str,
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
    new_customers = _new_customers(resource, records, known_customers)
    saved = {k: v for k, v in vars(run).items() if k != "_state"}
    try:
        with app_atomic():
            results = [_store(resource, records, now, sent_at, known_customers)]
            commit(results)
        return results
    except REFUSALS as exc:
        # Rolled back: so are the customers' rows, and whatever commit() counted on the run.
        known_customers.difference_update(new_customers)
        vars(run).update(saved)
        # A key taken since the page's read is not the data's fault: a new row of the page
        # went in by COPY (mirror.upsert), and another process (an order created meanwhile)
        # stored it after the read. Anything else is a refusal of the data.
        meanwhile = _stored_meanwhile(exc)
        logger.log(
            logging.INFO if meanwhile else logging.WARNING,
            "%s page %d: %s (%s); writing it record by record",
            resource,
            run.pages + 1,
            "another process stored one of its records meanwhile"
            if meanwhile
            else "the database refused the page",
            _reason(exc),
        )
    with app_atomic():
        results = []
        for record in records:
            added = _new_customers(resource, [record], known_customers)
            try:
                with app_atomic():
                    results.append(_store(resource, [record], now, sent_at, known_customers))
            except REFUSALS as exc:
                known_customers.difference_update(added)
                set_aside(run, f"{resource} page {run.pages + 1}, id {record.id}", exc)
        commit(results)
    return results


def set_aside(
    run: SyncRun, where: str, exc: BaseException, *, why: str = "the database refused it"
) -> None:
    """Count a record set aside on ``run`` and note why (the caller saves the run): one the
    database refused, or a malformed one (``why`` says which)."""
    run.skipped += 1
    logger.error("Set aside %s: %s (%s)", where, why, _reason(exc))
    lines = run.problems.count("\n") + 1 if run.problems else 0
    if lines < MAX_PROBLEMS_LISTED:
        line = f"{where}: {_reason(exc)}"
        run.problems = f"{run.problems}\n{line}" if run.problems else line
    elif lines == MAX_PROBLEMS_LISTED:
        run.problems += "\n... more set aside: see the count and the logs."


def _store(
    resource: str, records: Sequence[Any], now: datetime, sent_at: datetime, known: set[str]
) -> MirrorResult:
    if resource == "orders":
        return store_orders(records, now=now, sent_at=sent_at, known_customers=known)
    return store_records(resource, records, now=now)


def _new_customers(resource: str, records: Sequence[Any], known: set[str]) -> set[str]:
    if resource != "orders":
        return set()
    return {record.customer.id for record in records} - known


#: SQLSTATE of a unique violation (PostgreSQL).
UNIQUE_VIOLATION = "23505"


def _stored_meanwhile(exc: BaseException) -> bool:
    """Whether the database refused a row because its key is taken: the page's read found it
    absent, so another transaction committed it since (psycopg 3's ``sqlstate``)."""
    return getattr(exc.__cause__, "sqlstate", None) == UNIQUE_VIOLATION


def _reason(exc: BaseException) -> str:
    text = " ".join(storable_text(str(exc)).split()) or type(exc).__name__
    if len(text) > REASON_LENGTH:
        text = text[:REASON_LENGTH] + "..."
    return f"{type(exc).__name__}: {text}"
