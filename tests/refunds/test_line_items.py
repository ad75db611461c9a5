"""``Order.line_items``: the ids ``refund_order`` takes and what each line has left, from the
stored record and the mirrored refunds (DESIGN.md, Models)."""

from __future__ import annotations

import pytest

from django_orders.models import Order, OrderLineItem, Refund, order_line_items
from django_orders.services import refund_order
from tests.refunds.conftest import PAID

pytestmark = pytest.mark.django_db


def test_line_items_give_the_ids_refund_order_takes_and_follow_its_refunds(
    live_orders, paid_order, lines, django_assert_num_queries
):
    order = Order.objects.get(pk=paid_order.pk)
    with django_assert_num_queries(1):  # the order's refunds
        before = order.line_items

    assert before == [
        OrderLineItem(lines["product"], "product", "Kente scarf", 2, 10_000, 0, 10_000),
        OrderLineItem(lines["shipping"], "shipping", "shipping", 1, 990, 0, 990),
    ]
    product = before[0]
    refund_order(
        order.pk,
        reference="rma-lines",
        reason="item_returned",
        lines=[{"line_item_id": product.id, "amount": 2500}],
    )

    after = {line.id: line for line in Order.objects.get(pk=order.pk).line_items}
    assert (after[product.id].refunded, after[product.id].refundable) == (2500, 7500)
    assert after[lines["shipping"]].refundable == PAID["shipping"]
    # What is left adds up to what can still be refunded.
    assert sum(line.refundable for line in after.values()) == sum(PAID.values()) - 2500


def test_line_items_after_a_prefetch_cost_no_query(paid_order, django_assert_num_queries):
    order = Order.objects.prefetch_related("refunds").get(pk=paid_order.pk)

    with django_assert_num_queries(0):
        assert [line.type for line in order.line_items] == ["product", "shipping"]


def test_failed_and_canceled_refunds_leave_the_remainder_whole():
    raw = {
        "line_item_group": {
            "line_items": [
                {
                    "type": "fee",
                    "fee": {"id": "oli_f", "label": "Gift wrap", "amount": {"value": 300}},
                }
            ]
        }
    }
    used = {"line_items": [{"order_line_item_id": "oli_f", "refund_amount": {"value": 200}}]}
    refunds = [Refund(status=status, raw=used) for status in ("failed", "canceled", "processing")]

    [line] = order_line_items(raw, refunds)

    assert (line.name, line.type, line.paid, line.refunded, line.refundable) == (
        "Gift wrap",
        "fee",
        300,
        200,
        100,
    )


@pytest.mark.parametrize(
    "item",
    [
        "not an object",
        {"type": "product", "product": {"price": {"value": 100}}},  # no id
        {"type": "product", "product": {"id": "oli_p", "price": {"value": "100"}}},
        {"type": "product", "product": {"id": "oli_p", "price": {"value": 1}, "quantity": 1.5}},
        {"type": "shipping", "shipping": {"id": "oli_s"}},  # no fee
        {"type": None},
    ],
)
def test_a_line_the_record_does_not_describe_readably_is_left_out(item):
    raw = {"line_item_group": {"line_items": [item]}}

    assert order_line_items(raw, []) == []
    assert order_line_items({"line_item_group": "odd"}, []) == []
