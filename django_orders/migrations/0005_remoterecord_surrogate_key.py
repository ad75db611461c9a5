"""RemoteRecord keyed by a surrogate id, unique on (resource, remote_id).

Remote ids are unique per resource only: keyed by the bare id, a payout and a balance
transaction with the same id overwrote each other. A character primary key cannot be altered
into an auto-increment one in place on every backend, so the rows are copied into a new table
(the old ``id`` becoming ``remote_id``), the old table dropped and the new one renamed.
"""

import django.utils.timezone
from django.db import migrations, models


def copy_records(apps, schema_editor):
    old = apps.get_model("django_orders", "RemoteRecord")
    new = apps.get_model("django_orders", "RemoteRecordKeyed")
    db = schema_editor.connection.alias
    batch = []
    for record in old.objects.using(db).order_by("resource", "id").iterator(chunk_size=2000):
        batch.append(
            new(
                resource=record.resource,
                remote_id=record.id,
                raw=record.raw,
                fingerprint=record.fingerprint,
                first_seen_at=record.first_seen_at,
                changed_at=record.changed_at,
            )
        )
        if len(batch) >= 2000:
            new.objects.using(db).bulk_create(batch)
            batch = []
    new.objects.using(db).bulk_create(batch)


def copy_back(apps, schema_editor):
    """Reverse: only possible while no two resources share an id (the old key)."""
    old = apps.get_model("django_orders", "RemoteRecord")
    new = apps.get_model("django_orders", "RemoteRecordKeyed")
    db = schema_editor.connection.alias
    old.objects.using(db).bulk_create(
        [
            old(
                id=record.remote_id,
                resource=record.resource,
                raw=record.raw,
                fingerprint=record.fingerprint,
                first_seen_at=record.first_seen_at,
                changed_at=record.changed_at,
            )
            for record in new.objects.using(db).order_by("id")
        ]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("django_orders", "0004_orderrequest_first_sent_at"),
    ]

    operations = [
        migrations.CreateModel(
            name="RemoteRecordKeyed",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("resource", models.CharField(max_length=64, verbose_name="resource")),
                ("remote_id", models.CharField(max_length=64, verbose_name="remote id")),
                ("raw", models.JSONField(default=dict, verbose_name="raw record")),
                (
                    "fingerprint",
                    models.CharField(
                        blank=True, editable=False, max_length=64, verbose_name="fingerprint"
                    ),
                ),
                (
                    "first_seen_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="first seen"
                    ),
                ),
                (
                    "changed_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="changed"),
                ),
            ],
            options={
                "verbose_name": "remote record",
                "verbose_name_plural": "remote records",
            },
        ),
        migrations.RunPython(copy_records, copy_back),
        migrations.DeleteModel(name="RemoteRecord"),
        migrations.RenameModel(old_name="RemoteRecordKeyed", new_name="RemoteRecord"),
        migrations.AddConstraint(
            model_name="remoterecord",
            constraint=models.UniqueConstraint(
                fields=("resource", "remote_id"), name="orders_remoterecord_unique"
            ),
        ),
    ]
