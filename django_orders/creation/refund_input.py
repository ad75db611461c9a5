"""``refund_order``'s input: its shape, then its amounts against the order a fresh lookup shows.

Two steps because the second needs the order: ``check_arguments`` refuses what is wrong whatever
the order and returns the arguments a repeated ``reference`` is compared on; ``refund_lines``
resolves them against the order. Each refusal names its field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions.flows import InvalidRefundRequest

#: The provider's refund reasons (``inttegro.refund.Reason``); ``custom`` needs details.
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
DETAILS_MAX_LENGTH = 2048
REFERENCE_MAX_LENGTH = 256
ORDER_ID_MAX_LENGTH = 64
CUSTOM_DATA_MAX_BYTES = 25 * 1024
#: The largest amount JSON carries exactly everywhere (as for orders).
MAX_AMOUNT = 2**53 - 1


def _fail(field: str, message: str) -> InvalidRefundRequest:
    return InvalidRefundRequest({field: [message]})


def _text(value: Any, field: str, limit: int, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(field, f"{field} must be a non-empty string.")
    text = value.strip()
    if len(text) > limit:
        raise _fail(field, f"{field} must be at most {limit} characters, not {len(text)}.")
    return text


def check_arguments(
    order_id: Any,
    *,
    reference: Any,
    reason: Any,
    lines: Any,
    reason_details: Any,
    custom_data: Any,
) -> dict[str, Any]:
    """The arguments as given, checked and normalised; ``InvalidRefundRequest`` otherwise."""
    order = _text(order_id, "order_id", ORDER_ID_MAX_LENGTH, required=True)
    ref = _text(reference, "reference", REFERENCE_MAX_LENGTH, required=True)
    if reason not in REASONS:
        raise _fail("reason", f"reason must be one of {', '.join(REASONS)}, not {reason!r}.")
    details = _text(reason_details, "reason_details", DETAILS_MAX_LENGTH, required=False)
    if reason == "custom" and details is None:
        raise _fail("reason_details", "reason_details is required when the reason is custom.")
    return {
        "order_id": order,
        "reference": ref,
        "reason": reason,
        "lines": None if lines is None else _lines(lines),
        "reason_details": details,
        "custom_data": _custom_data(custom_data),
    }


def _lines(lines: Any) -> list[dict[str, Any]]:
    if isinstance(lines, str | bytes | Mapping) or not isinstance(lines, Sequence):
        raise _fail("lines", "lines must be a list of {line_item_id, amount} objects.")
    if not 1 <= len(lines) <= MAX_LINES:
        raise _fail("lines", f"lines must hold 1 to {MAX_LINES} lines, not {len(lines)}.")
    checked: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        path = f"lines[{index}]"
        if not isinstance(line, Mapping):
            raise _fail(path, f"{path} must be an object with line_item_id and amount.")
        unknown = set(line) - {"line_item_id", "amount", "currency"}
        if unknown:
            raise _fail(path, f"{path} has unknown fields: {', '.join(sorted(map(str, unknown)))}.")
        line_id = _text(line.get("line_item_id"), f"{path}.line_item_id", 64, required=True)
        if any(seen["line_item_id"] == line_id for seen in checked):
            raise _fail(f"{path}.line_item_id", f"{path}.line_item_id {line_id!r} is repeated.")
        amount = line.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= MAX_AMOUNT:
            raise _fail(
                f"{path}.amount",
                f"{path}.amount must be a positive integer in minor units, not {amount!r}.",
            )
        item: dict[str, Any] = {"line_item_id": line_id, "amount": amount}
        if line.get("currency") is not None:
            item["currency"] = _text(line["currency"], f"{path}.currency", 16, required=True)
        checked.append(item)
    return checked


def _custom_data(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _fail("custom_data", "custom_data must map strings to strings.")
    size = len(json.dumps(dict(value), ensure_ascii=False).encode())
    if size > CUSTOM_DATA_MAX_BYTES:
        raise _fail("custom_data", f"custom_data must be at most {CUSTOM_DATA_MAX_BYTES} bytes.")
    return dict(value)


# --- against the order ----------------------------------------------------------------------

#: Refund statuses that count against a line's remainder.
COUNTED = frozenset({"pending", "processing", "succeeded"})


def order_lines(order: Mapping[str, Any]) -> dict[str, int]:
    """What was paid per order line id (products: price x quantity; fees; shipping)."""
    group = order.get("line_item_group") or {}
    paid: dict[str, int] = {}
    for item in group.get("line_items") or []:
        kind = item.get("type")
        body = item.get(kind) if isinstance(kind, str) else None
        if not isinstance(body, Mapping) or not isinstance(body.get("id"), str):
            continue
        if kind == "product":
            amount = int(body["price"]["value"]) * int(body.get("quantity") or 1)
        else:
            money = body.get("amount") if kind == "fee" else body.get("fee")
            amount = int((money or {}).get("value") or 0)
        paid[body["id"]] = amount
    return paid


def order_currency(order: Mapping[str, Any]) -> str | None:
    total = (order.get("line_item_group") or {}).get("total") or order.get("total") or {}
    return total.get("currency") if isinstance(total, Mapping) else None


def refunded_by_line(refunds: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """Per order line, what the order's refunds that count take off its remainder."""
    used: Counter[str] = Counter()
    for refund in refunds:
        if refund.get("status") in COUNTED:
            for line in refund.get("line_items") or []:
                used[line["order_line_item_id"]] += int(line["refund_amount"]["value"])
    return used


def in_flight_by_line(payloads: Sequence[str]) -> Counter[str]:
    """Per order line, what this shop's refund requests still in flight would take."""
    used: Counter[str] = Counter()
    for payload in payloads:
        for line in json.loads(payload).get("line_items") or []:
            used[line["order_line_item_id"]] += int(line["refund_amount"]["value"])
    return used


def refund_lines(
    arguments: Mapping[str, Any], paid: Mapping[str, int], used: Counter[str], currency: str
) -> list[dict[str, Any]]:
    """The lines to send, in the wire's shape; ``InvalidRefundRequest`` naming the field."""
    lines = arguments["lines"]
    if lines is None:  # every line's refundable remainder
        lines = [
            {"line_item_id": line_id, "amount": amount - used[line_id]}
            for line_id, amount in paid.items()
            if amount - used[line_id] > 0
        ]
        if not lines:
            raise _fail("lines", "Nothing is left to refund on this order.")
        if len(lines) > MAX_LINES:
            raise _fail("lines", f"The order has more than {MAX_LINES} lines left: pick lines.")
    wire = []
    for index, line in enumerate(lines):
        path = f"lines[{index}]"
        line_id = line["line_item_id"]
        if line_id not in paid:
            raise _fail(f"{path}.line_item_id", f"{line_id!r} is not a line of this order.")
        if line.get("currency", currency) != currency:
            raise _fail(
                f"{path}.currency",
                f"{path}.currency must be the order's currency {currency}, not "
                f"{line['currency']!r}.",
            )
        remainder = paid[line_id] - used[line_id]
        if line["amount"] > remainder:
            raise _fail(
                f"{path}.amount",
                f"{path}.amount {line['amount']} is more than the {max(remainder, 0)} still "
                f"refundable on line {line_id} (paid {paid[line_id]}).",
            )
        wire.append(
            {
                "order_line_item_id": line_id,
                "refund_amount": {"currency": currency, "value": line["amount"]},
            }
        )
    return wire


def encode_refund_payload(arguments: Mapping[str, Any], lines: list[dict[str, Any]]) -> str:
    """The exact JSON text that is stored, sent and resent (the key travels in a header)."""
    body: dict[str, Any] = {
        "order_id": arguments["order_id"],
        "reason": arguments["reason"],
        "reference": arguments["reference"],
        "line_items": lines,
    }
    if arguments["reason_details"] is not None:
        body["reason_details"] = arguments["reason_details"]
    if arguments["custom_data"] is not None:
        body["custom_data"] = arguments["custom_data"]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))
