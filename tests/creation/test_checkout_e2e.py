"""create_order, cancel_order and confirm_order against the sandbox over loopback HTTP."""

from __future__ import annotations

import json

import pytest

from django_orders.exceptions import (
    InvalidOrderRequest,
    OrderNotCancellable,
    ReferenceConflict,
)
from django_orders.models import Order, OrderRequest
from django_orders.services import cancel_order, confirm_order, create_order
from tests.fixtures.payloads import create_order_input, new_reference

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = {
    "redirect_url": "https://shop.example.com/payment/return/?from=pay",
    "cancel_url": "https://shop.example.com/payment/cancel/",
}
LINE_ITEMS = [
    {
        "type": "product",
        "product": {
            "name": "Kente scarf",
            "type": "physical",
            "quantity": 2,
            "price": {"currency": "ghs", "value": 5000},
        },
    },
    {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 250}, "label": "Service"}},
    {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 990}}},
]


def checkout(**changes):
    kwargs = {
        **create_order_input(),
        "reference": new_reference(),
        "line_items": LINE_ITEMS,
        "finalize": True,
        "number": "A-1001",
        "checkout_settings": SETTINGS,
        "custom_data": {"cart": "c-9", "note": "gift wrap, é"},
    }
    kwargs.update(changes)
    return create_order(**kwargs)


def creates(received) -> list[dict]:
    return [json.loads(body) for body in received.creates()]


def test_all_three_line_item_shapes_and_the_optional_fields(live_orders, received):
    order = checkout(reference="cart-1")

    [sent] = creates(received)
    assert sent["line_items"] == LINE_ITEMS
    assert (sent["number"], sent["checkout_settings"]) == ("A-1001", SETTINGS)
    assert sent["custom_data"] == {"cart": "c-9", "note": "gift wrap, é"}
    upstream = live_orders.store.order(order.id)
    assert upstream["line_item_group"]["total"] == {"currency": "ghs", "value": 11240}
    assert [item["type"] for item in upstream["line_item_group"]["line_items"]] == [
        "product",
        "fee",
        "shipping",
    ]
    assert upstream["checkout_settings"] == SETTINGS
    # The mirror has the money and the payment page.
    assert (order.total, order.currency, order.number) == (11240, "ghs", "A-1001")
    assert order.payment_url == live_orders.payment_url(order.id)
    assert order.status == "requires_payment"


def test_invalid_input_against_the_sandbox_stores_and_sends_nothing(live_orders, received):
    fee = {"type": "fee", "fee": {"label": "Service"}}  # no amount
    with pytest.raises(InvalidOrderRequest) as caught:
        checkout(line_items=[*LINE_ITEMS, fee], custom_data={"n": 1}, number="N" * 81)
    assert set(caught.value.errors) == {"line_items[3].fee.amount", "custom_data.n", "number"}
    assert received.creates() == [] and not OrderRequest.objects.exists()


def test_a_reference_reused_for_another_cart_is_a_conflict(live_orders, received):
    first = checkout(reference="cart-2")
    assert checkout(reference="cart-2") == first  # the same cart: the stored outcome

    with pytest.raises(ReferenceConflict) as caught:
        checkout(reference="cart-2", number="A-1002")

    assert isinstance(caught.value, InvalidOrderRequest)
    assert caught.value.kind == "order"
    assert str(caught.value).startswith("Invalid order request: reference: ")
    assert caught.value.reference == "cart-2"
    assert "cart-2" in str(caught.value) and list(caught.value.errors) == ["reference"]
    assert len(received.creates()) == 1
    assert OrderRequest.objects.count() == 1 and Order.objects.count() == 1


def test_cancel_an_unpaid_order_and_repeat_it(live_orders, received):
    order = checkout()

    cancelled = cancel_order(order, reason="Customer changed their mind")

    assert cancelled.status == "canceled" and cancelled.canceled_at is not None
    assert live_orders.store.order(order.id)["status"] == "canceled"
    assert cancel_order(order.id).status == "canceled"  # repeat: fine, nothing sent
    cancels = [body for path, body in received.bodies if path == "/orders/cancel"]
    assert len(cancels) == 1
    assert json.loads(cancels[0])["reason"] == "Customer changed their mind"


def test_a_paid_order_is_refused_before_sending_once_the_mirror_knows(live_orders, received):
    order = checkout()
    live_orders.pay_order(order.id)
    confirm_order(order.id, wait=0)

    with pytest.raises(OrderNotCancellable) as caught:
        cancel_order(order)

    assert caught.value.status == "paid" and caught.value.error is None
    assert not [path for path, _ in received.bodies if path == "/orders/cancel"]


def test_a_paid_order_the_mirror_thinks_unpaid_is_refused_by_the_service(live_orders, received):
    order = checkout()
    live_orders.pay_order(order.id)  # the mirror still says requires_payment

    with pytest.raises(OrderNotCancellable) as caught:
        cancel_order(order)

    assert caught.value.status == "paid"
    assert caught.value.error.status_code == 400
    assert caught.value.error.code == "order_already_paid"
    assert Order.objects.get(pk=order.id).status == "paid"  # learnt by the lookup
    assert live_orders.store.order(order.id)["status"] == "paid"


def test_confirm_sees_the_payment(live_orders, sleeps):
    order = checkout()
    assert confirm_order(order.id, wait=0).status == "requires_payment"
    live_orders.pay_order(order.id)

    confirmed = confirm_order(order.id)

    assert confirmed.status == "paid" and confirmed.paid_at is not None
    assert (confirmed.total, confirmed.currency) == (11240, "ghs")
    assert sleeps == []


def test_confirm_refuses_an_id_of_the_service_this_shop_does_not_know(live_orders, received):
    [foreign] = live_orders.insert_orders(1)
    with pytest.raises(Order.DoesNotExist):
        confirm_order(foreign)
    assert not [path for path, _ in received.bodies if path == "/orders/lookup"]
