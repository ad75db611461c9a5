"""When an order request is claimed until and resent next, and how its error is written.

Split from ``records`` (which applies these rules): the claim must outlast the longest
send the client can make, the backoff is capped whatever the service says (a ``Retry-After`` of
``1e12`` or ``inf`` included) and never pushes a request past its key lifetime unsent, and the
error columns take whatever a service sent, made storable and cut to their lengths.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..client.errors import shorten
from ..conf import longest_exchange, orders_settings
from ..exceptions.wire import RateLimited
from ..models import OrderRequest
from ..wire_json import storable_text

#: The longest wait between two resends of one request, whatever its attempts.
MAX_BACKOFF = timedelta(hours=1)
#: Slack added to the longest possible send when claiming a request.
CLAIM_MARGIN = timedelta(seconds=60)


def claim_duration() -> timedelta:
    """Longer than the longest send the client can make: every try to ``REQUEST_DEADLINE``
    (connect and read timeouts bound each socket operation, not a try: a trickling server
    is stopped by the deadline only), every Retry-After wait."""
    deadline = orders_settings.REQUEST_DEADLINE
    return longest_exchange(deadline, orders_settings.MAX_RETRIES) + CLAIM_MARGIN


def backoff(attempts: int, error: BaseException | None = None) -> timedelta:
    """Per-request exponential backoff: RESUME_BACKOFF, doubled per attempt, a longer
    Retry-After honoured, never more than ``MAX_BACKOFF`` whatever the service says."""
    cap = MAX_BACKOFF.total_seconds()
    # In float seconds: a timedelta doubled 40 times overflows.
    seconds = orders_settings.RESUME_BACKOFF.total_seconds() * 2.0 ** min(max(attempts - 1, 0), 64)
    if isinstance(error, RateLimited) and error.retry_after:
        seconds = max(seconds, error.retry_after)
    return timedelta(seconds=min(seconds, cap))


def next_attempt(first_sent_at: datetime | None, now: datetime, delay: timedelta) -> datetime:
    """When to resend: after ``delay``, but never so late that the key expires unsent.

    A request first sent at ``first_sent_at`` may be resent until ``KEY_LIFETIME`` after it;
    a backoff that ends later would turn a request that could still succeed into one for
    review. The resend is then due while a whole claim still fits before the expiry.
    """
    due = now + delay
    if first_sent_at is not None:
        latest = first_sent_at + orders_settings.KEY_LIFETIME - claim_duration()
        due = max(now, min(due, latest))
    return due


#: The longest ``last_error`` stored; a longer one is cut with a marker.
LAST_ERROR_LENGTH = 4000


def column_text(name: str, value: Any) -> str:
    """``value`` as text the ``OrderRequest`` column ``name`` takes: storable, and cut to the
    column's length (with a marker for ``last_error``), since a service controls it."""
    text = storable_text(str(value or ""))
    limit = OrderRequest._meta.get_field(name).max_length  # type: ignore[union-attr]  # a column
    if limit is not None:
        return text[:limit]
    return shorten(text, LAST_ERROR_LENGTH) or ""
