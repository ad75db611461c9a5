"""Several processes at once on PostgreSQL: one request row and one upstream order per reference,
and resume workers that never send the same request together."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from django_orders.exceptions import OrderRequestPending
from django_orders.models import Order, OrderRequest
from django_orders.services import create_order, resume_order_requests
from tests.creation.conftest import upstream_orders_by_key

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]


def run_in_threads(count, target):
    """Run ``target(index)`` in ``count`` threads released together; each has its own
    database connection (closed at the end). Returns the results or exceptions by index."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count

    def work(index):
        try:
            barrier.wait()
            results[index] = target(index)
        except BaseException as exc:  # reported to the test
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_same_reference_from_several_processes_gives_one_request_and_one_order(
    live_orders, received, order_input
):
    # The first send is held on the server for a moment, so the others really overlap it.
    live_orders.add_fault("slow", "/orders/create", seconds=0.5)
    results = run_in_threads(6, lambda i: create_order(**order_input, reference="cart-race"))

    orders = [r for r in results if isinstance(r, Order)]
    pending = [r for r in results if isinstance(r, OrderRequestPending)]
    assert len(orders) + len(pending) == 6, results
    assert len(orders) >= 1
    request = OrderRequest.objects.get()
    assert request.state == OrderRequest.State.SUCCEEDED
    assert {o.pk for o in orders} == {request.order_id}
    assert upstream_orders_by_key(live_orders) == {request.idempotency_key: [request.order_id]}
    assert len(received.creates()) == 1  # the losers did not send at all


def test_two_resume_workers_never_send_the_same_request_twice(live_orders, received, order_input):
    live_orders.add_fault("error_before_write", "/orders/create", times=10 * 4, status=503)
    for index in range(10):
        with pytest.raises(OrderRequestPending):
            create_order(**order_input, reference=f"cart-{index}")
    assert len(received.creates()) == 40
    live_orders.add_fault("slow", "/orders/create", times=10, seconds=0.1)
    later = timezone.now() + timedelta(hours=1)

    summaries = run_in_threads(2, lambda i: resume_order_requests(now=later))

    assert all(not isinstance(s, BaseException) for s in summaries), summaries
    assert sum(s.resent for s in summaries) == 10
    assert sum(s.succeeded for s in summaries) == 10
    resends = received.creates()[40:]
    assert len(resends) == 10  # each request sent once by exactly one worker
    assert len(set(resends)) == 10
    keys = upstream_orders_by_key(live_orders)
    linked = dict(OrderRequest.objects.values_list("idempotency_key", "order_id"))
    assert keys == {key: [order_id] for key, order_id in linked.items()}
