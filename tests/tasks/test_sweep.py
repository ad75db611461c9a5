"""The payment watch's row is the truth: written with the order, carried by the sweep
(``watch_due_payments``, the command and the self-rescheduling task) whatever became of the
enqueues; ``PaymentWatchesStalled`` counts what nothing carries. Against the sandbox over
loopback HTTP."""

from __future__ import annotations

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from health_check.exceptions import ServiceUnavailable

from django_orders.health import PaymentWatchesStalled
from django_orders.models import Order, PaymentWatch
from django_orders.services import watch_due_payments
from django_orders.sync.payment_watch import FIRST_WATCH_PAUSE, SWEEP_LAG, claim_duration
from django_orders.tasks import watch_due_payments_task, watch_payment
from tests.tasks.conftest import IMMEDIATE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("polling")]


@pytest.fixture
def watching(live_orders, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}


def make_due(order_id: str) -> None:
    """The next lookup fell due longer ago than the sweep leaves it to the enqueued task (the
    test does not wait that out)."""
    PaymentWatch.objects.filter(pk=order_id).update(
        next_lookup_at=timezone.now() - SWEEP_LAG - timedelta(seconds=1)
    )


def test_the_row_is_written_with_the_order_and_a_lost_enqueue_is_carried_by_the_sweep(
    watching, new_order, settings, live_orders, sandbox_paths, caplog
):
    """The immediate backend refuses the deferred first step (the enqueue raises): the row,
    written in the order's transaction, is all the sweep needs."""
    settings.TASKS = IMMEDIATE
    order = new_order()
    assert "watch_new_order" in caplog.text  # the first step was never enqueued
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert watch.next_lookup_at == watch.started_at + FIRST_WATCH_PAUSE
    assert (watch.lookups, watch.claimed_until, watch.finished_at) == (0, None, None)
    live_orders.pay_order(order.pk)
    out = StringIO()

    call_command("watch_due_payments", stdout=out)  # not due yet: nothing runs
    assert sandbox_paths.count("/orders/lookup") == 0
    make_due(order.pk)
    call_command("watch_due_payments", stdout=out)

    assert out.getvalue().splitlines() == [
        "Payment watches: 0 step(s) run, 0 watch(es) ended.",
        "Payment watches: 1 step(s) run, 1 watch(es) ended.",
    ]
    assert Order.objects.get(pk=order.pk).status == "paid"
    watch.refresh_from_db()
    assert (watch.lookups, watch.end_reason, watch.claimed_until) == (1, "status", None)
    assert sandbox_paths.count("/orders/lookup") == 1


def test_no_row_without_watch_payments(new_order, enqueued):
    order = new_order()

    assert not PaymentWatch.objects.filter(pk=order.pk).exists()


def test_the_sweep_takes_due_and_abandoned_watches_and_leaves_the_rest(
    new_order, enqueued, sandbox_paths
):
    due, abandoned, waiting, held, ended, just_due = (new_order() for _ in range(6))
    now = timezone.now()
    later, earlier = now + timedelta(minutes=1), now - timedelta(minutes=1)
    PaymentWatch.objects.create(order=due, next_lookup_at=earlier)
    # A worker killed during its step: the claim expired, the next lookup was never written.
    PaymentWatch.objects.create(order=abandoned, next_lookup_at=earlier, claimed_until=earlier)
    PaymentWatch.objects.create(order=waiting, next_lookup_at=later)
    PaymentWatch.objects.create(order=held, next_lookup_at=earlier, claimed_until=later)
    PaymentWatch.objects.create(order=ended, next_lookup_at=earlier, finished_at=earlier)
    # Left to the task enqueued for it a little longer.
    PaymentWatch.objects.create(order=just_due, next_lookup_at=now)

    sweep = watch_due_payments(batch=1)

    assert (sweep.claimed, sweep.ended) == (2, 0)
    assert sandbox_paths.count("/orders/lookup") == 2
    looked_up = dict(PaymentWatch.objects.values_list("order_id", "lookups"))
    assert looked_up == {
        due.pk: 1,
        abandoned.pk: 1,
        waiting.pk: 0,
        held.pk: 0,
        ended.pk: 0,
        just_due.pk: 0,
    }
    for order in (due, abandoned):
        watch = PaymentWatch.objects.get(pk=order.pk)
        assert watch.claimed_until is None and watch.next_lookup_at > now
    assert enqueued == []  # the row carries the next step: the sweep takes it when due
    assert watch_due_payments().claimed == 0


def test_a_step_whose_next_enqueue_fails_is_left_to_the_sweep(
    watching, new_order, settings, caplog
):
    order = new_order()
    settings.TASKS = IMMEDIATE  # cannot defer: the next step's enqueue raises

    with caplog.at_level(logging.ERROR, logger="django_orders.tasks"):
        result = watch_payment.call(order.pk)

    assert result["ran"] is True and result["ended_by"] == ""
    assert f"Payment watch of order {order.pk}: next step not enqueued" in caplog.text
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert watch.lookups == 1 and watch.next_lookup_at is not None
    make_due(order.pk)
    assert watch_due_payments().claimed == 1


def test_the_sweep_task_reschedules_itself(live_orders, enqueued):
    before = timezone.now()

    assert watch_due_payments_task.call(every=20) == {"claimed": 0, "ended": 0}

    [again] = enqueued
    assert again.task.name == "watch_due_payments_task" and again.kwargs == {"every": 20}
    assert again.task.run_after >= before + timedelta(seconds=20)
    enqueued.clear()
    watch_due_payments_task.call(every=0)
    assert enqueued == []


def test_a_step_holds_its_watch_for_one_short_lookup(settings):
    assert claim_duration() == timedelta(seconds=30)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "REQUEST_DEADLINE": 5}
    assert claim_duration() == timedelta(seconds=20)


def test_every_must_be_a_positive_number_of_seconds():
    with pytest.raises(CommandError, match="expected a whole number from 1 to 3600, not '0'"):
        call_command("watch_due_payments", "--every", "0")


def test_stalled_watches_fail_the_health_check(new_order, enqueued):
    now = timezone.now()
    late, recent = new_order(), new_order()
    PaymentWatch.objects.create(order=late, next_lookup_at=now - timedelta(minutes=6))
    PaymentWatch.objects.create(order=recent, next_lookup_at=now - timedelta(minutes=4))
    check = PaymentWatchesStalled()

    with pytest.raises(ServiceUnavailable, match="1 payment watch"):
        check.run()
    assert "manage.py watch_due_payments" in check.advice(1)
    PaymentWatch.objects.filter(pk=late.pk).update(finished_at=now)
    check.run()  # an ended watch is no stall
    PaymentWatch.objects.filter(pk=recent.pk).update(
        next_lookup_at=None, claimed_until=now - timedelta(minutes=6)
    )
    with pytest.raises(ServiceUnavailable):
        check.run()  # a claim abandoned that long ago
