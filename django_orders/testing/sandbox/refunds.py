"""The refund operations: ``/refunds/create`` and ``/refunds/cancel`` (lookup and page are served
by ``service`` like every other lookup and page).

The provider's checks are made against the stored order, in the transaction that stores the
refund (paid or completed, its lines, its currency, each line's refundable remainder); keys work
as for order creates. See docs/architecture/sandbox.md ("Refunds").
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from typing import Any

from . import refund_requests, validation
from .errors import ApiError, Reply, invalid
from .idempotency import Idempotency, fingerprint
from .refund_ledger import COUNTED, RefundLedger, RefundNotOpen, stamp
from .seed import random_id
from .store import Store

CREATE_REFUND_PATH = "/refunds/create"
CANCEL_REFUND_PATH = "/refunds/cancel"
#: Orders in these statuses can be refunded.
REFUNDABLE = frozenset({"paid", "completed"})


def line_amount(kind: str, body: dict[str, Any]) -> int:
    """What the customer paid for one order line (products: price x quantity)."""
    if kind == "product":
        return int(body["price"]["value"]) * int(body.get("quantity", 1))
    money = body["amount"] if kind == "fee" else body["fee"]
    return int(money["value"])


def line_snapshot(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """The refund's immutable copy of an order line (``inttegro.refund.OrderLineItem``)."""
    if kind == "product":
        return {
            "id": body["id"],
            "type": "product",
            "quantity": body.get("quantity", 1),
            "product": {"id": body.get("product_id"), "name": body["name"]},
        }
    return {
        "id": body["id"],
        "type": kind,
        kind: {"label": body.get("label"), "description": body.get("description")},
    }


def refunded_by_line(order: dict[str, Any]) -> Counter[str]:
    """Per order line, the amount of the order's refunds that count against its remainder."""
    used: Counter[str] = Counter()
    for refund in order.get("refunds") or []:
        if refund.get("status") in COUNTED:
            for line in refund.get("line_items") or []:
                used[line["order_line_item_id"]] += line["refund_amount"]["value"]
    return used


def settlement(order: dict[str, Any]) -> dict[str, Any]:
    """Where the money goes back: a masked snapshot of the mobile money wallet that paid."""
    phone = str((order.get("customer") or {}).get("phone_number") or "")
    digits = "".join(c for c in phone if c.isdigit())[-4:].rjust(4, "0")
    method = "pm_" + hashlib.sha256(order["id"].encode()).hexdigest()[:24]
    return {
        "type": "payment_method",
        "payment_method": {
            "id": method,
            "type": "mobile_money",
            "mobile_money": {"network": "mtn", "account_number": "****" + digits, "last4": digits},
        },
    }


class Refunds:
    """Creates and cancels refunds; the ledger stores them and moves them on."""

    def __init__(self, ledger: RefundLedger, idempotency: Idempotency) -> None:
        self.ledger = ledger
        self.idempotency = idempotency
        self._rng = random.SystemRandom()

    def create(self, payload: dict[str, Any], header_key: str | None, delay: float) -> Reply:
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(CREATE_REFUND_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            request = refund_requests.create_refund(payload)
            self.ledger.advance_due()  # a refund that failed on the clock frees its amounts
            body = self.ledger.create(
                request.order_id,
                lambda order, now: self._build(order, request, now),
                path=CREATE_REFUND_PATH,
                key=key,
                fingerprint=print_,
            )
            if body is None:
                raise ApiError(
                    404,
                    "resource_missing",
                    f"No such order: {request.order_id!r}.",
                    param="order_id",
                )
            return Reply.json_text(200, body)

    def _build(
        self, order: dict[str, Any], request: refund_requests.CreateRefund, now: float
    ) -> dict[str, Any]:
        status = order.get("status")
        if status not in REFUNDABLE:
            raise ApiError(
                400,
                "order_not_refundable",
                f"Order {order['id']} is {status}; only paid or completed orders can be refunded.",
                detail="Refund an order once it is paid; cancel an unpaid one instead.",
                cause="state_conflict",
            )
        group = order.get("line_item_group") or {}
        currency = (group.get("total") or {}).get("currency")
        lines = {
            item[item["type"]]["id"]: (item["type"], item[item["type"]])
            for item in group.get("line_items") or []
        }
        used = refunded_by_line(order)
        items = []
        for index, line in enumerate(request.lines):
            param = f"line_items[{index}]"
            if line.order_line_item_id not in lines:
                raise invalid(
                    f"{param}.order_line_item_id",
                    f"{param}.order_line_item_id {line.order_line_item_id!r} is not a line of"
                    f" order {order['id']}.",
                )
            if line.currency != currency:
                raise invalid(
                    f"{param}.refund_amount.currency",
                    f"{param}.refund_amount.currency must be the order's currency {currency},"
                    f" not {line.currency!r}.",
                )
            kind, body = lines[line.order_line_item_id]
            paid = line_amount(kind, body)
            remainder = paid - used[line.order_line_item_id]
            if line.amount > remainder:
                raise ApiError(
                    400,
                    "refund_amount_exceeds_remainder",
                    f"{param}.refund_amount.value {line.amount} is more than the {remainder}"
                    f" still refundable on line {line.order_line_item_id} (paid {paid}, refunds"
                    f" pending, processing or succeeded {used[line.order_line_item_id]}).",
                    param=f"{param}.refund_amount.value",
                )
            items.append(
                {
                    "id": random_id("rfl_", self._rng),
                    "order_line_item_id": line.order_line_item_id,
                    "order_line_item": line_snapshot(kind, body),
                    "original_amount_paid": {"currency": currency, "value": paid},
                    "refund_amount": {"currency": currency, "value": line.amount},
                    "reason": line.reason,
                    "reason_details": line.reason_details,
                }
            )
        return {
            "id": random_id("rf_", self._rng),
            "order_id": order["id"],
            "status": "pending",
            "reason": request.reason,
            "reason_details": request.reason_details,
            "reference": request.reference,
            "custom_data": request.custom_data,
            "line_items": items,
            "order_amount": group.get("total"),
            "total": {"currency": currency, "value": sum(line.amount for line in request.lines)},
            "settlement": settlement(order),
            "created_at": stamp(now),
        }

    def cancel(self, payload: dict[str, Any], header_key: str | None, delay: float = 0.0) -> Reply:
        """``POST /refunds/cancel``: a pending refund becomes ``canceled``; safe to repeat."""
        if delay:
            time.sleep(delay)
        refund_id, reason = refund_requests.cancel_refund(payload)
        if header_key or payload.get("request_meta") is not None:
            validation.idempotency_key(payload, header_key)
        try:
            refund = self.ledger.cancel(refund_id, reason)
        except KeyError:
            raise ApiError(
                404, "resource_missing", f"No such refund: {refund_id!r}.", param="refund_id"
            ) from None
        except RefundNotOpen as exc:
            raise ApiError(
                400,
                "refund_not_cancelable",
                f"Refund {refund_id} is {exc.status} and can no longer be canceled.",
                detail="Only pending refunds can be canceled, before processing begins.",
                cause="state_conflict",
            ) from None
        return Reply.json_obj(200, {"refund": refund})


def misanswer(store: Store, kind: str, reply: Reply) -> Reply:
    """The ``other_refund`` and ``refund_moved`` faults: a valid answer about the wrong thing.

    ``other_refund``: the refund of a create or cancel answer is swapped for the oldest other
    refund of the same order (the work is done and its true answer kept for replays: only this
    answer lies). ``refund_moved``: the first refund of a ``/refunds/page`` answer names another
    order of the store (the newest). An answer with nothing to swap (an error, no other refund
    or order) goes out as it is."""
    if reply.status != 200:
        return reply
    body = json.loads(reply.body)
    if kind == "other_refund":
        refund = body.get("refund") or {}
        order = store.order(str(refund.get("order_id")))
        others = [r for r in (order or {}).get("refunds") or [] if r.get("id") != refund.get("id")]
        if not others:
            return reply
        body["refund"] = others[-1]  # refunds[] is newest first
    else:
        refunds = (body.get("page") or {}).get("refunds") or []
        if not refunds:
            return reply
        rows = store.read(
            "SELECT id FROM orders WHERE id != ? ORDER BY seq DESC LIMIT 1",
            (refunds[0]["order_id"],),
        )
        if not rows:
            return reply
        refunds[0]["order_id"] = rows[0][0]
    return Reply.json_obj(200, body, **reply.headers)
