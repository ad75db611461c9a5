"""Fill the checkout columns of 0006 from the raw records the mirror already holds.

A sync rewrites only records whose fingerprint changed, so orders and customers mirrored
before 0006 would keep empty totals, numbers and contacts until they next change upstream
(a paid order never does). Their raw records hold the values: read them with the very readers
the sync uses (``django_orders.parsing``), so a backfilled row equals a freshly synced one.

Bounded: rows are read by primary key in batches of ``BATCH`` (keyset pagination, never an
OFFSET, never the whole table in memory), and each batch is written with one ``bulk_update``
and committed on its own (the migration is not atomic), so a million orders never hold one
long transaction or lock every row at once; an interrupted run is simply run again. Rows
whose record holds none of the values are not written at all.

Tolerant: a raw record that is not an object, or holds a value of the wrong type, leaves that
column empty; a timestamp that cannot be read leaves that timestamp empty (the sync would
refuse such a record; here the row is already stored and stays as it was). ``changed_at`` and
the fingerprint are not touched: the record did not change. Reversing is a no-op (0006's
reverse drops the columns).
"""

from django.db import migrations

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
    from django_orders.parsing import (
        parse_optional_timestamp,
        read_number,
        read_payment_url,
        read_total,
    )

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
    from django_orders.parsing import read_contact

    if not isinstance(raw, dict):
        return None
    email_address, phone_number = read_contact(raw)
    if not (email_address or phone_number):
        return None
    return {"email_address": email_address, "phone_number": phone_number}


def backfill_model(model, using, read, fields, batch=BATCH):
    """Walk ``model`` by primary key, ``batch`` rows at a time, and write what ``read`` finds
    in each row's raw record. Returns the number of rows written."""
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
                changes.append(model(pk=pk, **values))
        if changes:
            model._default_manager.using(using).bulk_update(changes, fields, batch_size=batch)
            written += len(changes)


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
        ("django_orders", "0006_order_checkout_fields"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
