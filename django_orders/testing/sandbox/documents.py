"""``POST /orders/send_receipt`` and ``POST /orders/send_invoice``: send the hosted document
link to the customer, per channel, as the provider does.

The SDK's ``DocumentDeliveryRequest`` in, ``DocumentDeliveryResult`` out; a receipt for a paid
or completed order, an invoice for a finalized open one; one delivery per key. Where the sandbox
reads the provider: docs/architecture/sandbox.md ("Document deliveries").
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from . import deliveries, validation
from .clock import Clock, iso_z
from .errors import ApiError, Reply, missing_order
from .idempotency import Idempotency, fingerprint, remember
from .seed import BASE_URL_TOKEN, random_id
from .store import Store
from .validation import order_id_of

RECEIPT_PATH = "/orders/send_receipt"
INVOICE_PATH = "/orders/send_invoice"
#: Path -> the document it sends (``inttegro.order.DocumentKind``).
DOCUMENT_PATHS = {RECEIPT_PATH: "receipt", INVOICE_PATH: "invoice"}
RECEIPT_STATUSES = frozenset({"paid", "completed"})
NOT_INVOICEABLE = frozenset({"canceled", "expired"})

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def receipt_url(order_id: str) -> str:
    """The hosted receipt (served under ``/pay/``; the SDK: not the invoice PDF path)."""
    return f"{BASE_URL_TOKEN}/pay/{order_id}/receipt"


def document_url(kind: str, order: dict[str, Any]) -> str:
    """The link to send, or the provider's refusal when the order has no such document."""
    status = order.get("status")
    if kind == "receipt":
        if status not in RECEIPT_STATUSES:
            raise ApiError(
                400,
                "order_not_paid",
                f"Order {order['id']} is {status}; a receipt is sent for paid or completed"
                " orders only.",
                detail="Send the invoice to ask for payment; the receipt once it is paid.",
                cause="state_conflict",
            )
        return receipt_url(order["id"])
    web = ((order.get("invoice") or {}).get("format") or {}).get("web") or {}
    if status in NOT_INVOICEABLE or not web.get("url"):
        raise ApiError(
            400,
            "order_not_invoiceable",
            f"Order {order['id']} is {status}"
            + ("" if web.get("url") else " and not finalized")
            + "; its invoice cannot be sent.",
            detail="An invoice is sent for a finalized order that is not canceled or expired.",
            cause="state_conflict",
        )
    return str(web["url"])


class Documents:
    """Sends receipts and invoices: the delivery, its record and the idempotent answer are
    written in one store transaction."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        idempotency: Idempotency,
        apply_due_moves: Callable[[], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.idempotency = idempotency
        self.apply_due_moves = apply_due_moves
        self.channels = deliveries.ChannelSwitch()
        self._rng = random.SystemRandom()

    def send(
        self, path: str, payload: dict[str, Any], header_key: str | None, delay: float
    ) -> Reply:
        kind = DOCUMENT_PATHS[path]
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(path, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            order_id = order_id_of(payload)
            self.apply_due_moves()
            now = self.clock.now()
            with self.store.transaction() as db:
                row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
                if row is None:
                    raise missing_order(order_id, "order_id")
                order = json.loads(row[0])
                delivery = self._deliver(kind, document_url(kind, order), order)
                deliveries.record(
                    db,
                    {
                        "order_id": order_id,
                        "document_kind": kind,
                        "idempotency_key": key,
                        "sent_channels": delivery["sent_channels"],
                        "failed_channels": delivery["failed_channels"],
                        "failures": delivery["failures"],
                        "created_at": iso_z(now),
                    },
                )
                result: dict[str, Any] = {"order": order, "delivery": delivery}
                if not delivery["sent_channels"]:
                    result["error"] = _not_delivered(order, delivery).body()["error"]
                body = _dumps(result)
                remember(db, path, key, print_, body, now.timestamp(), order_id)
            return Reply.json_text(200, body)

    def _deliver(self, kind: str, url: str, order: dict[str, Any]) -> dict[str, Any]:
        """Send ``url`` on every channel the customer can be reached on; the per-channel result."""
        customer = order.get("customer") or {}
        sent: list[dict[str, str]] = []
        failed: list[dict[str, str]] = []
        for channel, address in deliveries.CHANNELS.items():
            if not customer.get(address):
                continue
            error = self.channels.take(channel)
            if error is None:
                sent.append({"channel": channel, "chime_id": random_id("chm_", self._rng)})
            else:
                failed.append({"channel": channel, "error": error})
        return {
            "document_kind": kind,
            "document_url": url,
            "sent_channels": [entry["channel"] for entry in sent],
            "failed_channels": [entry["channel"] for entry in failed],
            "deliveries": sent,
            "failures": failed,
        }


def _not_delivered(order: dict[str, Any], delivery: dict[str, Any]) -> ApiError:
    if delivery["failures"]:
        why = "every channel failed: " + "; ".join(
            f"{failure['channel']}: {failure['error']}" for failure in delivery["failures"]
        )
    else:
        why = "the customer has no email address or phone number"
    return ApiError(
        400,
        "document_not_delivered",
        f"The {delivery['document_kind']} of order {order['id']} was not delivered: {why}.",
        detail="Check the customer's contact details, then send it again with a new key.",
    )
