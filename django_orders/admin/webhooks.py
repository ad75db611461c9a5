"""Events out in the admin: the webhook endpoints (the secret shown once, on creation; "Send
test event"), the deliveries (filters by state, endpoint and type; "Retry now", "Replay" to
the same endpoint, a "Dead letters" link with their count) and the outgoing events."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .. import services
from ..models import EventDelivery, OutboxEvent, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """Endpoints are created through ``create_webhook_endpoint`` (its checks, its secret): the
    secret appears once, in the message after saving, and never on any page."""

    list_display = ("url", "description", "event_types", "is_active", "disabled_reason")
    list_filter = ("is_active",)
    fields = ("url", "description", "event_types", "is_active", "disabled_reason")
    readonly_fields = ("disabled_reason",)
    actions = ["send_test_event", "rotate_secret"]

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # An endpoint typed without a scheme is an https one (Django 6's default; 5.2 warns
        # until it is named).
        if db_field.name == "url":
            kwargs["assume_scheme"] = "https"
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool):
        if change:
            super().save_model(request, obj, form, change)
            return
        try:
            endpoint, secret = services.create_webhook_endpoint(
                obj.url, event_types=obj.event_types, description=obj.description
            )
        except services.InvalidWebhookEndpoint as exc:
            messages.error(request, str(exc))
            return
        obj.pk = endpoint.pk
        messages.warning(
            request,
            f"The signing secret of {endpoint.url}, shown only this once: {secret}",
        )

    @admin.action(description="Send test event")
    def send_test_event(self, request: HttpRequest, queryset: QuerySet) -> None:
        for endpoint in queryset:
            services.send_test_event(endpoint)
        messages.success(request, f"Test events written for {queryset.count()} endpoint(s).")

    @admin.action(description="Rotate the signing secret (the old one signs for the overlap)")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet) -> None:
        for endpoint in queryset:
            secret = services.rotate_webhook_secret(endpoint)
            messages.warning(request, f"New secret of {endpoint.url}, shown only once: {secret}")


class DeadLetterFilter(admin.SimpleListFilter):
    """One link to the deliveries that gave up (``dead``: no attempt left), with how many there
    are, the first thing staff look for; "Retry now" or "Replay" from there. One ``COUNT``."""

    title = _("dead letters")
    parameter_name = "dead_letters"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        dead = model_admin.get_queryset(request).filter(state=EventDelivery.State.DEAD).count()
        return [("only", f"{_('Dead letters')} ({dead:,})")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "only":
            return queryset.filter(state=EventDelivery.State.DEAD)
        return queryset


@admin.register(EventDelivery)
class EventDeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "event",
        "event_type",
        "endpoint",
        "receiver",
        "state",
        "attempts",
        "next_attempt_at",
        "last_status",
        "follows_dead",
    )
    list_filter = (DeadLetterFilter, "state", "endpoint", "event_type", "follows_dead")
    list_select_related = ("event", "endpoint")
    readonly_fields = [f.name for f in EventDelivery._meta.fields]
    actions = ["retry_now", "replay"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Retry now", permissions=["replay"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = services.retry_deliveries(queryset)
        messages.success(
            request,
            ngettext("%(count)d delivery due now.", "%(count)d deliveries due now.", count)
            % {"count": count},
        )

    @admin.action(
        description="Replay (deliver the event again to its endpoint)", permissions=["replay"]
    )
    def replay(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = 0
        for delivery in queryset.filter(endpoint__isnull=False).select_related("endpoint"):
            assert delivery.endpoint is not None
            count += services.replay_events(delivery.endpoint, [delivery.event_id])
        messages.success(request, f"{count} event(s) replayed.")

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_orders.replay_eventdelivery")


@admin.register(OutboxEvent)
class OutboxEventAdmin(admin.ModelAdmin):
    list_display = ("webhook_id", "type", "order", "refund_id", "created_at")
    list_filter = ("type",)
    search_fields = ("=webhook_id", "=order__id", "=refund_id")
    readonly_fields = [f.name for f in OutboxEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
