"""Drop the ``varchar_pattern_ops`` ("_like") indexes Django adds on PostgreSQL (a no-op elsewhere).

For every indexed ``CharField`` Django's PostgreSQL backend creates a second B-tree with
``varchar_pattern_ops``, which serves only ``LIKE 'prefix%'``. Nothing here filters ids or
names by prefix: the admin searches ids exactly (the primary-key and foreign-key indexes serve
that) and names by substring through the trigram index of 0002. Yet the sync pays for each of
these indexes on every row it writes, on random string keys (benchmarks/README.md, sync).

Dropped: the ``_like`` indexes on order.id, order.customer_id, customer.id and customer.name.
Found by table, column and operator class in the catalog, not by a guessed name. Reversible:
the reverse recreates them the way Django names and builds them. A later ``AlterField`` on one
of these columns may create its ``_like`` index again; Django drops it with ``IF EXISTS``, so
the absence never breaks a migration. Both directions run CONCURRENTLY (not atomic), so a live
sync is not blocked.
"""

from django.db import migrations

#: (model, field) pairs whose prefix-search indexes go.
TARGETS = (("Order", "id"), ("Order", "customer"), ("Customer", "id"), ("Customer", "name"))

_FIND = """
    SELECT i.relname
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
    JOIN pg_opclass o ON o.oid = x.indclass[0]
    WHERE t.relname = %s AND a.attname = %s AND x.indnatts = 1
      AND o.opcname = 'varchar_pattern_ops' AND i.relname LIKE '%%\\_like'
      AND t.relnamespace = ANY (current_schemas(false)::regnamespace[])
"""


def _fields(apps):
    for model_name, field_name in TARGETS:
        model = apps.get_model("django_orders", model_name)
        yield model, model._meta.get_field(field_name)


def drop_like_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model, field in _fields(apps):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(_FIND, [model._meta.db_table, field.column])
            names = [row[0] for row in cursor.fetchall()]
        for name in names:
            schema_editor.execute(
                f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}"
            )


def create_like_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model, field in _fields(apps):
        # The statement Django itself runs when it creates the field (same name, same opclass).
        statement = schema_editor._create_like_index_sql(model, field)
        if statement is not None:
            create = "CREATE INDEX CONCURRENTLY IF NOT EXISTS"
            schema_editor.execute(str(statement).replace("CREATE INDEX", create, 1))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_orders", "0002_search_indexes"),
    ]

    operations = [
        migrations.RunPython(drop_like_indexes, create_like_indexes, elidable=False),
    ]
