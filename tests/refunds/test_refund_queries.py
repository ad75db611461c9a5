"""``refund_order``'s statements, counted exactly (its local cost: benchmarks/README.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.models import OrderClaim
from django_orders.services import refund_order

pytestmark = pytest.mark.django_db


def verbs(captured: CaptureQueriesContext) -> list[str]:
    """Each statement's verb; SQLite logs a bulk INSERT as ``N times: INSERT ...``."""
    return [
        query["sql"].split(": ", 1)[-1].split()[0].upper()
        if query["sql"].split()[1:2] == ["times:"]
        else query["sql"].split()[0].upper()
        for query in captured.captured_queries
    ]


def test_a_first_refund_of_an_order_costs_a_fixed_list_of_statements(
    live_orders, paid_order, lines, django_assert_num_queries
):
    line = [{"line_item_id": lines["shipping"], "amount": 990}]
    assert not OrderClaim.objects.exists()

    with CaptureQueriesContext(connection) as captured:
        refund_order(paid_order.pk, reference="one", reason="duplicate", lines=line)

    # The reference's request, the order in the mirror; the claim (one statement, the row
    # created on the way); the requests in flight; in one block: the request, the lookup's
    # order (read, stamped), the claim freed; after the send, in one block: the refund read
    # and inserted with its timeline entry, the request recorded with its entry. (The test's
    # own transaction turns each block's BEGIN/COMMIT into a SAVEPOINT/RELEASE, the last
    # block's into nothing: it is durable.)
    assert verbs(captured) == [
        "SELECT",
        "SELECT",
        "INSERT",
        "SELECT",
        "SAVEPOINT",
        "INSERT",
        "SAVEPOINT",
        "SELECT",
        "UPDATE",
        "RELEASE",
        "UPDATE",
        "RELEASE",
        "SAVEPOINT",
        "SELECT",
        "INSERT",
        "INSERT",
        "RELEASE",
        "UPDATE",
        "INSERT",
    ]
    assert OrderClaim.objects.get().claimed_until is None


def test_a_later_refund_of_the_order_adds_only_the_reads_of_its_embedded_refund(
    live_orders, paid_order, lines, django_assert_num_queries
):
    refund_order(
        paid_order.pk,
        reference="one",
        reason="duplicate",
        lines=[{"line_item_id": lines["shipping"], "amount": 990}],
    )
    line = [{"line_item_id": lines["product"], "amount": 100}]

    # The 19 of the first refund, plus the embedded refund's row (read, locked) in a block
    # of its own and the requests its reference could settle.
    with django_assert_num_queries(19 + 4):
        refund_order(paid_order.pk, reference="two", reason="duplicate", lines=line)
