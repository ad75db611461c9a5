"""send_receipt and send_invoice end to end against the sandbox over real loopback HTTP."""

from __future__ import annotations

import pytest

from django_orders.exceptions import DeliveryOutcomeUnknown, DocumentNotSendable
from django_orders.models import DocumentDelivery, OrderRequest
from django_orders.services import cancel_order, resume_order_requests, send_invoice, send_receipt

pytestmark = pytest.mark.django_db
State = DocumentDelivery.State


def test_a_receipt_goes_out_on_every_channel_stored_with_its_own_key(orders_sandbox, paid_order):
    delivery = send_receipt(paid_order.pk)

    assert delivery.state == State.DELIVERED
    assert (delivery.sent_channels, delivery.failures) == (["email", "sms"], [])
    assert delivery.document_url.endswith(f"/pay/{paid_order.pk}/receipt")
    [upstream] = orders_sandbox.deliveries(paid_order.pk)
    assert upstream["document_kind"] == "receipt"
    assert upstream["idempotency_key"] == delivery.idempotency_key
    assert DocumentDelivery.objects.get() == delivery


def test_each_send_is_a_new_delivery_with_a_new_key(orders_sandbox, paid_order):
    first = send_invoice(paid_order.pk)
    second = send_invoice(paid_order.pk)

    assert first.idempotency_key != second.idempotency_key
    assert [d["idempotency_key"] for d in orders_sandbox.deliveries(paid_order.pk)] == [
        first.idempotency_key,
        second.idempotency_key,
    ]


def test_a_failed_channel_is_reported_with_the_providers_error(orders_sandbox, paid_order):
    orders_sandbox.fail_channel("sms", "sms_undeliverable: number out of service.", times=1)

    delivery = send_receipt(paid_order.pk)

    assert delivery.state == State.PARTLY_DELIVERED
    assert delivery.sent_channels == ["email"]
    assert delivery.failures == [
        {"channel": "sms", "error": "sms_undeliverable: number out of service."}
    ]
    assert delivery.failed_channels == ["sms"]
    delivery.refresh_from_db()
    assert delivery.state == State.PARTLY_DELIVERED


def test_every_channel_failed_is_not_delivered_with_the_providers_error(orders_sandbox, paid_order):
    orders_sandbox.fail_channel("email")
    orders_sandbox.fail_channel("sms")

    delivery = send_invoice(paid_order.pk)

    assert delivery.state == State.NOT_DELIVERED
    assert delivery.sent_channels == []
    assert delivery.failed_channels == ["email", "sms"]
    assert delivery.error_code == "document_not_delivered"
    assert "every channel failed" in delivery.error


def test_a_dropped_answer_is_kept_unknown_and_never_resent(orders_sandbox, paid_order):
    orders_sandbox.add_fault("drop_after_commit", "/orders/send_receipt", times=None)

    with pytest.raises(DeliveryOutcomeUnknown) as info:
        send_receipt(paid_order.pk)

    delivery = DocumentDelivery.objects.get()
    assert info.value.delivery.pk == delivery.pk
    assert delivery.state == State.UNKNOWN
    assert "OutcomeUnknown" in delivery.error
    # The service did send it (once: asked once, no retry), but the shop cannot know.
    assert len(orders_sandbox.deliveries(paid_order.pk)) == 1
    orders_sandbox.faults.clear()

    summary = resume_order_requests()

    assert summary.resent == 0
    assert len(orders_sandbox.deliveries(paid_order.pk)) == 1
    delivery.refresh_from_db()
    assert delivery.state == State.UNKNOWN
    assert not OrderRequest.objects.exclude(kind=OrderRequest.Kind.ORDER_CREATE).exists()


def test_a_receipt_of_an_unpaid_order_is_refused_before_anything_is_stored(
    orders_sandbox, unpaid_order
):
    with pytest.raises(DocumentNotSendable, match=r"receipt.*requires_payment.*paid or completed"):
        send_receipt(unpaid_order.pk)

    assert not DocumentDelivery.objects.exists()
    assert orders_sandbox.deliveries() == []


def test_an_invoice_of_an_unpaid_order_goes_out(orders_sandbox, unpaid_order):
    assert send_invoice(unpaid_order.pk).state == State.DELIVERED


def test_an_invoice_of_a_canceled_order_is_refused(orders_sandbox, unpaid_order):
    cancel_order(unpaid_order.pk)

    with pytest.raises(DocumentNotSendable, match=r"invoice.*canceled"):
        send_invoice(unpaid_order.pk)
    assert orders_sandbox.deliveries() == []


def test_a_completed_order_gets_its_receipt(orders_sandbox, paid_order):
    from django_orders.services import complete_order

    complete_order(paid_order.pk)

    assert send_receipt(paid_order.pk).state == State.DELIVERED


def test_a_garbled_answer_after_the_send_is_an_unknown_outcome(orders_sandbox, paid_order):
    orders_sandbox.add_fault("malformed_json", "/orders/send_invoice")

    with pytest.raises(DeliveryOutcomeUnknown):
        send_invoice(paid_order.pk)

    assert DocumentDelivery.objects.get().state == State.UNKNOWN
    assert len(orders_sandbox.deliveries(paid_order.pk)) == 1


def test_a_send_that_never_reached_the_service_is_recorded_not_sent(
    orders_sandbox, paid_order, settings
):
    from django_orders.exceptions import RequestNotSent
    from django_orders.testing import reset_clients

    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "BASE_URL": "http://127.0.0.1:9"}
    reset_clients()

    with pytest.raises(RequestNotSent):
        send_receipt(paid_order.pk)

    delivery = DocumentDelivery.objects.get()
    assert delivery.state == State.FAILED
    assert delivery.get_state_display() == "Not sent"
    assert delivery.error.startswith("RequestNotSent: ")
    assert orders_sandbox.deliveries() == []
