"""The page writer: a fixed number of statements, unchanged rows never rewritten."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import (
    DEFAULT_DB_ALIAS,
    DataError,
    IntegrityError,
    OperationalError,
    connection,
    connections,
    transaction,
)
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_orders.mirror import comparison
from django_orders.mirror.parsing import parse_order, parse_record, parse_timestamp
from django_orders.mirror.store import (
    CUSTOMER_COLUMNS,
    CUSTOMER_UPDATE,
    ORDER_COLUMNS,
    ORDER_FIELDS,
    ORDER_UPDATE,
    RECORD_COLUMNS,
    RECORD_CONFLICT,
    RECORD_UPDATE,
    store_orders,
    store_records,
)
from django_orders.mirror.upsert import read_by_ids, upsert, write_read_rows
from django_orders.models import Customer, EventType, Order, OutboxEvent, RemoteRecord
from tests.fixtures.mirror import EVENT_WRITES, statement_shape, statement_text

pytestmark = pytest.mark.django_db


def orders(count, *, status="requires_payment", start=0, customers=None, extra=None):
    """``count`` parsed orders, each with its own customer unless ``customers`` is given."""
    return [
        parse_order(
            {
                "id": f"or_{n:06d}",
                "status": status,
                "initiated_at": f"2026-03-01T10:{n % 60:02d}:00.123Z",
                "customer": {
                    "id": f"cu_{(n % customers) if customers else n:06d}",
                    "guest": False,
                    "name": f"Customer {n}",
                },
                **(extra or {}),
            }
        )
        for n in range(start, start + count)
    ]


@pytest.mark.parametrize("size", [1, 10, 256])
def test_new_orders_take_five_statements_whatever_the_size(size, django_assert_num_queries):
    # The read, the customers, the orders, and the orders' ``order.first_seen`` events with
    # their deliveries (the outbox's two statements, however many events).
    with django_assert_num_queries(5) as captured:
        result = store_orders(orders(size))
    assert [statement_shape(q["sql"]) for q in captured.captured_queries] == [
        "SELECT",
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
    ]
    assert (result.created, result.updated, result.unchanged) == (size, 0, 0)
    assert Order.objects.count() == size
    assert Customer.objects.count() == size
    assert OutboxEvent.objects.filter(type=EventType.ORDER_FIRST_SEEN).count() == size
    assert OutboxEvent.objects.count() == size


def test_a_full_page_is_one_write_per_table_on_every_backend(django_assert_num_queries):
    """Django 5.2's bulk_create splits this on SQLite (it assumes 999 variables); the mirror
    writes one ``INSERT`` per table on every backend and version, the 256 ``order.first_seen``
    events and their deliveries included."""
    with django_assert_num_queries(5) as captured:
        store_orders(orders(256))
    texts = [statement_text(q["sql"]) for q in captured.captured_queries]
    writes = [sql.split(" (")[0] for sql in texts if sql.startswith("INSERT")]
    assert writes == [
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
    ]
    assert Order.objects.count() == Customer.objects.count() == 256


@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL: a page is one JSON value")
def test_sqlite_upserts_have_one_statement_text_whatever_the_row_count():
    """``sqlite3`` caches a compiled statement per distinct text (up to 128 a connection); one
    text per row count filled it with huge statements during a walk (20 MB)."""
    texts: list[str] = []

    def record(execute, sql, params, many, context):
        if sql.startswith("INSERT"):
            texts.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        for start, size in ((0, 1), (1, 7), (8, 256)):
            store_orders(orders(size, start=start), compare=False)
    assert len(texts) == 12  # per call: customers, orders, their events, the deliveries
    assert len(set(texts)) == 4  # one text each, whatever the row count
    assert Order.objects.count() == 1 + 7 + 256


def test_stored_values_read_back_as_given():
    (parsed,) = orders(1, status="completed", extra={"completed_at": "2026-03-01T12:00:00.5+01:00"})
    store_orders([parsed])
    order = Order.objects.select_related("customer").get()
    assert order.raw == parsed.raw
    assert order.completed_at == parsed.completed_at
    assert order.initiated_at == parsed.initiated_at
    assert order.customer.raw == parsed.customer.raw
    assert Order.objects.filter(raw__status="completed").exists()  # real JSON, queryable


def test_unchanged_orders_are_not_written_and_keep_changed_at(django_assert_num_queries):
    store_orders(orders(20), now=timezone.now() - timedelta(days=1))
    before = dict(Order.objects.values_list("id", "changed_at"))
    with django_assert_num_queries(1) as captured:  # the fingerprint read, nothing else
        result = store_orders(orders(20))
    (read,) = captured.captured_queries
    assert read["sql"].startswith("SELECT")
    assert '"django_orders_customer"' in read["sql"] and '"django_orders_order"' in read["sql"]
    assert (result.created, result.updated, result.unchanged) == (0, 0, 20)
    assert dict(Order.objects.values_list("id", "changed_at")) == before


def test_a_changed_order_is_rewritten_and_its_status_change_reported():
    old = timezone.now() - timedelta(days=1)
    store_orders(orders(3), now=old)
    changed = orders(1, status="completed", extra={"completed_at": "2026-03-02T00:00:00Z"})
    result = store_orders(changed + orders(2, start=1))
    assert (result.created, result.updated, result.unchanged) == (0, 1, 2)
    assert [(o.id, prev, o.status) for o, prev in result.status_changes] == [
        ("or_000000", "requires_payment", "completed")
    ]
    order = Order.objects.get(pk="or_000000")
    assert order.status == "completed"
    assert order.changed_at > old
    assert order.first_seen_at == old  # an update never moves first_seen_at
    assert Order.objects.get(pk="or_000001").changed_at == old


def test_new_and_changed_orders_in_one_call(django_assert_num_queries):
    """On SQLite new orders go in with a plain INSERT and only changed ones through the upsert,
    whose foreign-key update makes SQLite journal every row (upsert.write_read_rows); elsewhere
    one upsert writes both."""
    old = timezone.now() - timedelta(days=1)
    store_orders(orders(3), now=old)
    changed = orders(1, status="completed", extra={"completed_at": "2026-03-02T00:00:00Z"})
    sqlite = connection.vendor == "sqlite"
    held_events = set(OutboxEvent.objects.values_list("pk", flat=True))
    # The last statements: the events (two ``order.first_seen``, ``order.paid`` and
    # ``order.completed``) in the outbox's two statements, and the status change's entry on
    # the order's timeline.
    with django_assert_num_queries(7 if sqlite else 6) as captured:
        result = store_orders(changed + orders(2, start=1) + orders(2, start=3))
    assert (result.created, result.updated, result.unchanged) == (2, 1, 2)
    texts = [statement_text(q["sql"]) for q in captured.captured_queries]
    assert [statement_shape(sql) for sql in texts[-3:]] == [
        *EVENT_WRITES,
        'INSERT INTO "django_orders_orderevent"',
    ]
    written = OutboxEvent.objects.exclude(pk__in=held_events)
    assert sorted(written.values_list("type", "order_id")) == [
        (EventType.ORDER_COMPLETED, "or_000000"),
        (EventType.ORDER_FIRST_SEEN, "or_000003"),
        (EventType.ORDER_FIRST_SEEN, "or_000004"),
        (EventType.ORDER_PAID, "or_000000"),
    ]
    order_writes = [sql for sql in texts if sql.startswith('INSERT INTO "django_orders_order"')]
    if sqlite:
        assert ["ON CONFLICT" in sql for sql in order_writes] == [False, True]
    else:
        assert ["ON CONFLICT" in sql for sql in order_writes] == [True]
    assert Order.objects.get(pk="or_000000").status == "completed"
    assert set(Order.objects.values_list("id", flat=True)) == {f"or_{n:06d}" for n in range(5)}
    assert Order.objects.filter(first_seen_at__gt=old).count() == 2


def _order_row(parsed, **given) -> tuple:
    """``parsed`` as a row of ``ORDER_COLUMNS``, with the ``given`` values in place of its own."""
    now = timezone.now()
    values = {name: getattr(parsed, name) for name in ORDER_FIELDS}
    values.update(id=parsed.id, customer=parsed.customer.id, raw=parsed.raw_json)
    values.update(fingerprint=parsed.fingerprint, wire_fingerprint="", refreshed_at=None)
    values.update(first_seen_at=now, changed_at=now, observed_at=None)
    values.update(given)
    return tuple(values[column] for column in ORDER_COLUMNS)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="PostgreSQL upserts absent rows too")
def test_rows_read_as_absent_but_there_are_never_skipped():
    """SQLite's plain INSERT of absent rows relies on the read: were a row there after all, the
    write fails (and the page with it, which the walk then writes record by record); it never
    silently keeps the old row."""
    store_orders(orders(1))
    rows = [_order_row(parsed) for parsed in orders(2, status="completed")]
    with pytest.raises(IntegrityError, match="UNIQUE"), transaction.atomic():
        write_read_rows(Order, ORDER_COLUMNS, rows, [], ORDER_UPDATE)
    assert list(Order.objects.values_list("status", flat=True)) == ["requires_payment"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite inserts any absent row")
def test_a_single_absent_row_inserted_meanwhile_is_left_to_the_caller_on_postgresql():
    """A lookup writes one order through the upsert (no page to fall back on); a row another
    transaction inserted after the read is left as it is and returned: the caller decides on
    it as a stored row (``store_orders``, the lifecycle rule)."""
    store_orders(orders(1))
    (parsed,) = orders(1, status="completed", extra={"completed_at": "2026-03-02T00:00:00Z"})
    with transaction.atomic():
        meanwhile = write_read_rows(
            Order, ORDER_COLUMNS, [_order_row(parsed)], [], ORDER_UPDATE, guard=True
        )
    assert meanwhile == {parsed.id}
    assert Order.objects.get().status == "requires_payment"


def test_absent_rows_read_back_exactly_as_given():
    """What the write of new rows stores, value by value: text with tabs, newlines,
    backslashes and a literal \\N, JSON text,
    NULLs, booleans, big integers and datetimes to the microsecond in another zone."""
    tricky = 'tab\there, line\nbreak, back\\slash, \\N, "quoted", \u00e9\u20ac\U0001f600'
    when = datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=ZoneInfo("Asia/Kolkata"))
    raw = {"id": "or_a", "note": tricky, "nested": {"list": [1, 2.5, None, True]}}
    parsed = parse_order(
        {
            **raw,
            "status": "paid",
            "initiated_at": "2026-03-01T10:00:00.123456+05:30",
            "customer": {"id": "cu_a", "guest": True, "name": tricky},
        }
    )
    other = orders(1, start=7)[0]
    big = 9_007_199_254_740_993  # past a double's exact integers
    rows = [
        _order_row(
            parsed,
            total=big,
            currency="EUR",
            number="N-1",
            payment_url="https://pay.example/\\N",
            paid_at=when,
            canceled_at=None,
            expires_at=when,
            observed_at=when,
        ),
        _order_row(other),
    ]
    with transaction.atomic():
        customers = [_customer_row(parsed.customer), _customer_row(other.customer)]
        write_read_rows(Customer, CUSTOMER_COLUMNS, customers, [], CUSTOMER_UPDATE)
        write_read_rows(Order, ORDER_COLUMNS, rows, [], ORDER_UPDATE)
    stored = Order.objects.select_related("customer").get(pk="or_a")
    assert stored.raw == parsed.raw and stored.raw["note"] == tricky
    assert stored.customer.name == tricky and stored.customer.guest is True
    assert stored.initiated_at == parsed.initiated_at == when
    assert (stored.completed_at, stored.canceled_at, stored.refreshed_at) == (None, None, None)
    assert (stored.total, stored.currency, stored.number) == (big, "EUR", "N-1")
    assert (stored.payment_url, stored.paid_at, stored.expires_at) == (
        "https://pay.example/\\N",
        when,
        when,
    )
    assert stored.observed_at == when
    assert Order.objects.get(pk=other.id).raw == other.raw
    assert Order.objects.filter(raw__note=tricky).exists()  # real JSON, queryable


def _customer_row(customer) -> tuple:
    """``customer`` as a row of ``CUSTOMER_COLUMNS``."""
    now = timezone.now()
    return (
        customer.id,
        customer.guest,
        customer.name,
        customer.raw_json,
        customer.fingerprint,
        "",
        now,
        now,
        customer.email_address,
        customer.phone_number,
    )


def _insert_order_elsewhere(path: str, order_id: str) -> str:
    """Commit one customer and one order on a connection of its own; what SQLite said."""
    other = sqlite3.connect(path, timeout=0)
    now = "2026-03-01 10:00:00"
    try:
        other.execute(
            'INSERT INTO "django_orders_customer" (id, guest, name, raw, fingerprint, '
            "first_seen_at, changed_at, email_address, phone_number) "
            "VALUES (?, 0, ?, '{}', '', ?, ?, '', '')",
            ("cu_elsewhere", "Elsewhere", now, now),
        )
        other.execute(
            'INSERT INTO "django_orders_order" (id, status, initiated_at, raw, fingerprint, '
            "first_seen_at, changed_at, customer_id, currency, number, payment_url) "
            "VALUES (?, 'paid', ?, '{}', '', ?, ?, ?, '', '', '')",
            (order_id, now, now, now, "cu_elsewhere"),
        )
        other.commit()
        return "committed"
    except sqlite3.OperationalError as exc:
        other.rollback()
        return str(exc)
    finally:
        other.close()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's locking")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["DELETE", "WAL"])
def test_no_other_connection_slips_an_order_in_between_the_read_and_the_insert(mode, monkeypatch):
    """What the plain INSERT of new orders rests on (upsert.write_read_rows). Another connection
    inserts the same order right after the page's read: with the rollback journal it cannot
    commit while the page's transaction holds its read lock; in WAL mode it commits, and then
    the page's write fails as locked (its snapshot is stale) and rolls back whole. Either way
    the order is never an IntegrityError, nor skipped."""
    (parsed,) = orders(1)
    path = connection.settings_dict["NAME"]
    said = []

    def read_then_race(*reads, **options):
        rows = read_by_ids(*reads, **options)
        said.append(_insert_order_elsewhere(path, parsed.id))
        return rows

    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA journal_mode = {mode}")
    try:
        monkeypatch.setattr(comparison, "read_by_ids", read_then_race)
        if mode == "DELETE":
            with transaction.atomic():
                store_orders([parsed])
            assert said == ["database is locked"]
            assert Order.objects.get().customer_id == parsed.customer.id  # ours, written
        else:
            with pytest.raises(OperationalError, match="locked"), transaction.atomic():
                store_orders([parsed])
            assert said == ["committed"]
            assert Order.objects.get().customer_id == "cu_elsewhere"  # theirs, left whole
            assert not Customer.objects.filter(pk=parsed.customer.id).exists()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode = DELETE")


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_new_orders_go_through_the_upsert():
    """In autocommit the read and the write are two transactions, so the premise of SQLite's
    plain INSERT does not hold: the writer goes through the upsert."""
    texts: list[str] = []

    def record(execute, sql, params, many, context):
        texts.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        store_orders(orders(3))
    order_writes = [sql for sql in texts if '"django_orders_order" (' in sql]
    assert len(order_writes) == 1 and "ON CONFLICT" in order_writes[0]
    assert order_writes[0].startswith('INSERT INTO "django_orders_order"')
    assert Order.objects.count() == 3


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's drivers")
def test_on_psycopg2_new_rows_go_through_the_upsert(monkeypatch):
    """Django 5.2 also runs PostgreSQL on psycopg2, whose cursor has no ``copy()``."""
    from django.db.backends.postgresql import psycopg_any

    monkeypatch.setattr(psycopg_any, "is_psycopg3", False)
    with CaptureQueriesContext(connection) as captured:
        store_orders(orders(3))
    texts = [q["sql"] for q in captured.captured_queries]
    writes = [sql.split(" (")[0] for sql in texts if not sql.startswith("SELECT")]
    assert writes == [
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,  # the orders' order.first_seen events and their deliveries
    ]
    assert Order.objects.count() == 3


def test_compare_false_writes_through_the_upsert_over_a_stored_order():
    """Without the read nothing is known to be absent, so a stored order is overwritten."""
    store_orders(orders(1))
    changed = orders(1, status="completed", extra={"completed_at": "2026-03-02T00:00:00Z"})
    with transaction.atomic():
        store_orders(changed, compare=False)
    assert Order.objects.get().status == "completed"


def test_compare_false_writes_in_four_statements(django_assert_num_queries):
    # No read: the customers, the orders, the ``order.first_seen`` event and its deliveries.
    with django_assert_num_queries(4) as captured:
        result = store_orders(orders(1), compare=False)
    assert [statement_shape(q["sql"]) for q in captured.captured_queries] == [
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
    ]
    assert result.created == 1
    assert Order.objects.get().customer_id == "cu_000000"


def test_duplicates_in_one_call_count_once_and_the_first_copy_wins():
    first = orders(1, status="completed", extra={"completed_at": "2026-03-02T00:00:00Z"})
    result = store_orders(first + orders(1))
    assert result.created == 1
    assert Order.objects.get().status == "completed"


def test_known_customers_are_not_rewritten_from_older_orders(django_assert_num_queries):
    known: set[str] = set()
    store_orders(orders(5, customers=5), known_customers=known)
    assert known == {f"cu_{n:06d}" for n in range(5)}
    # Older orders of the same customers, with another summary: left alone within the walk.
    # Only the order read and insert, and the new orders' ``order.first_seen`` events.
    with django_assert_num_queries(4) as captured:
        store_orders(orders(5, start=5, customers=5), known_customers=known)
    assert [statement_shape(q["sql"]) for q in captured.captured_queries] == [
        "SELECT",
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
    ]
    assert Customer.objects.get(pk="cu_000000").name == "Customer 0"


def test_refreshed_stamps_every_order_but_changed_at_only_on_changes():
    old = timezone.now() - timedelta(days=1)
    store_orders(orders(2), now=old)
    now = timezone.now()
    store_orders(orders(1), now=now, refreshed=True)
    order = Order.objects.get(pk="or_000000")
    assert order.refreshed_at == now
    assert order.changed_at == old
    assert Order.objects.get(pk="or_000001").refreshed_at is None


def test_generic_records_are_upserted_raw_and_unchanged_skipped(django_assert_num_queries):
    records = [parse_record({"id": f"bt_{n}", "amount": n}) for n in range(10)]
    with django_assert_num_queries(2):
        result = store_records("balance_transactions", records)
    assert result.created == 10
    changed = [parse_record({"id": "bt_3", "amount": 33}), *records[:3]]
    result = store_records("balance_transactions", changed)
    assert (result.created, result.updated, result.unchanged) == (0, 1, 3)
    stored = RemoteRecord.objects.get(resource="balance_transactions", remote_id="bt_3")
    assert stored.raw == {"id": "bt_3", "amount": 33}
    assert stored.resource == "balance_transactions"


def test_two_resources_with_the_same_remote_id_are_both_kept():
    """Remote ids are unique per resource only: neither record overwrites the other."""
    store_records("payouts", [parse_record({"id": "x_1", "kind": "payout"})])
    store_records("balance_transactions", [parse_record({"id": "x_1", "kind": "transaction"})])
    result = store_records("payouts", [parse_record({"id": "x_1", "kind": "payout"})])
    assert (result.created, result.updated, result.unchanged) == (0, 0, 1)
    stored = {r.resource: r.raw for r in RemoteRecord.objects.filter(remote_id="x_1")}
    assert stored == {
        "payouts": {"id": "x_1", "kind": "payout"},
        "balance_transactions": {"id": "x_1", "kind": "transaction"},
    }


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite does not enforce lengths")
def test_a_value_too_long_for_its_column_is_refused_not_truncated():
    """The values are cast to the column's type without its length: an explicit cast to
    varchar(64) would cut the id silently, the assignment to the column refuses it."""
    now = timezone.now()
    row = ("cu_" + "x" * 62, False, "Long", '{"id": "long"}', "f", "", now, now, "", "")
    with pytest.raises(DataError, match="too long"), transaction.atomic():
        upsert(Customer, CUSTOMER_COLUMNS, [row, ("cu_ok", *row[1:])], CUSTOMER_UPDATE)
    assert not Customer.objects.exists()
    # A value every row shares travels as a parameter of its own: refused all the same.
    record = ("x" * 65, "bt_1", '{"id": "bt_1"}', "f", now, now)
    with pytest.raises(DataError, match="too long"), transaction.atomic():
        rows = [record, (record[0], "bt_2", *record[2:])]
        upsert(RemoteRecord, RECORD_COLUMNS, rows, RECORD_UPDATE, conflict=RECORD_CONFLICT)
    assert not RemoteRecord.objects.exists()
    # New rows: refused all the same.
    with pytest.raises(DataError, match="too long"), transaction.atomic():
        write_read_rows(Customer, CUSTOMER_COLUMNS, [("cu_ok", *row[1:]), row], [], ())
    assert not Customer.objects.exists()


def test_each_column_arrives_with_its_type_and_nulls():
    """Several rows (one array per column, shared values sent once) read back exactly."""
    now = timezone.now()
    rows = [
        ("cu_a", True, "Ama", '{"id": "cu_a", "guest": true}', "f1", "w1", now, now, "a@x.gh", ""),
        ("cu_b", False, "", '{"id": "cu_b", "name": null}', "f2", "", now, now, "", "+2332"),
    ]
    upsert(Customer, CUSTOMER_COLUMNS, rows, CUSTOMER_UPDATE)
    stored = {c.id: c for c in Customer.objects.all()}
    assert (stored["cu_a"].guest, stored["cu_a"].raw) == (True, {"id": "cu_a", "guest": True})
    assert (stored["cu_b"].guest, stored["cu_b"].raw) == (False, {"id": "cu_b", "name": None})
    assert stored["cu_a"].first_seen_at == stored["cu_b"].changed_at == now
    assert (stored["cu_a"].email_address, stored["cu_b"].phone_number) == ("a@x.gh", "+2332")
    assert (stored["cu_a"].wire_fingerprint, stored["cu_b"].wire_fingerprint) == ("w1", "")


@contextmanager
def database_time_zone(name):
    """The connection's TIME_ZONE setting (SQLite stores naive datetimes in it)."""
    wrapper = connections[DEFAULT_DB_ALIAS]  # not the proxy: its cached properties are reset
    previous = wrapper.settings_dict["TIME_ZONE"]

    def use(zone):
        wrapper.settings_dict["TIME_ZONE"] = zone
        for cached in ("timezone", "timezone_name"):
            wrapper.__dict__.pop(cached, None)

    use(name)
    try:
        yield
    finally:
        use(previous)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite stores datetimes as text")
@pytest.mark.parametrize("zone", [None, "Asia/Tokyo"])
def test_sqlite_datetimes_are_stored_as_django_writes_them(zone):
    """The upsert formats datetimes itself (Django's per-value adaptation was a fifth of the
    writer's time); the stored text must be exactly what Django writes, in the connection's
    zone, for every form of value the mirror meets."""
    values = [
        parse_timestamp("2026-03-01T10:00:00Z"),  # no fraction: no ".000000" either
        parse_timestamp("2026-03-01T10:00:00.123456789Z"),
        parse_timestamp("2026-03-01T23:30:00.5-05:00"),  # the next day in UTC
        timezone.now(),
        datetime(2026, 3, 1, 10, 0, tzinfo=ZoneInfo("Europe/Paris")),  # not UTC at all
    ]
    with database_time_zone(zone):
        rows = [
            (f"cu_{n}", False, "", "{}", "f", "", value, value, "", "")
            for n, value in enumerate(values)
        ]
        upsert(Customer, CUSTOMER_COLUMNS, rows, CUSTOMER_UPDATE)
        with connection.cursor() as cursor:
            # As text: the backend would decode the column into a datetime.
            cursor.execute("SELECT id, changed_at || '' FROM django_orders_customer ORDER BY id")
            stored = cursor.fetchall()
        expected = [
            (f"cu_{n}", connection.ops.adapt_datetimefield_value(value))
            for n, value in enumerate(values)
        ]
        assert stored == expected
        assert [c.changed_at for c in Customer.objects.order_by("id")] == values
    assert stored[0][1] == ("2026-03-01 19:00:00" if zone else "2026-03-01 10:00:00")
