"""Fill the checkout columns of 0006 from the raw records the mirror already holds.

A sync rewrites only records whose fingerprint changed, so orders and customers mirrored
before 0006 would keep empty totals, numbers and contacts until they next change upstream
(a paid order never does). Their raw records hold the values: read them with the very readers
the sync uses (``django_orders.record_fields``, ``parsing.parse_optional_timestamp``), so a backfilled row equals a freshly synced one.

Bounded: rows are read by primary key in batches of ``BATCH`` (keyset pagination, never an
OFFSET, never the whole table in memory), and each batch is written in one statement (on
PostgreSQL an ``UPDATE ... FROM json_to_recordset(...)``, elsewhere an ``executemany`` of a
single-row ``UPDATE ... WHERE pk = %s``, which SQLite steps in C) and committed on its own (the
migration is not atomic), so a million orders never hold one long transaction or lock every
row at once; an interrupted run is simply run again. Rows whose record holds none of the
values are not written at all. Not ``bulk_update``: its ``CASE WHEN pk = ... THEN ...`` per
column is quadratic in the batch: 6.5 ms an order at 2,000 a batch on PostgreSQL, an hour and a
half for a million orders (benchmarks/README.md); an ``executemany`` on PostgreSQL is a round
trip per row.

Tolerant: a raw record that is not an object, or holds a value of the wrong type, leaves that
column empty; a timestamp that cannot be read leaves that timestamp empty (the sync would
refuse such a record; here the row is already stored and stays as it was). ``changed_at`` and
the fingerprint are not touched: the record did not change. Reversing is a no-op (0006's
reverse drops the columns).
"""

import json
from datetime import datetime

from django.db import connections, migrations, transaction

#: Rows read and written per batch.
BATCH = 2_000

ORDER_FIELDS = (
    "total",
    "currency",
    "number",
    "payment_url",
    "paid_at",
    "canceled_at",
    "expires_at",
)
CUSTOMER_FIELDS = ("email_address", "phone_number")


def order_values(raw):
    """The checkout columns read from one stored order record; None if it holds none."""
    from django_orders.exceptions import InvalidRecord
    from django_orders.parsing import parse_optional_timestamp
    from django_orders.record_fields import read_number, read_payment_url, read_total

    if not isinstance(raw, dict):
        return None
    total, currency = read_total(raw)
    values = {
        "total": total,
        "currency": currency,
        "number": read_number(raw),
        "payment_url": read_payment_url(raw),
    }
    for field in ("paid_at", "canceled_at", "expires_at"):
        try:
            values[field] = parse_optional_timestamp(raw.get(field), field=field)
        except InvalidRecord:
            values[field] = None
    return values if any(value not in (None, "") for value in values.values()) else None


def customer_values(raw):
    """The contact columns read from one stored customer record; None if it holds neither."""
    from django_orders.record_fields import read_contact

    if not isinstance(raw, dict):
        return None
    email_address, phone_number = read_contact(raw)
    if not (email_address or phone_number):
        return None
    return {"email_address": email_address, "phone_number": phone_number}


def backfill_model(model, using, read, fields, batch=BATCH):
    """Walk ``model`` by primary key, ``batch`` rows at a time, and write what ``read`` finds
    in each row's raw record. Returns the number of rows written."""
    connection = connections[using]
    write = _postgresql_writer if connection.vendor == "postgresql" else _executemany_writer
    write = write(connection, model, fields)
    written = 0
    last = None
    rows = model._default_manager.using(using).order_by("pk")
    while True:
        page = rows if last is None else rows.filter(pk__gt=last)
        chunk = list(page.values_list("pk", "raw")[:batch])
        if not chunk:
            return written
        last = chunk[-1][0]
        changes = []
        for pk, raw in chunk:
            values = read(raw)
            if values is not None:
                changes.append((pk, values))
        if changes:
            with transaction.atomic(using=using, savepoint=False), connection.cursor() as cursor:
                write(cursor, changes)
            written += len(changes)


def _postgresql_writer(connection, model, fields):
    """One ``UPDATE ... FROM json_to_recordset(%s)`` per batch: the batch travels as one JSON
    array, each row found by its primary key."""
    quote = connection.ops.quote_name
    pk = model._meta.pk
    columns = [(name, model._meta.get_field(name)) for name in fields]
    types = ", ".join(
        f"{quote(name)} {field.db_type(connection)}" for name, field in [("pk", pk), *columns]
    )
    sets = ", ".join(f"{quote(field.column)} = v.{quote(name)}" for name, field in columns)
    # Only quoted names and column types from the model's _meta in the text; the data is the
    # one parameter.
    sql = (
        f"UPDATE {quote(model._meta.db_table)} AS t SET {sets} "  # noqa: S608
        f"FROM json_to_recordset(%s::json) AS v({types}) WHERE t.{quote(pk.column)} = v.pk"
    )

    def write(cursor, changes):
        data = [
            {"pk": pk_value, **{name: _jsonable(values[name]) for name in fields}}
            for pk_value, values in changes
        ]
        cursor.execute(sql, [json.dumps(data)])

    return write


def _jsonable(value):
    return value.isoformat() if isinstance(value, datetime) else value


def _executemany_writer(connection, model, fields):
    """SQLite and others: one single-row ``UPDATE`` stepped for every row (in C on SQLite)."""
    quote = connection.ops.quote_name
    adapt = connection.ops.adapt_datetimefield_value
    sets = ", ".join(f"{quote(model._meta.get_field(name).column)} = %s" for name in fields)
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET {sets} "  # noqa: S608
        f"WHERE {quote(model._meta.pk.column)} = %s"
    )

    def write(cursor, changes):
        rows = [
            (*(adapt(values[name]) if isinstance(values[name], datetime) else values[name]
               for name in fields), pk_value)
            for pk_value, values in changes
        ]
        cursor.executemany(sql, rows)

    return write


def backfill(apps, schema_editor):
    using = schema_editor.connection.alias
    backfill_model(
        apps.get_model("django_orders", "Customer"), using, customer_values, CUSTOMER_FIELDS
    )
    backfill_model(apps.get_model("django_orders", "Order"), using, order_values, ORDER_FIELDS)


class Migration(migrations.Migration):
    # Each batch commits on its own: no transaction over the whole table.
    atomic = False

    dependencies = [
        ("django_orders", "0007_orderrequest_last_error_body"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
