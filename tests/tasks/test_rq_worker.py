"""The README's RQ recipe, as written, runs the payment watcher: real ``rqworker`` processes on
the local Redis (127.0.0.1:6379, a database of the tests' own), started with the README's
command, move the watcher's deferred first step to the queue (RQ's scheduler) and run it.

Without ``--with-scheduler`` a deferred job stays in RQ's scheduled registry for good, and
without the job class every task fails: the two things the README once left out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from django_orders.checks import check_rq_scheduler, check_watch_payments
from django_orders.models import Order, PaymentWatch

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parents[2] / "README.md"
#: The worker command and the settings of the README's recipe; the test runs exactly these.
WORKER_COMMAND = "python manage.py rqworker default --with-scheduler"
RQ_SETTINGS = 'RQ = {"JOB_CLASS": "django_tasks_rq.Job"}'
RQ_TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend"}}
#: A bound on the wait, not a measurement: the watcher's first lookup is 5 s after the checkout,
#: and RQ's scheduler looks for due jobs every second.
PATIENCE = 90


def test_the_readme_gives_the_whole_recipe():
    text = README.read_text(encoding="utf-8")
    for piece in (
        'pip install "django-orders[rq]"',
        '"django_rq"',
        "RQ_QUEUES",
        '"BACKEND": "django_tasks_rq.RQBackend"',
        RQ_SETTINGS,
        WORKER_COMMAND,
    ):
        assert piece in text, f"the README's RQ recipe lacks {piece!r}"


def test_w007_names_a_missing_job_class(settings):
    settings.TASKS = RQ_TASKS
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    settings.RQ = {}
    [warning] = check_watch_payments()
    assert warning.id == "django_orders.W007"
    assert "rq.job.Job" in warning.msg and "django_tasks_rq.Job" in warning.hint
    settings.RQ = {"JOB_CLASS": "django_tasks_rq.Job"}
    assert check_watch_payments() == []


def test_w007_is_silent_for_other_backends_and_without_the_watcher(settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    settings.RQ = {}
    assert check_watch_payments() == []
    assert check_rq_scheduler() == []
    settings.TASKS = RQ_TASKS
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": False}
    assert check_rq_scheduler() == []


def test_w007_says_when_redis_cannot_be_asked(settings):
    settings.TASKS = RQ_TASKS
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    settings.RQ_QUEUES = {"default": {"URL": "redis://127.0.0.1:9/0", "SOCKET_TIMEOUT": 1}}
    [warning] = check_rq_scheduler()
    assert warning.id == "django_orders.W007"
    assert warning.msg.startswith("Could not ask Redis whether an RQ scheduler is running")


def wait_for(condition, workers) -> bool:
    end = time.monotonic() + PATIENCE
    while time.monotonic() < end and all(worker.poll() is None for worker in workers):
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def stopped(worker: subprocess.Popen) -> tuple[str, str]:
    """The output of a worker sent SIGTERM: its warm shutdown, or, past 30 s (a loaded
    machine, a job still running), its whole process group killed, as a supervisor would."""
    try:
        return worker.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        return worker.communicate(timeout=15)


def test_workers_started_as_the_readme_says_run_the_deferred_watch(
    live_orders, new_order, settings, run_manage, sandbox_paths, redis_queue
):
    settings.TASKS = RQ_TASKS
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    [no_scheduler] = check_rq_scheduler()
    assert no_scheduler.id == "django_orders.W007"
    assert "No RQ scheduler is running for the queue(s) default" in no_scheduler.msg

    words = WORKER_COMMAND.split()[2:]  # "python manage.py" is run_manage's own
    workers = [
        run_manage(*words, server=live_orders, background=True, DJANGO_ORDERS_TEST_TASKS="rq")
        for _ in range(2)
    ]
    try:
        # A scheduler holds its queue's lock once a worker is up: the deploy check sees it.
        assert wait_for(lambda: check_rq_scheduler() == [], workers), "no scheduler came up"
        order = new_order()
        live_orders.pay_order(order.pk)  # on the payment page; the payer then closes the tab

        paid = wait_for(lambda: Order.objects.get(pk=order.pk).status == "paid", workers)
    finally:
        for worker in workers:
            worker.terminate()
        outputs = [stopped(worker) for worker in workers]

    assert paid, f"the RQ workers did not mirror the payment: {outputs}"
    watch = PaymentWatch.objects.get(pk=order.pk)
    assert (watch.lookups, watch.end_reason) == (1, "status")
    assert sandbox_paths.count("/orders/lookup") == 1
