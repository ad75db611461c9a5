"""The periodic jobs as tasks, for a project that runs them from its task backend's scheduler
(or enqueues them from anywhere) instead of cron. Safe on many workers at once: a sync holds
the resource's lease (a second run finds it taken and fails, nothing written twice) and each
resent order request is claimed before it is sent."""

from __future__ import annotations

from typing import Any

from ..services import deliver_order_events, reconcile, resume_order_requests, sync_orders
from .framework import task


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
