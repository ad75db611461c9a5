"""Events out: the durable outbox (``OutboxEvent``), the shop's subscribers (``WebhookEndpoint``)
and one delivery of one event to one subscriber (``EventDelivery``).

An event is written in the transaction of the mirror change it reports, with its deliveries
(``mirror.outbox``: fan-out on write), and lives apart from the timeline: ``OrderEvent`` rows are
pruned and always belong to an order, an event outlives pruning until it is delivered and a
request that never made an order still has one. Why and how: docs/events.md.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class EventType(models.TextChoices):
    """The event types (DESIGN.md, "Events out"); ``webhook.test`` is the admin's test event."""

    ORDER_CREATED = "order.created", _("Order created here")
    ORDER_FIRST_SEEN = "order.first_seen", _("Order first seen by the mirror")
    ORDER_PAID = "order.paid", _("Order paid")
    ORDER_COMPLETED = "order.completed", _("Order completed")
    ORDER_CANCELED = "order.canceled", _("Order canceled")
    ORDER_EXPIRED = "order.expired", _("Order expired")
    REFUND_CREATED = "refund.created", _("Refund created")
    REFUND_SUCCEEDED = "refund.succeeded", _("Refund succeeded")
    REFUND_FAILED = "refund.failed", _("Refund failed")
    REFUND_CANCELED = "refund.canceled", _("Refund canceled")
    DOCUMENT_SENT = "document.sent", _("Document sent")
    REQUEST_NEEDS_REVIEW = "request.needs_review", _("Request needs review")
    WEBHOOK_TEST = "webhook.test", _("Test event")


#: What ``event_types=None`` subscribes to: every type but the history of a first sync.
DEFAULT_EXCLUDED = frozenset({EventType.ORDER_FIRST_SEEN, EventType.WEBHOOK_TEST})
#: ``WebhookEndpoint.subscribed`` for ``event_types=None``.
ALL_TYPES = "*"


def subscribed_text(event_types: list[str] | None) -> str:
    """The endpoint's ``subscribed`` column: ``*`` for the default, else the types between
    spaces (`` order.paid refund.created ``), which the fan-out's ``INSERT … SELECT`` matches
    with a substring test on any database."""
    if event_types is None:
        return ALL_TYPES
    return " " + " ".join(sorted(set(event_types))) + " "


class WebhookEndpoint(models.Model):
    """A subscriber's URL and its signing secret.

    The secret is stored as written (``whsec_`` and base64): it must be usable to sign every
    delivery, and encrypting it with a key derived from ``SECRET_KEY`` would only move the
    secret next to the key that opens it while making every endpoint unusable on a
    ``SECRET_KEY`` rotation. It is never shown again after creation: the admin has no field for
    it, ``repr``/``str`` leave it out, and no log or error names it (docs/events.md).
    """

    id = models.BigAutoField(primary_key=True)
    url = models.URLField(_("URL"), max_length=2000)
    description = models.CharField(_("description"), max_length=200, blank=True, default="")
    #: The types sent to it; ``None``: every type but ``order.first_seen``.
    event_types = models.JSONField(_("event types"), null=True, blank=True, default=None)
    #: Derived from ``event_types`` on save (``subscribed_text``): what the fan-out matches.
    subscribed = models.TextField(editable=False, default=ALL_TYPES)
    secret = models.CharField(max_length=100, editable=False)
    previous_secret = models.CharField(max_length=100, editable=False, blank=True, default="")
    #: Until when ``previous_secret`` still signs (``WEBHOOK_SECRET_OVERLAP`` after a rotation).
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    is_active = models.BooleanField(_("active"), default=True)
    #: Why it was disabled (a 410 answer, or staff); cleared when it is enabled again.
    disabled_reason = models.CharField(_("disabled because"), max_length=300, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")
        ordering = ["id"]

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:  # never the secret
        return f"<WebhookEndpoint {self.pk}: {self.url}>"

    def save(self, *args, **kwargs):
        self.subscribed = subscribed_text(self.event_types)
        if self.is_active:
            self.disabled_reason = ""
        update_fields = kwargs.get("update_fields")
        if update_fields is not None:
            kwargs["update_fields"] = {*update_fields, "subscribed", "disabled_reason"}
        super().save(*args, **kwargs)

    def signing_secrets(self, now=None) -> list[str]:
        """The secrets that sign now: the current one, and the previous one during its overlap."""
        now = now or timezone.now()
        secrets = [self.secret]
        if self.previous_secret and self.previous_secret_until and self.previous_secret_until > now:
            secrets.append(self.previous_secret)
        return secrets


class OutboxEvent(models.Model):
    """One event as it was written: its stored ``webhook_id`` (the ``webhook-id`` header, the
    same on every retry, replay and endpoint), its type and its body, the exact JSON sent
    (``{"type", "timestamp", "data"}``, a snapshot taken when it was written)."""

    id = models.BigAutoField(primary_key=True)
    webhook_id = models.CharField(_("event id"), max_length=40, unique=True)
    type = models.CharField(_("type"), max_length=40, choices=EventType.choices)
    # Outlives what it names (the mirror's rows are never deleted, but nothing here depends on it).
    order = models.ForeignKey(
        "django_orders.Order",
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
        verbose_name=_("order"),
    )
    refund_id = models.CharField(_("refund"), max_length=64, blank=True, default="")
    created_at = models.DateTimeField(_("time"), default=timezone.now)
    body = models.TextField(_("body"))

    class Meta:
        verbose_name = _("outgoing event")
        verbose_name_plural = _("outgoing events")
        ordering = ["-id"]
        indexes = [models.Index(fields=["created_at"], name="orders_outbox_created_idx")]

    def __str__(self) -> str:
        return f"{self.webhook_id} {self.type}"


class EventDelivery(models.Model):
    """One event to one target: an endpoint, or an ``EVENT_RECEIVERS`` function (``receiver``).

    ``target`` (the endpoint's id, or ``receiver:`` and the path) with ``order_key`` orders the
    claims: only the oldest undelivered event of an order goes out to a target at a time.
    ``claimed_until`` is the claim of a runner (a row, no lock): a killed runner's deliveries
    are taken up again once it passes. ``attempts`` counts claims.
    """

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        FAILED = "failed", _("Failed, retrying")
        DELIVERED = "delivered", _("Delivered")
        DEAD = "dead", _("Dead")

    id = models.BigAutoField(primary_key=True)
    event = models.ForeignKey(
        OutboxEvent, on_delete=models.CASCADE, related_name="deliveries", verbose_name=_("event")
    )
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="deliveries",
        verbose_name=_("endpoint"),
    )
    receiver = models.CharField(_("receiver"), max_length=200, blank=True, default="")
    target = models.CharField(max_length=210, editable=False)
    #: The event's order (``""`` for none: no ordering with other events then).
    order_key = models.CharField(max_length=64, blank=True, default="", editable=False)
    event_type = models.CharField(_("type"), max_length=40, choices=EventType.choices)
    state = models.CharField(
        _("state"), max_length=16, choices=State.choices, default=State.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    next_attempt_at = models.DateTimeField(_("next attempt"), default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    claim = models.CharField(max_length=32, blank=True, default="", editable=False)
    last_status = models.PositiveIntegerField(_("last status"), null=True, blank=True)
    last_error = models.TextField(_("last error"), blank=True, default="")
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)
    #: Released by the dead letter of the event before it (same order, same target).
    follows_dead = models.BooleanField(_("after a dead letter"), default=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("event delivery")
        verbose_name_plural = _("event deliveries")
        ordering = ["-id"]
        permissions = [("replay_eventdelivery", "Can retry and replay event deliveries")]
        indexes = [
            # The runner's due deliveries.
            models.Index(
                fields=["next_attempt_at", "event"],
                name="orders_delivery_due_idx",
                condition=Q(state__in=["pending", "failed"]),
            ),
            # The claim's "nothing older of this order undelivered to this target".
            models.Index(
                fields=["target", "order_key", "event"],
                name="orders_delivery_chain_idx",
                condition=Q(state__in=["pending", "failed"]),
            ),
            models.Index(fields=["state", "endpoint"], name="orders_delivery_state_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint or self.receiver}: {self.state}"
