"""Writing events: two statements in the change's transaction whatever the fan-out, bodies
equal to the REST API's serializers, the runner's command and task, and two runners at once
(PostgreSQL) never sending one delivery twice in parallel."""

from __future__ import annotations

import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from django_orders.mirror import events
from django_orders.mirror.events import order_snapshot, refund_snapshot
from django_orders.models import EventDelivery, Order, OutboxEvent, Refund
from django_orders.rest.refund_views import RefundSerializer
from django_orders.rest.serializers import OrderSerializer
from django_orders.services import (
    create_webhook_endpoint,
    deliver_order_events,
    refund_order,
    sync_orders,
)
from tests.fixtures.payloads import new_reference
from tests.refunds.conftest import line_ids, place_paid_order

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_status_change_adds_two_statements_whatever_the_number_of_endpoints(
    live_orders, webhook_receiver, fast_webhooks, django_assert_num_queries, settings
):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "EVENT_RECEIVERS": ["json.dumps"]}
    for _ in range(3):
        create_webhook_endpoint(webhook_receiver.url)
    [pk] = live_orders.insert_orders(1)
    sync_orders()
    order = Order.objects.select_related("customer").get(pk=pk)
    order.status = "paid"
    now = timezone.now()
    entry = events.order_status_change(order, "requires_payment", origin=events.LOOKUP, at=now)
    # the timeline entry, the event, its deliveries
    with transaction.atomic(), django_assert_num_queries(3):
        events.record([entry])
    assert EventDelivery.objects.filter(event__type="order.paid").count() == 4


def test_the_snapshots_are_what_the_rest_serializers_give(live_orders, fresh_client):
    order = place_paid_order(live_orders)
    refund_order(
        order.pk,
        reference=new_reference(),
        reason="duplicate",
        lines=[{"line_item_id": line_ids(order)["shipping"], "amount": 100}],
    )
    stored = Order.objects.select_related("customer").get(pk=order.pk)
    assert order_snapshot(stored) == OrderSerializer(stored).data
    bare = Order.objects.get(pk=order.pk)  # the customer from the order's own record
    assert order_snapshot(bare) == OrderSerializer(stored).data
    refund = Refund.objects.get()
    assert refund_snapshot(refund) == RefundSerializer(refund).data


def test_the_command_delivers_what_is_due_and_says_so(subscriber):
    subscriber._sandbox.insert_orders(2)
    sync_orders()
    out = StringIO()
    call_command("deliver_order_events", "--once", stdout=out)
    assert "Claimed 2: 2 delivered, 0 to retry, 0 dead" in out.getvalue()
    assert len(subscriber.accepted) == 2


def test_the_task_delivers_within_its_time(subscriber):
    from django_orders.tasks import deliver_events_task

    subscriber._sandbox.insert_orders(1)
    sync_orders()
    result = deliver_events_task.call(max_seconds=0.5, idle=0.05)
    assert result["delivered"] == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="real row locks: PostgreSQL")
def test_two_runners_at_once_never_send_one_delivery_twice_in_parallel(subscriber):
    subscriber.fail_rate(0.2, seed=3)
    ids = subscriber._sandbox.insert_orders(30)
    sync_orders()
    for pk in ids:
        subscriber._sandbox.set_order_status(pk, "paid")
    sync_orders()
    in_flight: dict[str, int] = {}
    overlaps: list[str] = []
    lock = threading.Lock()
    from django_orders.webhooks import runner

    real_post = runner._post

    def guarded(delivery, targets):
        key = delivery.event.webhook_id
        with lock:
            if in_flight.get(key):
                overlaps.append(key)
            in_flight[key] = in_flight.get(key, 0) + 1
        try:
            return real_post(delivery, targets)
        finally:
            with lock:
                in_flight[key] -= 1

    runner._post = guarded
    try:

        def work():
            try:
                drain(rounds=300)
            finally:
                connection.close()

        threads = [threading.Thread(target=work) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        runner._post = real_post
    drain()
    assert overlaps == []
    assert EventDelivery.objects.exclude(state="delivered").count() == 0
    seen: dict[str, list[str]] = {}
    for hook in subscriber.accepted:
        seen.setdefault(hook.payload["data"]["id"], []).append(hook.payload["type"])
    assert seen == {pk: ["order.first_seen", "order.paid"] for pk in ids}
    assert OutboxEvent.objects.count() == 60


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's locking")
def test_on_sqlite_the_runner_claims_while_the_shop_writes_events(subscriber):
    """A claim that read and then wrote in one transaction failed at once ("database is
    locked") whenever another connection wrote in between; the runner died with it."""
    from django_orders.services import send_test_event

    written: list[str] = []
    errors: list[BaseException] = []

    def shop():
        try:
            for _ in range(150):
                written.append(send_test_event(subscriber.endpoint))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=shop)
    writer.start()
    while writer.is_alive():
        deliver_order_events(once=True, batch=1)
    writer.join()
    drain()
    assert errors == []
    assert sorted(hook.webhook_id for hook in subscriber.accepted) == sorted(written)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query planner")
def test_on_sqlite_the_claim_reads_the_chains_by_their_index(webhook_receiver):
    """The claim's "nothing older of this order undelivered" reads the partial chain index:
    with its state condition as bound parameters SQLite could not use it and scanned every
    open delivery per row (about 1 s a batch at 2,000 due, the runner at 0.46x a bare loop)."""
    from django_orders.webhooks import runner

    create_webhook_endpoint(webhook_receiver.url)
    due = runner._claimable("default", timezone.now()).order_by("event_id", "id")
    sql, params = due.values("pk")[:100].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [row[-1] for row in cursor.fetchall()]
    assert any("USING INDEX orders_delivery_chain_idx" in step for step in plan), plan
