"""The order page's list of document deliveries (receipts and invoices sent, or not)."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from ..display import local_datetime
from ..models import DocumentDelivery, Order
from .base import badge

MAX_DELIVERIES_SHOWN = 50


def order_deliveries(order: Order) -> list[DocumentDelivery]:
    """The order's newest deliveries: one query, whatever their number."""
    return list(
        DocumentDelivery.objects.filter(order_id=order.pk).order_by("-created_at", "-id")[
            :MAX_DELIVERIES_SHOWN
        ]
    )


def deliveries_table(deliveries: Iterable[DocumentDelivery]) -> SafeString | str:
    """Each delivery: when, which document, its outcome, the channels sent and failed (with
    the provider's error), and the error of a send that got no answer or was refused."""
    rows = list(deliveries)
    if not rows:
        return gettext("No receipt or invoice sent from this shop.")
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                local_datetime(row.created_at),
                row.get_document_display(),
                badge(row.state, row.get_state_display()),
                ", ".join(row.sent_channels) or "-",
                format_html_join(
                    "",
                    "<div>{}: {}</div>",
                    ((f.get("channel"), f.get("error")) for f in row.failures),
                )
                or "-",
                _note(row),
            )
            for row in rows
        ),
    )
    head = "".join(
        f"<th>{gettext(title)}</th>"
        for title in ("sent at", "document", "outcome", "channels sent", "channels failed", "note")
    )
    return format_html(
        '<table class="orders-deliveries"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        SafeString(head),
        body,
    )


def _failures(row: DocumentDelivery) -> SafeString:
    pairs = ((f.get("channel"), f.get("error")) for f in row.failures if isinstance(f, dict))
    return format_html_join("", "<div>{}: {}</div>", pairs)


def _note(row: DocumentDelivery) -> str:
    if row.state == DocumentDelivery.State.UNKNOWN:
        return gettext(
            "No answer: the customer may or may not have it. Not resent; check with the "
            "customer before sending again."
        ) + (f" ({row.error})" if row.error else "")
    return row.error or "-"
