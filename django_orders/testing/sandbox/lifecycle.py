"""An order's life after creation: lazy expiry, cancel and payment.

Shared by the API (``POST /orders/cancel``), the hosted payment page (``/pay/<id>``) and the
Python helper ``SandboxServer.pay_order``, so a test that pays through the helper sees exactly
what a customer paying on the page would cause. Every change is one store transaction that
re-reads the order, so a cancel racing a payment cannot leave a half-written record.
"""

from __future__ import annotations

import json
from typing import Any

from .clock import Clock, iso_z
from .errors import ApiError, missing_order
from .ledger import Ledger
from .seed import PAYABLE
from .store import Store

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

#: Statuses in which an order can still be cancelled (``PAYABLE``: still be paid).
CANCELABLE = frozenset({"preparing", PAYABLE})


class OrderNotPayable(ValueError):
    """Paying an order that is not awaiting payment; ``status`` says why (paid, expired...)."""

    def __init__(self, order_id: str, status: str) -> None:
        super().__init__(f"order {order_id} is {status}, not awaiting payment")
        self.order_id = order_id
        self.status = status


class Lifecycle:
    """Applies the provider's order transitions to stored orders on the sandbox clock."""

    def __init__(self, store: Store, clock: Clock, ledger: Ledger) -> None:
        self.store = store
        self.clock = clock
        self.ledger = ledger

    def expire_due(self) -> None:
        """Unpaid orders past ``expires_at`` become ``expired`` (lazily, before any read)."""
        self.store.expire_due(self.clock.timestamp())

    def order(self, order_id: str) -> dict[str, Any] | None:
        """The stored order after expiry was applied, or None."""
        self.expire_due()
        return self.store.order(order_id)

    def cancel(self, order_id: str) -> dict[str, Any]:
        """Cancel an unpaid order (``canceled`` + ``canceled_at``); repeating it is harmless.

        Raises 404 for an unknown order and 400 for a paid, completed, expired or unknown one.
        """
        self.expire_due()
        now = iso_z(self.clock.now())

        def change(order: dict[str, Any]) -> None:
            status = order.get("status")
            if status == "canceled":
                return
            if status in ("paid", "completed"):
                raise ApiError(
                    400,
                    "order_already_paid",
                    f"Order {order_id} is {status} and cannot be canceled; refund it instead.",
                    detail="Paid orders are refunded through the refunds resource, not canceled.",
                    cause="state_conflict",
                )
            if status not in CANCELABLE:
                code = "order_expired" if status == "expired" else "order_not_cancelable"
                raise ApiError(
                    400,
                    code,
                    f"Order {order_id} is {status} and cannot be canceled.",
                    detail="Only orders that are preparing or require payment can be canceled.",
                    cause="state_conflict",
                )
            order["status"] = "canceled"
            order["canceled_at"] = now

        try:
            return self.store.edit_order(order_id, change)
        except KeyError:
            raise missing_order(order_id, "order_id") from None

    def pay(self, order_id: str) -> dict[str, Any]:
        """Mark an order awaiting payment ``paid`` (``paid_at`` on the sandbox clock).

        Also records its ``payment`` and payment balance transaction (``ledger``), as the
        provider does, in the same store transaction. Raises ``KeyError`` for an unknown order
        and ``OrderNotPayable`` for any other status (nothing changes).
        """
        self.expire_due()
        now = self.clock.now()
        with self.store.transaction() as db:
            row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                raise KeyError(order_id)
            order = json.loads(row[0])
            if order.get("status") != PAYABLE:
                raise OrderNotPayable(order_id, str(order.get("status")))
            order["status"] = "paid"
            order["paid_at"] = iso_z(now)
            self.ledger.record_payment(db, order, now.timestamp())
            self.store.save_order(db, order_id, _dumps(order))
        return json.loads(self.store.localize(_dumps(order)))
