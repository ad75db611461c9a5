"""Background work on Django's Tasks framework (``pip install "django-orders[tasks]"``).

``watch_payment(order_id)`` for each order ``create_order`` stores when ``WATCH_PAYMENTS`` is
on (a backend that can defer); ``sync_orders_task`` and ``resume_order_requests_task`` for a
scheduler (cron works as well). README.md, "Background tasks: cron or tasks".
"""

from __future__ import annotations

from .jobs import resume_order_requests_task, sync_orders_task
from .watch import watch_payment

__all__ = ["resume_order_requests_task", "sync_orders_task", "watch_payment"]
