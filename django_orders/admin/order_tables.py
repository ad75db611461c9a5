"""The order page's tables, each built in one query whatever the number of its rows.

- The timeline: its ``OrderEvent`` entries, newest first (``mirror.queries.order_timeline``):
  every link is built from the ids the entries hold, nothing else is read. At most
  ``MAX_EVENTS_SHOWN`` are listed; the note under the table says when older ones exist.
- The refunds and each line's refundable remainder, from what the page already loaded (the
  order's raw record: its lines, what was paid for each) and ONE query for its refunds
  (asserted in tests/admin). The remainder shown is the mirror's (paid minus the mirrored
  refunds that are pending, processing or succeeded); ``services.refund_order`` checks again
  against a fresh lookup before it sends.
- The document deliveries (receipts and invoices sent, or not).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..display import line_type_label, local_datetime, refund_reason_label
from ..models import (
    DocumentDelivery,
    Order,
    OrderEvent,
    OrderLineItem,
    OrderRequest,
    OrderStatus,
    Refund,
    RefundStatus,
    order_line_items,
)
from ..money import format_money
from .base import badge

# --- the timeline -----------------------------------------------------------------------------

#: Entries listed on an order's page (the newest ones).
MAX_EVENTS_SHOWN = 100

Kind = OrderEvent.Kind
#: What each kind of request did, as the timeline says it (the link to the request record
#: reads this, not the record's internal number).
REQUEST_LABELS = {
    OrderRequest.Kind.ORDER_CREATE: _("Request to create the order"),
    OrderRequest.Kind.REFUND_CREATE: _("Request to refund"),
    OrderRequest.Kind.ORDER_COMPLETE: _("Request to mark the order fulfilled"),
}


def _status(value: str | None, choices: type) -> SafeString:
    """A status badge with its label (the code stays in the badge's title)."""
    if value is None:
        return badge("-")
    try:
        return badge(value, str(choices(value).label))
    except ValueError:  # a status the choices lack: shown as it is
        return badge(value)


#: ``(admin view name, object id) -> url``, for the links to refunds and order requests.
UrlFor = Callable[[str, Any], str]


def timeline_table(events: list[OrderEvent], url_for: UrlFor, *, more: bool) -> SafeString | str:
    """``events`` newest first as a table (time, what happened, source, staff user)."""
    if not events:
        return gettext(
            "Nothing yet: the timeline records changes after the order was first stored."
        )
    rows = format_html_join(
        "",
        '<tr><td style="white-space:nowrap">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
        (
            (
                local_datetime(event.at),
                _what(event, url_for),
                event.get_source_display(),
                event.actor or "-",
            )
            for event in events
        ),
    )
    note = (
        format_html(
            "<p>{}</p>",
            gettext("Only the newest %(count)d entries are shown.") % {"count": len(events)},
        )
        if more
        else ""
    )
    return format_html(
        '<table class="orders-timeline"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th>'
        "</tr></thead><tbody>{}</tbody></table>{}",
        gettext("time"),
        gettext("what happened"),
        gettext("source"),
        gettext("staff user"),
        rows,
        note,
    )


def _what(event: OrderEvent, url_for: UrlFor) -> SafeString:
    if event.kind == Kind.STATUS_CHANGED:
        return format_html(
            "{} {} &rarr; {}",
            gettext("Status"),
            _status(event.from_status, OrderStatus),
            _status(event.to_status, OrderStatus),
        )
    if event.kind == Kind.REFUND_STATUS_CHANGED:
        detail = event.detail if isinstance(event.detail, dict) else {}
        amount = format_money(detail.get("total"), detail.get("currency") or "")
        link = _link(url_for, "refund", event.refund_id)
        if event.from_status is None:
            return format_html(
                "{} {} {} {}",
                gettext("Refund"),
                link,
                amount or "",
                _status(event.to_status, RefundStatus),
            )
        return format_html(
            "{} {} {} &rarr; {}",
            gettext("Refund"),
            link,
            _status(event.from_status, RefundStatus),
            _status(event.to_status, RefundStatus),
        )
    if event.kind == Kind.REQUEST:
        detail = event.detail if isinstance(event.detail, dict) else {}
        kind = detail.get("request_kind", "")
        label = REQUEST_LABELS.get(kind) or kind.replace("_", " ").capitalize() or _("Request")
        return format_html(
            "{} {}{}",
            _link(url_for, "orderrequest", event.order_request_id, text=str(label)),
            _status(event.to_status, OrderRequest.State),
            format_html(": {}", detail["error"]) if detail.get("error") else "",
        )
    label = event.get_kind_display()
    return format_html("{}: {}{}", label, event.to_status, _detail_text(event.detail))


def _link(url_for: UrlFor, model: str, pk: Any, text: str | None = None) -> SafeString | str:
    """A link to the record ``pk``, reading ``text`` (the id itself by default); ``text``
    alone when there is no record to link to."""
    if pk is None:
        return text or ""
    return format_html('<a href="{}">{}</a>', url_for(model, pk), pk if text is None else text)


#: The order a detail's keys are shown in, the rest after them by name: the same on every
#: database (PostgreSQL's jsonb does not keep the order a mapping was written in).
DETAIL_ORDER = ("state", "sent", "failed", "error", "outcome", "delivery")


def _detail_key(key: str) -> tuple[int, str]:
    return (DETAIL_ORDER.index(key) if key in DETAIL_ORDER else len(DETAIL_ORDER), key)


def _detail_text(detail: Any) -> SafeString | str:
    """A document's or staff action's detail, as ``key: value`` pairs in ``DETAIL_ORDER``."""
    if not isinstance(detail, dict) or not detail:
        return ""
    keys = sorted(detail, key=_detail_key)
    return format_html(
        " ({})",
        format_html_join("; ", "{}: {}", ((key, _value_text(detail[key])) for key in keys)),
    )


def _value_text(value: Any) -> str:
    """A list as ``a, b``, a mapping as ``key: value, ...`` (a delivery's channels), an empty
    one as ``-``; anything else as it is."""
    if isinstance(value, dict):
        return ", ".join(f"{key}: {value[key]}" for key in sorted(value)) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value) or "-"
    return str(value)


# --- the refunds and the remainders -----------------------------------------------------------

MISSING = "-"


def order_lines(order: Order, refunds: list[Refund]) -> list[OrderLineItem]:
    """``Order.line_items`` from the refunds the page loaded already (no second query)."""
    return order_line_items(order.raw, refunds)


def order_refunds(order: Order) -> list[Refund]:
    """The order's refunds, newest first: one query."""
    return list(Refund.objects.filter(order_id=order.pk).order_by("-created_at", "-id"))


def remainders_table(order: Order, refunds: list[Refund]) -> SafeString | str:
    """``Order.line_items`` as a table: what each line is, what was paid, refunded and is left.

    The line ids are what ``refund_order(lines=...)`` takes, so they are shown too."""
    lines = order_lines(order, refunds)
    if not lines:
        return gettext("No refundable lines in the record.")
    rows = format_html_join(
        "",
        '<tr><td>{}</td><td>{}</td><td class="orders-number">{}</td>'
        + '<td class="orders-number" style="white-space:nowrap">{}</td>' * 3
        + "<td><code>{}</code></td></tr>",
        (
            (
                line.name,
                line_type_label(line.type),
                line.quantity,
                format_money(line.paid, order.currency) or MISSING,
                format_money(line.refunded, order.currency) or MISSING,
                format_money(line.refundable, order.currency) or MISSING,
                line.id,
            )
            for line in lines
        ),
    )
    return format_html(
        '<table class="orders-refundable"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        format_html_join(
            "",
            "<th>{}</th>",
            (
                (label,)
                for label in (
                    gettext("Name"),
                    gettext("Type"),
                    gettext("Quantity"),
                    gettext("Paid"),
                    gettext("Refunded"),
                    gettext("Refundable"),
                    gettext("Line id"),
                )
            ),
        ),
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
                refund_reason_label(refund.reason) or MISSING,
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
        gettext("Refund"),
        gettext("Amount"),
        gettext("Status"),
        gettext("Reason"),
        gettext("Reference"),
        gettext("Created"),
        gettext("Settled"),
        gettext("Failure"),
        rows,
    )


# --- the document deliveries ------------------------------------------------------------------

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
