"""Refund rows in the mirror: only forward, the signal once per real change, refunded totals."""

from __future__ import annotations

import pytest

from django_orders.exceptions import InvalidRecord
from django_orders.mirror.refunds import moves_forward, store_refunds
from django_orders.models import Order, Refund
from tests.admin.factories import make_customer, make_order

pytestmark = pytest.mark.django_db


def record(refund_id="rf_1", status="pending", order_id="or_1", value=500, **extra):
    return {
        "id": refund_id,
        "order_id": order_id,
        "status": status,
        "total": {"currency": "ghs", "value": value},
        "created_at": "2026-11-26T10:00:00Z",
        **extra,
    }


@pytest.fixture
def order():
    return make_order("or_1", make_customer("cu_1"), status="paid")


@pytest.mark.parametrize(
    ("stored", "incoming", "forward"),
    [
        ("pending", "processing", True),
        ("pending", "succeeded", True),
        ("pending", "canceled", True),
        ("processing", "failed", True),
        ("processing", "pending", False),
        ("processing", "canceled", False),
        ("succeeded", "failed", False),
        ("canceled", "pending", False),
        ("failed", "processing", False),
        ("pending", "on_hold", True),  # a status the app does not know yet
        ("on_hold", "succeeded", True),
    ],
)
def test_statuses_only_move_forward(stored, incoming, forward):
    assert moves_forward(stored, incoming) is forward


def test_signal_once_per_real_change_and_never_back(
    order, refund_changes, django_capture_on_commit_callbacks
):
    processing = record(status="processing", processing_at="2026-11-26T10:01:00Z")
    done = record(
        status="failed",
        processing_at="2026-11-26T10:01:00Z",
        failed_at="2026-11-26T10:02:00Z",
        failure={"reason": "refund_declined", "detail": "Declined.", "retryable": False},
    )
    with django_capture_on_commit_callbacks(execute=True):
        store_refunds([record()])
        store_refunds([record()])  # the same record: nothing
        store_refunds([processing])
        store_refunds([done])
        store_refunds([processing])  # an older answer arriving late: kept as failed
        store_refunds([record()])
    assert refund_changes.seen == [
        ("rf_1", None, "pending"),
        ("rf_1", "pending", "processing"),
        ("rf_1", "processing", "failed"),
    ]
    refund = Refund.objects.get()
    assert (refund.status, refund.failure_reason, refund.failure_detail) == (
        "failed",
        "refund_declined",
        "Declined.",
    )
    assert refund.failure_retryable is False
    assert refund.processing_at is not None and refund.failed_at is not None
    assert refund.raw == done  # kept whole


def test_a_bad_record_is_refused_and_nothing_is_written(order):
    with pytest.raises(InvalidRecord, match="created_at"):
        store_refunds([record(refund_id="rf_2"), record(created_at="yesterday")])
    assert not Refund.objects.exists()


def test_refunded_total_sums_succeeded_refunds_in_one_query(order, django_assert_num_queries):
    other = make_order("or_2", make_customer("cu_2"), status="paid")
    store_refunds(
        [
            record("rf_1", "succeeded", value=300, succeeded_at="2026-11-26T10:05:00Z"),
            record("rf_2", "succeeded", value=200, succeeded_at="2026-11-26T10:05:00Z"),
            record("rf_3", "pending", value=999),
            record("rf_4", "failed", order_id="or_2", value=50),
        ]
    )
    with django_assert_num_queries(1):
        totals = {o.pk: o.refunded_total for o in Order.objects.with_refunded_total()}
    assert totals == {"or_1": 500, "or_2": 0}
    assert other.refunded_total == 0
