"""SQLite persistence for the sandbox: records kept as ready-to-serve JSON text.

Pages are built by joining stored JSON strings, never by decoding and re-encoding
records, so a 256-record page costs one indexed query and one ``str.join``. The
``seq`` column (SQLite rowid) only grows, which gives newest-first order for free.
One connection guarded by one lock keeps it simple and thread-safe; WAL lets a
second process (e.g. a test inspecting the file) read while the server writes.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from . import deliveries, search_index
from .clock import now_ms
from .seed import BASE_URL_TOKEN, Batch, RecordFactory, fast_id, fresh_orders, generate

DEFAULT_DB_PATH = "orders_sandbox.sqlite3"
_T = TypeVar("_T")

# Paged resource name -> table; the wire collection property is in service.py.
TABLES = ("orders", "customers", "balance_transactions", "payouts", "refunds")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, customer_id TEXT,
    idempotency_key TEXT, json TEXT NOT NULL, expires_ts REAL);
CREATE TABLE IF NOT EXISTS customers (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS balance_transactions (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS payouts (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS refunds (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL,
    idempotency_key TEXT, status TEXT NOT NULL, due_ts REAL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (
    path TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    body TEXT NOT NULL, created_at REAL NOT NULL, order_id TEXT,
    PRIMARY KEY (path, key));
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS orders_seq_idx ON orders(seq);
CREATE INDEX IF NOT EXISTS customers_seq_idx ON customers(seq);
CREATE INDEX IF NOT EXISTS balance_transactions_seq_idx ON balance_transactions(seq);
CREATE INDEX IF NOT EXISTS payouts_seq_idx ON payouts(seq);
CREATE INDEX IF NOT EXISTS refunds_seq_idx ON refunds(seq);
CREATE INDEX IF NOT EXISTS refunds_due_idx ON refunds(due_ts) WHERE due_ts IS NOT NULL;
"""
# After the column exists (files written before it get it added first).
_EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS orders_expires_idx ON orders(expires_ts)"
    " WHERE expires_ts IS NOT NULL"
)


class StoredKey(tuple[str, str, float]):
    """(fingerprint, body, created_at) of a successful idempotent request."""

    @property
    def fingerprint(self) -> str:
        return self[0]

    @property
    def body(self) -> str:
        return self[1]

    @property
    def created_at(self) -> float:
        return self[2]


class Store:
    """All records and stored idempotent answers of one sandbox."""

    def __init__(self, path: str | Path = DEFAULT_DB_PATH) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(orders)")}
        if "expires_ts" not in columns:
            self._db.execute("ALTER TABLE orders ADD COLUMN expires_ts REAL")
        self._db.execute(_EXPIRY_INDEX)
        search_index.migrate(self._db)
        deliveries.migrate(self._db)
        #: The time every change is stamped with (epoch seconds): the sandbox's clock once a
        #: server holds this store (``SandboxApp``), the system time for a bare store.
        self.now: Callable[[], float] = time.time
        self._rng = random.Random()
        # Invoice URLs are stored with BASE_URL_TOKEN; every read puts this address there.
        self.base_url = ""

    def localize(self, text: str) -> str:
        """Stored JSON text as served: the sandbox's own address in its invoice URLs."""
        return text.replace(BASE_URL_TOKEN, self.base_url) if BASE_URL_TOKEN in text else text

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``) under the store's lock, for modules
        that keep their own records here (``refund_ledger``)."""
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- reading -------------------------------------------------------------

    def page_json(self, table: str, offset: int, limit: int) -> list[str]:
        """Stored JSON texts of one page, newest first.

        A plain ``OFFSET`` would step over every skipped row in the table itself, whose leaf
        pages hold the large JSON texts (30 ms at 100,000 orders). The boundary is found by
        stepping over the compact ``seq`` index instead, then the page is a range read.
        """
        _check_table(table)
        with self._lock:
            rows = self._db.execute(
                f"SELECT json FROM {table} WHERE seq <= ("
                f"  SELECT seq FROM {table} INDEXED BY {table}_seq_idx"
                f"  ORDER BY seq DESC LIMIT 1 OFFSET ?"
                f") ORDER BY seq DESC LIMIT ?",
                (offset, limit),
            ).fetchall()
        return [self.localize(row[0]) for row in rows]

    def reading(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work(connection)`` under the store's lock (a module's own multi-query read)."""
        with self._lock:
            return work(self._db)

    def read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read under the store's lock, for modules keeping their own tables here."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def get_json(self, table: str, record_id: str) -> str | None:
        _check_table(table)
        with self._lock:
            row = self._db.execute(
                f"SELECT json FROM {table} WHERE id = ?", (record_id,)
            ).fetchone()
        return self.localize(row[0]) if row else None

    def order(self, order_id: str) -> dict[str, Any] | None:
        text = self.get_json("orders", order_id)
        return json.loads(text) if text is not None else None

    def count(self, table: str) -> int:
        _check_table(table)
        with self._lock:
            return self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def count_orders(self) -> int:
        return self.count("orders")

    def newest_order_ids(self, n: int) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM orders ORDER BY seq DESC LIMIT ?", (n,)
            ).fetchall()
        return [row[0] for row in rows]

    def orders_created_via_api(self) -> list[dict[str, str]]:
        """Orders created through ``/orders/create``, oldest first, with their keys."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, idempotency_key FROM orders"
                " WHERE idempotency_key IS NOT NULL ORDER BY seq"
            ).fetchall()
        return [{"order_id": oid, "idempotency_key": key} for oid, key in rows]

    def idempotency_keys_used(self) -> list[str]:
        """The key of every order created via the API (a key appears twice only
        if it created two orders, e.g. reused after expiry)."""
        return [row["idempotency_key"] for row in self.orders_created_via_api()]

    # -- writing -------------------------------------------------------------

    def _insert(self, db: sqlite3.Connection, batch: Batch) -> None:
        db.executemany(
            "INSERT INTO customers (id, json, updated_ms) VALUES (?, ?, ?)", batch.customers
        )
        db.executemany(
            "INSERT INTO orders (id, customer_id, json, updated_ms) VALUES (?, ?, ?, ?)",
            batch.orders,
        )
        db.executemany(
            "INSERT INTO balance_transactions (id, json) VALUES (?, ?)", batch.transactions
        )
        db.executemany("INSERT INTO payouts (id, json, updated_ms) VALUES (?, ?, ?)", batch.payouts)

    def add_transaction(self, transaction_id: str, text: str) -> None:
        """Insert one balance transaction (JSON text) at the front."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO balance_transactions (id, json) VALUES (?, ?)", (transaction_id, text)
            )

    def expire_due(self, now_ts: float) -> int:
        """Mark unpaid orders whose ``expires_at`` has passed ``expired``; return how many.

        Lazy, as the brief of the hosted checkout asks: called before orders are read, it costs
        one indexed query when nothing is due. Only rows with ``expires_ts`` (orders created
        through the API) take part; the seeded history is a frozen snapshot.
        """
        with self._lock:
            due = self._db.execute(
                "SELECT id FROM orders WHERE expires_ts IS NOT NULL AND expires_ts <= ?", (now_ts,)
            ).fetchall()
            if not due:
                return 0
            expired = 0

            def expire(order: dict[str, Any]) -> None:
                nonlocal expired
                if order.get("status") == "requires_payment":
                    order["status"] = "expired"
                    expired += 1

            for (order_id,) in due:
                self.edit_order(order_id, expire)
            with self._transaction() as db:
                db.executemany(
                    "UPDATE orders SET expires_ts = NULL WHERE id = ?", [(row[0],) for row in due]
                )
            return expired

    def seed(self, n_orders: int, seed: int = 0) -> int:
        """Top the seeded history up to ``n_orders`` orders; return how many were added.

        Re-seeding with the same or a smaller number adds nothing, so a CLI that
        always passes ``--seed 500`` can be restarted on the same file.
        """
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = 'seeded_orders'").fetchone()
            already = int(row[0]) if row else 0
            if n_orders <= already:
                return 0
            batch = generate(n_orders - already, seed, start=already)
            with self._transaction() as db:
                self._insert(db, batch)
                db.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES ('seeded_orders', ?)",
                    (str(n_orders),),
                )
            return n_orders - already

    def insert_orders(
        self, n: int, now: float | None = None, status: str = "requires_payment"
    ) -> list[str]:
        """Insert ``n`` new guest orders at the front (newest); return their ids, newest first.

        ``now`` (epoch seconds) defaults to the system time; the server passes its clock.
        """
        now = time.time() if now is None else now
        with self._lock:
            batch = fresh_orders(n, now, self._rng, status)
            with self._transaction() as db:
                self._insert(db, batch)
        return [row[0] for row in reversed(batch.orders)]

    def insert_transactions(self, n: int, now: float) -> None:
        """Insert ``n`` payment transactions at the front of balance transactions."""

        with self._lock:
            factory = RecordFactory(self._rng)
            # Transactions of orders this store does not hold: only the walk's drift matters here.
            transactions = [
                factory.payment(fast_id("or_", self._rng), "ghs", 1000, now, now)[
                    "balance_transaction"
                ]
                for _ in range(n)
            ]
            rows = [(tx["id"], json.dumps(tx, separators=(",", ":"))) for tx in transactions]
            with self._transaction() as db:
                db.executemany("INSERT INTO balance_transactions (id, json) VALUES (?, ?)", rows)

    def edit_order(self, order_id: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Rewrite one stored order in place (e.g. break a field on purpose in a test).

        ``change`` mutates the decoded record; raises ``KeyError`` for an unknown order. A
        change that changes nothing (a repeated cancel) writes nothing and bumps no
        ``updated_at``.
        """
        with self._transaction() as db:
            row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
            if row is None:
                raise KeyError(order_id)
            order = json.loads(row[0])
            change(order)
            if order == json.loads(row[0]):
                return json.loads(self.localize(row[0]))
            text = json.dumps(order, ensure_ascii=False, separators=(",", ":"))
            self.save_order(db, order_id, text)
        return json.loads(self.localize(text))

    def save_order(self, db: sqlite3.Connection, order_id: str, text: str) -> None:
        """Write a changed order inside a transaction of this store, bumping its search
        ``updated_at`` (every change of an order goes through here; ``KeyError`` if unknown)."""
        search_index.rewrite(db, "orders", order_id, text, now_ms(self.now()))

    def all_orders(self) -> dict[str, dict[str, Any]]:
        """Every stored order, decoded, by id (for assertions; not for big stores)."""
        with self._lock:
            rows = self._db.execute("SELECT id, json FROM orders").fetchall()
        return {order_id: json.loads(self.localize(text)) for order_id, text in rows}

    def set_order_status(
        self, order_id: str, status: str, now_iso: str | None = None
    ) -> dict[str, Any]:
        """Change a status in place (a completed order gains ``completed_at``).

        Raises ``KeyError`` for an unknown order. ``now_iso`` defaults to system time.
        """
        stamp = now_iso or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        stamp_field = {"completed": "completed_at", "paid": "paid_at", "canceled": "canceled_at"}

        def change(order: dict[str, Any]) -> None:
            order["status"] = status
            if status in stamp_field:
                order[stamp_field[status]] = stamp
            if status == "completed":
                order.setdefault("paid_at", stamp)

        return self.edit_order(order_id, change)

    def add_api_order(
        self,
        order: dict[str, Any],
        customer: dict[str, Any],
        *,
        path: str,
        key: str,
        fingerprint: str,
        body: str,
        created_at: float,
        expires_ts: float | None = None,
    ) -> None:
        """Store a created order, its customer and its idempotent answer atomically.

        ``expires_ts`` (epoch seconds) enrols the order in lazy expiry (see ``expire_due``).
        """
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        stamp = now_ms(self.now())
        with self._transaction() as db:
            db.execute(  # a known customer (``customer_id``) is kept as it is
                "INSERT OR IGNORE INTO customers (id, json, updated_ms) VALUES (?, ?, ?)",
                (customer["id"], dumps(customer), stamp),
            )
            db.execute(
                "INSERT INTO orders"
                " (id, customer_id, idempotency_key, json, expires_ts, updated_ms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (order["id"], customer["id"], key, dumps(order), expires_ts, stamp),
            )
            db.execute(
                "INSERT OR REPLACE INTO idempotency"
                " (path, key, fingerprint, body, created_at, order_id) VALUES (?, ?, ?, ?, ?, ?)",
                (path, key, fingerprint, body, created_at, order["id"]),
            )

    def stored_key(self, path: str, key: str) -> StoredKey | None:
        with self._lock:
            row = self._db.execute(
                "SELECT fingerprint, body, created_at FROM idempotency WHERE path = ? AND key = ?",
                (path, key),
            ).fetchone()
        return StoredKey(row) if row else None

    def forget_key(self, path: str, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM idempotency WHERE path = ? AND key = ?", (path, key))

    def reset(self) -> None:
        """Delete every record, key and seed marker."""
        with self._transaction() as db:
            for table in (*TABLES, "idempotency", "meta", "search_history", "deliveries"):
                db.execute(f"DELETE FROM {table}")


def _check_table(table: str) -> None:
    # Table names are interpolated into SQL, so only known ones may pass.
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}")
