"""Trigram index for the admin's customer-name search (PostgreSQL only; a no-op elsewhere).

The admin searches names with ``UPPER(name::text) LIKE UPPER('%word%')`` (Django's
``icontains``). A B-tree cannot serve a pattern with a leading wildcard; a pg_trgm GIN index on
the same expression can, which keeps the search under a second at 200,000 customers and a
million orders (benchmarks/admin_benchmark.py). Order and customer ids are searched exactly, so
their primary-key and foreign-key indexes already serve them.

The index is built CONCURRENTLY (so the migration is not atomic): on a live database it does
not block the sync's writes while it builds.
"""

from django.db import migrations

INDEX_NAME = "orders_customer_name_trgm"


def create_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("django_orders", "Customer")._meta.db_table)
    # pg_trgm is a trusted extension (PostgreSQL 13+): a database owner may create it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON {table} "
        "USING gin ((UPPER(name::text)) gin_trgm_ops)"
    )


def drop_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # The extension stays: other indexes or applications may use it.
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX_NAME}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_orders", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_search_indexes, drop_search_indexes, elidable=False),
    ]
