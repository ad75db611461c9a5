"""Bulk reads by id and bulk upserts for the sync's hot path: one statement per page and table.

Why not the ORM here (``filter(pk__in=...)``, ``bulk_create(update_conflicts=True)``): it is
correct, but on the sync's hot path it cost more than fetching and parsing the page
(benchmarks/README.md). Model instances are built and every value prepared field by field; each
JSON record is encoded a second time (the parser already encoded it to fingerprint it);
Django's SQLite backend splits a 256-row page into three statements because it assumes the
999-variable limit of SQLite before 3.32; Django 5.2 sends a multi-row insert on PostgreSQL as
``UNNEST`` of arrays, which psycopg's client-side binding quotes with a regular expression per
JSON string; and psycopg re-parses any statement with thousands of ``%s`` on every call.

So, with values the caller already has (rows are tuples in ``columns`` order, JSON columns as
JSON text, datetimes aware):

- SQLite: ``INSERT ... VALUES (...), (...) ON CONFLICT (id) DO UPDATE``, batched by the
  library's real variable limit (``variable_limit``), which keeps a 256-row page in one statement.
- PostgreSQL: the page travels as one JSON parameter, ``INSERT ... SELECT ... FROM
  json_to_recordset(%s) ... ON CONFLICT (id) DO UPDATE``: one short statement text, one string
  to escape, the unpacking done by the server in C.
- Reads by id pass the ids as one JSON array on both (``json_each`` / ``json_array_elements``).
- With psycopg 3, Django binds parameters client-side unless the database's OPTIONS say
  ``"server_side_binding": True``; with it, the page's JSON travels as a parameter of its own
  instead of being escaped into a 200 KB statement text, about 1.7 ms less per statement
  (benchmarks/README.md). That is the project's choice to make, so it is left to the settings.

Other backends fall back to the ORM.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connections, models, router

#: SQLite's default variable limit since 3.32 (Django assumes 999); never more than this a
#: statement, whatever a build allows.
MODERN_VARIABLE_LIMIT = 32766

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def variable_limit(connection) -> int:
    """How many ``%s`` parameters one statement may carry on this connection."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        real = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        return min(real, MODERN_VARIABLE_LIMIT)
    if connection.vendor == "postgresql":
        return MODERN_VARIABLE_LIMIT
    return connection.features.max_query_params or MODERN_VARIABLE_LIMIT


def rows_per_statement(connection, column_count: int) -> int:
    """Rows of ``column_count`` values that fit one statement (a 256-row page does)."""
    return max(1, variable_limit(connection) // column_count)


def read_by_ids(
    model: type[models.Model], ids: Sequence[str], columns: Sequence[str]
) -> list[tuple[Any, ...]]:
    """``SELECT columns FROM model WHERE pk IN ids``, the ids sent as one JSON parameter."""
    if not ids:
        return []
    connection = connections[router.db_for_read(model)]
    if connection.vendor not in ("sqlite", "postgresql"):
        return list(model._default_manager.filter(pk__in=ids).values_list(*columns))
    quote = connection.ops.quote_name
    names = ", ".join(quote(model._meta.get_field(name).column) for name in columns)
    if connection.vendor == "postgresql":
        # = ANY(ARRAY(...)), not IN (SELECT ...): the planner cannot see how many ids the JSON
        # holds and, with the statistics of a table that grew during the walk, chose a hash
        # join over a sequential scan of the whole table, a cost that grows with the mirror
        # (5 ms a page at 17,000 customers). An array probes the primary key, whatever the size.
        where = "= ANY(ARRAY(SELECT json_array_elements_text(%s::json)))"
    else:
        where = "IN (SELECT value FROM json_each(%s))"
    sql = (
        f"SELECT {names} FROM {quote(model._meta.db_table)} "  # noqa: S608  (names from _meta)
        f"WHERE {quote(model._meta.pk.column)} {where}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_encode(list(ids))])
        return cursor.fetchall()


def upsert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    update: Sequence[str],
    *,
    conflict: Sequence[str] | None = None,
) -> None:
    """Insert ``rows``; on a conflict overwrite the ``update`` columns.

    ``conflict`` names the fields of the unique constraint that decides a conflict (the
    primary key when not given): ``RemoteRecord`` rows are unique on (resource, remote_id).
    """
    if not rows:
        return
    connection = connections[router.db_for_write(model)]
    fields = [model._meta.get_field(name) for name in columns]
    unique = list(conflict) if conflict else [model._meta.pk.name]
    if connection.vendor not in ("sqlite", "postgresql"):
        _orm_upsert(model, fields, rows, update, unique)
        return
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in fields)
    updates = ", ".join(
        f"{quote(column)} = EXCLUDED.{quote(column)}"
        for column in (model._meta.get_field(name).column for name in update)
    )
    # Only quoted table and column names from the model's _meta go into the statement text;
    # every value is a parameter.
    table = quote(model._meta.db_table)
    target = ", ".join(quote(model._meta.get_field(name).column) for name in unique)
    conflict = f" ON CONFLICT ({target}) DO UPDATE SET {updates}"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # A value every row shares (the write's ``now``, a ``refreshed_at`` of None) is one
            # parameter instead of a field in every row's JSON, built and parsed 256 times.
            shared = _shared_columns(rows, len(fields))
            varying = [i for i in range(len(fields)) if i not in shared]
            types = ", ".join(
                f"{quote(fields[i].column)} {fields[i].db_type(connection)}" for i in varying
            )
            select = ", ".join(
                f"%s::{fields[i].db_type(connection)}"
                if i in shared
                else f"page.{quote(fields[i].column)}"
                for i in range(len(fields))
            )
            sql = (
                f"INSERT INTO {table} ({names}) SELECT {select} "  # noqa: S608
                f"FROM jsonb_to_recordset(%s::jsonb) AS page({types}){conflict}"
            )
            params = [rows[0][i] for i in sorted(shared)]
            params.append(_json_rows([fields[i] for i in varying], rows, varying))
            cursor.execute(sql, params)
            return
        adapters = [_sqlite_adapter(field, connection) for field in fields]
        placeholder = "(" + ", ".join(["%s"] * len(fields)) + ")"
        head = f"INSERT INTO {table} ({names}) VALUES "  # noqa: S608
        batch = rows_per_statement(connection, len(fields))
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            params: list[Any] = []
            for row in chunk:
                params.extend(
                    value if adapt is None else adapt(value)
                    for value, adapt in zip(row, adapters, strict=True)
                )
            cursor.execute(head + ", ".join([placeholder] * len(chunk)) + conflict, params)


def _shared_columns(rows: Sequence[tuple[Any, ...]], width: int) -> set[int]:
    """Positions whose value is the very same object in every row (an identity check, cheap);
    none for a single row, and never all of them (the JSON needs at least one column)."""
    if len(rows) < 2:
        return set()
    first = rows[0]
    shared = {i for i in range(width) if all(row[i] is first[i] for row in rows)}
    return shared if len(shared) < width else set()


def _json_rows(
    fields: Sequence[models.Field], rows: Sequence[tuple[Any, ...]], positions: Sequence[int]
) -> str:
    """The rows' values at ``positions`` as one JSON array of objects keyed by column; JSON
    columns embedded as is."""
    keys = [_encode(field.column) + ":" for field in fields]
    encoders = [_json_encoder(field) for field in fields]
    items = list(zip(keys, encoders, positions, strict=True))
    objects = [
        "{" + ",".join([key + encode(row[i]) for key, encode, i in items]) + "}" for row in rows
    ]
    return "[" + ",".join(objects) + "]"


def _json_encoder(field: models.Field):
    if isinstance(field, models.JSONField):
        return lambda text: "null" if text is None else text
    if isinstance(field, models.DateTimeField):
        cache: dict[Any, str] = {}

        def encode_datetime(value) -> str:
            if value is None:
                return "null"
            try:
                return cache[value]
            except KeyError:
                cache[value] = text = '"' + value.isoformat() + '"'
                return text

        return encode_datetime
    return _encode


def _sqlite_adapter(field: models.Field, connection):
    """Datetimes go through the backend's own adaptation (UTC text); a value that repeats on
    every row (the write's ``now``) is adapted once."""
    if not isinstance(field, models.DateTimeField):
        return None
    adapt = connection.ops.adapt_datetimefield_value
    cache: dict[Any, Any] = {}

    def adapt_cached(value):
        try:
            return cache[value]
        except KeyError:
            cache[value] = adapted = adapt(value)
            return adapted

    return adapt_cached


def _orm_upsert(model, fields, rows, update, unique) -> None:
    objs = []
    for row in rows:
        values = {
            field.attname: json.loads(value) if isinstance(field, models.JSONField) else value
            for field, value in zip(fields, row, strict=True)
        }
        objs.append(model(**values))
    model._default_manager.bulk_create(
        objs, update_conflicts=True, unique_fields=unique, update_fields=update
    )


#: SQLite in WAL mode: pages of WAL between automatic checkpoints during a walk (SQLite's
#: default is 1000, about 4 MB, which a walk fills every few pages).
WALK_WAL_AUTOCHECKPOINT = 10_000


@contextmanager
def walk_write_settings(model: type[models.Model]) -> Iterator[None]:
    """Settings of the connection for the many short page transactions of a walk, restored
    afterwards (before the run's outcome is saved and the lease released).

    PostgreSQL: ``synchronous_commit`` off, so a page's commit does not wait for its WAL to
    reach the disk (an fsync per page). The mirror is a cache of the upstream service: a crash
    of the database server can lose the last few hundred milliseconds of committed pages,
    never corrupt anything or tear a page apart (a page's rows, the run's progress and the
    lease renewal commit or vanish together, in order), and the next walk writes them again.
    Order creation (``OrderRequest``, ``create_order``) must stay durable and is not affected:
    the setting covers only the walk and the refresh lookups. Session-wide for the walk rather
    than ``SET LOCAL`` in each page's transaction: the same effect without a seventh statement
    per page.

    SQLite in WAL mode: automatic checkpoints every ``WALK_WAL_AUTOCHECKPOINT`` pages instead of
    every 1000. Each checkpoint copies the WAL into the database and syncs it, inside some
    page's commit; fewer, larger checkpoints copy a page rewritten several times once and sync
    less often. Durability is unchanged (a checkpoint is not a commit); the cost is a WAL file
    up to about 40 MB (4 KiB pages), which SQLite reuses rather than shrinks. A value the
    project set higher, or 0 (checkpoints disabled), is left alone.

    If restoring fails, the connection is closed so that nothing later inherits the settings
    (inside an outer transaction, its rollback undoes the PostgreSQL ``SET`` anyway).
    """
    connection = connections[router.db_for_write(model)]
    if connection.vendor == "postgresql":
        apply, restore = ["SET synchronous_commit TO OFF"], ["RESET synchronous_commit"]
    elif connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            current = int(cursor.fetchone()[0])
        if not 0 < current < WALK_WAL_AUTOCHECKPOINT:
            yield
            return
        apply = [f"PRAGMA wal_autocheckpoint = {WALK_WAL_AUTOCHECKPOINT:d}"]
        restore = [f"PRAGMA wal_autocheckpoint = {current:d}"]
    else:
        yield
        return
    with connection.cursor() as cursor:
        for statement in apply:
            cursor.execute(statement)
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                for statement in restore:
                    cursor.execute(statement)
        except Exception:
            if not connection.in_atomic_block:
                connection.close()
