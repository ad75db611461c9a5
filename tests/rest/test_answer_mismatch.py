"""A checkout answered with someone else's order: 502 without detail, and no token opens it."""

from __future__ import annotations

import pytest

from django_orders.models import OrderRequest
from tests.creation.test_answer_check import answer
from tests.fixtures.hostile import json_answer
from tests.rest.conftest import checkout

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hostile(settings, hostile_server):
    settings.DJANGO_ORDERS = {
        **settings.DJANGO_ORDERS,  # the project's checkout builder, where it has one
        "API_KEY": "sk_test_rest_mismatch_0123456789",
        "BASE_URL": hostile_server.url,
        "TIMEOUT": (2, 5),
        "MAX_RETRIES": 0,
    }
    return hostile_server


def test_a_checkout_answered_with_another_order_is_502_and_opens_nothing(hostile, api, body):
    victim_answer = answer(custom_data=None, number=None)
    hostile.script("/orders/create", json_answer(200, victim_answer))
    victim = checkout(api, body)
    assert victim.status_code == 201 and victim.json()["id"] == "or_victim"

    key = "0b5c4f2e-7a57-4c55-9a4e-3a4c1c8e1f00"
    stranger = checkout(api, body, key=key)
    assert stranger.status_code == 502
    assert stranger.content == b""
    request = OrderRequest.objects.get(pk=OrderRequest.objects.latest("pk").pk)
    assert (request.state, request.order_id) == (OrderRequest.State.NEEDS_REVIEW, None)

    # Asking again with the key: the checkout is for review; its token opens no order.
    again = checkout(api, body, key=key)
    assert again.status_code == 202
    token = again.json()["token"]
    headers = {"HTTP_ORDER_TOKEN": token}
    assert api.get("/api/orders/or_victim/", **headers).status_code == 404
    by_handle = api.get(f"/api/orders/{again.json()['checkout']}/", **headers)
    assert "or_victim" not in by_handle.content.decode()
