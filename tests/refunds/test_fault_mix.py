"""Under dropped answers and 5xx on refund creates, then a resume: one refund per reference."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.exceptions import RefundRequestPending
from django_orders.models import OrderRequest, Refund
from django_orders.services import refund_order, resume_order_requests
from tests.refunds.conftest import upstream_refunds_by_reference

pytestmark = pytest.mark.django_db
REFERENCES = 40


def test_fault_mix_then_resume_leaves_exactly_one_refund_per_reference(
    live_orders, paid_order, lines
):
    rng = random.Random(33)
    pending = 0
    for i in range(REFERENCES):
        draw = rng.random()
        times = rng.randint(1, 4)  # 4: every try of the call (MAX_RETRIES 3) fails
        if draw < 0.3:
            live_orders.add_fault("drop_after_commit", "/refunds/create", times=times)
        elif draw < 0.4:
            kind = rng.choice(["error_after_write", "error_before_write"])
            live_orders.add_fault(kind, "/refunds/create", times=times, status=503)
        try:
            refund_order(
                paid_order.pk,
                reference=f"mix-{i}",
                reason="requested_by_customer",
                lines=[{"line_item_id": lines["product"], "amount": 100}],
            )
        except RefundRequestPending:
            pending += 1
        live_orders.faults.clear()
    assert pending > 0  # the mix did leave outcomes unknown

    resume_order_requests(now=timezone.now() + timedelta(hours=2))

    requests = OrderRequest.objects.filter(kind=OrderRequest.Kind.REFUND_CREATE)
    assert requests.count() == REFERENCES
    assert set(requests.values_list("state", flat=True)) == {OrderRequest.State.SUCCEEDED}
    upstream = upstream_refunds_by_reference(live_orders)
    assert sorted(upstream) == sorted(f"mix-{i}" for i in range(REFERENCES))
    for request in requests:
        assert upstream[request.reference] == [request.refund_id]
    assert Refund.objects.count() == REFERENCES
