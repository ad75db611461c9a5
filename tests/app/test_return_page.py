"""The return page: one lookup per request, no sleeping in the worker, a bounded self-refresh
while unpaid, and a throttle per client address that X-Forwarded-For cannot escape."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_orders.models import Order
from django_orders.services import create_order
from django_orders.views import MAX_REFRESHES, REFRESH_SECONDS
from tests.fixtures.payloads import create_order_input

pytestmark = pytest.mark.django_db(transaction=True)

RETURN = reverse("django_orders:return")


@pytest.fixture
def order(live_orders, sleeps) -> Order:
    return create_order(**create_order_input(), finalize=True, reference="cart-return-page")


def lookups(paths: list[str]) -> int:
    return paths.count("/orders/lookup")


def refresh_url(order: Order, checks: int) -> str:
    return f"{REFRESH_SECONDS}; url={RETURN}?order_id={order.id}&checks={checks}"


def test_unpaid_the_page_refreshes_itself_a_bounded_number_of_times(
    client, order, sandbox_paths, sleeps
):
    response = client.get(RETURN, {"order_id": order.id})
    assert response["Refresh"] == refresh_url(order, 1)
    assert f"checks again in {REFRESH_SECONDS} seconds" in response.content.decode()
    for checks in range(1, MAX_REFRESHES):
        response = client.get(RETURN, {"order_id": order.id, "checks": checks})
        assert response["Refresh"] == refresh_url(order, checks + 1)

    last = client.get(RETURN, {"order_id": order.id, "checks": MAX_REFRESHES})

    assert "Refresh" not in last and "Reload this page" in last.content.decode()
    assert lookups(sandbox_paths) == MAX_REFRESHES + 1  # one per request, never more
    assert sleeps == []


def test_paid_it_stops_refreshing(client, order, live_orders, sandbox_paths, sleeps):
    live_orders.pay_order(order.id)
    response = client.get(RETURN, {"order_id": order.id, "checks": 2})
    assert "<h2>Paid</h2>" in response.content.decode() and "Refresh" not in response
    assert lookups(sandbox_paths) == 1 and sleeps == []


@pytest.mark.parametrize("checks", ["x", "-1", "1.5", "99999999"])
def test_a_count_that_is_not_a_small_number_ends_the_refreshing(
    client, order, sandbox_paths, checks
):
    response = client.get(RETURN, {"order_id": order.id, "checks": checks})
    assert response.status_code == 200 and "Refresh" not in response
    assert lookups(sandbox_paths) == 1


def test_the_page_is_throttled_per_client_address(client, order, settings, sandbox_paths):
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"orders_return": "2/minute"}}
    # A new X-Forwarded-For value per request: no proxy is trusted, so still one client.
    codes = [
        client.get(
            RETURN, {"order_id": order.id}, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"
        ).status_code
        for n in range(3)
    ]
    assert codes == [200, 200, 429]
    assert lookups(sandbox_paths) == 2  # the throttled request looked nothing up

    throttled = client.get(RETURN, {"order_id": order.id})
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) >= 1
    assert "asked for too often" in throttled.content.decode()
    other = client.get(RETURN, {"order_id": order.id}, REMOTE_ADDR="198.51.100.7")
    assert other.status_code == 200


def test_with_num_proxies_the_proxys_view_of_the_client_counts(client, order, settings):
    settings.REST_FRAMEWORK = {
        "DEFAULT_THROTTLE_RATES": {"orders_return": "1/minute"},
        "NUM_PROXIES": 1,
    }

    def get(forwarded: str) -> int:
        response = client.get(RETURN, {"order_id": order.id}, HTTP_X_FORWARDED_FOR=forwarded)
        return response.status_code

    # One trusted proxy appends the address it saw last; what the client wrote before is not
    # trusted.
    assert [get("1.1.1.1, 203.0.113.1"), get("2.2.2.2, 203.0.113.1")] == [200, 429]
    assert get("203.0.113.2") == 200
