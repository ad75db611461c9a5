"""The timeline written by the mirror's write route: only real changes, one statement a write,
in the write's transaction, and the status signals sent from the entries after commit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_orders.mirror import events
from django_orders.mirror.events import LOOKUP, Origin
from django_orders.mirror.refunds import store_refunds
from django_orders.mirror.store import store_orders
from django_orders.models import Order, OrderEvent, Refund
from django_orders.signals import order_status_changed, refund_status_changed
from tests.fixtures.mirror import logged_statements
from tests.mirror.test_store import orders

pytestmark = pytest.mark.django_db

EVENT_INSERT = 'INSERT INTO "django_orders_orderevent"'


@pytest.fixture
def announced():
    """Both status signals as this process sent them: (kind, id, previous, status)."""
    seen: list[tuple[str, str, str | None, str]] = []

    def on_order(sender, order, previous_status, status, **kwargs):
        seen.append(("order", order.pk, previous_status, status))

    def on_refund(sender, refund, previous_status, status, **kwargs):
        seen.append(("refund", refund.pk, previous_status, status))

    order_status_changed.connect(on_order, weak=False)
    refund_status_changed.connect(on_refund, weak=False)
    yield seen
    order_status_changed.disconnect(on_order)
    refund_status_changed.disconnect(on_refund)


def timeline(order_id: str) -> list[tuple]:
    return list(
        OrderEvent.objects.filter(order_id=order_id)
        .order_by("at", "id")
        .values_list("kind", "source", "from_status", "to_status", "actor")
    )


def paid(count: int, start: int = 0):
    return orders(count, status="paid", start=start, extra={"paid_at": "2026-03-01T12:00:00Z"})


def test_a_first_store_records_nothing_and_costs_no_statement_more(django_assert_num_queries):
    # read, customers, orders as before the timeline; then the order.first_seen events and
    # their fan-out (none here: no endpoint names the type), two statements for the page.
    with django_assert_num_queries(5):
        store_orders(orders(50))
    assert not OrderEvent.objects.exists()


def test_status_changes_of_a_page_are_one_insert_and_only_the_real_changes(
    django_capture_on_commit_callbacks, announced
):
    earlier = timezone.now() - timedelta(hours=1)
    store_orders(orders(10), now=earlier)
    page = paid(3) + orders(7, start=3)  # three paid now, seven unchanged
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        with CaptureQueriesContext(connection) as captured:
            now = timezone.now()
            store_orders(page, now=now)
        assert announced == []  # not before the commit

    inserts = [sql for sql in logged_statements(captured) if sql.startswith(EVENT_INSERT)]
    assert len(inserts) == 1
    changed = sorted(OrderEvent.objects.values_list("order_id", "source", "from_status"))
    assert changed == [(f"or_{n:06d}", "page", "requires_payment") for n in range(3)]
    assert set(OrderEvent.objects.values_list("to_status", "kind", "at")) == {
        ("paid", "status_changed", now)
    }
    assert sorted(announced) == [
        ("order", f"or_{n:06d}", "requires_payment", "paid") for n in range(3)
    ]
    store_orders(page)  # the same page again: nothing changes, nothing is recorded
    assert OrderEvent.objects.count() == 3


def test_an_older_answer_kept_by_the_lifecycle_records_nothing(
    django_capture_on_commit_callbacks, announced
):
    store_orders(orders(1), now=timezone.now() - timedelta(hours=1))
    sent = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        store_orders(paid(1), sent_at=sent)
    late_page = orders(1)  # sent before the payment was seen, arriving after it
    with django_capture_on_commit_callbacks(execute=True):
        result = store_orders(late_page, sent_at=sent - timedelta(seconds=5))
    assert result.kept == 1
    assert timeline("or_000000") == [
        ("status_changed", "page", "requires_payment", "paid", ""),
    ]
    assert announced == [("order", "or_000000", "requires_payment", "paid")]


def test_a_rolled_back_write_leaves_no_entry_and_announces_nothing(
    django_capture_on_commit_callbacks, announced
):
    store_orders(orders(1), now=timezone.now() - timedelta(hours=1))
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        store_orders(paid(1), origin=LOOKUP)
        assert OrderEvent.objects.count() == 1  # written with the change...
        raise RuntimeError("the page's transaction fails")
    assert callbacks == []
    assert not OrderEvent.objects.exists()  # ...and taken back with it
    assert announced == []
    assert Order.objects.get().status == "requires_payment"


def test_the_origin_and_staff_user_are_recorded():
    store_orders(orders(1), now=timezone.now() - timedelta(hours=1))
    store_orders(paid(1), origin=events.by_staff("ama"))
    assert timeline("or_000000") == [
        ("status_changed", "staff", "requires_payment", "paid", "ama"),
    ]


def test_the_signal_gets_the_order_as_written(django_capture_on_commit_callbacks):
    store_orders(orders(1), now=timezone.now() - timedelta(hours=1))
    received = []

    def receiver(sender, order, previous_status, status, **kwargs):
        received.append((sender, order.pk, order.status, order.paid_at, previous_status, status))

    order_status_changed.connect(receiver, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            (parsed,) = paid(1)
            store_orders([parsed], origin=Origin("feed"))
    finally:
        order_status_changed.disconnect(receiver)
    assert received == [(Order, "or_000000", "paid", parsed.paid_at, "requires_payment", "paid")]
    assert timeline("or_000000")[0][1] == "feed"


# --- refunds -------------------------------------------------------------------------------------


def refund_record(status: str, **fields) -> dict:
    return {
        "id": "rf_000001",
        "order_id": "or_000000",
        "status": status,
        "total": {"currency": "ghs", "value": 990},
        "reason": "duplicate",
        "created_at": "2026-03-01T12:00:00Z",
        **fields,
    }


def test_refund_changes_are_recorded_once_each_and_announced_from_the_entries(
    django_capture_on_commit_callbacks, announced
):
    store_orders(paid(1))
    with django_capture_on_commit_callbacks(execute=True):
        store_refunds([refund_record("pending")])
    with django_capture_on_commit_callbacks(execute=True):
        store_refunds([refund_record("pending")], origin=events.by_staff("kofi"))  # no change
    with django_capture_on_commit_callbacks(execute=True):
        store_refunds([refund_record("succeeded", succeeded_at="2026-03-02T12:00:00Z")])
    with django_capture_on_commit_callbacks(execute=True):
        store_refunds([refund_record("processing")])  # further back: kept as succeeded

    assert timeline("or_000000") == [
        ("refund_status_changed", "lookup", None, "pending", ""),
        ("refund_status_changed", "lookup", "pending", "succeeded", ""),
    ]
    first = OrderEvent.objects.order_by("at", "id").first()
    assert (first.refund_id, first.detail) == ("rf_000001", {"total": 990, "currency": "ghs"})
    assert announced == [
        ("refund", "rf_000001", None, "pending"),
        ("refund", "rf_000001", "pending", "succeeded"),
    ]
    assert Refund.objects.get().status == "succeeded"


# --- the entries themselves ----------------------------------------------------------------------


def test_entries_are_append_only():
    store_orders(orders(1))
    event = events.record(
        [events.staff_action("or_000000", "complete_order", actor="ama", at=timezone.now())]
    )[0]
    stored = OrderEvent.objects.get()
    assert (stored.kind, stored.source, stored.actor, stored.to_status) == (
        "staff_action",
        "staff",
        "ama",
        "complete_order",
    )
    with pytest.raises(TypeError, match="append-only"):
        stored.save()
    with pytest.raises(TypeError, match="append-only"):
        OrderEvent.objects.filter(pk=stored.pk).update(actor="someone else")
    with pytest.raises(TypeError, match="append-only"):
        OrderEvent.objects.bulk_update([stored], ["actor"])
    assert event.pk is None  # record() writes rows; it never saves (or re-saves) instances
    assert OrderEvent.objects.get().actor == "ama"


def test_many_entries_of_every_kind_are_one_statement(django_assert_num_queries):
    store_orders(orders(2))
    now = timezone.now()
    entries = [
        events.document_sent(
            "or_000000",
            "receipt",
            origin=events.by_staff("ama"),
            at=now,
            detail={"sent": ["email"], "failed": {"sms": "no phone number"}},
        )
        for _ in range(150)
    ] + [events.staff_action("or_000001", "complete_order", actor="ama", at=now)]
    # the entries; the 150 document.sent events and their fan-out (events out)
    with django_assert_num_queries(3):
        events.record(entries)
    assert OrderEvent.objects.count() == 151
    document = OrderEvent.objects.filter(kind="document_sent").first()
    assert document.detail == {"sent": ["email"], "failed": {"sms": "no phone number"}}
    assert document.at == now


@pytest.mark.parametrize("actor", ["", "   ", None, 7])
def test_an_actor_that_names_no_one_is_refused(actor):
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(ValueError, match="actor must be"):
        events.by_staff(actor)
    with pytest.raises(ValueError, match="actor must be"):
        events.by_staff(AnonymousUser())


def test_a_user_is_kept_by_username():
    from django.contrib.auth.models import User

    user = User(username="ama.mensah")
    assert events.acting(user, LOOKUP) == Origin("staff", "ama.mensah")
    assert events.acting(None, LOOKUP) is LOOKUP
