"""The settings that bound an answer (MAX_RESPONSE_BYTES, REQUEST_DEADLINE) and the sync lease
that must outlast the longest page read they allow."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_orders.checks import check_settings
from django_orders.client.transport import OrdersClient
from django_orders.conf import orders_settings
from django_orders.exceptions import OrdersConfigurationError


@pytest.mark.parametrize("value", [0, -1, 1024, 2.5, "16MiB", True, None])
def test_max_response_bytes_must_be_a_whole_number_of_at_least_64_kib(mocked_settings, value):
    mocked_settings(MAX_RESPONSE_BYTES=value)
    with pytest.raises(OrdersConfigurationError, match=r'\["MAX_RESPONSE_BYTES"\]'):
        orders_settings.MAX_RESPONSE_BYTES  # noqa: B018


@pytest.mark.parametrize("value", [0, -5, float("inf"), float("nan"), "60", True, None])
def test_request_deadline_must_be_a_positive_number_of_seconds(mocked_settings, value):
    mocked_settings(REQUEST_DEADLINE=value)
    with pytest.raises(OrdersConfigurationError, match=r'\["REQUEST_DEADLINE"\]'):
        orders_settings.REQUEST_DEADLINE  # noqa: B018


def test_the_bounds_reach_the_client_built_from_settings(mocked_settings):
    mocked_settings(MAX_RESPONSE_BYTES=1024 * 1024, REQUEST_DEADLINE=7.5)
    client = OrdersClient.from_settings()
    assert (client.max_response_bytes, client.deadline) == (1024 * 1024, 7.5)


def test_the_lease_outlasts_the_longest_page_read(mocked_settings):
    from django_orders.sync.lease import Lease, lease_duration

    # Defaults: 60 s x 4 tries + 3 waits of up to 60 s = 7 minutes, plus a minute: 8 < 10.
    mocked_settings()
    assert lease_duration() == timedelta(minutes=10)
    mocked_settings(SYNC_LEASE=timedelta(minutes=2))
    assert lease_duration() == timedelta(minutes=8)
    mocked_settings(SYNC_LEASE=timedelta(minutes=3), REQUEST_DEADLINE=10, MAX_RETRIES=1)
    assert lease_duration() == timedelta(minutes=3)  # longer than 10 x 2 + 60 + 60 = 140 s
    mocked_settings(MAX_RETRIES=10)  # 60 x 11 + 600 + 60 = 22 minutes
    assert Lease("orders").duration == timedelta(minutes=22)
    assert check_settings() == []
