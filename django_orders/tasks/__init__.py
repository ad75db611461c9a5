"""Background work on Django's Tasks framework (``pip install "django-orders[tasks]"``).

``watch_payment(order_id)`` for each order ``create_order`` stores when ``WATCH_PAYMENTS`` is
on (a backend that can defer); ``sync_orders_task``, ``resume_order_requests_task`` and
``deliver_events_task`` (the webhook runner) for a scheduler; ``watch_due_payments_task``
(reschedules itself) carries every payment watch a lost enqueue or a killed worker left (cron
works as well). README.md, "Background tasks: cron or tasks".
"""

from __future__ import annotations

from .jobs import (
    deliver_events_task,
    reconcile_task,
    resume_order_requests_task,
    sync_orders_task,
)
from .watch import watch_due_payments_task, watch_payment

__all__ = [
    "deliver_events_task",
    "reconcile_task",
    "resume_order_requests_task",
    "sync_orders_task",
    "watch_due_payments_task",
    "watch_payment",
]
