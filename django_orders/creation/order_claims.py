"""A short per-order claim: one process at a time prepares a write whose amounts depend on the
order's current state (a refund's remainders), without a transaction held across HTTP.

The claim is a row (``OrderClaim``) taken with one statement (an insert that, on a row already
there, takes it only if it is free) and released by the same holder (its own expiry time is its
token) right after the request is stored, in the transaction that stores it (``release``); a
crashed holder's claim expires after ``claim_duration()``, longer than the lookup it covers can
take. A waiter polls with short pauses; it never waits longer than that expiry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Q
from django.utils import timezone

from ..models import OrderClaim
from .timing import claim_duration

FIRST_PAUSE = 0.02
MAX_PAUSE = 0.5


def _try_claim(order_id: str, using: str) -> datetime | None:
    now = timezone.now()
    until = now + claim_duration()
    connection = connections[using]
    if connection.vendor in ("postgresql", "sqlite"):
        return until if _upsert_claim(connection, order_id, now, until) else None
    rows = OrderClaim.objects.using(using).filter(pk=order_id)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    if rows.filter(free).update(claimed_until=until):
        return until
    claims = OrderClaim.objects.using(using)
    claims.bulk_create([OrderClaim(order_id=order_id)], ignore_conflicts=True)
    if rows.filter(free).update(claimed_until=until):
        return until
    return None


def _upsert_claim(connection, order_id: str, now: datetime, until: datetime) -> bool:
    """Insert the claim, or take the existing row if it is free: one statement (and one
    commit) whether or not the order was claimed before; True when this caller holds it."""
    table = connection.ops.quote_name(OrderClaim._meta.db_table)
    field = OrderClaim._meta.get_field("claimed_until")
    column = connection.ops.quote_name(field.column)
    key = connection.ops.quote_name(OrderClaim._meta.pk.column)
    values = [field.get_db_prep_value(value, connection) for value in (until, now)]
    # Only quoted names of the app's own table are formatted in; the values are parameters.
    sql = (
        f"INSERT INTO {table} ({key}, {column}) VALUES (%s, %s) "  # noqa: S608
        f"ON CONFLICT ({key}) DO UPDATE SET {column} = excluded.{column} "
        f"WHERE {table}.{column} IS NULL OR {table}.{column} < %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [order_id, *values])
        return cursor.rowcount == 1


class Claim:
    """A held claim; ``release()`` inside the caller's transaction frees it with its writes."""

    def __init__(self, order_id: str, until: datetime, using: str) -> None:
        self.order_id, self.until, self.using = order_id, until, using
        self.released = False

    def release(self) -> None:
        """Free the claim (only this holder's: its expiry time is the token). Called inside
        a transaction, it frees the claim only if that transaction commits: the caller sets
        ``released`` once it has; until then the block's exit releases it again."""
        OrderClaim.objects.using(self.using).filter(
            pk=self.order_id, claimed_until=self.until
        ).update(claimed_until=None)


@contextmanager
def order_claim(
    order_id: str, using: str, *, sleep: Callable[[float], None] = time.sleep
) -> Iterator[Claim]:
    """Hold ``order_id``'s claim for the block, waiting for another holder to release it."""
    pause = FIRST_PAUSE
    give_up = timezone.now() + claim_duration() + timedelta(seconds=1)
    while (until := _try_claim(order_id, using)) is None:
        if timezone.now() > give_up:  # only if the clock jumps: expired claims are free
            raise TimeoutError(f"The claim on order {order_id} was not released.")
        sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
    claim = Claim(order_id, until, using)
    try:
        yield claim
    finally:
        if not claim.released:
            claim.release()
