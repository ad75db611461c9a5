"""Fixtures of the tasks tests: a backend that records what is enqueued, and a sandbox order."""

from __future__ import annotations

import pytest

from django_orders.services import create_order
from tests.fixtures.payloads import create_order_input, new_reference

DUMMY = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def enqueued(settings):
    """The dummy backend (it defers, and runs nothing): its list of enqueued task results."""
    from django_tasks import default_task_backend

    settings.TASKS = DUMMY
    return default_task_backend.results


@pytest.fixture
def new_order(live_orders, fresh_client):
    """An unpaid order created through create_order against the sandbox."""

    def create():
        return create_order(**create_order_input(), reference=new_reference(), finalize=True)

    return create
