"""The other synced resources (customers' raw records, balance transactions, payouts): read-only.

``sync_orders --resource customers|balance_transactions|payouts`` stores those records raw in
``RemoteRecord``. Staff reconciling a payout or a balance transaction need to see them next to
the orders, so they get the same kind of page: view permission only, no counts over the whole
table, the list in the order of the (resource, remote id) unique index, and the raw JSON on the
detail page, folded.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from ..models import RemoteRecord
from ..services import raw_resources
from .base import ReadOnlyModelAdmin, compact_datetime, pretty_json

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
