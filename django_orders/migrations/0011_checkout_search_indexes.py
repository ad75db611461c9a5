"""Indexes for the admin's checkout columns (PostgreSQL: built CONCURRENTLY).

- ``orders_order_number_idx``: the shop's order number, for the exact search by number; partial
  (``number <> ''``), so orders without a number cost the sync no index entry.
- ``orders_customer_email_idx``: ``UPPER(email_address)``, the expression of Django's
  ``iexact``, for the exact, case-insensitive search by e-mail.
- ``orders_order_total_idx``: the total, so sorting the orders list by it reads the first page
  from the index (with PostgreSQL's incremental sort for the tie-breakers) instead of sorting a
  million rows.
- ``orders_order_currency_idx``: (currency, initiated_at DESC), like the status index: the
  currency filter's page, capped count and date-hierarchy probes are index range scans.
  Without it a probe for a year with few orders in that currency scanned the table (280 ms at
  a million orders, benchmarks/README.md).

After 0008 on purpose: the backfill writes the columns first, then each index is built once
instead of being updated row by row. On PostgreSQL each is built CONCURRENTLY (so this
migration is not atomic): a live sync keeps writing while they build. The model's
``Meta.indexes`` state them, so Django's migration state matches (``makemigrations --check``).
"""

from django.db import migrations, models
from django.db.models import Q
from django.db.models.functions import Upper

INDEXES = (
    ("Customer", models.Index(Upper("email_address"), name="orders_customer_email_idx")),
    ("Order", models.Index(fields=["total"], name="orders_order_total_idx")),
    (
        "Order",
        models.Index(fields=["currency", "-initiated_at"], name="orders_order_currency_idx"),
    ),
    (
        "Order",
        models.Index(fields=["number"], name="orders_order_number_idx", condition=~Q(number="")),
    ),
)


def _options(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def create_indexes(apps, schema_editor):
    for model_name, index in INDEXES:
        model = apps.get_model("django_orders", model_name)
        schema_editor.add_index(model, index, **_options(schema_editor))


def drop_indexes(apps, schema_editor):
    for model_name, index in INDEXES:
        model = apps.get_model("django_orders", model_name)
        schema_editor.remove_index(model, index, **_options(schema_editor))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_orders", "0008_backfill_checkout_fields"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(model_name=model_name.lower(), index=index)
                for model_name, index in INDEXES
            ],
            database_operations=[
                migrations.RunPython(create_indexes, drop_indexes, elidable=False),
            ],
        ),
    ]
