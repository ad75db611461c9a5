"""The mirror never goes back in time (DESIGN.md): the rule, and every route that writes an
order into the mirror (a page of either parse path, a lookup, a cancel's answer, crossing
``confirm_order`` answers)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections, transaction

from django_orders.client.lookups import Lookup
from django_orders.creation.checkout import cancel_order, refresh_order
from django_orders.mirror.parsing import parse_order
from django_orders.mirror.refresh import announce, store_answer, store_lookup
from django_orders.mirror.resources.orders import complete
from django_orders.mirror.store import replaces, store_orders
from django_orders.models import Customer, Order
from tests.creation.conftest import CANCEL, record
from tests.fixtures.mirror import walked

T1 = datetime(2026, 1, 2, 3, 5, tzinfo=UTC)
T2 = T1 + timedelta(seconds=1)
T3 = T1 + timedelta(seconds=2)


def store(status: str, sent_at: datetime, **extra) -> None:
    """The order as a lookup's answer to a request sent at ``sent_at``, stored (signals too)."""
    store_lookup(Lookup("or_unit1", record(status=status, **extra), sent_at))


def stored() -> Order:
    return Order.objects.get(pk="or_unit1")


# --- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored_status", "status", "older", "newer"),
    [
        # Forward: whenever it was sent (the lifecycle says the answer saw the order later).
        ("preparing", "requires_payment", True, True),
        ("requires_payment", "paid", True, True),
        ("paid", "completed", True, True),
        ("requires_payment", "canceled", True, True),
        ("preparing", "expired", True, True),
        ("canceled", "paid", True, True),  # paid wins over canceled
        ("expired", "completed", True, True),
        # Backward: never.
        ("paid", "requires_payment", False, False),
        ("completed", "paid", False, False),
        ("paid", "canceled", False, False),  # canceled only from an unpaid state
        ("completed", "expired", False, False),
        ("canceled", "requires_payment", False, False),
        ("requires_payment", "preparing", False, False),
        # No move in the lifecycle: the later request wins.
        ("paid", "paid", False, True),
        ("canceled", "expired", False, True),
        ("requires_payment", "on_hold", False, True),
        ("on_hold", "requires_payment", False, True),
        ("on_hold", "unknown", False, True),
        # An unknown status never replaces a known final one.
        ("paid", "on_hold", False, False),
        ("canceled", "unknown", False, False),
    ],
)
def test_the_rule(stored_status, status, older, newer):
    assert replaces(status, T1, stored_status, T2) is older
    assert replaces(status, T3, stored_status, T2) is newer
    assert replaces(status, T2, stored_status, T2) is newer  # the same request: its own answer


def test_a_row_stored_before_the_mirror_kept_its_request_time_takes_any_allowed_answer():
    assert replaces("paid", T1, "paid", None) is True
    assert replaces("requires_payment", T1, "paid", None) is False


# --- pages, both parse paths ---------------------------------------------------------------------


def page(records: list[dict], *, typed: bool, sent_at: datetime) -> list:
    """The records as the sync reads a page (``typed``: read light, then in full before the
    write, as the sync does), or each parsed as a lookup's (``parse_order``)."""
    if typed:
        parsed = walked(records)
        assert not parsed.set_aside
        kept, malformed = complete(list(parsed))
        assert not malformed
        return kept
    return [parse_order(record) for record in records]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("typed", [True, False], ids=["walked", "parsed"])
def test_a_page_read_before_the_payment_never_takes_paid_back(typed, status_changes):
    store("requires_payment", T1)
    store("paid", T3)  # confirm_order's lookup, sent after the page's request
    assert status_changes == [("or_unit1", "requires_payment", "paid")]

    late = page([record(number="EX-OLD")], typed=typed, sent_at=T2)
    result = store_orders(late, sent_at=T2)

    assert (result.kept, result.updated, result.unchanged) == (1, 0, 1)
    order = stored()
    assert (order.status, order.number, order.observed_at) == ("paid", "EX-1001", T3)
    assert order.paid_at == datetime(2026, 1, 2, 3, 6, tzinfo=UTC)
    assert status_changes == [("or_unit1", "requires_payment", "paid")]  # nothing backwards

    # The next sync reads the order paid: nothing changes, nothing is announced again.
    again = page([record(status="paid")], typed=typed, sent_at=T3 + timedelta(seconds=5))
    store_orders(again, sent_at=T3 + timedelta(seconds=5))
    assert stored().status == "paid"
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("typed", [True, False], ids=["walked", "parsed"])
def test_an_older_page_of_the_same_status_is_refused_a_newer_one_is_taken(typed):
    store("paid", T2, number="EX-NEW")

    store_orders(
        page([record(status="paid", number="EX-OLD")], typed=typed, sent_at=T1), sent_at=T1
    )
    assert stored().number == "EX-NEW"

    store_orders(page([record(status="paid", number="EX-3")], typed=typed, sent_at=T3), sent_at=T3)
    assert (stored().number, stored().observed_at) == ("EX-3", T3)


@pytest.mark.django_db(transaction=True)
def test_store_orders_without_sent_at_counts_the_answer_as_sent_now():
    store("paid", T2)
    store_orders([parse_order(record(status="paid", number="EX-NOW"))])
    assert stored().number == "EX-NOW" and stored().observed_at > T2


@pytest.mark.django_db(transaction=True)
def test_an_older_answer_that_moves_forward_is_taken_and_keeps_the_later_request_time(
    status_changes,
):
    store("requires_payment", T3)
    store("paid", T1)  # sent earlier, answered later: it saw the payment
    order = stored()
    assert (order.status, order.observed_at) == ("paid", T3)
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


@pytest.mark.django_db(transaction=True)
def test_timestamps_that_only_appear_are_never_cleared():
    store("canceled", T1)
    canceled_at = stored().canceled_at
    store("paid", T2)  # paid wins over canceled; this answer has no canceled_at
    order = stored()
    assert order.status == "paid" and order.canceled_at == canceled_at
    paid_at = order.paid_at
    store("paid", T3, paid_at=None, completed_at=None)
    assert stored().paid_at == paid_at


@pytest.mark.django_db(transaction=True)
def test_an_unknown_status_never_replaces_a_final_one(status_changes):
    store("paid", T1)
    store("on_hold", T3)
    assert stored().status == "paid"
    assert status_changes == []


# --- lookups, confirm and cancel answers ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_kept_lookup_still_goes_to_the_back_of_the_refresh_queue():
    store("paid", T2)
    Order.objects.update(refreshed_at=None)
    result = store_lookup(Lookup("or_unit1", record(), T1))
    assert result.kept == 1
    order = stored()
    assert order.status == "paid" and order.refreshed_at is not None


@pytest.mark.django_db(transaction=True)
def test_an_unchanged_lookup_says_the_stored_state_held_when_it_was_sent():
    store("paid", T1)
    store("paid", T3)  # the same answer, sent later
    assert stored().observed_at == T3
    store("paid", T2)  # the same again, sent earlier: observed_at does not go back
    assert stored().observed_at == T3


class CrossingClient:
    """A client whose first lookup is overtaken: while its request is in flight, a second
    ``confirm_order`` lookup (sent later) is answered and stored; then the first one lands."""

    def __init__(self, first: dict, second: dict) -> None:
        self.answers = [first, second]
        self.crossing = True

    def lookup_order(self, order_id: str) -> dict:
        answer = self.answers.pop(0)
        if self.crossing:
            self.crossing = False
            refresh_order(self, order_id)  # the second request, sent and stored meanwhile
        return answer


@pytest.mark.django_db(transaction=True)
def test_crossing_confirm_answers_leave_the_newer_state_and_one_signal(status_changes):
    store("requires_payment", T1)
    client = CrossingClient(record(), record(status="paid"))

    refresh_order(client, "or_unit1")

    assert stored().status == "paid"
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


@pytest.mark.django_db(transaction=True)
def test_crossing_answers_of_the_same_status_leave_the_later_requests(status_changes):
    store("paid", T1)
    client = CrossingClient(
        record(status="paid", number="EX-1"), record(status="paid", number="EX-2")
    )

    refresh_order(client, "or_unit1")

    assert stored().number == "EX-2"
    assert status_changes == []


@pytest.mark.django_db(transaction=True)
def test_a_cancel_answered_after_the_payment_was_stored_leaves_the_order_paid(
    http_mock, status_changes, mocked_settings
):
    mocked_settings()
    store("requires_payment", T1)

    def paid_meanwhile(request):
        # The payer pays while the cancel is in flight, and a lookup (sent after the cancel)
        # stores it before the cancel's answer lands.
        store_answer("or_unit1", record(status="paid"), what="lookup")
        return 200, {}, json.dumps({"order": record(status="canceled")})

    http_mock.add_callback("POST", CANCEL, callback=paid_meanwhile)

    order = cancel_order("or_unit1")

    assert order.status == "paid" and stored().status == "paid"
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


# --- two writers at once (PostgreSQL) ------------------------------------------------------------


def waiting_on_a_lock() -> bool:
    # pg_locks, not pg_stat_activity: that one is read once per transaction.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0] > 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's row locks")
@pytest.mark.django_db(transaction=True)
def test_two_writers_of_the_same_payment_announce_it_once():
    """Two transactions store the payment at once (a page and a confirm's lookup): the second
    decides on the row as the first left it, so only the first reports the change."""
    store("requires_payment", T1)
    second: list = []

    def other_writer() -> None:
        try:
            with transaction.atomic():
                page = [parse_order(record(status="paid", number="EX-2"))]
                second.append(store_orders(page, sent_at=T3))
        finally:
            connections.close_all()

    with transaction.atomic():
        first = store_orders([parse_order(record(status="paid"))], sent_at=T2)
        writer = threading.Thread(target=other_writer)
        writer.start()
        for _ in range(600):  # until the other writer waits for this transaction's lock
            if waiting_on_a_lock():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the other writer never waited for the row")
    writer.join(30)

    assert [(o.pk, previous, o.status) for o, previous in first.status_changes] == [
        ("or_unit1", "requires_payment", "paid")
    ]
    assert second[0].status_changes == []
    assert (stored().status, stored().number) == ("paid", "EX-2")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's row locks")
@pytest.mark.django_db(transaction=True)
def test_two_writers_of_the_same_rows_in_opposite_orders_do_not_deadlock():
    """The cron sync (new orders) and a backfill (old ones) write the same repeat customers, each
    in the order its answers came in. Rows go in by key, so the second writer waits for the first
    instead of each holding a row the other needs (PostgreSQL would end one with a deadlock).
    Their orders differ, so the orders' own locks (taken in key order) do not serialize them."""

    def page(ids: str, name: str) -> list:
        return [
            parse_order(
                record(
                    f"or_{name}_{x}", number=f"EX-{name}", customer={"id": f"cu_{x}", "name": name}
                )
            )
            for x in ids
        ]

    store_orders(page("ab", "Zero"))
    errors: list[Exception] = []

    def writer(ids: str, name: str) -> None:
        try:
            with transaction.atomic():
                store_orders(page(ids, name))
        except Exception as error:  # the deadlock, reported by the assert below
            errors.append(error)
        finally:
            connections.close_all()

    def waiting(count: int) -> None:
        for _ in range(600):
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0] >= count:
                    return
            time.sleep(0.05)
        pytest.fail(f"{count} lock waits never showed")

    # A third transaction holds cu_a: the first writer (a, b) queues on it; the second (b, a)
    # would take cu_b, then queue on cu_a; released, the first would wait for cu_b.
    writers = [
        threading.Thread(target=writer, args=args) for args in (("ab", "One"), ("ba", "Two"))
    ]
    with transaction.atomic():
        Customer.objects.select_for_update().get(pk="cu_a")
        writers[0].start()
        waiting(1)
        writers[1].start()
        waiting(2)
    for thread in writers:
        thread.join(30)

    assert errors == []
    assert set(Customer.objects.values_list("name", flat=True)) <= {"One", "Two"}
    assert Order.objects.filter(number__in=["EX-One", "EX-Two"]).count() == 4


# --- a create's answer ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_create_answer_is_stamped_with_the_first_send_of_its_request(live_orders):
    from django_orders.models import OrderRequest
    from django_orders.services import create_order
    from tests.fixtures.payloads import create_order_input

    order = create_order(**create_order_input(), reference="lifecycle-1")
    request = OrderRequest.objects.get(reference="lifecycle-1")
    assert order.observed_at == request.first_sent_at is not None
    assert Order.objects.get(pk=order.pk).observed_at == request.first_sent_at

    # An answer to a request sent before it (a page in transit) does not replace it.
    older = {**order.raw, "number": "EX-OLDER"}
    result = store_orders([parse_order(older)], sent_at=request.first_sent_at - timedelta(1))
    assert result.kept == 1 and Order.objects.get(pk=order.pk).number == order.number


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's READ COMMITTED")
@pytest.mark.django_db(transaction=True)
def test_an_order_stored_between_a_pages_read_and_its_upsert_is_not_taken_back(
    monkeypatch, status_changes
):
    """A page holds a stored order and one the mirror lacks; another process stores the
    absent one, paid, after the page's read: the page's older answer must not overwrite it,
    nor announce it as first seen."""
    from django_orders.mirror import store as store_module
    from django_orders.signals import order_first_seen

    store("requires_payment", T1)  # or_unit1: stored, so the page also updates a row
    first_seen: list[str] = []

    def on_first_seen(sender, order, **kwargs):
        first_seen.append(order.pk)

    order_first_seen.connect(on_first_seen, weak=False)
    original = store_module.write_read_rows
    meanwhile: list[bool] = []

    def other_process() -> None:
        try:  # confirm_order's answer: the order paid, to a request sent after the page's
            store_lookup(Lookup("or_unit2", record("or_unit2", status="paid"), T3))
        finally:
            connections.close_all()

    page_thread = threading.current_thread()

    def write_after_another_process(model, *args, **kwargs):
        # After the page's read, before its order write; the other process's own write (in
        # its thread) and the page's second decision go straight through.
        if model is Order and threading.current_thread() is page_thread and not meanwhile:
            meanwhile.append(True)
            writer = threading.Thread(target=other_process)
            writer.start()
            writer.join(30)
        return original(model, *args, **kwargs)

    monkeypatch.setattr(store_module, "write_read_rows", write_after_another_process)
    page = [
        parse_order(record(status="requires_payment", number="EX-2")),
        parse_order(record("or_unit2", status="requires_payment")),
    ]
    try:
        with transaction.atomic():
            result = store_orders(page, sent_at=T2)
            transaction.on_commit(lambda: announce(result))
    finally:
        order_first_seen.disconnect(on_first_seen)

    assert Order.objects.get(pk="or_unit2").status == "paid"
    assert Order.objects.get(pk="or_unit1").number == "EX-2"
    assert first_seen == ["or_unit2"]  # the other process's, once
    assert status_changes == []
    assert (result.created, result.updated, result.kept) == (0, 1, 1)
