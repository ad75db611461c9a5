"""What an order's checkout looks like on the admin's pages: its money, its line items, its
payment page, and the currency filter of the orders list.

Every amount goes through the one money formatter (``django_orders.money.format_money``: the
currency's minor-unit digits from a table). Line items are read from the raw record, which is
the provider's and may lack any piece: a missing name, quantity or price shows as "-", never as
an error page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..conf import orders_settings
from ..models import Order
from ..money import format_money

#: Line items shown on an order's page; the raw record below holds them all.
MAX_LINE_ITEMS_SHOWN = 200

MISSING = "-"


def money_or_dash(value: Any, currency: Any) -> str:
    """An amount formatted for its currency, or "-" when either is unknown or malformed."""
    if type(value) is not int or not isinstance(currency, str) or not currency:
        return MISSING
    return format_money(value, currency.lower()) or MISSING


def payment_link(url: str) -> SafeString | str:
    """A link to the hosted payment page, opened in a new tab, for an ``http(s)`` URL only
    (the parser keeps no other; checked again here, as this is where it becomes a link)."""
    if not url or not url[:8].lower().startswith(("https://", "http://")):
        return MISSING
    return format_html('<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', url, url)


def _line(item: dict[str, Any]) -> tuple[str, str, Any, str, str]:
    """(type, name, quantity, unit price, line total) of one line item, "-" for what is missing.

    The provider's three shapes: ``product`` (``name``, ``quantity``, ``price``), ``fee``
    (``amount``, ``label``) and ``shipping`` (``fee``, ``label``); an unknown type shows its
    ``name`` or ``label`` if it has one.
    """
    kind = item.get("type")
    kind = kind if isinstance(kind, str) and kind else MISSING
    body = item.get(kind) if kind != MISSING else None
    body = body if isinstance(body, dict) else {}
    if kind == "product":
        price, quantity = body.get("price"), body.get("quantity")
    else:
        price = body.get("amount") if kind == "fee" else body.get("fee")
        if not isinstance(price, dict):
            price = body.get("price")
        quantity = body.get("quantity", 1)
    name = next(
        (body[key] for key in ("name", "label", "description") if isinstance(body.get(key), str)),
        MISSING,
    )
    price = price if isinstance(price, dict) else {}
    value, currency = price.get("value"), price.get("currency")
    if type(quantity) is not int:
        quantity = MISSING
    total = (
        money_or_dash(value * quantity, currency)
        if type(value) is int and quantity != MISSING
        else MISSING
    )
    return kind, name, quantity, money_or_dash(value, currency), total


def line_items_table(order: Order) -> SafeString | str:
    """The order's line items as a table (type, name, quantity, unit price, line total) with
    the order's total below, read from ``raw["line_item_group"]``."""
    group = order.raw.get("line_item_group") if isinstance(order.raw, dict) else None
    items = group.get("line_items") if isinstance(group, dict) else None
    items = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    total = format_money(order.total, order.currency) or MISSING
    if not items:
        return format_html(
            "{} {}: {}", gettext("No line items in the record."), gettext("Total"), total
        )
    rows = format_html_join(
        "",
        '<tr><td>{}</td><td>{}</td><td class="orders-number">{}</td>'
        '<td class="orders-number">{}</td><td class="orders-number">{}</td></tr>',
        (_line(item) for item in items[:MAX_LINE_ITEMS_SHOWN]),
    )
    more = ""
    if len(items) > MAX_LINE_ITEMS_SHOWN:
        more = format_html(
            '<tr><td colspan="5">{}</td></tr>',
            gettext("%(count)d more line items: see the raw record.")
            % {"count": len(items) - MAX_LINE_ITEMS_SHOWN},
        )
    return format_html(
        '<table class="orders-line-items"><thead><tr><th>{}</th><th>{}</th><th>{}</th>'
        "<th>{}</th><th>{}</th></tr></thead><tbody>{}{}</tbody><tfoot><tr>"
        '<th colspan="4">{}</th><th class="orders-number">{}</th></tr></tfoot></table>',
        gettext("type"),
        gettext("name"),
        gettext("quantity"),
        gettext("unit price"),
        gettext("line total"),
        rows,
        more,
        gettext("Total"),
        total,
    )


class CurrencyListFilter(admin.SimpleListFilter):
    """Orders in one of the configured ``CURRENCIES``.

    The choices come from the setting, not from the table: a ``SELECT DISTINCT currency`` would
    read a million rows on every page view. Filtering is ``currency = %s`` on the page's ordered
    scan of the newest-orders index (each of the provider's five currencies is common).
    """

    title = _("currency")
    parameter_name = "currency"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(code, code.upper()) for code in orders_settings.CURRENCIES]

    def queryset(self, request: HttpRequest, queryset):
        value = self.value()
        if value in orders_settings.CURRENCIES:
            return queryset.filter(currency=value)
        return queryset
