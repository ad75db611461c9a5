"""POST checkout/ builds orders with the shop's CHECKOUT_BUILDER, never from the caller's body."""

from __future__ import annotations

import json

import pytest
from rest_framework import serializers

from django_orders import services
from django_orders.models import OrderRequest
from tests.fixtures.checkout_builder import cart_body
from tests.rest.conftest import checkout

pytestmark = pytest.mark.django_db(transaction=True)

BUILDERS = "tests.rest.test_checkout_builder"
ONE_CENT_LINE = {
    "type": "product",
    "product": {
        "name": "Kente scarf",
        "type": "physical",
        "quantity": 2,
        "price": {"currency": "ghs", "value": 1},
    },
}


@pytest.fixture
def use_builder(settings):
    """``use_builder("name")``: CHECKOUT_BUILDER is this module's ``name`` (None: unset)."""

    def configure(name: str | None) -> None:
        path = f"{BUILDERS}.{name}" if name else None
        settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "CHECKOUT_BUILDER": path}

    return configure


@pytest.fixture
def sent_to_create_order(monkeypatch) -> list[dict]:
    """The keyword arguments each create_order call received (the call still happens)."""
    calls: list[dict] = []
    real = services.create_order

    def spy(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(services, "create_order", spy)
    return calls


def sent_prices() -> list[int]:
    """The unit prices in every create request sent (the stored bodies, byte for byte)."""
    prices = []
    for payload in OrderRequest.objects.values_list("payload", flat=True):
        prices += [item["product"]["price"]["value"] for item in json.loads(payload)["line_items"]]
    return prices


def returns_reference(request, data):
    return {**build_free_form(request, data), "reference": "the-callers-own"}


def returns_a_list(request, data):
    return [("customer", data["customer"])]


def returns_unknown_arguments(request, data):
    return {**build_free_form(request, data), "price": 1}


def forwards_the_callers_return_url(request, data):
    built = build_free_form(request, data)
    built["checkout_settings"]["redirect_url"] = data["return_url"]
    return built


def refuses_every_cart(request, data):
    raise serializers.ValidationError({"items": ["Out of stock."]})


def build_free_form(request, data):
    from tests.fixtures.checkout_builder import build_order_free_form

    return build_order_free_form(request, data)


not_callable = 42


def test_a_one_cent_price_from_the_caller_never_reaches_create_order(
    live_orders, api, sent_to_create_order
):
    """The old body shape, priced at 1 cent by the caller: refused, nothing stored or sent."""
    body = {**cart_body(), "line_items": [ONE_CENT_LINE], "finalize": True}
    response = checkout(api, body)
    assert response.status_code == 400
    assert response.json()["line_items"] == ["Unknown field."]
    assert sent_to_create_order == [] and OrderRequest.objects.count() == 0
    assert live_orders.store.orders_created_via_api() == []


def test_a_price_inside_an_item_is_not_the_callers_to_give(live_orders, api, sent_to_create_order):
    body = cart_body()
    body["items"][0]["price"] = {"currency": "ghs", "value": 1}
    response = checkout(api, body)
    assert response.status_code == 400
    assert response.json()["items"]["0"]["price"] == ["Unknown field."]
    assert sent_to_create_order == []


def test_a_builder_that_reads_the_body_freely_still_prices_from_the_catalogue(
    live_orders, api, use_builder, sent_to_create_order
):
    """The caller's prices, line items and URLs in the body: only the catalogue's reach the
    service, and the return URLs are the shop's."""
    use_builder("build_free_form")
    body = cart_body()
    body["items"][0]["price"] = 1
    body["line_items"] = [ONE_CENT_LINE]
    body["checkout_settings"] = {"redirect_url": "https://evil.example/", "cancel_url": "x"}

    response = checkout(api, body)

    assert response.status_code == 201, response.content
    assert (response.json()["total"], response.json()["currency"]) == (10000, "ghs")
    [kwargs] = sent_to_create_order
    assert [line["product"]["price"]["value"] for line in kwargs["line_items"]] == [5000]
    assert kwargs["checkout_settings"] == {
        "redirect_url": "http://testserver/payment/return/",
        "cancel_url": "http://testserver/payment/cancel/",
    }
    assert kwargs["reference"].startswith("api:g:k:")
    assert sent_prices() == [5000] and len(live_orders.store.orders_created_via_api()) == 1


def test_without_a_builder_it_is_503_without_detail_and_the_log_says_why(
    live_orders, api, use_builder, caplog, sent_to_create_order
):
    use_builder(None)
    response = checkout(api, cart_body())
    assert response.status_code == 503 and response.content == b""
    assert 'DJANGO_ORDERS["CHECKOUT_BUILDER"] is not set' in caplog.text
    assert sent_to_create_order == [] and OrderRequest.objects.count() == 0


@pytest.mark.parametrize(
    ("builder", "logged"),
    [
        ("returns_reference", 'returned a "reference"'),
        ("returns_a_list", "must return a dict of create_order keyword arguments, not list"),
        ("returns_unknown_arguments", "what create_order does not take: price"),
        ("not_callable", "is not callable"),
        ("no_such_builder", "cannot be imported"),
    ],
)
def test_a_builder_that_gets_it_wrong_is_503_and_the_log_says_what(
    live_orders, api, use_builder, caplog, sent_to_create_order, builder, logged
):
    use_builder(builder)
    response = checkout(api, cart_body())
    assert response.status_code == 503 and response.content == b""
    assert logged in caplog.text
    assert sent_to_create_order == [] and OrderRequest.objects.count() == 0


def test_a_builder_refusing_the_cart_is_400_with_its_errors(live_orders, api, use_builder):
    use_builder("refuses_every_cart")
    response = checkout(api, cart_body())
    assert response.status_code == 400
    assert response.json() == {"items": ["Out of stock."]}
    assert OrderRequest.objects.count() == 0


def test_a_builder_forwarding_a_foreign_return_url_is_still_refused(live_orders, api, use_builder):
    """create_order validates what the builder returned: the allowed redirect hosts hold."""
    use_builder("forwards_the_callers_return_url")
    body = {**cart_body(), "return_url": "https://evil.example/phish"}
    response = checkout(api, body)
    assert response.status_code == 400
    [message] = response.json()["checkout_settings.redirect_url"]
    assert "'evil.example' is not one this shop sends payers back to" in message
    assert OrderRequest.objects.count() == 0
    assert live_orders.store.orders_created_via_api() == []


def schema_body(client) -> dict:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    document = json.loads(response.content)
    content = document["paths"]["/api/checkout/"]["post"]["requestBody"]["content"]
    return document, content["application/json"]["schema"]


def test_the_schema_documents_the_builders_body(api):
    document, body = schema_body(api)
    name = body["$ref"].rsplit("/", 1)[-1]
    cart = document["components"]["schemas"][name]
    assert set(cart["properties"]) == {"customer", "items"}
    assert "line_items" not in json.dumps(cart)


def test_without_a_serializer_the_schema_says_free_form_object(api, use_builder):
    use_builder("build_free_form")
    _document, body = schema_body(api)
    assert body == {"type": "object", "additionalProperties": {}}
