"""The payouts and balance transactions that earlier releases stored raw (``RemoteRecord``)
copied into their typed tables, in batches that commit one by one.

The raw rows stay (for one release): nothing is lost, and a record that does not decode is
skipped and left raw only. It imports the app's one decode path, ``mirror.money_records``,
rather than a copy of it: that module is pure (no models, no ORM, no settings, by its own rule),
so importing it from here cannot reach the current models, and a copy would drift from what the
sync stores. Re-run safe: existing typed rows are left as they are.
"""

from django.db import migrations, transaction

from django_orders.exceptions.wire import InvalidRecord
from django_orders.mirror.money_records import decode_balance_transaction, decode_payout

BATCH = 1000


def _batches(RemoteRecord, resource, using):
    last = 0
    while True:
        batch = list(
            RemoteRecord.objects.using(using)
            .filter(resource=resource, id__gt=last)
            .order_by("id")
            .only("id", "raw", "first_seen_at", "changed_at")[:BATCH]
        )
        if not batch:
            return
        last = batch[-1].id
        yield batch


def copy_raw_records(apps, schema_editor):
    using = schema_editor.connection.alias
    RemoteRecord = apps.get_model("django_orders", "RemoteRecord")
    Payout = apps.get_model("django_orders", "Payout")
    PayoutItem = apps.get_model("django_orders", "PayoutItem")
    BalanceTransaction = apps.get_model("django_orders", "BalanceTransaction")
    for batch in _batches(RemoteRecord, "balance_transactions", using):
        rows = []
        for record in batch:
            try:
                remote_id, fields = decode_balance_transaction(record.raw)
            except InvalidRecord:
                continue
            seen = {"first_seen_at": record.first_seen_at, "changed_at": record.changed_at}
            rows.append(BalanceTransaction(id=remote_id, **fields, **seen))
        with transaction.atomic(using=using):
            BalanceTransaction.objects.using(using).bulk_create(rows, ignore_conflicts=True)
    for batch in _batches(RemoteRecord, "payouts", using):
        payouts, items = [], []
        for record in batch:
            try:
                decoded = decode_payout(record.raw)
            except InvalidRecord:
                continue
            seen = {"first_seen_at": record.first_seen_at, "changed_at": record.changed_at}
            payouts.append(Payout(id=decoded.id, **decoded.fields, **seen))
            items += [PayoutItem(payout_id=decoded.id, **item) for item in decoded.items]
        with transaction.atomic(using=using):
            Payout.objects.using(using).bulk_create(payouts, ignore_conflicts=True)
            PayoutItem.objects.using(using).bulk_create(items, ignore_conflicts=True)


class Migration(migrations.Migration):
    # Each batch commits on its own: a large table is not copied in one transaction.
    atomic = False

    dependencies = [
        ("django_orders", "0014_reconciliation"),
    ]

    operations = [
        # Backwards: the typed tables go with 0012; the raw rows were never touched.
        migrations.RunPython(copy_raw_records, migrations.RunPython.noop, elidable=True),
    ]
