"""The refunds that orders carry on ``/orders/page``: stored with their page by the refunds'
own rule, in a fixed number of statements, at no cost for a page without refunds; an order
whose refunds the mirror cannot store is set aside, the rest of its page written."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from django_orders.mirror.parsing import parse_order
from django_orders.mirror.resources import resource_for
from django_orders.mirror.resources.orders import SentOrder, complete, page_refunds
from django_orders.models import EventType, Order, OrderEvent, OutboxEvent, Refund, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.hostile import text_answer, use_hostile_server
from tests.fixtures.mirror import EVENT_WRITES, statement_shape, walked

pytestmark = pytest.mark.django_db
KEY = "sk_test_page_refunds_0123456789"


def refund(refund_id: str, order_id: str, status: str = "pending", **extra) -> dict:
    return {
        "id": refund_id,
        "order_id": order_id,
        "status": status,
        "total": {"currency": "ghs", "value": 500},
        "created_at": "2026-11-26T10:00:00Z",
        **extra,
    }


def order(number: int, refunds: list | None = None) -> dict:
    record = {
        "id": f"or_{number}",
        "status": "paid",
        "initiated_at": f"2026-01-{number:02d}T10:00:00Z",
        "customer": {"id": f"cu_{number}", "name": f"Customer {number}"},
    }
    if refunds is not None:
        record["refunds"] = refunds
    return record


@pytest.mark.parametrize("size", [1, 25])
def test_a_page_without_refunds_costs_what_its_orders_cost(size, django_assert_num_queries):
    orders = [parse_order(order(n)) for n in range(1, size + 1)]
    # As store_orders alone: read, customers, orders, their order.first_seen events.
    with django_assert_num_queries(5) as captured:
        resource_for("orders").store(orders, now=timezone.now())
    assert [statement_shape(q["sql"]) for q in captured.captured_queries] == [
        "SELECT",
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
    ]
    assert Order.objects.count() == size and not Refund.objects.exists()
    assert set(OutboxEvent.objects.values_list("type", flat=True)) == {EventType.ORDER_FIRST_SEEN}
    assert OutboxEvent.objects.count() == size


@pytest.mark.parametrize("refunds_per_order", [1, 4])
def test_a_pages_refunds_take_the_same_statements_however_many(
    refunds_per_order, django_assert_num_queries
):
    orders = [
        parse_order(order(n, [refund(f"rf_{n}_{k}", f"or_{n}") for k in range(refunds_per_order)]))
        for n in range(1, 6)
    ]
    # The orders' 5 (their order.first_seen events included); the refunds' locked read and
    # insert; the reference read is skipped (none carries one); their refund.created events
    # (the outbox's two statements, however many); SAVEPOINT and RELEASE around the refunds'
    # write; one INSERT of their timeline entries (a refund first seen is an entry, as it is
    # a signal).
    with django_assert_num_queries(12) as captured:
        resource_for("orders").store(orders, now=timezone.now())
    assert [statement_shape(q["sql"]) for q in captured.captured_queries] == [
        "SELECT",
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
        "SAVEPOINT",
        "SELECT",
        'INSERT INTO "django_orders_refund"',
        *EVENT_WRITES,
        'INSERT INTO "django_orders_orderevent"',
        "RELEASE",
    ]
    assert Refund.objects.count() == 5 * refunds_per_order
    assert OrderEvent.objects.filter(source="page").count() == 5 * refunds_per_order
    created = OutboxEvent.objects.filter(type=EventType.REFUND_CREATED)
    assert created.count() == 5 * refunds_per_order
    assert OutboxEvent.objects.filter(type=EventType.ORDER_FIRST_SEEN).count() == 5
    assert OutboxEvent.objects.count() == 5 + 5 * refunds_per_order
    assert not Refund.objects.filter(refreshed_at__isnull=True).exists()  # read with the page


def test_a_page_s_refunds_are_those_its_orders_carry_as_parsed_once():
    carried = [refund("rf_a", "or_2")]
    sent = walked([order(1), order(2, carried), {**order(3), "refunds": None}])
    assert [type(o) for o in sent] == [SentOrder] * 3
    orders, malformed = complete(list(sent))
    assert malformed == []
    assert page_refunds(orders) == carried


def test_an_order_whose_refunds_cannot_be_stored_is_set_aside_and_the_page_goes_on(
    settings, hostile_server
):
    use_hostile_server(settings, hostile_server, KEY, PAGE_SIZE=5, MAX_PAGE_NUMBER=None)
    records = [
        order(1, [refund("rf_ok", "or_1", "succeeded", succeeded_at="2026-11-26T11:00:00Z")]),
        order(2, [refund("rf_other", "or_9")]),  # a refund of another order
        order(3, [refund("rf_bad", "or_3", created_at="yesterday")]),
        order(4),
    ]
    page = {"page": {"number": 1, "size": 5, "orders": records}}  # short: the last
    hostile_server.script("/orders/page", text_answer(200, json.dumps(page)))

    run = sync_orders(refresh_limit=0)

    assert (run.outcome, run.seen, run.created, run.skipped) == (SyncRun.Outcome.SUCCEEDED, 4, 2, 2)
    assert sorted(Order.objects.values_list("id", flat=True)) == ["or_1", "or_4"]
    assert dict(Refund.objects.values_list("id", "status")) == {"rf_ok": "succeeded"}
    problems = run.problems.splitlines()
    assert problems[0].startswith("orders page 1, id or_2: RefundsNotStorable: order or_2 embeds")
    assert "'rf_other' of another order" in problems[0]
    assert problems[1].startswith("orders page 1, id or_3: RefundsNotStorable: refund rf_bad")
    assert "created_at" in problems[1]
