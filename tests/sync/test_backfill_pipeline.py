"""The backfill's pipeline: lookups across answers, batches a transaction, checkpoints in order.

The pipeline's own bookkeeping is driven with fake lookups finished in a chosen order; the
batches and a kill between them run against the sandbox.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.client.lookups import Lookup
from django_orders.mirror.resources.orders import ORDERS
from django_orders.models import (
    EventType,
    Order,
    OrderEvent,
    OutboxEvent,
    SyncCheckpoint,
    SyncRun,
)
from django_orders.services import refresh_orders, sync_orders
from django_orders.sync import backfill
from django_orders.sync.backfill import Answer, Pipeline
from django_orders.sync.lease import Lease
from django_orders.sync.settling import store_batch
from tests.fixtures.mirror import (
    EVENT_WRITES,
    TRANSACTION_CONTROL,
    logged_statements,
    statement_shape,
    store_orders_by_id,
)

LOOKUP = "/orders/lookup"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# --- the pipeline's bookkeeping, with lookups finished in a chosen order ----------------------


@dataclass
class _Result:
    id: str
    updated_at: datetime


@dataclass
class _Page:
    """What the pipeline reads of a search answer."""

    results: list[_Result]
    has_more: bool
    next_cursor: str | None


def _until(predicate) -> None:
    """Wait for another thread to make ``predicate`` true (a deadlock fails, not a slow run)."""
    for _ in range(3000):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("the pipeline never got there")


class _Lookups:
    """A ``LookupStream`` whose lookups finish when the test says (``finish``)."""

    def __init__(self) -> None:
        self.futures: dict[str, list[Future]] = {}
        self.submitted = threading.Condition()

    def submit(self, order_id: str) -> Future:
        future: Future = Future()
        with self.submitted:
            self.futures.setdefault(order_id, []).append(future)
            self.submitted.notify_all()
        return future

    def wait_for(self, *order_ids: str) -> None:
        with self.submitted:
            assert self.submitted.wait_for(
                lambda: all(i in self.futures for i in order_ids), timeout=30
            )

    def finish(self, order_id: str) -> None:
        for future in self.futures[order_id]:
            if not future.done():
                future.set_result(Lookup(order_id, {"id": order_id}))


def _page(ids_and_moments: list[tuple[str, int]], next_cursor: str | None) -> _Page:
    results = [_Result(i, T0 + timedelta(seconds=s)) for i, s in ids_and_moments]
    return _Page(results, next_cursor is not None, next_cursor)


def _pipeline(pages: dict[str | None, _Page], lookups: _Lookups, log: list, **options):
    def store(batch: list[Lookup], moments: dict[str, datetime]) -> None:
        log.append(("stored", sorted(lookup.order_id for lookup in batch)))

    def checkpoint(answer: Answer) -> None:
        log.append(("checkpoint", answer.next_cursor, answer.results))

    return Pipeline(
        lookups,  # type: ignore[arg-type]
        search=pages.__getitem__,
        decide=lambda page: {r.id: r.updated_at for r in page.results},
        store=store,
        checkpoint=checkpoint,
        heartbeat=lambda: None,
        **options,
    )


def _run_in_thread(pipeline: Pipeline) -> threading.Thread:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run(None)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_an_answer_is_checkpointed_only_when_it_and_every_earlier_one_are_stored():
    """The second answer's lookup is stored first: its checkpoint waits for the first's."""
    pages = {None: _page([("a", 9), ("b", 8)], "c1"), "c1": _page([("c", 7)], None)}
    lookups, log = _Lookups(), []
    thread = _run_in_thread(_pipeline(pages, lookups, log, batch_size=1))
    # Both answers are read before any lookup finishes: the pool never waits for a search.
    lookups.wait_for("a", "b", "c")
    for order_id in ("c", "a", "b"):
        lookups.finish(order_id)
        _until(lambda order_id=order_id: ("stored", [order_id]) in log)
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.errors == []  # type: ignore[attr-defined]
    assert log == [
        ("stored", ["c"]),
        ("stored", ["a"]),
        ("stored", ["b"]),
        ("checkpoint", "c1", 2),
        ("checkpoint", None, 1),
    ]


def test_at_most_one_answer_is_read_ahead():
    """With the first answer's lookups unfinished, the third answer is not asked for."""
    pages = {
        None: _page([("a", 9)], "c1"),
        "c1": _page([("b", 8)], "c2"),
        "c2": _page([("c", 7)], None),
    }
    asked: list[str | None] = []
    lookups, log = _Lookups(), []
    pipeline = _pipeline(pages, lookups, log)
    pipeline.search = lambda cursor: asked.append(cursor) or pages[cursor]
    thread = _run_in_thread(pipeline)
    lookups.wait_for("a", "b")
    assert asked == [None, "c1"]
    lookups.finish("a")  # the first answer is checkpointed: the third is asked for
    lookups.wait_for("c")
    lookups.finish("b")
    lookups.finish("c")
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.errors == []  # type: ignore[attr-defined]
    assert asked == [None, "c1", "c2"]
    assert [e[1:] for e in log if e[0] == "checkpoint"] == [("c1", 1), ("c2", 1), (None, 1)]


def test_an_order_in_two_answers_is_looked_up_again_only_if_it_changed_in_between():
    pages = {
        None: _page([("a", 5), ("b", 5)], "c1"),
        "c1": _page([("a", 5), ("b", 6)], None),  # a as before, b changed since
    }
    lookups, log = _Lookups(), []
    thread = _run_in_thread(_pipeline(pages, lookups, log, batch_size=1))
    lookups.wait_for("a", "b")
    with lookups.submitted:
        assert lookups.submitted.wait_for(lambda: len(lookups.futures["b"]) == 2, timeout=30)
    for order_id in ("a", "b"):
        lookups.finish(order_id)
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.errors == []  # type: ignore[attr-defined]
    assert {i: len(f) for i, f in lookups.futures.items()} == {"a": 1, "b": 2}
    assert [e[1:] for e in log if e[0] == "checkpoint"] == [("c1", 2), (None, 2)]


def test_while_a_lookup_is_held_back_the_batch_is_written_and_the_lease_renewed(monkeypatch):
    """A lookup that does not come back (a 429's wait) holds neither the others' write nor
    the lease: past ``HEARTBEAT_SECONDS`` what was found is written (its transaction renews
    the lease), then the lease is renewed on its own."""
    monkeypatch.setattr(backfill, "HEARTBEAT_SECONDS", 0.05)
    pages = {None: _page([("a", 9), ("b", 8)], None)}
    lookups, log = _Lookups(), []
    pipeline = _pipeline(pages, lookups, log)  # a batch of 32: only the time writes "a"
    beats: list[int] = []
    pipeline.heartbeat = lambda: beats.append(1)
    thread = _run_in_thread(pipeline)
    lookups.wait_for("a", "b")
    lookups.finish("a")
    _until(lambda: ("stored", ["a"]) in log)
    _until(lambda: len(beats) >= 2)
    assert log == [("stored", ["a"])]
    lookups.finish("b")
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.errors == []  # type: ignore[attr-defined]
    assert log == [("stored", ["a"]), ("stored", ["b"]), ("checkpoint", None, 2)]


# --- batches against the sandbox ------------------------------------------------------------

#: The tests below write through the sandbox and threads: real transactions.
with_db = pytest.mark.django_db(transaction=True)


def _lookups_of(server, count: int, sent_at: datetime) -> list[Lookup]:
    held = set(Order.objects.values_list("id", flat=True))
    records = [r for i, r in store_orders_by_id(server).items() if i not in held]
    records = [r for r in records if not r.get("refunds")][:count]
    assert len(records) == count
    return [Lookup(r["id"], r, sent_at) for r in records]


@with_db
@pytest.mark.parametrize("count", [2, 8])
def test_a_batch_is_one_transaction_of_the_same_statements_whatever_its_size(history, count):
    run = SyncRun.objects.create(resource="orders")
    lease = Lease("orders")
    lease.acquire()
    lookups = _lookups_of(history, count, datetime.now(UTC))
    moments = {lookup.order_id: T0 for lookup in lookups}
    with CaptureQueriesContext(connection) as captured:
        store_batch(lookups, moments, run, lease, kind=ORDERS)
    statements = logged_statements(captured)
    work = [sql for sql in statements if not sql.startswith(TRANSACTION_CONTROL)]
    # The orders and their customers read (one statement), the customers and the orders
    # written, their order.first_seen events and deliveries (the outbox's two statements),
    # the payment transactions the paid ones embed (read, written: two statements however
    # many, none when no order of the batch embeds one), the projections settled, the run's
    # counts, the lease.
    embedded = any(
        (lookup.record.get("payment") or {}).get("balance_transaction") for lookup in lookups
    )
    payments = ["SELECT", 'INSERT INTO "django_orders_balancetransaction"'] if embedded else []
    assert [statement_shape(sql) for sql in work] == [
        "SELECT",
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
        *payments,
        'UPDATE "django_orders_order"',
        'UPDATE "django_orders_syncrun"',
        'UPDATE "django_orders_synclease"',
    ], work
    assert [sql for sql in statements if sql.startswith("COMMIT")] == ["COMMIT"]
    stored = Order.objects.filter(pk__in=moments)
    assert stored.count() == count
    assert set(stored.values_list("search_updated_at", flat=True)) == {T0}
    assert SyncRun.objects.get(pk=run.pk).feed_lookups == count == run.created
    first_seen = OutboxEvent.objects.filter(type=EventType.ORDER_FIRST_SEEN, order__in=moments)
    assert first_seen.count() == count


@with_db
def test_each_order_of_a_batch_is_weighed_against_its_own_request(history):
    """Two orders held as observed at ``seen``; answers with the same status but other
    bytes: the one whose request was sent before ``seen`` is kept out, the later one written."""
    older, newer = (o.id for o in Order.objects.order_by("id")[:2])
    refresh_orders([older, newer])
    seen = Order.objects.get(pk=older).observed_at
    Order.objects.filter(pk__in=[older, newer]).update(observed_at=seen)
    upstream = store_orders_by_id(history)
    lookups = []
    for order_id, sent in (
        (older, seen - timedelta(seconds=1)),
        (newer, seen + timedelta(seconds=1)),
    ):
        record = dict(
            upstream[order_id], customer={**upstream[order_id]["customer"], "name": "Renamed"}
        )
        lookups.append(Lookup(order_id, record, sent))
    run = SyncRun.objects.create(resource="orders")
    lease = Lease("orders")
    lease.acquire()
    store_batch(lookups, {older: T0, newer: T0}, run, lease, kind=ORDERS)
    assert Order.objects.get(pk=older).raw == upstream[older]
    kept = Order.objects.get(pk=newer)
    assert kept.raw["customer"]["name"] == "Renamed"
    assert kept.observed_at == seen + timedelta(seconds=1)
    assert (run.updated, run.unchanged, run.feed_lookups) == (1, 1, 2)


@with_db
def test_a_backfill_killed_between_batches_resumes_without_skipping_and_records_once(
    history, sandbox_paths, monkeypatch, status_changes
):
    # Two of the window's orders move on upstream: the backfill looks them up and records
    # the change once on the timeline (the feed's origin), killed or not.
    moved = list(Order.objects.filter(status="requires_payment").values_list("id", flat=True)[:2])
    assert len(moved) == 2
    for order_id in moved:
        history.set_order_status(order_id, "canceled")
    original = backfill.store_batch
    batches: list[list[str]] = []

    def killed_at_second(lookups, *args, **kwargs):
        if batches:
            raise KeyboardInterrupt  # between the first batch's commit and the second's
        batches.append([lookup.order_id for lookup in lookups])
        original(lookups, *args, **kwargs)

    monkeypatch.setattr(backfill, "store_batch", killed_at_second)
    with pytest.raises(KeyboardInterrupt):
        sync_orders(backfill=True)
    [first] = batches
    point = SyncCheckpoint.objects.get(resource="orders")
    assert Order.objects.count() == 10 + len(set(first) - set(moved))
    # Every answer the checkpoint covers is stored whole: nothing it passed is missing.
    assert point.done <= 10 - len(moved) + len(first)
    killed_lookups = sandbox_paths.count(LOOKUP)
    monkeypatch.setattr(backfill, "store_batch", original)
    run = sync_orders(backfill=True)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert set(Order.objects.values_list("id", flat=True)) == set(store_orders_by_id(history))
    assert not Order.objects.filter(search_updated_at=None).exists()
    # What the first batch stored is settled: the rerun looks up exactly the rest.
    assert sandbox_paths.count(LOOKUP) - killed_lookups == 50 + 2 - len(first)
    entries = OrderEvent.objects.filter(kind=OrderEvent.Kind.STATUS_CHANGED)
    assert sorted(entries.values_list("order_id", "source", "to_status")) == sorted(
        (order_id, OrderEvent.Source.FEED, "canceled") for order_id in moved
    )
    assert sorted(status_changes) == sorted((i, "requires_payment", "canceled") for i in moved)


@with_db
def test_a_batch_with_an_answer_the_app_cannot_use_is_written_one_by_one(history):
    """Nothing of the batch is written in one go; each order then on its own, the malformed
    one set aside (not settled: the next backfill looks it up again)."""
    run = SyncRun.objects.create(resource="orders")
    lease = Lease("orders")
    lease.acquire()
    lookups = _lookups_of(history, 3, datetime.now(UTC))
    bad = lookups[1]
    lookups[1] = Lookup(bad.order_id, {**bad.record, "initiated_at": "not a time"}, bad.sent_at)
    store_batch(lookups, {lookup.order_id: T0 for lookup in lookups}, run, lease, kind=ORDERS)
    good = {lookups[0].order_id, lookups[2].order_id}
    assert set(Order.objects.filter(search_updated_at=T0).values_list("id", flat=True)) == good
    assert not Order.objects.filter(pk=bad.order_id).exists()
    run.refresh_from_db()
    assert (run.feed_lookups, run.created, run.skipped) == (2, 2, 1)
    assert bad.order_id in run.problems
