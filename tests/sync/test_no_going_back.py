"""The race of issue 31 (item 2), for real: a page (or a lookup) read while the order was
unpaid is held in transit on loopback while the payer pays and ``confirm_order``, in another
process, stores ``paid``. The mirror ends paid, ``-> paid`` is announced once and nothing goes
backwards, also after another sync."""

from __future__ import annotations

import select
import subprocess
import sys
import threading

import pytest
from django.db import connections

from django_orders.models import Order, SyncRun
from django_orders.sync.engine import sync_orders
from django_orders.sync.refresh import refresh_orders
from django_orders.testing.sandbox import handler
from tests.conftest import REPO_ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

#: How long the sandbox holds the page's answer: far longer than the other process needs to
#: look the order up and store it (it is set up and waiting before the page is asked for).
HOLD_SECONDS = 6.0


@pytest.fixture
def page_held(monkeypatch) -> threading.Event:
    """Set when the sandbox starts holding an answer it has already read (``hold_answer``)."""
    held = threading.Event()
    sleep = handler.time.sleep

    def noting_sleep(seconds: float) -> None:
        if seconds == HOLD_SECONDS:
            held.set()
        sleep(seconds)

    monkeypatch.setattr(handler.time, "sleep", noting_sleep)
    return held


def read_line(child: subprocess.Popen) -> str:
    ready, _, _ = select.select([child.stdout], [], [], 60)
    assert ready, "the confirming process said nothing for 60 s"
    return child.stdout.readline().strip()


@pytest.mark.parametrize(
    ("path", "write"),
    [
        ("/orders/page", lambda order_id: sync_orders()),
        ("/orders/lookup", lambda order_id: refresh_orders([order_id])),  # the admin's refresh
    ],
    ids=["page", "lookup"],
)
def test_an_answer_in_transit_never_takes_back_a_payment_confirmed_by_another_process(
    sandbox, orders_settings_for, status_changes, page_held, path, write
):
    orders_settings_for(sandbox, TIMEOUT=(2, 30))
    order_id, *_others = sandbox.insert_orders(3)  # newest first: order_id is on page 1
    sync_orders()
    assert set(Order.objects.values_list("status", flat=True)) == {"requires_payment"}
    assert not Order.objects.filter(observed_at=None).exists()

    child = subprocess.Popen(
        [sys.executable, "-m", "tests.sync.confirm_runner", order_id],
        cwd=REPO_ROOT,
        env=child_env(ORDERS_API_KEY=sandbox.api_key, ORDERS_API_BASE_URL=sandbox.url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_line(child) == "READY", child.stderr.read()
        sandbox.add_fault("hold_answer", path, times=1, seconds=HOLD_SECONDS)

        def walk() -> None:
            try:
                write(order_id)
            finally:
                connections.close_all()

        sync = threading.Thread(target=walk)
        sync.start()
        assert page_held.wait(60), "the answer was never asked for"
        # The answer is read (unpaid) and in transit: the payer pays, the other process confirms.
        sandbox.pay_order(order_id)
        child.stdin.write("go\n")
        child.stdin.flush()
        lines = []
        while not (line := read_line(child)).startswith("DONE"):
            lines.append(line)
        assert line == "DONE paid", child.stderr.read()
        assert sync.is_alive(), "the answer landed before the payment was stored: no race tested"
        sync.join(60)
        assert not sync.is_alive()
    finally:
        child.kill()
        child.wait(10)
        for stream in (child.stdin, child.stdout, child.stderr):
            stream.close()

    assert set(SyncRun.objects.values_list("outcome", flat=True)) == {"succeeded"}
    assert Order.objects.get(pk=order_id).status == "paid"
    confirmed = [tuple(line.split()[1:]) for line in lines if line.startswith("SIGNAL")]
    once = [(order_id, "requires_payment", "paid")]
    assert confirmed + status_changes == once  # nothing backwards, nothing twice

    sync_orders()  # the next sync reads the order paid

    assert Order.objects.get(pk=order_id).status == "paid"
    assert confirmed + status_changes == once
