"""A short per-order claim: one process at a time prepares a write whose amounts depend on the
order's current state (a refund's remainders), without a transaction held across HTTP.

The claim is a row (``OrderClaim``) taken with one conditional UPDATE and released by the same
holder (its own expiry time is its token) right after the request is stored; a crashed holder's
claim expires after ``claim_duration()``, longer than the lookup it covers can take. A waiter
polls with short pauses; it never waits longer than that expiry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from ..models import OrderClaim
from .timing import claim_duration

FIRST_PAUSE = 0.02
MAX_PAUSE = 0.5


def _try_claim(order_id: str, using: str) -> datetime | None:
    now = timezone.now()
    until = now + claim_duration()
    rows = OrderClaim.objects.using(using).filter(pk=order_id)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    if rows.filter(free).update(claimed_until=until):
        return until
    claims = OrderClaim.objects.using(using)
    claims.bulk_create([OrderClaim(order_id=order_id)], ignore_conflicts=True)
    if rows.filter(free).update(claimed_until=until):
        return until
    return None


@contextmanager
def order_claim(
    order_id: str, using: str, *, sleep: Callable[[float], None] = time.sleep
) -> Iterator[None]:
    """Hold ``order_id``'s claim for the block, waiting for another holder to release it."""
    pause = FIRST_PAUSE
    give_up = timezone.now() + claim_duration() + timedelta(seconds=1)
    while (until := _try_claim(order_id, using)) is None:
        if timezone.now() > give_up:  # only if the clock jumps: expired claims are free
            raise TimeoutError(f"The claim on order {order_id} was not released.")
        sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
    try:
        yield
    finally:
        OrderClaim.objects.using(using).filter(pk=order_id, claimed_until=until).update(
            claimed_until=None
        )
