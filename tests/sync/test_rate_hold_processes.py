"""Real processes on PostgreSQL behind one key: a 429's ``Retry-After`` holds all three, and
``MAX_REQUESTS_PER_SECOND`` caps the three together.

Each child runs the shipped refresh (``refresh_orders``, the admin's "refresh from the API")
over and over for a few seconds; the sandbox runs in this process, and the test records when
every request reached it. The bounds below are the design's (``client.rate_gate``): a gate reads
the shared hold before its first request and then before every ``REREAD_EVERY``.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from django_orders.client.rate_gate import REREAD_EVERY
from django_orders.models import RateHold
from django_orders.services import sync_orders
from django_orders.sync.lease import key_fingerprint

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL"),
]

PROCESSES = 3
#: A bound on the waits, not a measurement.
PATIENCE = 60
#: Each child refreshes the mirror's orders again and again for this long.
CHILD_SECONDS = 9
CHILD = """
import time
from django_orders.models import Order
from django_orders.services import refresh_orders
ids = list(Order.objects.values_list("id", flat=True))
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    refresh_orders(ids)
"""


class Arrivals:
    """When each API request reached the sandbox, and when a ``rate_limit`` fault answered."""

    def __init__(self, monkeypatch) -> None:
        from django_orders.testing.sandbox.handler import Handler

        self.times: list[float] = []
        self.rate_limited_at: list[float] = []
        self.recording = False
        lock = threading.Lock()
        api, fault_before = Handler._api, Handler._fault_before
        arrivals = self

        def recording_api(handler, routes, path, payload):
            if arrivals.recording:
                with lock:
                    arrivals.times.append(time.monotonic())
            return api(handler, routes, path, payload)

        def recording_fault(handler, fault):
            if fault.kind == "rate_limit":
                with lock:
                    arrivals.rate_limited_at.append(time.monotonic())
            return fault_before(handler, fault)

        monkeypatch.setattr(Handler, "_api", recording_api)
        monkeypatch.setattr(Handler, "_fault_before", recording_fault)

    def between(self, start: float, end: float) -> int:
        return sum(start <= t < end for t in self.times)


@pytest.fixture
def limited(sandbox_factory, orders_settings_for, monkeypatch):
    sandbox = sandbox_factory(latency_ms=20, page_cap=None)
    sandbox.seed(40, seed=5)
    orders_settings_for(sandbox)
    sync_orders()  # the children refresh what this mirrored
    return sandbox, Arrivals(monkeypatch)


def start_children(run_manage, sandbox, arrivals, **env):
    arrivals.recording = True
    code = CHILD.format(seconds=CHILD_SECONDS)
    return [
        run_manage("shell", "-c", code, server=sandbox, background=True, **env)
        for _ in range(PROCESSES)
    ]


def finish(children) -> None:
    for child in children:
        out, err = child.communicate(timeout=PATIENCE)
        assert child.returncode == 0, out + err


def wait_for(condition) -> None:
    end = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < end, "the children never got going"
        time.sleep(0.02)


def test_a_retry_after_holds_every_process_on_the_key(limited, run_manage):
    sandbox, arrivals = limited
    children = start_children(
        run_manage, sandbox, arrivals, DJANGO_ORDERS_TEST_REFRESH_CONCURRENCY=1
    )
    try:
        # All three under way (about 50 requests a second each at 20 ms), then one 429.
        wait_for(lambda: arrivals.between(time.monotonic() - 0.5, time.monotonic()) >= 45)
        sandbox.add_fault("rate_limit", path="/orders/lookup", times=1, retry_after=2)
        wait_for(lambda: arrivals.rate_limited_at)
        at = arrivals.rate_limited_at[0]
        wait_for(lambda: time.monotonic() > at + 3)
    finally:
        finish(children)
    # In the first half second, from each of the two other processes: the request it had in
    # flight, and those it sent before its next read of the shared hold (one before every
    # REREAD_EVERY requests). Measured: 3 to 10 of the 12.
    assert arrivals.between(at, at + 0.5) <= (PROCESSES - 1) * (1 + REREAD_EVERY)
    # Then nothing until the hold ends (2 s after the 429, less a margin for the clocks)...
    assert arrivals.between(at + 0.5, at + 1.95) == 0
    # ...and all of them go on after it.
    assert arrivals.between(at + 2.0, at + 3.0) >= 45
    hold = RateHold.objects.get(pk=key_fingerprint(sandbox.api_key))
    assert hold.held_until is not None
    assert sandbox.api_key not in hold.pk


def test_max_requests_per_second_caps_the_processes_together(limited, run_manage):
    sandbox, arrivals = limited
    children = start_children(
        run_manage,
        sandbox,
        arrivals,
        DJANGO_ORDERS_TEST_REFRESH_CONCURRENCY=4,
        DJANGO_ORDERS_TEST_MAX_REQUESTS_PER_SECOND=20,
    )
    finish(children)
    times = arrivals.times
    # Uncapped, 3 processes with 4 lookups in flight each at 20 ms would send about 600 a second.
    busiest = max(arrivals.between(t, t + 2) for t in times)
    assert busiest <= 20 * 2 * 1.1
    # And the cap is what bounds them, not idleness: the busiest window is near the rate.
    assert busiest >= 20 * 2 * 0.75
    assert len(times) >= 20 * (CHILD_SECONDS - 4)
