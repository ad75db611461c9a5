"""The refund calls of the transport (``/refunds/create``, ``/refunds/cancel``,
``/refunds/lookup``), mixed into ``OrdersClient``. No models: records come back as dicts, read
by the refunds resource (``mirror.refund_wire``).

A create carries its idempotency key in the ``Idempotency-Key`` header (the provider's
preferred carrier) and is retried like an order create: only with the very same bytes, and not
after a read timeout (the service layer keeps the request pending and resends it later).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

CREATE_REFUND = "/refunds/create"
CANCEL_REFUND = "/refunds/cancel"
LOOKUP_REFUND = "/refunds/lookup"


class RefundCalls:
    """The refund operations; ``OrdersClient`` provides ``_post``."""

    _post: Callable[..., dict[str, Any]]  # OrdersClient's

    def create_refund(self, payload: str | bytes, *, idempotency_key: str) -> dict[str, Any]:
        """``POST /refunds/create`` with ``payload`` (the stored JSON text, sent byte for byte)
        and the key in the ``Idempotency-Key`` header; returns the refund (pending)."""
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("create_refund() needs an idempotency key")
        return self._post(
            CREATE_REFUND,
            payload,
            "refund",
            retry_read_timeout=False,
            headers={"Idempotency-Key": idempotency_key},
        )

    def cancel_refund(
        self, refund_id: str, *, idempotency_key: str, reason: str | None = None
    ) -> dict[str, Any]:
        """``POST /refunds/cancel``: a pending refund becomes ``canceled`` (safe to repeat)."""
        if not isinstance(refund_id, str) or not refund_id:
            raise ValueError("cancel_refund() needs a refund id")
        body: dict[str, Any] = {"refund_id": refund_id}
        if reason is not None:
            body["reason"] = reason
        return self._post(
            CANCEL_REFUND, json.dumps(body), "refund", headers={"Idempotency-Key": idempotency_key}
        )

    def lookup_refund(self, refund_id: str) -> dict[str, Any]:
        """``POST /refunds/lookup``: one refund by id."""
        if not isinstance(refund_id, str) or not refund_id:
            raise ValueError("lookup_refund() needs a refund id")
        return self._post(LOOKUP_REFUND, json.dumps({"refund_id": refund_id}), "refund")
