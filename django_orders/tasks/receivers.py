"""The receiver that starts a payment watcher for each new order, connected by ``ready()``:
the creation flow only sends ``order_created`` and knows nothing of tasks."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction

from ..conf import orders_settings
from ..db import app_database
from ..models import Order
from ..signals import order_created
from .watch import start_watch

DISPATCH_UID = "django_orders.tasks.watch_new_orders"


def watch_new_order(sender: Any, order: Order, **kwargs: Any) -> None:
    """With ``WATCH_PAYMENTS`` on, enqueue the order's watcher once its row is committed."""
    if not orders_settings.WATCH_PAYMENTS or order.is_terminal:
        return
    # order_created is sent after the commit already; on_commit keeps it so for any sender.
    transaction.on_commit(partial(start_watch, order.pk), using=app_database())


def connect_receivers() -> None:
    order_created.connect(watch_new_order, dispatch_uid=DISPATCH_UID)
