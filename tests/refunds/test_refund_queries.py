"""``refund_order``'s statements, counted exactly (its local cost: benchmarks/README.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.models import EventType, OrderClaim, OutboxEvent, Refund
from django_orders.services import refund_order
from tests.fixtures.mirror import EVENT_WRITES, statement_shape

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
    # order (read, stamped) and the payment transaction it embeds (read: stored already by
    # the order's confirmation, unchanged), the claim freed; after the send, in one block:
    # the refund read and inserted, its refund.created event with its deliveries (the outbox's two
    # statements), its timeline entry; the request recorded with its entry. (The test's
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
        "SELECT",
        "RELEASE",
        "UPDATE",
        "RELEASE",
        "SAVEPOINT",
        "SELECT",
        "INSERT",
        "INSERT",
        "INSERT",
        "INSERT",
        "RELEASE",
        "UPDATE",
        "INSERT",
    ]
    assert [statement_shape(q["sql"]) for q in captured.captured_queries[15:19]] == [
        'INSERT INTO "django_orders_refund"',
        *EVENT_WRITES,
        'INSERT INTO "django_orders_orderevent"',
    ]
    (event,) = OutboxEvent.objects.filter(type=EventType.REFUND_CREATED)
    assert event.refund_id == Refund.objects.get().pk
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

    # The 22 of the first refund, one write more (the payment transaction the lookup embeds
    # changed: the first refund's allocation), plus the embedded refund's row (read, locked)
    # in a block of its own and the requests its reference could settle. The embedded refund is as
    # stored: no event of it, only the new refund's refund.created.
    with django_assert_num_queries(22 + 1 + 4):
        refund_order(paid_order.pk, reference="two", reason="duplicate", lines=line)
    created = OutboxEvent.objects.filter(type=EventType.REFUND_CREATED)
    assert sorted(created.values_list("refund_id", flat=True)) == sorted(
        Refund.objects.values_list("pk", flat=True)
    )
    assert created.count() == 2
