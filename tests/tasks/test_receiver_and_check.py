"""WATCH_PAYMENTS: the receiver connected in ready() enqueues a deferred watcher for each new
order (the flow knows nothing of tasks), and E005 refuses a backend that cannot defer."""

from __future__ import annotations

import pytest
from django.utils import timezone

from django_orders.checks import check_watch_payments
from django_orders.tasks import FIRST_WATCH_PAUSE
from tests.tasks.conftest import DATABASE, DUMMY, IMMEDIATE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def watching(live_orders, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}


def test_a_new_order_gets_one_deferred_watcher(watching, new_order, enqueued):
    before = timezone.now()

    order = new_order()

    [first] = enqueued
    assert first.task.name == "watch_payment" and first.args == [order.pk]
    assert first.kwargs == {}
    assert first.task.run_after >= before + FIRST_WATCH_PAUSE


def test_nothing_is_enqueued_with_watch_payments_off(new_order, enqueued):
    new_order()

    assert enqueued == []


def test_a_replayed_reference_enqueues_no_second_watcher(watching, new_order, enqueued):
    from django_orders.services import create_order
    from tests.fixtures.payloads import create_order_input

    order = new_order()
    request = order.requests.get()
    create_order(**create_order_input(), reference=request.reference, finalize=True)

    assert len(enqueued) == 1


@pytest.mark.parametrize(
    ("tasks", "watch", "errors"),
    [
        (IMMEDIATE, True, ["django_orders.E005"]),
        (DUMMY, True, []),
        (DATABASE, True, []),
        (IMMEDIATE, False, []),
    ],
)
def test_e005_refuses_watching_payments_on_a_backend_that_cannot_defer(
    settings, tasks, watch, errors
):
    settings.TASKS = tasks
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": watch}

    messages = check_watch_payments()

    assert [m.id for m in messages] == errors
    if errors:
        assert "ImmediateBackend" in messages[0].msg and "db_worker" in messages[0].hint


def test_e005_says_when_the_tasks_framework_is_missing(settings, monkeypatch):
    import django_orders.checks as checks

    monkeypatch.setattr(checks, "task_framework", lambda: None)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}

    [message] = check_watch_payments()

    assert message.id == "django_orders.E005"
    assert "django-orders[tasks]" in message.hint


def test_watch_payments_must_be_a_boolean(settings):
    from django_orders.checks import check_settings

    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": "yes"}

    [message] = [m for m in check_settings() if "WATCH_PAYMENTS" in m.msg]
    assert message.id == "django_orders.E002"
    assert message.msg == "DJANGO_ORDERS[\"WATCH_PAYMENTS\"] must be True or False, not 'yes'."


def test_a_backend_refusing_the_enqueue_never_fails_the_checkout(
    watching, new_order, settings, caplog
):
    """The immediate backend (which E005 refuses) cannot defer: the enqueue raises, the signal
    logs it, and create_order still returns the stored order."""
    settings.TASKS = IMMEDIATE

    order = new_order()

    assert order.status == "requires_payment"
    assert "order_created receiver" in caplog.text and "watch_new_order" in caplog.text
