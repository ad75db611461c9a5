"""A first sync builds the secondary indexes after the rows (``sync.late_indexes``), and they are
always there again afterwards: after a walk that succeeds, one that fails half-way, and a run
that finds them missing (a process killed during a first sync)."""

from __future__ import annotations

import pytest
from django.db import connection

from django_orders.models import Customer, Order, SyncRun
from django_orders.services import sync_orders
from django_orders.sync.late_indexes import drop_secondary, tables_of

pytestmark = pytest.mark.django_db(transaction=True)

SECONDARY = {index.name for model in (Order, Customer) for index in model._meta.indexes}


def present() -> set[str]:
    """The ``Meta.indexes`` names of the orders' and customers' tables the database has."""
    names: set[str] = set()
    with connection.cursor() as cursor:
        for model in (Order, Customer):
            names |= set(connection.introspection.get_constraints(cursor, model._meta.db_table))
    return names & SECONDARY


class Seen:
    """A progress callback recording the indexes present after each page."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.during: list[set[str]] = []
        self.fail_after = fail_after

    def __call__(self, run: SyncRun) -> None:
        self.during.append(present())
        if self.fail_after is not None and len(self.during) >= self.fail_after:
            raise RuntimeError("stopped half-way")


def test_the_secondary_indexes_are_the_orders_and_customers_own():
    assert tables_of(Order) == (Order, Customer)
    assert "orders_order_total_idx" in SECONDARY
    assert "orders_customer_email_idx" in SECONDARY
    assert present() == SECONDARY


def test_a_first_sync_writes_without_them_and_builds_them_after(uncapped):
    uncapped.seed(35)
    seen = Seen()
    run = sync_orders(progress=seen)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 35
    # Every page of the walk went into tables without them.
    assert seen.during[:4] == [set()] * 4
    assert present() == SECONDARY


def test_a_walk_failing_half_way_builds_them_again(uncapped):
    uncapped.seed(35)
    seen = Seen(fail_after=2)
    with pytest.raises(RuntimeError, match="half-way"):
        sync_orders(progress=seen)
    assert seen.during == [set(), set()]
    assert Order.objects.count() == 20
    assert SyncRun.objects.get().outcome == SyncRun.Outcome.FAILED
    assert present() == SECONDARY


def test_a_run_after_a_crash_builds_the_missing_ones_first(uncapped):
    uncapped.seed(35)
    sync_orders()
    # A first sync killed before its end left them dropped, with rows in the table.
    drop_secondary((Order, Customer), connection.alias)
    assert present() == set()
    seen = Seen()
    sync_orders(progress=seen)
    assert seen.during and all(names == SECONDARY for names in seen.during)
    assert present() == SECONDARY


def test_a_resync_drops_nothing(uncapped):
    uncapped.seed(35)
    sync_orders()
    seen = Seen()
    uncapped.seed(40)
    run = sync_orders(progress=seen)
    assert run.created == 5
    assert seen.during and all(names == SECONDARY for names in seen.during)
