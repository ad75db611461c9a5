"""Refunds in the admin: a read-only list of the mirror's refunds and the "Cancel refund" action.

Cancelling changes a refund upstream, so it is behind the ``django_orders.refund_order``
permission (the one that may refund in the first place), not a change permission. Like Django's
"delete selected", it first shows a confirmation page; nothing is sent until the form is posted
with ``post=yes``. Each cancel goes through ``services.cancel_refund``, which refuses a refund
that is no longer pending.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from .. import services
from ..display import refund_reason_label
from ..exceptions import OrdersError, RefundNotCancelable
from ..exports import REFUNDS
from ..models import Order, Refund, RefundStatus
from ..money import format_money
from .base import (
    ExportCSVMixin,
    ReadOnlyModelAdmin,
    action_confirmation,
    at_most,
    badge,
    compact_datetime,
    has_model_permission,
    pretty_json,
)
from .checkout import CurrencyListFilter

#: Each cancel is one HTTP call made inside the web request.
MAX_CANCEL = 20


class ReasonListFilter(admin.SimpleListFilter):
    """The provider's nine reasons, not a ``SELECT DISTINCT`` over the table on each page."""

    title = _("reason")
    parameter_name = "reason"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(reason, refund_reason_label(reason)) for reason in services.REFUND_REASONS]

    def queryset(self, request: HttpRequest, queryset):
        value = self.value()
        return queryset.filter(reason=value) if value in services.REFUND_REASONS else queryset


@admin.register(Refund)
class RefundAdmin(ExportCSVMixin, ReadOnlyModelAdmin):
    list_display = (
        "id",
        "status_column",
        "amount_column",
        "order_link",
        "reason_column",
        "reference",
        "created_column",
        "failure_reason",
    )
    list_filter = ("status", ReasonListFilter, CurrencyListFilter)
    search_fields = ("=id", "=order__id", "=reference")
    search_help_text = _("A refund id, an order id or a refund's reference (exact).")
    ordering = ("-created_at", "-id")
    sortable_by = ("id", "created_column")
    list_select_related = ("order",)
    actions = ("cancel_refunds", "export_csv")
    export_table = REFUNDS
    fields = (
        "id",
        "order_link",
        "status_column",
        "amount_column",
        "reason_column",
        "reference",
        *Refund.OUTCOME_FIELDS,
        "first_seen_at",
        "changed_at",
        "raw_record",
    )
    readonly_fields = fields

    @admin.display(description=_("status"), ordering="status")
    def status_column(self, obj: Refund) -> SafeString:
        return badge(obj.status, obj.get_status_display())

    @admin.display(description=_("amount"))
    def amount_column(self, obj: Refund) -> str:
        return format_money(obj.total, obj.currency) or "-"

    @admin.display(description=_("reason"))
    def reason_column(self, obj: Refund) -> str:
        return refund_reason_label(obj.reason) if obj.reason else "-"

    @admin.display(description=_("order"))
    def order_link(self, obj: Refund) -> SafeString:
        url = reverse(
            "admin:django_orders_order_change",
            args=(quote(obj.order_id),),
            current_app=self.admin_site.name,
        )
        return format_html('<a href="{}">{}</a>', url, obj.order_id)

    @admin.display(description=_("created"), ordering="created_at")
    def created_column(self, obj: Refund) -> SafeString | str:
        return compact_datetime(obj.created_at)

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: Refund) -> SafeString:
        return pretty_json(obj.raw)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, Order, "refund")

    @admin.action(description=_("Cancel refund"), permissions=["cancel"])
    def cancel_refunds(self, request: HttpRequest, queryset) -> TemplateResponse | None:
        refusal = _("Select at most %(limit)d refunds to cancel at a time. Nothing was canceled.")
        rows = queryset.order_by("-created_at", "-id")
        selected = at_most(self, request, rows, MAX_CANCEL, refusal)
        if selected is None:
            return None
        pending = [refund for refund in selected if refund.status == RefundStatus.PENDING]
        refused = [refund for refund in selected if refund.status != RefundStatus.PENDING]
        if refused:
            self.message_user(
                request,
                _("Not canceled, as they are no longer pending: %(refunds)s.")
                % {"refunds": ", ".join(f"{r.pk} ({r.get_status_display()})" for r in refused)},
                messages.WARNING,
            )
        if not pending:
            return None
        if request.POST.get("post") == "yes":
            self._cancel(request, pending)
            return None
        return action_confirmation(
            self,
            request,
            title=_("Cancel refunds?"),
            action_name="cancel_refunds",
            template="cancel_confirmation.html",
            refunds=pending,
        )

    def _cancel(self, request: HttpRequest, refunds: list[Refund]) -> None:
        reason = f"Canceled by staff ({request.user.get_username()}) in the admin."
        done: list[str] = []
        for refund in refunds:
            try:
                services.cancel_refund(refund.pk, reason=reason, actor=request.user)
            except RefundNotCancelable as refused:
                self.message_user(request, str(refused), messages.WARNING)
            except OrdersError as error:
                self.message_user(
                    request,
                    _("%(refund)s was not canceled: %(error)s")
                    % {"refund": refund, "error": error},
                    messages.ERROR,
                )
            else:
                done.append(refund.pk)
        if done:
            self.message_user(
                request,
                _("Canceled: %(refunds)s.") % {"refunds": ", ".join(done)},
                messages.SUCCESS,
            )
