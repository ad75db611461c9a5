"""A first sync builds the secondary indexes after the rows (``sync.late_indexes``), and they are
always there again afterwards: after a walk that succeeds, one that fails half-way, and a run
that finds them missing (a process killed during a first sync)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.models import Customer, Order, SyncLease, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import engine, page_batches
from django_orders.sync.late_indexes import drop_secondary, tables_of
from django_orders.sync.lease import LeaseLost
from tests.fixtures.mirror import edit_raw_order

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


# --- several pages per transaction on a first sync (``sync.page_batches``) --------------------


@pytest.fixture
def two_pages_a_batch(monkeypatch):
    monkeypatch.setattr(page_batches, "BATCH_PAGES", 2)
    monkeypatch.setattr(page_batches, "BATCH_SECONDS", 3600.0)


class Commits:
    """A progress callback: the run's counts and the orders committed at each call."""

    def __init__(self, steal_after: int | None = None) -> None:
        self.calls: list[tuple[int, int, int]] = []
        self.steal_after = steal_after

    def __call__(self, run: SyncRun) -> None:
        self.calls.append((run.pages, run.created, Order.objects.count()))
        if run.pages == self.steal_after:
            SyncLease.objects.update(owner="other:9:q")


@pytest.mark.usefixtures("two_pages_a_batch")
def test_a_first_sync_of_large_pages_commits_several_together(uncapped):
    uncapped.seed(350)
    commits = Commits()
    first = sync_orders(page_size=100, progress=commits)
    # Two pages a commit, the last one alone at the walk's end; each count committed.
    assert commits.calls == [(2, 200, 200), (4, 350, 350)]
    first.refresh_from_db()
    assert (first.pages, first.seen, first.created) == (4, 350, 350)
    # A re-sync: a transaction a page, the callback after each.
    uncapped.seed(360)
    again = Commits()
    sync_orders(page_size=100, progress=again)
    assert [pages for pages, _created, _orders in again.calls] == [1, 2, 3, 4]


def set_aside_on_page_2(uncapped) -> str:
    """350 orders (pages of 100: 100, 100, 100, 50), the sixth of page 2 malformed: its id."""
    uncapped.seed(350)
    bad_id = uncapped.store.newest_order_ids(350)[105]
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-13-01T00:00:00Z"))
    return bad_id


class StoredRun:
    """A progress callback: the run as committed at each call (pages, created, skipped, and
    whether its problems name ``bad_id``)."""

    def __init__(self, bad_id: str) -> None:
        self.bad_id = bad_id
        self.calls: list[tuple[int, int, int, bool]] = []

    def __call__(self, run: SyncRun) -> None:
        stored = SyncRun.objects.get(pk=run.pk)
        self.calls.append(
            (stored.pages, stored.created, stored.skipped, self.bad_id in stored.problems)
        )


def test_a_batch_writes_the_runs_progress_and_the_lease_once_with_its_last_page(
    uncapped, monkeypatch
):
    monkeypatch.setattr(page_batches, "BATCH_PAGES", 3)
    monkeypatch.setattr(page_batches, "BATCH_SECONDS", 3600.0)
    # Page 2, in the middle of the first batch (pages 1 to 3; page 4, of 50, is alone).
    committed = StoredRun(set_aside_on_page_2(uncapped))
    with CaptureQueriesContext(connection) as queries:
        sync_orders(page_size=100, progress=committed)
    written = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    progress = [
        sql for sql in written if sql.startswith('UPDATE "django_orders_syncrun" SET "pages"')
    ]
    renewals = [
        sql for sql in written if 'UPDATE "django_orders_synclease" SET "expires_at"' in sql
    ]
    # Once a commit (the batch, then page 4), the problem of the batch's middle page with it.
    assert (len(progress), len(renewals)) == (2, 2)
    assert committed.calls == [(3, 299, 1, True), (4, 349, 1, True)]


def test_a_walk_ending_inside_a_batch_commits_its_progress_with_it(uncapped, monkeypatch):
    # Pages 1 to 4 (100, 100, 100, 50 orders) are one batch of at most 16, open when the walk
    # ends: its progress and problems go with its commit, and stay if a later step fails.
    monkeypatch.setattr(page_batches, "BATCH_SECONDS", 3600.0)
    committed = StoredRun(set_aside_on_page_2(uncapped))

    def refresh_fails(*args, **kwargs):
        raise RuntimeError("the refresh failed")

    monkeypatch.setattr(engine, "refresh_outside_walk", refresh_fails)
    with pytest.raises(RuntimeError, match="the refresh failed"):
        sync_orders(page_size=100, progress=committed)
    assert committed.calls == [(4, 349, 1, True)]
    run = SyncRun.objects.get()
    assert (run.outcome, run.pages, run.created, run.skipped) == (SyncRun.Outcome.FAILED, 4, 349, 1)
    assert committed.bad_id in run.problems


def test_a_page_long_after_the_last_write_renews_the_lease_inside_a_batch(uncapped, monkeypatch):
    # A batch writes the progress and renews the lease with its last page, and with any page
    # coming QUIET_PERSIST_INTERVAL after the last write (a slow read): with 0, every page.
    monkeypatch.setattr(page_batches, "BATCH_SECONDS", 3600.0)
    monkeypatch.setattr(engine, "QUIET_PERSIST_INTERVAL", 0.0)
    uncapped.seed(350)
    with CaptureQueriesContext(connection) as queries:
        sync_orders(page_size=100)
    renewals = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('UPDATE "django_orders_synclease" SET "expires_at"')
    ]
    assert len(renewals) == 4  # pages 1 to 4, one batch


@pytest.mark.usefixtures("two_pages_a_batch")
def test_a_batch_that_fails_is_rolled_back_whole_and_its_counts_with_it(uncapped):
    uncapped.seed(550)
    # A record set aside on page 4: rolled back with its batch, its problem goes too.
    bad_id = uncapped.store.newest_order_ids(550)[305]
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-13-01T00:00:00Z"))
    commits = Commits(steal_after=2)
    with pytest.raises(LeaseLost):
        sync_orders(page_size=100, progress=commits)
    assert commits.calls == [(2, 200, 200)]
    # Pages 3 and 4 were one transaction: the lease, renewed with page 4 (the batch's last),
    # was lost, and that took both back.
    assert Order.objects.count() == 200
    run = SyncRun.objects.get()
    assert (run.outcome, run.pages, run.seen, run.created) == (SyncRun.Outcome.FAILED, 2, 200, 200)
    assert (run.skipped, run.problems) == (0, "")
    assert present() == SECONDARY


@pytest.mark.django_db(transaction=False)
def test_inside_a_callers_transaction_no_index_is_dropped_or_built(uncapped):
    """A sync run inside a transaction of its caller's (here the test's) changes no schema: on
    PostgreSQL an index cannot be built on a table with deferred checks pending there."""
    uncapped.seed(15)
    seen = Seen()
    run = sync_orders(progress=seen)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.count() == 15
    assert seen.during and all(indexes == SECONDARY for indexes in seen.during)
