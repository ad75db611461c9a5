"""What a lookup gives back (``Lookup``, ``RecordLookup``, ``RefundLookup``): plain records with
the time their request was sent, which the mirror stores without knowing how they were fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Lookup:
    """One finished lookup: the record, or ``None`` when the service does not know the order.

    ``sent_at``: when its request was sent (the mirror refuses an answer to a request sent
    before the one whose answer it holds: ``mirror.lifecycle``); ``None`` counts as when the
    answer is stored.
    """

    order_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None

    @property
    def record_id(self) -> str:
        """The id looked up, under the name every kind of lookup shares (``RecordLookup``)."""
        return self.order_id


@dataclass(frozen=True)
class RecordLookup:
    """One finished lookup of a raw resource's record (``None``: the service does not know it)."""

    record_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None


@dataclass(frozen=True)
class RefundLookup:
    """One finished refund lookup: the record, or ``None`` when the service does not know it."""

    refund_id: str
    record: dict[str, Any] | None
    sent_at: datetime | None = None
