"""The one initial migration: it takes an empty database from nothing to the models' schema and
back, on SQLite and on PostgreSQL. On PostgreSQL it also sets up what the models cannot state:
the pg_trgm index for the name search, and no prefix-search ("_like") indexes on the mirror's
keys and names.

Runs ``migrate`` itself (``transaction=True``: the test database starts empty and is migrated
back to the latest state at the end, whatever happens).
"""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from django_orders.models import (
    Customer,
    DocumentDelivery,
    Order,
    OrderClaim,
    OrderRequest,
    Refund,
    RefundApiKey,
    RemoteRecord,
    SyncLease,
    SyncRun,
)

APP = "django_orders"
TABLES = {
    model._meta.db_table
    for model in (
        Customer,
        DocumentDelivery,
        Order,
        OrderClaim,
        OrderRequest,
        Refund,
        RefundApiKey,
        RemoteRecord,
        SyncLease,
        SyncRun,
    )
}
#: Indexes named in the models' Meta (those of development's 0001 and 0011), on every backend.
MODEL_INDEXES = {
    "orders_customer_email_idx",
    "orders_order_newest_idx",
    "orders_order_status_idx",
    "orders_order_completed_idx",
    "orders_order_total_idx",
    "orders_order_currency_idx",
    "orders_order_number_idx",
    "orders_request_due_idx",
}
NAME_SEARCH_INDEX = "orders_customer_name_trgm"
#: (table, column) that must have no varchar_pattern_ops index (development's 0003).
NO_PREFIX_SEARCH = {
    ("django_orders_order", "id"),
    ("django_orders_order", "customer_id"),
    ("django_orders_customer", "id"),
    ("django_orders_customer", "name"),
}
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")


def migrate(target: str | None = None) -> str:
    out = io.StringIO()
    args = [APP, target] if target else []
    call_command("migrate", *args, interactive=False, verbosity=1, stdout=out)
    return out.getvalue()


def app_tables() -> set[str]:
    with connection.cursor() as cursor:
        return {name for name in connection.introspection.table_names(cursor) if name in TABLES}


def index_names(table: str) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {name for name, info in constraints.items() if info["index"]}


def pg_indexes() -> dict[str, tuple[str, str]]:
    """Index name -> (table, definition) for the app's tables (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, tablename, indexdef FROM pg_indexes "
            "WHERE schemaname = ANY (current_schemas(false)) "
            "AND tablename LIKE 'django\\_orders\\_%%'"
        )
        return {name: (table, definition) for name, table, definition in cursor.fetchall()}


def prefix_search_indexes() -> set[tuple[str, str]]:
    """(table, column) of every single-column varchar_pattern_ops index on the app's tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.relname, a.attname
            FROM pg_index x
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
            JOIN pg_opclass o ON o.oid = x.indclass[0]
            WHERE o.opcname = 'varchar_pattern_ops' AND t.relname LIKE 'django\\_orders\\_%%'
            """
        )
        return set(cursor.fetchall())


@pytest.fixture
def back_to_latest():
    """Whatever the test leaves, the database ends migrated to the latest state."""
    yield
    migrate()


def test_the_migrations_are_one_line():
    """Squashed before the first release: a new database runs the initial migration and the
    ones added since, in one line (no branches to merge)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    names = [
        "0001_initial",
        "0002_order_observed_at",
        "0003_refunds",
        "0004_refund_order_permission",
        "0005_payment_watch",
        "0006_refund_api_keys",
        "0007_change_feed",
        "0008_order_events",
        "0009_refund_sync",
        "0010_fulfilment",
        "0011_record_search_updated_at",
        "0012_export_permissions",
        "0013_webhooks",
        "0014_reconciliation",
        "0015_money_records_from_raw",
        "0016_known_customers",
        "0017_money_export_permissions",
        "0018_money_sync",
        "0019_payment_watch_sweep",
        "0020_payment_watch_feed",
        "0021_rate_hold",
    ]
    assert sorted(name for app, name in loader.disk_migrations if app == APP) == names
    assert loader.graph.leaf_nodes(APP) == [(APP, names[-1])]


@pytest.mark.django_db
def test_the_models_need_no_new_migration():
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # SystemExit(1) if not
    assert out.getvalue().strip() == "No changes detected"


@pytest.mark.django_db(transaction=True)
def test_an_empty_database_migrates_from_zero_to_latest_and_back(back_to_latest):
    unapplied = migrate("zero")
    assert "Unapplying django_orders.0001_initial... OK" in unapplied
    assert app_tables() == set()

    applied = migrate()
    assert "Applying django_orders.0001_initial... OK" in applied
    assert app_tables() == TABLES
    indexes = index_names("django_orders_order") | index_names("django_orders_customer")
    indexes |= index_names("django_orders_orderrequest")
    assert indexes >= MODEL_INDEXES
    # RemoteRecord: a surrogate key and one row per (resource, remote id).
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "django_orders_remoterecord")
    assert constraints["orders_remoterecord_unique"]["unique"]
    assert constraints["orders_remoterecord_unique"]["columns"] == ["resource", "remote_id"]
    primary = [info["columns"] for info in constraints.values() if info["primary_key"]]
    assert primary == [["id"]]
    # The admin's Cancel order action has its own permission (django.contrib.auth creates it
    # after migrate, from the migration's state).
    assert Permission.objects.filter(
        content_type__app_label=APP, codename="cancel_order", name="Can cancel orders upstream"
    ).exists()

    assert "Unapplying django_orders.0001_initial... OK" in migrate("zero")
    assert app_tables() == set()


@pytest.mark.django_db(transaction=True)
def test_the_name_search_index_is_postgresql_only(back_to_latest):
    migrate("zero")
    migrate()
    names = index_names("django_orders_customer")
    if connection.vendor == "postgresql":
        assert NAME_SEARCH_INDEX in names
    else:
        assert NAME_SEARCH_INDEX not in names


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_postgresql_gets_the_trigram_index_and_no_prefix_search_indexes(back_to_latest):
    migrate("zero")
    assert not {name for name in pg_indexes() if name.startswith("orders_")}
    migrate()

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        assert cursor.fetchall() == [(1,)]
    indexes = pg_indexes()
    table, definition = indexes[NAME_SEARCH_INDEX]
    assert table == "django_orders_customer"
    # The expression of Django's icontains, or the planner would not use it (test_scale.py).
    assert "USING gin (upper((name)::text)" in definition
    assert "gin_trgm_ops" in definition
    assert set(indexes) >= MODEL_INDEXES
    assert "WHERE (NOT ((number)::text = ''::text))" in indexes["orders_order_number_idx"][1]
    assert "upper((email_address)::text)" in indexes["orders_customer_email_idx"][1]

    # No prefix-search index where nothing searches by prefix; the B-trees that serve the exact
    # searches are still there.
    prefix = prefix_search_indexes()
    assert not prefix & NO_PREFIX_SEARCH
    assert {"django_orders_order_pkey", "django_orders_customer_pkey"} <= set(indexes)
    exact = [
        definition
        for name, (table, definition) in indexes.items()
        if table == "django_orders_order" and definition.endswith("btree (customer_id)")
    ]
    assert len(exact) == 1
    assert any(definition.endswith("btree (name)") for _t, definition in indexes.values())
    # The other unique keys keep theirs: only the four columns above were chosen.
    assert ("django_orders_orderrequest", "idempotency_key") in prefix

    # Back to zero: the index goes with its table; the extension stays for other users.
    migrate("zero")
    assert NAME_SEARCH_INDEX not in pg_indexes()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        assert cursor.fetchall() == [(1,)]


def test_the_migration_runs_in_one_transaction():
    """No CONCURRENTLY on an empty table: the migration is atomic again."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    migration = loader.get_migration(APP, "0001_initial")
    assert migration.atomic is True
    assert migration.initial is True
    assert not migration.replaces


@pytest.mark.django_db(transaction=True)
def test_0003_keeps_existing_requests_as_order_creates_with_their_references(back_to_latest):
    migrate("0002_order_observed_at")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_orders_orderrequest (idempotency_key, reference, payload, state,"
            " attempts, last_error_code, last_error, last_error_body, last_request_id,"
            " created_at, updated_at) VALUES ('k-1', 'cart-1', '{}', 'pending', 0, '', '', '{}',"
            " '', %s, %s)",
            [timezone.now(), timezone.now()],
        )
    migrate()
    request = OrderRequest.objects.get(idempotency_key="k-1")
    assert (request.kind, request.reference, request.arguments) == ("order_create", "cart-1", {})
    # Unique per kind: the same reference for a refund is another request.
    OrderRequest.objects.create(idempotency_key="k-2", reference="cart-1", kind="refund_create")
    with pytest.raises(IntegrityError), transaction.atomic():
        OrderRequest.objects.create(idempotency_key="k-3", reference="cart-1")


@pytest.mark.django_db(transaction=True)
def test_0015_copies_raw_payouts_and_transactions_and_keeps_the_raw_rows(back_to_latest):
    from django_orders.models import BalanceTransaction, Payout, PayoutItem
    from tests.reconciliation.test_money_records import PAYOUT, TRANSACTION

    migrate("0011_record_search_updated_at")
    seen = timezone.now()
    rows = [
        ("payouts", "po_1", PAYOUT),
        ("balance_transactions", "txn_a", TRANSACTION),
        ("balance_transactions", "txn_bad", {**TRANSACTION, "id": "txn_bad", "amount": "5"}),
        ("customers", "cu_1", {"id": "cu_1"}),
    ]
    with connection.cursor() as cursor:
        for resource, remote_id, raw in rows:
            cursor.execute(
                "INSERT INTO django_orders_remoterecord (resource, remote_id, raw, fingerprint,"
                " first_seen_at, changed_at) VALUES (%s, %s, %s, '', %s, %s)",
                [resource, remote_id, json.dumps(raw), seen, seen],
            )
    migrate()
    payout = Payout.objects.get()
    assert (payout.id, payout.status, payout.amount, payout.failure_reason) == (
        "po_1",
        "failed",
        4000,
        "delivery_failed",
    )
    assert payout.raw == PAYOUT and payout.first_seen_at == seen
    assert list(PayoutItem.objects.values_list("transaction_id", "allocated_amount")) == [
        ("txn_a", 5000),
        ("txn_b", 1000),
    ]
    # The malformed transaction is skipped, left raw; every raw row is still there.
    transaction_ = BalanceTransaction.objects.get()
    assert (transaction_.id, transaction_.order_id, transaction_.pending_payout_amount) == (
        "txn_a",
        "or_1",
        2000,
    )
    assert RemoteRecord.objects.count() == 4
