"""Validation of refund request bodies, before any record is read (the provider's contract as
its SDK states it: ``inttegro.refund.CreateRequest``, ``CreateLineItemInput``, ``CancelRequest``).

Only the shape is checked here; what depends on the order (its status, line ids, currency and
each line's refundable remainder) is checked in ``refunds`` against the stored order, inside
the transaction that stores the refund.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import invalid
from .validation import custom_data, is_int

#: The provider's nine refund reasons (``inttegro.refund.Reason``).
REASONS = (
    "requested_by_customer",
    "duplicate",
    "fraudulent",
    "order_canceled",
    "item_returned",
    "item_damaged",
    "item_not_received",
    "item_not_as_described",
    "custom",
)
MAX_LINES = 64
DETAILS_MAX = 2048
REFERENCE_MAX = 256


@dataclass(frozen=True)
class RefundLine:
    """One requested line: which order line, how much, and its own optional reason."""

    order_line_item_id: str
    currency: str
    amount: int
    reason: str | None
    reason_details: str | None


@dataclass(frozen=True)
class CreateRefund:
    order_id: str
    reason: str
    reason_details: str | None
    reference: str | None
    custom_data: dict[str, str] | None
    lines: list[RefundLine]


def _id(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(param, f"{param} must be a non-empty string.")
    return value


def _text(value: Any, param: str, limit: int) -> str | None:
    """An optional string (absent or null: None), stripped, 1 to ``limit`` characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > limit:
        raise invalid(param, f"{param} must be a non-empty string of at most {limit} characters.")
    return value.strip()


def _reason(value: Any, param: str) -> str:
    if value not in REASONS:
        raise invalid(param, f"{param} must be one of {', '.join(REASONS)}, not {value!r}.")
    return str(value)


def _details(body: dict[str, Any], reason: str | None, prefix: str) -> str | None:
    """``reason_details``: required with ``custom``; on a line, only beside a line reason."""
    param = f"{prefix}reason_details"
    details = _text(body.get("reason_details"), param, DETAILS_MAX)
    if reason == "custom" and details is None:
        raise invalid(param, f"{param} is required when the reason is custom.")
    if prefix and details is not None and reason is None:
        raise invalid(param, f"{param} needs a line-level reason ({prefix}reason).")
    return details


def _line(raw: Any, param: str) -> RefundLine:
    if not isinstance(raw, dict):
        raise invalid(param, f"{param} must be an object.")
    line_id = _id(raw.get("order_line_item_id"), f"{param}.order_line_item_id")
    money = raw.get("refund_amount")
    if not isinstance(money, dict):
        raise invalid(f"{param}.refund_amount", f"{param}.refund_amount must be an object.")
    currency = money.get("currency")
    if not isinstance(currency, str) or not currency:
        raise invalid(
            f"{param}.refund_amount.currency",
            f"{param}.refund_amount.currency must be a currency code (lower case).",
        )
    amount = money.get("value")
    if not is_int(amount) or amount < 1:
        raise invalid(
            f"{param}.refund_amount.value",
            f"{param}.refund_amount.value must be an integer >= 1 (minor units).",
        )
    reason = None if raw.get("reason") is None else _reason(raw["reason"], f"{param}.reason")
    details = _details(raw, reason, f"{param}.")
    return RefundLine(line_id, currency, amount, reason, details)


def create_refund(payload: dict[str, Any]) -> CreateRefund:
    """Validate a ``/refunds/create`` body except its key (checked first, for idempotency)."""
    order_id = _id(payload.get("order_id"), "order_id")
    reason = _reason(payload.get("reason"), "reason")
    details = _details(payload, reason, "")
    reference = _text(payload.get("reference"), "reference", REFERENCE_MAX)
    raw_lines = payload.get("line_items")
    if not isinstance(raw_lines, list) or not 1 <= len(raw_lines) <= MAX_LINES:
        raise invalid("line_items", f"line_items must be an array of 1 to {MAX_LINES} lines.")
    lines: list[RefundLine] = []
    for index, raw in enumerate(raw_lines):
        param = f"line_items[{index}]"
        line = _line(raw, param)
        if any(seen.order_line_item_id == line.order_line_item_id for seen in lines):
            raise invalid(
                f"{param}.order_line_item_id",
                f"{param}.order_line_item_id {line.order_line_item_id!r} is already refunded by"
                " an earlier line of this request.",
            )
        lines.append(line)
    return CreateRefund(order_id, reason, details, reference, custom_data(payload), lines)


def cancel_refund(payload: dict[str, Any]) -> tuple[str, str | None]:
    """Validate a ``/refunds/cancel`` body: the refund id and the optional reason."""
    refund_id = _id(payload.get("refund_id"), "refund_id")
    return refund_id, _text(payload.get("reason"), "reason", DETAILS_MAX)
