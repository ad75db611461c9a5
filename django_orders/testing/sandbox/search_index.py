"""The search index's storage: each order's, customer's and payout's ``updated_at``, and past
versions.

Records carry no ``updated_at`` on the wire, so the sandbox keeps it beside each record
(``updated_ms``), bumps it on every change (:func:`rewrite`) and keeps the replaced version, so a
delayed index can answer as of N seconds ago. Ordered ``(updated_ms, id)``: a cursor never skips.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The searchable tables (``Store`` tables) and the JSON path of each filterable field.
FILTER_PATHS: dict[str, dict[str, str]] = {
    "orders": {
        "status": "$.status",
        "customer_id": "$.customer.id",
        "currency": "$.line_item_group.total.currency",
    },
    "customers": {
        "email_address": "$.email_address",
        "phone_number": "$.phone_number",
    },
    "payouts": {
        "status": "$.status",
        "currency": "$.amount.currency",
        "reference": "$.reference",
    },
}
SEARCHED = tuple(FILTER_PATHS)

SCHEMA = """
CREATE TABLE IF NOT EXISTS search_history (
    seq INTEGER PRIMARY KEY, resource TEXT NOT NULL, id TEXT NOT NULL,
    updated_ms INTEGER NOT NULL, json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS search_history_idx ON search_history(resource, id, updated_ms);
"""
# initiated_at / created_at as epoch ms, for rows stored before updated_ms existed.
_FALLBACK_MS = {
    "orders": "CAST(round((julianday(json_extract(json, '$.initiated_at')) - 2440587.5)"
    " * 86400000) AS INTEGER)",
    "customers": "CAST(round((julianday(json_extract(json, '$.created_at')) - 2440587.5)"
    " * 86400000) AS INTEGER)",
    "payouts": "CAST(round((julianday(json_extract(json, '$.initiated_at')) - 2440587.5)"
    " * 86400000) AS INTEGER)",
}


def migrate(db: sqlite3.Connection) -> None:
    """Add ``updated_ms`` (and its index) to a store file that predates it; fill it once."""
    db.executescript(SCHEMA)
    for table in SEARCHED:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if "updated_ms" not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN updated_ms INTEGER")
        db.execute(f"CREATE INDEX IF NOT EXISTS {table}_updated_idx ON {table}(updated_ms, id)")
        db.execute(
            f"UPDATE {table} SET updated_ms = coalesce({_FALLBACK_MS[table]}, 0)"
            " WHERE updated_ms IS NULL"
        )


def rewrite(db: sqlite3.Connection, table: str, record_id: str, text: str, now_ms: int) -> None:
    """Store a changed record and bump its ``updated_ms``, keeping the replaced version.

    The bump is at least one millisecond past the last, so a record's versions never tie even
    when the sandbox clock stands still. Callers hold the store's write transaction.
    """
    row = db.execute(f"SELECT json, updated_ms FROM {table} WHERE id = ?", (record_id,)).fetchone()
    if row is None:
        raise KeyError(record_id)
    old_text, old_ms = row
    db.execute(
        "INSERT INTO search_history (resource, id, updated_ms, json) VALUES (?, ?, ?, ?)",
        (table, record_id, old_ms, old_text),
    )
    db.execute(
        f"UPDATE {table} SET json = ?, updated_ms = ? WHERE id = ?",
        (text, max(now_ms, old_ms + 1), record_id),
    )


def edit(
    db: sqlite3.Connection,
    table: str,
    record_id: str,
    change: Callable[[dict[str, Any]], None],
    now_ms: int,
) -> str:
    """Apply ``change`` to a stored record's decoded JSON and :func:`rewrite` it; return its
    text. A change that changes nothing writes nothing and bumps nothing; ``KeyError`` for an
    unknown record."""
    if table not in SEARCHED:
        raise ValueError(f"{table!r} is not searched: only {', '.join(SEARCHED)}")
    row = db.execute(f"SELECT json FROM {table} WHERE id = ?", (record_id,)).fetchone()
    if row is None:
        raise KeyError(record_id)
    record = json.loads(row[0])
    change(record)
    if record == json.loads(row[0]):
        return str(row[0])
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    rewrite(db, table, record_id, text, now_ms)
    return text


def updated_ms(db: sqlite3.Connection, table: str, record_id: str) -> int | None:
    """A record's ``updated_at`` in epoch ms (None: no such record)."""
    if table not in SEARCHED:
        raise ValueError(f"{table!r} is not searched: only {', '.join(SEARCHED)}")
    row = db.execute(f"SELECT updated_ms FROM {table} WHERE id = ?", (record_id,)).fetchone()
    return None if row is None else int(row[0])


@dataclass(frozen=True)
class Query:
    """One read of the index: which records, in which order, from where."""

    table: str
    descending: bool
    #: (field, values): a record matches when the field's value is one of the values.
    filters: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Resume strictly after this (updated_ms, id); None: from the start.
    after: tuple[int, str] | None = None
    #: The index's view: records as they were at this moment (epoch ms); None: now.
    as_of_ms: int | None = None


def _source(query: Query, params: list[Any]) -> str:
    """The records as the index sees them: every row now, or each row's version at ``as_of``."""
    table = query.table
    if query.as_of_ms is None:
        return f"SELECT id, updated_ms, json FROM {table}"
    params += [query.as_of_ms, query.as_of_ms, table, query.as_of_ms]
    return (
        f"SELECT id, updated_ms, json FROM {table} WHERE updated_ms <= ?"
        " UNION ALL"
        f" SELECT h.id, h.updated_ms, h.json FROM search_history h JOIN {table} r ON r.id = h.id"
        " WHERE r.updated_ms > ? AND h.seq = ("
        "   SELECT max(seq) FROM search_history p"
        "   WHERE p.resource = ? AND p.id = h.id AND p.updated_ms <= ?)"
    )


def _where(query: Query, params: list[Any], *, keyset: bool) -> str:
    conditions = []
    paths = FILTER_PATHS[query.table]
    for name, values in query.filters:
        marks = ", ".join("?" for _ in values)
        conditions.append(f"json_extract(json, '{paths[name]}') IN ({marks})")
        params.extend(values)
    if keyset and query.after is not None:
        # Row values compare lexicographically: (updated_ms, id) strictly past the cursor.
        conditions.append(f"(updated_ms, id) {'<' if query.descending else '>'} (?, ?)")
        params.extend(query.after)
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def select_page(db: sqlite3.Connection, query: Query, limit: int) -> list[tuple[str, int, str]]:
    """Up to ``limit`` (id, updated_ms, json) rows after the cursor, in the query's order."""
    params: list[Any] = []
    source = _source(query, params)
    where = _where(query, params, keyset=True)
    direction = "DESC" if query.descending else "ASC"
    sql = (
        f"SELECT id, updated_ms, json FROM ({source}){where}"
        f" ORDER BY updated_ms {direction}, id {direction} LIMIT ?"
    )
    return db.execute(sql, (*params, limit)).fetchall()


def count(db: sqlite3.Connection, query: Query, cap: int) -> int:
    """How many records match the query's filters (cursor aside), counting at most ``cap``."""
    params: list[Any] = []
    source = _source(query, params)
    where = _where(query, params, keyset=False)
    sql = f"SELECT count(*) FROM (SELECT 1 FROM ({source}){where} LIMIT ?)"
    return int(db.execute(sql, (*params, cap)).fetchone()[0])
