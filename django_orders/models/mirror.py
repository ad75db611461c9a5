"""The mirror of the provider's records: customers, orders, their refunds, and the raw records
of other resources. Rows are keyed by the remote id and keep the raw record whole, so fields the
spec does not list are not lost."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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

    Why a second hash (``mirror.resources.orders``): the bytes a record came in as can be compared
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
    # NULL, not "": the shop's customers only; written by ensure_customer (and when it adopts a
    # synced record with that reference), never by the order walks, which do not carry it.
    reference = models.CharField(  # noqa: DJ001
        _("shop reference"),
        max_length=100,
        null=True,
        blank=True,
        help_text=_("The shop's own reference for this customer (ensure_customer)."),
    )
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
            # ensure_customer's look-up by the shop's reference (exact): a Meta index, not
            # db_index, which on PostgreSQL adds a prefix-search twin the mirror never uses.
            models.Index(fields=["reference"], name="orders_customer_reference_idx"),
        ]

    def __str__(self) -> str:
        return self.name or self.id


@dataclass(frozen=True)
class OrderLineItem:
    """One line of an order as its stored record holds it, with what is left to refund.

    Amounts are integers in the order currency's minor unit. ``refunded`` is what the mirrored
    refunds that count against the line (pending, processing or succeeded) take off it, and
    ``refundable`` is ``paid`` minus that, never below zero. Advisory: ``refund_order`` checks
    again against a fresh lookup and this shop's refund requests still in flight.
    """

    id: str
    type: str
    name: str
    quantity: int
    paid: int
    refunded: int
    refundable: int


def _line_of(item: Any) -> tuple[str, str, str, int, int] | None:
    """(id, type, name, quantity, paid) of one raw line, or None for a line it cannot read."""
    kind = item.get("type") if isinstance(item, Mapping) else None
    body = item.get(kind) if isinstance(kind, str) else None
    if not isinstance(body, Mapping) or not isinstance(body.get("id"), str):
        return None
    if kind == "product":
        price, quantity = body.get("price") or {}, body.get("quantity", 1)
    else:
        price, quantity = (body.get("amount") if kind == "fee" else body.get("fee")) or {}, 1
    value = price.get("value") if isinstance(price, Mapping) else None
    if type(value) is not int or type(quantity) is not int:
        return None
    name = next(
        (str(body[k]) for k in ("name", "label", "description") if isinstance(body.get(k), str)),
        str(kind),
    )
    return str(body["id"]), str(kind), name, quantity, value * quantity


def refunded_by_line(refunds: Iterable[Refund]) -> Counter[str]:
    """Per order line id, what the refunds that count take off it (from their raw lines)."""
    used: Counter[str] = Counter()
    for refund in refunds:
        if refund.status not in COUNTED_REFUND_STATUSES or not isinstance(refund.raw, Mapping):
            continue
        for line in refund.raw.get("line_items") or []:
            try:
                used[line["order_line_item_id"]] += int(line["refund_amount"]["value"])
            except (KeyError, TypeError, ValueError):
                continue
    return used


def order_line_items(raw: Any, refunds: Iterable[Refund]) -> list[OrderLineItem]:
    """The lines of an order's raw record, each with what ``refunds`` leave to refund.

    ``Order.line_items`` with the refunds given (a page that has loaded them already); lines the
    record does not describe readably (no id, no integer amount) are left out.
    """
    group = raw.get("line_item_group") if isinstance(raw, Mapping) else None
    items = group.get("line_items") if isinstance(group, Mapping) else None
    used = refunded_by_line(refunds)
    lines = []
    for item in items if isinstance(items, list) else []:
        line = _line_of(item)
        if line is not None:
            line_id, kind, name, quantity, paid = line
            refunded = used[line_id]
            lines.append(
                OrderLineItem(
                    line_id, kind, name, quantity, paid, refunded, max(paid - refunded, 0)
                )
            )
    return lines


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
    # (mirror.store).
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
            # The accounting export (django_orders.exports): every order at once, so its own
            # permission rather than the view permission.
            ("export_orders", _("Can export orders as CSV")),
            # A cash or bank payment marks the order paid upstream: money staff vouch for.
            ("record_offline_payment", _("Can record cash or bank payments of orders")),
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
    def line_items(self) -> list[OrderLineItem]:
        """The order's lines from the stored record: id (``oli_…``), type, name, quantity, and
        paid, refunded and refundable in minor units (``OrderLineItem``).

        What ``refund_order(lines=[{"line_item_id": line.id, "amount": ...}])`` takes. One
        query for the order's refunds (none after ``prefetch_related("refunds")``).
        """
        return order_line_items(self.raw, self.refunds.all())

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


#: Refund statuses that take from a line's remainder (as the service counts them).
COUNTED_REFUND_STATUSES = frozenset(
    {RefundStatus.PENDING, RefundStatus.PROCESSING, RefundStatus.SUCCEEDED}
)


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

    #: Where a refund stands, as the service last reported it: what the admin's page and the
    #: REST API both show after its amount and reference, in this order.
    OUTCOME_FIELDS = (
        "failure_reason",
        "failure_detail",
        "failure_retryable",
        "created_at",
        "processing_at",
        "succeeded_at",
        "failed_at",
        "canceled_at",
    )

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
        permissions = [("export_refunds", _("Can export refunds as CSV"))]
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
    # As ``Order.search_updated_at``, for a resource with a search index (customers): the
    # updated_at of the last projection a backfill settled; a newer one means it changed.
    search_updated_at = models.DateTimeField(
        _("search updated"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("The provider's updated_at of the last change the backfill settled."),
    )

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
