"""The mirror's signals for shop code, sent after the write that caused them has committed."""

from __future__ import annotations

import logging

from ..models import Order
from ..signals import order_first_seen, order_status_changed
from .store import MirrorResult

logger = logging.getLogger("django_orders.sync")


def announce(result: MirrorResult) -> None:
    """Sent after commit, so a receiver never sees a row that a rollback would take back.

    ``send_robust``: one failing receiver neither stops the others nor the sync.
    """
    responses = []
    if order_first_seen.has_listeners(Order):
        for order in result.first_seen:
            responses += order_first_seen.send_robust(sender=Order, order=order)
    if order_status_changed.has_listeners(Order):
        for order, previous in result.status_changes:
            responses += order_status_changed.send_robust(
                sender=Order, order=order, previous_status=previous, status=order.status
            )
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("Signal receiver %r failed: %r", receiver, response)
