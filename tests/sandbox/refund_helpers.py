"""Paid orders and refund bodies for the sandbox's refund tests."""

from __future__ import annotations

import uuid
from typing import Any

from django_orders.testing.sandbox import SandboxServer

from .conftest import Api, order_payload

CREATE = "/refunds/create"
CANCEL = "/refunds/cancel"


def paid_order(api: Api, sandbox: SandboxServer, *, pay: bool = True) -> dict[str, Any]:
    """A paid order (unless ``pay=False``) with a product (2 x 5000), a fee (150) and a
    shipping line (900), in ``ghs``."""
    payload = order_payload()
    payload["line_items"] += [
        {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 150}, "label": "Wrap"}},
        {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 900}}},
    ]
    response = api.create(payload)
    assert response.status_code == 200, response.text
    order = response.json()["order"]
    return sandbox.pay_order(order["id"]) if pay else order


def line_ids(order: dict[str, Any]) -> list[str]:
    """The order's line ids, in order: product, fee, shipping."""
    return [item[item["type"]]["id"] for item in order["line_item_group"]["line_items"]]


def refund_body(
    order: dict[str, Any],
    *amounts: tuple[int, int],
    reason: str = "item_returned",
    currency: str = "ghs",
    **extra: Any,
) -> dict[str, Any]:
    """A ``/refunds/create`` body refunding ``(line index, amount)`` pairs of ``order``."""
    ids = line_ids(order)
    body: dict[str, Any] = {
        "order_id": order["id"],
        "reason": reason,
        "line_items": [
            {
                "order_line_item_id": ids[index],
                "refund_amount": {"currency": currency, "value": amount},
            }
            for index, amount in amounts or ((0, 1000),)
        ],
    }
    body.update(extra)
    return body


def create_refund(api: Api, body: dict[str, Any], key: str | None = None, **kwargs: Any) -> Any:
    """POST ``/refunds/create`` with ``key`` (a fresh one by default) in the
    ``Idempotency-Key`` header."""
    headers = {"Idempotency-Key": key or f"refund-{uuid.uuid4()}"}
    return api.post(CREATE, body, headers=headers, **kwargs)
