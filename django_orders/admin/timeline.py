"""The order page's timeline: its ``OrderEvent`` entries, newest first, as one table.

One query, whatever the number of entries (``mirror.queries.order_timeline``): every link is
built from the ids the entries hold, nothing else is read. At most ``MAX_EVENTS_SHOWN`` are
listed; the note under the table says when older ones exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext

from ..display import local_datetime
from ..models import OrderEvent
from ..money import format_money
from .base import badge

#: Entries listed on an order's page (the newest ones).
MAX_EVENTS_SHOWN = 100

Kind = OrderEvent.Kind
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
            badge(event.from_status or "-"),
            badge(event.to_status),
        )
    if event.kind == Kind.REFUND_STATUS_CHANGED:
        detail = event.detail if isinstance(event.detail, dict) else {}
        amount = format_money(detail.get("total"), detail.get("currency") or "")
        link = _link(url_for, "refund", event.refund_id)
        if event.from_status is None:
            return format_html(
                "{} {} {} {}", gettext("Refund"), link, amount or "", badge(event.to_status)
            )
        return format_html(
            "{} {} {} &rarr; {}",
            gettext("Refund"),
            link,
            badge(event.from_status),
            badge(event.to_status),
        )
    if event.kind == Kind.REQUEST:
        detail = event.detail if isinstance(event.detail, dict) else {}
        return format_html(
            "{} {} {}{}",
            detail.get("request_kind", gettext("request")).replace("_", " ").capitalize(),
            _link(url_for, "orderrequest", event.order_request_id),
            badge(event.to_status),
            format_html(": {}", detail["error"]) if detail.get("error") else "",
        )
    label = event.get_kind_display()
    return format_html("{}: {}{}", label, event.to_status, _detail_text(event.detail))


def _link(url_for: UrlFor, model: str, pk: Any) -> SafeString | str:
    if pk is None:
        return ""
    return format_html('<a href="{}">{}</a>', url_for(model, pk), pk)


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
