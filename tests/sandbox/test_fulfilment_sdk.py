"""Completion and document sends speak the provider's contract: its SDK (``inttegro``) decodes
``orders.complete`` into a typed ``Order`` and ``orders.send_receipt`` / ``send_invoice`` into a
typed ``DocumentDeliveryResult`` (with nothing left untyped: ``assert_typed``), and decodes
their errors into the SDK's error model."""

from __future__ import annotations

import pytest
from inttegro.errors import APIError
from inttegro.order.document_delivery_failure import DocumentDeliveryFailure
from inttegro.order.document_delivery_result import DocumentDeliveryResult
from inttegro.order.order import Order
from inttegro.shared.error import Error

from .refund_helpers import paid_order
from .test_sdk_contract import assert_error, assert_typed


def test_complete_decodes_a_completed_order(sdk, sandbox, order):
    completed = sdk.orders.complete({"order_id": order["id"]})
    assert isinstance(completed, Order)
    assert_typed(completed, "order")
    assert completed.status == "completed"
    assert completed.completed_at is not None
    assert completed.paid_at is not None and completed.completed_at >= completed.paid_at
    assert sdk.orders.lookup(order["id"]).status == "completed"


def test_complete_twice_is_the_already_completed_error(sdk, order):
    sdk.orders.complete({"order_id": order["id"]})
    with pytest.raises(APIError) as caught:
        sdk.orders.complete({"order_id": order["id"]})  # the SDK sends a new key each call
    error = assert_error(caught.value, 400, "order_already_completed")
    assert error.cause == "state_conflict"


def test_complete_with_the_same_key_replays(sdk, order):
    body = {"order_id": order["id"], "request_meta": {"idempotency_key": f"complete-{order['id']}"}}
    first = sdk.orders.complete(body)
    again = sdk.orders.complete(body)
    assert again.to_dict() == first.to_dict()


def test_complete_unpaid_and_unknown_orders_fail(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    with pytest.raises(APIError) as caught:
        sdk.orders.complete({"order_id": unpaid["id"]})
    assert "requires_payment" in assert_error(caught.value, 400, "order_not_paid").message
    with pytest.raises(APIError) as caught:
        sdk.orders.complete({"order_id": "or_missing"})
    assert_error(caught.value, 404, "resource_missing")


def test_complete_paid_out_of_band_completes_an_unpaid_order(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    completed = sdk.orders.complete({"order_id": unpaid["id"], "paid_out_of_band": True})
    assert_typed(completed, "order")
    assert completed.status == "completed" and "paid_at" not in completed._present_fields


@pytest.mark.parametrize("kind", ["receipt", "invoice"])
def test_send_decodes_the_delivery_result(sdk, sandbox, order, kind):
    send = sdk.orders.send_receipt if kind == "receipt" else sdk.orders.send_invoice
    result = send({"order_id": order["id"]})
    assert isinstance(result, DocumentDeliveryResult)
    assert_typed(result, "result")
    assert "error" not in result._present_fields
    delivery = result.delivery
    assert delivery.document_kind == kind
    assert delivery.sent_channels == ["email", "sms"] and delivery.failed_channels == []
    assert [attempt.channel for attempt in delivery.deliveries] == ["email", "sms"]
    assert all(attempt.chime_id.startswith("chm_") for attempt in delivery.deliveries)
    assert delivery.failures == []
    expected = f"{sandbox.url}/pay/{order['id']}" + ("/receipt" if kind == "receipt" else "")
    assert delivery.document_url == expected
    assert result.order.id == order["id"] and result.order.status == "paid"


def test_a_failing_channel_is_reported_with_the_providers_error(sdk, sandbox, order):
    sandbox.fail_channel("email", "mailbox_full: the mailbox is full.")
    result = sdk.orders.send_receipt({"order_id": order["id"]})
    assert_typed(result, "result")
    assert result.delivery.sent_channels == ["sms"]
    assert result.delivery.failed_channels == ["email"]
    (failure,) = result.delivery.failures
    assert isinstance(failure, DocumentDeliveryFailure)
    assert (failure.channel, failure.error) == ("email", "mailbox_full: the mailbox is full.")
    assert [attempt.channel for attempt in result.delivery.deliveries] == ["sms"]


def test_nothing_delivered_carries_the_error(sdk, sandbox, order):
    sandbox.fail_channel("email")
    sandbox.fail_channel("sms")
    result = sdk.orders.send_invoice({"order_id": order["id"]})
    assert_typed(result, "result")
    assert result.delivery.sent_channels == [] and result.delivery.deliveries == []
    assert result.delivery.failed_channels == ["email", "sms"]
    assert isinstance(result.error, Error)
    assert result.error.code == "document_not_delivered"
    assert "email_bounced" in result.error.message and "sms_undeliverable" in result.error.message


def test_receipt_of_an_unpaid_order_fails(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    with pytest.raises(APIError) as caught:
        sdk.orders.send_receipt({"order_id": unpaid["id"]})
    assert_error(caught.value, 400, "order_not_paid")
    assert sandbox.deliveries() == []


def test_invoice_of_a_canceled_order_fails(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    sdk.orders.cancel(unpaid["id"])
    with pytest.raises(APIError) as caught:
        sdk.orders.send_invoice({"order_id": unpaid["id"]})
    assert "canceled" in assert_error(caught.value, 400, "order_not_invoiceable").message


def test_invoice_of_an_unpaid_order_goes_out(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    result = sdk.orders.send_invoice({"order_id": unpaid["id"]})
    assert_typed(result, "result")
    assert result.delivery.document_url == unpaid["invoice"]["format"]["web"]["url"]
    assert result.order.status == "requires_payment"


def test_send_to_an_unknown_order_is_404(sdk):
    with pytest.raises(APIError) as caught:
        sdk.orders.send_invoice({"order_id": "or_missing"})
    assert_error(caught.value, 404, "resource_missing")
