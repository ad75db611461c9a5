"""refund_order refuses bad input per field before anything is stored or sent."""

from __future__ import annotations

import pytest

from django_orders.exceptions import InvalidRefundRequest
from django_orders.models import OrderRequest
from django_orders.services import cancel_refund, refund_order

pytestmark = pytest.mark.django_db


def _line(line_id: str, amount: object = 100, **extra: object) -> dict:
    return {"line_item_id": line_id, "amount": amount, **extra}


SHAPES = [
    # (keyword changes, the field named); no lookup is needed to refuse these.
    ({"reason": "because"}, "reason"),
    ({"reason": None}, "reason"),
    ({"reason": "custom"}, "reason_details"),
    ({"reason_details": "x" * 2049}, "reason_details"),
    ({"reason_details": "  "}, "reason_details"),
    ({"reference": "r" * 257}, "reference"),
    ({"reference": ""}, "reference"),
    ({"lines": []}, "lines"),
    ({"lines": "oli_1"}, "lines"),
    ({"lines": [_line(f"oli_{i}") for i in range(65)]}, "lines"),
    ({"lines": [_line("oli_1", 0)]}, "lines[0].amount"),
    ({"lines": [_line("oli_1", -5)]}, "lines[0].amount"),
    ({"lines": [_line("oli_1", 1.5)]}, "lines[0].amount"),
    ({"lines": [_line("oli_1", True)]}, "lines[0].amount"),
    ({"lines": [_line("oli_1", "100")]}, "lines[0].amount"),
    ({"lines": [_line("oli_1"), _line("oli_1")]}, "lines[1].line_item_id"),
    ({"lines": [{"amount": 5}]}, "lines[0].line_item_id"),
    ({"lines": [_line("oli_1", colour="red")]}, "lines[0]"),
    ({"custom_data": {"a": 1}}, "custom_data"),
]


@pytest.mark.parametrize(("changes", "field"), SHAPES)
def test_shape_errors_name_the_field_and_nothing_is_read_stored_or_sent(
    live_orders, sandbox_paths, changes, field
):
    arguments = {"reference": "r", "reason": "duplicate", **changes}
    with pytest.raises(InvalidRefundRequest) as refused:
        refund_order("or_anything", **arguments)
    assert list(refused.value.errors) == [field]
    assert sandbox_paths == []
    assert not OrderRequest.objects.exists()


def test_64_lines_and_2048_characters_are_allowed_shapes(live_orders, sandbox_paths):
    # Past the shape checks (the order is then unknown to the mirror): the limits are inclusive.
    from django_orders.models import Order

    with pytest.raises(Order.DoesNotExist):
        refund_order(
            "or_unknown",
            reference="r" * 256,
            reason="custom",
            reason_details="d" * 2048,
            lines=[_line(f"oli_{i}") for i in range(64)],
        )
    assert sandbox_paths == []


def _order_checks(lines):
    return [
        ([_line("oli_nope")], "lines[0].line_item_id"),
        ([_line(lines["product"], 10_001)], "lines[0].amount"),
        (
            [_line(lines["shipping"], 990), _line(lines["product"], 1, currency="usd")],
            "lines[1].currency",
        ),
    ]


@pytest.mark.parametrize("case", range(3))
def test_order_errors_name_the_field_and_nothing_is_stored_or_sent(
    live_orders, paid_order, lines, sandbox_paths, case
):
    bad_lines, field = _order_checks(lines)[case]
    with pytest.raises(InvalidRefundRequest) as refused:
        refund_order(paid_order.pk, reference="r", reason="duplicate", lines=bad_lines)
    assert list(refused.value.errors) == [field]
    assert "/refunds/create" not in sandbox_paths
    assert not OrderRequest.objects.filter(kind=OrderRequest.Kind.REFUND_CREATE).exists()


def test_remainder_counts_refunds_upstream_and_requests_in_flight(live_orders, paid_order, lines):
    refund_order(
        paid_order.pk, reference="a", reason="duplicate", lines=[_line(lines["product"], 6000)]
    )
    # A request whose outcome is unknown (the answer was dropped: not in the mirror yet).
    live_orders.add_fault("drop_after_commit", "/refunds/create", times=10)
    from django_orders.exceptions import RefundRequestPending

    with pytest.raises(RefundRequestPending):
        refund_order(
            paid_order.pk, reference="b", reason="duplicate", lines=[_line(lines["product"], 3000)]
        )
    live_orders.faults.clear()
    with pytest.raises(InvalidRefundRequest) as refused:
        refund_order(
            paid_order.pk, reference="c", reason="duplicate", lines=[_line(lines["product"], 1001)]
        )
    assert "the 1000 still refundable" in str(refused.value)
    # That lookup showed "b" upstream (by its reference): its request is settled, not resent.
    settled = OrderRequest.objects.get(reference="b", kind=OrderRequest.Kind.REFUND_CREATE)
    assert settled.state == OrderRequest.State.SUCCEEDED and settled.refund_id
    refund = refund_order(
        paid_order.pk, reference="d", reason="duplicate", lines=[_line(lines["product"], 1000)]
    )
    assert refund.total == 1000
    assert len(live_orders.refunds_created_via_api()) == 3


def test_cancel_reason_is_checked(live_orders):
    with pytest.raises(InvalidRefundRequest):
        cancel_refund("rf_x", reason="x" * 2049)


def test_a_request_in_flight_that_upstream_does_not_show_yet_still_counts(
    live_orders, paid_order, lines
):
    from django_orders.exceptions import RefundRequestPending

    # Never reached upstream (every try answered 503 before any work): unknown to the lookup,
    # but it may still be sent, so its amount is not refundable twice.
    live_orders.add_fault("error_before_write", "/refunds/create", times=4, status=503)
    with pytest.raises(RefundRequestPending):
        refund_order(
            paid_order.pk, reference="b", reason="duplicate", lines=[_line(lines["product"], 9000)]
        )
    assert live_orders.refunds_created_via_api() == []
    with pytest.raises(InvalidRefundRequest) as refused:
        refund_order(
            paid_order.pk, reference="c", reason="duplicate", lines=[_line(lines["product"], 1001)]
        )
    assert list(refused.value.errors) == ["lines[0].amount"]
