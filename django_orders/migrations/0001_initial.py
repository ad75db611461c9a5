"""The whole schema of django_orders, created in one step, in one transaction on both backends.

The tables as the models declare them, then two PostgreSQL-only steps the models cannot state:
the trigram index for the admin's name search (``create_name_search_index``) and no
``varchar_pattern_ops`` indexes on the mirror's keys (``drop_prefix_search_indexes``). The
tables are empty, so a plain ``CREATE INDEX`` takes no time and the migration stays atomic.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models
from django.db.models.functions import Upper

#: The GIN trigram index behind the admin's customer-name search (PostgreSQL).
NAME_SEARCH_INDEX = "orders_customer_name_trgm"

#: (model, field) pairs whose ``varchar_pattern_ops`` index PostgreSQL's schema editor adds
#: and nothing uses.
PREFIX_SEARCH_FIELDS = (
    ("Order", "id"),
    ("Order", "customer"),
    ("Customer", "id"),
    ("Customer", "name"),
)

# A single-column varchar_pattern_ops index on a column, found in the catalog by table, column
# and operator class rather than by the name Django hashed together.
_FIND_PREFIX_SEARCH_INDEXES = """
    SELECT i.relname
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class t ON t.oid = x.indrelid
    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
    JOIN pg_opclass o ON o.oid = x.indclass[0]
    WHERE t.relname = %s AND a.attname = %s AND x.indnatts = 1
      AND o.opcname = 'varchar_pattern_ops'
      AND t.relnamespace = ANY (current_schemas(false)::regnamespace[])
"""


def create_name_search_index(apps, schema_editor):
    """The admin searches customer names with Django's ``icontains``, which is
    ``UPPER(name::text) LIKE UPPER('%word%')``. A B-tree cannot serve a leading wildcard. A
    pg_trgm GIN index on the same expression can. With it, the search stays under a second at
    200,000 customers and a million orders (benchmarks/admin_benchmark.py). Order and customer
    ids are searched exactly, so the key indexes serve them.

    This is not in ``Customer.Meta.indexes`` because the index is PostgreSQL only: the models
    describe every backend.
    """
    if schema_editor.connection.vendor != "postgresql":
        return
    customer = apps.get_model("django_orders", "Customer")
    table = schema_editor.quote_name(customer._meta.db_table)
    # pg_trgm is a trusted extension (PostgreSQL 13+), so a database owner may create it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f"CREATE INDEX {schema_editor.quote_name(NAME_SEARCH_INDEX)} ON {table} "
        "USING gin ((UPPER(name::text)) gin_trgm_ops)"
    )


def drop_name_search_index(apps, schema_editor):
    """Reverse: drop the index. The extension stays, because other indexes or applications
    may use it."""
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(NAME_SEARCH_INDEX)}")


def drop_prefix_search_indexes(apps, schema_editor):
    """For every indexed ``CharField``, Django's PostgreSQL backend adds a second B-tree with
    ``varchar_pattern_ops``. That index serves only ``LIKE 'prefix%'``. Nothing here filters
    these columns by prefix. Ids are searched exactly (the key and foreign-key indexes serve
    that), and names by substring (the trigram index above). Yet the sync would update each of
    these indexes for every row it writes, on random string keys (benchmarks/README.md, sync).

    Those indexes are dropped for the four ``PREFIX_SEARCH_FIELDS``. The tables were just
    created and are empty, so this takes no time.

    A later ``AlterField`` on one of these columns may create the index again. Django drops
    such an index with ``IF EXISTS``, so its absence never breaks a later migration.
    """
    if schema_editor.connection.vendor != "postgresql":
        return
    # ``CreateModel`` leaves each table's indexes (these among them) and foreign keys in
    # ``schema_editor.deferred_sql``, which Django runs only as the migration ends. Run them now,
    # in the same transaction, so that the catalog holds the indexes looked for below.
    while schema_editor.deferred_sql:
        schema_editor.execute(schema_editor.deferred_sql.pop(0), None)
    for model_name, field_name in PREFIX_SEARCH_FIELDS:
        model = apps.get_model("django_orders", model_name)
        column = model._meta.get_field(field_name).column
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(_FIND_PREFIX_SEARCH_INDEXES, [model._meta.db_table, column])
            names = [row[0] for row in cursor.fetchall()]
        for name in names:
            schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Customer",
            fields=[
                (
                    "id",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="id"
                    ),
                ),
                ("guest", models.BooleanField(default=False, verbose_name="guest")),
                (
                    "name",
                    models.CharField(
                        blank=True, db_index=True, max_length=255, verbose_name="name"
                    ),
                ),
                (
                    "email_address",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        max_length=254,
                        verbose_name="email address",
                    ),
                ),
                (
                    "phone_number",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        max_length=64,
                        verbose_name="phone number",
                    ),
                ),
                ("raw", models.JSONField(default=dict, verbose_name="raw record")),
                (
                    "fingerprint",
                    models.CharField(
                        blank=True,
                        editable=False,
                        help_text=(
                            "Hash of the raw record; a sync rewrites the row only when it changes."
                        ),
                        max_length=64,
                        verbose_name="fingerprint",
                    ),
                ),
                (
                    "wire_fingerprint",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        editable=False,
                        help_text=(
                            "Hash of the record's bytes as the service last sent them, if known: "
                            "a sync that gets the same bytes again skips reading them."
                        ),
                        max_length=32,
                        verbose_name="wire fingerprint",
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
                "verbose_name": "customer",
                "verbose_name_plural": "customers",
                "ordering": ["name", "id"],
                "indexes": [
                    models.Index(Upper("email_address"), name="orders_customer_email_idx"),
                ],
            },
        ),
        migrations.CreateModel(
            name="Order",
            fields=[
                (
                    "id",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="id"
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("preparing", "Preparing"),
                            ("requires_payment", "Requires payment"),
                            ("paid", "Paid"),
                            ("completed", "Completed"),
                            ("canceled", "Canceled"),
                            ("expired", "Expired"),
                            ("unknown", "Unknown"),
                        ],
                        max_length=64,
                        verbose_name="status",
                    ),
                ),
                ("initiated_at", models.DateTimeField(verbose_name="initiated")),
                (
                    "completed_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="completed"),
                ),
                ("paid_at", models.DateTimeField(blank=True, null=True, verbose_name="paid")),
                (
                    "canceled_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="canceled"),
                ),
                (
                    "expires_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="expires"),
                ),
                (
                    "total",
                    models.BigIntegerField(
                        blank=True,
                        help_text="In the currency's minor unit.",
                        null=True,
                        verbose_name="total",
                    ),
                ),
                (
                    "currency",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        max_length=16,
                        verbose_name="currency",
                    ),
                ),
                (
                    "number",
                    models.CharField(
                        blank=True, db_default="", default="", max_length=255, verbose_name="number"
                    ),
                ),
                (
                    "payment_url",
                    models.URLField(
                        blank=True,
                        db_default="",
                        default="",
                        help_text="The hosted payment page.",
                        max_length=2048,
                        verbose_name="payment page",
                    ),
                ),
                (
                    "customer",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="orders",
                        to="django_orders.customer",
                        verbose_name="customer",
                    ),
                ),
                ("raw", models.JSONField(default=dict, verbose_name="raw record")),
                (
                    "fingerprint",
                    models.CharField(
                        blank=True, editable=False, max_length=64, verbose_name="fingerprint"
                    ),
                ),
                (
                    "wire_fingerprint",
                    models.CharField(
                        blank=True,
                        db_default="",
                        default="",
                        editable=False,
                        help_text=(
                            "Hash of the record's bytes as the service last sent them, if known: "
                            "a sync that gets the same bytes again skips reading them."
                        ),
                        max_length=32,
                        verbose_name="wire fingerprint",
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
                    models.DateTimeField(
                        default=django.utils.timezone.now,
                        help_text=(
                            "When the mirror last changed; an unchanged record is not rewritten."
                        ),
                        verbose_name="changed",
                    ),
                ),
                (
                    "refreshed_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="Last lookup by id.",
                        null=True,
                        verbose_name="refreshed",
                    ),
                ),
            ],
            options={
                "verbose_name": "order",
                "verbose_name_plural": "orders",
                "ordering": ["-initiated_at", "-id"],
                # Created by django.contrib.auth after migrate, from this state.
                "permissions": [("cancel_order", "Can cancel orders upstream")],
                "indexes": [
                    models.Index(fields=["-initiated_at", "-id"], name="orders_order_newest_idx"),
                    models.Index(
                        fields=["status", "-initiated_at"], name="orders_order_status_idx"
                    ),
                    models.Index(fields=["completed_at"], name="orders_order_completed_idx"),
                    models.Index(fields=["total"], name="orders_order_total_idx"),
                    models.Index(
                        fields=["currency", "-initiated_at"], name="orders_order_currency_idx"
                    ),
                    models.Index(
                        condition=models.Q(("number", ""), _negated=True),
                        fields=["number"],
                        name="orders_order_number_idx",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="RemoteRecord",
            fields=[
                # A surrogate key: remote ids are unique per resource only.
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
                "constraints": [
                    models.UniqueConstraint(
                        fields=("resource", "remote_id"), name="orders_remoterecord_unique"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="OrderRequest",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "idempotency_key",
                    models.CharField(max_length=255, unique=True, verbose_name="idempotency key"),
                ),
                (
                    "reference",
                    models.CharField(
                        blank=True,
                        help_text=(
                            "The shop's own cart or checkout id; one upstream order per reference."
                        ),
                        max_length=255,
                        null=True,
                        unique=True,
                        verbose_name="reference",
                    ),
                ),
                (
                    "payload",
                    models.TextField(help_text="The exact JSON body sent.", verbose_name="payload"),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("needs_review", "Needs review"),
                        ],
                        default="pending",
                        max_length=16,
                        verbose_name="state",
                    ),
                ),
                ("attempts", models.PositiveIntegerField(default=0, verbose_name="attempts")),
                (
                    "last_status_code",
                    models.PositiveSmallIntegerField(null=True, verbose_name="last HTTP status"),
                ),
                (
                    "last_error_code",
                    models.CharField(blank=True, max_length=128, verbose_name="last error code"),
                ),
                ("last_error", models.TextField(blank=True, verbose_name="last error")),
                (
                    "last_error_body",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text=(
                            "The service's error object of the last attempt, every field as "
                            "sent (type, code, message, detail, url, fix_code, cause...); empty "
                            "when it sent none."
                        ),
                        verbose_name="last error body",
                    ),
                ),
                (
                    "last_request_id",
                    models.CharField(
                        blank=True, max_length=128, verbose_name="last upstream request id"
                    ),
                ),
                (
                    "order",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="requests",
                        to="django_orders.order",
                        verbose_name="order",
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="created"),
                ),
                (
                    "last_attempt_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="last sent"),
                ),
                (
                    "first_sent_at",
                    models.DateTimeField(
                        blank=True,
                        help_text=(
                            "The first attempt that may have reached the service; KEY_LIFETIME "
                            "counts from it. Empty while no attempt can have reached it, so a "
                            "resend is always safe."
                        ),
                        null=True,
                        verbose_name="first sent",
                    ),
                ),
                (
                    "next_attempt_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="next attempt"),
                ),
                (
                    "claimed_until",
                    models.DateTimeField(
                        blank=True,
                        help_text=(
                            "A worker sending this request holds it until then; no other sends it."
                        ),
                        null=True,
                        verbose_name="claimed until",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True, verbose_name="updated")),
            ],
            options={
                "verbose_name": "order request",
                "verbose_name_plural": "order requests",
                "ordering": ["-created_at", "-id"],
                "indexes": [
                    models.Index(
                        fields=["state", "next_attempt_at"], name="orders_request_due_idx"
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="SyncRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "resource",
                    models.CharField(default="orders", max_length=64, verbose_name="resource"),
                ),
                (
                    "started_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="started"),
                ),
                (
                    "finished_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="finished"),
                ),
                (
                    "page_size",
                    models.PositiveSmallIntegerField(default=0, verbose_name="page size"),
                ),
                ("pages", models.PositiveIntegerField(default=0, verbose_name="pages")),
                ("seen", models.PositiveIntegerField(default=0, verbose_name="records seen")),
                ("created", models.PositiveIntegerField(default=0, verbose_name="created")),
                ("updated", models.PositiveIntegerField(default=0, verbose_name="updated")),
                ("unchanged", models.PositiveIntegerField(default=0, verbose_name="unchanged")),
                (
                    "refreshed",
                    models.PositiveIntegerField(default=0, verbose_name="refreshed by lookup"),
                ),
                (
                    "refresh_waiting",
                    models.PositiveIntegerField(default=0, verbose_name="waiting for refresh"),
                ),
                (
                    "skipped",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Records the database refused; the walk went on without them.",
                        verbose_name="set aside",
                    ),
                ),
                (
                    "problems",
                    models.TextField(
                        blank=True,
                        help_text="Why each record set aside was refused.",
                        verbose_name="problems",
                    ),
                ),
                (
                    "end_reason",
                    models.CharField(blank=True, max_length=32, verbose_name="walk ended by"),
                ),
                (
                    "outcome",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                        ],
                        default="running",
                        max_length=16,
                        verbose_name="outcome",
                    ),
                ),
                ("error", models.TextField(blank=True, verbose_name="error")),
                ("host", models.CharField(blank=True, max_length=255, verbose_name="host")),
            ],
            options={
                "verbose_name": "sync run",
                "verbose_name_plural": "sync runs",
                "ordering": ["-started_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="SyncLease",
            fields=[
                (
                    "resource",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="resource"
                    ),
                ),
                ("owner", models.CharField(blank=True, max_length=255, verbose_name="owner")),
                (
                    "expires_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="expires"),
                ),
            ],
            options={
                "verbose_name": "sync lease",
                "verbose_name_plural": "sync leases",
            },
        ),
        # PostgreSQL only; each function returns at once on other backends.
        migrations.RunPython(create_name_search_index, drop_name_search_index),
        # The reverse does nothing on purpose: it runs only when the whole migration is
        # unapplied, just before the tables (and any index on them) are dropped.
        migrations.RunPython(drop_prefix_search_indexes, migrations.RunPython.noop),
    ]
