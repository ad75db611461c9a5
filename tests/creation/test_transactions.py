"""create_order refuses to run inside an outer transaction (ATOMIC_REQUESTS included)."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError

from django_orders.models import Order, OrderRequest
from django_orders.services import create_order, resume_order_requests
from tests.fixtures.payloads import new_reference


@pytest.fixture
def atomic_requests(monkeypatch, settings):
    settings.ROOT_URLCONF = "tests.creation.atomic_urls"
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


@pytest.mark.django_db(transaction=True)
def test_atomic_request_view_is_refused_with_the_fix_in_the_message(
    atomic_requests, live_orders, received, client, order_input
):
    with pytest.raises(TransactionManagementError) as caught:
        client.post("/atomic/", json.dumps(order_input), content_type="application/json")
    assert "@transaction.non_atomic_requests" in str(caught.value)
    assert "ATOMIC_REQUESTS" in str(caught.value)
    assert OrderRequest.objects.count() == 0
    assert received.creates() == []


@pytest.mark.django_db(transaction=True)
def test_non_atomic_checkout_view_creates_the_order(
    atomic_requests, live_orders, received, client, order_input
):
    response = client.post("/non-atomic/", json.dumps(order_input), content_type="application/json")
    assert response.status_code == 200
    order_id = response.json()["order"]
    request = OrderRequest.objects.get()
    assert request.order_id == order_id
    assert Order.objects.filter(pk=order_id).exists()
    assert received.creates() == [request.payload.encode()]


@pytest.mark.django_db(transaction=True)
def test_explicit_atomic_block_is_refused(live_orders, received, order_input):
    with pytest.raises(TransactionManagementError), transaction.atomic():
        create_order(**order_input, reference=new_reference())
    with pytest.raises(TransactionManagementError), transaction.atomic():
        resume_order_requests()
    assert OrderRequest.objects.count() == 0
    assert received.creates() == []


@pytest.mark.django_db(transaction=True)
def test_autocommit_off_is_refused(live_orders, order_input):
    transaction.set_autocommit(False)
    try:
        with pytest.raises(TransactionManagementError):
            create_order(**order_input, reference=new_reference())
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)
    assert OrderRequest.objects.count() == 0
