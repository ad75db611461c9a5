"""The sandbox speaks the provider's contract: its official SDK decodes every answer.

``inttegro`` (the provider's Python SDK, generated from its API contract) decodes an answer
into typed models and, when the shape does not match, silently keeps the raw payload as a
``DynamicValue`` (a whole answer) or as a model's ``_extra`` mapping (fields its contract does
not have). So "it decodes" is not enough: ``assert_typed`` walks every decoded value and fails
on either fallback, and on a required field left absent. Error answers are decoded with the
SDK's own error model (``inttegro.shared.error.Error``) the same way.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from inttegro import InttegroClient
from inttegro._dynamic_value import DynamicValue
from inttegro._model_base import ApiModel
from inttegro.custom_data import CustomData
from inttegro.customer.customer import Customer
from inttegro.customer.page import Page as CustomerPage
from inttegro.errors import APIError, AuthenticationError, RateLimitError
from inttegro.money import Currency
from inttegro.order.fee_line_item import FeeLineItem
from inttegro.order.order import Order
from inttegro.order.page import Page as OrderPage
from inttegro.order.product_line_item import ProductLineItem
from inttegro.order.shipping_line_item import ShippingLineItem
from inttegro.shared.error import Error

from .conftest import order_payload

CREATE = "/orders/create"


def _nullable(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def assert_typed(value: Any, where: str = "answer") -> None:
    """Fail if any part of a decoded answer fell back to an untyped value.

    Untyped: a ``DynamicValue`` anywhere, a model with ``_extra`` fields (wire names its
    contract lacks), or a model missing a field its contract requires.
    """
    assert not isinstance(value, DynamicValue), f"{where} fell back to DynamicValue: {value!r}"
    if isinstance(value, ApiModel):
        assert value._extra == {}, f"{where}: fields outside the contract {value._extra!r}"
        hints = get_type_hints(type(value))
        for model_field in fields(type(value)):
            present = model_field.name in value._present_fields
            if not present:
                assert _nullable(hints[model_field.name]), (
                    f"{where}.{model_field.name} is required but absent"
                )
                continue
            assert_typed(getattr(value, model_field.name), f"{where}.{model_field.name}")
    elif isinstance(value, CustomData):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_typed(item, f"{where}[{index}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            assert_typed(item, f"{where}[{key!r}]")
    else:
        assert value is None or isinstance(value, str | int | float | bool | datetime), (
            f"{where}: unexpected {type(value).__name__}"
        )


def assert_error(exc: APIError, status: int, code: str | None) -> Error:
    """The error answer has the status and code, and decodes into the SDK's error model."""
    assert exc.status == status
    assert exc.code == code
    assert exc.request_id and exc.request_id.startswith("req_")
    assert isinstance(exc.data, dict) and set(exc.data) == {"error"}, exc.data
    error = Error.from_dict(exc.data["error"])
    assert_typed(error, "error")
    assert error.url == exc.url and exc.url.endswith("#" + code)
    assert error.type and error.message
    return error


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(300)  # 12 pages of 25 orders: past the 10-page window
    return sandbox


def _checkout_payload(key: str | None = None) -> dict[str, Any]:
    payload = order_payload(
        key,
        number="SHOP-1001",
        custom_data={"cart_id": "cart-9", "channel": "web"},
        checkout_settings={
            "redirect_url": "https://shop.example/return?x=1",
            "cancel_url": "https://shop.example/cancel",
        },
    )
    payload["line_items"] += [
        {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 150}, "label": "Service"}},
        {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 900}}},
    ]
    return payload


# -- orders -------------------------------------------------------------------------------


def test_create_with_all_three_line_item_shapes_decodes_fully(sdk, sandbox):
    order = sdk.orders.create(_checkout_payload())
    assert isinstance(order, Order)
    assert_typed(order, "order")
    assert order.status == "requires_payment"
    assert order.number == "SHOP-1001"
    assert dict(order.custom_data) == {"cart_id": "cart-9", "channel": "web"}
    assert order.checkout_settings.redirect_url == "https://shop.example/return?x=1"
    assert order.checkout_settings.cancel_url == "https://shop.example/cancel"
    product, fee, shipping = order.line_item_group.line_items
    assert isinstance(product, ProductLineItem) and product.product.id.startswith("oli_")
    assert product.product.price.currency is Currency.GHS
    assert isinstance(fee, FeeLineItem) and fee.fee.label == "Service"
    assert isinstance(shipping, ShippingLineItem) and shipping.shipping.fee.value == 900
    assert order.line_item_group.total.currency is Currency.GHS
    assert order.line_item_group.total.value == 2 * 5000 + 150 + 900
    assert order.invoice.format.web.url == f"{sandbox.url}/pay/{order.id}"
    assert order.invoice.format.pdf.url == f"{sandbox.url}/pay/{order.id}/invoice.pdf"
    assert order.sealed_at is not None and order.expires_at > order.initiated_at
    assert not order.is_terminal()


def test_unfinalized_order_is_preparing(sdk):
    order = sdk.orders.create(order_payload(finalize=False))
    assert_typed(order)
    assert order.status == "preparing"
    assert "sealed_at" not in order and "invoice" not in order


def test_replay_with_the_same_key_returns_the_same_order(sdk, sandbox):
    payload = _checkout_payload("sdk-replay-1")
    first = sdk.orders.create_with_response(payload)
    again = sdk.orders.create_with_response(payload)
    assert again.headers["idempotent-replayed"] == "true"
    assert_typed(again.data)
    assert again.data.id == first.data.id
    assert again.data.to_dict() == first.data.to_dict()
    assert sandbox.store.count_orders() == 1


def test_same_key_with_another_payload_is_422(sdk, sandbox):
    sdk.orders.create(order_payload("sdk-conflict"))
    changed = order_payload("sdk-conflict", number="OTHER")
    with pytest.raises(APIError) as caught:
        sdk.orders.create(changed)
    assert_error(caught.value, 422, "idempotency_key_conflict")
    assert sandbox.store.count_orders() == 1


@pytest.mark.parametrize("reading", ["echo", "count"])
def test_pages_1_to_10_decode_and_11_is_past_the_window(sdk, seeded, reading):
    seeded.page_size_reading = reading
    seen: list[str] = []
    for number in range(1, 11):
        page = sdk.orders.page({"page_number": number, "page_size": 25})
        assert isinstance(page, OrderPage)
        assert_typed(page, f"page {number}")
        assert page.number == number
        assert page.size == 25  # a full page: both readings agree
        seen += [order.id for order in page.orders]
    assert seen == seeded.store.newest_order_ids(250)
    with pytest.raises(APIError) as caught:
        sdk.orders.page({"page_number": 11, "page_size": 25})
    error = assert_error(caught.value, 400, "parameter_invalid")
    assert "page_number" in error.message


def test_page_0_is_page_1_numbered_1(sdk, seeded):
    zero = sdk.orders.page({"page_number": 0, "page_size": 7})
    one = sdk.orders.page({"page_number": 1, "page_size": 7})
    assert_typed(zero)
    assert zero.number == 1
    assert [o.id for o in zero.orders] == [o.id for o in one.orders]


@pytest.mark.parametrize(("reading", "size"), [("echo", 25), ("count", 10)])
def test_short_and_empty_pages_under_both_readings(sdk, sandbox, reading, size):
    sandbox.seed(35)
    sandbox.page_size_reading = reading
    last = sdk.orders.page({"page_number": 2, "page_size": 25})
    assert_typed(last)
    assert (len(last.orders), last.size) == (10, size)
    empty = sdk.orders.page({"page_number": 3, "page_size": 25})
    assert_typed(empty)
    # The SDK's own walk stops on ``size == 0``: only the count reading gives it that.
    assert (empty.orders, empty.size) == ([], 25 if reading == "echo" else 0)


def test_every_seeded_status_decodes(sdk, seeded):
    statuses = set()
    for number in range(1, 3):
        page = sdk.orders.page({"page_number": number, "page_size": 150})
        assert_typed(page)
        statuses |= {order.status for order in page.orders}
    assert statuses == {
        "preparing",
        "requires_payment",
        "paid",
        "completed",
        "canceled",
        "expired",
        "unknown",
    }


def test_lookup_decodes_and_an_unknown_id_is_404(sdk, sandbox):
    created = sdk.orders.create(_checkout_payload())
    found = sdk.orders.lookup(created.id)
    assert_typed(found)
    assert found.to_dict() == created.to_dict()
    with pytest.raises(APIError) as caught:
        sdk.orders.lookup("or_nosuchorder")
    assert_error(caught.value, 404, "resource_missing")


def test_cancel_an_unpaid_order_and_again(sdk):
    order = sdk.orders.create(_checkout_payload())
    canceled = sdk.orders.cancel(order.id)
    assert_typed(canceled)
    assert canceled.status == "canceled" and canceled.canceled_at is not None
    # The SDK sends the same stable key again; the answer is the same canceled order.
    again = sdk.orders.cancel(order.id)
    assert again.to_dict() == canceled.to_dict()
    assert sdk.orders.lookup(order.id).status == "canceled"


def test_cancel_a_paid_order_is_400_and_changes_nothing(sdk, sandbox):
    order = sdk.orders.create(_checkout_payload())
    paid = sandbox.pay_order(order.id)
    with pytest.raises(APIError) as caught:
        sdk.orders.cancel(order.id)
    assert_error(caught.value, 400, "order_already_paid")
    after = sdk.orders.lookup(order.id)
    assert after.status == "paid"
    assert after.paid_at == datetime.fromisoformat(paid["paid_at"])


def test_a_paid_order_decodes_with_its_payment(sdk, sandbox):
    order = sdk.orders.create(_checkout_payload())
    sandbox.pay_order(order.id)
    paid = sdk.orders.lookup(order.id)
    assert_typed(paid)
    assert paid.status == "paid" and paid.is_paid() and paid.paid_at is not None
    [transaction] = sdk.balance_transactions.page({"page_number": 1, "page_size": 5}).transactions
    assert (transaction.type, transaction.order_id) == ("payment", order.id)
    assert transaction.amount.value == paid.line_item_group.total.value


# -- the other resources ------------------------------------------------------------------


def test_customers_page_and_lookup(sdk, seeded):
    created = sdk.orders.create(order_payload())
    page = sdk.customers.page({"page_number": 1, "page_size": 100})
    assert isinstance(page, CustomerPage)
    assert_typed(page)
    assert page.size == 100
    newest = page.customers[0]
    assert newest.id == created.customer.id
    assert newest.balance == {} and newest.fingerprint.startswith("cfp_")
    assert any(c.balance for c in page.customers)  # registered customers carry a balance
    found = sdk.customers.lookup(newest.id)
    assert isinstance(found, Customer)
    assert_typed(found)
    assert found.to_dict() == newest.to_dict()


# Balance transactions, payouts and the balance: test_money_sdk.py.


@pytest.mark.parametrize("resource", ["customers", "payouts", "balance_transactions"])
def test_other_resources_refuse_page_0_and_page_11(sdk, seeded, resource):
    pages = getattr(sdk, resource)
    for number, code in ((0, "invalid_request"), (11, "parameter_invalid")):
        with pytest.raises(APIError) as caught:
            pages.page({"page_number": number, "page_size": 10})
        error = assert_error(caught.value, 400, code)
        assert "page_number" in error.message


@pytest.mark.parametrize(
    ("resource", "unknown"),
    [("customers", "cu_none"), ("payouts", "po_none"), ("balance_transactions", "bt_none")],
)
def test_other_lookups_of_unknown_ids_are_404(sdk, resource, unknown):
    with pytest.raises(APIError) as caught:
        getattr(sdk, resource).lookup(unknown)
    assert_error(caught.value, 404, "resource_missing")


# -- every error status the sandbox gives -------------------------------------------------


def test_401_is_an_authentication_error(sandbox):
    stranger = InttegroClient(
        api_key="sk_test_wrong", base_url=sandbox.url, telemetry_enabled=False
    )
    with pytest.raises(AuthenticationError) as caught:
        stranger.orders.page({"page_number": 1, "page_size": 5})
    assert_error(caught.value, 401, "unauthorized")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"currency": "ngn"}, "currency"),
        ({"value": 10.5}, "value"),
    ],
)
def test_400_for_a_bad_create_stores_nothing(sdk, sandbox, change, field):
    payload = order_payload()
    payload["line_items"][0]["product"]["price"].update(change)
    with pytest.raises(APIError) as caught:
        sdk.orders.create(payload)
    error = assert_error(caught.value, 400, "invalid_request")
    assert f"line_items[0].product.price.{field}" in error.detail
    assert sandbox.store.count_orders() == 0


def test_405_for_another_method(sdk):
    with pytest.raises(APIError) as caught:
        sdk.http.get("/orders/page")
    assert_error(caught.value, 405, "method_not_allowed")


def test_409_while_the_first_request_with_the_key_runs(sdk, sandbox):
    sandbox.add_fault("slow", CREATE, seconds=1.0)
    payload = order_payload("sdk-in-progress")
    results: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: results.update(first=sdk.orders.create(payload)))
    thread.start()
    running = sandbox.app.service.idempotency._running
    while (CREATE, "sdk-in-progress") not in running and thread.is_alive():
        time.sleep(0.01)  # wait (untimed) until the first request holds the key
    with pytest.raises(APIError) as caught:
        sdk.orders.create(payload)
    thread.join()
    assert_error(caught.value, 409, "idempotency_key_in_progress")
    assert_typed(results["first"])


def test_413_for_a_body_over_one_mebibyte(sdk, sandbox):
    payload = order_payload()
    payload["customer_data"]["name"] = "x" * (1024 * 1024 + 1)
    with pytest.raises(APIError) as caught:
        sdk.orders.create(payload)
    assert_error(caught.value, 413, "payload_too_large")
    assert sandbox.store.count_orders() == 0


def test_415_for_a_body_that_is_not_json(sdk, sandbox):
    with pytest.raises(APIError) as caught:
        sdk.http.post_multipart("/orders/create", {"finalize": "true"}, files={})
    assert_error(caught.value, 415, "unsupported_media_type")
    assert sandbox.store.count_orders() == 0


def test_429_carries_retry_after(sdk, sandbox):
    sandbox.add_fault("rate_limit", "/orders/page", retry_after=7)
    with pytest.raises(RateLimitError) as caught:
        sdk.orders.page({"page_number": 1, "page_size": 5})
    assert_error(caught.value, 429, "rate_limited")
    assert caught.value.retry_after == 7


@pytest.mark.parametrize(
    ("status", "code"),
    [(500, "internal_error"), (502, "bad_gateway"), (503, "service_unavailable"),
     (504, "gateway_timeout")],
)  # fmt: skip
def test_5xx_from_the_fault_switches(sdk, sandbox, status, code):
    sandbox.add_fault("error_before_write", CREATE, status=status)
    with pytest.raises(APIError) as caught:
        sdk.orders.create(order_payload())
    error = assert_error(caught.value, status, code)
    assert error.fix_code == "retry_with_exponential_backoff"
    assert sandbox.store.count_orders() == 0


def test_5xx_after_the_write_and_the_retry_replays(sdk, sandbox):
    sandbox.add_fault("error_after_write", CREATE, status=503)
    payload = order_payload("sdk-after-write")
    with pytest.raises(APIError) as caught:
        sdk.orders.create(payload)
    assert_error(caught.value, 503, "service_unavailable")
    replay = sdk.orders.create(payload)
    assert_typed(replay)
    assert sandbox.store.count_orders() == 1


def test_a_proxy_html_502_is_an_error_without_a_body_to_decode(sdk, sandbox):
    # Not the service's answer but a proxy's: the SDK raises with the status and no code.
    sandbox.add_fault("html_502", "/orders/page")
    with pytest.raises(APIError) as caught:
        sdk.orders.page({"page_number": 1, "page_size": 5})
    assert (caught.value.status, caught.value.code) == (502, None)
