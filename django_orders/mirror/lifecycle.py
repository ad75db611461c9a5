"""The mirror never goes back in time: whether an answer may replace the stored order.

The one rule, used by every write of an order into the mirror (``store.store_orders``, which
the page walk, lookups, ``confirm_order``'s and ``cancel_order``'s answers and the refresh all go
through; a create's answer is only ever inserted where the mirror has no row):

- An order's status only moves forward: preparing -> requires_payment -> paid -> completed;
  canceled and expired only from an unpaid state; paid and completed win over canceled and
  expired. An answer with a later status replaces the stored one whenever it was sent (the
  lifecycle says it saw the order later); one with an earlier status never does.
- With no move in the lifecycle (the same status, canceled against expired, or a status this
  rule does not know), the answer to the later request wins: orders carry no ``updated_at``,
  so each stored row holds when its request was sent (``Order.observed_at``), and an answer
  to a request sent before that is refused. An unknown status never replaces a known final
  one (canceled, expired, paid, completed).

The decision is made on the stored row as read in the write's own transaction, locked on
PostgreSQL (``comparison.read_stored``), so two writers cannot both decide on the same old row:
the signal a change sends (``announce``) is sent once, by whichever writer made it.
"""

from __future__ import annotations

from datetime import datetime

from ..models import OrderStatus

#: How far along its lifecycle a status is. Canceled and expired share a rank: neither follows
#: the other. Statuses not listed (``unknown``, any other string) have no rank.
RANKS: dict[str, int] = {
    OrderStatus.PREPARING: 0,
    OrderStatus.REQUIRES_PAYMENT: 1,
    OrderStatus.CANCELED: 2,
    OrderStatus.EXPIRED: 2,
    OrderStatus.PAID: 3,
    OrderStatus.COMPLETED: 4,
}
#: The first rank of a final status: an unknown status never replaces one.
FINAL_RANK = 2
#: Timestamps that only ever appear: a write never clears one the mirror holds (``upsert``).
APPEARING = ("paid_at", "canceled_at", "completed_at")


def replaces(
    status: str,
    sent_at: datetime,
    stored_status: str,
    stored_observed_at: datetime | None,
) -> bool:
    """Whether an answer with ``status``, to a request sent at ``sent_at``, may replace the
    stored row (its status, and when its own request was sent: ``None`` for a row stored
    before the mirror kept it, which any answer may replace that the lifecycle allows)."""
    new, old = RANKS.get(status), RANKS.get(stored_status)
    if new is not None and old is not None:
        if new != old:
            return new > old
    elif new is None and old is not None and old >= FINAL_RANK:
        return False
    return stored_observed_at is None or sent_at >= stored_observed_at


def observed(sent_at: datetime, stored_observed_at: datetime | None) -> datetime:
    """The ``observed_at`` of a row an answer replaced: never earlier than the row's (an answer
    that moved the status forward may be older than the row it replaced)."""
    if stored_observed_at is None or sent_at > stored_observed_at:
        return sent_at
    return stored_observed_at
