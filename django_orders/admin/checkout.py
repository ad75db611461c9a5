"""What an order's checkout looks like on the admin's pages: its money, its line items, its
payment page, and the currency filter of the orders list.

Every amount goes through the one money formatter (``django_orders.money.format_money``: the
currency's minor-unit digits from a table). Line items are read from the raw record, which is
the provider's and may lack any piece: a missing name, quantity or price shows as "-", never as
an error page.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..conf import orders_settings
from ..display import line_type_label
from ..models import Order, OrderRequest
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
    label = line_type_label(kind) if kind != MISSING else MISSING
    return label, name, quantity, money_or_dash(value, currency), total


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
            ngettext(
                "%(count)d more line item: see the raw record.",
                "%(count)d more line items: see the raw record.",
                len(items) - MAX_LINE_ITEMS_SHOWN,
            )
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


#: An address's fields in the order they are read, the input's ``town`` or the answer's ``city``.
ADDRESS_FIELDS = ("name", "line1", "line2", "town", "city", "district", "region", "post_code")


def _address_text(address: Any) -> str:
    """One line of an address from the raw record (any piece may be missing)."""
    if not isinstance(address, dict):
        return MISSING
    parts = [address.get(name) for name in (*ADDRESS_FIELDS, "country", "phone_number")]
    shown = [str(part) for part in parts if isinstance(part, str | int) and str(part).strip()]
    return ", ".join(shown) or MISSING


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sent_create(order: Order) -> dict[str, Any]:
    """The create body this shop sent for ``order`` (its ``order_create`` request), or ``{}``
    for an order made elsewhere: what the order's answer has no field for (the billing
    contact, the statement descriptor before payment) is read from it."""
    payload = (
        OrderRequest.objects.filter(order_id=order.pk, kind=OrderRequest.Kind.ORDER_CREATE)
        .values_list("payload", flat=True)
        .first()
    )
    try:
        body = json.loads(payload) if payload else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def billing_and_shipping(order: Order) -> SafeString:
    """Who is billed, where the order ships, and what the payer's statement shows: the
    ``billing_details``, ``shipping`` and ``statement_descriptor`` (or prefix) this shop sent,
    else what the order's customer and payment show."""
    raw = order.raw if isinstance(order.raw, dict) else {}
    sent = sent_create(order)
    customer, payment = _object(raw.get("customer")), _object(raw.get("payment"))
    billing, shipping = _object(sent.get("billing_details")), _object(sent.get("shipping"))
    payer = ", ".join(
        str(billing[name])
        for name in ("name", "email_address", "phone_number")
        if isinstance(billing.get(name), str)
    )
    prefix = sent.get("statement_descriptor_prefix")
    descriptor = (
        payment.get("statement_descriptor")
        or sent.get("statement_descriptor")
        or (f"{prefix}*{order.pk}"[:22] if isinstance(prefix, str) else None)
    )
    rows = [
        (gettext("billed to"), payer or MISSING),
        (
            gettext("billing address"),
            _address_text(billing.get("address") or customer.get("billing_address")),
        ),
        (
            gettext("shipping address"),
            _address_text(shipping.get("address") or customer.get("shipping_address")),
        ),
        (gettext("statement descriptor"), str(descriptor) if descriptor else MISSING),
    ]
    return format_html(
        '<table class="order-addresses">{}</table>',
        format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows),
    )
