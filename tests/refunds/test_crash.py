"""A process killed with SIGKILL mid-refund: the resume leaves one upstream refund per reference."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.models import OrderRequest, Refund
from tests.fixtures import crash
from tests.refunds.conftest import upstream_refunds_by_reference

pytestmark = pytest.mark.django_db(transaction=True)


def start_and_kill(point: str, server, kwargs: dict) -> None:
    crash.start_and_kill("refund", point, server, kwargs)


@pytest.mark.parametrize(("point", "upstream_before"), [("before-send", 0), ("after-send", 1)])
def test_killed_sender_then_resume_leaves_one_refund_per_reference(
    point, upstream_before, live_orders, paid_order, lines, run_manage
):
    references = [f"{point}-{i}" for i in range(2)]
    for reference in references:
        start_and_kill(
            point,
            live_orders,
            {
                "order_id": paid_order.pk,
                "reference": reference,
                "reason": "item_returned",
                "lines": [{"line_item_id": lines["product"], "amount": 1000}],
            },
        )

    requests = list(OrderRequest.objects.filter(kind="refund_create").order_by("reference"))
    assert [r.reference for r in requests] == references
    assert all(r.attempts == 0 for r in requests)
    # After the send, the second process's fresh lookup of the order showed the first refund,
    # reference and all: that request is settled without a resend. The last one is pending.
    states = [r.state for r in requests]
    assert states == (["pending", "pending"] if upstream_before == 0 else ["succeeded", "pending"])
    upstream = upstream_refunds_by_reference(live_orders)
    assert sum(len(upstream.get(ref, [])) for ref in references) == 2 * upstream_before

    # The dead process's claims expire; the scheduled command resends each pending one once.
    OrderRequest.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))
    result = run_manage("resume_order_requests", server=live_orders)
    assert result.returncode == 0, result.stderr
    resent = states.count("pending")
    assert f"resent {resent}, succeeded {resent}" in result.stdout

    upstream = upstream_refunds_by_reference(live_orders)
    for request in OrderRequest.objects.filter(kind="refund_create"):
        assert request.state == OrderRequest.State.SUCCEEDED
        assert upstream[request.reference] == [request.refund_id]
        assert Refund.objects.filter(pk=request.refund_id).exists()
