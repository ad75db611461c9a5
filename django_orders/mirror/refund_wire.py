"""The refund record on the wire (``inttegro.refund.Refund``), as typed msgspec structs.

The one reading of every answer that carries refunds (create, cancel, lookup, an order's
``refunds[]``). Unknown fields are allowed and a status is any string (the provider adds them);
what is missing or of the wrong type is an ``InvalidRecord`` naming the refund and the field.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from msgspec import Struct

from ..exceptions.wire import InvalidRecord

__all__ = [
    "RefundFailure",
    "RefundMoney",
    "RefundStruct",
    "decode_refund",
    "embedded_refunds",
    "refund_mismatch",
]


class RefundMoney(Struct, frozen=True):
    currency: str
    value: int


class RefundFailure(Struct, frozen=True):
    """Why a refund failed, as the provider says: one of its reasons, a merchant-facing detail
    and whether the same refund may succeed if tried again (with a new reference)."""

    reason: str | None = None
    detail: str | None = None
    retryable: bool | None = None


class RefundStruct(Struct, frozen=True):
    id: str
    order_id: str
    status: str
    total: RefundMoney
    created_at: str
    reason: str | None = None
    reason_details: str | None = None
    reference: str | None = None
    failure: RefundFailure | None = None
    processing_at: str | None = None
    succeeded_at: str | None = None
    failed_at: str | None = None
    canceled_at: str | None = None


def decode_refund(record: Any) -> RefundStruct:
    """One refund record (a dict as decoded from JSON) as a ``RefundStruct``."""
    try:
        refund = msgspec.convert(record, RefundStruct)
    except msgspec.ValidationError as exc:
        name = record.get("id") if isinstance(record, dict) else None
        raise InvalidRecord(f"refund {name or '(no id)'}: {exc}") from None
    if not refund.id.startswith("rf_"):
        raise InvalidRecord(f"refund id {refund.id!r} does not start with 'rf_'")
    return refund


def embedded_refunds(order_record: Any) -> list[Any]:
    """The ``refunds[]`` an order record embeds (none when absent or null)."""
    refunds = order_record.get("refunds") if isinstance(order_record, dict) else None
    if refunds is None:
        return []
    if not isinstance(refunds, list):
        raise InvalidRecord("order refunds must be an array")
    return refunds


def _wire_lines(lines: Any) -> list[tuple[str, str, int]] | None:
    """``(line id, currency, amount)`` of a refund's ``line_items``, sorted; ``None`` when they
    cannot be read (an answer breaking the contract disagrees with any request)."""
    if not isinstance(lines, list):
        return None
    read = []
    for line in lines:
        money = line.get("refund_amount") if isinstance(line, dict) else None
        if not isinstance(money, dict):
            return None
        line_id, currency, value = (
            line.get("order_line_item_id"),
            money.get("currency"),
            money.get("value"),
        )
        if not (isinstance(line_id, str) and isinstance(currency, str)):
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        read.append((line_id, currency, value))
    return sorted(read)


def _shown_lines(lines: list[tuple[str, str, int]] | None) -> str:
    if lines is None:
        return "unreadable"
    text = ", ".join(f"{line_id} {value} {currency}" for line_id, currency, value in lines)
    return text if len(text) <= 300 else text[:300] + "..."


def refund_mismatch(payload: str, record: Any) -> str | None:
    """Why the refund ``record`` is not the refund the stored create ``payload`` asked for (its
    order, reference, lines and amounts, total), or ``None``. Whether its id is already linked
    to another request is the caller's to ask (it needs the journal). ``InvalidRecord`` for a
    record that is no refund at all."""
    sent = json.loads(payload)
    refund = decode_refund(record)
    problems = []
    if refund.order_id != sent["order_id"]:
        problems.append(f"it is a refund of order {refund.order_id}, not of {sent['order_id']}")
    if refund.reference != sent["reference"]:
        shown = repr(refund.reference)
        shown = shown if len(shown) <= 100 else shown[:100] + "..."
        problems.append(f"its reference is {shown}, not {sent['reference']!r}")
    sent_lines = _wire_lines(sent["line_items"])
    answered = _wire_lines(record.get("line_items"))
    if answered != sent_lines:
        problems.append(
            f"its lines are {_shown_lines(answered)}, not the {_shown_lines(sent_lines)} sent"
        )
    elif sent_lines:
        currency, total = sent_lines[0][1], sum(line[2] for line in sent_lines)
        if (refund.total.currency, refund.total.value) != (currency, total):
            problems.append(
                f"its total is {refund.total.value} {refund.total.currency}, the lines sent add "
                f"up to {total} {currency}"
            )
    if not problems:
        return None
    return f"The service answered with refund {refund.id}, which is not the refund sent: " + (
        "; ".join(problems) + "."
    )
