"""Order creation: the success shape and a named ``param`` for every rejection."""

from __future__ import annotations

import copy
import re
from datetime import datetime

import pytest

from .conftest import error_of, order_payload


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
    assert group["line_items"] == payload["line_items"]
    assert group["total"] == {"currency": "ghs", "value": 10000}
    assert order["sealed_at"]
    assert order["invoice"]["format"]["web"]["url"].startswith("https://")
    assert order["invoice"]["format"]["web"]["url"].endswith(order["id"])
    assert "completed_at" not in order
    # Stored, at the front of the first page, and found by lookup.
    assert sandbox.store.order(order["id"]) == order
    assert api.page().json()["page"]["orders"][0] == order
    assert api.post("/orders/lookup", {"order_id": order["id"]}).json() == {"order": order}
    assert sandbox.store.orders_created_via_api() == [
        {"order_id": order["id"], "idempotency_key": payload["request_meta"]["idempotency_key"]}
    ]


def test_unfinalized_order_has_no_invoice(api):
    order = api.create(order_payload(finalize=False)).json()["order"]
    assert "sealed_at" not in order
    assert "invoice" not in order


def test_fee_and_shipping_items_are_accepted_and_counted(api):
    payload = order_payload()
    payload["line_items"].append(
        {
            "type": "shipping",
            "product": {
                "name": "Courier",
                "price": {"currency": "ghs", "value": 700},
                "quantity": 1,
                "type": "service",
            },
        }
    )
    payload["line_items"].append({"type": "fee"})
    response = api.create(payload)
    assert response.status_code == 200, response.text
    assert response.json()["order"]["line_item_group"]["total"] == {
        "currency": "ghs",
        "value": 10700,
    }


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
    ("finalize", "yes", "finalize"),
    ("finalize", 1, "finalize"),
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
    assert error["param"] == param
    assert error["message"]
    assert sandbox.store.count_orders() == 0


def test_second_item_is_named_by_its_index(api):
    payload = order_payload()
    second = copy.deepcopy(payload["line_items"][0])
    second["product"]["quantity"] = 0
    payload["line_items"].append(second)
    error = error_of(api.create(payload))
    assert error["param"] == "line_items[1].product.quantity"


def test_mixed_currencies_are_rejected(api):
    payload = order_payload()
    second = copy.deepcopy(payload["line_items"][0])
    second["product"]["price"]["currency"] = "usd"
    payload["line_items"].append(second)
    response = api.create(payload)
    assert response.status_code == 400
    assert error_of(response)["param"] == "line_items[1]"


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
