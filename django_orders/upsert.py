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

Other backends fall back to the ORM.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
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
        ids_sql = "SELECT json_array_elements_text(%s::json)"
    else:
        ids_sql = "SELECT value FROM json_each(%s)"
    sql = (
        f"SELECT {names} FROM {quote(model._meta.db_table)} "  # noqa: S608  (names from _meta)
        f"WHERE {quote(model._meta.pk.column)} IN ({ids_sql})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_encode(list(ids))])
        return cursor.fetchall()


def upsert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    update: Sequence[str],
) -> None:
    """Insert ``rows``; on a primary-key conflict overwrite the ``update`` columns."""
    if not rows:
        return
    connection = connections[router.db_for_write(model)]
    fields = [model._meta.get_field(name) for name in columns]
    if connection.vendor not in ("sqlite", "postgresql"):
        _orm_upsert(model, fields, rows, update)
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
    conflict = f" ON CONFLICT ({quote(model._meta.pk.column)}) DO UPDATE SET {updates}"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            types = ", ".join(f"{quote(f.column)} {f.db_type(connection)}" for f in fields)
            sql = (
                f"INSERT INTO {table} ({names}) SELECT {names} "  # noqa: S608
                f"FROM jsonb_to_recordset(%s::jsonb) AS page({types}){conflict}"
            )
            cursor.execute(sql, [_json_rows(fields, rows)])
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


def _json_rows(fields: Sequence[models.Field], rows: Sequence[tuple[Any, ...]]) -> str:
    """The rows as one JSON array of objects keyed by column; JSON columns embedded as is."""
    keys = [_encode(field.column) + ":" for field in fields]
    encoders = [_json_encoder(field) for field in fields]
    objects = []
    for row in rows:
        parts = [
            key + encode(value) for key, encode, value in zip(keys, encoders, row, strict=True)
        ]
        objects.append("{" + ",".join(parts) + "}")
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


def _orm_upsert(model, fields, rows, update) -> None:
    objs = []
    for row in rows:
        values = {
            field.attname: json.loads(value) if isinstance(field, models.JSONField) else value
            for field, value in zip(fields, row, strict=True)
        }
        objs.append(model(**values))
    model._default_manager.bulk_create(
        objs, update_conflicts=True, unique_fields=[model._meta.pk.name], update_fields=update
    )
