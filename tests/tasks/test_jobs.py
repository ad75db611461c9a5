"""sync_orders_task and resume_order_requests_task run the services and return their counts."""

from __future__ import annotations

import pytest

from django_orders.models import Order, OrderRequest, SyncRun
from django_orders.tasks import resume_order_requests_task, sync_orders_task
from tests.tasks.conftest import IMMEDIATE

pytestmark = pytest.mark.django_db(transaction=True)


def test_sync_orders_task_syncs_the_mirror(live_orders, fresh_client, settings):
    settings.TASKS = IMMEDIATE
    live_orders.seed(12)

    result = sync_orders_task.enqueue()

    run = SyncRun.objects.get()
    assert result.return_value == {
        "sync_run": run.pk,
        "resource": "orders",
        "outcome": "succeeded",
        "pages": run.pages,
        "seen": 12,
        "created": 12,
        "updated": 0,
    }
    assert Order.objects.count() == 12


def test_resume_order_requests_task_resends_what_is_due(live_orders, fresh_client, settings):
    settings.TASKS = IMMEDIATE
    request = OrderRequest.objects.create(
        idempotency_key="k-task-1",
        reference="cart-task-1",
        payload='{"customer": {"name": "Ama"}, "line_items": []}',
    )

    result = resume_order_requests_task.enqueue()

    request.refresh_from_db()
    assert result.return_value["resent"] == 1
    assert request.attempts == 1
