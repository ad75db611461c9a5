"""The order's timeline, append-only."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

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
        "django_orders.Order",
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
        "django_orders.Refund",
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
        verbose_name=_("refund"),
    )
    order_request = models.ForeignKey(
        "django_orders.OrderRequest",
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
