"""``POST /orders/complete``: mark a paid order fulfilled, as the provider does.

The SDK's ``CompleteRequest`` in, ``{"order": {...}}`` out; a second completion under another key
is ``order_already_completed``, the same key replays. ``paid_out_of_band`` completes an unpaid
order paid elsewhere. Why: docs/architecture/sandbox.md ("Completing an order").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from . import validation
from .clock import Clock, iso_z
from .errors import ApiError, Reply, invalid, missing_order
from .idempotency import Idempotency, fingerprint, remember
from .seed import PAYABLE
from .store import Store
from .validation import order_id_of

COMPLETE_PATH = "/orders/complete"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def complete_request(payload: dict[str, Any]) -> tuple[str, bool]:
    """Validate a ``/orders/complete`` body except its key: ``(order_id, paid_out_of_band)``."""
    order_id = order_id_of(payload)
    out_of_band = payload.get("paid_out_of_band", False)
    if not isinstance(out_of_band, bool):
        raise invalid("paid_out_of_band", "paid_out_of_band must be a boolean.")
    return order_id, out_of_band


def check_completable(order: dict[str, Any], out_of_band: bool) -> None:
    """Raise the provider's refusal unless ``order`` can be completed now."""
    status = order.get("status")
    if status == "paid" or (status == PAYABLE and out_of_band):
        return
    if status == "completed":
        raise ApiError(
            400,
            "order_already_completed",
            f"Order {order['id']} is already completed (at {order.get('completed_at')}).",
            detail="Nothing to do: the order was marked fulfilled before.",
            cause="state_conflict",
        )
    raise ApiError(
        400,
        "order_not_paid",
        f"Order {order['id']} is {status}; only paid orders can be completed.",
        detail="Complete an order once it is paid (paid_out_of_band: true for an order awaiting"
        " payment that was paid outside the provider).",
        cause="state_conflict",
    )


class Fulfilment:
    """Completes orders: the change, its search ``updated_at`` bump and the idempotent answer
    are written in one store transaction."""

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

    def complete(self, payload: dict[str, Any], header_key: str | None, delay: float) -> Reply:
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(COMPLETE_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            order_id, out_of_band = complete_request(payload)
            self.apply_due_moves()  # an order that expired on the clock is not completable
            now = self.clock.now()
            with self.store.transaction() as db:
                row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
                if row is None:
                    raise missing_order(order_id, "order_id")
                order = json.loads(row[0])
                check_completable(order, out_of_band)
                order["status"] = "completed"
                order["completed_at"] = iso_z(now)
                self.store.save_order(db, order_id, _dumps(order))
                body = _dumps({"order": order})
                remember(db, COMPLETE_PATH, key, print_, body, now.timestamp(), order_id)
            return Reply.json_text(200, body)
