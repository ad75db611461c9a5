"""RefundsStuckProcessing: refunds processing past the threshold fail the check, with the
oldest refund ids and what to do; recent ones and other statuses are healthy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from health_check.exceptions import ServiceUnavailable, ServiceWarning

from django_orders.health import RefundsStuckProcessing
from django_orders.models import Refund
from tests.admin.factories import make_customer, make_order

pytestmark = pytest.mark.django_db


def refund(n: int, status: str, *, age: timedelta, processing_for: timedelta | None = None):
    order = make_order(f"or_stuck{n}", make_customer(f"cu_stuck{n}"), status="paid")
    now = timezone.now()
    return Refund.objects.create(
        id=f"rf_stuck{n}",
        order=order,
        status=status,
        total=500,
        currency="ghs",
        created_at=now - age,
        processing_at=None if processing_for is None else now - processing_for,
    )


def failure(check):
    try:
        check.run()
    except (ServiceUnavailable, ServiceWarning) as exc:
        return exc
    return None


def test_refunds_processing_within_the_threshold_or_settled_are_healthy():
    refund(1, "processing", age=timedelta(days=9), processing_for=timedelta(days=1))
    refund(2, "succeeded", age=timedelta(days=30))
    refund(3, "pending", age=timedelta(days=30))

    assert failure(RefundsStuckProcessing(max_age=timedelta(days=3))) is None


def test_a_refund_processing_too_long_fails_naming_it_and_what_to_do():
    refund(1, "processing", age=timedelta(days=9), processing_for=timedelta(days=4))
    # No processing time from the provider: counted from its creation.
    refund(2, "processing", age=timedelta(days=5))
    refund(3, "processing", age=timedelta(days=5), processing_for=timedelta(hours=2))

    error = failure(RefundsStuckProcessing(max_age=timedelta(days=3)))

    assert isinstance(error, ServiceUnavailable)
    assert error.message.startswith("2 refund(s) processing for more than 3 days")
    assert "(rf_stuck2, rf_stuck1)" in error.message  # the oldest first
    assert "manage.py sync_orders" in error.message
    assert "provider's support" in error.message


def test_warn_only_and_the_named_ids_are_bounded():
    for n in range(4):
        refund(n, "processing", age=timedelta(days=10 + n))

    error = failure(RefundsStuckProcessing(warn_only=True, named=2))

    assert isinstance(error, ServiceWarning)
    assert "(rf_stuck3, rf_stuck2, ...)" in error.message
