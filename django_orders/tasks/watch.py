"""``watch_payment``: one step of a new order's payment watch (``services.run_watch_step``),
then the next step enqueued for when it is due; ``watch_due_payments_task``: the sweep, which
reschedules itself.

The watch's row, written with the order, is the truth (``sync/payment_watch.py``): an enqueue
is an optimisation that runs a step on time. A worker killed between its claim and its
enqueue, an enqueue that raises, a deferred job a backend never runs: the sweep
(``watch_due_payments``, this task or the command) claims the step when its claim expires or
it falls due. ``watch_new_order``, connected by ``ready()``, enqueues each new order's first
step.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..conf import orders_settings
from ..db import app_database
from ..models import Order
from ..models.runs import FIRST_WATCH_PAUSE
from ..services import run_watch_step, watch_due_payments
from ..signals import order_created
from .framework import task

logger = logging.getLogger("django_orders.tasks")

__all__ = ["FIRST_WATCH_PAUSE", "watch_due_payments_task", "watch_payment"]

#: The sweep task's default pause between two of its runs.
DEFAULT_SWEEP_EVERY = 15


def start_watch(order_id: str) -> None:
    """Enqueue the first step of an order's watch, ``FIRST_WATCH_PAUSE`` from now (when the
    row says it is due)."""
    run_after = timezone.now() + FIRST_WATCH_PAUSE
    watch_payment.using(run_after=run_after).enqueue(order_id)


@task()
def watch_payment(order_id: str, step: int = 0) -> dict[str, Any]:
    """Run step ``step`` (the lookups done before it) of ``order_id``'s watch and, while the
    order is still unpaid, enqueue the next one for when it is due. Returns what happened,
    for the backend's result store."""
    done = run_watch_step(order_id, step)
    if done.next_lookup_at is not None:
        try:
            next_run = watch_payment.using(run_after=done.next_lookup_at)
            next_run.enqueue(order_id, step=done.next_step)
        except Exception:
            # The row says when the next step is due: the sweep runs it.
            logger.exception("Payment watch of order %s: next step not enqueued", order_id)
    return done.as_dict()


@task()
def watch_due_payments_task(every: int = DEFAULT_SWEEP_EVERY) -> dict[str, Any]:
    """``watch_due_payments()``, then this task again ``every`` seconds later (0: not again).
    Enqueue it once (and after a deploy that loses the queue): several copies are harmless,
    the watches are claimed in the database."""
    try:
        sweep = watch_due_payments()
    finally:
        if every:
            run_after = timezone.now() + timedelta(seconds=every)
            watch_due_payments_task.using(run_after=run_after).enqueue(every=every)
    return {"claimed": sweep.claimed, "ended": sweep.ended}


DISPATCH_UID = "django_orders.tasks.watch_new_orders"


def watch_new_order(sender: Any, order: Order, **kwargs: Any) -> None:
    """With ``WATCH_PAYMENTS`` on, enqueue the order's first step once its row is committed."""
    if not orders_settings.WATCH_PAYMENTS or order.is_terminal:
        return
    # order_created is sent after the commit already; on_commit keeps it so for any sender.
    transaction.on_commit(partial(start_watch, order.pk), using=app_database())


def connect_receivers() -> None:
    order_created.connect(watch_new_order, dispatch_uid=DISPATCH_UID)
