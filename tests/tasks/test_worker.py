"""The real thing: django-tasks-db's db_worker in a separate process runs the payment watcher.

A payer pays on the payment page and never comes back: no return visit, no confirm_order, no
sync. The worker's watcher alone mirrors the order as paid, a few seconds after the checkout.
"""

from __future__ import annotations

import time

import pytest

from django_orders.models import Order, PaymentWatch, SyncRun
from tests.tasks.conftest import DATABASE

pytestmark = pytest.mark.django_db(transaction=True)

#: A bound on the wait, not a measurement: the watcher's first lookup is 5 s after the checkout.
PATIENCE = 90


def wait_for(condition, worker) -> bool:
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end and worker.poll() is None:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_a_payer_who_never_comes_back_is_mirrored_as_paid_by_the_worker(
    live_orders, new_order, settings, run_manage, sandbox_paths
):
    settings.TASKS = DATABASE
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    worker = run_manage(
        "db_worker",
        "--interval",
        "0.2",
        "--no-startup-delay",
        "--no-reload",
        server=live_orders,
        background=True,
        DJANGO_ORDERS_TEST_TASKS="database",
    )
    try:
        order = new_order()
        live_orders.pay_order(order.pk)  # on the payment page; the payer then closes the tab

        paid = wait_for(lambda: Order.objects.get(pk=order.pk).status == "paid", worker)
    finally:
        worker.terminate()
        out, err = worker.communicate(timeout=30)

    assert paid, f"the worker did not mirror the payment.\nstdout:\n{out}\nstderr:\n{err}"
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert (watch.lookups, watch.end_reason) == (1, "status")
    assert not SyncRun.objects.exists()
    assert sandbox_paths.count("/orders/lookup") == 1
    assert "/orders/page" not in sandbox_paths
