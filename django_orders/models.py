"""The local mirror of remote orders and customers, and the durable records of our own writes.

Mirror rows (``Customer``, ``Order``) are keyed by the remote id, ``RemoteRecord`` by (resource,
remote id); all keep the raw record whole, so fields the spec does not list are not lost.
``OrderRequest`` is written and committed before an order is sent, which is what makes order
creation crash-safe.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Upper
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class OrderStatus(models.TextChoices):
    """Statuses seen upstream. Others may come: ``Order.status`` stores any string."""

    PREPARING = "preparing", _("Preparing")
    REQUIRES_PAYMENT = "requires_payment", _("Requires payment")
    PAID = "paid", _("Paid")
    COMPLETED = "completed", _("Completed")
    CANCELED = "canceled", _("Canceled")
    EXPIRED = "expired", _("Expired")
    UNKNOWN = "unknown", _("Unknown")


#: Statuses an order never leaves (api-notes.md); all others may still change upstream.
TERMINAL_STATUSES = frozenset(
    {OrderStatus.PAID, OrderStatus.COMPLETED, OrderStatus.CANCELED, OrderStatus.EXPIRED}
)


def wire_fingerprint_field() -> models.CharField:
    """The ``wire_fingerprint`` column of ``Customer`` and ``Order``.

    Why a second hash (``mirror.page_parsing``): the bytes a record came in as can be compared
    without decoding or encoding it, so a re-sync skips both for an unchanged record. Empty when
    unknown (a record from a lookup or ``create_order``, whose answer is decoded another way):
    the row is then compared by its canonical ``fingerprint``, as always. Never set apart from
    ``fingerprint``: a row's wire fingerprint is empty or the hash of bytes whose canonical text
    has the row's fingerprint.
    """
    return models.CharField(
        _("wire fingerprint"),
        max_length=32,
        blank=True,
        default="",
        db_default="",
        editable=False,
        help_text=_(
            "Hash of the record's bytes as the service last sent them, if known: a sync that "
            "gets the same bytes again skips reading them."
        ),
    )


class Customer(models.Model):
    """A remote customer (``cu_…``), as last seen in an order or a customer page."""

    id = models.CharField(_("id"), primary_key=True, max_length=64)
    guest = models.BooleanField(_("guest"), default=False)
    name = models.CharField(_("name"), max_length=255, blank=True, db_index=True)
    email_address = models.CharField(
        _("email address"), max_length=254, blank=True, default="", db_default=""
    )
    phone_number = models.CharField(
        _("phone number"), max_length=64, blank=True, default="", db_default=""
    )
    raw = models.JSONField(_("raw record"), default=dict)
    fingerprint = models.CharField(
        _("fingerprint"),
        max_length=64,
        blank=True,
        editable=False,
        help_text=_("Hash of the raw record; a sync rewrites the row only when it changes."),
    )
    wire_fingerprint = wire_fingerprint_field()
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(_("changed"), default=timezone.now)

    class Meta:
        verbose_name = _("customer")
        verbose_name_plural = _("customers")
        ordering = ["name", "id"]
        indexes = [
            # The admin's order search by e-mail (exact, any case: ``iexact``).
            models.Index(Upper("email_address"), name="orders_customer_email_idx"),
        ]

    def __str__(self) -> str:
        return self.name or self.id


class OrderQuerySet(models.QuerySet):
    def with_refunded_total(self) -> OrderQuerySet:
        """Each order with the sum of its succeeded refunds (``Order.refunded_total``), in the
        same query: a list of orders shows its refunded totals without a query per order."""
        return self.annotate(
            refunded_total_annotation=models.Sum(
                "refunds__total", filter=Q(refunds__status=RefundStatus.SUCCEEDED)
            )
        )


class Order(models.Model):
    """A remote order (``or_…``): the fields staff filter on, plus the raw record kept whole."""

    id = models.CharField(_("id"), primary_key=True, max_length=64)
    status = models.CharField(_("status"), max_length=64, choices=OrderStatus.choices)
    initiated_at = models.DateTimeField(_("initiated"))
    completed_at = models.DateTimeField(_("completed"), null=True, blank=True)
    paid_at = models.DateTimeField(_("paid"), null=True, blank=True)
    canceled_at = models.DateTimeField(_("canceled"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    # Money is an integer in the currency's minor unit (2450 "eur" = EUR 24.50), never a float.
    total = models.BigIntegerField(
        _("total"), null=True, blank=True, help_text=_("In the currency's minor unit.")
    )
    currency = models.CharField(_("currency"), max_length=16, blank=True, default="", db_default="")
    # The shop's own order number (at most 80 characters upstream; wider here, as a mirror must
    # take whatever the service sends).
    number = models.CharField(_("number"), max_length=255, blank=True, default="", db_default="")
    payment_url = models.URLField(
        _("payment page"),
        max_length=2048,
        blank=True,
        default="",
        db_default="",
        help_text=_("The hosted payment page."),
    )
    customer = models.ForeignKey(
        Customer, on_delete=models.PROTECT, related_name="orders", verbose_name=_("customer")
    )
    raw = models.JSONField(_("raw record"), default=dict)
    fingerprint = models.CharField(_("fingerprint"), max_length=64, blank=True, editable=False)
    wire_fingerprint = wire_fingerprint_field()
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(
        _("changed"),
        default=timezone.now,
        help_text=_("When the mirror last changed; an unchanged record is not rewritten."),
    )
    refreshed_at = models.DateTimeField(
        _("refreshed"), null=True, blank=True, help_text=_("Last lookup by id.")
    )
    # Orders carry no updated_at: the mirror orders the answers it stores by when their
    # requests were sent, and never lets an answer to an earlier request replace this row
    # (mirror.lifecycle).
    observed_at = models.DateTimeField(
        _("observed"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the request whose answer this row holds was sent."),
    )

    # The updated_at of the last search projection of this order the change feed settled (by
    # a lookup, or as written by the same run's window walk): a newer one means the order
    # changed upstream, even when its status and amount did not (a refund).
    search_updated_at = models.DateTimeField(
        _("search updated"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("The provider's updated_at of the last change the change feed settled."),
    )

    objects = OrderQuerySet.as_manager()

    class Meta:
        verbose_name = _("order")
        verbose_name_plural = _("orders")
        ordering = ["-initiated_at", "-id"]
        # The admin's "Cancel order" action changes the order upstream: its own permission,
        # not the change permission (which refreshing from the API uses).
        permissions = [
            ("cancel_order", _("Can cancel orders upstream")),
            # Refunding (and cancelling a pending refund) sends money back upstream.
            ("refund_order", _("Can refund orders and cancel pending refunds")),
            # Fulfilment and documents reach the customer or change refund eligibility
            # upstream: each its own permission.
            ("complete_order", _("Can mark orders fulfilled upstream")),
            ("send_receipt", _("Can send receipts to customers")),
            ("send_invoice", _("Can send invoices to customers")),
        ]
        indexes = [
            models.Index(fields=["-initiated_at", "-id"], name="orders_order_newest_idx"),
            models.Index(fields=["status", "-initiated_at"], name="orders_order_status_idx"),
            models.Index(fields=["completed_at"], name="orders_order_completed_idx"),
            # The admin: sorting by total, the currency filter, and the search by the shop's
            # number (exact; only orders that have one are indexed).
            models.Index(fields=["total"], name="orders_order_total_idx"),
            # The currency filter: its page, count and date probes, as status has its own.
            models.Index(fields=["currency", "-initiated_at"], name="orders_order_currency_idx"),
            models.Index(
                fields=["number"], name="orders_order_number_idx", condition=~Q(number="")
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def refunded_total(self) -> int:
        """The sum of this order's succeeded refunds, in the currency's minor unit.

        Annotate a list with ``Order.objects.with_refunded_total()`` (one query for all its
        orders): the annotation is used when present, else one aggregate query is made.
        """
        annotated = self.__dict__.get("refunded_total_annotation")
        if annotated is not None or "refunded_total_annotation" in self.__dict__:
            return int(annotated or 0)
        total = self.refunds.filter(status=RefundStatus.SUCCEEDED).aggregate(
            total=models.Sum("total")
        )["total"]
        return int(total or 0)


class RefundStatus(models.TextChoices):
    """Refund statuses seen upstream. Others may come: ``Refund.status`` stores any string."""

    PENDING = "pending", _("Pending")
    PROCESSING = "processing", _("Processing")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELED = "canceled", _("Canceled")


class Refund(models.Model):
    """A remote refund (``rf_…``) of some lines of a paid order, as last seen upstream.

    Refunds move asynchronously (pending, processing, then succeeded or failed; canceled only
    while pending) and only forward (``mirror.refunds``). ``raw`` keeps the record whole.
    """

    id = models.CharField(_("id"), primary_key=True, max_length=64)
    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="refunds", verbose_name=_("order")
    )
    status = models.CharField(_("status"), max_length=64, choices=RefundStatus.choices)
    total = models.BigIntegerField(_("total"), help_text=_("In the currency's minor unit."))
    currency = models.CharField(_("currency"), max_length=16)
    reason = models.CharField(_("reason"), max_length=64, blank=True, default="")
    reference = models.CharField(
        _("reference"),
        max_length=256,
        blank=True,
        default="",
        help_text=_("The shop's reconciliation reference, as the refund carries it upstream."),
    )
    failure_reason = models.CharField(_("failure reason"), max_length=64, blank=True, default="")
    failure_detail = models.TextField(_("failure detail"), blank=True, default="")
    failure_retryable = models.BooleanField(_("failure retryable"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"))
    processing_at = models.DateTimeField(_("processing"), null=True, blank=True)
    succeeded_at = models.DateTimeField(_("succeeded"), null=True, blank=True)
    failed_at = models.DateTimeField(_("failed"), null=True, blank=True)
    canceled_at = models.DateTimeField(_("canceled"), null=True, blank=True)
    raw = models.JSONField(_("raw record"), default=dict)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(_("changed"), default=timezone.now)
    refreshed_at = models.DateTimeField(
        _("confirmed by the service"),
        null=True,
        blank=True,
        help_text=_(
            "When a lookup or a page of refunds last read it from the service: the sync's "
            "refresh of refunds still moving takes the longest unconfirmed first."
        ),
    )

    class Meta:
        verbose_name = _("refund")
        verbose_name_plural = _("refunds")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["order", "status"], name="orders_refund_order_idx"),
            # The later refresh of refunds still moving (pending, processing).
            models.Index(fields=["status", "created_at"], name="orders_refund_status_idx"),
            models.Index(fields=["reference"], name="orders_refund_reference_idx"),
        ]

    def __str__(self) -> str:
        return self.id


class RemoteRecord(models.Model):
    """A record of another ``/page`` resource (balance transactions, payouts…), stored raw."""

    # A surrogate key: remote ids are unique per resource only, so a payout and a balance
    # transaction may share one; keyed by the bare id, one would overwrite the other.
    id = models.BigAutoField(primary_key=True)
    resource = models.CharField(_("resource"), max_length=64)
    remote_id = models.CharField(_("remote id"), max_length=64)
    raw = models.JSONField(_("raw record"), default=dict)
    fingerprint = models.CharField(_("fingerprint"), max_length=64, blank=True, editable=False)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(_("changed"), default=timezone.now)

    class Meta:
        verbose_name = _("remote record")
        verbose_name_plural = _("remote records")
        constraints = [
            models.UniqueConstraint(
                fields=["resource", "remote_id"], name="orders_remoterecord_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.resource} {self.remote_id}"


class OrderRequest(models.Model):
    """A write to the service (an order create, a refund create), committed BEFORE it is sent.

    The durable journal of outgoing writes: its ``idempotency_key`` is what any resend uses, so
    a timeout, a crash or a lost answer ends in one upstream record. ``payload`` is the exact
    JSON text sent, byte for byte; ``kind`` says which write it is, and ``reference`` is unique
    per kind.
    """

    class Kind(models.TextChoices):
        ORDER_CREATE = "order_create", _("Order create")
        REFUND_CREATE = "refund_create", _("Refund create")
        #: ``complete_order``: idempotent upstream, so ``resume_order_requests`` resends it.
        ORDER_COMPLETE = "order_complete", _("Order complete")

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        NEEDS_REVIEW = "needs_review", _("Needs review")

    kind = models.CharField(
        _("kind"),
        max_length=32,
        choices=Kind.choices,
        default=Kind.ORDER_CREATE,
        db_default=Kind.ORDER_CREATE,
    )
    idempotency_key = models.CharField(_("idempotency key"), max_length=255, unique=True)
    # NULL, not "": requests without a reference must not collide in the unique constraint.
    reference = models.CharField(  # noqa: DJ001
        _("reference"),
        max_length=256,
        null=True,
        blank=True,
        help_text=_(
            "The shop's own reference (a cart id, a refund's reconciliation reference); one "
            "upstream record per reference and kind."
        ),
    )
    arguments = models.JSONField(
        _("arguments"),
        default=dict,
        blank=True,
        help_text=_(
            "The call's arguments as the caller gave them (refunds): a repeat with the same "
            "reference is compared on them."
        ),
    )
    payload = models.TextField(_("payload"), help_text=_("The exact JSON body sent."))
    state = models.CharField(
        _("state"), max_length=16, choices=State.choices, default=State.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    last_status_code = models.PositiveSmallIntegerField(_("last HTTP status"), null=True)
    last_error_code = models.CharField(_("last error code"), max_length=128, blank=True)
    last_error = models.TextField(_("last error"), blank=True)
    last_error_body = models.JSONField(
        _("last error body"),
        default=dict,
        blank=True,
        help_text=_(
            "The service's error object of the last attempt, every field as sent (type, code, "
            "message, detail, url, fix_code, cause...); empty when it sent none."
        ),
    )
    last_request_id = models.CharField(_("last upstream request id"), max_length=128, blank=True)
    order = models.ForeignKey(
        Order,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("order"),
    )
    refund = models.ForeignKey(
        Refund,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("refund"),
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    last_attempt_at = models.DateTimeField(_("last sent"), null=True, blank=True)
    first_sent_at = models.DateTimeField(
        _("first sent"),
        null=True,
        blank=True,
        help_text=_(
            "The first attempt that may have reached the service; KEY_LIFETIME counts from it. "
            "Empty while no attempt can have reached it, so a resend is always safe."
        ),
    )
    next_attempt_at = models.DateTimeField(_("next attempt"), null=True, blank=True)
    claimed_until = models.DateTimeField(
        _("claimed until"),
        null=True,
        blank=True,
        help_text=_("A worker sending this request holds it until then; no other sends it."),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("order request")
        verbose_name_plural = _("order requests")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="orders_request_due_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "reference"], name="orders_request_kind_reference_unique"
            )
        ]

    def __str__(self) -> str:
        return self.reference or self.idempotency_key


class OrderClaim(models.Model):
    """Who may prepare a write that depends on an order's current state (a refund's amounts).

    Taken with one conditional UPDATE and released right after the request is stored, so no
    transaction is held across the lookup the write depends on (``refunds.claims``).
    """

    order_id = models.CharField(_("order id"), primary_key=True, max_length=64)
    claimed_until = models.DateTimeField(_("claimed until"), null=True, blank=True)

    class Meta:
        verbose_name = _("order claim")
        verbose_name_plural = _("order claims")

    def __str__(self) -> str:
        return self.order_id


class DocumentDelivery(models.Model):
    """One send of an order's receipt or invoice (``send_receipt``, ``send_invoice``).

    Stored with its own key BEFORE it is sent, so a send whose answer is lost stays visible as
    ``unknown``. Unlike ``OrderRequest`` rows, a delivery is never resent automatically: a
    second send may reach the customer twice, so staff decide (a new send is a new delivery).
    """

    class Document(models.TextChoices):
        RECEIPT = "receipt", _("Receipt")
        INVOICE = "invoice", _("Invoice")

    class State(models.TextChoices):
        UNKNOWN = "unknown", _("Outcome unknown")
        DELIVERED = "delivered", _("Delivered")
        PARTLY_DELIVERED = "partly_delivered", _("Partly delivered")
        NOT_DELIVERED = "not_delivered", _("Not delivered")
        FAILED = "failed", _("Not sent")

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="deliveries", verbose_name=_("order")
    )
    document = models.CharField(_("document"), max_length=16, choices=Document.choices)
    idempotency_key = models.CharField(_("idempotency key"), max_length=255, unique=True)
    state = models.CharField(
        _("state"),
        max_length=32,
        choices=State.choices,
        default=State.UNKNOWN,
        help_text=_(
            "Unknown until the provider answers; a send with no answer stays unknown (check "
            "with the customer before sending again)."
        ),
    )
    sent_channels = models.JSONField(_("sent channels"), default=list, blank=True)
    failures = models.JSONField(
        _("failed channels"),
        default=list,
        blank=True,
        help_text=_("[{channel, error}]: each failed channel with the provider's error."),
    )
    document_url = models.URLField(_("document link"), max_length=2048, blank=True, default="")
    error_code = models.CharField(_("error code"), max_length=128, blank=True, default="")
    error = models.TextField(_("error"), blank=True, default="")
    request_id = models.CharField(_("upstream request id"), max_length=128, blank=True, default="")
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    answered_at = models.DateTimeField(_("answered"), null=True, blank=True)

    class Meta:
        verbose_name = _("document delivery")
        verbose_name_plural = _("document deliveries")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["order", "-created_at"], name="orders_delivery_order_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.document} of {self.order_id} ({self.state})"

    @property
    def failed_channels(self) -> list[str]:
        return [str(f.get("channel")) for f in self.failures if isinstance(f, dict)]


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
        return (
            f"service: {bound}{self.service_total:,} {self.resource}; mirror: {self.mirror_total:,}"
        )


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


class PaymentWatch(models.Model):
    """The one payment watcher of an order (``django_orders.tasks.watch_payment``).

    The row is the claim: a run of the watcher takes it with one conditional UPDATE on
    (``lookups``, ``claimed_until``), so two enqueues of the same step, or a stale task from an
    earlier step, never make two watchers look the same order up.
    """

    order = models.OneToOneField(
        Order,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="payment_watch",
        verbose_name=_("order"),
    )
    started_at = models.DateTimeField(_("started"), default=timezone.now)
    lookups = models.PositiveSmallIntegerField(_("lookups"), default=0)
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

    def __str__(self) -> str:
        return f"payment watch of {self.order_id}"


class RefundApiKey(models.Model):
    """An ``Idempotency-Key`` of the REST API's refund POST, bound to the request it came with.

    Kept here and never sent: the key and who sent it are the shop's business, not the
    provider's (the refund's own ``reference`` is what the provider sees). The row is taken
    with one INSERT before ``refund_order`` runs, so two requests with one key never both
    refund: the second finds the row (another body: a conflict; the same body while the first
    is running: in progress, ``claimed_until``).
    """

    #: The caller-scoped key (``rest.idempotency.scoped_reference``).
    key = models.CharField(_("idempotency key"), max_length=255)
    #: The refund's reference: one key per reference.
    reference = models.CharField(_("reference"), max_length=256)
    order_id = models.CharField(_("order id"), max_length=64)
    #: SHA-256 of the request (order and body) the key was first used with.
    fingerprint = models.CharField(_("request fingerprint"), max_length=64)
    claimed_until = models.DateTimeField(_("claimed until"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("refund API key")
        verbose_name_plural = _("refund API keys")
        # Constraints, not unique=True: no PostgreSQL prefix-search ("_like") index beside.
        constraints = [
            models.UniqueConstraint(fields=["key"], name="orders_refund_api_key_uniq"),
            models.UniqueConstraint(fields=["reference"], name="orders_refund_api_ref_uniq"),
        ]

    def __str__(self) -> str:
        return f"refund API key for {self.reference}"


APPEND_ONLY = (
    "OrderEvent is append-only: a timeline entry is never changed (old ones are deleted by "
    "the prune_order_events command)."
)


class OrderEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError(APPEND_ONLY)

    def bulk_update(self, objs, fields, batch_size=None):
        # Refused before Django's own atomic block: raising inside it would break the caller's.
        raise TypeError(APPEND_ONLY)


class OrderEvent(models.Model):
    """One entry of an order's timeline: what happened to it, when, and who or what saw it.

    Append-only: written in the same transaction as the change it records, from one place per
    kind (``mirror.events``), never updated (``save()`` refuses an existing row, ``update()``
    raises); only ``prune_order_events`` deletes old entries. A first sync writes none for the
    orders it discovers: the order's row is that fact. ``order_status_changed`` and
    ``refund_status_changed`` are sent from these entries after commit.
    """

    class Kind(models.TextChoices):
        STATUS_CHANGED = "status_changed", _("Status changed")
        REFUND_STATUS_CHANGED = "refund_status_changed", _("Refund status changed")
        #: An attempt of an ``OrderRequest`` (any kind) and its outcome, in ``to_status``.
        REQUEST = "request", _("Request sent")
        DOCUMENT_SENT = "document_sent", _("Document sent")
        STAFF_ACTION = "staff_action", _("Staff action")

    class Source(models.TextChoices):
        PAGE = "page", _("Sync (page)")
        FEED = "feed", _("Sync (change feed)")
        LOOKUP = "lookup", _("Lookup")
        CHECKOUT = "checkout", _("Checkout")
        STAFF = "staff", _("Staff")
        SHOP = "shop", _("Shop code")
        RESUME = "resume", _("Resumed request")

    id = models.BigAutoField(primary_key=True)
    # Indexed with the time (orders_event_timeline_idx), not alone.
    order = models.ForeignKey(
        Order,
        on_delete=models.CASCADE,
        related_name="events",
        verbose_name=_("order"),
        db_index=False,
    )
    at = models.DateTimeField(_("time"), default=timezone.now)
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    source = models.CharField(_("source"), max_length=16, choices=Source.choices)
    # NULL: no status before (a refund the mirror had not seen), or no status involved.
    from_status = models.CharField(_("from"), max_length=64, null=True, blank=True)  # noqa: DJ001
    to_status = models.CharField(_("to"), max_length=64, blank=True, default="")
    # The timeline outlives what it mentions and nothing reads it by refund or request: no
    # constraint, no index (each would slow a page's events), never cascaded.
    refund = models.ForeignKey(
        Refund,
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
        verbose_name=_("refund"),
    )
    order_request = models.ForeignKey(
        OrderRequest,
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
        verbose_name=_("order request"),
    )
    # The staff user's username, kept as it was: the entry stays true if the user is renamed
    # or deleted, and the app needs no dependency on the user model.
    actor = models.CharField(_("staff user"), max_length=150, blank=True, default="")
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    objects = OrderEventQuerySet.as_manager()

    class Meta:
        verbose_name = _("order event")
        verbose_name_plural = _("order events")
        ordering = ["-at", "-id"]
        indexes = [
            # The order page's timeline, newest first, in one index range.
            models.Index(fields=["order", "-at", "-id"], name="orders_event_timeline_idx"),
            # prune_order_events: the old entries, by time.
            models.Index(fields=["at"], name="orders_event_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.order_id} {self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError(APPEND_ONLY)
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)
