"""The admin's actions that send a stored or new request: "Resend now" on order requests (the
durable records of our own writes) and "Cancel order" on the orders changelist.

Like Django's "delete selected", each action first shows a confirmation page; nothing is sent
until the user confirms.

A resend goes through ``services.resend_order_request``, the same code the
``resume_order_requests`` command runs: same idempotency key, ``KEY_LIFETIME`` respected, the
outcome recorded on the row.

Cancelling changes an order upstream, so it has its own permission (``cancel_order``) and a
confirmation page listing what it will cancel and what it refuses; each cancel goes through
``services.cancel_order``, which checks the order again before sending.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, quote
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from .. import services
from ..exceptions import OrderNotCancellable, OrdersError
from ..models import TERMINAL_STATUSES, Order, OrderRequest
from ..services import key_expired
from .base import (
    ReadOnlyModelAdmin,
    action_confirmation,
    at_most,
    badge,
    compact_datetime,
    has_model_permission,
    pretty_json,
    pretty_json_text,
)

#: Each resend is one HTTP call made inside the web request.
MAX_RESEND = 20

State = OrderRequest.State


@admin.register(OrderRequest)
class OrderRequestAdmin(ReadOnlyModelAdmin):
    # The order next to the state it explains, not last: the idempotency keys and request ids
    # are wide, and the last column was cut off on a 1920 px screen.
    list_display = (
        "reference_column",
        "state_column",
        "order_link",
        "attempts",
        "last_error_column",
        "created_column",
        "last_attempt_column",
        "idempotency_key",
        "last_request_id",
    )
    list_filter = ("state",)
    search_fields = ("=reference", "=idempotency_key", "=order__id")
    search_help_text = _("A reference, an idempotency key or an order id (exact).")
    ordering = ("-created_at", "-id")
    sortable_by = ("created_column", "last_attempt_column", "attempts")
    list_select_related = ("order",)
    actions = ("resend_now",)
    fieldsets = (
        (None, {"fields": ("reference", "idempotency_key", "state_column", "order_link")}),
        (
            _("Attempts"),
            {
                "fields": (
                    "attempts",
                    "created_at",
                    "first_sent_at",
                    "last_attempt_at",
                    "next_attempt_at",
                    "claimed_until",
                    "updated_at",
                )
            },
        ),
        (
            _("Last error"),
            {
                "fields": (
                    "last_status_code",
                    "last_error_code",
                    "last_error",
                    "last_error_detail",
                    "last_error_docs",
                    "last_request_id",
                    "last_error_body_pretty",
                )
            },
        ),
        (_("Payload sent"), {"fields": ("payload_pretty",)}),
    )
    # Every field shown is read-only: the mirror and the request records are never edited.
    readonly_fields = flatten_fieldsets(fieldsets)

    @admin.display(description=_("reference"), ordering="reference")
    def reference_column(self, obj: OrderRequest) -> SafeString | str:
        if not obj.reference:
            return "-"
        return format_html('<span style="white-space:nowrap">{}</span>', obj.reference)

    @admin.display(description=_("created"), ordering="created_at")
    def created_column(self, obj: OrderRequest) -> SafeString | str:
        return compact_datetime(obj.created_at)

    @admin.display(description=_("last sent"), ordering="last_attempt_at")
    def last_attempt_column(self, obj: OrderRequest) -> SafeString | str:
        return compact_datetime(obj.last_attempt_at)

    @admin.display(description=_("state"), ordering="state")
    def state_column(self, obj: OrderRequest) -> SafeString:
        return badge(obj.state, obj.get_state_display())

    @admin.display(description=_("last error"))
    def last_error_column(self, obj: OrderRequest) -> SafeString | str:
        """Status and code in the column; the message (often long) on hover and on the page."""
        summary = " · ".join(
            str(part) for part in (obj.last_status_code, obj.last_error_code) if part
        )
        if not summary and not obj.last_error:
            return "-"
        return format_html(
            '<span title="{}">{}</span>',
            obj.last_error,
            summary or Truncator(obj.last_error).chars(40),
        )

    @admin.display(description=_("detail"))
    def last_error_detail(self, obj: OrderRequest) -> str:
        """The service's ``detail``: often what to change, where ``message`` only says what."""
        return _body_text(obj, "detail") or "-"

    @admin.display(description=_("documentation"))
    def last_error_docs(self, obj: OrderRequest) -> SafeString | str:
        """The error's documentation ``url`` as a link when it is an http(s) URL; anything else
        (``javascript:``, a relative path) is shown as text, never made clickable."""
        url = _body_text(obj, "url")
        if url is None:
            return "-"
        if not _is_web_url(url):
            return url
        return format_html(
            '<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', url, url
        )

    @admin.display(description=_("error body"))
    def last_error_body_pretty(self, obj: OrderRequest) -> SafeString | str:
        """Every field of the service's error object as it came (fix_code, cause...)."""
        return pretty_json(obj.last_error_body) if obj.last_error_body else "-"

    @admin.display(description=_("order"))
    def order_link(self, obj: OrderRequest) -> SafeString | str:
        if obj.order_id is None:
            return "-"
        url = reverse(
            "admin:django_orders_order_change",
            args=(quote(obj.order_id),),
            current_app=self.admin_site.name,
        )
        return format_html('<a href="{}" style="white-space:nowrap">{}</a>', url, obj.order_id)

    @admin.display(description=_("payload"))
    def payload_pretty(self, obj: OrderRequest) -> SafeString:
        return pretty_json_text(obj.payload)

    def get_queryset(self, request: HttpRequest):
        # Listed with their orders (list_select_related): not with the orders' raw records.
        return super().get_queryset(request).select_related("order").defer("order__raw")

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, OrderRequest, "change")

    @admin.action(description=_("Resend now"), permissions=["resend"])
    def resend_now(self, request: HttpRequest, queryset) -> TemplateResponse | None:
        refusal = _(
            "Select at most %(limit)d order requests to resend at a time. Nothing was sent."
        )
        selected = at_most(
            self, request, queryset.order_by("created_at", "id"), MAX_RESEND, refusal
        )
        if selected is None:
            return None
        pending = [row for row in selected if row.state == State.PENDING]
        if not pending:
            self.message_user(
                request,
                _("None of the selected order requests is pending; nothing was sent."),
                messages.WARNING,
            )
            return None
        if request.POST.get("post") == "yes":
            self._resend(request, pending)
            return None
        return self._confirmation(request, pending, [r for r in selected if r not in pending])

    def _confirmation(
        self, request: HttpRequest, pending: list[OrderRequest], skipped: list[OrderRequest]
    ) -> TemplateResponse:
        now = timezone.now()
        try:
            expired = {row.pk: key_expired(row, now) for row in pending}
        except OrdersError:  # KEY_LIFETIME misconfigured: the page still shows the rows
            expired = {}
        rows = [{"request": row, "expired": expired.get(row.pk, False)} for row in pending]
        return action_confirmation(
            self,
            request,
            title=_("Resend order requests?"),
            action_name="resend_now",
            template="resend_confirmation.html",
            rows=rows,
            skipped=skipped,
        )

    def _resend(self, request: HttpRequest, pending: list[OrderRequest]) -> None:
        outcomes: dict[str, list[OrderRequest]] = defaultdict(list)
        for row in pending:
            try:
                updated = services.resend_order_request(row, actor=request.user)
            # OrderRequestPending: another worker is sending it right now; ValueError: it
            # stopped being pending since it was selected. Neither is sent twice.
            except (OrdersError, ValueError) as error:
                self.message_user(
                    request,
                    _("%(request)s was not resent: %(error)s") % {"request": row, "error": error},
                    messages.ERROR,
                )
                continue
            outcomes[updated.state].append(updated)
        reports = (
            (State.SUCCEEDED, messages.SUCCESS, _("Succeeded: %(requests)s.")),
            (
                State.PENDING,
                messages.WARNING,
                _(
                    "Still pending (the outcome is unknown; it will be retried with the same "
                    "key): %(requests)s."
                ),
            ),
            (State.NEEDS_REVIEW, messages.WARNING, _("Needs review: %(requests)s.")),
            (State.FAILED, messages.ERROR, _("Rejected by the API: %(requests)s.")),
        )
        for state, level, text in reports:
            rows = outcomes.pop(state, [])
            if rows:
                self.message_user(request, text % {"requests": _describe(rows)}, level)
        for other, rows in outcomes.items():  # a state this admin does not know yet
            self.message_user(request, f"{other}: {_describe(rows)}.", messages.INFO)


def _body_text(obj: OrderRequest, name: str) -> str | None:
    body = obj.last_error_body
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    return value


def _is_web_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "http://[" (an unclosed IPv6 literal)
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


def _describe(rows: list[OrderRequest]) -> str:
    """Each request with its order, or with what the API last said, for the result messages."""
    described = []
    for row in rows:
        if row.state == State.SUCCEEDED:
            details = [str(row.order_id)] if row.order_id else []
        else:  # the error of an earlier attempt is stale once a request succeeded
            details = [part for part in (row.last_error_code, row.last_error) if part]
        text = str(row)
        if details:
            summary = Truncator(" - ".join(details)).chars(160)
            text += f" ({summary})"
        described.append(text)
    return "; ".join(described)


#: Each cancel is one HTTP call made inside the web request.
MAX_CANCEL = 20

if TYPE_CHECKING:
    # What the mixin is mixed into, so mypy knows message_user, admin_site and the rest.
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class CancelOrdersMixin(_ModelAdmin):
    """Adds ``cancel_orders`` to an ``OrderAdmin``; list it in ``actions``."""

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, Order, "cancel")

    @admin.action(description=_("Cancel order"), permissions=["cancel"])
    def cancel_orders(self, request: HttpRequest, queryset) -> TemplateResponse | None:
        rows = queryset.select_related("customer").order_by("-initiated_at", "-id")
        refusal = _("Select at most %(limit)d orders to cancel at a time. Nothing was canceled.")
        selected = at_most(self, request, rows, MAX_CANCEL, refusal)
        if selected is None:
            return None
        open_orders = [order for order in selected if order.status not in TERMINAL_STATUSES]
        refused = [order for order in selected if order.status in TERMINAL_STATUSES]
        if not open_orders:
            self._report_refused(request, refused)
            return None
        if request.POST.get("post") == "yes":
            self._report_refused(request, refused)
            self._cancel(request, open_orders)
            return None
        return action_confirmation(
            self,
            request,
            title=_("Cancel orders?"),
            action_name="cancel_orders",
            template="cancel_confirmation.html",
            orders=open_orders,
            refused=refused,
        )

    def _report_refused(self, request: HttpRequest, refused: list[Order]) -> None:
        if refused:
            described = ", ".join(f"{order.pk} ({order.get_status_display()})" for order in refused)
            self.message_user(
                request,
                _("Not canceled, as they are paid or closed: %(orders)s.") % {"orders": described},
                messages.WARNING,
            )

    def _cancel(self, request: HttpRequest, orders: list[Order]) -> None:
        reason = f"Canceled by staff ({request.user.get_username()}) in the admin."
        done: list[str] = []
        for order in orders:
            try:
                services.cancel_order(order, reason=reason, actor=request.user)
            except OrderNotCancellable as refused:
                self.message_user(request, str(refused), messages.WARNING)
            except OrdersError as error:
                self.message_user(
                    request,
                    _("%(order)s was not canceled: %(error)s") % {"order": order, "error": error},
                    messages.ERROR,
                )
            else:
                done.append(order.pk)
        if done:
            self.message_user(
                request, _("Canceled: %(orders)s.") % {"orders": ", ".join(done)}, messages.SUCCESS
            )
