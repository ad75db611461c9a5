"""Invalid input: a clear per-field error, nothing stored, nothing sent."""

from __future__ import annotations

import copy

import pytest
import responses

from django_orders.exceptions import InvalidOrderRequest
from django_orders.models import OrderRequest
from django_orders.services import create_order
from tests.fixtures.payloads import CREATE_CUSTOMER as CUSTOMER
from tests.fixtures.payloads import CREATE_LINE_ITEMS as LINE_ITEMS

pytestmark = pytest.mark.django_db


def _product(**changes):
    items = copy.deepcopy(LINE_ITEMS)
    items[0]["product"].update(changes)
    return items


def _price(**changes):
    items = copy.deepcopy(LINE_ITEMS)
    items[0]["product"]["price"].update(changes)
    return items


def _customer(**changes):
    return {**CUSTOMER, **changes}


# (id, keyword changes to a valid call, the field path that must be reported)
INVALID = [
    ("name-empty", {"customer": _customer(name="  ")}, "customer.name"),
    (
        "name-missing",
        {"customer": {k: v for k, v in CUSTOMER.items() if k != "name"}},
        "customer.name",
    ),
    ("name-not-string", {"customer": _customer(name=42)}, "customer.name"),
    (
        "email-no-at",
        {"customer": _customer(email_address="ama.example.com")},
        "customer.email_address",
    ),
    ("email-no-domain", {"customer": _customer(email_address="ama@")}, "customer.email_address"),
    (
        "email-space",
        {"customer": _customer(email_address="ama mensah@example.com")},
        "customer.email_address",
    ),
    (
        "phone-no-plus",
        {"customer": _customer(phone_number="233241234567")},
        "customer.phone_number",
    ),
    (
        "phone-spaces",
        {"customer": _customer(phone_number="+233 24 123 4567")},
        "customer.phone_number",
    ),
    ("phone-too-short", {"customer": _customer(phone_number="+1234567")}, "customer.phone_number"),
    (
        "phone-too-long",
        {"customer": _customer(phone_number="+1234567890123456")},
        "customer.phone_number",
    ),
    (
        "phone-letters",
        {"customer": _customer(phone_number="+23324123456a")},
        "customer.phone_number",
    ),
    ("customer-unknown-key", {"customer": _customer(nmae="x")}, "customer.nmae"),
    ("customer-not-object", {"customer": "Ama"}, "customer"),
    ("line-items-empty", {"line_items": []}, "line_items"),
    ("line-items-not-list", {"line_items": LINE_ITEMS[0]}, "line_items"),
    (
        "line-item-type-unknown",
        {"line_items": [{**LINE_ITEMS[0], "type": "gift"}]},
        "line_items[0].type",
    ),
    ("line-item-type-empty", {"line_items": [{**LINE_ITEMS[0], "type": ""}]}, "line_items[0].type"),
    ("product-missing", {"line_items": [{"type": "product"}]}, "line_items[0].product"),
    ("product-name-empty", {"line_items": _product(name="")}, "line_items[0].product.name"),
    ("product-type-unknown", {"line_items": _product(type="food")}, "line_items[0].product.type"),
    ("quantity-zero", {"line_items": _product(quantity=0)}, "line_items[0].product.quantity"),
    ("quantity-bool", {"line_items": _product(quantity=True)}, "line_items[0].product.quantity"),
    ("quantity-float", {"line_items": _product(quantity=2.0)}, "line_items[0].product.quantity"),
    ("quantity-string", {"line_items": _product(quantity="2")}, "line_items[0].product.quantity"),
    (
        "quantity-misspelt",
        {
            "line_items": [
                {
                    **LINE_ITEMS[0],
                    "product": {
                        **{k: v for k, v in LINE_ITEMS[0]["product"].items() if k != "quantity"},
                        "quantitiy": 2,
                    },
                }
            ]
        },
        "line_items[0].product.quantitiy",
    ),
    (
        "currency-upper",
        {"line_items": _price(currency="GHS")},
        "line_items[0].product.price.currency",
    ),
    (
        "currency-two-letters",
        {"line_items": _price(currency="gh")},
        "line_items[0].product.price.currency",
    ),
    ("value-negative", {"line_items": _price(value=-1)}, "line_items[0].product.price.value"),
    ("value-float", {"line_items": _price(value=50.0)}, "line_items[0].product.price.value"),
    ("value-bool", {"line_items": _price(value=False)}, "line_items[0].product.price.value"),
    ("value-string", {"line_items": _price(value="5000")}, "line_items[0].product.price.value"),
    ("mixed-currencies", {"line_items": LINE_ITEMS + _price(currency="usd")}, "line_items"),
    ("finalize-int", {"finalize": 1}, "finalize"),
    ("finalize-string", {"finalize": "true"}, "finalize"),
    ("reference-empty", {"reference": ""}, "reference"),
    ("reference-too-long", {"reference": "r" * 256}, "reference"),
    ("reference-not-string", {"reference": 17}, "reference"),
]


@pytest.mark.parametrize(("changes", "path"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_input_is_refused_before_anything_is_stored_or_sent(changes, path):
    kwargs = {"customer": copy.deepcopy(CUSTOMER), "line_items": copy.deepcopy(LINE_ITEMS)}
    kwargs.update(changes)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mocked:
        mocked.post("http://127.0.0.1:9/orders/create", json={"order": {}})
        with pytest.raises(InvalidOrderRequest) as caught:
            create_order(**kwargs)
        assert len(mocked.calls) == 0
    assert list(caught.value.errors) == [path]
    assert caught.value.errors[path]
    assert all(message.strip() for message in caught.value.errors[path])
    assert path in str(caught.value)
    assert OrderRequest.objects.count() == 0


def test_several_errors_are_all_reported_with_their_paths():
    items = _product(quantity=0, type="food")
    items[0]["product"]["price"]["currency"] = "GHS"
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(customer=_customer(phone_number="0241234567"), line_items=items)
    assert set(caught.value.errors) == {
        "customer.phone_number",
        "line_items[0].product.quantity",
        "line_items[0].product.type",
        "line_items[0].product.price.currency",
    }
    assert "physical" in " ".join(caught.value.errors["line_items[0].product.type"])


@pytest.mark.parametrize("item_type", ["product", "fee", "shipping"])
@pytest.mark.parametrize(
    "product_type", ["physical", "digital", "service", "voucher", "custom", "cause"]
)
def test_every_wire_value_is_accepted(item_type, product_type):
    from django_orders.validation import validate_order_input

    items = _product(type=product_type)
    items[0]["type"] = item_type
    data = validate_order_input(customer=CUSTOMER, line_items=items, finalize=True, reference="r-1")
    assert data["line_items"][0]["type"] == item_type
    assert data["line_items"][0]["product"]["type"] == product_type
