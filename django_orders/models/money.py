"""The money after settlement: payouts, the balance transactions they are made of, balance
snapshots, and what reconciliation found (DESIGN.md, "Reconciliation").

Amounts are stored unsigned, as the provider sends them, in the currency's minor unit. A
transaction keeps the order and refund ids it names even while the mirror lacks them (foreign
keys without a database constraint): reconciliation reports those as "cannot verify" or
``unknown_order`` instead of the row being refused.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def _minor_units(label: Any, *, null: bool = False) -> models.BigIntegerField:
    return models.BigIntegerField(
        label, null=null, blank=null, help_text=_("In the currency's minor unit, unsigned.")
    )


class PayoutStatus(models.TextChoices):
    """Payout statuses of the provider's contract; ``Payout.status`` stores any string."""

    INITIALIZED = "initialized", _("Initialized")
    SCHEDULED = "scheduled", _("Scheduled")
    PROCESSING = "processing", _("Processing")
    EXECUTING = "executing", _("Executing")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELED = "canceled", _("Canceled")


class Payout(models.Model):
    """A payout (``po_…``) from the provider's balance to the shop's bank account."""

    id = models.CharField(_("id"), primary_key=True, max_length=64)
    status = models.CharField(_("status"), max_length=64, choices=PayoutStatus.choices)
    amount = _minor_units(_("amount"), null=True)
    currency = models.CharField(_("currency"), max_length=16, blank=True, default="")
    reference = models.CharField(_("reference"), max_length=256, blank=True, default="")
    debit_transaction_id = models.CharField(
        _("debit transaction"),
        max_length=64,
        blank=True,
        default="",
        help_text=_("The payout's own debit balance transaction (not one of its items)."),
    )
    initiated_at = models.DateTimeField(_("initiated"))
    expected_at = models.DateTimeField(_("expected"), null=True, blank=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)
    succeeded_at = models.DateTimeField(_("succeeded"), null=True, blank=True)
    failed_at = models.DateTimeField(_("failed"), null=True, blank=True)
    canceled_at = models.DateTimeField(_("canceled"), null=True, blank=True)
    failure_reason = models.CharField(_("failure reason"), max_length=64, blank=True, default="")
    failure_detail = models.TextField(_("failure detail"), blank=True, default="")
    failure_retryable = models.BooleanField(_("failure retryable"), null=True, blank=True)
    raw = models.JSONField(_("raw record"), default=dict)
    #: The canonical record's hash: a record that comes again unchanged is not written.
    fingerprint = models.CharField(_("fingerprint"), max_length=64, blank=True, editable=False)
    #: The search ``updated_at`` the mirror last settled (``sync_orders --backfill``).
    search_updated_at = models.DateTimeField(_("search updated"), null=True, blank=True)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(_("changed"), default=timezone.now)

    class Meta:
        verbose_name = _("payout")
        verbose_name_plural = _("payouts")
        ordering = ["-initiated_at", "-id"]
        permissions = [("export_payouts", _("Can export payouts as CSV"))]
        indexes = [
            models.Index(fields=["-initiated_at", "-id"], name="orders_payout_newest_idx"),
            models.Index(fields=["status", "-initiated_at"], name="orders_payout_status_idx"),
            models.Index(
                fields=["reference"], name="orders_payout_reference_idx", condition=~Q(reference="")
            ),
        ]

    def __str__(self) -> str:
        return self.id


class TransactionType(models.TextChoices):
    """What caused a balance transaction (not its direction: amounts are unsigned)."""

    PAYMENT = "payment", _("Payment")
    REFUND = "refund", _("Refund")
    PAYOUT = "payout", _("Payout")


class BalanceTransaction(models.Model):
    """A balance transaction: a payment credited, a refund or a payout debited."""

    id = models.CharField(_("id"), primary_key=True, max_length=64)
    type = models.CharField(_("type"), max_length=32, choices=TransactionType.choices)
    amount = _minor_units(_("amount"))
    currency = models.CharField(_("currency"), max_length=16)
    # No database constraint: the id is kept while the mirror lacks the order or refund.
    # By label, not by class: this module imports no other model module (a shallow import graph).
    order = models.ForeignKey(
        "django_orders.Order",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        blank=True,
        related_name="balance_transactions",
        verbose_name=_("order"),
    )
    refund = models.ForeignKey(
        "django_orders.Refund",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        blank=True,
        related_name="balance_transactions",
        verbose_name=_("refund"),
    )
    payment_id = models.CharField(_("payment id"), max_length=64, blank=True, default="")
    payout_id = models.CharField(
        _("payout id"),
        max_length=64,
        blank=True,
        default="",
        help_text=_("The payout a payout debit belongs to."),
    )
    created_at = models.DateTimeField(_("created"))
    available_at = models.DateTimeField(_("available"), null=True, blank=True)
    available_amount = _minor_units(_("available amount"), null=True)
    pending_amount = _minor_units(_("pending amount"), null=True)
    spent_amount = _minor_units(_("spent amount"), null=True)
    # The pending allocations, summed when the record is read: what a balance snapshot's
    # ``refund`` and ``reserved`` are compared with, without reading JSON in SQL.
    pending_refund_amount = models.BigIntegerField(_("pending refund allocations"), default=0)
    pending_payout_amount = models.BigIntegerField(_("pending payout allocations"), default=0)
    raw = models.JSONField(_("raw record"), default=dict)
    #: The canonical record's hash: a record that comes again unchanged is not written.
    fingerprint = models.CharField(_("fingerprint"), max_length=64, blank=True, editable=False)
    first_seen_at = models.DateTimeField(_("first seen"), default=timezone.now)
    changed_at = models.DateTimeField(_("changed"), default=timezone.now)

    class Meta:
        verbose_name = _("balance transaction")
        verbose_name_plural = _("balance transactions")
        ordering = ["-created_at", "-id"]
        permissions = [("export_balance_transactions", _("Can export balance transactions as CSV"))]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="orders_txn_newest_idx"),
            models.Index(fields=["type", "-created_at"], name="orders_txn_type_idx"),
            # Reconciliation: an order's payment transactions, a refund's transaction.
            models.Index(fields=["order", "type"], name="orders_txn_order_idx"),
            models.Index(
                fields=["refund"], name="orders_txn_refund_idx", condition=Q(refund__isnull=False)
            ),
            models.Index(fields=["currency", "created_at"], name="orders_txn_currency_idx"),
        ]

    def __str__(self) -> str:
        return self.id


class PayoutItem(models.Model):
    """One entry of a payout's ``balance_transactions[]``: what one transaction gave to it."""

    payout = models.ForeignKey(
        Payout, on_delete=models.CASCADE, related_name="items", verbose_name=_("payout")
    )
    # The payout names it; the mirror may not hold it yet ("cannot verify" until it does).
    transaction = models.ForeignKey(
        BalanceTransaction,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="payout_items",
        verbose_name=_("balance transaction"),
    )
    amount = _minor_units(_("amount"))
    allocated_amount = _minor_units(_("allocated amount"))
    currency = models.CharField(_("currency"), max_length=16)
    position = models.PositiveIntegerField(_("position"), default=0)

    class Meta:
        verbose_name = _("payout item")
        verbose_name_plural = _("payout items")
        ordering = ["payout", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["payout", "transaction"], name="orders_payoutitem_unique"
            )
        ]
        indexes = [models.Index(fields=["transaction"], name="orders_payoutitem_txn_idx")]

    def __str__(self) -> str:
        return f"{self.payout_id} {self.transaction_id}"


class BalanceSnapshot(models.Model):
    """One currency of a ``/balances`` answer: the provider's sums at a cut-off time."""

    taken_at = models.DateTimeField(_("taken"), default=timezone.now)
    currency = models.CharField(_("currency"), max_length=16)
    available = models.BigIntegerField(_("available"))
    pending = models.BigIntegerField(_("pending"))
    refund = models.BigIntegerField(_("refund"))
    reserved = models.BigIntegerField(_("reserved"))
    includes_transactions_before = models.DateTimeField(_("includes transactions before"))
    raw = models.JSONField(_("raw record"), default=dict)

    class Meta:
        verbose_name = _("balance snapshot")
        verbose_name_plural = _("balance snapshots")
        ordering = ["-taken_at", "-id"]
        indexes = [models.Index(fields=["currency", "-taken_at"], name="orders_balance_latest_idx")]

    def __str__(self) -> str:
        return f"{self.currency} {self.taken_at:%Y-%m-%d %H:%M}"


class DiscrepancyKind(models.TextChoices):
    """The stable kinds of DESIGN.md; docs/reconciliation.md says what staff do about each."""

    PAID_ORDER_WITHOUT_PAYMENT = "paid_order_without_payment", _("Paid order without payment")
    AMOUNT_MISMATCH = "amount_mismatch", _("Amount mismatch")
    REFUND_WITHOUT_TRANSACTION = "refund_without_transaction", _("Refund without transaction")
    PAYOUT_TOTAL_MISMATCH = "payout_total_mismatch", _("Payout total mismatch")
    PAYOUT_FAILED = "payout_failed", _("Payout failed")
    UNKNOWN_ORDER = "unknown_order", _("Unknown order")
    OVER_REFUNDED = "over_refunded", _("Over-refunded")
    BALANCE_MISMATCH = "balance_mismatch", _("Balance mismatch")


class Discrepancy(models.Model):
    """One thing that does not add up, one row per object and kind (``key``), kept across
    runs: a re-run updates it, and resolves it when the data agree again."""

    kind = models.CharField(_("kind"), max_length=64, choices=DiscrepancyKind.choices)
    key = models.CharField(_("key"), max_length=200, unique=True)
    object_id = models.CharField(
        _("object"), max_length=64, help_text=_("The order, refund, payout id, or currency.")
    )
    amount = models.BigIntegerField(
        _("amount"), null=True, blank=True, help_text=_("What is at stake, in minor units.")
    )
    currency = models.CharField(_("currency"), max_length=16, blank=True, default="")
    detail = models.TextField(_("detail"), blank=True, default="")
    occurred_at = models.DateTimeField(
        _("occurred"), help_text=_("When the object it is about happened (the reconcile range).")
    )
    first_seen_at = models.DateTimeField(_("first seen"))
    last_seen_at = models.DateTimeField(_("last seen"))
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("resolved by"),
    )
    note = models.TextField(_("note"), blank=True, default="")

    class Meta:
        verbose_name = _("discrepancy")
        verbose_name_plural = _("discrepancies")
        ordering = ["-last_seen_at", "-id"]
        permissions = [("resolve_discrepancy", _("Can mark discrepancies resolved"))]
        indexes = [
            models.Index(fields=["-last_seen_at", "-id"], name="orders_discrepancy_newest_idx"),
            models.Index(
                fields=["kind", "occurred_at"],
                name="orders_discrepancy_open_idx",
                condition=Q(resolved_at__isnull=True),
            ),
            models.Index(fields=["occurred_at"], name="orders_discrepancy_range_idx"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class ReconciliationRun(models.Model):
    """What one ``reconcile()`` found: counts of open, new and resolved discrepancies in its
    range, and of what the mirror could not verify (by reason)."""

    started_at = models.DateTimeField(_("started"))
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    since = models.DateTimeField(_("since"), null=True, blank=True)
    until = models.DateTimeField(_("until"), null=True, blank=True)
    open = models.PositiveIntegerField(_("open"), default=0)
    new = models.PositiveIntegerField(_("new"), default=0)
    resolved = models.PositiveIntegerField(_("resolved"), default=0)
    cannot_verify = models.PositiveIntegerField(_("cannot verify"), default=0)
    open_by_kind = models.JSONField(_("open by kind"), default=dict)
    cannot_verify_by_reason = models.JSONField(_("cannot verify by reason"), default=dict)

    class Meta:
        verbose_name = _("reconciliation run")
        verbose_name_plural = _("reconciliation runs")
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["-started_at"], name="orders_reconcile_newest_idx")]

    def __str__(self) -> str:
        return f"{self.started_at:%Y-%m-%d %H:%M}: {self.open} open"
