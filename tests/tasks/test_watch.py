"""watch_payment: one lookup a run, the next enqueued with a growing pause, bounded, one watcher
per order; the watch's row written with the order. Against the sandbox over loopback HTTP, with
a backend that records what is enqueued."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.models import Order, OrderEvent, PaymentWatch
from django_orders.sync.payment_watch import (
    FIRST_WATCH_PAUSE,
    LONGEST_WATCH_PAUSE,
    MAX_WATCH_LOOKUPS,
    watch_pause,
)
from django_orders.tasks import watch_payment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("polling")]


@pytest.fixture
def watched_order(new_order, enqueued, settings):
    """A new order with WATCH_PAYMENTS on (its watch row written with it), and the enqueued
    first step forgotten: the tests run the steps themselves."""

    def create():
        settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
        order = new_order()
        assert [result.args for result in enqueued] == [[order.pk]]
        enqueued.clear()
        return order

    return create


def test_the_pauses_double_up_to_their_longest():
    pauses = [watch_pause(n) for n in range(MAX_WATCH_LOOKUPS)]
    assert pauses[:4] == [FIRST_WATCH_PAUSE * f for f in (1, 2, 4, 8)]
    assert max(pauses) == pauses[-1] == LONGEST_WATCH_PAUSE
    assert pauses == sorted(pauses)


def test_an_unpaid_order_is_looked_up_once_and_the_next_lookup_enqueued_later(
    watched_order, enqueued, sandbox_paths
):
    order = watched_order()
    before = timezone.now()

    result = watch_payment.call(order.pk)

    assert result["ran"] is True and result["status"] == "requires_payment"
    assert sandbox_paths.count("/orders/lookup") == 1
    [following] = enqueued
    assert following.task.name == "watch_payment"
    assert following.args == [order.pk] and following.kwargs == {"step": 1}
    assert following.task.run_after >= before + watch_pause(1)
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert (watch.lookups, watch.claimed_until, watch.finished_at) == (1, None, None)
    assert watch.next_lookup_at == following.task.run_after


def test_a_paid_order_is_mirrored_as_paid_and_the_watch_ends(watched_order, enqueued, live_orders):
    order = watched_order()
    live_orders.pay_order(order.pk)

    result = watch_payment.call(order.pk)

    assert result["status"] == "paid" and result["ended_by"] == "status"
    assert Order.objects.get(pk=order.pk).status == "paid"
    assert enqueued == []
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert watch.finished_at is not None and watch.end_reason == "status"


def test_a_second_enqueue_of_the_same_step_runs_no_second_watcher(
    watched_order, enqueued, sandbox_paths
):
    order = watched_order()
    watch_payment.call(order.pk)

    again = watch_payment.call(order.pk)

    assert again["ran"] is False
    assert sandbox_paths.count("/orders/lookup") == 1
    assert len(enqueued) == 1


def test_a_watch_held_by_another_worker_is_left_to_it(new_order, enqueued, sandbox_paths):
    order = new_order()
    PaymentWatch.objects.create(order_id=order.pk, claimed_until=timezone.now() + timedelta(1))

    assert watch_payment.call(order.pk)["ran"] is False
    assert sandbox_paths.count("/orders/lookup") == 0
    assert enqueued == []


def test_a_claim_that_expired_is_taken_over(new_order, enqueued, sandbox_paths):
    order = new_order()
    PaymentWatch.objects.create(order_id=order.pk, claimed_until=timezone.now() - timedelta(1))

    assert watch_payment.call(order.pk)["ran"] is True
    assert sandbox_paths.count("/orders/lookup") == 1


def test_the_last_allowed_lookup_ends_the_watch(new_order, enqueued, sandbox_paths):
    order = new_order()
    last = MAX_WATCH_LOOKUPS - 1
    PaymentWatch.objects.create(order_id=order.pk, lookups=last, steps=last)

    result = watch_payment.call(order.pk, step=last)

    assert result["ended_by"] == "lookups"
    assert sandbox_paths.count("/orders/lookup") == 1
    assert enqueued == []
    assert PaymentWatch.objects.get(pk=order.pk).lookups == MAX_WATCH_LOOKUPS


def test_a_watch_past_its_span_ends_after_a_last_lookup(new_order, enqueued):
    order = new_order()
    PaymentWatch.objects.create(order_id=order.pk, started_at=timezone.now() - timedelta(hours=25))

    assert watch_payment.call(order.pk)["ended_by"] == "deadline"
    assert enqueued == []


def test_the_next_lookup_is_never_after_the_order_expires(watched_order, enqueued):
    order = watched_order()
    soon = timezone.now() + timedelta(seconds=3)
    Order.objects.filter(pk=order.pk).update(expires_at=soon)

    watch_payment.call(order.pk)

    [following] = enqueued
    assert following.task.run_after == soon


def test_a_failed_lookup_counts_and_the_watch_goes_on(watched_order, enqueued, live_orders):
    order = watched_order()
    live_orders.add_fault("error_before_write", "/orders/lookup", times=None, status=503)

    result = watch_payment.call(order.pk)

    assert result["ran"] is True and result["ended_by"] == ""
    assert len(enqueued) == 1
    assert PaymentWatch.objects.get(pk=order.pk).lookups == 1


def test_an_order_not_in_the_mirror_runs_nothing(live_orders, enqueued, sandbox_paths):
    assert watch_payment.call("or_not_here")["ran"] is False
    assert sandbox_paths == [] and enqueued == []
    assert not PaymentWatch.objects.exists()


def test_the_timeline_says_the_watchers_lookup_saw_the_payment(
    watched_order, enqueued, live_orders
):
    order = watched_order()
    live_orders.pay_order(order.pk)

    watch_payment.call(order.pk)

    [paid] = OrderEvent.objects.filter(order_id=order.pk, kind="status_changed", to_status="paid")
    assert paid.source == OrderEvent.Source.LOOKUP


def test_an_order_the_mirror_holds_paid_ends_the_watch_without_a_lookup(
    watched_order, enqueued, live_orders, sandbox_paths
):
    order = watched_order()
    live_orders.pay_order(order.pk)
    Order.objects.filter(pk=order.pk).update(status="paid")

    result = watch_payment.call(order.pk)

    assert (result["status"], result["ended_by"]) == ("paid", "status")
    assert sandbox_paths.count("/orders/lookup") == 0
    assert enqueued == []


def test_an_order_the_service_does_not_know_ends_the_watch(new_order, enqueued, sandbox_paths):
    unknown = new_order()
    unknown.pk = "or_NotKnownToTheService"  # a copy of the row, under an id the service lacks
    unknown.save(force_insert=True)
    PaymentWatch.objects.create(order_id=unknown.pk)

    result = watch_payment.call(unknown.pk)

    assert (result["status"], result["ended_by"]) == (None, "unknown_order")
    assert sandbox_paths.count("/orders/lookup") == 1
    assert PaymentWatch.objects.get(pk=unknown.pk).end_reason == "unknown_order"
    assert enqueued == []
