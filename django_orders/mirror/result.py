"""What a write into the mirror did (``MirrorResult``): the counts, and the orders it wrote as
model instances, built only when a signal receiver asks. Apart from ``store`` so that the
resource registry and the lookups name it without the writer; the writer gives the row mapping
(``rows.order_row``), so this module imports no writing code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from ..models.mirror import Order
from .parsed import ParsedOrder


@dataclass
class MirrorResult:
    """What a write did.

    ``orders`` holds the orders this call wrote, as model instances; ``first_seen`` feeds
    ``order_first_seen`` (``announce``); ``status_changes`` (instance, previous status) are the
    changes also recorded on the timeline, whose entries send ``order_status_changed``
    (``events``). The instances are built on first access: a first sync with no signal
    receivers never needs them. ``kept`` counts the
    answers refused because the mirror holds a newer state (``lifecycle``); they count as
    ``unchanged`` too: nothing of them was written. ``row`` builds an order's instance
    (``rows.order_row``): given by the writer that records written orders.
    """

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    kept: int = 0
    now: datetime | None = None
    refreshed: bool = False
    row: Callable[..., Order] | None = field(default=None, repr=False)
    _written: list[tuple[ParsedOrder, str | None, datetime]] = field(
        default_factory=list, repr=False
    )

    @cached_property
    def orders(self) -> dict[str, Order]:
        # store_orders() sets both whenever it writes an order.
        assert self.now is not None and self.row is not None
        row: Callable[..., Order] = self.row
        return {
            order.id: row(order, self.now, refreshed=self.refreshed, observed_at=observed)
            for order, _previous, observed in self._written
        }

    @property
    def first_seen(self) -> list[Order]:
        return [self.orders[order.id] for order, previous, _ in self._written if previous is None]

    @property
    def status_changes(self) -> list[tuple[Order, str]]:
        return [
            (self.orders[order.id], previous)
            for order, previous, _observed in self._written
            if previous is not None and previous != order.status
        ]


#: Called inside a write's transaction with what was stored (``None``: nothing).
Within = Callable[[MirrorResult | None, datetime], None]
