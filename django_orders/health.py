"""Check classes for django-health-check 4.x (``pip install "django-orders[health]"``).

Each reads the database only (a probe never calls the provider) and says what to do when it
fails; ``StuckRecords`` is the base of the checks that count rows stuck in a state. How to list
them with their thresholds: README.md, "Health checks".
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable, ServiceWarning

from .db import app_database
from .models import OrderRequest, Refund, RefundStatus, SyncRun

__all__ = [
    "OrderRequestsInReview",
    "OrderRequestsStuck",
    "RefundsStuckProcessing",
    "SearchIndexFreshness",
    "StuckRecords",
    "SyncFreshness",
]


def _ago(moment: datetime) -> str:
    seconds = int((timezone.now() - moment).total_seconds())
    return f"{seconds // 60} min ago" if seconds >= 120 else f"{seconds} s ago"


def _last_successful_run(resource: str) -> SyncRun | None:
    return (
        SyncRun.objects.using(app_database())
        .filter(resource=resource, outcome=SyncRun.Outcome.SUCCEEDED, finished_at__isnull=False)
        .order_by("-finished_at")
        .first()
    )


@dataclasses.dataclass
class SyncFreshness(HealthCheck):
    """The last successful sync of ``resource`` finished less than ``max_age`` ago."""

    resource: str = "orders"
    max_age: timedelta = timedelta(hours=1)

    def run(self) -> None:
        run = _last_successful_run(self.resource)
        command = f"manage.py sync_orders --resource {self.resource}"
        if run is None:
            raise ServiceUnavailable(
                f"No {self.resource} sync has succeeded yet: run {command} and schedule it "
                "(cron, or sync_orders_task on a task backend's scheduler)."
            )
        assert run.finished_at is not None  # filtered above
        if timezone.now() - run.finished_at <= self.max_age:
            return
        latest = (
            SyncRun.objects.using(app_database())
            .filter(resource=self.resource)
            .order_by("-started_at")
            .only("outcome", "error")
            .first()
        )
        why = ""
        if latest is not None and latest.outcome == SyncRun.Outcome.FAILED:
            why = f" The latest run failed: {latest.error[:200]}"
        raise ServiceUnavailable(
            f"The last successful {self.resource} sync finished {_ago(run.finished_at)}, longer "
            f"ago than {self.max_age}: check that the job running {command} still runs (cron "
            f"or the task worker) and see the sync runs in the admin.{why}"
        )


@dataclasses.dataclass
class StuckRecords(HealthCheck):
    """Fails (or warns, with ``warn_only``) when ``stuck()`` counts any row.

    A subclass names its rows (``stuck``, given the time now) and what to do about them
    (``advice``, given how many there are).
    """

    warn_only: bool = False

    def stuck(self, now: datetime) -> QuerySet:
        raise NotImplementedError

    def advice(self, count: int) -> str:
        raise NotImplementedError

    def run(self) -> None:
        count = self.stuck(timezone.now()).count()
        if count:
            error = ServiceWarning if self.warn_only else ServiceUnavailable
            raise error(self.advice(count))


@dataclasses.dataclass
class OrderRequestsStuck(StuckRecords):
    """Pending order requests ``grace`` past their claim or their next attempt: the worker
    sending them died, or nothing runs ``resume_order_requests``."""

    grace: timedelta = timedelta(minutes=15)

    def stuck(self, now: datetime) -> QuerySet:
        overdue = now - self.grace
        return (
            OrderRequest.objects.using(app_database())
            .filter(state=OrderRequest.State.PENDING)
            .annotate(due=Coalesce("claimed_until", "next_attempt_at", "created_at"))
            .filter(Q(due__lt=overdue))
        )

    def advice(self, count: int) -> str:
        return (
            f"{count} order request(s) pending more than {self.grace} past their claim or "
            "their next attempt: check that manage.py resume_order_requests runs (cron or "
            "resume_order_requests_task), then see Order requests in the admin."
        )


@dataclasses.dataclass
class OrderRequestsInReview(StuckRecords):
    """Order requests in ``needs_review``: only staff can settle them."""

    def stuck(self, now: datetime) -> QuerySet:
        return OrderRequest.objects.using(app_database()).filter(
            state=OrderRequest.State.NEEDS_REVIEW
        )

    def advice(self, count: int) -> str:
        return (
            f"{count} order request(s) need review: open Order requests in the admin, filtered "
            'by state "Needs review", and resend or settle each as its error explains.'
        )


@dataclasses.dataclass
class RefundsStuckProcessing(StuckRecords):
    """Refunds ``processing`` for longer than ``max_age`` (since they started processing, or
    since they were created when the provider gave no time): money the customer is waiting
    for. Either the mirror is stale (nothing refreshes open refunds) or the provider is stuck.
    """

    max_age: timedelta = timedelta(days=3)
    #: How many of the oldest refund ids the advice names.
    named: int = 5

    def stuck(self, now: datetime) -> QuerySet:
        return (
            Refund.objects.using(app_database())
            .filter(status=RefundStatus.PROCESSING)
            .annotate(since=Coalesce("processing_at", "created_at"))
            .filter(since__lt=now - self.max_age)
        )

    def advice(self, count: int) -> str:
        oldest = self.stuck(timezone.now()).order_by("since").values_list("pk", flat=True)
        ids = ", ".join(oldest[: self.named]) + (", ..." if count > self.named else "")
        return (
            f"{count} refund(s) processing for more than {self.max_age} ({ids}): check that "
            "manage.py sync_orders runs (it looks open refunds up), then, if they stay "
            "processing, ask the provider's support about these refund ids; the customer is "
            "waiting for the money."
        )


@dataclasses.dataclass
class SearchIndexFreshness(HealthCheck):
    """The change feed is known complete up to less than ``max_age`` ago.

    The feed's watermark (``SyncRun.watermark_after``) moves only as far as the provider's
    search index is known fresh, so its age is how late a change outside the page window (a
    refund, a completion) can reach the mirror. A warning, not an outage: the shop and the
    open-order refresh go on without the index, so a project lists this check for monitoring
    and leaves it out of a load balancer's probe. Read from the last orders sync that read the
    index (its freshness and warning): one query, no call to the provider per probe.
    """

    max_age: timedelta = timedelta(hours=2)

    def run(self) -> None:
        run = (
            SyncRun.objects.using(app_database())
            .filter(resource="orders")
            .exclude(index_freshness="")
            .order_by("-started_at", "-id")
            .only("started_at", "watermark_after", "index_freshness", "warning")
            .first()
        )
        if run is None:
            raise ServiceWarning(
                "No orders sync has read the search index yet, so how current the mirror is "
                "outside the page window is unknown: run manage.py sync_orders (with "
                'DJANGO_ORDERS["CHANGE_FEED"] on) and schedule it.'
            )
        said = f"the last sync that read the search index ({_ago(run.started_at)}) "
        said += f"warned: {run.warning}" if run.warning else f"found it {run.index_freshness}"
        if run.watermark_after is None:
            raise ServiceWarning(
                f"The change feed has no watermark yet: {said}. Changes to orders outside the "
                "page window are not seen until the index is known fresh: check the "
                "provider's status."
            )
        if timezone.now() - run.watermark_after <= self.max_age:
            return
        raise ServiceWarning(
            f"The change feed is known complete only up to {run.watermark_after:%Y-%m-%d %H:%M} "
            f"UTC ({_ago(run.watermark_after)}), longer ago than {self.max_age}: {said}. "
            "Changes to orders outside the page window reach the mirror late: check that the "
            "sync runs, then the provider's status."
        )
