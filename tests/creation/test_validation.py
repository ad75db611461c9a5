"""Invalid input: a clear per-field error, nothing stored, nothing sent."""

from __future__ import annotations

import copy

import pytest

from django_orders.creation.validation import line_item_price, validate_order_input
from django_orders.exceptions import InvalidOrderRequest
from django_orders.models import OrderRequest
from django_orders.services import create_order
from tests.fixtures.payloads import CREATE_CUSTOMER as CUSTOMER
from tests.fixtures.payloads import CREATE_LINE_ITEMS as LINE_ITEMS
from tests.fixtures.payloads import new_reference

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


FEE = {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 250}, "label": "Service"}}
SHIPPING = {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 990}}}
SETTINGS = {
    "redirect_url": "https://shop.example.com/orders/return/",
    "cancel_url": "http://127.0.0.1:8000/orders/cancel/?x=1",
}


def _fee(**changes):
    return [*LINE_ITEMS, {"type": "fee", "fee": {**FEE["fee"], **changes}}]


def _shipping(fee):
    return [*LINE_ITEMS, {"type": "shipping", "shipping": {"fee": fee}}]


def _urls(**changes):
    return {"checkout_settings": {**SETTINGS, **changes}}


# (id, keyword changes to a valid call, the field path that must be reported)
INVALID = [
    ("reference-none", {"reference": None}, "reference"),
    ("reference-blank", {"reference": "  "}, "reference"),
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
    # Currencies: the setting's list (the provider's five by default), one per order.
    (
        "currency-unknown",
        {"line_items": _price(currency="xyz")},
        "line_items[0].product.price.currency",
    ),
    (
        "currency-jpy",
        {"line_items": _price(currency="jpy")},
        "line_items[0].product.price.currency",
    ),
    (
        "mixed-currencies-fee",
        {
            "line_items": [
                *LINE_ITEMS,
                {"type": "fee", "fee": {"amount": {"currency": "usd", "value": 1}}},
            ]
        },
        "line_items",
    ),
    (
        "mixed-currencies-shipping",
        {"line_items": _shipping({"currency": "eur", "value": 1})},
        "line_items",
    ),
    # Fee and shipping shapes.
    ("fee-without-body", {"line_items": [*LINE_ITEMS, {"type": "fee"}]}, "line_items[1].fee"),
    (
        "fee-without-amount",
        {"line_items": [*LINE_ITEMS, {"type": "fee", "fee": {"label": "Service"}}]},
        "line_items[1].fee.amount",
    ),
    (
        "fee-amount-negative",
        {"line_items": _fee(amount={"currency": "ghs", "value": -5})},
        "line_items[1].fee.amount.value",
    ),
    (
        "fee-amount-float",
        {"line_items": _fee(amount={"currency": "ghs", "value": 2.5})},
        "line_items[1].fee.amount.value",
    ),
    (
        "fee-amount-bool",
        {"line_items": _fee(amount={"currency": "ghs", "value": True})},
        "line_items[1].fee.amount.value",
    ),
    ("fee-label-not-string", {"line_items": _fee(label=5)}, "line_items[1].fee.label"),
    (
        "fee-unknown-key",
        {"line_items": _fee(price={"currency": "ghs", "value": 1})},
        "line_items[1].fee.price",
    ),
    (
        "fee-with-product-body",
        {
            "line_items": [
                *LINE_ITEMS,
                {"type": "fee", "fee": FEE["fee"], "product": LINE_ITEMS[0]["product"]},
            ]
        },
        "line_items[1].product",
    ),
    (
        "shipping-without-fee",
        {"line_items": [*LINE_ITEMS, {"type": "shipping", "shipping": {}}]},
        "line_items[1].shipping.fee",
    ),
    (
        "shipping-float",
        {"line_items": _shipping({"currency": "ghs", "value": 9.9})},
        "line_items[1].shipping.fee.value",
    ),
    (
        "shipping-negative",
        {"line_items": _shipping({"currency": "ghs", "value": -1})},
        "line_items[1].shipping.fee.value",
    ),
    (
        "product-with-fee-body",
        {"line_items": [{**LINE_ITEMS[0], "fee": FEE["fee"]}]},
        "line_items[0].fee",
    ),
    ("value-too-large", {"line_items": _price(value=2**53)}, "line_items[0].product.price.value"),
    # number
    ("number-too-long", {"number": "N" * 81}, "number"),
    ("number-not-string", {"number": 1001}, "number"),
    ("number-empty", {"number": ""}, "number"),
    ("number-newline", {"number": "A-1\nB"}, "number"),
    # checkout_settings
    ("urls-relative", _urls(redirect_url="/orders/return/"), "checkout_settings.redirect_url"),
    (
        "urls-javascript",
        _urls(redirect_url="javascript:alert(1)"),
        "checkout_settings.redirect_url",
    ),
    ("urls-data", _urls(cancel_url="data:text/html,<b>x</b>"), "checkout_settings.cancel_url"),
    ("urls-no-host", _urls(cancel_url="https:///return"), "checkout_settings.cancel_url"),
    ("urls-ftp", _urls(cancel_url="ftp://shop.example.com/"), "checkout_settings.cancel_url"),
    (
        "urls-credentials",
        _urls(redirect_url="https://user:pw@shop.example.com/"),
        "checkout_settings.redirect_url",
    ),
    (
        "urls-whitespace",
        _urls(redirect_url="https://shop.example.com/ return"),
        "checkout_settings.redirect_url",
    ),
    (
        "urls-newline",
        _urls(redirect_url="https://shop.example.com/\n"),
        "checkout_settings.redirect_url",
    ),
    ("urls-not-string", _urls(redirect_url=None), "checkout_settings.redirect_url"),
    (
        "urls-unknown-key",
        _urls(return_url="https://shop.example.com/"),
        "checkout_settings.return_url",
    ),
    (
        "urls-missing",
        {"checkout_settings": {"redirect_url": SETTINGS["redirect_url"]}},
        "checkout_settings.cancel_url",
    ),
    ("urls-not-object", {"checkout_settings": "https://shop.example.com/"}, "checkout_settings"),
    # custom_data
    ("custom-data-int-value", {"custom_data": {"cart": 9}}, "custom_data.cart"),
    ("custom-data-nested", {"custom_data": {"cart": {"id": "9"}}}, "custom_data.cart"),
    ("custom-data-null-value", {"custom_data": {"cart": None}}, "custom_data.cart"),
    ("custom-data-int-key", {"custom_data": {9: "cart"}}, "custom_data.9"),
    ("custom-data-key-too-long", {"custom_data": {"é" * 129: "x"}}, "custom_data." + "é" * 40),
    ("custom-data-too-large", {"custom_data": {"a": "x" * (25 * 1024)}}, "custom_data"),
    ("custom-data-list", {"custom_data": [["cart", "9"]]}, "custom_data"),
]


@pytest.mark.parametrize(("changes", "path"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_input_is_refused_before_anything_is_stored_or_sent(http_mock, changes, path):
    kwargs = {
        "customer": copy.deepcopy(CUSTOMER),
        "line_items": copy.deepcopy(LINE_ITEMS),
        "reference": new_reference(),
    }
    kwargs.update(changes)
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(**kwargs)
    assert len(http_mock.calls) == 0
    assert list(caught.value.errors) == [path]
    assert caught.value.errors[path]
    assert all(message.strip() for message in caught.value.errors[path])
    assert path in str(caught.value)
    assert OrderRequest.objects.count() == 0


def test_a_call_without_reference_is_refused_naming_it(http_mock):
    # Without a reference every call would make a new upstream order: one checkout, two orders.
    with pytest.raises(TypeError, match="'reference'"):
        create_order(customer=CUSTOMER, line_items=LINE_ITEMS)  # type: ignore[call-arg]
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(customer=CUSTOMER, line_items=LINE_ITEMS, reference=None)  # type: ignore[arg-type]
    assert "cart or checkout id" in caught.value.errors["reference"][0]
    assert len(http_mock.calls) == 0
    assert OrderRequest.objects.count() == 0


def test_several_errors_are_all_reported_with_their_paths():
    items = _product(quantity=0, type="food")
    items[0]["product"]["price"]["currency"] = "GHS"
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(
            customer=_customer(phone_number="0241234567"),
            line_items=items,
            reference=new_reference(),
        )
    assert set(caught.value.errors) == {
        "customer.phone_number",
        "line_items[0].product.quantity",
        "line_items[0].product.type",
        "line_items[0].product.price.currency",
    }
    assert "physical" in " ".join(caught.value.errors["line_items[0].product.type"])


@pytest.mark.parametrize(
    "product_type", ["physical", "digital", "service", "voucher", "custom", "cause"]
)
def test_every_product_type_is_accepted(product_type):
    data = validate_order_input(
        customer=CUSTOMER, line_items=_product(type=product_type), finalize=True, reference="r-1"
    )
    assert data["line_items"][0]["product"]["type"] == product_type


@pytest.mark.parametrize("currency", ["ghs", "usd", "gbp", "eur", "cny"])
def test_the_providers_currencies_are_accepted_by_default(currency):
    items = [
        {**_price(currency=currency)[0]},
        {"type": "shipping", "shipping": {"fee": {"currency": currency, "value": 0}}},
    ]
    data = validate_order_input(
        customer=CUSTOMER, line_items=items, finalize=True, reference="cart-1"
    )
    assert [line_item_price(item)["currency"] for item in data["line_items"]] == [currency] * 2


def test_all_three_line_item_shapes_and_the_optional_fields_pass_unchanged():
    items = [*LINE_ITEMS, FEE, SHIPPING]
    data = validate_order_input(
        customer=CUSTOMER,
        line_items=items,
        finalize=True,
        reference="cart-9",
        number="A-1001",
        checkout_settings=SETTINGS,
        custom_data={"cart": "9", "note": "é" * 10},
    )
    assert data["line_items"] == items
    assert (data["number"], data["checkout_settings"]) == ("A-1001", SETTINGS)
    assert data["custom_data"] == {"cart": "9", "note": "é" * 10}


def test_currencies_follow_the_setting(settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "CURRENCIES": ("eur",)}
    with pytest.raises(InvalidOrderRequest) as caught:
        validate_order_input(
            customer=CUSTOMER, line_items=LINE_ITEMS, finalize=True, reference="cart-1"
        )
    assert "eur" in caught.value.errors["line_items[0].product.price.currency"][0]
    items = _price(currency="eur")
    assert validate_order_input(
        customer=CUSTOMER, line_items=items, finalize=True, reference="cart-1"
    )


def test_custom_data_at_the_providers_limits_is_accepted():
    key = "k" * 256  # 256 bytes: the key limit
    # The whole object as compact UTF-8 JSON: {"k...k":"v...v"} = 256 + 7 + len(value) bytes.
    value = "v" * (25 * 1024 - 256 - 7)
    data = validate_order_input(
        customer=CUSTOMER,
        line_items=LINE_ITEMS,
        finalize=False,
        reference="cart-1",
        custom_data={key: value},
    )
    assert data["custom_data"] == {key: value}
    with pytest.raises(InvalidOrderRequest) as caught:
        validate_order_input(
            customer=CUSTOMER,
            line_items=LINE_ITEMS,
            finalize=False,
            reference="cart-1",
            custom_data={key: value + "v"},
        )
    assert list(caught.value.errors) == ["custom_data"]


def test_a_fee_written_as_a_product_names_both_fields():
    item = {"type": "fee", "product": LINE_ITEMS[0]["product"]}
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(customer=CUSTOMER, line_items=[*LINE_ITEMS, item], reference=new_reference())
    assert set(caught.value.errors) == {"line_items[1].fee", "line_items[1].product"}
    assert "Required for a fee line item" in caught.value.errors["line_items[1].fee"][0]
    assert "no product body" in caught.value.errors["line_items[1].product"][0]
    assert OrderRequest.objects.count() == 0
