"""``watch_payment``: look a new order up until it is paid, canceled or expired.

With no webhooks, the shop would learn of a payment only at the return page or the next sync.
Bounded (lookups, doubling pauses, the order's expiry); one watcher per order, the
``PaymentWatch`` row being the claim. Why: docs/architecture/refresh.md ("The payment watcher").
``watch_new_order``, connected by ``ready()``, starts one for each new order.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from ..conf import LEASE_MARGIN, longest_exchange, orders_settings
from ..db import app_database
from ..exceptions import OrdersError
from ..models import TERMINAL_STATUSES, Order, PaymentWatch
from ..services import refresh_orders
from ..signals import order_created
from .framework import task

logger = logging.getLogger("django_orders.tasks")

#: The pause before the first lookup (the payer is on the payment page), doubled after each.
FIRST_WATCH_PAUSE = timedelta(seconds=5)
LONGEST_WATCH_PAUSE = timedelta(minutes=30)
MAX_WATCH_LOOKUPS = 30
#: How long an order is watched at most when its ``expires_at`` is later or unknown.
WATCH_SPAN = timedelta(hours=24)


def watch_pause(lookups_done: int) -> timedelta:
    """The pause after ``lookups_done`` lookups: 5 s, 10 s, 20 s ... at most 30 minutes."""
    return min(FIRST_WATCH_PAUSE * 2 ** min(lookups_done, 16), LONGEST_WATCH_PAUSE)


def claim_duration() -> timedelta:
    """How long one run holds the watch: the longest lookup the client can make, and slack."""
    return (
        longest_exchange(orders_settings.REQUEST_DEADLINE, orders_settings.MAX_RETRIES)
        + LEASE_MARGIN
    )


def start_watch(order_id: str) -> None:
    """Enqueue the first run of an order's watcher, ``FIRST_WATCH_PAUSE`` from now."""
    run_after = timezone.now() + FIRST_WATCH_PAUSE
    watch_payment.using(run_after=run_after).enqueue(order_id)


def _claim(order_id: str, step: int, now: datetime, using: str) -> PaymentWatch | None:
    if step == 0:
        try:
            with transaction.atomic(using=using):
                PaymentWatch.objects.using(using).get_or_create(order_id=order_id)
        except IntegrityError:
            pass  # another run created it first, or the order is not in the mirror
    taken = (
        PaymentWatch.objects.using(using)
        .filter(pk=order_id, lookups=step, finished_at__isnull=True)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + claim_duration())
    )
    return PaymentWatch.objects.using(using).get(pk=order_id) if taken else None


def _look_up(order_id: str) -> tuple[str | None, str]:
    """One lookup: the order's status afterwards (None when the service does not know it) and
    what ended the watch, if anything did. A lookup of the refresh (not ``confirm_order``): the
    timeline says the change was seen by a lookup, not at the checkout's return. An order the
    mirror already holds in a terminal status (the return page confirmed it) needs none."""
    stored = Order.objects.using(app_database()).filter(pk=order_id).only("status").first()
    if stored is not None and stored.status in TERMINAL_STATUSES:
        return stored.status, "status"
    try:
        if refresh_orders([order_id]).missing:
            return None, "unknown_order"
    except OrdersError as exc:
        # The next lookup may get through: the watch goes on, the lookup is counted.
        logger.warning("Payment watch of order %s: lookup failed (%s)", order_id, exc)
    order = Order.objects.using(app_database()).filter(pk=order_id).only("status").first()
    if order is None:
        return None, "unknown_order"
    return order.status, ("status" if order.status in TERMINAL_STATUSES else "")


@task()
def watch_payment(order_id: str, step: int = 0) -> dict[str, Any]:
    """Look ``order_id`` up once and, while it is still unpaid, enqueue the next lookup.

    ``step`` is the number of lookups done before this run (the first enqueue passes none).
    Returns what happened, for the backend's result store.
    """
    using = app_database()
    now = timezone.now()
    watch = _claim(order_id, step, now, using)
    if watch is None:
        return {"order": order_id, "step": step, "ran": False}
    status, ended_by = _look_up(order_id)
    now = timezone.now()
    lookups = step + 1
    order = Order.objects.using(using).filter(pk=order_id).only("expires_at").first()
    deadline = watch.started_at + WATCH_SPAN
    if order is not None and order.expires_at is not None:
        deadline = min(deadline, order.expires_at)
    next_at = min(now + watch_pause(lookups), deadline)
    if not ended_by and lookups >= MAX_WATCH_LOOKUPS:
        ended_by = "lookups"
    if not ended_by and now >= deadline:
        ended_by = "deadline"
    PaymentWatch.objects.using(using).filter(pk=order_id, lookups=step).update(
        lookups=lookups,
        claimed_until=None,
        next_lookup_at=None if ended_by else next_at,
        finished_at=now if ended_by else None,
        end_reason=ended_by,
    )
    if not ended_by:
        watch_payment.using(run_after=next_at).enqueue(order_id, step=lookups)
    return {"order": order_id, "step": step, "ran": True, "status": status, "ended_by": ended_by}


DISPATCH_UID = "django_orders.tasks.watch_new_orders"


def watch_new_order(sender: Any, order: Order, **kwargs: Any) -> None:
    """With ``WATCH_PAYMENTS`` on, enqueue the order's watcher once its row is committed."""
    if not orders_settings.WATCH_PAYMENTS or order.is_terminal:
        return
    # order_created is sent after the commit already; on_commit keeps it so for any sender.
    transaction.on_commit(partial(start_watch, order.pk), using=app_database())


def connect_receivers() -> None:
    order_created.connect(watch_new_order, dispatch_uid=DISPATCH_UID)
