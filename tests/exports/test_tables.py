"""The export tables: the CSV parses back to the mirror's rows, each currency in its own digits,
formulas escaped and amounts not, one query however many chunks, the cursor closed on close."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.exports import (
    ORDERS,
    REFUNDS,
    ExportFilters,
    InvalidExportFilter,
    decimal_text,
    escape_text,
    parse_instant,
)
from django_orders.models import Order, Refund
from django_orders.money import MINOR_UNIT_DIGITS, to_decimal

from .rows import START, created_here, customer, order, parse, refund

pytestmark = pytest.mark.django_db


def utc(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_orders_parse_back_to_the_mirrors_rows_in_each_currencys_digits():
    order("or_ghs", total=2450, currency="ghs", paid_at=START, completed_at=START)
    order("or_jpy", total=500, currency="jpy", hours=1)
    order("or_kwd", total=1234, currency="kwd", hours=2, number="A-17")
    order("or_none", total=None, currency="usd", status="requires_payment", hours=3)
    created_here(Order.objects.get(pk="or_ghs"), "cart-42")

    rows = parse("".join(ORDERS.stream()))

    assert [row["id"] for row in rows] == ["or_ghs", "or_jpy", "or_kwd", "or_none"]
    assert list(rows[0]) == ORDERS.header
    for row, stored in zip(rows, Order.objects.order_by("initiated_at"), strict=True):
        assert row["status"] == stored.status
        assert row["currency"] == stored.currency
        assert row["total_minor"] == ("" if stored.total is None else str(stored.total))
        if stored.total is not None:
            assert Decimal(row["total"]) == to_decimal(stored.total, stored.currency)
        assert row["customer_id"] == stored.customer_id
        assert row["customer_name"] == stored.customer.name
        assert row["customer_email"] == stored.customer.email_address
        assert row["initiated_at"] == utc(stored.initiated_at)
        assert row["paid_at"] == utc(stored.paid_at)
        assert row["completed_at"] == utc(stored.completed_at)
        assert row["canceled_at"] == ""
    # The digits as written, not only as a Decimal compares: 0, 2 and 3 places.
    assert [row["total"] for row in rows] == ["24.50", "500", "1.234", ""]
    assert [row["reference"] for row in rows] == ["cart-42", "", "", ""]
    assert rows[2]["number"] == "A-17"
    assert rows[0]["initiated_at"] == "2026-03-01T09:30:00Z"


def test_refunds_carry_their_order_and_reason():
    paid = order("or_kwd", total=5000, currency="kwd", number="N-1")
    refund("rf_1", paid, total=1005, reason="damaged", reference="ret-1", succeeded_at=START)
    refund(
        "rf_2",
        paid,
        total=7,
        reason="custom",
        hours=1,
        status="failed",
        failure_reason="insufficient_balance",
        failed_at=START,
    )

    rows = parse("".join(REFUNDS.stream()))

    assert [
        (r["id"], r["order_id"], r["order_number"], r["reason"], r["total_minor"], r["total"])
        for r in rows
    ] == [
        ("rf_1", "or_kwd", "N-1", "damaged", "1005", "1.005"),
        ("rf_2", "or_kwd", "N-1", "custom", "7", "0.007"),
    ]
    for row, stored in zip(rows, Refund.objects.order_by("created_at"), strict=True):
        assert row["reference"] == stored.reference
        assert row["status"] == stored.status
        assert row["created_at"] == utc(stored.created_at)
        assert row["succeeded_at"] == utc(stored.succeeded_at)
        assert row["failed_at"] == utc(stored.failed_at)
        assert row["failure_reason"] == stored.failure_reason


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1 555", "'+1 555"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tTab", "'\tTab"),
        ("\rReturn", "'\rReturn"),
        ("Kofi = 1", "Kofi = 1"),
        ("", ""),
    ],
)
def test_text_cells_that_start_a_formula_are_escaped(name, shown):
    order("or_1", buyer=customer("cu_1", name=name, email="=cmd|' /C calc'!A0"), number=name)

    [row] = parse("".join(ORDERS.stream()))

    assert row["customer_name"] == shown
    assert row["number"] == shown
    assert row["customer_email"] == "'=cmd|' /C calc'!A0"


def test_amounts_are_numbers_never_escaped():
    # Stored unsigned, but a mirror row written by hand may hold a negative amount: it is a
    # number and stays one, where a text cell starting with "-" is escaped.
    order("or_neg", total=-5, currency="eur", number="-5")

    [row] = parse("".join(ORDERS.stream()))

    assert (row["total_minor"], row["total"], row["number"]) == ("-5", "-0.05", "'-5")
    assert escape_text(-5) == "'-5"  # what escaping would have made of it


def test_non_ascii_text_is_utf8_and_survives_quoting():
    order("or_1", buyer=customer("cu_1", name='Abena "Nana" Ọ̀ṣun, 東京'), number="line\nbreak")

    body = "".join(ORDERS.stream()).encode("utf-8")
    [row] = parse(body)

    assert row["customer_name"] == 'Abena "Nana" Ọ̀ṣun, 東京'
    assert row["number"] == "line\nbreak"


def test_an_export_is_one_query_however_many_chunks(django_assert_num_queries):
    for index in range(7):
        order(f"or_{index}", hours=index)
    created_here(Order.objects.get(pk="or_3"), "cart-3")

    with django_assert_num_queries(1):
        chunks = list(ORDERS.stream(chunk_size=2))

    # The header rides with the first rows: four pieces of at most two rows each.
    assert len(chunks) == 4
    assert chunks[0].startswith("id,number,reference,")
    assert [row["id"] for row in parse("".join(chunks))] == [f"or_{i}" for i in range(7)]


def test_an_empty_export_is_the_header_alone():
    assert "".join(REFUNDS.stream()) == ",".join(REFUNDS.header) + "\r\n"


def test_the_filters_since_inclusive_until_exclusive_status_and_currency():
    for index, (status, currency) in enumerate(
        [("paid", "ghs"), ("paid", "usd"), ("completed", "ghs"), ("canceled", "ghs")]
    ):
        order(f"or_{index}", status=status, currency=currency, hours=index)

    def ids(**filters):
        rows = ORDERS.rows(ExportFilters(**filters))
        return [row["id"] for row in parse("".join(ORDERS.stream(rows)))]

    # or_1 is at 10:30 (since: inclusive), or_3 at 12:30 (until: exclusive).
    since, until = START.replace(hour=10, minute=30), START.replace(hour=12, minute=30)
    assert ids(since=since, until=until) == ["or_1", "or_2"]
    assert ids(since=since) == ["or_1", "or_2", "or_3"]
    assert ids(until=until) == ["or_0", "or_1", "or_2"]
    assert ids(statuses=("paid", "completed"), currency="GHS") == ["or_0", "or_2"]


def test_a_status_or_currency_that_names_nothing_is_refused_naming_the_option():
    order("or_1", status="on_hold_new", currency="xof")

    # Known, or held by a row: a status the provider added, a currency beyond the setting's.
    ORDERS.check_filters(ExportFilters(statuses=("paid", "on_hold_new"), currency="XOF"))
    with pytest.raises(InvalidExportFilter) as status:
        ORDERS.check_filters(
            ExportFilters(statuses=("paid", "payed")), option_names={"status": "--status"}
        )
    with pytest.raises(InvalidExportFilter) as currency:
        ORDERS.check_filters(ExportFilters(currency="zzz"))
    with pytest.raises(InvalidExportFilter) as empty:
        ORDERS.check_filters(ExportFilters(since=START, until=START))

    assert str(status.value).startswith("--status: no order has status 'payed'; known: ")
    assert str(currency.value).startswith("currency: no order has currency 'zzz'")
    assert empty.value.option == "until"


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026-11-01T09:30:00", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
        ("2026-11-01T09:30:00Z", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
        ("2026-11-01T10:30:00+01:00", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
    ],
)
def test_instants_are_utc_unless_they_name_their_offset(text, instant):
    assert parse_instant(text) == instant


@pytest.mark.parametrize("text", ["yesterday", "2026-02-30", "2026-13-01T00:00"])
def test_an_instant_that_does_not_parse_says_what_to_use(text):
    with pytest.raises(ValueError, match="expected an ISO 8601 date or date-time in UTC"):
        parse_instant(text)


def test_closing_the_stream_ends_the_query(django_assert_num_queries):
    for index in range(5):
        order(f"or_{index}", hours=index)
    stream = ORDERS.stream(chunk_size=2)

    first = next(stream)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_cursors")
            assert cursor.fetchone()[0] == 1  # the export's server-side cursor
    stream.close()

    assert parse(first)[0]["id"] == "or_0"
    assert stream.gi_frame is None  # finished: it reads nothing more
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_cursors")
            assert cursor.fetchone()[0] == 0
    with django_assert_num_queries(0), pytest.raises(StopIteration):
        next(stream)


def test_fractions_of_a_second_are_kept_without_trailing_zeros():
    order("or_1", paid_at=START.replace(microsecond=250000), canceled_at=None)
    order("or_2", hours=1, paid_at=START.replace(microsecond=123456))
    order("or_3", hours=2, paid_at=START.replace(microsecond=1))

    rows = parse("".join(ORDERS.stream()))

    assert [row["paid_at"] for row in rows] == [
        "2026-03-01T09:30:00.25Z",
        "2026-03-01T09:30:00.123456Z",
        "2026-03-01T09:30:00.000001Z",
    ]
    assert [row["initiated_at"] for row in rows] == [
        "2026-03-01T09:30:00Z",
        "2026-03-01T10:30:00Z",
        "2026-03-01T11:30:00Z",
    ]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_stream_opens_its_own_and_closing_ends_it():
    # As in production (autocommit): on PostgreSQL the export reads in a transaction of its
    # own, so its cursor is not WITH HOLD (materialised before the first fetch); closing the
    # stream closes the cursor and ends that transaction.
    for index in range(5):
        order(f"or_{index}", hours=index)
    stream = ORDERS.stream(chunk_size=2)

    first = next(stream)
    in_transaction = not connection.get_autocommit()
    if connection.vendor == "postgresql":
        assert in_transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT is_holdable FROM pg_cursors")
            assert cursor.fetchall() == [(False,)]
    stream.close()

    assert connection.get_autocommit()
    assert not connection.in_atomic_block
    assert [row["id"] for row in parse(first)] == ["or_0", "or_1"]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_cursors")
            assert cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_in_its_own_transaction_jit_is_off_and_the_first_fetch_is_small(monkeypatch):
    # PostgreSQL: the first byte waits neither for JIT compilation nor for a full chunk.
    from django_orders import exports

    monkeypatch.setattr(exports, "FIRST_CHUNK_SIZE", 2)
    for index in range(9):
        order(f"or_{index}", hours=index)
    postgresql = connection.vendor == "postgresql"

    with CaptureQueriesContext(connection) as queries:
        stream = ORDERS.stream(chunk_size=4)
        first = next(stream)
        if postgresql:
            with connection.cursor() as cursor:  # in the export's transaction
                cursor.execute("SHOW jit")
                assert cursor.fetchone()[0] == "off"
        rest = list(stream)
    statements = [q["sql"] for q in queries.captured_queries if q["sql"] != "SHOW jit"]

    header = ",".join(ORDERS.header) + "\r\n"
    pieces = [len(parse(header + piece)) for piece in rest]
    if postgresql:
        # (Django logs the transaction's BEGIN and COMMIT too.)
        assert [statement.split()[0] for statement in statements] == [
            "BEGIN", "SET", "DECLARE", "COMMIT"
        ]  # fmt: skip
        assert statements[1] == "SET LOCAL jit = off"
        assert (len(parse(first)), pieces) == (2, [4, 3])
        with connection.cursor() as cursor:  # the setting ended with the transaction
            cursor.execute(
                "SELECT current_setting('jit') = boot_val FROM pg_settings WHERE name = 'jit'"
            )
            assert cursor.fetchone()[0] is True
    else:
        assert [statement.split()[0] for statement in statements] == ["SELECT"]
        assert (len(parse(first)), pieces) == (4, [4, 1])


@pytest.mark.parametrize(
    "currency",
    sorted({*MINOR_UNIT_DIGITS, "ghs", "usd", "xyz"}),
)
def test_the_decimal_is_the_same_on_every_backend_in_every_currencys_digits(currency):
    # On PostgreSQL the database writes it (DecimalText); it must be decimal_text's digits.
    totals = [0, 1, 7, 10, 99, 100, 2450, 123456789, 9223372036854775807, -5, -123456]
    for index, total in enumerate(totals):
        order(f"or_{index}", total=total, currency=currency, hours=index)

    rows = parse("".join(ORDERS.stream()))

    assert [row["total"] for row in rows] == [decimal_text(t, currency) for t in totals]
    assert [row["total_minor"] for row in rows] == [str(t) for t in totals]
