"""A first sync past ``START_AFTER_RECORDS`` reads its pages in a helper process
(``sync.parse_process``). The pages it rebuilds are the pages the reading thread makes, the
mirror it writes is the same, a re-sync never starts it, and anything that keeps it from
answering (it cannot start, it dies, it fails on a page) makes the walk read the page itself."""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import threading
import time
from typing import Any

import msgspec
import pytest

from django_orders.mirror.resources.order_pages import carried_refunds, complete, read_orders
from django_orders.mirror.resources.order_transfer import read_shipped, rebuilt
from django_orders.mirror.resources.orders import ORDERS, page_refunds
from django_orders.mirror.resources.registry import ReadApart
from django_orders.models import Customer, Order, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import parse_process
from django_orders.sync.parse_process import PagesApart
from tests.sync.test_set_aside import order

ORDER_FIELDS = (
    "id",
    "status",
    "initiated_at",
    "completed_at",
    "paid_at",
    "canceled_at",
    "expires_at",
    "total",
    "currency",
    "number",
    "payment_url",
    "raw_json",
    "fingerprint",
    "wire_fingerprint",
    "raw",
)
CUSTOMER_FIELDS = (
    "id",
    "guest",
    "name",
    "email_address",
    "phone_number",
    "raw_json",
    "fingerprint",
    "wire_fingerprint",
    "raw",
)


def refund(order_id: str, number: int) -> dict[str, Any]:
    return {
        "id": f"rf_{number}",
        "order_id": order_id,
        "status": "succeeded",
        "amount": 500,
        "currency": "EUR",
        "created_at": "2026-01-03T10:00:00Z",
    }


def full(number: int) -> str:
    """An order with every checkout field, floats in its line items, and a refund."""
    record = json.loads(order(number, extra='"currency": "EUR"'))
    record.update(
        total=1999,
        number=f"N-{number}",
        payment_url=f"https://pay.example/{number}",
        completed_at="2026-01-02T10:00:00+02:00",
        paid_at="2026-01-02T09:00:00.123456Z",
        items=[{"name": "Tea", "weight": 0.25, "quantity": 2}],
        refunds=[refund(f"or_{number}", number)],
    )
    record["customer"].update(email="a@example.com", phone="+4912345", guest=True)
    return json.dumps(record, ensure_ascii=False)


PAGE = [
    order(1),
    full(2),
    order(3, customer="cu_1"),  # the same customer as order 1
    # NUL: parsed at once (made storable), with a refund.
    order(4, extra=f'"refunds": [{json.dumps(refund("or_4", 4))}]').replace(
        "Customer 4", "Cust\\u0000omer"
    ),
    order(5).replace('"paid"', '"x' + "s" * 70 + '"'),  # status too long: set aside
    '{"id": "or_6", "status": "paid", "customer": {"id": 7}}',  # not vouched, malformed
    order(7, extra=r'"note": "caf\u00e9 \ud83d\ude00 \u00e9"'),
    order(8).replace("2026-01-08", "2026-02-30"),  # read light, set aside when read in full
    order(1),  # a copy later on the page
]


def raw(records: list[str]) -> list[msgspec.Raw]:
    return [msgspec.Raw(text.encode()) for text in records]


def on_thread(records: list[str], number: int = 3):
    """The page as the walk's reading thread makes it for a first sync."""
    page = read_orders(raw(records), page_number=number, resource="orders")
    page[:], malformed = complete(page, encode=True)
    page.set_aside.extend(malformed)
    return page


def value_of(record: Any, name: str) -> Any:
    """A field of a parsed record; the decoded record as sorted JSON: a rebuilt one is decoded
    from its canonical text, so its keys come sorted (equal, in another order)."""
    value = getattr(record, name)
    return json.dumps(value, sort_keys=True) if name == "raw" else value


def described(page) -> dict[str, Any]:
    """Everything the writer reads of a page: each order's and customer's values, the refunds
    it carries, and what was set aside."""
    return {
        "orders": [
            (
                {name: value_of(o, name) for name in ORDER_FIELDS},
                {name: value_of(o.customer, name) for name in CUSTOMER_FIELDS},
                carried_refunds(o),
            )
            for o in page
        ],
        "refunds": page_refunds(page),
        "set_aside": [(where, type(exc), str(exc)) for where, exc in page.set_aside],
    }


def test_a_page_rebuilt_from_the_helpers_answer_is_the_page_the_thread_reads():
    records = [text.encode() for text in PAGE]
    # Through pickle, as the answer travels.
    answer = pickle.loads(pickle.dumps(read_shipped(records, 3, "orders")))  # noqa: S301
    rebuilt_page = rebuilt(answer, 3, "orders", len(records))
    expected = described(on_thread(PAGE))
    assert len(expected["orders"]) == 6 and len(expected["set_aside"]) == 3
    assert expected["refunds"] == [refund("or_2", 2), refund("or_4", 4)]
    assert expected["set_aside"][2][2].startswith("order or_8: initiated_at")
    # repr: the same types too (an int is not a float), and the same order of keys.
    assert repr(described(rebuilt_page)) == repr(expected)


def answered(apart: PagesApart, records: list[str], number: int):
    """``apart.read`` of a page once the helper answers (it starts on a first call past the
    threshold, and says it is ready a moment later)."""
    deadline = time.monotonic() + 30
    while (page := apart.read(raw(records), number)) is None:
        assert time.monotonic() < deadline, "the helper never answered"
        time.sleep(0.02)
    return page


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(parse_process, "START_AFTER_RECORDS", 0)


def test_the_helper_process_reads_a_page_as_the_thread_does(low_threshold):
    apart = PagesApart(ORDERS.read_apart, "orders")
    try:
        page = answered(apart, PAGE, 3)
        process = apart._process
        assert process is not None and process.poll() is None
    finally:
        apart.close()
    assert repr(described(page)) == repr(described(on_thread(PAGE)))
    assert apart.read_apart == 1 and apart.read_here >= 1
    # Closed: its stdin closed, it has exited.
    assert process.returncode == 0
    assert apart.read(raw(PAGE), 4) is None


def test_below_the_threshold_no_helper_is_started():
    apart = PagesApart(ORDERS.read_apart, "orders")
    records = [order(n) for n in range(1, 11)]
    for number in range(1, parse_process.START_AFTER_RECORDS // 10 + 1):
        assert apart.read(raw(records), number) is None
    assert apart._process is None and apart.read_here == parse_process.START_AFTER_RECORDS // 10


def test_a_page_the_helper_fails_on_is_read_here_and_the_next_one_by_the_helper(
    low_threshold, caplog
):
    failing = ReadApart(reader="tests.sync.apart_readers:fail_on_page_2", rebuild=rebuilt)
    apart = PagesApart(failing, "orders")
    try:
        first = answered(apart, PAGE, 1)
        with caplog.at_level(logging.INFO, logger="django_orders.sync"):
            assert apart.read(raw(PAGE), 2) is None
        third = apart.read(raw(PAGE), 3)
    finally:
        apart.close()
    assert (first, third) == ([], [])
    assert apart.read_apart == 2
    (logged,) = caplog.records
    assert logged.getMessage() == (
        "orders page 2: the parsing process failed (RuntimeError: page 2 cannot be read)"
    )


def test_a_helper_that_dies_hands_the_pages_back_to_the_thread(low_threshold, caplog):
    apart = PagesApart(ORDERS.read_apart, "orders")
    answered(apart, PAGE, 1)
    apart._process.kill()
    apart._process.wait()
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        assert apart.read(raw(PAGE), 2) is None
        assert apart.read(raw(PAGE), 3) is None
    (logged,) = caplog.records
    assert logged.getMessage() == (
        "The sync's parsing process stopped: it ended (exit code -9); reading orders pages on "
        "the sync's own thread."
    )
    assert apart._process is None


def test_what_the_helper_prints_never_reaches_its_answers(low_threshold):
    printing = ReadApart(reader="tests.sync.apart_readers:print_then_answer", rebuild=rebuilt)
    apart = PagesApart(printing, "orders")
    try:
        assert answered(apart, PAGE, 1) == []
        assert apart.read(raw(PAGE), 2) == []
    finally:
        apart.close()
    assert apart.read_apart == 2


def test_output_written_to_its_stdout_by_any_means_never_reaches_its_answers(low_threshold):
    writing = ReadApart(reader="tests.sync.apart_readers:write_to_fd_1", rebuild=rebuilt)
    apart = PagesApart(writing, "orders")
    try:
        assert answered(apart, PAGE, 1) == []
        assert apart.read(raw(PAGE), 2) == []
    finally:
        apart.close()


def as_sent(answer: Any, *_: Any) -> Any:
    return answer


def test_the_helper_runs_isolated_with_an_empty_environment_and_the_syncs_path(
    low_threshold, monkeypatch
):
    monkeypatch.setenv("DATABASE_PASSWORD", "not for the helper")
    probe = ReadApart(reader="tests.sync.apart_readers:environment", rebuild=as_sent)
    apart = PagesApart(probe, "orders")
    try:
        environment, isolated, path = answered(apart, PAGE, 1)
    finally:
        apart.close()
    # PATH, and LC_CTYPE if Python coerced the C locale to UTF-8 (PEP 538).
    assert environment["PATH"] == os.defpath and set(environment) <= {"PATH", "LC_CTYPE"}
    assert isolated == 1
    assert path == [entry or os.getcwd() for entry in sys.path]


def test_a_page_of_decoded_records_is_read_here_and_the_helper_goes_on(low_threshold):
    apart = PagesApart(ORDERS.read_apart, "orders")
    try:
        answered(apart, PAGE, 1)
        # The transport decodes a body it cannot keep as bytes (a lone surrogate).
        assert apart.read([json.loads(order(9))], 2) is None
        assert len(apart.read(raw(PAGE), 3)) == 6
    finally:
        apart.close()
    assert (apart.read_apart, apart._gone) == (2, True)


def test_an_answer_this_process_cannot_rebuild_leaves_the_pages_here(
    low_threshold, monkeypatch, caplog
):
    def unreadable(answer, *_):
        raise ValueError("not a row of this version")

    monkeypatch.setattr(parse_process, "READY_WAIT", 30.0)
    apart = PagesApart(ReadApart(ORDERS.read_apart.reader, unreadable), "orders")
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        assert [apart.read(raw(PAGE), n) for n in (1, 2, 3)] == [None] * 3
    (logged,) = caplog.records
    assert "its answer to page" in logged.getMessage()
    assert "could not be read (ValueError('not a row of this version'))" in logged.getMessage()
    assert apart._process is None and apart.read_apart == 0


def test_a_helper_running_other_code_than_the_sync_is_not_used(low_threshold, monkeypatch, caplog):
    monkeypatch.setattr(parse_process, "reader_version", lambda module: ("0.0.0", None))
    monkeypatch.setattr(parse_process, "READY_WAIT", 30.0)
    apart = PagesApart(ORDERS.read_apart, "orders")
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        assert [apart.read(raw(PAGE), n) for n in (1, 2, 3)] == [None] * 3
    (logged,) = caplog.records
    assert logged.getMessage().startswith(
        "The sync's parsing process stopped: it runs another version of django-orders than "
        "this process ("
    )
    assert "restart it;" in logged.getMessage()


def test_closing_while_the_parsing_thread_waits_for_an_answer_ends_both(low_threshold):
    slow = ReadApart(reader="tests.sync.apart_readers:sleep_on_page_2", rebuild=rebuilt)
    apart = PagesApart(slow, "orders")
    answered(apart, PAGE, 1)
    process = apart._process
    outcome: list = []
    reading = threading.Thread(target=lambda: outcome.append(apart.read(raw(PAGE), 2)))
    reading.start()
    time.sleep(0.3)  # inside the read of page 2, which the helper sleeps on
    started = time.monotonic()
    apart.close()
    reading.join(timeout=10)
    assert not reading.is_alive() and outcome == [None]
    assert time.monotonic() - started < 5  # killed, not waited for
    assert process.returncode == -9
    assert process.stdin.closed and process.stdout.closed


def test_a_helper_that_does_not_answer_is_stopped_and_the_page_read_here(
    low_threshold, monkeypatch, caplog
):
    monkeypatch.setattr(parse_process, "ANSWER_TIMEOUT", 0.5)
    slow = ReadApart(reader="tests.sync.apart_readers:sleep_on_page_2", rebuild=rebuilt)
    apart = PagesApart(slow, "orders")
    answered(apart, PAGE, 1)
    process = apart._process
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        assert apart.read(raw(PAGE), 2) is None
        assert apart.read(raw(PAGE), 3) is None
    (logged,) = caplog.records
    assert logged.getMessage().startswith(
        "The sync's parsing process stopped: it did not answer page 2 within 0.5 s;"
    )
    assert apart._process is None and process.returncode is not None


@pytest.mark.parametrize(
    ("executable", "why"),
    [
        (
            "/usr/lib/uwsgi/uwsgi",
            "sys.executable '/usr/lib/uwsgi/uwsgi' is not a Python interpreter",
        ),
        ("/nowhere/python3", "it could not start ([Errno 2] No such file or directory"),
    ],
)
def test_a_helper_that_cannot_start_leaves_the_pages_to_the_thread(
    low_threshold, monkeypatch, caplog, executable, why
):
    monkeypatch.setattr(sys, "executable", executable)
    apart = PagesApart(ORDERS.read_apart, "orders")
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        assert [apart.read(raw(PAGE), n) for n in (1, 2, 3)] == [None] * 3
    (logged,) = caplog.records
    assert logged.getMessage().startswith(f"The sync's parsing process stopped: {why}")
    assert apart.read_here == 3 and apart._process is None


# --- a whole first sync -----------------------------------------------------------------------


@pytest.fixture
def helpers(monkeypatch) -> list[PagesApart]:
    """Every walk's ``PagesApart``, kept; the helper waited for until it is ready, so a small
    walk uses it from its second page on."""
    made: list[PagesApart] = []

    class Kept(PagesApart):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.started: list = []
            made.append(self)

        def _usable(self):
            process = super()._usable()
            if self._process is not None and self._process not in self.started:
                self.started.append(self._process)
            return process

    monkeypatch.setattr(parse_process, "PagesApart", Kept)
    monkeypatch.setattr(parse_process, "READY_WAIT", 30.0)
    return made


def mirrored() -> dict[str, list[tuple]]:
    """The mirror's rows, without the times of the writing."""
    return {
        "orders": list(
            Order.objects.order_by("id").values_list(
                "id",
                "status",
                "customer_id",
                "raw",
                "fingerprint",
                "wire_fingerprint",
                "initiated_at",
                "completed_at",
                "paid_at",
                "canceled_at",
                "expires_at",
                "total",
                "currency",
                "number",
                "payment_url",
            )
        ),
        "customers": list(
            Customer.objects.order_by("id").values_list(
                "id",
                "guest",
                "name",
                "raw",
                "fingerprint",
                "wire_fingerprint",
                "email_address",
                "phone_number",
            )
        ),
    }


@pytest.mark.django_db(transaction=True)
def test_a_first_sync_read_by_the_helper_mirrors_what_the_thread_would(
    uncapped, helpers, monkeypatch
):
    uncapped.seed(120)
    monkeypatch.setattr(parse_process, "START_AFTER_RECORDS", 15)
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.created == 120
    (apart,) = helpers
    # Page 1 below the threshold, the helper started on page 2 (which is read here) and
    # waited for on page 3; every later page read by it but the empty 13th that ends the walk.
    assert (apart.read_here, apart.read_apart) == (3, 10)
    assert apart._process is None  # stopped with the walk
    by_helper = mirrored()
    for model in (Order, Customer, SyncRun):
        model.objects.all().delete()
    monkeypatch.setattr(parse_process, "START_AFTER_RECORDS", 10**9)
    again = sync_orders()
    assert again.created == 120 and helpers[1].read_apart == 0
    assert mirrored() == by_helper
    # A re-sync (the mirror is not empty) starts none.
    sync_orders()
    assert len(helpers) == 2


@pytest.mark.django_db(transaction=True)
def test_a_walk_that_fails_stops_its_helper(uncapped, helpers, monkeypatch):
    uncapped.seed(60)
    monkeypatch.setattr(parse_process, "START_AFTER_RECORDS", 5)

    def fail_on_page_4(run):
        if run.pages >= 4:
            raise RuntimeError("stopped half-way")

    with pytest.raises(RuntimeError, match="stopped half-way"):
        sync_orders(progress=fail_on_page_4)
    (apart,) = helpers
    assert apart.read_apart >= 1
    assert apart._process is None and apart._gone
    (process,) = apart.started
    assert process.returncode == 0  # its stdin closed, it exited
