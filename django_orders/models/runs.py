"""The state of the background work: sync runs and their lease and checkpoint, payment
watchers."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class SyncRun(models.Model):
    """One run of the page sync, written as it goes so that a crash leaves an honest record."""

    class Outcome(models.TextChoices):
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")

    resource = models.CharField(_("resource"), max_length=64, default="orders")
    started_at = models.DateTimeField(_("started"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    page_size = models.PositiveSmallIntegerField(_("page size"), default=0)
    pages = models.PositiveIntegerField(_("pages"), default=0)
    seen = models.PositiveIntegerField(_("records seen"), default=0)
    created = models.PositiveIntegerField(_("created"), default=0)
    updated = models.PositiveIntegerField(_("updated"), default=0)
    unchanged = models.PositiveIntegerField(_("unchanged"), default=0)
    refreshed = models.PositiveIntegerField(_("refreshed by lookup"), default=0)
    refresh_waiting = models.PositiveIntegerField(_("waiting for refresh"), default=0)
    refunds_refreshed = models.PositiveIntegerField(
        _("refunds refreshed by lookup"),
        default=0,
        help_text=_("Refunds still pending or processing, looked up after the walk."),
    )
    refunds_changed = models.PositiveIntegerField(_("refunds changed by the refresh"), default=0)
    refunds_waiting = models.PositiveIntegerField(_("refunds waiting for refresh"), default=0)
    skipped = models.PositiveIntegerField(
        _("set aside"),
        default=0,
        help_text=_("Records the database refused; the walk went on without them."),
    )
    problems = models.TextField(
        _("problems"), blank=True, help_text=_("Why each record set aside was refused.")
    )
    rate_limited = models.PositiveIntegerField(
        _("rate limited"),
        default=0,
        help_text=_("429 answers the run met (each held every process using the key)."),
    )
    rate_held = models.FloatField(
        _("seconds held"),
        default=0.0,
        help_text=_("Seconds the run's requests waited out rate-limit holds, summed."),
    )
    end_reason = models.CharField(_("walk ended by"), max_length=32, blank=True)
    outcome = models.CharField(
        _("outcome"), max_length=16, choices=Outcome.choices, default=Outcome.RUNNING
    )
    error = models.TextField(_("error"), blank=True)
    host = models.CharField(_("host"), max_length=255, blank=True)
    # The change feed (sync.feed): how far back it read, how far the next run reads back to.
    watermark_before = models.DateTimeField(_("watermark before"), null=True, blank=True)
    watermark_after = models.DateTimeField(
        _("watermark after"),
        null=True,
        blank=True,
        help_text=_("The next run's change feed reads back to here (less the overlap)."),
    )
    index_freshness = models.CharField(
        _("search index"),
        max_length=16,
        blank=True,
        help_text=_("How fresh the provider's search index said it was: current, delayed..."),
    )
    feed_read = models.PositiveIntegerField(_("changes read"), default=0)
    feed_lookups = models.PositiveIntegerField(_("looked up for the feed"), default=0)
    service_total = models.PositiveIntegerField(_("service's count"), null=True, blank=True)
    service_total_exact = models.BooleanField(
        _("exact count"), null=True, blank=True, help_text=_("False: the count is a lower bound.")
    )
    mirror_total = models.PositiveIntegerField(_("mirror's count"), null=True, blank=True)
    warning = models.TextField(
        _("warning"), blank=True, help_text=_("What the run could not trust (a stale index).")
    )

    class Meta:
        verbose_name = _("sync run")
        verbose_name_plural = _("sync runs")
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.resource} sync {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def duration(self):
        return (self.finished_at - self.started_at) if self.finished_at else None

    @property
    def standing(self) -> str:
        """The provider's count beside the mirror's ("service: at least 48,210 orders; mirror:
        48,207"), when the change feed read one; else ``""``."""
        if self.service_total is None or self.mirror_total is None:
            return ""
        bound = "" if self.service_total_exact else "at least "
        noun = self.resource
        if self.service_total == 1 and self.service_total_exact:
            # "service: 1 order": only resources with a search index have a count, and their
            # names are plural nouns in -s (orders, customers).
            noun = noun.removesuffix("s")
        return f"service: {bound}{self.service_total:,} {noun}; mirror: {self.mirror_total:,}"


class SyncCheckpoint(models.Model):
    """Where a ``sync_orders --backfill`` of a resource stands, saved after each search answer
    it finished, so a killed backfill goes on from there; deleted when it finishes."""

    resource = models.CharField(_("resource"), max_length=64, primary_key=True)
    #: The search's opaque cursor after the last finished answer ("": from the top).
    cursor = models.TextField(_("cursor"), blank=True)
    done = models.PositiveIntegerField(_("results read"), default=0)
    looked_up = models.PositiveIntegerField(_("looked up"), default=0)
    #: What the feed's watermark becomes when it finishes (the first answer's freshness says).
    watermark = models.DateTimeField(_("watermark to leave"), null=True, blank=True)
    index_freshness = models.CharField(_("search index"), max_length=16, blank=True)
    total = models.PositiveIntegerField(_("service's count"), null=True, blank=True)
    total_exact = models.BooleanField(_("exact count"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"), default=timezone.now)

    class Meta:
        verbose_name = _("backfill checkpoint")
        verbose_name_plural = _("backfill checkpoints")

    def __str__(self) -> str:
        return f"{self.resource} backfill ({self.done:,} read)"


class SyncLease(models.Model):
    """Who may walk a resource now; taken and renewed with single atomic UPDATEs."""

    resource = models.CharField(_("resource"), max_length=64, primary_key=True)
    owner = models.CharField(_("owner"), max_length=255, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)

    class Meta:
        verbose_name = _("sync lease")
        verbose_name_plural = _("sync leases")

    def __str__(self) -> str:
        return f"{self.resource} lease ({self.owner or 'free'})"


class RateHold(models.Model):
    """The service's rate limit as every process and host using one API key sees it.

    A 429's ``Retry-After`` seen by one client holds them all until ``held_until``; with
    ``MAX_REQUESTS_PER_SECOND`` set, ``next_slot`` is the first moment nobody has taken yet, and
    clients take their request slots ``1/rate`` apart from it (``sync.lease``). The key is
    named by its fingerprint, a hash: the key itself is never stored.
    """

    key_fingerprint = models.CharField(_("key fingerprint"), max_length=64, primary_key=True)
    # Epoch seconds: compared and set as they were read (the slots' compare-and-set), the same
    # with or without USE_TZ; each host's clock, which NTP keeps within milliseconds.
    held_until = models.FloatField(_("held until"), null=True, blank=True)
    next_slot = models.FloatField(_("next free slot"), null=True, blank=True)

    class Meta:
        verbose_name = _("rate hold")
        verbose_name_plural = _("rate holds")

    def __str__(self) -> str:
        return f"rate hold {self.key_fingerprint[:12]}"


#: The pause before a watch's first lookup (the payer is on the payment page).
FIRST_WATCH_PAUSE = timedelta(seconds=5)


class PaymentWatch(models.Model):
    """The one payment watcher of an order (``django_orders.tasks.watch_payment``).

    The row is the claim: a run of the watcher takes it with one conditional UPDATE on
    (``lookups``, ``claimed_until``), so two enqueues of the same step, or a stale task from an
    earlier step, never make two watchers look the same order up.
    """

    order = models.OneToOneField(
        "django_orders.Order",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="payment_watch",
        verbose_name=_("order"),
    )
    started_at = models.DateTimeField(_("started"), default=timezone.now)
    lookups = models.PositiveSmallIntegerField(_("lookups"), default=0)
    #: Every step run, lookups and steps the change feed served (which look nothing up): the
    #: guard a step is claimed on, so a duplicate or stale task of a step finds nothing.
    steps = models.PositiveIntegerField(_("steps"), default=0)
    claimed_until = models.DateTimeField(
        _("claimed until"),
        null=True,
        blank=True,
        help_text=_("A worker looking the order up holds the watch until then."),
    )
    next_lookup_at = models.DateTimeField(_("next lookup"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    end_reason = models.CharField(_("ended by"), max_length=32, blank=True)

    class Meta:
        verbose_name = _("payment watch")
        verbose_name_plural = _("payment watches")
        indexes = [
            # The sweep's and the health check's reads: the open watches only, a few among
            # one row for every order ever watched.
            models.Index(
                fields=["next_lookup_at"],
                name="django_orde_watch_open_idx",
                condition=models.Q(finished_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"payment watch of {self.order_id}"

    @staticmethod
    def open(order_id: str, *, now: datetime, using: str) -> None:
        """Start the watch of a new order, in the caller's transaction (the one that stores
        the order): the row alone carries the watch, whatever becomes of the enqueued first
        step. One statement, and a no-op when the order is watched already."""
        due = now + FIRST_WATCH_PAUSE
        watch = PaymentWatch(order_id=order_id, started_at=now, next_lookup_at=due)
        PaymentWatch.objects.using(using).bulk_create([watch], ignore_conflicts=True)


class PaymentWatchFeed(models.Model):
    """The last read of the change feed for the open payment watches (``WATCH_FEED_INTERVAL``).

    One row per searched resource (``orders``). The sweep that reads claims it first (one
    conditional UPDATE on ``claimed_until``), so sweeps on several hosts read once an interval
    between them. The watches trust the feed, and skip their own lookups, only while
    ``freshness`` is ``current`` and ``read_at`` is younger than three intervals. The sync's
    change feed and its watermark are apart: this row never moves them.
    """

    resource = models.CharField(_("resource"), max_length=64, primary_key=True)
    #: When the last finished read began, on this shop's clock.
    read_at = models.DateTimeField(_("read at"), null=True, blank=True)
    #: How far the last current read is known complete: the next read goes back to here.
    covered_to = models.DateTimeField(_("covered to"), null=True, blank=True)
    freshness = models.CharField(_("search index"), max_length=16, blank=True)
    #: Why the last read could not be trusted ("" when it could).
    problem = models.TextField(_("problem"), blank=True)
    claimed_until = models.DateTimeField(_("claimed until"), null=True, blank=True)

    class Meta:
        verbose_name = _("payment watch feed")
        verbose_name_plural = _("payment watch feeds")

    def __str__(self) -> str:
        return f"{self.resource} watch feed ({self.freshness or 'not read'})"
