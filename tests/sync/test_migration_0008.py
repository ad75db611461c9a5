"""Migration 0008 fills the checkout columns from the stored raw records, in bounded batches,
tolerating records that break the shapes."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("django_orders", "0006_order_checkout_fields")]
AFTER = [("django_orders", "0008_backfill_checkout_fields")]
backfill = importlib.import_module("django_orders.migrations.0008_backfill_checkout_fields")

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def full_record(order_id, customer_id):
    return {
        "id": order_id,
        "status": "paid",
        "number": "SHOP-7",
        "initiated_at": "2026-03-01T10:00:00Z",
        "paid_at": "2026-03-01T10:05:00+01:00",
        "expires_at": "2026-03-02T10:00:00Z",
        "customer": {"id": customer_id},
        "line_item_group": {"total": {"currency": "GHS", "value": 10000}},
        "invoice": {"format": {"web": {"url": "https://pay.example/or_1"}}},
    }


def add_order(model, order_id, customer, raw, **extra):
    return model.objects.create(
        id=order_id,
        status="paid",
        initiated_at=NOW,
        customer=customer,
        raw=raw,
        fingerprint=f"fp-{order_id}",
        first_seen_at=NOW,
        changed_at=NOW,
        **extra,
    )


def checkout(order):
    return (
        order.total,
        order.currency,
        order.number,
        order.payment_url,
        order.paid_at,
        order.canceled_at,
        order.expires_at,
    )


@pytest.mark.django_db(transaction=True)
def test_the_backfill_reads_raw_records_like_the_sync_and_survives_bad_ones():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        Customer = apps.get_model("django_orders", "Customer")
        Order = apps.get_model("django_orders", "Order")
        ama = Customer.objects.create(
            id="cu_1", raw={"id": "cu_1", "email_address": "ama@example.com"}, changed_at=NOW
        )
        odd = Customer.objects.create(id="cu_2", raw=["not", "an", "object"], changed_at=NOW)
        add_order(Order, "or_1", ama, full_record("or_1", "cu_1"))
        add_order(  # wrong types everywhere, an unreadable timestamp
            Order,
            "or_2",
            ama,
            {
                "number": 17,
                "paid_at": "yesterday",
                "canceled_at": "2026-03-01T11:00:00Z",
                "line_item_group": {"total": {"currency": "eur", "value": 9.99}},
                "invoice": {"format": {"web": {"url": "javascript:alert(1)"}}},
            },
        )
        add_order(Order, "or_3", odd, "a JSON string, not an object")
        add_order(Order, "or_4", odd, {})
        # A row that already has values the record lacks is not emptied by the backfill.
        add_order(Order, "or_5", odd, {}, number="KEPT")

        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        Order = apps.get_model("django_orders", "Order")
        Customer = apps.get_model("django_orders", "Customer")
        orders = {o.id: o for o in Order.objects.all()}
        assert checkout(orders["or_1"]) == (
            10000,
            "ghs",
            "SHOP-7",
            "https://pay.example/or_1",
            datetime(2026, 3, 1, 9, 5, tzinfo=UTC),
            None,
            datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
        )
        assert checkout(orders["or_2"]) == (
            None,
            "eur",
            "",
            "",
            None,
            datetime(2026, 3, 1, 11, 0, tzinfo=UTC),
            None,
        )
        assert (
            checkout(orders["or_3"])
            == checkout(orders["or_4"])
            == (None, "", "", "", None, None, None)
        )
        assert orders["or_5"].number == "KEPT"
        # The record did not change: neither its fingerprint nor changed_at.
        assert {(o.fingerprint, o.changed_at) for o in orders.values()} == {
            (f"fp-{pk}", NOW) for pk in orders
        }
        contacts = dict(Customer.objects.values_list("id", "email_address"))
        assert contacts == {"cu_1": "ama@example.com", "cu_2": ""}

        # Reversible: back to 0006 (a no-op for the data) and forward again.
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("django_orders"))


@pytest.mark.django_db
def test_batches_are_bounded_and_walk_by_primary_key(django_assert_num_queries):
    """Keyset pages of ``batch`` rows: 7 orders in batches of 3 are three reads and an empty
    fourth, and one write per batch that has something to write (not the empty one)."""
    from django_orders.models import Customer, Order

    customer = Customer.objects.create(id="cu_1", raw={})
    for n in range(7):
        raw = full_record(f"or_{n}", "cu_1") if n != 4 else {}
        add_order(Order, f"or_{n}", customer, raw)
    with django_assert_num_queries(4 + 3) as captured:
        written = backfill.backfill_model(
            Order, "default", backfill.order_values, backfill.ORDER_FIELDS, batch=3
        )
    assert written == 6
    reads = [q["sql"] for q in captured if q["sql"].lstrip().startswith("SELECT")]
    assert len(reads) == 4 and all("LIMIT 3" in sql for sql in reads)
    assert "OFFSET" not in " ".join(reads)
    assert set(Order.objects.filter(total=10000).values_list("pk", flat=True)) == {
        f"or_{n}" for n in range(7) if n != 4
    }
