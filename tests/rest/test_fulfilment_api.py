"""The staff fulfilment endpoints end to end against the sandbox: ``orders/<id>/complete/``,
``orders/<id>/receipt/``, ``orders/<id>/invoice/`` (POST), each behind its own permission."""

from __future__ import annotations

import uuid

import pytest

from django_orders.models import DocumentDelivery, OrderRequest
from tests.fulfilment.conftest import place_order

from .conftest import client_for, make_user

pytestmark = pytest.mark.django_db
ENDPOINTS = {"complete": "complete_order", "receipt": "send_receipt", "invoice": "send_invoice"}


@pytest.fixture
def paid_order(live_orders):
    return place_order(live_orders, paid=True)


@pytest.fixture
def unpaid_order(live_orders):
    return place_order(live_orders, paid=False)


@pytest.fixture
def staff():
    """Staff with all three permissions."""
    return client_for(make_user("fulfiller", *ENDPOINTS.values(), staff=True))


def url(order_id: str, endpoint: str) -> str:
    return f"/api/orders/{order_id}/{endpoint}/"


def key() -> dict[str, str]:
    """A new ``Idempotency-Key`` header (receipt/ and invoice/ require one)."""
    return {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}


@pytest.mark.parametrize("endpoint, codename", ENDPOINTS.items())
def test_each_endpoint_needs_its_own_permission(live_orders, paid_order, endpoint, codename):
    others = [c for c in ENDPOINTS.values() if c != codename] + ["view_order", "change_order"]
    without = client_for(make_user("other", *others, staff=True))
    with_it = client_for(make_user("with", codename, staff=True))

    assert without.post(url(paid_order.pk, endpoint)).status_code == 403
    assert live_orders.deliveries() == []
    assert live_orders.store.order(paid_order.pk)["status"] == "paid"
    assert with_it.post(url(paid_order.pk, endpoint), **key()).status_code in (200, 201)


def test_anonymous_callers_are_refused(live_orders, paid_order):
    from rest_framework.test import APIClient

    assert APIClient().post(url(paid_order.pk, "complete")).status_code in (401, 403)


def test_complete_answers_the_completed_order_and_is_safe_to_repeat(staff, paid_order):
    first = staff.post(url(paid_order.pk, "complete"))
    again = staff.post(url(paid_order.pk, "complete"))

    assert first.status_code == again.status_code == 200
    assert first.json()["status"] == "completed"
    assert again.json()["completed_at"] == first.json()["completed_at"]
    assert OrderRequest.objects.filter(kind=OrderRequest.Kind.ORDER_COMPLETE).count() == 1


def test_complete_of_an_unpaid_order_is_422_with_why(staff, unpaid_order):
    response = staff.post(url(unpaid_order.pk, "complete"))

    assert response.status_code == 422
    assert response.json()["code"] == "order_not_completable"
    assert "requires_payment" in response.json()["detail"]


def test_complete_with_no_answer_is_202_and_pending(staff, live_orders, paid_order):
    live_orders.add_fault("drop_after_commit", "/orders/complete", times=None)

    response = staff.post(url(paid_order.pk, "complete"))

    assert response.status_code == 202
    assert response.json() == {"order": paid_order.pk, "state": "pending", "retry_after": 5}


def test_receipt_answers_the_delivery_per_channel(staff, live_orders, paid_order):
    live_orders.fail_channel("email", "email_bounced: mailbox full.", times=1)

    response = staff.post(url(paid_order.pk, "receipt"), **key())

    assert response.status_code == 201
    data = response.json()
    assert (data["document"], data["state"]) == ("receipt", "partly_delivered")
    assert data["sent_channels"] == ["sms"] and data["failed_channels"] == ["email"]
    assert data["failures"] == [{"channel": "email", "error": "email_bounced: mailbox full."}]
    assert data["order"] == paid_order.pk


def test_invoice_with_no_answer_is_202_unknown_and_not_resent(staff, live_orders, paid_order):
    live_orders.add_fault("drop_after_commit", "/orders/send_invoice", times=None)

    response = staff.post(url(paid_order.pk, "invoice"), **key())

    assert response.status_code == 202
    assert response.json()["state"] == "unknown"
    assert DocumentDelivery.objects.get().state == "unknown"
    assert len(live_orders.deliveries(paid_order.pk)) == 1


def test_receipt_of_an_unpaid_order_is_422_and_nothing_sent(staff, live_orders, unpaid_order):
    response = staff.post(url(unpaid_order.pk, "receipt"), **key())

    assert response.status_code == 422
    assert response.json()["code"] == "document_not_sendable"
    assert live_orders.deliveries() == []


def test_an_unknown_order_is_404(staff, live_orders):
    for endpoint in ENDPOINTS:
        response = staff.post(url("or_nope", endpoint), **key())
        assert response.status_code == 404, endpoint


# --- Idempotency-Key (issue 44, item 7) --------------------------------------------------------


def test_a_receipt_repeated_with_its_key_replays_the_delivery_and_sends_nothing(
    staff, live_orders, paid_order
):
    headers = {"HTTP_IDEMPOTENCY_KEY": "5d1b2c9e-receipt-once"}
    first = staff.post(url(paid_order.pk, "receipt"), **headers)
    again = staff.post(url(paid_order.pk, "receipt"), **headers)

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert len(live_orders.deliveries(paid_order.pk)) == 1  # one SMS, one e-mail
    assert DocumentDelivery.objects.count() == 1
    # A new key is a new delivery.
    assert staff.post(url(paid_order.pk, "receipt"), **key()).status_code == 201
    assert len(live_orders.deliveries(paid_order.pk)) == 2


def test_the_key_of_an_unknown_outcome_answers_202_again_without_sending(
    staff, live_orders, paid_order
):
    live_orders.add_fault("drop_after_commit", "/orders/send_invoice")
    headers = {"HTTP_IDEMPOTENCY_KEY": "invoice-lost-answer"}

    first = staff.post(url(paid_order.pk, "invoice"), **headers)
    again = staff.post(url(paid_order.pk, "invoice"), **headers)

    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"] and again.json()["state"] == "unknown"
    assert len(live_orders.deliveries(paid_order.pk)) == 1


def test_the_key_reused_for_another_document_or_order_is_422(staff, live_orders, paid_order):
    other = place_order(live_orders, paid=True)
    headers = {"HTTP_IDEMPOTENCY_KEY": "one-key-one-delivery"}
    assert staff.post(url(paid_order.pk, "receipt"), **headers).status_code == 201

    for order_id, endpoint in ((paid_order.pk, "invoice"), (other.pk, "receipt")):
        response = staff.post(url(order_id, endpoint), **headers)
        assert response.status_code == 422, (order_id, endpoint)
        assert response.json()["code"] == "idempotency_key_conflict"
    assert len(live_orders.deliveries()) == 1


@pytest.mark.parametrize("endpoint", ["receipt", "invoice"])
def test_without_a_key_is_400_and_nothing_sent(staff, live_orders, paid_order, endpoint):
    response = staff.post(url(paid_order.pk, endpoint))

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert live_orders.deliveries() == []
    assert not DocumentDelivery.objects.exists()


def test_the_same_key_of_two_staff_members_is_two_deliveries(live_orders, paid_order):
    """Keys are scoped to their caller, as for checkout/ and refunds/."""
    headers = {"HTTP_IDEMPOTENCY_KEY": "shared-looking-key"}
    for name in ("ann", "bob"):
        client = client_for(make_user(name, "send_receipt", staff=True))
        assert client.post(url(paid_order.pk, "receipt"), **headers).status_code == 201
    assert len(live_orders.deliveries(paid_order.pk)) == 2
