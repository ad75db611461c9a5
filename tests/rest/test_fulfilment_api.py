"""The staff fulfilment endpoints end to end against the sandbox: ``orders/<id>/complete/``,
``orders/<id>/receipt/``, ``orders/<id>/invoice/`` (POST), each behind its own permission."""

from __future__ import annotations

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


@pytest.mark.parametrize("endpoint, codename", ENDPOINTS.items())
def test_each_endpoint_needs_its_own_permission(live_orders, paid_order, endpoint, codename):
    others = [c for c in ENDPOINTS.values() if c != codename] + ["view_order", "change_order"]
    without = client_for(make_user("other", *others, staff=True))
    with_it = client_for(make_user("with", codename, staff=True))

    assert without.post(url(paid_order.pk, endpoint)).status_code == 403
    assert live_orders.deliveries() == []
    assert live_orders.store.order(paid_order.pk)["status"] == "paid"
    assert with_it.post(url(paid_order.pk, endpoint)).status_code in (200, 201)


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

    response = staff.post(url(paid_order.pk, "receipt"))

    assert response.status_code == 201
    data = response.json()
    assert (data["document"], data["state"]) == ("receipt", "partly_delivered")
    assert data["sent_channels"] == ["sms"] and data["failed_channels"] == ["email"]
    assert data["failures"] == [{"channel": "email", "error": "email_bounced: mailbox full."}]
    assert data["order"] == paid_order.pk


def test_invoice_with_no_answer_is_202_unknown_and_not_resent(staff, live_orders, paid_order):
    live_orders.add_fault("drop_after_commit", "/orders/send_invoice", times=None)

    response = staff.post(url(paid_order.pk, "invoice"))

    assert response.status_code == 202
    assert response.json()["state"] == "unknown"
    assert DocumentDelivery.objects.get().state == "unknown"
    assert len(live_orders.deliveries(paid_order.pk)) == 1


def test_receipt_of_an_unpaid_order_is_422_and_nothing_sent(staff, live_orders, unpaid_order):
    response = staff.post(url(unpaid_order.pk, "receipt"))

    assert response.status_code == 422
    assert response.json()["code"] == "document_not_sendable"
    assert live_orders.deliveries() == []


def test_an_unknown_order_is_404(staff, live_orders):
    for endpoint in ENDPOINTS:
        response = staff.post(url("or_nope", endpoint))
        assert response.status_code == 404, endpoint
