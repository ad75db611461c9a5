"""The order calls of the transport (``/orders/create``, ``/orders/lookup``,
``/orders/cancel``), mixed into ``OrdersClient``. No models: orders come back as dicts, with
their ``{"order": ...}`` envelope removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any


class OrderCalls:
    """The order operations; ``OrdersClient`` provides ``_post``."""

    _post: Callable[..., dict[str, Any]]  # OrdersClient's

    def create_order(self, payload: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """``POST /orders/create``; returns the order with the ``{"order": ...}`` envelope removed.

        ``payload`` may be the already-encoded JSON body, so that what the service layer stored
        is byte for byte what is sent and resent. It must carry
        ``request_meta.idempotency_key``: without one a retry could create a second order.
        """
        body = payload if isinstance(payload, str | bytes) else json.dumps(payload)
        try:
            decoded = json.loads(body)
        except ValueError:
            raise ValueError("create_order() payload is not valid JSON") from None
        meta = decoded.get("request_meta") if isinstance(decoded, dict) else None
        key = meta.get("idempotency_key") if isinstance(meta, dict) else None
        if not isinstance(key, str) or not key:
            raise ValueError("create_order() needs request_meta.idempotency_key in the payload")
        return self._post("/orders/create", body, "order", retry_read_timeout=False)

    def lookup_order(self, order_id: str) -> dict[str, Any]:
        """``POST /orders/lookup`` (api-notes.md): one order by id (traversal rule 5)."""
        if not isinstance(order_id, str) or not order_id:
            raise ValueError("lookup_order() needs an order id")
        return self._post("/orders/lookup", json.dumps({"order_id": order_id}), "order")

    def cancel_order(
        self, order_id: str, *, idempotency_key: str, reason: str | None = None
    ) -> dict[str, Any]:
        """``POST /orders/cancel`` (api-notes.md); returns the order, now ``canceled``.

        Retried like any call (with the same key, so a resend after a lost answer is the same
        request); a paid order is refused by the service with a 4xx (``RequestRejected``).
        """
        if not isinstance(order_id, str) or not order_id:
            raise ValueError("cancel_order() needs an order id")
        body: dict[str, Any] = {"order_id": order_id}
        if reason is not None:
            body["reason"] = reason
        body["request_meta"] = {"idempotency_key": idempotency_key}
        return self._post("/orders/cancel", json.dumps(body), "order")
