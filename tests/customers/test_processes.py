"""``ensure_customer`` from several processes: three at once give one provider customer (the
others are told the reference is being sent), and a process killed (SIGKILL) after the
provider made the customer leaves a request that is resumed with its key into that customer."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.exceptions import OrderRequestPending
from django_orders.models import Customer, OrderRequest
from django_orders.services import ensure_customer, resume_order_requests
from tests.conftest import REPO_ROOT, child_env
from tests.customers.conftest import AMA
from tests.fixtures import crash

pytestmark = pytest.mark.django_db(transaction=True)
Kind, State = OrderRequest.Kind, OrderRequest.State


def upstream_customers(server) -> list[str]:
    return [row[0] for row in server.store.read("SELECT id FROM customers")]


@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL")
def test_three_processes_at_once_make_one_customer(live_orders, received):
    # The first create is held on the server for a moment, so the others really overlap it.
    live_orders.add_fault("slow", "/customers/create", seconds=1.0)
    env = child_env(ORDERS_API_KEY=live_orders.api_key, ORDERS_API_BASE_URL=live_orders.url)
    children = [
        subprocess.Popen(
            [sys.executable, "-m", crash.RUNNER, "customer", "run", json.dumps(AMA)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [child.communicate(timeout=120) for child in children]

    lines = [out.strip().splitlines()[-1] if out.strip() else err for out, err in outputs]
    assert all(line.startswith(("RESULT ", "PENDING")) for line in lines), outputs
    made = {line.split()[1] for line in lines if line.startswith("RESULT ")}
    assert len(made) == 1, lines
    assert upstream_customers(live_orders) == list(made)
    assert len(received.bodies("/customers/create")) == 1  # the others sent nothing
    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert (row.state, row.customer_id) == (State.SUCCEEDED, made.pop())
    assert ensure_customer(**AMA).pk == row.customer_id


def test_a_process_killed_after_the_provider_made_the_customer_leaves_one_customer(
    live_orders, received
):
    crash.start_and_kill("customer", "after-send", live_orders, dict(AMA))

    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert row.state == State.PENDING and row.claimed_until > timezone.now()
    assert len(upstream_customers(live_orders)) == 1
    assert not Customer.objects.exists()
    # While the dead process's claim lasts, no one sends for the reference.
    with pytest.raises(OrderRequestPending):
        ensure_customer(**AMA)
    assert resume_order_requests().resent == 0
    # The claim expires: the next call resends with the same key; the service replays.
    OrderRequest.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))

    customer = ensure_customer(**AMA)

    assert upstream_customers(live_orders) == [customer.pk]
    keys = {b["request_meta"]["idempotency_key"] for b in received.bodies("/customers/create")}
    assert keys == {row.idempotency_key}
    assert Customer.objects.get().reference == "user-42"
    assert OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE).state == State.SUCCEEDED
