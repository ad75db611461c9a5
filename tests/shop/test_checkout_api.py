"""The example shop's CHECKOUT_BUILDER (example_project/shop/checkout_api.py) over the API."""

from __future__ import annotations

import json
import uuid

import pytest
from rest_framework.test import APIClient

from django_orders.models import OrderRequest
from example_project.shop.cart import SHIPPING_FEE
from example_project.shop.catalogue import PRODUCTS
from tests.fixtures.payloads import CREATE_CUSTOMER

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop_builder(live_orders, settings, sleeps):
    settings.DJANGO_ORDERS = {
        **settings.DJANGO_ORDERS,
        "CHECKOUT_BUILDER": "example_project.shop.checkout_api.build_order",
    }


def post(body):
    return APIClient().post(
        "/api/checkout/", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )


def test_the_shop_prices_the_cart_and_picks_the_way_back(shop_builder):
    body = {
        "customer": dict(CREATE_CUSTOMER),
        "items": [
            {"product": "espresso-beans", "quantity": 2},
            {"product": "gift-card", "quantity": 1},
        ],
    }
    response = post(body)
    assert response.status_code == 201, response.content
    expected = 2 * PRODUCTS["espresso-beans"].price + PRODUCTS["gift-card"].price + SHIPPING_FEE
    assert (response.json()["total"], response.json()["currency"]) == (expected, "eur")
    sent = json.loads(OrderRequest.objects.get().payload)
    assert sent["checkout_settings"] == {
        "redirect_url": "http://testserver/payment/return/",
        "cancel_url": "http://testserver/payment/cancel/",
    }


def test_a_gift_card_alone_pays_no_shipping(shop_builder):
    response = post(
        {"customer": dict(CREATE_CUSTOMER), "items": [{"product": "gift-card", "quantity": 2}]}
    )
    assert response.status_code == 201, response.content
    assert response.json()["total"] == 2 * PRODUCTS["gift-card"].price
    sent = json.loads(OrderRequest.objects.get().payload)
    assert [item["type"] for item in sent["line_items"]] == ["product"]


def test_a_price_in_the_body_is_ignored_the_catalogue_is_charged(shop_builder):
    items = [{"product": "espresso-beans", "quantity": 1, "price": 1}]
    response = post({"customer": dict(CREATE_CUSTOMER), "items": items})
    assert response.status_code == 201
    assert response.json()["total"] == PRODUCTS["espresso-beans"].price + SHIPPING_FEE


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"product": "caviar", "quantity": 1}], "product"),
        ([{"product": "gift-card", "quantity": 100}], "quantity"),
    ],
)
def test_what_the_shop_does_not_sell_is_400(shop_builder, items, field):
    response = post({"customer": dict(CREATE_CUSTOMER), "items": items})
    assert response.status_code == 400
    assert field in response.json()["items"]["0"]
    assert OrderRequest.objects.count() == 0
