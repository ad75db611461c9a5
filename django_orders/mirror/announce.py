"""``order_first_seen`` for shop code, sent after the write that caused it has committed.

``order_status_changed`` is sent from the timeline's entries instead (``events.announce``):
one entry, one signal, whatever path saw the change.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..models.mirror import Order
from ..signals import order_first_seen

logger = logging.getLogger("django_orders.sync")


class Written(Protocol):
    """What ``announce`` reads of a write's result (``store.MirrorResult``), only when a
    receiver listens: the orders it saw for the first time."""

    @property
    def first_seen(self) -> list[Order]: ...


def announce(result: Written) -> None:
    """Sent after commit, so a receiver never sees a row that a rollback would take back.

    ``send_robust``: one failing receiver neither stops the others nor the sync.
    """
    responses = []
    if order_first_seen.has_listeners(Order):
        for order in result.first_seen:
            responses += order_first_seen.send_robust(sender=Order, order=order)
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("Signal receiver %r failed: %r", receiver, response)
