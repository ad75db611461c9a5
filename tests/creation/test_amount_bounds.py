"""Quantities and amounts stay within what the service and the mirror hold exactly: refused
before anything is stored or sent, with the field named."""

from __future__ import annotations

import copy

import pytest

from django_orders.creation.validation import MAX_AMOUNT, MAX_QUANTITY, validate_order_input
from django_orders.exceptions import InvalidOrderRequest
from django_orders.models import OrderRequest
from django_orders.services import create_order
from tests.fixtures.payloads import CREATE_CUSTOMER, CREATE_LINE_ITEMS

pytestmark = pytest.mark.django_db


def product(quantity: int = 1, value: int = 5000) -> dict:
    item = copy.deepcopy(CREATE_LINE_ITEMS[0])
    item["product"].update(quantity=quantity, price={"currency": "ghs", "value": value})
    return item


def fee(value: int) -> dict:
    return {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": value}}}


TOO_LARGE = {
    "quantity-over-a-million": (
        [product(quantity=MAX_QUANTITY + 1)],
        "line_items[0].product.quantity",
    ),
    "quantity-10e19": ([product(quantity=10**19)], "line_items[0].product.quantity"),
    "price-10e19": ([product(value=10**19)], "line_items[0].product.price.value"),
    "fee-10e19": ([product(), fee(10**19)], "line_items[1].fee.amount.value"),
    "line-over-the-max": ([product(quantity=2, value=MAX_AMOUNT)], "line_items"),
    "total-over-the-max": ([product(), fee(MAX_AMOUNT), fee(MAX_AMOUNT)], "line_items"),
    "total-past-64-bits": ([product(quantity=MAX_QUANTITY, value=MAX_AMOUNT)], "line_items"),
}


@pytest.mark.parametrize(("line_items", "path"), TOO_LARGE.values(), ids=TOO_LARGE.keys())
def test_too_large_is_refused_before_anything_is_stored_or_sent(http_mock, line_items, path):
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(customer=dict(CREATE_CUSTOMER), line_items=line_items, reference="cart-1")
    assert list(caught.value.errors) == [path]
    assert path in str(caught.value)
    assert len(http_mock.calls) == 0
    assert not OrderRequest.objects.exists()


def test_the_largest_quantity_and_total_are_accepted():
    items = [product(quantity=MAX_QUANTITY, value=1), fee(MAX_AMOUNT - MAX_QUANTITY)]
    data = validate_order_input(
        customer=dict(CREATE_CUSTOMER), line_items=items, finalize=True, reference="cart-1"
    )
    assert data["line_items"] == items
