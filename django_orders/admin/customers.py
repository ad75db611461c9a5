"""Customers as mirrored from the orders: read-only, with their order counts and newest orders."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import (
    BigIntegerField,
    CharField,
    Count,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..models import Customer, Order, OrderStatus
from ..money import format_money
from .base import ReadOnlyModelAdmin, local_datetime, pretty_json_text, raw_as_text, status_badge

#: Orders shown on a customer's page; the rest are one link away in the orders list.
MAX_ORDERS_SHOWN = 20


def order_count_subquery() -> Coalesce:
    """Orders per customer as a correlated subquery.

    A ``Count("orders")`` annotation would GROUP BY over the join of every customer with every
    order before the page is cut (a million rows per page view); the subquery is evaluated for
    the rows of the page only, each an index-only scan of the ``customer_id`` index.
    """
    counts = (
        Order.objects.order_by()
        .filter(customer=OuterRef("pk"))
        .values("customer")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))


#: The orders whose total counts as spent: paid, whether fulfilled yet or not.
SPENT_STATUSES = (OrderStatus.PAID, OrderStatus.COMPLETED)


def spent_subqueries() -> dict[str, Subquery]:
    """What each customer spent (paid and completed orders), as correlated subqueries of the
    page's one query, like ``order_count_subquery``: the sum, and the lowest and highest
    currency, so that a customer who paid in two currencies is never shown one added-up sum."""
    paid = Order.objects.order_by().filter(customer=OuterRef("pk"), status__in=SPENT_STATUSES)

    def per_customer(aggregate: object, field: object) -> Subquery:
        rows = paid.values("customer").annotate(value=aggregate).values("value")
        return Subquery(rows, output_field=field)  # type: ignore[arg-type]

    return {
        "spent_total": per_customer(Sum("total"), BigIntegerField()),
        "spent_currency": per_customer(Min("currency"), CharField()),
        "spent_currency_max": per_customer(Max("currency"), CharField()),
    }


@admin.register(Customer)
class CustomerAdmin(ReadOnlyModelAdmin):
    list_display = (
        "id",
        "name",
        "email_address",
        "phone_number",
        "guest",
        "order_count",
        "amount_spent",
    )
    list_filter = ("guest",)
    search_fields = ("=id", "=email_address", "name")
    search_help_text = _("A customer id or e-mail address (exact), or part of the name.")
    # name, id: the name index gives the order; id breaks ties.
    ordering = ("name", "id")
    sortable_by = ("id", "name")
    actions = None
    fields = (
        "id",
        "reference",
        "name",
        "email_address",
        "phone_number",
        "guest",
        "order_count",
        "amount_spent",
        "first_seen_at",
        "changed_at",
        "recent_orders",
        "raw_record",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest):
        # The list never needs the raw records (nor should decode them: see raw_as_text).
        queryset = super().get_queryset(request).defer("raw")
        return queryset.annotate(order_total=order_count_subquery(), **spent_subqueries())

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        customer = super().get_object(request, object_id, from_field)
        if customer is not None:
            stored = Customer.objects.filter(pk=customer.pk).values_list(raw_as_text())
            customer.raw_text = stored.get()[0]
        return customer

    @admin.display(description=_("orders"))
    def order_count(self, obj: Customer) -> int:
        return obj.order_total  # type: ignore[attr-defined]  # annotated by get_queryset

    @admin.display(description=_("amount spent"))
    def amount_spent(self, obj: Customer) -> SafeString | str:
        """The totals of the customer's paid and completed orders (refunds not taken off)."""
        total, currency = obj.spent_total, obj.spent_currency  # type: ignore[attr-defined]
        if total is None:
            return "-"
        if currency != obj.spent_currency_max:  # type: ignore[attr-defined]
            return str(_("In several currencies: see the orders"))
        return format_html(
            '<span style="white-space:nowrap">{}</span>', format_money(int(total), currency)
        )

    @admin.display(description=_("raw record"))
    def raw_record(self, obj: Customer) -> SafeString:
        return pretty_json_text(obj.raw_text)  # type: ignore[attr-defined]  # raw_as_text()

    @admin.display(description=_("newest orders"))
    def recent_orders(self, obj: Customer) -> SafeString | str:
        orders = list(
            Order.objects.filter(customer=obj)
            .defer("raw")
            .order_by("-initiated_at", "-id")[:MAX_ORDERS_SHOWN]
        )
        if not orders:
            return str(_("No orders."))
        changelist = reverse(
            "admin:django_orders_order_changelist", current_app=self.admin_site.name
        )
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse(
                        "admin:django_orders_order_change",
                        args=(quote(order.pk),),
                        current_app=self.admin_site.name,
                    ),
                    order.pk,
                    status_badge(order),
                    local_datetime(order.initiated_at),
                    local_datetime(order.completed_at),
                )
                for order in orders
            ),
        )
        total = getattr(obj, "order_total", len(orders))
        more = format_html(
            '<p><a href="{}?{}">{}</a></p>',
            changelist,
            urlencode({"customer__exact": obj.pk}),
            ngettext(
                "Show the customer's order in the orders list",
                "Show all %(count)d orders of the customer in the orders list",
                total,
            )
            % {"count": total},
        )
        return format_html(
            '<table class="orders-recent"><thead><tr><th>{}</th><th>{}</th><th>{}</th>'
            "<th>{}</th></tr></thead><tbody>{}</tbody></table>{}",
            _("order"),
            _("status"),
            _("initiated"),
            _("completed"),
            rows,
            more,
        )
