"""The shared rate hold in the database (``sync.lease``): a row per key fingerprint that
only ever extends its hold, slots taken by compare-and-set, never the key itself."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from django.db import connection

from django_orders.management.commands.sync_orders import Command
from django_orders.models import RateHold, SyncRun
from django_orders.sync.lease import DatabaseRateHold, key_fingerprint, shared_gate

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk_test_rate_hold_0123456789abcdef"


def test_the_fingerprint_names_the_key_without_showing_it():
    fingerprint = key_fingerprint(KEY)
    assert fingerprint == key_fingerprint(KEY) != key_fingerprint(KEY + "x")
    assert len(fingerprint) == 64 and KEY not in fingerprint
    hold = DatabaseRateHold(fingerprint)
    assert KEY not in repr(hold) and fingerprint not in repr(hold)  # the first 12 only


def test_a_hold_is_created_extended_and_never_cut():
    hold = DatabaseRateHold(key_fingerprint(KEY))
    assert hold.held_until() == 0.0  # no row: no hold
    now = time.time()
    hold.hold_until(now + 2)
    hold.hold_until(now + 1)  # shorter: the longer stands
    assert hold.held_until() == pytest.approx(now + 2, abs=1e-5)
    hold.hold_until(now + 5)
    assert hold.held_until() == pytest.approx(now + 5, abs=1e-5)
    assert RateHold.objects.count() == 1


def test_two_holds_on_one_key_share_one_sequence_of_slots():
    first, second = (DatabaseRateHold(key_fingerprint(KEY)) for _ in range(2))
    other_key = DatabaseRateHold(key_fingerprint("sk_test_someone_else_entirely"))
    began = time.time()
    a = first.take_slots(5, 0.05)
    b = second.take_slots(5, 0.05)
    c = first.take_slots(2, 0.05)
    assert began - 0.01 <= a <= time.time()
    assert b == pytest.approx(a + 0.25, abs=1e-5)
    assert c == pytest.approx(b + 0.25, abs=1e-5)
    assert other_key.take_slots(1, 0.05) < b  # another key has slots of its own


def test_slots_taken_by_threads_at_once_never_overlap():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite: only the thread that made the hold writes to it (next test)")
    hold = DatabaseRateHold(key_fingerprint(KEY))
    firsts: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(10):
            slot = hold.take_slots(1, 0.01)
            with lock:
                firsts.append(slot)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    firsts.sort()
    gaps = [later - earlier for earlier, later in itertools.pairwise(firsts)]
    assert len(firsts) == 40 and min(gaps) >= 0.01 - 1e-5


def test_on_sqlite_only_the_thread_that_made_the_hold_writes_it():
    hold = DatabaseRateHold(key_fingerprint(KEY))
    results = {}

    def from_a_worker() -> None:
        hold.hold_until(time.time() + 3)
        results["slots"] = hold.take_slots(1, 0.1)
        results["read"] = hold.held_until()

    worker = threading.Thread(target=from_a_worker)
    worker.start()
    worker.join()
    if connection.vendor == "sqlite":
        # A worker's write would break the calling thread's next write transaction: skipped.
        assert results == {"slots": None, "read": 0.0}
        assert not RateHold.objects.exists()
    else:
        assert results["slots"] is not None and results["read"] > time.time() + 2
        assert RateHold.objects.count() == 1


def test_the_run_gate_carries_the_setting_and_the_key(settings, orders_settings_for, sandbox):
    orders_settings_for(sandbox, MAX_REQUESTS_PER_SECOND=20)
    gate = shared_gate()
    gate.hold(1.5)
    assert RateHold.objects.get().pk == key_fingerprint(sandbox.api_key)
    assert gate.wait(lambda seconds: None) == pytest.approx(1.5, abs=0.05)


def test_the_summary_says_the_429s_and_the_time_held():
    run = SyncRun(resource="orders", pages=2, seen=200, rate_limited=3, rate_held=4.25)
    assert "Rate limited: 3 429 answers, the run's requests held 4.2 seconds in all." in (
        Command.summary(run, 1.0)
    )
    quiet = SyncRun(resource="orders", pages=2, seen=200)
    assert "Rate limited" not in Command.summary(quiet, 1.0)
