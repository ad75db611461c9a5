"""Check classes for django-health-check 4.x (``pip install "django-orders[health]"``).

Each reads the database only (a probe never calls the provider) and says what to do when it
fails, naming the sync run to look at but never quoting the provider's message or request id
(a probe answers anyone; staff read those on the run in the admin). ``StuckRecords`` is the
base of the checks that count rows stuck in a state. How to mount and list them: README.md,
"Health checks" (with ``"health_check"`` in ``INSTALLED_APPS``: system check W005).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable, ServiceWarning

from .conf.table import CLOCK_SKEW
from .db import app_database
from .models import (
    Discrepancy,
    EventDelivery,
    OrderRequest,
    PaymentWatch,
    ReconciliationRun,
    Refund,
    RefundStatus,
    SyncRun,
)

__all__ = [
    "OrderRequestsInReview",
    "OrderRequestsStuck",
    "PaymentWatchesStalled",
    "ReconciliationClean",
    "RefundsStuckProcessing",
    "SearchIndexFreshness",
    "StuckRecords",
    "SyncFreshness",
    "WebhookBacklog",
]


def _ago(moment: datetime) -> str:
    seconds = int((timezone.now() - moment).total_seconds())
    return f"{seconds // 60} min ago" if seconds >= 120 else f"{seconds} s ago"


def _run_name(run: SyncRun) -> str:
    return f"sync run #{run.pk}"


def _error_kind(error: str) -> str:
    """The library's name of a run's error (``ServerError``, ``AuthenticationFailed``...),
    without its text: an answer a probe may give anyone never quotes the provider's message
    or request id (staff read them on the run in the admin)."""
    kind = error.split(":", 1)[0].strip()
    return kind if kind.isidentifier() else "an error"


def _duration(value: timedelta) -> str:
    """``timedelta(hours=1)`` as "1 hour", ``timedelta(minutes=90)`` as "1 hour 30 minutes"."""
    seconds = int(value.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}" + ("" if count == 1 else "s"))
    return " ".join(parts) or "0 seconds"


class _ReadableName:
    """The name a check has in django-health-check's pages, JSON and logs, which show a
    check's ``repr``: ``SyncFreshness(orders, max age 1 hour)`` rather than the dataclass's
    ``SyncFreshness(resource='orders', max_age=datetime.timedelta(seconds=3600))``. The
    strings and durations always, any other setting only where it is not the default. (The
    checks are dataclasses with ``repr=False``, so this one is not replaced.)"""

    def __repr__(self) -> str:
        parts = []
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            label = field.name.replace("_", " ")
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, timedelta):
                parts.append(f"{label} {_duration(value)}")
            elif value != field.default:
                shown = ("yes" if value else "no") if isinstance(value, bool) else str(value)
                parts.append(f"{label}: {shown}")
        return f"{type(self).__name__}({', '.join(parts)})" if parts else type(self).__name__


def _last_successful_run(resource: str) -> SyncRun | None:
    return (
        SyncRun.objects.using(app_database())
        .filter(resource=resource, outcome=SyncRun.Outcome.SUCCEEDED, finished_at__isnull=False)
        .order_by("-finished_at")
        .first()
    )


@dataclasses.dataclass(repr=False)
class SyncFreshness(_ReadableName, HealthCheck):
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
            .only("pk", "outcome", "error")
            .first()
        )
        why = ""
        if latest is not None and latest.outcome == SyncRun.Outcome.FAILED:
            why = (
                f" The latest run ({_run_name(latest)}) failed with {_error_kind(latest.error)}: "
                "its error is on that run in the admin (Sync runs)."
            )
        raise ServiceUnavailable(
            f"The last successful {self.resource} sync finished {_ago(run.finished_at)}, longer "
            f"ago than {self.max_age}: check that the job running {command} still runs (cron "
            f"or the task worker) and see the sync runs in the admin.{why}"
        )


@dataclasses.dataclass(repr=False)
class StuckRecords(_ReadableName, HealthCheck):
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


@dataclasses.dataclass(repr=False)
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


@dataclasses.dataclass(repr=False)
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


@dataclasses.dataclass(repr=False)
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


@dataclasses.dataclass(repr=False)
class SearchIndexFreshness(_ReadableName, HealthCheck):
    """The change feed is known complete up to less than ``max_age`` ago.

    The feed's watermark (``SyncRun.watermark_after``) moves only as far as the provider's
    search index is known fresh, so its age is how late a change outside the page window (a
    refund, a completion) can reach the mirror. A warning, not an outage: the shop and the
    open-order refresh go on without the index, so a project lists this check for monitoring
    and leaves it out of a load balancer's probe. Read from the last orders sync that read the
    index (its freshness and warning): one query, no call to the provider per probe. A
    watermark ahead of this shop's clock (more than ``CLOCK_SKEW``) fails it too: now minus
    it would look healthy while every read of the feed stops at its first result.
    """

    max_age: timedelta = timedelta(hours=2)

    def run(self) -> None:
        run = (
            SyncRun.objects.using(app_database())
            .filter(resource="orders")
            .exclude(index_freshness="")
            .order_by("-started_at", "-id")
            .only("pk", "started_at", "watermark_after", "index_freshness", "warning")
            .first()
        )
        if run is None:
            raise ServiceWarning(
                "No orders sync has read the search index yet, so how current the mirror is "
                "outside the page window is unknown: run manage.py sync_orders (with "
                'DJANGO_ORDERS["CHANGE_FEED"] on) and schedule it.'
            )
        said = (
            f"the last sync that read the search index ({_run_name(run)}, "
            f"{_ago(run.started_at)}) found it {run.index_freshness}"
        )
        if run.warning:
            # Its text may quote the provider's answer: it stays on the run, for staff.
            said += " and warned (the warning is on that run in the admin)"
        if run.watermark_after is None:
            raise ServiceWarning(
                f"The change feed has no watermark yet: {said}. Changes to orders outside the "
                "page window are not seen until the index is known fresh: check the "
                "provider's status."
            )
        now = timezone.now()
        if run.watermark_after > now + CLOCK_SKEW:
            raise ServiceWarning(
                f"The change feed's watermark ({run.watermark_after:%Y-%m-%d %H:%M} UTC) lies "
                f"ahead of this shop's clock ({now:%Y-%m-%d %H:%M} UTC): a search answer dated "
                f"in the future set it, and until it is pulled back a read of the feed stops at "
                f"its first result: {said}. Run manage.py sync_orders (it pulls the watermark "
                "back to now and says so), then check the provider's status and this host's "
                "clock."
            )
        if now - run.watermark_after <= self.max_age:
            return
        raise ServiceWarning(
            f"The change feed is known complete only up to {run.watermark_after:%Y-%m-%d %H:%M} "
            f"UTC ({_ago(run.watermark_after)}), longer ago than {self.max_age}: {said}. "
            "Changes to orders outside the page window reach the mirror late: check that the "
            "sync runs, then the provider's status."
        )


@dataclasses.dataclass(repr=False)
class WebhookBacklog(StuckRecords):
    """Deliveries (to active endpoints and receivers) due more than ``grace`` ago and still
    not delivered: no runner is running, or the subscriber has been failing that long. Dead
    letters count too (``dead=True``, the default) until staff retry or replay them."""

    grace: timedelta = timedelta(minutes=10)
    dead: bool = True

    def stuck(self, now: datetime) -> QuerySet:
        rows = EventDelivery.objects.using(app_database()).filter(
            Q(endpoint__isnull=True) | Q(endpoint__is_active=True)
        )
        late = Q(state__in=["pending", "failed"], next_attempt_at__lt=now - self.grace)
        return rows.filter(late | Q(state="dead")) if self.dead else rows.filter(late)

    def advice(self, count: int) -> str:
        return (
            f"{count} event deliveries are more than {self.grace} late or dead: check that "
            "manage.py deliver_order_events (or deliver_events_task) runs, then see Event "
            "deliveries in the admin (filter by state) to retry or replay them."
        )


@dataclasses.dataclass
class ReconciliationClean(HealthCheck):
    """A reconciliation ran less than ``max_age`` ago and no discrepancy is open.

    Fails (or warns, with ``warn_only``) naming the open kinds: money that did not arrive or
    does not add up. "Cannot verify" is not a failure (the syncs have not reached the data).
    """

    max_age: timedelta = timedelta(days=1)
    warn_only: bool = False

    def run(self) -> None:
        error = ServiceWarning if self.warn_only else ServiceUnavailable
        using = app_database()
        last = ReconciliationRun.objects.using(using).order_by("-started_at", "-id").first()
        if last is None or timezone.now() - last.started_at > self.max_age:
            when = "has never run" if last is None else f"last ran {_ago(last.started_at)}"
            raise error(
                f"Reconciliation {when}: schedule manage.py reconcile (cron, or reconcile_task) "
                f"at least every {self.max_age}."
            )
        open_kinds = dict(
            Discrepancy.objects.using(using)
            .filter(resolved_at__isnull=True)
            .values_list("kind")
            .annotate(count=Count("id"))
            .order_by("kind")
            .values_list("kind", "count")
        )
        if open_kinds:
            kinds = ", ".join(f"{kind} {count}" for kind, count in open_kinds.items())
            raise error(
                f"{sum(open_kinds.values())} discrepancies open ({kinds}): see Discrepancies in "
                "the admin; docs/reconciliation.md says what to do about each kind."
            )


@dataclasses.dataclass
class PaymentWatchesStalled(StuckRecords):
    """Payment watches ``grace`` past their next lookup or their claim and not ended: nothing
    runs the sweep (``watch_due_payments`` or ``watch_due_payments_task``) and no task carried
    them."""

    grace: timedelta = timedelta(minutes=5)

    def stuck(self, now: datetime) -> QuerySet:
        overdue = now - self.grace
        return (
            PaymentWatch.objects.using(app_database())
            .filter(finished_at__isnull=True)
            .annotate(due=Coalesce("claimed_until", "next_lookup_at", "started_at"))
            .filter(due__lt=overdue)
        )

    def advice(self, count: int) -> str:
        return (
            f"{count} payment watch(es) more than {self.grace} past their next lookup or "
            "claim: check that manage.py watch_due_payments runs (cron or "
            "watch_due_payments_task) and that the task workers are up."
        )
