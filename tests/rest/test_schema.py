"""The OpenAPI document: valid OpenAPI 3, generated without a single warning, key-free."""

from __future__ import annotations

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": "sk_test_schema_secret_42"}
    GENERATOR_STATS.reset()
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response


def test_schema_is_valid_openapi_3_without_warnings(schema):
    document = schema.json()
    validate_schema(document)  # raises on any violation of the OpenAPI 3 JSON schema
    # What `spectacular --fail-on-warn` checks: no warning or error while generating.
    assert not GENERATOR_STATS._warn_cache and not GENERATOR_STATS._error_cache, dict(
        GENERATOR_STATS._warn_cache
    ) | dict(GENERATOR_STATS._error_cache)
    assert document["openapi"].startswith("3.")


def test_schema_lists_exactly_the_api_paths(schema):
    # An order's id is {order_id} in every path under /api/orders/, its own and the nested.
    assert sorted(schema.json()["paths"]) == [
        "/api/checkout/",
        "/api/customers/",
        "/api/customers/{id}/",
        "/api/events/",
        "/api/exports/balance_transactions.csv",
        "/api/exports/orders.csv",
        "/api/exports/payouts.csv",
        "/api/exports/refunds.csv",
        "/api/orders/",
        "/api/orders/{order_id}/",
        "/api/orders/{order_id}/complete/",
        "/api/orders/{order_id}/confirm/",
        "/api/orders/{order_id}/invoice/",
        "/api/orders/{order_id}/offline-payment/",
        "/api/orders/{order_id}/receipt/",
        "/api/orders/{order_id}/refunds/",
        "/api/refunds/",
        "/api/refunds/{id}/",
    ]


def test_schema_documents_the_headers_and_never_holds_the_key(schema):
    text = schema.content.decode()
    checkout = schema.json()["paths"]["/api/checkout/"]["post"]
    headers = {p["name"]: p for p in checkout["parameters"] if p["in"] == "header"}
    assert headers["Idempotency-Key"]["required"] is True
    assert set(checkout["responses"]) == {"201", "202", "400", "409", "422", "503"}
    detail = schema.json()["paths"]["/api/orders/{order_id}/"]["get"]
    assert "Order-Token" in {p["name"] for p in detail["parameters"]}
    assert "sk_test_schema_secret_42" not in text


def test_schema_documents_the_refund_endpoints(schema):
    document = schema.json()
    post = document["paths"]["/api/orders/{order_id}/refunds/"]["post"]
    headers = {p["name"]: p for p in post["parameters"] if p["in"] == "header"}
    body = document["components"]["schemas"]["RefundRequest"]

    assert headers["Idempotency-Key"]["required"] is True
    assert sorted(post["responses"]) == ["201", "202", "400", "404", "409", "422", "503"]
    assert sorted(body["required"]) == ["reason", "reference"]
    assert "lines" in body["properties"] and "reason_details" in body["properties"]
    assert "get" in document["paths"]["/api/refunds/{id}/"]


def test_schema_documents_the_fulfilment_endpoints(schema):
    paths = schema.json()["paths"]

    complete = paths["/api/orders/{order_id}/complete/"]["post"]
    assert sorted(complete["responses"]) == ["200", "202", "403", "404", "422", "503"]
    for document in ("receipt", "invoice"):
        post = paths[f"/api/orders/{{order_id}}/{document}/"]["post"]
        assert sorted(post["responses"]) == ["201", "202", "400", "403", "404", "422", "503"]
        assert "requestBody" not in post
        [header] = [p for p in post["parameters"] if p["in"] == "header"]
        assert (header["name"], header["required"]) == ("Idempotency-Key", True)
    delivery = schema.json()["components"]["schemas"]["Delivery"]["properties"]
    assert {"state", "sent_channels", "failed_channels", "failures"} <= set(delivery)


def test_manage_py_spectacular_validates_with_warnings_as_errors(run_manage, tmp_path):
    """The example project's document, as the README generates it. In a process of its own:
    drf-spectacular reads ``DEFAULT_SCHEMA_CLASS`` when views are imported."""
    target = tmp_path / "schema.yaml"
    done = run_manage(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--file",
        str(target),
        DJANGO_SETTINGS_MODULE="example_project.settings",
    )
    assert done.returncode == 0, done.stderr
    assert "/api/checkout/:" in target.read_text()
