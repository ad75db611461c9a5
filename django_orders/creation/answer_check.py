"""Is a create's answer the order that was sent? Checked before anything of it is stored.

The answer's id is linked to the request and the owner token then opens that order, so an
answer naming another order would hand it to a stranger. A mismatch goes to staff
(``needs_review``), never resent. The fields compared: docs/architecture/checkout.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..mirror.parsing import ParsedOrder


def sent_total(line_items: list[Mapping[str, Any]]) -> tuple[str, int] | None:
    """The (currency, total) of validated line items: what ``line_item_group.total`` sums;
    ``None`` when a catalog line is among them (its price is the provider's)."""
    currency, total = "", 0
    for item in line_items:
        kind = item["type"]
        if kind == "product":
            if "price" not in item["product"]:
                return None
            price = item["product"]["price"]
            amount = price["value"] * item["product"]["quantity"]
        elif kind == "fee":
            price = item["fee"]["amount"]
            amount = price["value"]
        else:
            price = item["shipping"]["fee"]
            amount = price["value"]
        currency, total = price["currency"], total + amount
    return currency, total


def answer_mismatch(payload: str, parsed: ParsedOrder) -> str | None:
    """Why the answer ``parsed`` is not the order the stored ``payload`` asked for, or ``None``."""
    sent = json.loads(payload)
    summed = sent_total(sent["line_items"])
    problems = []
    group = parsed.raw.get("line_item_group")
    if parsed.total is None and isinstance(group, dict) and group.get("total") is not None:
        problems.append("its total is not a whole number of minor units")
    elif parsed.total is not None and parsed.total < 0:
        problems.append(f"its total is negative ({parsed.total})")
    elif summed is not None and parsed.total is not None and parsed.total != summed[1]:
        problems.append(f"its total is {parsed.total}, the lines sent add up to {summed[1]}")
    if summed is not None and parsed.currency and parsed.currency != summed[0]:
        problems.append(f"its currency is {parsed.currency!r}, not {summed[0]!r}")
    if "customer_id" in sent:
        # An order for a known customer: the answer must name that customer.
        if parsed.customer.id != sent["customer_id"]:
            problems.append(f"its customer is {_shown(parsed.customer.id)}, not the one sent")
    else:
        email = sent["customer_data"]["email_address"]
        answered_email = parsed.customer.email_address
        if answered_email and answered_email.lower() != email.lower():
            # The answered address is not repeated: it may be another customer's.
            problems.append("its customer's e-mail address is not the one sent")
    number, answered_number = sent.get("number"), parsed.raw.get("number")
    if number is not None and answered_number is not None and answered_number != number:
        problems.append(f"its number is {_shown(answered_number)}, not {number!r}")
    custom_data = parsed.raw.get("custom_data")
    if custom_data is not None and custom_data != (sent.get("custom_data") or {}):
        problems.append("its custom_data is not the one sent")
    if not problems:
        return None
    return f"The service answered with order {parsed.id}, which is not the order sent: " + (
        "; ".join(problems) + "."
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "..."
