"""The sync lease: one walker per resource across hosts, and a dead holder's lease expires."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.conf import orders_settings
from django_orders.exceptions import SyncAlreadyRunning
from django_orders.models import Order, SyncLease, SyncRun
from django_orders.services import sync_orders
from django_orders.sync.engine import ABANDONED_RUN_ERROR
from django_orders.sync.lease import Lease, LeaseLost
from tests.fixtures.mirror import lease_taken_after


@pytest.mark.django_db
class TestLease:
    def test_one_holder_at_a_time_until_expiry(self, django_assert_num_queries):
        now = timezone.now()
        first = Lease("orders", owner="host-a:1:x")
        with django_assert_num_queries(2):  # create-if-missing, then the conditional UPDATE
            first.acquire(now=now)
        row = SyncLease.objects.get(pk="orders")
        assert row.owner == "host-a:1:x"
        assert row.expires_at == now + orders_settings.SYNC_LEASE

        second = Lease("orders", owner="host-b:2:y")
        with pytest.raises(SyncAlreadyRunning, match="held by host-a:1:x until"):
            second.acquire(now=now + orders_settings.SYNC_LEASE - timedelta(seconds=1))
        # A holder that stopped renewing loses the lease once it expires.
        second.acquire(now=now + orders_settings.SYNC_LEASE)
        assert SyncLease.objects.get(pk="orders").owner == "host-b:2:y"
        with pytest.raises(LeaseLost):
            first.renew()

    def test_renew_pushes_the_expiry_and_release_frees_at_once(self):
        lease = Lease("orders", duration=timedelta(minutes=1))
        start = timezone.now()
        lease.acquire(now=start)
        lease.renew(now=start + timedelta(seconds=50))
        assert SyncLease.objects.get().expires_at == start + timedelta(seconds=110)
        Lease("orders").release()  # someone else's release changes nothing
        assert SyncLease.objects.get().owner == lease.owner
        lease.release()
        Lease("orders").acquire()

    def test_leases_are_per_resource(self):
        Lease("orders").acquire()
        Lease("balance_transactions").acquire()
        assert SyncLease.objects.count() == 2

    def test_owner_names_host_and_process(self):
        owner = Lease("orders").owner
        host, pid, token = owner.split(":")
        assert host and int(pid) > 0 and len(token) == 12


@pytest.mark.django_db(transaction=True)
class TestSyncHoldsTheLease:
    def test_a_second_run_is_refused_and_records_nothing(self, uncapped):
        uncapped.seed(5)
        Lease("orders", owner="elsewhere:1:z").acquire()
        with pytest.raises(SyncAlreadyRunning, match="already running"):
            sync_orders()
        assert SyncRun.objects.count() == 0
        assert Order.objects.count() == 0

    def test_the_lease_is_released_after_success_and_after_failure(self, uncapped, sleeps):
        uncapped.seed(5)
        sync_orders()
        assert SyncLease.objects.get().owner == ""
        uncapped.add_fault("error_before_write", path="/orders/page", times=None, status=500)
        with pytest.raises(Exception, match="failed"):
            sync_orders()
        assert SyncLease.objects.get().owner == ""

    def test_a_run_that_lost_its_lease_stops_without_writing_the_page(self, uncapped):
        uncapped.seed(35)
        with pytest.raises(LeaseLost):
            sync_orders(progress=lease_taken_after(pages=2))
        run = SyncRun.objects.get()
        assert run.outcome == SyncRun.Outcome.FAILED
        assert "LeaseLost" in run.error
        assert Order.objects.count() == 20  # the third page was rolled back
        assert SyncLease.objects.get().owner == "other:9:q"  # the new holder keeps it


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def held() -> bool:
    return SyncLease.objects.exclude(owner="").exists()


@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
class TestSeparateProcesses:
    """Two ``manage.py sync_orders`` processes sharing one PostgreSQL, as on two hosts."""

    def test_exactly_one_of_two_concurrent_runs_walks(self, sandbox_no_cap, run_manage):
        sandbox_no_cap.seed(60)
        # The first page is held long enough for a second process to start and be refused, even
        # on a loaded machine (a process boots Django in a few seconds there).
        sandbox_no_cap.add_fault("slow", path="/orders/page", times=1, seconds=8)
        args = ("sync_orders", "--page-size", "10")
        first = run_manage(*args, server=sandbox_no_cap, background=True)
        try:
            wait_for(held)
            second = run_manage(*args, server=sandbox_no_cap)
            out, err = first.communicate(timeout=60)
        finally:
            first.kill()
        assert second.returncode == 3, second.stderr
        assert "already running" in second.stderr
        assert first.returncode == 0, err
        assert "60 orders seen: 60 new" in out
        run = SyncRun.objects.get()  # only the walker recorded a run
        assert run.outcome == SyncRun.Outcome.SUCCEEDED
        assert Order.objects.count() == 60

    def test_a_killed_holders_lease_expires_and_is_taken_over(self, sandbox_no_cap, run_manage):
        sandbox_no_cap.seed(60)
        fault = sandbox_no_cap.add_fault("slow", path="/orders/page", times=None, seconds=0.3)
        args = ("sync_orders", "--page-size", "10")
        killed = run_manage(*args, server=sandbox_no_cap, background=True)
        try:
            wait_for(lambda: SyncRun.objects.filter(pages__gte=2).exists())
        finally:
            killed.kill()
            killed.wait(timeout=30)
        killed_at = timezone.now()
        lease = SyncLease.objects.get()
        assert lease.owner  # nobody released it
        assert lease.expires_at <= killed_at + orders_settings.SYNC_LEASE  # but it is bounded
        crashed = SyncRun.objects.get()
        assert crashed.outcome == SyncRun.Outcome.RUNNING  # an honest record of the crash
        assert Order.objects.count() == crashed.seen >= 20  # committed pages stay

        sandbox_no_cap.faults.remove(fault.id)
        refused = run_manage(*args, server=sandbox_no_cap)
        assert refused.returncode == 3
        # Time passes beyond the expiry (moved back here rather than waiting ten minutes).
        SyncLease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        taken = run_manage(*args, server=sandbox_no_cap)
        assert taken.returncode == 0, taken.stderr
        assert SyncRun.objects.filter(outcome=SyncRun.Outcome.SUCCEEDED).count() == 1
        assert Order.objects.count() == 60
        assert SyncLease.objects.get().owner == ""
        # The run that took the lease over closed the killed run's record.
        crashed.refresh_from_db()
        assert crashed.outcome == SyncRun.Outcome.FAILED
        assert crashed.error == ABANDONED_RUN_ERROR
        assert crashed.finished_at is not None


@pytest.mark.django_db(transaction=True)
def test_taking_the_lease_closes_the_resources_abandoned_runs(uncapped):
    uncapped.seed(5)
    killed = SyncRun.objects.create(resource="orders", pages=2, host="gone:1:a")
    other = SyncRun.objects.create(resource="payouts", host="elsewhere:2:b")
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    killed.refresh_from_db()
    assert killed.outcome == SyncRun.Outcome.FAILED
    assert killed.error == ABANDONED_RUN_ERROR
    assert killed.finished_at is not None and killed.pages == 2
    other.refresh_from_db()  # another resource's run may be alive: left alone
    assert other.outcome == SyncRun.Outcome.RUNNING and other.finished_at is None


@pytest.mark.django_db(transaction=True)
def test_a_run_refused_the_lease_leaves_the_running_run_alone(uncapped):
    uncapped.seed(5)
    alive = SyncRun.objects.create(resource="orders", host="walker:1:a")
    Lease("orders", owner="walker:1:a").acquire()
    with pytest.raises(Exception, match="already running"):
        sync_orders()
    alive.refresh_from_db()
    assert alive.outcome == SyncRun.Outcome.RUNNING and alive.error == ""
