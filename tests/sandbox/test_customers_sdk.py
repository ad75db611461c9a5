"""Known customers and offline payments speak the provider's contract: its SDK (``inttegro``)
decodes ``customers.create|update`` into a typed ``Customer``, an order made with
``customer_id``, billing, shipping, invoice settings and catalog lines into a typed ``Order``,
and ``orders.pay`` with ``paid_out_of_band`` into a paid ``Order`` (nothing left untyped:
``assert_typed``); each violation is the provider's error body, naming its field."""

from __future__ import annotations

import pytest
from inttegro.customer.customer import Customer
from inttegro.errors import APIError
from inttegro.order.order import Order

from tests.fixtures.payloads import order_payload

from .conftest import named_field
from .refund_helpers import paid_order
from .test_sdk_contract import assert_error, assert_typed

ADDRESS = {
    "name": "Ama Mensah",
    "phone_number": "+233241234567",
    "line1": "12 Oxford Street",
    "town": "Accra",
    "country": "Ghana",
}


def new_customer(sdk, **extra) -> Customer:
    return sdk.customers.create(
        {"name": "Ama Mensah", "email_address": "ama@example.com", "reference": "user-42", **extra}
    )


def test_create_and_update_decode_a_typed_customer(sdk, sandbox):
    customer = new_customer(sdk, billing_address={"country": "Ghana", "city": "Accra"})
    assert isinstance(customer, Customer)
    assert_typed(customer, "customer")
    assert (customer.reference, customer.guest) == ("user-42", False)
    assert customer.billing_address is not None and customer.billing_address.city == "Accra"

    updated = sdk.customers.update(
        {"customer_id": customer.id, "phone_number": "+233201234567"}, idempotency_key="upd-1"
    )
    assert_typed(updated, "customer")
    assert updated.phone_number == "+233201234567"
    assert updated.name == "Ama Mensah"  # a field not sent is left as it is
    assert updated.updated_at is not None
    assert sdk.customers.lookup(customer.id).phone_number == "+233201234567"


def test_keys_are_kept_per_path_as_the_sdk_sends_them(sdk, api, sandbox):
    body = {"name": "Ama", "request_meta": {"idempotency_key": "same-key"}}
    first = api.post("/customers/create", body).json()
    again = api.post("/customers/create", body)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first
    assert sandbox.store.count("customers") == 1
    other = api.post("/customers/create", {**body, "name": "Kofi"})
    assert other.status_code == 422  # the same key with another body
    # The update's key comes in the header (the SDK's carrier there); replayed likewise.
    update = {"customer_id": first["customer"]["id"], "name": "Ama K."}
    one = api.post("/customers/update", update, headers={"Idempotency-Key": "same-key"})
    two = api.post("/customers/update", update, headers={"Idempotency-Key": "same-key"})
    assert one.status_code == 200 and two.headers["Idempotent-Replayed"] == "true"


def test_an_order_for_a_known_customer_with_every_new_field_decodes(sdk, sandbox):
    customer = new_customer(sdk)
    order = sdk.orders.create(
        {
            "customer_id": customer.id,
            "finalize": True,
            "line_items": [
                {
                    "type": "product",
                    "product": {
                        "product_id": "prod_sandbox_tee",
                        "price_id": "price_sandbox_tee_ghs",
                        "quantity": 2,
                    },
                }
            ],
            "billing_details": {
                "name": "Kofi Boateng",
                "email_address": "kofi@example.com",
                "phone_number": "+233201234567",
                "address": ADDRESS,
            },
            "shipping": {"address": {**ADDRESS, "line1": "7 Ring Road"}},
            "statement_descriptor": "KENTE SHOP",
            "receipt_number": "R-1",
            "invoice_settings": {"number": "INV-1", "memo": "Thanks"},
        }
    )
    assert isinstance(order, Order)
    assert_typed(order, "order")
    assert order.customer.id == customer.id
    assert order.customer.billing_address.city == "Accra"
    assert order.customer.shipping_address.line1 == "7 Ring Road"
    assert order.receipt_number == "R-1"
    assert order.invoice_settings.number == "INV-1"
    product = order.line_item_group.line_items[0].product
    assert (product.product_id, product.price_id, product.name) == (
        "prod_sandbox_tee",
        "price_sandbox_tee_ghs",
        "Sandbox T-shirt",
    )
    assert order.line_item_group.total.value == 24000

    paid = sdk.orders.pay({"order_id": order.id, "paid_out_of_band": True})
    assert_typed(paid, "order")
    assert paid.status == "paid" and paid.paid_at is not None
    assert paid.payment.paid_offline is True
    assert paid.payment.statement_descriptor == "KENTE SHOP"
    assert "balance_transaction" not in paid.payment  # no money went through the provider


@pytest.mark.parametrize(
    "change, field",
    [
        ({"statement_descriptor": "X" * 23}, "statement_descriptor"),
        ({"statement_descriptor_prefix": "K"}, "statement_descriptor_prefix"),
        (
            {"statement_descriptor": "KENTE", "statement_descriptor_prefix": "KE"},
            "statement_descriptor_prefix",
        ),
        (
            {"shipping": {"address": {"name": "A", "line1": "1", "town": "Accra"}}},
            "shipping.address.phone_number",
        ),
        ({"shipping": {"address": {**ADDRESS, "country": None}}}, "shipping.address.country"),
        ({"billing_details": {"name": "Kofi"}}, "billing_details.email_address"),
        ({"invoice_settings": {"colour": "red"}}, "invoice_settings.colour"),
        ({"receipt_number": "R" * 81}, "receipt_number"),
    ],
)
def test_each_violation_is_the_providers_error_naming_the_field(sdk, change, field):
    with pytest.raises(APIError) as caught:
        sdk.orders.create({**order_payload(), **change})
    error = assert_error(caught.value, 400, caught.value.code)
    assert named_field(error.to_dict()) == field


def test_unknown_customers_and_catalog_prices_are_not_found(sdk):
    payload = order_payload()
    del payload["customer_data"]
    with pytest.raises(APIError) as caught:
        sdk.orders.create({**payload, "customer_id": "cu_missing"})
    assert "customer" in assert_error(caught.value, 404, "resource_missing").message
    line = {"type": "product", "product": {"product_id": "p", "price_id": "q", "quantity": 1}}
    with pytest.raises(APIError) as caught:
        sdk.orders.create({**order_payload(), "line_items": [line]})
    assert_error(caught.value, 404, "resource_missing")
    with pytest.raises(APIError) as caught:
        sdk.customers.update({"customer_id": "cu_missing", "name": "A"})
    assert_error(caught.value, 404, "resource_missing")


def test_pay_refuses_orders_not_awaiting_payment(sdk, api, sandbox):
    paid = paid_order(api, sandbox)
    with pytest.raises(APIError) as caught:
        sdk.orders.pay({"order_id": paid["id"], "paid_out_of_band": True})
    assert_error(caught.value, 400, "order_already_paid")
    unpaid = paid_order(api, sandbox, pay=False)
    sandbox.set_order_status(unpaid["id"], "canceled")
    with pytest.raises(APIError) as caught:
        sdk.orders.pay({"order_id": unpaid["id"], "paid_out_of_band": True})
    assert_error(caught.value, 400, "order_not_payable")
    with pytest.raises(APIError) as caught:
        sdk.orders.pay({"order_id": unpaid["id"]})
    assert named_field(assert_error(caught.value, 400, caught.value.code).to_dict()) == (
        "paid_out_of_band"
    )
