"""The mirror never goes back in time: whether an answer may replace the stored order.

Status only moves forward; with no move, the answer to the later request wins. Applied by
``store.store_orders`` to every order write, on the row locked in the write's transaction. The
rule in full: docs/architecture/sync.md, "The mirror never goes back in time".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from django.db.models import Case, F, Q, Value, When

from ..models.mirror import OrderStatus

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

#: When the request an answer came from was sent: one moment for all its orders (a page), or
#: each order's own by id (a batch of lookups, each its own request).
SentAt = datetime | Mapping[str, datetime]


def sent_for(sent_at: SentAt, order_id: str) -> datetime:
    """When the request that answered with ``order_id`` was sent."""
    return sent_at if isinstance(sent_at, datetime) else sent_at[order_id]


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


def confirmed_observed_at(sent_at: SentAt, order_ids: Sequence[str]) -> Case:
    """The ``observed_at`` of rows an answer found unchanged: its request's moment where the
    row's is older (one ``CASE`` for all of them; one branch an order for a batch of lookups)."""
    older = Q(observed_at__isnull=True)
    if isinstance(sent_at, datetime):
        whens = [When(older | Q(observed_at__lt=sent_at), then=Value(sent_at))]
    else:
        whens = [
            When(Q(pk=pk) & (older | Q(observed_at__lt=sent_at[pk])), then=Value(sent_at[pk]))
            for pk in order_ids
        ]
    return Case(*whens, default=F("observed_at"))
