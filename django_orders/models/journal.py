"""The durable records of the shop's own writes, each stored before it is sent: order and
refund requests, the per-order claim, document deliveries and the REST refund keys."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


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
        #: ``ensure_customer``: one create per shop reference (its row is the reference's
        #: claim too), updates of changed fields after it.
        CUSTOMER_CREATE = "customer_create", _("Customer create")
        CUSTOMER_UPDATE = "customer_update", _("Customer update")
        #: ``record_offline_payment``: one key per order.
        ORDER_PAY = "order_pay", _("Order paid out of band")

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
        "django_orders.Order",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("order"),
    )
    refund = models.ForeignKey(
        "django_orders.Refund",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("refund"),
    )
    customer = models.ForeignKey(
        "django_orders.Customer",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name=_("customer"),
        help_text=_("The customer a customer create or update made or changed."),
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
        "django_orders.Order",
        on_delete=models.PROTECT,
        related_name="deliveries",
        verbose_name=_("order"),
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


class RefundApiKey(models.Model):
    """An ``Idempotency-Key`` of the REST API's refund POST, bound to the request it came with.

    Kept here and never sent: the key and who sent it are the shop's business, not the
    provider's (the refund's own ``reference`` is what the provider sees). The row is taken
    with one INSERT before ``refund_order`` runs, so two requests with one key never both
    refund: the second finds the row (another body: a conflict; the same body while the first
    is running: in progress, ``claimed_until``).
    """

    #: The caller-scoped key (``rest.access.scoped_reference``).
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
