"""An order's refunds on its admin page: the refunds table and each line's refundable remainder.

Both come from what the page already loaded: the order's raw record (its lines, what was paid
for each) and ONE query for its refunds, whatever their number (asserted in tests/admin). The
remainder shown is the mirror's (paid minus the mirrored refunds that are pending, processing or
succeeded); ``services.refund_order`` checks again against a fresh lookup before it sends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from ..display import local_datetime
from ..models import Order, Refund, RefundStatus
from ..money import format_money
from .base import badge

#: Refunds that take from a line's remainder (as the service counts them).
COUNTED = frozenset({RefundStatus.PENDING, RefundStatus.PROCESSING, RefundStatus.SUCCEEDED})
MISSING = "-"


@dataclass(frozen=True)
class OrderLine:
    """One refundable line of an order: its id, what it is, what was paid, what is left."""

    id: str
    name: str
    paid: int
    remainder: int


def _paid_lines(raw: Any) -> list[tuple[str, str, int]]:
    """(line id, name, paid in minor units) of each line of the order's raw record."""
    group = raw.get("line_item_group") if isinstance(raw, Mapping) else None
    items = group.get("line_items") if isinstance(group, Mapping) else None
    lines = []
    for item in items if isinstance(items, list) else []:
        kind = item.get("type") if isinstance(item, Mapping) else None
        body = item.get(kind) if isinstance(kind, str) else None
        if not isinstance(body, Mapping) or not isinstance(body.get("id"), str):
            continue
        if kind == "product":
            price, quantity = body.get("price") or {}, body.get("quantity", 1)
        else:
            price, quantity = (body.get("amount") if kind == "fee" else body.get("fee")) or {}, 1
        value = price.get("value") if isinstance(price, Mapping) else None
        if type(value) is not int or type(quantity) is not int:
            continue
        name = next(
            (
                str(body[k])
                for k in ("name", "label", "description")
                if isinstance(body.get(k), str)
            ),
            str(kind),
        )
        lines.append((str(body["id"]), name, value * quantity))
    return lines


def refunded_by_line(refunds: Iterable[Refund]) -> Counter[str]:
    """Per order line, what the counted refunds take off it (from each refund's raw lines)."""
    used: Counter[str] = Counter()
    for refund in refunds:
        if refund.status not in COUNTED or not isinstance(refund.raw, Mapping):
            continue
        for line in refund.raw.get("line_items") or []:
            try:
                used[line["order_line_item_id"]] += int(line["refund_amount"]["value"])
            except (KeyError, TypeError, ValueError):
                continue
    return used


def order_lines(order: Order, refunds: Iterable[Refund]) -> list[OrderLine]:
    """The order's lines with their refundable remainders (never below zero)."""
    used = refunded_by_line(refunds)
    return [
        OrderLine(line_id, name, paid, max(paid - used[line_id], 0))
        for line_id, name, paid in _paid_lines(order.raw)
    ]


def order_refunds(order: Order) -> list[Refund]:
    """The order's refunds, newest first: one query."""
    return list(Refund.objects.filter(order_id=order.pk).order_by("-created_at", "-id"))


def remainders_table(order: Order, refunds: list[Refund]) -> SafeString | str:
    lines = order_lines(order, refunds)
    if not lines:
        return gettext("No refundable lines in the record.")
    rows = format_html_join(
        "",
        '<tr><td>{}</td><td>{}</td><td class="orders-number">{}</td>'
        '<td class="orders-number">{}</td></tr>',
        (
            (
                line.id,
                line.name,
                format_money(line.paid, order.currency) or MISSING,
                format_money(line.remainder, order.currency) or MISSING,
            )
            for line in lines
        ),
    )
    return format_html(
        '<table class="orders-refundable"><thead><tr><th>{}</th><th>{}</th><th>{}</th>'
        "<th>{}</th></tr></thead><tbody>{}</tbody></table>",
        gettext("line"),
        gettext("name"),
        gettext("paid"),
        gettext("refundable"),
        rows,
    )


def _failure(refund: Refund) -> str:
    parts = [part for part in (refund.failure_reason, refund.failure_detail) if part]
    return ": ".join(parts) if parts else ""


def refunds_table(refunds: list[Refund], change_url: Any) -> SafeString | str:
    """The refunds as a table; ``change_url(refund)`` links each to its own page."""
    if not refunds:
        return gettext("No refunds.")
    rows = format_html_join(
        "",
        # Amounts and times on one line each: "GHS" and its number, a date and its time.
        '<tr><td><a href="{}">{}</a></td>'
        '<td class="orders-number" style="white-space:nowrap">{}</td><td>{}</td><td>{}</td>'
        '<td>{}</td><td style="white-space:nowrap">{}</td><td style="white-space:nowrap">{}</td>'
        "<td>{}</td></tr>",
        (
            (
                change_url(refund),
                refund.pk,
                format_money(refund.total, refund.currency) or MISSING,
                badge(refund.status, refund.get_status_display()),
                refund.reason or MISSING,
                refund.reference or MISSING,
                local_datetime(refund.created_at),
                local_datetime(
                    refund.succeeded_at or refund.failed_at or refund.canceled_at or None
                )
                or MISSING,
                _failure(refund) or MISSING,
            )
            for refund in refunds
        ),
    )
    return format_html(
        '<table class="orders-refunds"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th>'
        "<th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>{}</tbody></table>",
        gettext("refund"),
        gettext("amount"),
        gettext("status"),
        gettext("reason"),
        gettext("reference"),
        gettext("created"),
        gettext("settled"),
        gettext("failure"),
        rows,
    )
