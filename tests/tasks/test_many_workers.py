"""Real workers, killed: no payment watch is stranded, none is run twice at once, every paid
order is mirrored as paid once. ``db_worker`` processes (django-tasks-db) and the README's RQ
recipe (``rqworker`` on the local Redis), SIGKILLed at random points and restarted, with the
sweep (``manage.py watch_due_payments --every 1``) running as README.md says.

A killed worker's step stays claimed for its lookup's deadline plus a margin (the children run
with a 5 s ``REQUEST_DEADLINE``: a 20 s claim), and django-tasks-db never runs its task again:
the sweep takes the step up once the claim has expired. Bounded: a few dozen checkouts, a
minute or so of wall time each.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict

import pytest
from django.db import connection

from django_orders.models import Order, OrderEvent, PaymentWatch
from django_orders.tasks import watch_due_payments_task
from tests.tasks.conftest import DATABASE, DUMMY
from tests.tasks.test_rq_worker import RQ_TASKS, WORKER_COMMAND

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL"),
]

#: A bound on the waits, not a measurement.
PATIENCE = 120
CHILD = {"DJANGO_ORDERS_TEST_REQUEST_DEADLINE": "5"}
DB_WORKER = ("db_worker", "--interval", "0.2", "--no-startup-delay", "--no-reload")
SWEEP = ("watch_due_payments", "--every", "1")


@pytest.fixture
def watching(live_orders, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}


class LookupLog(defaultdict):
    """Each ``/orders/lookup`` the sandbox answered: order id -> [(start, end)], monotonic;
    ``arrived``: order id -> the lookups that reached it, answered or still in flight."""

    def __init__(self) -> None:
        super().__init__(list)
        self.arrived: Counter[str] = Counter()


@pytest.fixture
def lookups_made(monkeypatch):
    from django_orders.testing.sandbox.handler import Handler

    made = LookupLog()
    lock = threading.Lock()
    original = Handler._api

    def recording(self, routes, path, payload):
        start = time.monotonic()
        looked_up = path == "/orders/lookup" and isinstance(payload, dict)
        if looked_up:
            with lock:
                made.arrived[str(payload.get("order_id"))] += 1
        try:
            return original(self, routes, path, payload)
        finally:
            if looked_up:
                with lock:
                    made[str(payload.get("order_id"))].append((start, time.monotonic()))

    monkeypatch.setattr(Handler, "_api", recording)
    return made


class Processes:
    """Child processes the test starts, kills and restarts; all stopped at the end."""

    def __init__(self, run_manage, server, **env: str) -> None:
        self.run_manage, self.server, self.env = run_manage, server, {**CHILD, **env}
        self.running: list = []
        self.outputs: list[tuple[str, str]] = []

    def start(self, *words: str):
        child = self.run_manage(*words, server=self.server, background=True, **self.env)
        self.running.append(child)
        return child

    def kill(self, child) -> None:
        """SIGKILL the child's whole process group: the worker and what it forked (RQ runs each
        job in a work horse, which would otherwise live on and hold the output pipes open)."""
        signal_group(child, signal.SIGKILL)
        self.outputs.append(child.communicate(timeout=30))
        self.running.remove(child)

    def stop(self) -> None:
        for child in self.running:
            signal_group(child, signal.SIGTERM)
        for child in self.running:
            try:
                self.outputs.append(child.communicate(timeout=15))
            except subprocess.TimeoutExpired:  # a warm shutdown waiting on something
                signal_group(child, signal.SIGKILL)
                self.outputs.append(child.communicate(timeout=15))
        self.running = []


def signal_group(child, signum: int) -> None:
    """Signal every process of ``child``'s group (run_manage starts each in its own session)."""
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(child.pid, signum)


def wait_for(condition) -> bool:
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.3)
    return condition()


def watch_ended(order_id: str) -> bool:
    return PaymentWatch.objects.filter(pk=order_id, finished_at__isnull=False).exists()


def unended(orders) -> list[dict]:
    """The watches of ``orders`` not ended, for a failure's message."""
    watches = PaymentWatch.objects.filter(pk__in=[o.pk for o in orders], finished_at=None)
    return list(watches.values("order_id", "lookups", "claimed_until", "next_lookup_at"))


def assert_each_paid_once(paid_ids, lookups_made, kills: int) -> None:
    """Mirrored as paid, the watch ended by the status, ``order_status_changed`` → paid once
    (its timeline entry, which sends it), no two lookups of one order at once, and no more
    lookups than steps recorded plus one for each step a kill cut short."""
    for order_id in paid_ids:
        assert Order.objects.get(pk=order_id).status == "paid"
        watch = PaymentWatch.objects.get(pk=order_id)
        assert (watch.end_reason, watch.claimed_until) == ("status", None), order_id
        paid = OrderEvent.objects.filter(order_id=order_id, kind="status_changed", to_status="paid")
        assert paid.count() == 1, order_id
    excess = 0
    for order_id, spans in lookups_made.items():
        spans = sorted(spans)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, f"two lookups of {order_id} at once"
        recorded = PaymentWatch.objects.get(pk=order_id).lookups
        excess += max(0, len(spans) - recorded)
    assert excess <= kills, f"{excess} lookups more than the steps recorded, {kills} kills"


def test_a_worker_killed_between_its_claim_and_its_enqueue_strands_nothing(
    watching, new_order, settings, run_manage, live_orders, lookups_made
):
    settings.TASKS = DATABASE
    children = Processes(run_manage, live_orders, DJANGO_ORDERS_TEST_TASKS="database")
    try:
        worker = children.start(*DB_WORKER)
        order = new_order()
        live_orders.pay_order(order.pk)
        live_orders.add_fault("slow", "/orders/lookup", seconds=10)  # the worker is in its step
        # Killed with its lookup in flight (the slow fault spent on it), not just after its
        # claim: a worker killed before it sent the lookup would leave the fault to the sweep.
        assert wait_for(lambda: lookups_made.arrived[order.pk] == 1), children.outputs
        children.kill(worker)
        watch = PaymentWatch.objects.get(pk=order.pk)
        assert watch.claimed_until is not None  # claimed, nothing recorded, nothing enqueued
        assert (watch.lookups, watch.steps, watch.finished_at) == (0, 0, None)

        children.start(*SWEEP)
        ended = wait_for(lambda: watch_ended(order.pk))
    finally:
        children.stop()

    assert ended, children.outputs
    assert PaymentWatch.objects.get(pk=order.pk).lookups == 1  # the killed step recorded nothing
    assert len(lookups_made[order.pk]) == 2
    assert_each_paid_once([order.pk], lookups_made, kills=1)


def test_a_lost_first_enqueue_ends_paid_by_the_self_rescheduling_sweep_task(
    watching, new_order, settings, run_manage, live_orders, lookups_made
):
    settings.TASKS = DUMMY  # the first step is enqueued nowhere: lost
    order = new_order()
    live_orders.pay_order(order.pk)
    settings.TASKS = DATABASE
    watch_due_payments_task.enqueue(every=1)  # once: it reschedules itself
    children = Processes(run_manage, live_orders, DJANGO_ORDERS_TEST_TASKS="database")
    try:
        children.start(*DB_WORKER)
        ended = wait_for(lambda: watch_ended(order.pk))
    finally:
        children.stop()

    assert ended, children.outputs
    assert_each_paid_once([order.pk], lookups_made, kills=0)
    assert len(lookups_made[order.pk]) == 1


def chaos(children, worker_words, new_order, live_orders, rng, *, workers, checkouts, paid, kills):
    """Start ``workers`` workers and the sweep; then ``checkouts`` checkouts, ``paid`` of them
    paid at random moments over the next eight seconds; and kill a random worker ``kills``
    times (restarting it) between the fifth and the fifteenth, while the steps (the first due
    five seconds after each checkout, two seconds a lookup) keep the workers busy. Returns the
    orders and those paid."""
    pool = [children.start(*worker_words) for _ in range(workers)]
    children.start(*SWEEP)
    orders = [new_order() for _ in range(checkouts)]
    payers = rng.sample(orders, paid)
    events = [(rng.uniform(0, 8), "pay", order.pk) for order in payers]
    events += [(rng.uniform(5, 15), "kill", None) for _ in range(kills)]
    began = time.monotonic()
    for at, action, order_id in sorted(events, key=lambda event: event[0]):
        time.sleep(max(0.0, began + at - time.monotonic()))
        if action == "pay":
            live_orders.pay_order(order_id)
        else:
            victim = pool.pop(rng.randrange(len(pool)))
            children.kill(victim)
            pool.append(children.start(*worker_words))
    return orders, payers


def test_db_workers_killed_at_random_lose_and_double_nothing(
    watching, new_order, settings, run_manage, live_orders, lookups_made
):
    settings.TASKS = DATABASE
    rng = random.Random(50)
    # Every lookup takes a while (well under the children's 5 s deadline): kills land mid-step.
    live_orders.add_fault("slow", "/orders/lookup", times=None, seconds=1.5)
    children = Processes(run_manage, live_orders, DJANGO_ORDERS_TEST_TASKS="database")
    try:
        orders, paid = chaos(
            children,
            DB_WORKER,
            new_order,
            live_orders,
            rng,
            workers=3,
            checkouts=24,
            paid=16,
            kills=4,
        )
        ended = wait_for(lambda: all(watch_ended(order.pk) for order in paid))
    finally:
        children.stop()

    assert ended, (unended(paid), children.outputs[-3:])
    assert_each_paid_once([order.pk for order in paid], lookups_made, kills=4)
    unpaid = [order.pk for order in orders if order not in paid]
    assert not PaymentWatch.objects.filter(pk__in=unpaid, finished_at__isnull=False).exists()


def test_rq_workers_one_killed_lose_and_double_nothing(
    watching, new_order, settings, run_manage, live_orders, lookups_made, redis_queue
):
    settings.TASKS = RQ_TASKS
    rng = random.Random(51)
    live_orders.add_fault("slow", "/orders/lookup", times=None, seconds=1.5)
    children = Processes(run_manage, live_orders, DJANGO_ORDERS_TEST_TASKS="rq")
    words = WORKER_COMMAND.split()[2:]  # "python manage.py" is run_manage's own
    try:
        _orders, paid = chaos(
            children, words, new_order, live_orders, rng, workers=2, checkouts=12, paid=8, kills=1
        )
        ended = wait_for(lambda: all(watch_ended(order.pk) for order in paid))
    finally:
        children.stop()

    assert ended, (unended(paid), children.outputs[-3:])
    assert_each_paid_once([order.pk for order in paid], lookups_made, kills=1)
