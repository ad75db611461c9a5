"""The order mirror in the admin: a fast changelist at a million rows and a read-only detail.

Costs per changelist page, whatever the number of rows (asserted in tests/admin): one count
(a catalogue estimate or a capped count, see ``paginator``), one page of orders joined to their
customers, and two indexed queries for the date hierarchy (see ``dates``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, quote
from django.core.exceptions import ValidationError
from django.db import router
from django.db.models import Count, F, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from .. import services
from ..exceptions import OrdersError
from ..exports import ORDERS
from ..mirror.queries import order_timeline, search_orders
from ..models import Order, OrderRequest, OrderStatus
from ..money import format_money
from .base import (
    PeriodProbingQuerySet,
    ReadOnlyModelAdmin,
    at_most,
    badge,
    bounded_json,
    grouped_number,
    has_model_permission,
    local_datetime,
    names_nothing,
    pretty_json_text,
    raw_as_text,
    status_badge,
)
from .checkout import CurrencyListFilter, billing_and_shipping, line_items_table, payment_link
from .order_tables import (
    MAX_EVENTS_SHOWN,
    deliveries_table,
    order_deliveries,
    order_refunds,
    refunds_table,
    remainders_table,
    timeline_table,
)

#: Each refreshed order is one HTTP lookup inside the web request: keep the request short.
MAX_REFRESH = 100
#: Order requests listed on an order's page.
MAX_REQUESTS_SHOWN = 20
#: The statuses whose page leaves the expiry out: the order can no longer expire, and the date
#: would read as a pending deadline.
EXPIRY_HIDDEN = (OrderStatus.PAID, OrderStatus.COMPLETED, OrderStatus.CANCELED)
#: The expiry as the detail page lists it (``ReadOnlyModelAdmin`` shows it in local form).
EXPIRY = ("expires_at", "expires_at_local")


if TYPE_CHECKING:
    # What the mixin is mixed into (``OrderAdmin``, in the package), so mypy knows the rest.
    _Base = ReadOnlyModelAdmin
else:
    _Base = object


class OrderPagesMixin(_Base):
    """The orders' changelist and read-only page, and the refresh action; ``OrderAdmin`` (the
    package) puts the staff actions that call the service beside it."""

    list_display = (
        "id",
        "number_column",
        "status_column",
        "total_column",
        "customer_column",
        "initiated_column",
        "completed_column",
        "last_synced",
    )
    list_filter = (
        "status",
        CurrencyListFilter,
        "customer__guest",
        "initiated_at",
        "completed_at",
    )
    date_hierarchy = "initiated_at"
    # Matches the orders_order_newest_idx index (initiated_at DESC, id DESC).
    ordering = ("-initiated_at", "-id")
    # Only columns an index can sort; the others would sort the whole table.
    sortable_by = ("id", "total_column", "initiated_column", "completed_column")
    list_select_related = ("customer",)
    # What search_orders matches (it replaces Django's OR across these fields; mirror.queries).
    search_fields = (
        "=id",
        "=number",
        "=customer__id",
        "=customer__email_address",
        "customer__name",
    )
    search_help_text = _(
        "An order id, the shop's order number, a customer id or e-mail address (exact), "
        "or words of the customer's name."
    )
    actions = (
        "refresh_from_api",
        "cancel_orders",
        "mark_fulfilled",
        "send_receipts",
        "send_invoices",
        "export_csv",
        "record_offline_payments",
    )
    export_table = ORDERS
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "number",
                    "status_column",
                    "total_column",
                    "customer_link",
                    "customer_email",
                    "customer_phone",
                    "guest",
                )
            },
        ),
        (_("Checkout"), {"fields": ("line_items", "payment_page", "addresses")}),
        (_("Refunds"), {"fields": ("refunds_list", "refundable_lines")}),
        (_("Timeline"), {"fields": ("timeline",)}),
        (_("Receipts and invoices"), {"fields": ("deliveries_list",)}),
        (
            _("Dates"),
            {"fields": ("initiated_at", "paid_at", "completed_at", "canceled_at", "expires_at")},
        ),
        (
            _("Mirror"),
            {"fields": ("first_seen_at", "changed_at", "refreshed_at", "fingerprint")},
        ),
        (_("Raw record"), {"fields": ("raw_record",)}),
        (_("Order requests"), {"fields": ("order_requests",)}),
    )
    # Every field shown is read-only: the mirror and the request records are never edited.
    readonly_fields = flatten_fieldsets(fieldsets)

    def get_queryset(self, request: HttpRequest):
        # The queryset class gives the date hierarchy its indexed period probes.
        queryset: QuerySet = PeriodProbingQuerySet(self.model, using=router.db_for_read(self.model))
        # The list never needs the raw records (nor should decode them: see raw_as_text).
        queryset = queryset.select_related("customer").defer("raw", "customer__raw")
        return queryset.order_by(*self.get_ordering(request))

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        if names_nothing(object_id):
            return None
        # The detail page shows the customer: fetch it with the order, not in a second query.
        queryset = self.get_queryset(request).annotate(raw_text=raw_as_text())
        model = queryset.model
        field = model._meta.pk if from_field is None else model._meta.get_field(from_field)
        try:
            order = queryset.get(**{field.name: field.to_python(object_id)})
        except (model.DoesNotExist, ValidationError, ValueError):
            return None
        # Decoded here, within bounds, for what reads it (the line items table): loading the
        # deferred field would decode it through JSONField, recursing once per level.
        order.raw = bounded_json(order.raw_text)
        # Both refund displays read this one list: one query, whatever the number of refunds.
        order.admin_refunds = order_refunds(order)
        # The deliveries table reads this list: one query, whatever their number.
        order.admin_deliveries = order_deliveries(order)
        return order

    def get_search_results(self, request: HttpRequest, queryset, search_term: str):
        return search_orders(queryset, search_term), False

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        # Read by the template only (change_list.html): one query when the page is rendered.
        changelist.currency_totals = lambda: currency_totals(changelist)
        return changelist

    @admin.display(description=_("number"))
    def number_column(self, obj: Order) -> SafeString | str:
        """The shop's order number: what customers quote when they write; "-" when the shop
        gave none (the service then uses the order id, already in the first column)."""
        if not obj.number or obj.number == obj.pk:
            return "-"
        return format_html('<span style="white-space:nowrap">{}</span>', obj.number)

    @admin.display(description=_("status"), ordering="status")
    def status_column(self, obj: Order) -> SafeString:
        return status_badge(obj)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """Without "expires" for a paid, completed or canceled order (``EXPIRY_HIDDEN``)."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or obj.status not in EXPIRY_HIDDEN:
            return fieldsets
        return [
            (title, {**options, "fields": [f for f in options["fields"] if f not in EXPIRY]})
            for title, options in fieldsets
        ]

    # Unknown totals last, and first when reversed, on every backend: PostgreSQL's order, which
    # the orders_order_total_idx index gives read forwards or backwards.
    @admin.display(description=_("total"), ordering=F("total").asc(nulls_last=True))
    def total_column(self, obj: Order) -> SafeString | str:
        amount = format_money(obj.total, obj.currency)
        return format_html('<span style="white-space:nowrap">{}</span>', amount) if amount else "-"

    @admin.display(description=_("line items"))
    def line_items(self, obj: Order) -> SafeString | str:
        return line_items_table(obj)

    @admin.display(description=_("refunds"))
    def refunds_list(self, obj: Order) -> SafeString | str:
        def change_url(refund: Any) -> str:
            return reverse(
                "admin:django_orders_refund_change",
                args=(quote(refund.pk),),
                current_app=self.admin_site.name,
            )

        return refunds_table(obj.admin_refunds, change_url)  # type: ignore[attr-defined]

    @admin.display(description=_("sent"))
    def deliveries_list(self, obj: Order) -> SafeString | str:
        """Each receipt and invoice sent: the outcome per channel; one with no answer shows as
        "Outcome unknown" (never resent)."""
        return deliveries_table(obj.admin_deliveries)  # type: ignore[attr-defined]

    @admin.display(description=_("refundable"))
    def refundable_lines(self, obj: Order) -> SafeString | str:
        """Each line's remainder: paid minus the mirrored refunds pending, processing or
        succeeded (the service checks again against a fresh lookup before refunding)."""
        return remainders_table(obj, obj.admin_refunds)  # type: ignore[attr-defined]

    @admin.display(description=_("timeline"))
    def timeline(self, obj: Order) -> SafeString | str:
        """What happened to the order, newest first, in one query (``admin.order_tables``)."""
        events = order_timeline(obj.pk, MAX_EVENTS_SHOWN + 1)

        def url_for(model: str, pk: Any) -> str:
            return reverse(
                f"admin:django_orders_{model}_change",
                args=(quote(pk),),
                current_app=self.admin_site.name,
            )

        more = len(events) > MAX_EVENTS_SHOWN
        return timeline_table(events[:MAX_EVENTS_SHOWN], url_for, more=more)

    @admin.display(description=_("payment page"))
    def payment_page(self, obj: Order) -> SafeString | str:
        return payment_link(obj.payment_url)

    @admin.display(description=_("billing, shipping, statement"))
    def addresses(self, obj: Order) -> SafeString:
        return billing_and_shipping(obj)

    @admin.display(description=_("customer"))
    def customer_link(self, obj: Order) -> SafeString:
        url = reverse(
            "admin:django_orders_customer_change",
            args=(quote(obj.customer_id),),
            current_app=self.admin_site.name,
        )
        return format_html('<a href="{}">{}</a>', url, obj.customer.name or obj.customer_id)

    @admin.display(description=_("e-mail address"))
    def customer_email(self, obj: Order) -> SafeString | str:
        email = obj.customer.email_address
        return format_html('<a href="mailto:{}">{}</a>', email, email) if email else "-"

    @admin.display(description=_("phone number"))
    def customer_phone(self, obj: Order) -> str:
        return obj.customer.phone_number or "-"

    @admin.display(description=_("customer"))
    def customer_column(self, obj: Order) -> SafeString:
        """The list's customer: the link, and a "guest" mark (a column of its own would cost
        the width that keeps the dates on screen at 1,400 px)."""
        if not obj.customer.guest:
            return self.customer_link(obj)
        return format_html("{} {}", self.customer_link(obj), badge("guest", str(_("guest"))))

    @admin.display(description=_("guest"), boolean=True)
    def guest(self, obj: Order) -> bool:
        return obj.customer.guest

    @admin.display(description=_("initiated"), ordering="initiated_at")
    def initiated_column(self, obj: Order) -> SafeString | str:
        return stacked_datetime(obj.initiated_at)

    @admin.display(description=_("completed"), ordering="completed_at")
    def completed_column(self, obj: Order) -> SafeString | str:
        return stacked_datetime(obj.completed_at)

    @admin.display(description=_("last updated"))
    def last_synced(self, obj: Order) -> SafeString | str:
        """When the mirror last changed or was last confirmed by a lookup, whichever is later.

        Not "last seen by a walk": a walk that finds an order unchanged writes nothing to it
        (that is what keeps a re-sync cheap); the sync runs' history says when walks ran.
        """
        stamps = [stamp for stamp in (obj.changed_at, obj.refreshed_at) if stamp is not None]
        return stacked_datetime(max(stamps) if stamps else None)

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: Order) -> SafeString:
        # Folded: the line items and the columns above say what staff usually need.
        return format_html(
            "<details><summary>{}</summary>{}</details>",
            _("Show the record as the service sent it"),
            pretty_json_text(obj.raw_text),  # type: ignore[attr-defined]  # raw_as_text()
        )

    @admin.display(description=_("order requests"))
    def order_requests(self, obj: Order) -> SafeString | str:
        rows = list(
            OrderRequest.objects.filter(order=obj).order_by("-created_at", "-id")[
                :MAX_REQUESTS_SHOWN
            ]
        )
        if not rows:
            return str(_("None: this order was not created through this shop's order requests."))
        # Without the admin's list indent, so that the links line up with the other values.
        return format_html(
            '<ul style="margin: 0; padding: 0; list-style: none">{}</ul>',
            format_html_join(
                "",
                '<li><a href="{}">{}</a> {}</li>',
                (
                    (
                        reverse(
                            "admin:django_orders_orderrequest_change",
                            args=(row.pk,),
                            current_app=self.admin_site.name,
                        ),
                        str(row),
                        badge(row.state, row.get_state_display()),
                    )
                    for row in rows
                ),
            ),
        )

    def has_refresh_permission(self, request: HttpRequest) -> bool:
        # Refreshing writes to the mirror: the real change permission, which the read-only
        # pages otherwise ignore.
        return has_model_permission(request, Order, "change")

    @admin.action(description=_("Refresh from the API"), permissions=["refresh"])
    def refresh_from_api(self, request: HttpRequest, queryset) -> None:
        refusal = _(
            "Select at most %(limit)d orders to refresh at a time (each is one request to the "
            "API). Nothing was refreshed."
        )
        ids = at_most(
            self, request, queryset.order_by().values_list("pk", flat=True), MAX_REFRESH, refusal
        )
        if ids is None:
            return
        try:
            result = services.refresh_orders(ids)
        except OrdersError as error:
            self.message_user(
                request,
                _(
                    "The refresh stopped: %(error)s Orders looked up before the error were "
                    "stored; nothing else changed."
                )
                % {"error": error},
                messages.ERROR,
            )
            return
        self._report_refresh(request, result)

    def _report_refresh(self, request: HttpRequest, result: Any) -> None:
        if result.refreshed:
            self.message_user(
                request,
                ngettext(
                    "Refreshed %(count)d order from the API (%(updated)d changed, "
                    "%(unchanged)d unchanged, %(created)d new).",
                    "Refreshed %(count)d orders from the API (%(updated)d changed, "
                    "%(unchanged)d unchanged, %(created)d new).",
                    result.refreshed,
                )
                % {
                    "count": result.refreshed,
                    "updated": result.updated,
                    "unchanged": result.unchanged,
                    "created": result.created,
                },
                messages.SUCCESS,
            )
        if result.missing:
            self.message_user(
                request,
                ngettext(
                    "The API does not know %(count)d order: %(ids)s. It was left as it is.",
                    "The API does not know %(count)d orders: %(ids)s. They were left as they are.",
                    len(result.missing),
                )
                % {"count": len(result.missing), "ids": ", ".join(result.missing)},
                messages.WARNING,
            )


def stacked_datetime(value: Any) -> SafeString | str:
    """``compact_datetime`` on two lines, the date above the time: the list's three date
    columns at half the width, so the list fits 1,400 px beside the filters."""
    if value is None:
        return "-"
    return format_html(
        '<span style="white-space:nowrap" title="{}">{}<br>{}</span>',
        local_datetime(value),
        *local_datetime(value, seconds=False).split(" ", 1),
    )


#: The most currencies a filtered view's totals list (the provider has five).
MAX_TOTALS_CURRENCIES = 20


def currency_totals(changelist: Any) -> list[dict[str, Any]] | None:
    """The orders of a filtered, searched or date-drilled view, counted and summed per
    currency, in one query; ``None`` for the whole list, where it would read every row of a
    million-order table on each page view (filter by status or date to see totals)."""
    drilled = changelist.date_hierarchy and any(
        name.startswith(f"{changelist.date_hierarchy}__") for name in changelist.params
    )
    if not (changelist.has_active_filters or changelist.query or drilled):
        return None
    rows = (
        changelist.queryset.order_by()
        .values("currency")
        .annotate(orders=Count("pk"), amount=Sum("total"))
        .order_by("currency")[:MAX_TOTALS_CURRENCIES]
    )
    return [
        {
            "currency": row["currency"].upper() or "-",
            "orders": grouped_number(row["orders"]),
            "amount": format_money(row["amount"], row["currency"])
            if row["amount"] is not None
            else "-",
        }
        for row in rows
    ]
