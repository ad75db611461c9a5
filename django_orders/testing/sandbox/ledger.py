"""The money behind the orders: balance transactions, payouts and the balance, in the SDK's shapes.

``inttegro.balance_transaction.BalanceTransaction``, ``inttegro.payout.Payout`` and
``inttegro.balance.Balance``. Amounts are unsigned; ``type`` says where money came from, not
its direction. A paid order's payment transaction carries the order's total and is embedded in
the order (``payment.balance_transaction``), so a page or a lookup of the order and a lookup of
the transaction always agree: every change writes both in one store transaction. Refunds and
payouts take their money from payment transactions through ``allocations`` (pending, then
completed; a failed or canceled one is released), which is what moves ``available_amount``,
``pending_amount`` and ``spent_amount``. ``/balances`` sums the payment transactions created
before its cut-off. The fault switches that break one of these on purpose (a dropped
transaction, a skewed amount, a failed payout, a balance that disagrees) are here too, so they
break exactly one thing. Details: docs/architecture/sandbox.md ("Money").
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from . import search_index
from .clock import Clock, iso_z, now_ms
from .money_shapes import (  # the shapes, as ledger.<name> for callers
    BALANCE_FIGURES,
    DEFAULT_AVAILABLE_AFTER,
    HOME_CURRENCY,
    MoneyError,
    allocate,
    complete,
    money,
    new_id,
    order_transaction_id,
    parse_time,
    payment,
    payment_transaction,
    payout_failure,
    payout_record,
    release,
    settle_amounts,
    source_transaction,
)


class Store(Protocol):
    """What the ledgers (this one and ``refund_ledger``) use of ``store.Store``, which seeds
    through this module: a protocol instead of an import keeps the two out of an import cycle
    and the sandbox's import chains short."""

    def localize(self, text: str) -> str: ...

    def get_json(self, table: str, record_id: str) -> str | None: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]: ...

    def save_order(self, db: sqlite3.Connection, order_id: str, text: str) -> None: ...


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def stamp(moment: float) -> str:
    return iso_z(datetime.fromtimestamp(moment, UTC))


# -- the live ledger ---------------------------------------------------------------------


def _transaction_row(db: sqlite3.Connection, tid: str) -> dict[str, Any] | None:
    row = db.execute("SELECT json FROM balance_transactions WHERE id = ?", (tid,)).fetchone()
    return None if row is None else json.loads(row[0])


class Ledger:
    """Moves money on the sandbox clock; every change is one store transaction."""

    def __init__(
        self, store: Store, clock: Clock, available_after: float = DEFAULT_AVAILABLE_AFTER
    ) -> None:
        if available_after < 0:
            raise ValueError("available_after must be a number of seconds >= 0")
        self.store = store
        self.clock = clock
        #: Seconds after a live payment before its money is available (``available_at``).
        self.available_after = float(available_after)
        #: Offsets added to what ``/balances`` answers, per currency and figure (a fault).
        self.balance_skew: dict[str, dict[str, int]] = {}
        #: Live payments still to record without a transaction (a fault).
        self.payments_without_transaction = 0
        self._lock = threading.Lock()
        self._rng = random.SystemRandom()

    # -- payments and refunds (called inside the caller's store transaction) -------------

    def record_payment(self, db: sqlite3.Connection, order: dict[str, Any], moment: float) -> None:
        """An order just paid gets its ``payment`` and (unless a fault drops it) its payment
        transaction, available ``available_after`` seconds later."""
        total = (order.get("line_item_group") or {}).get("total") or {}
        if not isinstance(total.get("value"), int) or not total.get("currency"):
            return
        paid = stamp(moment)
        payment_id = new_id("pay_", self._rng)
        transaction = payment_transaction(
            new_id("bt_", self._rng),
            order["id"],
            payment_id,
            total,
            paid,
            stamp(moment + self.available_after),
        )
        order["payment"] = payment(
            payment_id, total, order.get("sealed_at") or paid, paid, transaction
        )
        with self._lock:
            drop = self.payments_without_transaction > 0
            self.payments_without_transaction -= drop
        if drop:
            del order["payment"]["balance_transaction"]
            return
        db.execute(
            "INSERT INTO balance_transactions (id, json) VALUES (?, ?)",
            (transaction["id"], _dumps(transaction)),
        )

    def refund_moved(
        self, db: sqlite3.Connection, order: dict[str, Any] | None, refund: dict[str, Any]
    ) -> None:
        """Follow a refund's status in its order's payment transaction: allocated while open,
        completed (plus a refund transaction) when it succeeds, released otherwise. The caller
        saves ``order`` afterwards (its embedded transaction is updated here)."""
        status = refund["status"]
        if status == "succeeded":
            refund_transaction = source_transaction(
                new_id("bt_", self._rng),
                "refund",
                refund["id"],
                refund["total"],
                refund["succeeded_at"],
                refund.get("order_id"),
            )
            db.execute(
                "INSERT INTO balance_transactions (id, json) VALUES (?, ?)",
                (refund_transaction["id"], _dumps(refund_transaction)),
            )
        tid = order_transaction_id(order) if order else None
        transaction = _transaction_row(db, tid) if tid else None
        if order is None or transaction is None:
            return
        held = any(
            a["type"] == "refund" and a["refund"]["id"] == refund["id"]
            for a in transaction["allocations"]
        )
        now = stamp(self.clock.timestamp())
        if status in ("pending", "processing") and not held:
            value = min(refund["total"]["value"], transaction["available_amount"]["value"])
            if value <= 0:
                return
            allocate(transaction, "refund", refund["id"], value, now, new_id("bta_", self._rng))
        elif status == "succeeded" and held:
            complete(transaction, "refund", refund["id"], refund["succeeded_at"])
        elif status in ("failed", "canceled") and held:
            release(transaction, "refund", refund["id"])
        else:
            return
        # The caller saves the order: saving it here too would be two versions in one change,
        # the second stamped a millisecond past the clock (a rewrite never ties the last).
        self._write(db, transaction, save_order=False)
        order["payment"]["balance_transaction"] = transaction

    # -- payouts -------------------------------------------------------------------------

    def create_payout(self, currency: str = HOME_CURRENCY, reference: str | None = None) -> dict:
        """A payout of every payment transaction in ``currency`` whose money is available now
        (``processing``, its allocations pending); ``MoneyError`` when nothing is available."""
        now = self.clock.timestamp()
        pid = new_id("po_", self._rng)
        at = stamp(now)
        with self.store.transaction() as db:
            rows = db.execute(
                "SELECT json FROM balance_transactions WHERE json_extract(json, '$.type') ="
                " 'payment' AND json_extract(json, '$.amount.currency') = ?"
                " AND json_extract(json, '$.available_amount.value') > 0 ORDER BY seq",
                (currency,),
            ).fetchall()
            items = []
            for (text,) in rows:
                transaction = json.loads(text)
                if parse_time(transaction["available_at"]) > now:
                    continue
                value = transaction["available_amount"]["value"]
                allocate(transaction, "payout", pid, value, at, new_id("bta_", self._rng))
                self._write(db, transaction)
                items.append(
                    {
                        "id": transaction["id"],
                        "amount": dict(transaction["amount"]),
                        "allocated_amount": money(currency, value),
                    }
                )
            if not items:
                raise MoneyError(
                    "currency", f"no {currency} money is available to pay out", conflict=True
                )
            payout = payout_record(
                pid,
                items,
                currency,
                at,
                stamp(now + 86_400),
                reference=reference or f"PO-{pid[3:11].upper()}",
                destination_id=new_id("fa_", self._rng),
            )
            db.execute(
                "INSERT INTO payouts (id, json, updated_ms) VALUES (?, ?, ?)",
                (pid, _dumps(payout), now_ms(now)),
            )
        return payout

    def settle_payout(self, payout_id: str) -> dict[str, Any]:
        """A processing payout ``succeeded`` now: its allocations completed, its debit written."""
        now = self.clock.timestamp()
        at = stamp(now)

        def succeed(db: sqlite3.Connection, payout: dict[str, Any]) -> None:
            if payout["status"] != "processing":
                raise MoneyError(
                    "payout_id", f"payout {payout_id} is {payout['status']}", conflict=True
                )
            debit = source_transaction(
                new_id("bt_", self._rng), "payout", payout_id, payout["amount"], at, None
            )
            db.execute(
                "INSERT INTO balance_transactions (id, json) VALUES (?, ?)",
                (debit["id"], _dumps(debit)),
            )
            self._each_item(db, payout, lambda t: complete(t, "payout", payout_id, at))
            payout.update(
                status="succeeded", sent_at=at, succeeded_at=at, balance_transaction_id=debit["id"]
            )

        return self._edit_payout(payout_id, succeed)

    def fail_payout(
        self,
        payout_id: str | None = None,
        reason: str = "provider_declined",
        *,
        detail: str | None = None,
        retryable: bool | None = None,
    ) -> dict[str, Any]:
        """A payout ``failed`` now with the provider's ``reason`` (None: the newest succeeded
        one); its allocations are released, and a succeeded one loses its debit (the money came
        back). ``MoneyError`` for a canceled or already failed payout or an unknown reason."""
        failure = payout_failure(reason, detail, retryable)
        at = stamp(self.clock.timestamp())
        if payout_id is None:
            rows = self.store.read(
                "SELECT id FROM payouts WHERE json_extract(json, '$.status') = 'succeeded'"
                " ORDER BY seq DESC LIMIT 1"
            )
            if not rows:
                raise MoneyError("payout_id", "there is no succeeded payout to fail", conflict=True)
            payout_id = str(rows[0][0])
        target = payout_id

        def fail(db: sqlite3.Connection, payout: dict[str, Any]) -> None:
            if payout["status"] in ("failed", "canceled"):
                raise MoneyError(
                    "payout_id", f"payout {target} is {payout['status']}", conflict=True
                )
            if payout.get("balance_transaction_id"):
                db.execute(
                    "DELETE FROM balance_transactions WHERE id = ?",
                    (payout["balance_transaction_id"],),
                )
            self._each_item(db, payout, lambda t: release(t, "payout", target))
            payout.update(
                status="failed",
                failed_at=at,
                succeeded_at=None,
                balance_transaction_id=None,
                failure=failure,
            )

        return self._edit_payout(payout_id, fail)

    def _edit_payout(self, payout_id: str, change: Any) -> dict[str, Any]:
        with self.store.transaction() as db:
            row = db.execute("SELECT json FROM payouts WHERE id = ?", (payout_id,)).fetchone()
            if row is None:
                raise KeyError(payout_id)
            payout = json.loads(row[0])
            change(db, payout)
            self._rewrite(db, "payouts", payout_id, _dumps(payout))
        return payout

    def _each_item(self, db: sqlite3.Connection, payout: dict[str, Any], move: Any) -> None:
        for item in payout.get("balance_transactions") or []:
            transaction = _transaction_row(db, item["id"])
            if transaction is not None and transaction["type"] == "payment":
                move(transaction)
                self._write(db, transaction)

    # -- the balance ---------------------------------------------------------------------

    def balances(self) -> dict[str, Any]:
        """``{"balances": ...}``: per currency, the payment transactions created before the
        cut-off (now): ``available`` the unallocated money of those already available,
        ``pending`` of those not yet available, ``refund`` and ``reserved`` the pending refund
        and payout allocations; then the ``balance_skew`` fault's offsets."""
        now = self.clock.timestamp()
        rows = self.store.read(
            "SELECT json FROM balance_transactions WHERE json_extract(json, '$.type') = 'payment'"
        )
        sums: dict[str, dict[str, int]] = {HOME_CURRENCY: dict.fromkeys(BALANCE_FIGURES, 0)}
        for (text,) in rows:
            transaction = json.loads(text)
            if parse_time(transaction["created_at"]) >= now:
                continue
            figures = sums.setdefault(
                transaction["amount"]["currency"], dict.fromkeys(BALANCE_FIGURES, 0)
            )
            left = transaction["available_amount"]["value"]
            available_at = transaction.get("available_at")
            ready = available_at is not None and parse_time(available_at) <= now
            figures["available" if ready else "pending"] += left
            for allocation in transaction["allocations"]:
                if allocation["status"] == "pending":
                    use = "refund" if allocation["type"] == "refund" else "reserved"
                    figures[use] += allocation[allocation["type"]]["amount"]["value"]
        with self._lock:
            for currency, offsets in self.balance_skew.items():
                figures = sums.setdefault(currency, dict.fromkeys(BALANCE_FIGURES, 0))
                for name, offset in offsets.items():
                    figures[name] = max(0, figures[name] + offset)
        cut_off = stamp(now)
        return {
            "balances": {
                currency: {
                    **{name: {"amount": value} for name, value in figures.items()},
                    "includes_transactions_before": cut_off,
                }
                for currency, figures in sorted(sums.items())
            }
        }

    # -- fault switches ------------------------------------------------------------------

    def skew_balances(self, currency: str = HOME_CURRENCY, **offsets: int) -> dict[str, int]:
        """Add ``offsets`` (``available=100``, ...) to what ``/balances`` answers for
        ``currency`` from now on (the transactions stay as they are); returns them all."""
        unknown = sorted(set(offsets) - set(BALANCE_FIGURES))
        if unknown:
            raise MoneyError(unknown[0], f"{unknown[0]} is not one of {', '.join(BALANCE_FIGURES)}")
        if not offsets:
            raise MoneyError("available", "name at least one figure to skew")
        for name, offset in offsets.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise MoneyError(name, f"{name} must be an integer (minor units)")
        if not isinstance(currency, str) or not currency:
            raise MoneyError("currency", "currency must be a currency code")
        with self._lock:
            skew = self.balance_skew.setdefault(currency, {})
            for name, offset in offsets.items():
                skew[name] = skew.get(name, 0) + offset
            return dict(skew)

    def drop_next_transactions(self, times: int = 1) -> int:
        """The next ``times`` live payments record no payment transaction (the order is paid,
        its ``payment`` has no ``balance_transaction``); returns how many are armed."""
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise MoneyError("times", "times must be an integer >= 1")
        with self._lock:
            self.payments_without_transaction += times
            return self.payments_without_transaction

    def clear_faults(self) -> None:
        """``/balances`` agrees again and the next payments record their transactions."""
        with self._lock:
            self.balance_skew.clear()
            self.payments_without_transaction = 0

    def drop_transaction(self, order_id: str | None = None) -> str:
        """A paid order loses its payment transaction (the row and the order's embedded copy);
        None picks the newest paid order whose transaction no payout or refund uses, so nothing
        else breaks. Returns the order's id."""
        with self.store.transaction() as db:
            order, transaction = self._paid_order(db, order_id)
            db.execute("DELETE FROM balance_transactions WHERE id = ?", (transaction["id"],))
            del order["payment"]["balance_transaction"]
            self.store.save_order(db, order["id"], _dumps(order))
        return str(order["id"])

    def skew_transaction(
        self, transaction_id: str | None = None, *, by: int = 1, order_id: str | None = None
    ) -> dict[str, Any]:
        """A transaction's ``amount`` differs by ``by`` from its order's (or refund's) total: the
        one named, else that of ``order_id``, else of the newest paid order whose transaction
        nothing uses. Returns the changed transaction."""
        if isinstance(by, bool) or not isinstance(by, int) or by == 0:
            raise MoneyError("by", "by must be a non-zero integer (minor units)")
        with self.store.transaction() as db:
            if transaction_id is None:
                _order, transaction = self._paid_order(db, order_id)
            else:
                found = _transaction_row(db, transaction_id)
                if found is None:
                    raise KeyError(transaction_id)
                transaction = found
            value = transaction["amount"]["value"] + by
            if value < 0:
                raise MoneyError("by", f"the amount would be negative ({value})")
            transaction["amount"]["value"] = value
            if transaction["type"] == "payment":
                settle_amounts(transaction)
            self._write(db, transaction)
        return transaction

    def _paid_order(
        self, db: sqlite3.Connection, order_id: str | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if order_id is not None:
            row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                raise KeyError(order_id)
            rows = [row]
        else:
            rows = db.execute(
                "SELECT json FROM orders WHERE json_extract(json,"
                " '$.payment.balance_transaction.allocations[0]') IS NULL AND json_extract(json,"
                " '$.payment.balance_transaction.id') IS NOT NULL ORDER BY seq DESC LIMIT 1"
            ).fetchall()
            if not rows:
                raise MoneyError(
                    "order_id", "there is no paid order with an unused transaction", conflict=True
                )
        order = json.loads(self.store.localize(rows[0][0]))
        tid = order_transaction_id(order)
        transaction = _transaction_row(db, tid) if tid else None
        if transaction is None:
            raise MoneyError(
                "order_id", f"order {order['id']} has no payment transaction", conflict=True
            )
        return order, transaction

    # -- writing -------------------------------------------------------------------------

    def _write(
        self, db: sqlite3.Connection, transaction: dict[str, Any], *, save_order: bool = True
    ) -> None:
        """Store a changed transaction, and (``save_order``) its copy in its order for a
        payment's."""
        db.execute(
            "UPDATE balance_transactions SET json = ? WHERE id = ?",
            (_dumps(transaction), transaction["id"]),
        )
        order_id = transaction.get("order_id")
        if not save_order or transaction["type"] != "payment" or not order_id:
            return
        row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            return
        order = json.loads(row[0])
        if order_transaction_id(order) == transaction["id"]:
            order["payment"]["balance_transaction"] = transaction
            self.store.save_order(db, order_id, _dumps(order))

    def _rewrite(self, db: sqlite3.Connection, table: str, record_id: str, text: str) -> None:
        # The payouts' search ``updated_at`` moves with every change.
        search_index.rewrite(db, table, record_id, text, now_ms(self.clock.timestamp()))
