"""A process killed with SIGKILL mid-creation: the resume leaves one upstream order per request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.models import Order, OrderRequest
from tests.creation.conftest import upstream_orders_by_key
from tests.fixtures import crash

pytestmark = pytest.mark.django_db(transaction=True)


def start_and_kill(point: str, server, kwargs: dict) -> None:
    crash.start_and_kill("create", point, server, kwargs)


@pytest.mark.parametrize(("point", "upstream_before"), [("before-send", 0), ("after-send", 1)])
def test_killed_process_then_resume_command_leaves_one_linked_order_per_request(
    point, upstream_before, live_orders, received, order_input, run_manage
):
    references = [f"{point}-{i}" for i in range(3)]
    for reference in references:
        start_and_kill(point, live_orders, {**order_input, "reference": reference})

    requests = list(OrderRequest.objects.order_by("reference"))
    assert [r.reference for r in requests] == sorted(references)
    now = timezone.now()
    for request in requests:
        assert request.state == OrderRequest.State.PENDING
        assert request.attempts == 0
        assert request.claimed_until > now  # the dead process's claim, not yet expired
    by_key = upstream_orders_by_key(live_orders)
    assert sum(len(by_key.get(r.idempotency_key, [])) for r in requests) == 3 * upstream_before

    # Before the claim expires nobody resends: the dead process might still be sending.
    early = run_manage("resume_order_requests", server=live_orders)
    assert early.returncode == 0, early.stderr
    assert "resent 0" in early.stdout
    # Time passes: the claims expire and the scheduled command resends each request once.
    OrderRequest.objects.update(claimed_until=now - timedelta(seconds=1))
    result = run_manage("resume_order_requests", server=live_orders)
    assert result.returncode == 0, result.stderr
    assert "resent 3, succeeded 3, still pending 0, failed 0, needs review 0" in result.stdout

    by_key = upstream_orders_by_key(live_orders)
    for request in OrderRequest.objects.all():
        assert request.state == OrderRequest.State.SUCCEEDED
        assert by_key[request.idempotency_key] == [request.order_id]
        assert Order.objects.filter(pk=request.order_id).exists()
        # Every body the sandbox received for this key is the stored payload, byte for byte.
        sent = received.creates_for_key(request.idempotency_key)
        assert sent and set(sent) == {request.payload.encode()}
    assert len(by_key) == 3
    assert live_orders.api_key not in result.stdout + result.stderr + early.stdout + early.stderr
