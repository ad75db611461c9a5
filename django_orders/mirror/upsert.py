"""Bulk reads by id and bulk writes for the sync's hot path, one statement per page and table.

The ORM costs more here than fetching and parsing the page, so values go in as the caller holds
them: ``executemany`` on SQLite, one JSON array per column on PostgreSQL; other
backends fall back to the ORM. Why: docs/architecture/sync.md, "Writing a page". With psycopg 3,
``"server_side_binding": True`` in the database OPTIONS sends the page's JSON as a parameter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connections, models, router

#: Compact JSON text of a page's values, as the statements here send them (module docs).
json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


#: What ``read_by_ids`` reads: from ``model``, the ``columns`` of the rows whose primary key is
#: in ``ids``.
IdRead = tuple[type[models.Model], Sequence[str], Sequence[str]]


def read_by_ids(
    *reads: IdRead, lock: Sequence[type[models.Model]] = ()
) -> list[list[tuple[Any, ...]]]:
    """The rows of each ``(model, ids, columns)`` read, in one statement for all of them.

    A page's customers and orders are read together (``SELECT ... UNION ALL SELECT ...``, each
    row tagged with the read it answers): one round trip instead of two, on the thread whose
    round trips are the sync's critical path. The ids travel as one JSON array per read. Reads
    go to the database the mirror is written to, inside the caller's transaction.

    On PostgreSQL the rows of the models in ``lock`` are locked (``FOR UPDATE``, in primary key
    order, so that two writers of overlapping pages take them in the same order) until the
    caller's transaction ends: what the caller decides from them holds when it writes. SQLite
    needs no lock: no other connection commits between a transaction's read and its write.
    """
    results: list[list[tuple[Any, ...]]] = [[] for _ in reads]
    wanted = [(n, read) for n, read in enumerate(reads) if read[1]]
    if not wanted:
        return results
    connection = connections[router.db_for_write(wanted[0][1][0])]
    if connection.vendor not in ("sqlite", "postgresql"):
        for n, (model, ids, columns) in wanted:
            rows = model._default_manager.using(connection.alias).filter(pk__in=ids)
            results[n] = list(rows.values_list(*columns))
        return results
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        # = ANY(ARRAY(...)), not IN (SELECT ...): the planner cannot see how many ids the JSON
        # holds and, with the statistics of a table that grew during the walk, may choose a hash
        # join over a sequential scan of the whole table, a cost that grows with the mirror
        # (figures: benchmarks/README.md, section "Figures moved out of the code"). An array
        # probes the primary key, whatever the size.
        where = "= ANY(ARRAY(SELECT json_array_elements_text(%s::json)))"
    else:
        where = "IN (SELECT value FROM json_each(%s))"
    width = max(len(columns) for _n, (_model, _ids, columns) in wanted)
    selects: list[str] = []
    params: list[str] = []
    for n, (model, ids, columns) in wanted:
        names = [quote(column_of(model, name)) for name in columns]
        padding = ["NULL"] * (width - len(names))  # UNION ALL needs the same width everywhere
        pk = quote(column_of(model, model._meta.pk.name))
        source = f"{quote(model._meta.db_table)} WHERE {pk} {where}"
        if model in lock and connection.vendor == "postgresql":
            # A locking clause is not allowed on a UNION's arm, but is in a sub-select.
            source = (
                f"(SELECT {', '.join(names)} FROM {source} ORDER BY {pk} FOR UPDATE) AS locked{n:d}"  # noqa: S608
            )
        selects.append(f"SELECT {n:d}, {', '.join(names + padding)} FROM {source}")  # noqa: S608
        params.append(json_text(list(ids)))
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        for tag, *values in cursor.fetchall():
            results[tag].append(tuple(values[: len(reads[tag][2])]))
    return results


def upsert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    update: Sequence[str],
    *,
    conflict: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    insert_only: Sequence[Any] = (),
) -> set[Any]:
    """Insert ``rows``; on a conflict overwrite the ``update`` columns.

    ``conflict`` names the fields of the unique constraint that decides a conflict (the
    primary key when not given): ``RemoteRecord`` rows are unique on (resource, remote_id).
    ``keep`` names ``update`` columns whose stored value a NULL never overwrites (an order's
    timestamps that only ever appear: ``lifecycle.APPEARING``).

    ``insert_only`` (PostgreSQL): primary keys of rows a read found absent. The statement never
    updates a row of theirs that another transaction inserted since, and returns the ones it
    did not insert for that reason, for the caller to decide on as stored rows. Same statement
    count; an empty set elsewhere.
    """
    if not rows:
        return set()
    connection = connections[router.db_for_write(model)]
    fields = [model._meta.get_field(name) for name in columns]
    unique = list(conflict) if conflict else [model._meta.pk.name]
    # In key order, whatever order the caller's answers came in: two writers of the same rows
    # (the cron sync and a backfill, sharing repeat customers) then lock them in the same order,
    # and the second waits for the first instead of each holding a row the other needs.
    positions = [columns.index(name) for name in unique]
    rows = sorted(rows, key=lambda row: [row[i] for i in positions])
    if connection.vendor not in ("sqlite", "postgresql"):
        _orm_upsert(model, fields, rows, update, unique)
        return set()
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    kept = {column_of(model, name) for name in keep}
    updates = ", ".join(
        f"{quote(column)} = COALESCE(EXCLUDED.{quote(column)}, {table}.{quote(column)})"
        if column in kept
        else f"{quote(column)} = EXCLUDED.{quote(column)}"
        for column in (column_of(model, name) for name in update)
    )
    target = ", ".join(quote(column_of(model, name)) for name in unique)
    # Nothing to update (rows only inserted): a conflict leaves the stored row as it is.
    action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    clause = f" ON CONFLICT ({target}) {action}"
    if not insert_only or connection.vendor != "postgresql":
        insert_rows(connection, model, fields, rows, clause)
        return set()
    # Rows inserted meanwhile are left as they are; RETURNING tells which rows were written.
    pk = f"{table}.{quote(column_of(model, model._meta.pk.name))}"
    absent = list(insert_only)
    guard = f" WHERE NOT ({pk} = ANY(ARRAY(SELECT json_array_elements_text(%s::json))))"
    extra = [json_text(absent)]
    if not updates:  # DO NOTHING already leaves such a row alone, and takes no WHERE
        guard, extra = "", []
    written = insert_rows(
        connection, model, fields, rows, clause + guard, extra=extra, returning=pk
    )
    return set(absent) - written


def write_read_rows(
    model: type[models.Model],
    columns: Sequence[str],
    absent: Sequence[tuple[Any, ...]],
    stored: Sequence[tuple[Any, ...]],
    update: Sequence[str],
    *,
    keep: Sequence[str] = (),
    guard: bool = False,
) -> set[Any]:
    """Write rows that a read in this same transaction found ``absent`` or ``stored`` (by
    primary key): insert the first, overwrite the ``update`` columns of the second (``keep``:
    as ``upsert``'s). With ``guard``, returns the primary keys of absent rows that another
    transaction inserted since the read (PostgreSQL), left as that one wrote them: the caller
    decides on them as stored rows (``upsert``'s ``insert_only``). Without it (customers,
    which have no lifecycle) such a row is overwritten.

    SQLite: with a foreign key among the ``update`` columns, absent rows go in by a plain
    ``INSERT`` (an upsert setting a foreign key opens a statement journal per row); safe, as no
    other connection commits between this transaction's read and write. PostgreSQL: one upsert
    that leaves a row inserted meanwhile alone (``insert_only``). Outside a
    transaction, one upsert of both. Why: docs/architecture/sync.md, "Writing a page".
    """
    connection = connections[router.db_for_write(model)]
    sqlite_inserts = connection.vendor == "sqlite" and any(
        model._meta.get_field(name).is_relation for name in update
    )
    if absent and connection.in_atomic_block and sqlite_inserts:
        fields = [model._meta.get_field(name) for name in columns]
        insert_rows(connection, model, fields, absent, "")
        upsert(model, columns, stored, update, keep=keep)
        return set()
    pk = model._meta.pk.name
    insert_only = (
        [row[columns.index(pk)] for row in absent] if guard and connection.in_atomic_block else ()
    )
    return upsert(model, columns, [*absent, *stored], update, keep=keep, insert_only=insert_only)


def column_of(model: type[models.Model], name: str) -> str:
    """The database column of the concrete field ``name`` (``get_field`` also finds reverse
    relations, which have none)."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column, f"{name} is not a concrete field"
    return field.column


def insert_rows(
    connection,
    model,
    fields,
    rows: Sequence[tuple[Any, ...]],
    on_conflict: str,
    *,
    extra: Sequence[Any] = (),
    returning: str = "",
) -> set[Any]:
    """``INSERT`` the rows with an ``on_conflict`` clause (or none) in one statement text
    (SQLite or PostgreSQL; also the timeline's, ``events``); ``extra``: the clause's
    parameters; ``returning`` (PostgreSQL): the column whose values of the rows written are
    returned."""
    quote = connection.ops.quote_name
    # Only quoted table and column names from the model's _meta go into the statement text;
    # every value is a parameter.
    table = quote(model._meta.db_table)
    names = ", ".join(quote(field.column) for field in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql, params = _postgresql_insert(connection, table, names, fields, rows, on_conflict)
            if returning:
                sql += f" RETURNING {returning}"
            cursor.execute(sql, [*params, *extra])
            return {row[0] for row in cursor.fetchall()} if returning else set()
        placeholder = ", ".join(["%s"] * len(fields))
        cursor.executemany(
            f"INSERT INTO {table} ({names}) VALUES ({placeholder}){on_conflict}",  # noqa: S608
            _sqlite_rows(connection, fields, rows),
        )
    return set()


def _postgresql_insert(connection, table, names, fields, rows, conflict) -> tuple[str, list]:
    """``INSERT ... SELECT`` from one JSON array per column, zipped by ``ROWS FROM``.

    One array per column, not one object per row: a list of strings is one call of the C
    encoder, and the JSON columns are the parser's own text joined with commas, so the writer
    thread spends about a millisecond a page on it instead of building 256 objects key by key
    (it shares the interpreter with the thread that fetches and parses the next page). The
    server reads each array once and casts each value to its column's type.

    A value every row shares (the write's ``now``, a ``refreshed_at`` of None) is sent once as
    a parameter of its own.
    """
    shared = _shared_columns(rows, len(fields))
    select: list[str] = []
    functions: list[str] = []
    params: list[Any] = [rows[0][i] for i in sorted(shared)]
    arrays: list[str] = []
    for i, field in enumerate(fields):
        # Text goes in uncast: an explicit cast to varchar(64) would cut a longer value silently,
        # while the assignment to the column refuses it. Other types are cast from text.
        text = isinstance(field, models.CharField | models.TextField)
        cast = "" if text else f"::{field.db_type(connection)}"
        if i in shared:
            select.append(f"%s{cast}")
            continue
        column = f"c{len(functions)}"
        if isinstance(field, models.JSONField):
            functions.append("json_array_elements(%s::json)")
        else:
            functions.append("json_array_elements_text(%s::json)")
        select.append(f"page.{column}{cast}")
        arrays.append(_json_array(field, [row[i] for row in rows]))
    params.extend(arrays)
    aliases = ", ".join(f"c{n}" for n in range(len(functions)))
    sql = (
        f"INSERT INTO {table} ({names}) SELECT {', '.join(select)} "  # noqa: S608
        f"FROM ROWS FROM ({', '.join(functions)}) AS page({aliases}){conflict}"
    )
    return sql, params


def _shared_columns(rows: Sequence[tuple[Any, ...]], width: int) -> set[int]:
    """Positions whose value is the very same object in every row (an identity check, cheap);
    none for a single row, and never all of them (at least one array carries the rows)."""
    if len(rows) < 2:
        return set()
    first = rows[0]
    shared = {i for i in range(width) if all(row[i] is first[i] for row in rows)}
    return shared if len(shared) < width else set()


def _json_array(field: models.Field, values: list[Any]) -> str:
    """One column's values as a JSON array: JSON columns (already JSON text) embedded as is,
    datetimes as ISO 8601 text (each distinct value formatted once), anything else encoded."""
    if isinstance(field, models.JSONField):
        return "[" + ",".join("null" if text is None else text for text in values) + "]"
    if isinstance(field, models.DateTimeField):
        texts: dict[Any, str | None] = {None: None}
        return json_text(
            [
                texts[value] if value in texts else texts.setdefault(value, value.isoformat())
                for value in values
            ]
        )
    return json_text(values)


def _sqlite_rows(connection, fields, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows with their datetimes as SQLite text, converted a column at a time.

    Only the datetime columns need converting; the rows are taken apart into columns and zipped
    back in C (``zip``), so the Python work is one loop per datetime column rather than a call
    per value of every row, on the thread that is the walk's critical path.
    """
    datetimes = [i for i, field in enumerate(fields) if isinstance(field, models.DateTimeField)]
    if not datetimes:
        return list(rows)
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for i in datetimes:
        columns[i] = _sqlite_datetimes(connection, columns[i])
    return list(zip(*columns, strict=True))


def _sqlite_datetimes(connection, values: Sequence[Any]) -> Sequence[Any]:
    """Datetimes as the backend's own ``adapt_datetimefield_value`` writes them (naive text in
    the connection's time zone), without its per-value cost.

    Every datetime the mirror writes is aware UTC (the parser's, ``timezone.now()``), and the
    connection's zone is UTC unless the project set a ``TIME_ZONE`` for the database. For a
    value already in the connection's zone (the same ``tzinfo`` object), Django's conversion
    is ``str(value.replace(tzinfo=None))`` after two settings lookups and a time zone
    conversion that changes nothing, for each of the thousand datetimes of a page of new
    orders. Any other value goes through Django. A column whose every row holds the same
    object (the write's ``now``, a ``refreshed_at`` of None) is converted once.
    """
    adapt = connection.ops.adapt_datetimefield_value
    zone = connection.timezone  # None when USE_TZ is False: every value then goes to Django
    first = values[0]
    if all(value is first for value in values):
        return (adapt(first),) * len(values)
    return [
        None
        if value is None
        else str(value.replace(tzinfo=None))
        if zone is not None and value.tzinfo is zone
        else adapt(value)
        for value in values
    ]


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
