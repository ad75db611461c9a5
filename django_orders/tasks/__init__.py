"""Background work on Django's Tasks framework (``pip install "django-orders[tasks]"``).

- ``watch_payment(order_id)``: bounded lookups of a new order until it is paid, canceled or
  expired; enqueued for each order ``create_order`` stores when ``WATCH_PAYMENTS`` is on.
- ``sync_orders_task(resource="orders")`` and ``resume_order_requests_task()``: the periodic
  jobs, for a backend's scheduler (the framework itself has no schedules: cron works as well).

Any backend works (django-tasks-db, RQ, Celery...); the watcher needs one that can defer.
"""

from __future__ import annotations

from .jobs import resume_order_requests_task, sync_orders_task
from .watch import watch_payment

__all__ = ["resume_order_requests_task", "sync_orders_task", "watch_payment"]
