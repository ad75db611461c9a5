"""Throttles that X-Forwarded-For cannot escape, and a confirmation of one lookup, no wait."""

from __future__ import annotations

import pytest

from tests.rest.conftest import checkout

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_new_forwarded_for_per_request_does_not_escape_the_checkout_throttle(
    live_orders, api, body, settings
):
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"orders_checkout": "2/minute"}}
    codes = [
        checkout(api, body, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(3)
    ]
    assert codes == [201, 201, 429]


def test_num_proxies_says_which_forwarded_address_is_the_client(live_orders, api, body, settings):
    settings.REST_FRAMEWORK = {
        "DEFAULT_THROTTLE_RATES": {"orders_checkout": "1/minute"},
        "NUM_PROXIES": 1,
    }
    first = checkout(api, body, HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.1")
    same_client = checkout(api, body, HTTP_X_FORWARDED_FOR="2.2.2.2, 203.0.113.1")
    other_client = checkout(api, body, HTTP_X_FORWARDED_FOR="203.0.113.2")
    assert [first.status_code, same_client.status_code, other_client.status_code] == [
        201,
        429,
        201,
    ]


@pytest.fixture
def guest_order(live_orders, api, body) -> dict:
    response = checkout(api, body)
    assert response.status_code == 201
    return response.json()


def confirm(api, order: dict, **headers: str):
    return api.post(
        f"/api/orders/{order['id']}/confirm/", HTTP_ORDER_TOKEN=order["token"], **headers
    )


def test_confirm_of_an_unpaid_order_looks_once_and_never_sleeps(
    guest_order, api, sandbox_paths, sleeps
):
    response = confirm(api, guest_order)
    assert response.status_code == 200 and response.json()["status"] == "requires_payment"
    assert sandbox_paths.count("/orders/lookup") == 1
    assert sleeps == []


def test_a_new_forwarded_for_per_request_does_not_escape_the_confirm_throttle(
    guest_order, api, settings, sandbox_paths
):
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"orders_confirm": "2/minute"}}
    codes = [
        confirm(api, guest_order, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code
        for n in range(3)
    ]
    assert codes == [200, 200, 429]
    assert sandbox_paths.count("/orders/lookup") == 2
