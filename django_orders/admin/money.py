"""Payouts, balance transactions and discrepancies in the admin, and the raw records of the other
synced resources beside them.

Payouts and transactions are read-only mirrors like the orders (fast at a million rows: the
newest-first index, no exact counts, exact-id searches); each payout has a "Statement" page.
"Export CSV" on both changelists is behind ``export_payouts`` / ``export_balance_transactions``.
Discrepancies are listed for staff to act on; "Mark resolved" (with a note) is behind the
``django_orders.resolve_discrepancy`` permission.

``RemoteRecordAdmin``: ``sync_orders --resource customers|balance_transactions|payouts`` also
keeps those records raw in ``RemoteRecord``. Staff reconciling a payout or a balance
transaction need to see them next to the orders, so they get the same kind of page: view
permission only, no counts over the whole table, the list in the order of the (resource, remote
id) unique index, and the raw JSON on the detail page, folded.
"""

from __future__ import annotations

import html
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _

from .. import services
from ..exports import BALANCE_TRANSACTIONS, PAYOUTS
from ..models import BalanceTransaction, Discrepancy, Payout, ReconciliationRun, RemoteRecord
from ..money import format_money, money_formatter
from ..services import raw_resources
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

#: Discrepancies marked resolved by one action, at most.
MAX_RESOLVE = 500


def _link(admin_site: admin.AdminSite, model: str, object_id: str | None) -> SafeString | str:
    if not object_id:
        return "-"
    url = reverse(
        f"admin:django_orders_{model}_change", args=(quote(object_id),), current_app=admin_site.name
    )
    return format_html('<a href="{}">{}</a>', url, object_id)


@admin.register(Payout)
class PayoutAdmin(ExportCSVMixin, ReadOnlyModelAdmin):
    list_display = (
        "id",
        "status_column",
        "amount_column",
        "reference",
        "initiated_column",
        "statement_link",
    )
    list_filter = ("status",)
    search_fields = ("=id", "=reference")
    search_help_text = _("A payout id or its reference (exact).")
    ordering = ("-initiated_at", "-id")
    sortable_by = ("id", "initiated_column")
    actions = ("export_csv",)
    export_table = PAYOUTS
    fields = (
        "id",
        "status_column",
        "amount_column",
        "reference",
        "statement_link",
        "debit_transaction_id",
        "initiated_at",
        "expected_at",
        "sent_at",
        "succeeded_at",
        "failed_at",
        "canceled_at",
        "failure_reason",
        "failure_detail",
        "failure_retryable",
        "first_seen_at",
        "changed_at",
        "raw_record",
    )
    readonly_fields = fields

    @admin.display(description=_("status"), ordering="status")
    def status_column(self, obj: Payout) -> SafeString:
        return badge(obj.status, obj.get_status_display())

    @admin.display(description=_("amount"))
    def amount_column(self, obj: Payout) -> str:
        return format_money(obj.amount, obj.currency) or "-"

    @admin.display(description=_("initiated"), ordering="initiated_at")
    def initiated_column(self, obj: Payout) -> SafeString | str:
        return compact_datetime(obj.initiated_at)

    @admin.display(description=_("statement"))
    def statement_link(self, obj: Payout) -> SafeString:
        url = reverse(
            "admin:django_orders_payout_statement",
            args=(quote(obj.pk),),
            current_app=self.admin_site.name,
        )
        return format_html('<a href="{}">{}</a>', url, _("Statement"))

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: Payout) -> SafeString:
        return pretty_json(obj.raw)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("raw")

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.statement_view)
        return [
            path("<path:object_id>/statement/", view, name="django_orders_payout_statement"),
            *super().get_urls(),
        ]

    @staticmethod
    def _statement_rows(statement: Any) -> SafeString:
        # Thousands of rows: each cell escaped with the standard library's html.escape (what
        # Django's escape does, without a SafeString per cell) and joined here; a template
        # loop or format_html_join takes seconds at 10,000 rows.
        lines = (
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"
            for cells in _statement_cells(statement)
        )
        return mark_safe("\n".join(lines))  # noqa: S308 (every cell escaped above)

    def statement_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            statement = services.payout_statement(unquote(object_id))
        except Payout.DoesNotExist:
            raise Http404(f"No payout {unquote(object_id)!r}.") from None
        context = {
            **self.admin_site.each_context(request),
            "title": _("Statement of payout %(payout)s") % {"payout": statement.payout.pk},
            "subtitle": None,
            "opts": self.model._meta,
            "payout": statement.payout,
            "statement": statement,
            "table_rows": self._statement_rows(statement),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/django_orders/payout/statement.html", context)


def _statement_cells(statement: Any) -> Any:
    formatters: dict[str, Any] = {}
    for row in statement.rows:
        money = formatters.get(row.currency) or formatters.setdefault(
            row.currency, money_formatter(row.currency)
        )
        yield (
            row.transaction_id,
            row.type or "?",
            row.order_id,
            row.order_number,
            row.refund_reference,
            money(row.signed_amount),
            money(row.signed_allocated),
        )


@admin.register(BalanceTransaction)
class BalanceTransactionAdmin(ExportCSVMixin, ReadOnlyModelAdmin):
    list_display = (
        "id",
        "type",
        "amount_column",
        "order_column",
        "refund_column",
        "created_column",
    )
    list_filter = ("type",)
    search_fields = ("=id", "=order__id", "=refund__id")
    search_help_text = _("A transaction id, an order id or a refund id (exact).")
    ordering = ("-created_at", "-id")
    sortable_by = ("id", "created_column")
    actions = ("export_csv",)
    export_table = BALANCE_TRANSACTIONS
    fields = (
        "id",
        "type",
        "amount_column",
        "order_column",
        "refund_column",
        "payment_id",
        "payout_id",
        "created_at",
        "available_at",
        "available_amount",
        "pending_amount",
        "spent_amount",
        "pending_refund_amount",
        "pending_payout_amount",
        "first_seen_at",
        "changed_at",
        "raw_record",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("raw")

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str):
        # The ids are kept whether or not the mirror holds the order or refund: match the
        # columns themselves, no join.
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(id=term) | Q(order_id=term) | Q(refund_id=term)), False

    @admin.display(description=_("amount"))
    def amount_column(self, obj: BalanceTransaction) -> str:
        return format_money(obj.amount, obj.currency) or "-"

    @admin.display(description=_("order"))
    def order_column(self, obj: BalanceTransaction) -> SafeString | str:
        return _link(self.admin_site, "order", obj.order_id)

    @admin.display(description=_("refund"))
    def refund_column(self, obj: BalanceTransaction) -> SafeString | str:
        return _link(self.admin_site, "refund", obj.refund_id)

    @admin.display(description=_("created"), ordering="created_at")
    def created_column(self, obj: BalanceTransaction) -> SafeString | str:
        return compact_datetime(obj.created_at)

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: BalanceTransaction) -> SafeString:
        return pretty_json(obj.raw)


class OpenListFilter(admin.SimpleListFilter):
    """Open discrepancies by default: those are what staff act on."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("resolved", _("Resolved")), ("all", _("All"))]

    def choices(self, changelist: Any):
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": _("Open"),
        }
        for value, label in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        if self.value() == "all":
            return queryset
        return queryset.filter(resolved_at__isnull=self.value() != "resolved")


@admin.register(Discrepancy)
class DiscrepancyAdmin(ReadOnlyModelAdmin):
    list_display = (
        "kind",
        "object_column",
        "amount_column",
        "detail",
        "occurred_column",
        "last_seen_column",
        "resolved_column",
    )
    list_filter = (OpenListFilter, "kind")
    search_fields = ("=object_id",)
    search_help_text = _("An order, refund or payout id, or a currency (exact).")
    ordering = ("-last_seen_at", "-id")
    sortable_by = ()
    actions = ("mark_resolved",)
    fields = (
        "kind",
        "object_column",
        "amount_column",
        "detail",
        "occurred_at",
        "first_seen_at",
        "last_seen_at",
        "resolved_at",
        "resolved_by",
        "note",
        "key",
    )
    readonly_fields = fields

    @admin.display(description=_("object"))
    def object_column(self, obj: Discrepancy) -> SafeString | str:
        model = {"or_": "order", "rf_": "refund", "po_": "payout"}.get(obj.object_id[:3])
        return _link(self.admin_site, model, obj.object_id) if model else obj.object_id

    @admin.display(description=_("amount"))
    def amount_column(self, obj: Discrepancy) -> str:
        return format_money(obj.amount, obj.currency) or "-"

    @admin.display(description=_("occurred"), ordering="occurred_at")
    def occurred_column(self, obj: Discrepancy) -> SafeString | str:
        return compact_datetime(obj.occurred_at)

    @admin.display(description=_("last seen"))
    def last_seen_column(self, obj: Discrepancy) -> SafeString | str:
        return compact_datetime(obj.last_seen_at)

    @admin.display(description=_("resolved"))
    def resolved_column(self, obj: Discrepancy) -> SafeString | str:
        return compact_datetime(obj.resolved_at) if obj.resolved_at else "-"

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, Discrepancy, "resolve")

    @admin.action(description=_("Mark resolved"), permissions=["resolve"])
    def mark_resolved(self, request: HttpRequest, queryset: Any) -> TemplateResponse | None:
        refusal = _("Select at most %(limit)d discrepancies at a time. Nothing was changed.")
        open_rows = queryset.filter(resolved_at__isnull=True)
        selected = at_most(self, request, open_rows, MAX_RESOLVE, refusal)
        if selected is None:
            return None
        if not selected:
            self.message_user(request, _("None of these is open."), messages.WARNING)
            return None
        error = None
        if request.POST.get("post") == "yes":
            try:
                count = services.resolve_discrepancies(
                    [d.pk for d in selected], note=request.POST.get("note", ""), actor=request.user
                )
            except ValueError as refused:
                error = str(refused)
            else:
                self.message_user(
                    request,
                    _("Marked resolved: %(count)d.") % {"count": count},
                    messages.SUCCESS,
                )
                return None
        return action_confirmation(
            self,
            request,
            title=_("Mark discrepancies resolved?"),
            action_name="mark_resolved",
            template="resolve_confirmation.html",
            discrepancies=selected,
            error=error,
        )


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(ReadOnlyModelAdmin):
    list_display = ("started_column", "open", "new", "resolved", "cannot_verify", "since", "until")
    ordering = ("-started_at", "-id")
    sortable_by = ()
    actions = None

    @admin.display(description=_("started"), ordering="started_at")
    def started_column(self, obj: ReconciliationRun) -> SafeString | str:
        return compact_datetime(obj.started_at)


#: Resources stored raw by earlier releases that have typed tables now (payouts and balance
#: transactions, copied by migration 0015): their raw rows stay one release, found by id too.
EARLIER_RAW = ("payouts", "balance_transactions")


class ResourceFilter(admin.SimpleListFilter):
    """The known resources as fixed choices: the default filter on a text column would run
    ``SELECT DISTINCT resource`` over the whole table on every page view."""

    title = _("resource")
    parameter_name = "resource"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The resources ``sync_orders`` knows that are stored raw (the others have their own
        # models), read when the page is shown: the registry is filled by ``apps.ready``.
        return [(name, name.replace("_", " ")) for name in raw_resources()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(resource=value) if value else queryset


@admin.register(RemoteRecord)
class RemoteRecordAdmin(ReadOnlyModelAdmin):
    list_display = ("remote_id", "resource", "changed_column", "first_seen_column")
    list_filter = (ResourceFilter,)
    search_fields = ("=remote_id",)
    search_help_text = _("A record id, exact (e.g. po_… or txn_…).")
    # The order of the unique (resource, remote_id) index: no sort of the whole table.
    ordering = ("resource", "remote_id")
    sortable_by = ()
    actions = None
    fieldsets = (
        (None, {"fields": ("resource", "remote_id", "first_seen_at", "changed_at")}),
        (_("Raw record"), {"fields": ("raw_record",), "classes": ("collapse",)}),
    )
    readonly_fields = ("resource", "remote_id", "first_seen_at", "changed_at", "raw_record")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        # remote_id is the second column of the unique index; naming the resources as well
        # lets the index find the id under each of them instead of scanning it whole.
        term = search_term.strip()
        if not term:
            return queryset, False
        resources = [*raw_resources(), *EARLIER_RAW]
        chosen = request.GET.get(ResourceFilter.parameter_name)
        if chosen and chosen not in resources:
            resources.append(chosen)
        return queryset.filter(resource__in=resources, remote_id=term), False

    @admin.display(description=_("changed"))
    def changed_column(self, obj: RemoteRecord) -> SafeString | str:
        return compact_datetime(obj.changed_at)

    @admin.display(description=_("first seen"))
    def first_seen_column(self, obj: RemoteRecord) -> SafeString | str:
        return compact_datetime(obj.first_seen_at)

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: RemoteRecord) -> SafeString:
        return pretty_json(obj.raw)
