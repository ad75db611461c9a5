"""Background work on Django's Tasks framework (``pip install "django-orders[tasks]"``):
``django.tasks`` on Django 6.0+, the ``django-tasks`` backport on 5.2, whichever exists (core
first). README.md, "Background tasks: cron or tasks".

- ``watch_payment(order_id)``: one step of a new order's payment watch
  (``services.run_watch_step``), enqueued for each order ``create_order`` stores when
  ``WATCH_PAYMENTS`` is on (a backend that can defer), then the next step for when it is due.
  ``watch_new_order``, connected by ``ready()``, enqueues each new order's first step.
- ``watch_due_payments_task``: the sweep, which reschedules itself. The watch's row, written
  with the order, is the truth (``sync/payment_watch.py``): an enqueue is an optimisation that
  runs a step on time. A worker killed between its claim and its enqueue, an enqueue that
  raises, a deferred job a backend never runs: the sweep (this task or the command) claims the
  step when its claim expires or it falls due (cron works as well).
- ``sync_orders_task``, ``resume_order_requests_task``, ``deliver_events_task`` (the webhook
  runner) and ``reconcile_task``: the periodic jobs, for a project that runs them from its task
  backend's scheduler instead of cron. Safe on many workers at once: a sync holds the
  resource's lease (a second run finds it taken and fails, nothing written twice) and each
  resent order request is claimed before it is sent.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..conf import orders_settings
from ..db import app_database
from ..models import Order
from ..models.runs import FIRST_WATCH_PAUSE
from ..services import (
    deliver_order_events,
    reconcile,
    resume_order_requests,
    run_watch_step,
    sync_orders,
    watch_due_payments,
)
from ..signals import order_created

__all__ = [
    "FIRST_WATCH_PAUSE",
    "default_task_backend",
    "deliver_events_task",
    "reconcile_task",
    "resume_order_requests_task",
    "sync_orders_task",
    "watch_due_payments_task",
    "watch_payment",
]


if TYPE_CHECKING or find_spec("django.tasks") is not None:
    # The type checker reads Django's own (django-stubs has them), whatever is installed.
    from django.tasks import default_task_backend, task
else:
    from django_tasks import default_task_backend, task


@task()
def sync_orders_task(resource: str = "orders") -> dict[str, Any]:
    """``sync_orders(resource=...)``; returns the run's id, outcome and counts."""
    run = sync_orders(resource=resource)
    return {
        "sync_run": run.pk,
        "resource": run.resource,
        "outcome": run.outcome,
        "pages": run.pages,
        "seen": run.seen,
        "created": run.created,
        "updated": run.updated,
    }


@task()
def resume_order_requests_task(limit: int | None = None) -> dict[str, Any]:
    """``resume_order_requests(limit=...)``; returns the summary's counts."""
    summary = resume_order_requests(limit=limit)
    return {
        "resent": summary.resent,
        "succeeded": summary.succeeded,
        "still_pending": summary.still_pending,
        "failed": summary.failed,
        "needs_review": summary.needs_review,
        "waiting": summary.waiting,
        "stopped_by": str(summary.stopped_by) if summary.stopped_by else None,
    }


@task()
def deliver_events_task(max_seconds: float = 55.0, idle: float = 0.2) -> dict[str, Any]:
    """The webhook runner as a task: delivers for ``max_seconds`` (polling every ``idle``
    seconds when nothing is due), for a scheduler that starts it every minute. Safe with many
    at once: deliveries are claimed in the database."""
    run = deliver_order_events(max_seconds=max_seconds, idle=idle)
    return {
        "claimed": run.claimed,
        "delivered": run.delivered,
        "failed": run.failed,
        "dead": run.dead,
        "disabled": run.disabled,
    }


@task()
def reconcile_task() -> dict[str, Any]:
    """``reconcile()`` over everything; returns the run's id and counts."""
    run = reconcile()
    return {
        "reconciliation_run": run.pk,
        "open": run.open,
        "new": run.new,
        "resolved": run.resolved,
        "cannot_verify": run.cannot_verify,
        "open_by_kind": run.open_by_kind,
    }


logger = logging.getLogger("django_orders.tasks")


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
