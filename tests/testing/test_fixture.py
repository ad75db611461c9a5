"""The ``orders_sandbox`` fixture itself, as this suite loads it (the pytest11 entry point)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import requests

from django_orders.conf import orders_settings
from django_orders.services import check_api

pytestmark = pytest.mark.django_db


def test_the_settings_point_at_a_running_sandbox_with_a_random_key(orders_sandbox, settings):
    assert settings.DJANGO_ORDERS["BASE_URL"] == orders_sandbox.url
    assert settings.DJANGO_ORDERS["API_KEY"] == orders_sandbox.api_key
    assert orders_sandbox.url == orders_settings.BASE_URL  # re-read on setting_changed
    assert orders_sandbox.api_key.startswith("sk_test_") and len(orders_sandbox.api_key) > 30
    assert orders_sandbox.host == "127.0.0.1"
    orders_sandbox.seed(3)
    check = check_api()  # over real loopback HTTP, with the fixture's key
    assert (check.ok, check.status_code, check.record_returned) == (True, 200, True)


def test_faults_and_clock_are_on_the_fixture(orders_sandbox):
    orders_sandbox.add_fault("error_before_write", "/orders/page", status=503)
    real_before = datetime.now(UTC)
    orders_sandbox.advance_clock(3600)
    assert orders_sandbox.clock.now() >= real_before + timedelta(hours=1)
    answer = requests.post(
        orders_sandbox.url + "/orders/page",
        json={"page_number": 1, "page_size": 1},
        headers={"Authorization": f"Bearer {orders_sandbox.api_key}"},
        timeout=5,
    )
    assert answer.status_code == 503


def test_the_page_window_is_on_and_the_fixture_lifts_it(orders_sandbox):
    orders_sandbox.seed(12)

    def page_11() -> int:
        return requests.post(
            orders_sandbox.url + "/orders/page",
            json={"page_number": 11, "page_size": 1},
            headers={"Authorization": f"Bearer {orders_sandbox.api_key}"},
            timeout=5,
        ).status_code

    assert page_11() == 400
    orders_sandbox.page_cap = None
    assert page_11() == 200


def test_the_search_index_is_switched_on_the_fixture(orders_sandbox):
    orders_sandbox.seed(3)
    orders_sandbox.configure_search(lag_seconds=60)
    answer = requests.post(
        orders_sandbox.url + "/orders/search",
        json={},
        headers={"Authorization": f"Bearer {orders_sandbox.api_key}"},
        timeout=5,
    )
    assert answer.json()["search"]["freshness"]["state"] == "delayed"
