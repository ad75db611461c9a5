"""Stored refunds and their lifecycle: ``pending -> processing -> succeeded | failed``, and
``canceled`` from ``pending`` only.

A refund is kept as its own row and in its order's ``refunds[]``, in one transaction, so the two
never disagree; it moves on the sandbox clock, lazily, before anything is read. Details:
docs/architecture/sandbox.md ("Refunds").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .clock import Clock, iso_z
from .ledger import Ledger, Store

#: Statuses a refund can still leave; and those that count against a line's remainder.
OPEN = frozenset({"pending", "processing"})
COUNTED = frozenset({"pending", "processing", "succeeded"})
#: The provider's failure reasons (``inttegro.refund.FailureReason``), each with the
#: merchant-facing detail and ``retryable`` the sandbox gives it unless told otherwise.
FAILURE_REASONS: dict[str, tuple[str, bool]] = {
    "insufficient_balance": ("The balance is too low to fund this refund.", True),
    "original_payment_method_unavailable": (
        "The original payment method can no longer receive funds.",
        False,
    ),
    "original_payment_not_refundable": ("The original payment cannot be refunded.", False),
    "refund_not_supported": ("The payment method does not support refunds.", False),
    "amount_not_supported": ("The payment method cannot refund this amount.", False),
    "refund_declined": ("The payment network declined the refund.", False),
    "refund_not_permitted": ("Refunds are not permitted for this account.", False),
    "temporarily_unavailable": ("Refunds are temporarily unavailable; try again later.", True),
    "unknown": ("The refund failed for an unknown reason.", False),
}

#: Seconds of sandbox clock a refund spends pending, and then processing, by default.
DEFAULT_REFUND_DELAY = 30.0

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class RefundNotOpen(ValueError):
    """Moving a refund that has left the states the move starts from."""

    def __init__(self, refund_id: str, status: str, move: str) -> None:
        super().__init__(f"refund {refund_id} is {status}; it cannot be {move}")
        self.refund_id = refund_id
        self.status = status


def failure(
    reason: str, detail: str | None = None, retryable: bool | None = None
) -> dict[str, Any]:
    """A refund's ``failure`` object; ``ValueError`` for a reason the provider does not have."""
    if reason not in FAILURE_REASONS:
        raise ValueError(
            f"unknown refund failure reason {reason!r}; known: {', '.join(FAILURE_REASONS)}"
        )
    default_detail, default_retryable = FAILURE_REASONS[reason]
    if detail is not None and (not isinstance(detail, str) or not detail.strip()):
        raise ValueError("detail must be a non-empty string")
    if retryable is not None and not isinstance(retryable, bool):
        raise ValueError("retryable must be a boolean")
    return {
        "reason": reason,
        "detail": detail or default_detail,
        "retryable": default_retryable if retryable is None else retryable,
    }


@dataclass
class RefundTiming:
    """Seconds of sandbox clock a refund spends pending, then processing (None: until moved)."""

    pending_seconds: float | None = DEFAULT_REFUND_DELAY
    processing_seconds: float | None = DEFAULT_REFUND_DELAY


class FailureSwitch:
    """Armed failures: the next refunds to finish processing on the clock fail, one each."""

    def __init__(self) -> None:
        self._armed: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def arm(
        self, reason: str, times: int = 1, detail: str | None = None, retryable: bool | None = None
    ) -> dict[str, Any]:
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError("times must be an integer >= 1")
        entry = failure(reason, detail, retryable)
        with self._lock:
            self._armed.extend(dict(entry) for _ in range(times))
        return entry

    def take(self) -> dict[str, Any] | None:
        with self._lock:
            return self._armed.pop(0) if self._armed else None

    def armed(self) -> int:
        with self._lock:
            return len(self._armed)

    def clear(self) -> int:
        with self._lock:
            count = len(self._armed)
            self._armed.clear()
            return count


def stamp(moment: float) -> str:
    """An epoch moment as the service writes timestamps (ms, ``Z``)."""
    return iso_z(datetime.fromtimestamp(moment, UTC))


class RefundLedger:
    """Writes refunds (with their copy in the order) and moves them through their lifecycle."""

    def __init__(
        self, store: Store, clock: Clock, ledger: Ledger, timing: RefundTiming | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        #: Follows each refund in its order's payment transaction (allocation, transaction).
        self.ledger = ledger
        self.timing = timing or RefundTiming()
        self.failures = FailureSwitch()

    # -- writing -------------------------------------------------------------

    def create(
        self,
        order_id: str,
        build: Callable[[dict[str, Any], float], dict[str, Any]],
        *,
        path: str,
        key: str,
        fingerprint: str,
    ) -> str | None:
        """Store the refund ``build(order, now)`` makes; return its answer (None: no order).

        ``build`` runs inside the transaction, so its checks (status, remainder) see every
        refund stored before and none can slip in between; an ``ApiError`` from it stores
        nothing. The answer is kept for replays under ``(path, key)``.
        """
        now = self.clock.timestamp()
        with self.store.transaction() as db:
            row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                return None
            order = json.loads(row[0])
            refund = build(order, now)
            pending = self.timing.pending_seconds
            due = None if pending is None else now + pending
            db.execute(
                "INSERT INTO refunds (id, order_id, idempotency_key, status, due_ts, json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (refund["id"], order_id, key, refund["status"], due, _dumps(refund)),
            )
            order["refunds"] = [refund, *(order.get("refunds") or [])]
            self.ledger.refund_moved(db, order, refund)
            self.store.save_order(db, order_id, _dumps(order))
            body = _dumps({"refund": refund})
            db.execute(
                "INSERT OR REPLACE INTO idempotency"
                " (path, key, fingerprint, body, created_at, order_id) VALUES (?, ?, ?, ?, ?, ?)",
                (path, key, fingerprint, body, now, order_id),
            )
        return body

    def refund(self, refund_id: str) -> dict[str, Any] | None:
        """The stored refund after due moves were applied, or None."""
        self.advance_due()
        text = self.store.get_json("refunds", refund_id)
        return json.loads(text) if text is not None else None

    def created_via_api(self) -> list[dict[str, Any]]:
        """Every refund created through the API, oldest first: its id, order, key, reference
        and status now (a key or reference appears twice only if it made two refunds)."""
        self.advance_due()
        rows = self.store.read(
            "SELECT id, order_id, idempotency_key, status, json FROM refunds ORDER BY seq"
        )
        return [
            {
                "refund_id": refund_id,
                "order_id": order_id,
                "idempotency_key": key,
                "reference": json.loads(text).get("reference"),
                "status": status,
            }
            for refund_id, order_id, key, status, text in rows
        ]

    def _move(
        self,
        refund_id: str,
        change: Callable[[dict[str, Any], float | None], float | None],
        *,
        due_only: bool = False,
    ) -> dict[str, Any]:
        """Apply ``change(refund, due)`` (which returns the next due moment) to one refund and
        its copy in the order, in one transaction. ``KeyError`` for an unknown refund."""
        with self.store.transaction() as db:
            row = db.execute(
                "SELECT json, order_id, due_ts FROM refunds WHERE id = ?", (refund_id,)
            ).fetchone()
            if row is None:
                raise KeyError(refund_id)
            refund, order_id, due = json.loads(row[0]), row[1], row[2]
            if due_only and (due is None or due > self.clock.timestamp()):
                return refund  # moved meanwhile by another thread
            before = refund["status"]
            next_due = change(refund, due)
            if refund == json.loads(row[0]):
                return refund
            db.execute(
                "UPDATE refunds SET status = ?, due_ts = ?, json = ? WHERE id = ?",
                (refund["status"], next_due, _dumps(refund), refund_id),
            )
            order_row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
            order = None if order_row is None else json.loads(order_row[0])
            if refund["status"] != before:
                self.ledger.refund_moved(db, order, refund)
            if order is not None:
                order["refunds"] = [
                    refund if kept.get("id") == refund_id else kept
                    for kept in order.get("refunds") or []
                ]
                self.store.save_order(db, order_id, _dumps(order))
        return refund

    # -- the lifecycle -------------------------------------------------------

    def advance_due(self) -> None:
        """Apply every move the sandbox clock has made due (one indexed query if none)."""
        now = self.clock.timestamp()
        due = self.store.read(
            "SELECT id FROM refunds WHERE due_ts IS NOT NULL AND due_ts <= ?", (now,)
        )
        for (refund_id,) in due:
            self._move(refund_id, self._on_clock(now), due_only=True)

    def _on_clock(self, now: float) -> Callable[[dict[str, Any], float | None], float | None]:
        def change(refund: dict[str, Any], due: float | None) -> float | None:
            while due is not None and due <= now and refund["status"] in OPEN:
                if refund["status"] == "pending":
                    refund["status"] = "processing"
                    refund["processing_at"] = stamp(due)
                    processing = self.timing.processing_seconds
                    due = None if processing is None else due + processing
                else:
                    self._finish(refund, due, self.failures.take())
                    due = None
            return due

        return change

    @staticmethod
    def _finish(refund: dict[str, Any], moment: float, failed: dict[str, Any] | None) -> None:
        refund.setdefault("processing_at", stamp(moment))
        if failed is None:
            refund["status"] = "succeeded"
            refund["succeeded_at"] = stamp(moment)
        else:
            refund["status"] = "failed"
            refund["failed_at"] = stamp(moment)
            refund["failure"] = failed

    def process(self, refund_id: str) -> dict[str, Any]:
        """Pending -> processing now; the clock then finishes it after ``processing_seconds``."""
        self.advance_due()
        now = self.clock.timestamp()

        def change(refund: dict[str, Any], due: float | None) -> float | None:
            if refund["status"] != "pending":
                raise RefundNotOpen(refund_id, refund["status"], "processed")
            refund["status"] = "processing"
            refund["processing_at"] = stamp(now)
            processing = self.timing.processing_seconds
            return None if processing is None else now + processing

        return self._move(refund_id, change)

    def settle(self, refund_id: str) -> dict[str, Any]:
        """A pending or processing refund succeeds now (``processing_at`` set on the way)."""
        return self._end(refund_id, None, "settled")

    def fail(
        self,
        refund_id: str,
        reason: str = "refund_declined",
        detail: str | None = None,
        retryable: bool | None = None,
    ) -> dict[str, Any]:
        """A pending or processing refund fails now with the provider's ``reason``."""
        return self._end(refund_id, failure(reason, detail, retryable), "failed")

    def _end(self, refund_id: str, failed: dict[str, Any] | None, move: str) -> dict[str, Any]:
        self.advance_due()
        now = self.clock.timestamp()

        def change(refund: dict[str, Any], due: float | None) -> float | None:
            if refund["status"] not in OPEN:
                raise RefundNotOpen(refund_id, refund["status"], move)
            self._finish(refund, now, failed)
            return None

        return self._move(refund_id, change)

    def cancel(self, refund_id: str, reason: str | None) -> dict[str, Any]:
        """Pending -> canceled; a canceled refund is returned as it is (safe to repeat)."""
        self.advance_due()
        now = self.clock.timestamp()

        def change(refund: dict[str, Any], due: float | None) -> float | None:
            if refund["status"] == "canceled":
                return None
            if refund["status"] != "pending":
                raise RefundNotOpen(refund_id, refund["status"], "canceled")
            refund["status"] = "canceled"
            refund["canceled_at"] = stamp(now)
            if reason is not None:
                refund["cancel_reason"] = reason
            return None

        return self._move(refund_id, change)
