"""The fulfilment calls of the transport (``/orders/complete``, ``/orders/send_receipt``,
``/orders/send_invoice``), mixed into ``OrdersClient``. No models: answers come back as dicts.

Each carries its idempotency key in the ``Idempotency-Key`` header. A completion is retried
like any idempotent write (the same key: the service replays its answer). A document send is
asked ONCE (``retries=0``): an answer lost on the way back leaves the outcome unknown, and
whether the customer gets the document twice is for staff to decide, not a retry loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..exceptions.wire import InvalidResponse
from .answers import Answer

COMPLETE_ORDER = "/orders/complete"
#: The document kinds and their paths (the provider's ``DocumentKind``).
DOCUMENT_PATHS = {"receipt": "/orders/send_receipt", "invoice": "/orders/send_invoice"}


@dataclass(frozen=True)
class DeliveryResult:
    """What the service reports of one send: the channels that went out and those that
    failed, each with the provider's error."""

    sent_channels: list[str]
    failures: list[dict[str, str]]
    document_url: str
    error_code: str
    error: str


class FulfilmentCalls:
    """The fulfilment operations; ``OrdersClient`` provides ``_post`` and ``_call``."""

    _post: Callable[..., dict[str, Any]]  # OrdersClient's
    _call: Callable[..., Any]  # OrdersClient's

    def complete_order(self, payload: str | bytes, *, idempotency_key: str) -> dict[str, Any]:
        """``POST /orders/complete`` with ``payload`` (the stored JSON text, byte for byte);
        returns the order, now ``completed``."""
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("complete_order() needs an idempotency key")
        return self._post(
            COMPLETE_ORDER, payload, "order", headers={"Idempotency-Key": idempotency_key}
        )

    def send_document(
        self, document: str, order_id: str, *, idempotency_key: str
    ) -> DeliveryResult:
        """``POST /orders/send_receipt`` or ``/orders/send_invoice``, asked once (module
        docstring); the per-channel result."""
        path = DOCUMENT_PATHS[document]
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("send_document() needs an idempotency key")
        answer = self._call(
            path,
            json.dumps({"order_id": order_id}),
            _as_is,
            retries=0,
            headers={"Idempotency-Key": idempotency_key},
        )
        return decode_delivery(answer, path)


def _as_is(answer: Answer) -> Answer:
    return answer


def decode_delivery(answer: Answer, path: str) -> DeliveryResult:
    """The ``delivery`` of a ``DocumentDeliveryResult`` (and its ``error``, when nothing went
    out), or ``InvalidResponse`` naming what breaks the contract."""

    def invalid(what: str) -> InvalidResponse:
        return InvalidResponse(
            f"POST {path} answered {what}",
            status_code=answer.status_code,
            request_id=answer.request_id,
        )

    data = answer.data if isinstance(answer.data, dict) else {}
    delivery = data.get("delivery")
    if not isinstance(delivery, dict):
        raise invalid("without the 'delivery' object")
    sent = delivery.get("sent_channels")
    if not isinstance(sent, list) or not all(isinstance(c, str) for c in sent):
        raise invalid("a delivery whose sent_channels is not a list of channels")
    failures = delivery.get("failures", [])
    if not isinstance(failures, list) or not all(
        isinstance(f, dict) and isinstance(f.get("channel"), str) for f in failures
    ):
        raise invalid("a delivery whose failures are not {channel, error} objects")
    url = delivery.get("document_url")
    error = data.get("error")
    error = error if isinstance(error, dict) else {}
    return DeliveryResult(
        sent_channels=list(sent),
        failures=[{"channel": f["channel"], "error": str(f.get("error") or "")} for f in failures],
        document_url=url if isinstance(url, str) else "",
        error_code=str(error.get("code") or ""),
        error=str(error.get("message") or ""),
    )
