"""Several processes refunding the same lines at once never refund more than was paid."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import REPO_ROOT, child_env
from tests.fixtures import crash
from tests.refunds.conftest import PAID

pytestmark = pytest.mark.django_db(transaction=True)
PROCESSES = 4


@pytest.fixture
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("several writer processes at once: PostgreSQL")


@pytest.mark.parametrize("lines_given", [False, True])
def test_processes_refunding_at_once_never_exceed_what_was_paid(
    postgres_only, live_orders, paid_order, lines, lines_given
):
    # Each lookup of the order takes a while: without the order's claim, every process would
    # check its amounts against the same lookup before any had stored its request.
    live_orders.add_fault("slow", "/orders/lookup", times=PROCESSES, seconds=0.3)
    env = child_env(ORDERS_API_KEY=live_orders.api_key, ORDERS_API_BASE_URL=live_orders.url)
    children = []
    for i in range(PROCESSES):
        kwargs = {"order_id": paid_order.pk, "reference": f"staff-{i}", "reason": "duplicate"}
        if lines_given:  # each asks for 60 % of the product line: only one can have it
            kwargs["lines"] = [{"line_item_id": lines["product"], "amount": 6000}]
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", crash.RUNNER, "refund", "none", json.dumps(kwargs)],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for child in children:
        assert child.stdout.readline().strip() == "READY"
    for child in children:  # all at once
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out.strip())

    done = [line for line in outputs if line.startswith("DONE")]
    assert len(done) == 1, outputs
    assert all(line == "REFUSED InvalidRefundRequest" for line in outputs if line not in done)
    upstream = live_orders.refunds_created_via_api()
    assert len(upstream) == 1
    refunded = sum(live_orders.refund(row["refund_id"])["total"]["value"] for row in upstream)
    paid = PAID["product"] + PAID["shipping"]
    assert refunded == (6000 if lines_given else paid)


def test_processes_sending_one_reference_at_once_make_one_upstream_refund(
    postgres_only, live_orders, paid_order, lines
):
    # Slow lookups keep every process inside refund_order at the same time.
    live_orders.add_fault("slow", "/orders/lookup", times=PROCESSES, seconds=0.3)
    env = child_env(ORDERS_API_KEY=live_orders.api_key, ORDERS_API_BASE_URL=live_orders.url)
    kwargs = {
        "order_id": paid_order.pk,
        "reference": "one-reference",
        "reason": "item_returned",
        "lines": [{"line_item_id": lines["product"], "amount": 1000}],
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-m", crash.RUNNER, "refund", "none", json.dumps(kwargs)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for child in children:
        assert child.stdout.readline().strip() == "READY"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out.strip())

    [upstream] = live_orders.refunds_created_via_api()
    # Each process got that refund, or was told its request is stored and being sent.
    for line in outputs:
        assert line in (f"DONE {upstream['refund_id']} 1000", "REFUSED RefundRequestPending")
    assert f"DONE {upstream['refund_id']} 1000" in outputs
