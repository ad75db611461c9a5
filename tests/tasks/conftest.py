"""Fixtures of the tasks tests: a backend that records what is enqueued, a sandbox order, and
the tests' Redis database for RQ."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from django_orders.services import create_order
from tests.fixtures.payloads import create_order_input, new_reference

#: The framework's own backends: Django's on 6.0+, the backport's on 5.2.
FRAMEWORK = "django.tasks" if find_spec("django.tasks") else "django_tasks"
DUMMY = {"default": {"BACKEND": f"{FRAMEWORK}.backends.dummy.DummyBackend"}}
IMMEDIATE = {"default": {"BACKEND": f"{FRAMEWORK}.backends.immediate.ImmediateBackend"}}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def enqueued(settings):
    """The dummy backend (it defers, and runs nothing): its list of enqueued task results."""
    from django_orders.tasks import default_task_backend

    settings.TASKS = DUMMY
    return default_task_backend.results


@pytest.fixture
def polling(live_orders, settings):
    """The watches poll by lookup only (``WATCH_FEED_INTERVAL`` off), against the sandbox: the
    tests of the polling steps themselves. tests/tasks/test_watch_feed.py tests the feed, which
    is on by default."""
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WATCH_FEED_INTERVAL": None}


@pytest.fixture
def new_order(live_orders, fresh_client):
    """An unpaid order created through create_order against the sandbox."""

    def create():
        return create_order(**create_order_input(), reference=new_reference(), finalize=True)

    return create


@pytest.fixture
def redis_queue(settings):
    """The tests' Redis database, emptied before and after (scheduled jobs, locks, workers)."""
    import django_rq

    connection = django_rq.get_connection("default")
    connection.flushdb()
    yield connection
    connection.flushdb()
