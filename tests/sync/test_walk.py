"""The page walk end to end, over real loopback HTTP against the sandbox."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.exceptions import InvalidResponse, ServerError
from django_orders.models import (
    BalanceTransaction,
    Customer,
    EventType,
    Order,
    OutboxEvent,
    RemoteRecord,
    SyncRun,
)
from django_orders.services import sync_orders
from django_orders.signals import order_first_seen, order_status_changed
from tests.fixtures.mirror import (
    EVENT_WRITES,
    PageStatements,
    assert_mirror_matches,
    edit_raw_order,
    logged_statements,
    statement_shape,
    store_orders_by_id,
)

pytestmark = pytest.mark.django_db(transaction=True)

FORM = re.compile(r"^.{19}(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
WRITES = re.compile(r'^\s*(INSERT|UPDATE|DELETE)\b.*"django_orders_(order|customer)"', re.S)


@pytest.fixture
def received():
    """Signals received during the test, as (name, order id, extra) tuples."""
    events: list[tuple] = []

    def first_seen(sender, order, **kwargs):
        events.append(("first_seen", order.id, None))

    def status_changed(sender, order, previous_status, status, **kwargs):
        events.append(("status_changed", order.id, (previous_status, status)))

    order_first_seen.connect(first_seen, weak=False)
    order_status_changed.connect(status_changed, weak=False)
    yield events
    order_first_seen.disconnect(first_seen)
    order_status_changed.disconnect(status_changed)


def test_a_full_walk_mirrors_the_store_exactly(uncapped, received):
    uncapped.seed(95)
    run = sync_orders()
    assert_mirror_matches(uncapped)
    run.refresh_from_db()
    assert (run.pages, run.seen, run.created, run.updated, run.unchanged) == (10, 95, 95, 0, 0)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.end_reason == "last_page"
    assert run.finished_at is not None and run.error == ""
    assert sorted(e[1] for e in received if e[0] == "first_seen") == sorted(
        store_orders_by_id(uncapped)
    )


def test_every_timestamp_form_is_stored_as_aware_utc_with_microseconds(uncapped):
    uncapped.seed(200)
    sync_orders(page_size=100)
    upstream = store_orders_by_id(uncapped)
    # The data really holds every form: 0 to 7 fraction digits, Z and offsets.
    forms = [FORM.match(r["initiated_at"]).groups() for r in upstream.values()]
    assert {len(fraction or "") for fraction, _zone in forms} >= {0, 1, 3, 6, 7}
    assert {zone for _fraction, zone in forms} >= {"Z", "+05:30", "-09:30"}
    for order in Order.objects.all():
        text = upstream[order.id]["initiated_at"]
        # Independent reference: Python's own ISO parser (it truncates past microseconds too).
        expected = datetime.fromisoformat(text).astimezone(UTC)
        assert order.initiated_at == expected, text
        assert order.initiated_at.utcoffset().total_seconds() == 0
        if "completed_at" in upstream[order.id]:
            completed = datetime.fromisoformat(upstream[order.id]["completed_at"]).astimezone(UTC)
            assert order.completed_at == completed


def test_an_unchanged_resync_writes_no_rows(uncapped):
    uncapped.seed(95)
    sync_orders()
    orders_before = dict(Order.objects.values_list("id", "changed_at"))
    customers_before = dict(Customer.objects.values_list("id", "changed_at"))
    with CaptureQueriesContext(connection) as captured:
        run = sync_orders()
    assert (run.created, run.updated, run.unchanged, run.seen) == (0, 0, 95, 95)
    assert [sql for sql in logged_statements(captured) if WRITES.match(sql)] == []
    assert dict(Order.objects.values_list("id", "changed_at")) == orders_before
    assert dict(Customer.objects.values_list("id", "changed_at")) == customers_before


def test_records_inserted_during_the_walk_are_neither_missed_nor_duplicated(uncapped, received):
    uncapped.seed(95)
    before = set(store_orders_by_id(uncapped))
    # Before pages 2, 3 and 4, four new orders land at the front: later pages shift by 4.
    uncapped.add_fault("insert_during_traversal", path="/orders/page", times=3, insert_count=4)
    run = sync_orders()
    mirrored = set(Order.objects.values_list("id", flat=True))
    assert before <= mirrored  # nothing that existed when the walk started was missed
    assert run.seen == run.created == len(mirrored) == Order.objects.count()
    assert len([e for e in received if e[0] == "first_seen"]) == len(mirrored)  # once each
    # The next run picks up the orders inserted in front of the walk, and then all match.
    second = sync_orders()
    assert second.created == 12
    assert_mirror_matches(uncapped)


def test_a_status_change_propagates_on_the_next_run_and_signals_once(
    uncapped, received, orders_settings_for
):
    # The walk's own counts: the change feed (tests/sync/test_change_feed.py) is off.
    orders_settings_for(uncapped, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, CHANGE_FEED=False)
    uncapped.seed(40)
    sync_orders()
    target = Order.objects.filter(status="requires_payment").order_by("id").first()
    changed_before = target.changed_at
    uncapped.store.set_order_status(target.id, "completed", "2026-06-01T12:00:00.5Z")
    received.clear()
    run = sync_orders()
    assert (run.updated, run.unchanged) == (1, 39)
    target.refresh_from_db()
    assert target.status == "completed"
    assert target.completed_at == datetime(2026, 6, 1, 12, 0, 0, 500000, UTC)
    assert target.changed_at > changed_before
    assert received == [("status_changed", target.id, ("requires_payment", "completed"))]
    sync_orders()
    assert len(received) == 1  # nothing changed since: no second signal


def test_statements_per_page_are_the_same_for_page_sizes_10_and_256(uncapped):
    # Each page its own transaction, a first sync's as a re-sync's.
    uncapped.seed(3 * 256 - 3)
    counts = {}
    for size in (10, 256):
        Order.objects.all().delete()
        Customer.objects.all().delete()
        before = OutboxEvent.objects.count()
        fresh = PageStatements()
        with fresh.capture:
            sync_orders(page_size=size, max_pages=3, progress=fresh)
        reported = OutboxEvent.objects.count()
        assert reported - before == Order.objects.count()  # each order's order.first_seen
        again = PageStatements()
        with again.capture:
            sync_orders(page_size=size, max_pages=3, progress=again)
        assert OutboxEvent.objects.count() == reported  # the re-sync reports nothing
        counts[size] = (fresh.per_page(), again.per_page())
        # Every page after the first: one read of the stored customers and orders, write the
        # customers and the orders (all new), their order.first_seen events and deliveries
        # (the outbox's two statements, whatever the page size), the run's progress and the
        # lease renewal.
        sql = fresh.page_sql(1)
        assert [statement_shape(statement) for statement in sql] == [
            "SELECT",
            'INSERT INTO "django_orders_customer"',
            'INSERT INTO "django_orders_order"',
            *EVENT_WRITES,
            'UPDATE "django_orders_syncrun"',
            'UPDATE "django_orders_synclease"',
        ]
        # A re-sync's pages after the first change nothing: one read each, no transaction, no
        # event, the progress and the lease saved at most every QUIET_PERSIST_INTERVAL (a
        # second).
        for page in (1, 2):
            assert [statement.split()[0] for statement in again.page_sql(page)] == ["SELECT"]
    assert counts[10] == counts[256] == ([7, 7], [1, 1])


def test_quiet_pages_still_save_progress_and_renew_the_lease_every_interval(uncapped, monkeypatch):
    """A walk of unchanged pages saves the run's progress and renews its lease when
    QUIET_PERSIST_INTERVAL has passed since the last save: with 0, on every page."""
    from django_orders.models import SyncLease
    from django_orders.sync import engine

    uncapped.seed(40)
    sync_orders(page_size=10)
    saved: dict[str, list] = {"pages": [], "expiry": []}

    def watch(run):
        saved["pages"].append(SyncRun.objects.get(pk=run.pk).pages)
        saved["expiry"].append(SyncLease.objects.get(resource="orders").expires_at)

    monkeypatch.setattr(engine, "QUIET_PERSIST_INTERVAL", 0.0)
    every = PageStatements()
    with every.capture:
        sync_orders(page_size=10, progress=every)
    assert [[sql.split()[0] for sql in every.page_sql(i)] for i in (1, 2, 3)] == [
        ["SELECT", "UPDATE", "UPDATE"]
    ] * 3
    sync_orders(page_size=10, progress=watch)
    assert saved["pages"] == [1, 2, 3, 4, 5]  # 4 pages and the empty one that ends the walk
    assert saved["expiry"] == sorted(saved["expiry"]) and len(set(saved["expiry"])) == 5

    # An interval longer than the walk: after the first page, nothing is saved until the end.
    monkeypatch.setattr(engine, "QUIET_PERSIST_INTERVAL", 3600.0)
    saved = {"pages": [], "expiry": []}
    run = sync_orders(page_size=10, progress=watch)
    assert saved["pages"] == [1, 1, 1, 1, 1]
    assert len(set(saved["expiry"])) == 1
    run.refresh_from_db()
    assert (run.pages, run.seen, run.unchanged, run.created, run.updated) == (5, 40, 40, 0, 0)


def test_pages_of_new_and_changed_orders_have_the_same_statements_for_sizes_10_and_256(uncapped):
    """The most a page costs: a changed customer, a new order and a changed order. On SQLite
    the new order goes in with a plain INSERT and the changed one through the upsert (whose
    foreign-key update would journal every row), so eight statements; seven on PostgreSQL
    (the new order's order.first_seen event and its deliveries are two of them). The first such
    page after an unchanged one costs one read more: the walk first asked whether its bytes were
    the stored ones, as a quiet page (``engine._WalkMode``), and, as they were not, parsed the
    page and wrote it as any other."""
    uncapped.seed(3 * 256)
    newest = uncapped.store.newest_order_ids(3 * 256)
    records = store_orders_by_id(uncapped)
    counts = {}
    for size in (10, 256):
        Order.objects.all().delete()
        Customer.objects.all().delete()
        sync_orders(page_size=size, max_pages=3)
        held_events = set(OutboxEvent.objects.values_list("pk", flat=True))
        new_again = []
        for page in range(1, 3):
            on_page = newest[page * size : (page + 1) * size]
            # A guest's customer is in this one order only, so renaming it changes one row.
            guest = next(i for i in on_page if records[i]["customer"]["guest"])
            gone = next(i for i in on_page if i != guest)
            Order.objects.filter(pk=gone).delete()  # new again to the mirror
            new_again.append(gone)
            # A change that any status takes (a status may only move forward: mirror.store).
            edit_raw_order(
                uncapped,
                guest,
                lambda r: r.update(number="EDITED", customer={**r["customer"], "name": "New"}),
            )
        statements = PageStatements()
        with statements.capture:
            run = sync_orders(page_size=size, max_pages=3, progress=statements)
        assert (run.created, run.updated) == (2, 2)
        # The edited orders' status is as stored: only the orders new again are reported.
        written = OutboxEvent.objects.exclude(pk__in=held_events)
        assert sorted(written.values_list("type", "order_id")) == sorted(
            (EventType.ORDER_FIRST_SEEN, order_id) for order_id in new_again
        )
        counts[size] = statements.per_page()
        kinds = [statement_shape(sql) for sql in statements.page_sql(2)]
        order_writes = ['INSERT INTO "django_orders_order"'] * (
            2 if connection.vendor == "sqlite" else 1
        )
        assert kinds == [
            "SELECT",
            'INSERT INTO "django_orders_customer"',
            *order_writes,
            *EVENT_WRITES,
            'UPDATE "django_orders_syncrun"',
            'UPDATE "django_orders_synclease"',
        ]
        # Page 1 wrote nothing, so page 2 was first read as a quiet page.
        assert [statement_shape(sql) for sql in statements.page_sql(1)] == ["SELECT", *kinds]
    most = 8 if connection.vendor == "sqlite" else 7
    assert counts[10] == counts[256] == [most + 1, most]


def test_a_resync_reads_no_deferred_fields_of_unchanged_pages(uncapped, monkeypatch):
    """The timestamps, checkout fields and text of an unchanged order are never read: only the
    pages the helper thread read ahead while the walk still looked like a first sync."""
    from django_orders.mirror.resources import orders as order_resource

    uncapped.seed(95)
    sync_orders()
    read: list[tuple[int, str]] = []
    original = order_resource._parse_sent

    def spy(orders):
        read.extend((order.where[1], order.id) for order in orders)
        return original(orders)

    monkeypatch.setattr(order_resource, "_parse_sent", spy)
    run = sync_orders()
    assert (run.pages, run.unchanged, run.created, run.updated) == (10, 95, 0, 0)
    # The helper is at most two pages ahead of the writer, which finds page 1 unchanged.
    assert read and {page for page, _ in read} <= {1, 2, 3}
    # A changed order is read when the writer needs it, with its page only.
    newest = uncapped.store.newest_order_ids(95)
    edit_raw_order(uncapped, newest[75], lambda r: r.update(number="ORD-CHANGED"))
    read.clear()
    run = sync_orders()
    assert (run.updated, run.unchanged) == (1, 94)
    assert (8, newest[75]) in read and {page for page, _ in read} - {8} <= {1, 2, 3, 9, 10}
    assert Order.objects.get(pk=newest[75]).number == "ORD-CHANGED"


def test_a_record_gone_bad_after_unchanged_pages_is_set_aside_naming_it(uncapped):
    """Read by the writer (the walk is in its re-sync mode), a bad record is set aside with the
    message naming page, record and field; its stored version stays, the walk goes on."""
    uncapped.seed(95)
    sync_orders()
    newest = uncapped.store.newest_order_ids(95)
    bad_id = newest[65]  # page 7, record 6
    stored = Order.objects.get(pk=bad_id).raw
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-13-01T00:00:00Z"))
    run = sync_orders()
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith(f"orders page 7, record 6 of 10 (id {bad_id}): InvalidRecord: ")
    assert "initiated_at" in problems
    assert Order.objects.get(pk=bad_id).raw == stored
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.pages, run.seen, run.unchanged, run.skipped) == (10, 94, 94, 1)


def test_a_bad_record_mid_walk_is_set_aside_and_the_walk_goes_on(uncapped):
    uncapped.seed(95)
    newest = uncapped.store.newest_order_ids(95)
    bad_id = newest[35]  # page 4, record 6
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-13-01T00:00:00Z"))
    run = sync_orders()
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith(f"orders page 4, record 6 of 10 (id {bad_id}): InvalidRecord: ")
    assert "initiated_at" in problems
    assert set(Order.objects.values_list("id", flat=True)) == set(newest) - {bad_id}
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.pages, run.seen, run.created, run.skipped) == (10, 94, 94, 1)


def test_a_page_with_nan_fails_the_run_naming_the_page_and_keeps_earlier_pages(uncapped, sleeps):
    """NaN is not JSON, and neither database stores it in a JSON column: before, it got as far
    as the page's write and failed there with an IntegrityError (SQLite's JSON_VALID check) or
    a DataError (PostgreSQL) that named neither the page nor the cause."""
    uncapped.seed(95)
    newest = uncapped.store.newest_order_ids(95)
    edit_raw_order(uncapped, newest[35], lambda r: r.update(custom_data={"ratio": float("nan")}))
    with pytest.raises(InvalidResponse) as caught:
        sync_orders()
    assert caught.value.message == (
        "orders page 4: POST /orders/page answered 200 with a body that is not JSON "
        "(NaN is not a JSON value)"
    )
    assert caught.value.message in repr(caught.value)
    assert len(sleeps) == 3  # retried like any garbled page, MAX_RETRIES times
    assert set(Order.objects.values_list("id", flat=True)) == set(newest[:30])
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.FAILED
    assert (run.pages, run.seen, run.created) == (3, 30, 30)
    assert caught.value.message in run.error


@pytest.mark.parametrize("kind", ["malformed_json", "html_502"])
def test_a_malformed_page_is_retried(uncapped, sleeps, kind):
    uncapped.seed(25)
    uncapped.add_fault(kind, path="/orders/page", times=2)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert len(sleeps) == 2
    assert_mirror_matches(uncapped)


@pytest.mark.parametrize(("kind", "error"), [("malformed_json", "not JSON"), ("html_502", "502")])
def test_a_page_that_stays_malformed_fails_the_run(uncapped, sleeps, kind, error):
    uncapped.seed(25)
    sync_orders(max_pages=1)
    uncapped.add_fault(kind, path="/orders/page", times=None)
    with pytest.raises(Exception, match=error):
        sync_orders()
    assert len(sleeps) == 3  # MAX_RETRIES retries, then the run gives up
    failed = SyncRun.objects.order_by("-id").first()
    assert failed.outcome == SyncRun.Outcome.FAILED
    assert error in failed.error
    assert Order.objects.count() == 10  # what the first run wrote stays


def test_rate_limits_and_server_errors_are_retried(uncapped, sleeps, monkeypatch):
    """Slept for real (about five seconds): the walk's gate keeps its hold until the time has
    passed, so a recorded sleep that does not pass it would be asked for again."""
    from django_orders.client.transport import OrdersClient

    def slept(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    built = OrdersClient.from_settings.__func__
    monkeypatch.setattr(
        OrdersClient, "from_settings", classmethod(lambda cls, **kw: built(cls, sleep=slept, **kw))
    )
    uncapped.seed(25)
    uncapped.add_fault("rate_limit", path="/orders/page", times=2, retry_after=2)
    uncapped.add_fault("error_before_write", path="/orders/page", times=1, status=503)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    # Retry-After honoured: waited out at the run's gate, less what passed since the 429.
    assert sleeps[:2] == pytest.approx([2.0, 2.0], abs=0.05)
    assert len(sleeps) == 3
    # The summary's counts: two 429s, about four seconds held.
    assert run.rate_limited == 2
    assert run.rate_held == pytest.approx(4.0, abs=0.1)
    assert_mirror_matches(uncapped)


def test_server_errors_past_the_retries_fail_the_run_with_the_error(uncapped, sleeps):
    uncapped.seed(5)
    uncapped.add_fault("error_before_write", path="/orders/page", times=None, status=500)
    with pytest.raises(ServerError):
        sync_orders()
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.FAILED
    assert run.error.startswith("ServerError: ")
    assert uncapped.api_key not in run.error


def test_balance_transactions_are_stored_typed_by_id(uncapped):
    uncapped.seed(60)
    total = uncapped.store.count("balance_transactions")
    assert total > 10
    run = sync_orders(resource="balance_transactions", refresh_limit=0)
    assert (run.seen, run.created) == (total, total)
    stored = {t.id: t for t in BalanceTransaction.objects.all()}
    assert len(stored) == total
    for record_id, record in stored.items():
        assert record.raw == json.loads(uncapped.store.get_json("balance_transactions", record_id))
    again = sync_orders(resource="balance_transactions", refresh_limit=0)
    assert (again.created, again.updated, again.unchanged) == (0, 0, total)
    assert Order.objects.count() == 0 and RemoteRecord.objects.count() == 0


def test_signals_are_sent_after_commit_and_a_failing_receiver_does_not_stop_the_sync(uncapped):
    uncapped.seed(15)
    states = []

    def broken(sender, order, **kwargs):
        raise RuntimeError("receiver bug")

    def observer(sender, order, **kwargs):
        states.append(connection.in_atomic_block)

    order_first_seen.connect(broken, weak=False)
    order_first_seen.connect(observer, weak=False)
    try:
        run = sync_orders()
    finally:
        order_first_seen.disconnect(broken)
        order_first_seen.disconnect(observer)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert states == [False] * 15  # every signal came after its page's transaction committed


def test_the_sync_reads_orders_pages_as_bytes_and_mirrors_them_exactly(uncapped, monkeypatch):
    """sync_orders asks for each record as its bytes (``fetch_page(raw=True)``) and the orders
    resource reads them as sent (``SentOrder``), parsed once to be written: the mirror is the
    store's all the same."""
    import msgspec

    from django_orders.mirror.resources.orders import ORDERS, SentOrder, read_orders

    kinds: list[tuple[set, set]] = []

    def spy(records, *, page_number):
        page = read_orders(records, page_number=page_number, resource="orders")
        kinds.append(({type(r) for r in records}, {type(r) for r in page}))
        return page

    monkeypatch.setattr(ORDERS, "read_page", spy)
    uncapped.seed(30)
    run = sync_orders(page_size=10)
    # 3 full pages and the empty one that ends it
    assert kinds == [({msgspec.Raw}, {SentOrder})] * 3 + [(set(), set())]
    assert_mirror_matches(uncapped)
    assert (run.seen, run.created) == (30, 30)
