"""The body of an order request: the exact JSON text that is stored before the send and sent
byte for byte on every attempt (``encode_payload``), and the body a repeated ``reference`` is
compared on (``request_body`` of the new call against ``stored_body`` of the stored row).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..models import OrderRequest
from .validation import OPTIONAL_INPUT


def encode_payload(key: str, data: Mapping[str, Any]) -> str:
    """The exact JSON text that is stored, sent and resent."""
    return keyed_payload(key, request_body(data))


def keyed_payload(key: str, body: Mapping[str, Any]) -> str:
    """A create ``body`` (``request_body``, ``stored_body``) as the stored text under ``key``."""
    return json.dumps(
        {"request_meta": {"idempotency_key": key}, **body},
        ensure_ascii=False,
        separators=(",", ":"),
    )


#: Optional create fields, sent only when given (a request without them is byte for byte the
#: body of a stored request that lacks them, so such a pending request compares and resends
#: unchanged).
OPTIONAL_FIELDS = ("number", "checkout_settings", "custom_data", *OPTIONAL_INPUT)


def request_body(data: Mapping[str, Any]) -> dict[str, Any]:
    """The create body of validated input, without ``request_meta`` (the idempotency key):
    what a repeated ``reference`` is compared on.

    The customer is ``customer_id`` (a known customer, however it was named: a ``Customer``,
    its id, a dict with its reference) or ``customer_data`` (a new guest), so the three ways of
    naming one customer are one payload."""
    customer = data["customer"]
    if "known" in customer:
        raise ValueError("A customer named by its reference must be resolved before encoding.")
    body = {
        "finalize": data["finalize"],
        **customer,
        "line_items": data["line_items"],
    }
    body.update({name: data[name] for name in OPTIONAL_FIELDS if data.get(name) is not None})
    return body


def stored_body(request: OrderRequest) -> dict[str, Any] | None:
    """A stored request's body without ``request_meta``; ``None`` if it cannot be read."""
    try:
        body = json.loads(request.payload)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    body.pop("request_meta", None)
    return body
