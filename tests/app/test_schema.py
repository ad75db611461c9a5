"""Behaviour of the final schema that development's migrations 0005 (surrogate key of remote
records) and 0006/0008 (the checkout columns) introduced, kept now that those migrations are
squashed into 0001_initial."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, transaction

from django_orders.models import Customer, Order, RemoteRecord
from tests.fixtures.mirror import checkout_values

NOW = datetime(2026, 3, 1, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def test_remote_records_are_keyed_per_resource():
    """Remote ids are unique per resource only: the same id under two resources is two rows,
    each with a key of its own; the same (resource, remote id) twice is refused."""
    payout = RemoteRecord.objects.create(resource="payouts", remote_id="po_1", raw={"id": "po_1"})
    other = RemoteRecord.objects.create(
        resource="balance_transactions", remote_id="po_1", raw={"id": "po_1"}
    )
    assert isinstance(payout.pk, int) and isinstance(other.pk, int)
    assert payout.pk != other.pk
    assert RemoteRecord.objects.filter(remote_id="po_1").count() == 2
    assert payout.fingerprint == ""
    with pytest.raises(IntegrityError), transaction.atomic():
        RemoteRecord.objects.create(resource="payouts", remote_id="po_1", raw={})
    assert RemoteRecord.objects.count() == 2


def test_checkout_columns_default_to_unknown_in_the_database():
    """A row written without the checkout columns (by SQL, or by code older than they are)
    reads as "unknown": empty text from the columns' database defaults, NULL total and
    timestamps, not an error."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(Customer._meta.db_table)} "  # noqa: S608
            "(id, guest, name, raw, fingerprint, first_seen_at, changed_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            ["cu_1", False, "Ama", "{}", "", NOW, NOW],
        )
        cursor.execute(
            f"INSERT INTO {quote(Order._meta.db_table)} "  # noqa: S608
            "(id, status, initiated_at, raw, fingerprint, first_seen_at, changed_at, customer_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            ["or_1", "paid", NOW, "{}", "fp", NOW, NOW, "cu_1"],
        )
    order = Order.objects.select_related("customer").get(pk="or_1")
    assert checkout_values(order) == (None, "", "", "", None, None, None, "", "")
