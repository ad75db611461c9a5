"""Order creation: the success shape and every rejection naming its field."""

from __future__ import annotations

import copy
import re
from datetime import datetime

import pytest

from .conftest import error_of, named_field, order_payload


def test_create_returns_a_new_stored_order(api, sandbox):
    payload = order_payload()
    response = api.create(payload)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response.headers
    order = response.json()["order"]
    assert re.fullmatch(r"or_[A-Za-z0-9]{24}", order["id"])
    assert order["status"] == "requires_payment"
    assert order["initiated_at"].endswith("Z")
    datetime.fromisoformat(order["initiated_at"])
    customer = order["customer"]
    assert re.fullmatch(r"cu_[A-Za-z0-9]{24}", customer["id"])
    assert customer == {
        "id": customer["id"],
        "guest": True,
        "name": "Ama Mensah",
        "email_address": "ama@example.com",
        "phone_number": "+233200000000",
    }
    group = order["line_item_group"]
    # The input line echoed with an order-line id of its own.
    [line] = group["line_items"]
    assert re.fullmatch(r"oli_[A-Za-z0-9]{24}", line["product"].pop("id"))
    assert line == payload["line_items"][0]
    assert group["total"] == {"currency": "ghs", "value": 10000}
    assert order["sealed_at"] == order["initiated_at"]
    pay_url = f"{sandbox.url}/pay/{order['id']}"
    assert order["invoice"] == {
        "number": None,
        "format": {"web": {"url": pay_url}, "pdf": {"url": pay_url + "/invoice.pdf"}},
    }
    # Without a number of its own the order is numbered with its id, as the provider does.
    assert order["number"] == order["id"]
    assert order["custom_data"] is None
    assert order["checkout_settings"] is None
    assert "completed_at" not in order
    assert "paid_at" not in order
    # Stored, at the front of the first page, and found by lookup.
    order["line_item_group"]["line_items"][0]["product"]["id"] = line_id = sandbox.store.order(
        order["id"]
    )["line_item_group"]["line_items"][0]["product"]["id"]
    assert line_id.startswith("oli_")
    assert sandbox.store.order(order["id"]) == order
    assert api.page().json()["page"]["orders"][0] == order
    assert api.post("/orders/lookup", {"order_id": order["id"]}).json() == {"order": order}
    assert sandbox.store.orders_created_via_api() == [
        {"order_id": order["id"], "idempotency_key": payload["request_meta"]["idempotency_key"]}
    ]


def test_finalized_order_expires_after_the_lifetime(api, sandbox):
    order = api.create(order_payload()).json()["order"]
    initiated = datetime.fromisoformat(order["initiated_at"])
    expires = datetime.fromisoformat(order["expires_at"])
    assert (expires - initiated).total_seconds() == 3600


def test_unfinalized_order_is_preparing_without_seal_invoice_or_expiry(api):
    order = api.create(order_payload(finalize=False)).json()["order"]
    assert order["status"] == "preparing"
    assert "sealed_at" not in order
    assert "invoice" not in order
    assert "expires_at" not in order


def test_all_three_line_item_shapes_get_ids_and_count_in_the_total(api):
    payload = order_payload()
    payload["line_items"] += [
        {
            "type": "fee",
            "fee": {
                "amount": {"currency": "ghs", "value": 250},
                "label": "Service fee",
                "description": "Card handling",
            },
        },
        {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 50}}},
        {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 700}}},
    ]
    response = api.create(payload)
    assert response.status_code == 200, response.text
    group = response.json()["order"]["line_item_group"]
    # 2 x 5000 + 250 + 50 + 700
    assert group["total"] == {"currency": "ghs", "value": 11000}
    product, fee, bare_fee, shipping = group["line_items"]
    assert product["product"]["id"].startswith("oli_")
    assert re.fullmatch(r"olf_[A-Za-z0-9]{24}", fee["fee"].pop("id"))
    assert fee == {
        "type": "fee",
        "fee": {
            "label": "Service fee",
            "description": "Card handling",
            "amount": {"currency": "ghs", "value": 250},
        },
    }
    assert bare_fee["fee"]["label"] == "Fee"  # the provider's fee always has a label
    assert re.fullmatch(r"ols_[A-Za-z0-9]{24}", shipping["shipping"].pop("id"))
    assert shipping == {
        "type": "shipping",
        "shipping": {"label": None, "fee": {"currency": "ghs", "value": 700}},
    }


def test_number_custom_data_and_checkout_settings_are_stored_and_echoed(api, sandbox):
    settings = {
        "redirect_url": "https://shop.example/orders/return?step=2",
        "cancel_url": "http://localhost:8000/cancel",
    }
    custom = {"cart_id": "c-1", "k" * 256: "v", "note": "é" * 100}
    payload = order_payload(number="SHOP-0042", custom_data=custom, checkout_settings=settings)
    order = api.create(payload).json()["order"]
    assert order["number"] == "SHOP-0042"
    assert order["custom_data"] == custom
    assert order["checkout_settings"] == settings
    assert sandbox.store.order(order["id"])["checkout_settings"] == settings


def _set(payload, path, value):
    """Set (or delete, for ``...``) a dotted/indexed path in the payload."""
    keys = re.findall(r"[^.\[\]]+", path)
    target = payload
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
    if value is ...:
        del target[last]
    else:
        target[last] = value


PRODUCT = "line_items[0].product"
INVALID = [
    ("request_meta", ..., "request_meta"),
    ("request_meta", "key", "request_meta"),
    ("request_meta.idempotency_key", ..., "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", "", "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", "x" * 256, "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", "has space", "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", "tab\there", "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", "ctl\x01", "request_meta.idempotency_key"),
    ("request_meta.idempotency_key", 123, "request_meta.idempotency_key"),
    ("customer_data", ..., "customer_data"),
    ("customer_data.name", ..., "customer_data.name"),
    ("customer_data.name", "", "customer_data.name"),
    ("customer_data.name", 5, "customer_data.name"),
    ("customer_data.email_address", ..., "customer_data.email_address"),
    ("customer_data.email_address", "not-an-email", "customer_data.email_address"),
    ("customer_data.phone_number", ..., "customer_data.phone_number"),
    ("customer_data.phone_number", "0200000000", "customer_data.phone_number"),
    ("customer_data.phone_number", 233200000000, "customer_data.phone_number"),
    ("line_items", ..., "line_items"),
    ("line_items", [], "line_items"),
    ("line_items", {"type": "product"}, "line_items"),
    ("line_items[0]", "product", "line_items[0]"),
    ("line_items[0].type", "discount", "line_items[0].type"),
    ("line_items[0].type", ..., "line_items[0].type"),
    (PRODUCT, ..., PRODUCT),
    (f"{PRODUCT}.name", ..., f"{PRODUCT}.name"),
    (f"{PRODUCT}.price", ..., f"{PRODUCT}.price"),
    (f"{PRODUCT}.price.currency", "GHS", f"{PRODUCT}.price.currency"),
    (f"{PRODUCT}.price.currency", "gh", f"{PRODUCT}.price.currency"),
    (f"{PRODUCT}.price.currency", ..., f"{PRODUCT}.price.currency"),
    (f"{PRODUCT}.price.value", 50.0, f"{PRODUCT}.price.value"),
    (f"{PRODUCT}.price.value", "5000", f"{PRODUCT}.price.value"),
    (f"{PRODUCT}.price.value", True, f"{PRODUCT}.price.value"),
    (f"{PRODUCT}.price.value", -1, f"{PRODUCT}.price.value"),
    (f"{PRODUCT}.quantity", 0, f"{PRODUCT}.quantity"),
    (f"{PRODUCT}.quantity", 1.5, f"{PRODUCT}.quantity"),
    (f"{PRODUCT}.quantity", True, f"{PRODUCT}.quantity"),
    (f"{PRODUCT}.type", "hardware", f"{PRODUCT}.type"),
    (f"{PRODUCT}.type", ..., f"{PRODUCT}.type"),
    (f"{PRODUCT}.price.currency", "ngn", f"{PRODUCT}.price.currency"),
    (f"{PRODUCT}.price.currency", "xyz", f"{PRODUCT}.price.currency"),
    ("line_items[0].fee", {"amount": {"currency": "ghs", "value": 1}}, "line_items[0].fee"),
    ("finalize", "yes", "finalize"),
    ("finalize", 1, "finalize"),
    ("number", "n" * 81, "number"),
    ("number", 42, "number"),
    ("number", "", "number"),
    ("custom_data", ["a"], "custom_data"),
    ("custom_data", {"a": 1}, "custom_data.a"),
    ("custom_data", {"a": {"b": "c"}}, "custom_data.a"),
    ("custom_data", {"k" * 257: "v"}, "custom_data"),
    ("custom_data", {"big": "x" * (25 * 1024)}, "custom_data"),
    ("checkout_settings", "https://x.example", "checkout_settings"),
    ("checkout_settings", {"redirect_url": "/relative"}, "checkout_settings.redirect_url"),
    ("checkout_settings", {"cancel_url": "javascript:alert(1)"}, "checkout_settings.cancel_url"),
    ("checkout_settings", {"redirect_url": 5}, "checkout_settings.redirect_url"),
    ("checkout_settings", {"return_url": "https://x.example"}, "checkout_settings.return_url"),
]

FEE = "line_items[1].fee"
SHIPPING = "line_items[1].shipping"
INVALID_CHARGES = [
    ({"type": "fee"}, FEE),
    ({"type": "fee", "fee": {}}, f"{FEE}.amount"),
    ({"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 1.5}}}, f"{FEE}.amount.value"),
    ({"type": "fee", "fee": {"amount": {"currency": "kes", "value": 1}}}, f"{FEE}.amount.currency"),
    (
        {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 1}, "label": 3}},
        f"{FEE}.label",
    ),
    ({"type": "shipping", "shipping": {}}, f"{SHIPPING}.fee"),
    (
        {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": -5}}},
        f"{SHIPPING}.fee.value",
    ),
    ({"type": "shipping", "shipping": {"fee": {"currency": "usd", "value": 5}}}, "line_items[1]"),
    (
        {
            "type": "shipping",
            "shipping": {"fee": {"currency": "ghs", "value": 5}},
            "product": {"name": "x"},
        },
        "line_items[1].product",
    ),
]


@pytest.mark.parametrize(("path", "value", "param"), INVALID)
def test_every_violation_is_400_naming_the_field(api, sandbox, path, value, param):
    payload = order_payload()
    _set(payload, path, value)
    response = api.create(payload)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_request"
    assert named_field(error) == param
    assert error["message"]
    assert sandbox.store.count_orders() == 0


@pytest.mark.parametrize(("item", "param"), INVALID_CHARGES)
def test_bad_fee_or_shipping_item_is_400_naming_the_field_and_nothing_is_stored(
    api, sandbox, item, param
):
    payload = order_payload()
    payload["line_items"].append(item)
    response = api.create(payload)
    assert response.status_code == 400, response.text
    assert named_field(error_of(response)) == param
    assert sandbox.store.count_orders() == 0
    assert sandbox.store.count("customers") == 0


def test_second_item_is_named_by_its_index(api):
    payload = order_payload()
    second = copy.deepcopy(payload["line_items"][0])
    second["product"]["quantity"] = 0
    payload["line_items"].append(second)
    error = error_of(api.create(payload))
    assert named_field(error) == "line_items[1].product.quantity"


def test_mixed_currencies_are_rejected(api):
    payload = order_payload()
    second = copy.deepcopy(payload["line_items"][0])
    second["product"]["price"]["currency"] = "usd"
    payload["line_items"].append(second)
    response = api.create(payload)
    assert response.status_code == 400
    assert named_field(error_of(response)) == "line_items[1]"


@pytest.mark.parametrize("key", ["a", "k" * 255, "ключ-ü-🙂", "or:1/2?x=y"])
def test_key_edge_cases_that_are_valid(api, key):
    assert api.create(order_payload(key)).status_code == 200


@pytest.mark.parametrize("kind", ["physical", "digital", "service", "voucher", "custom", "cause"])
def test_every_product_type_is_accepted(api, kind):
    payload = order_payload()
    payload["line_items"][0]["product"]["type"] = kind
    assert api.create(payload).status_code == 200


def test_zero_price_is_accepted(api):
    payload = order_payload()
    payload["line_items"][0]["product"]["price"]["value"] = 0
    response = api.create(payload)
    assert response.status_code == 200
    assert response.json()["order"]["line_item_group"]["total"]["value"] == 0
