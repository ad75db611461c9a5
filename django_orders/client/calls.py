"""The calls of the transport per endpoint family, mixed into ``OrdersClient``. No models:
records come back as dicts with their envelope removed.

- Orders (``/orders/create``, ``/orders/lookup``, ``/orders/cancel``, ``/orders/pay``) and the
  customer writes (``/customers/create|update``).
- Refunds (``/refunds/create``, ``/refunds/cancel``, ``/refunds/lookup``), read by the refunds
  resource. A create carries its idempotency key in the ``Idempotency-Key`` header (the
  provider's preferred carrier) and is retried like an order create: only with the very same
  bytes, and not after a read timeout (the service layer keeps the request pending and resends
  it later).
- Fulfilment (``/orders/complete``, ``/orders/send_receipt``, ``/orders/send_invoice``), each
  with its key in the ``Idempotency-Key`` header. A completion is retried like any idempotent
  write (the same key: the service replays its answer). A document send is asked ONCE
  (``retries=0``): an answer lost on the way back leaves the outcome unknown, and whether the
  customer gets the document twice is for staff to decide, not a retry loop.
- Lookups by id of the resources stored raw (``/customers/lookup`` and the like: api-notes.md,
  "Lookups by id"), and ``/balances``.

The transport reads the bytes (``reading``, into an ``Answer``), retries and opens an answer's
envelope (``{"order": {...}}``); a ``/page`` answer is checked in ``pages.page_from``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions.wire import InvalidResponse
from .reading import Answer

# --- orders and customers ------------------------------------------------------------------------


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

    # --- known customers and offline payments ---------------------------------------------
    # Each key travels the way the provider's SDK sends it on that path (its ``HttpClient``):
    # a plain POST (``/customers/create``, ``/orders/pay``) carries it in the body's
    # ``request_meta.idempotency_key``; ``/customers/update`` in the ``Idempotency-Key``
    # header. The service keeps keys per path (api-notes.md), so each path is answered alike.

    def create_customer(self, payload: str | bytes) -> dict[str, Any]:
        """``POST /customers/create`` with the stored body (its key in ``request_meta``);
        returns the customer record."""
        _require_body_key(payload, "create_customer")
        return self._post(CREATE_CUSTOMER, payload, "customer", retry_read_timeout=False)

    def update_customer(self, payload: str | bytes, *, idempotency_key: str) -> dict[str, Any]:
        """``POST /customers/update`` with the stored body and its key in the
        ``Idempotency-Key`` header; returns the customer record."""
        if not isinstance(idempotency_key, str) or not idempotency_key:
            raise ValueError("update_customer() needs an idempotency key")
        return self._post(
            UPDATE_CUSTOMER,
            payload,
            "customer",
            retry_read_timeout=False,
            headers={"Idempotency-Key": idempotency_key},
        )

    def pay_order(self, payload: str | bytes) -> dict[str, Any]:
        """``POST /orders/pay`` with the stored body (``paid_out_of_band``, its key in
        ``request_meta``), asked ONCE: an answer lost on the way is settled by a lookup of the
        order, so the service sees one pay call per lost answer at most (the caller's rule)."""
        _require_body_key(payload, "pay_order")
        return self._post(PAY_ORDER, payload, "order", retries=0)


CREATE_CUSTOMER = "/customers/create"
UPDATE_CUSTOMER = "/customers/update"
PAY_ORDER = "/orders/pay"


def _require_body_key(payload: str | bytes, call: str) -> None:
    """A write whose key travels in the body must carry one: a retry without it could make a
    second customer or a second payment."""
    try:
        decoded = json.loads(payload)
    except ValueError:
        raise ValueError(f"{call}() payload is not valid JSON") from None
    meta = decoded.get("request_meta") if isinstance(decoded, dict) else None
    key = meta.get("idempotency_key") if isinstance(meta, dict) else None
    if not isinstance(key, str) or not key:
        raise ValueError(f"{call}() needs request_meta.idempotency_key in the payload")


# --- refunds -------------------------------------------------------------------------------------

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


# --- fulfilment ----------------------------------------------------------------------------------

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


# --- records stored raw --------------------------------------------------------------------------

#: resource -> (the id's parameter, the answer's envelope), as the provider's SDK sends them.
RECORD_LOOKUPS: dict[str, tuple[str, str]] = {
    "customers": ("customer_id", "customer"),
    "balance_transactions": ("transaction_id", "transaction"),
    "payouts": ("payout_id", "payout"),
}


class RecordCalls:
    """The lookup of one raw record; ``OrdersClient`` provides ``_post``."""

    _post: Callable[..., dict[str, Any]]  # OrdersClient's

    def lookup_record(self, resource: str, record_id: str) -> dict[str, Any]:
        """``POST /<resource>/lookup``: one record of ``resource`` by id."""
        if resource not in RECORD_LOOKUPS:
            known = ", ".join(RECORD_LOOKUPS)
            raise ValueError(f"resource must be one of {known}, not {resource!r}")
        if not isinstance(record_id, str) or not record_id:
            raise ValueError("lookup_record() needs a record id")
        param, envelope = RECORD_LOOKUPS[resource]
        path = f"/{resource}/lookup"
        return self._post(path, json.dumps({param: record_id}), envelope)

    def balances(self) -> dict[str, Any]:
        """``POST /balances``: the balance per currency at a cut-off (``{"balances": ...}``)."""
        return {"balances": self._post("/balances", "{}", "balances")}
