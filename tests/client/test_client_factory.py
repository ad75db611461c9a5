"""The one client factory: one client per thread from settings, rebuilt when they change.

Also: the app builds clients nowhere else, and callers that need another behaviour ask for it
per call (the check's single try, the sync's page window).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

import django_orders
from django_orders.client import transport
from django_orders.client.paging import iter_pages
from django_orders.client.rate_gate import RateGate
from django_orders.client.transport import OrdersClient, get_client, new_client, reset
from django_orders.exceptions import ServerError
from django_orders.services import check_api
from tests.fixtures.http import BASE, KEY, assert_key_absent

from .conftest import error, page_of


@pytest.fixture(autouse=True)
def configured(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE, "MAX_RETRIES": 3}
    yield settings
    reset()


def closes_of(client: OrdersClient, log: list) -> OrdersClient:
    """Record in ``log`` which thread closes ``client``."""
    original = client.close

    def close() -> None:
        log.append((client, threading.current_thread().name))
        original()

    client.close = close  # type: ignore[method-assign]
    return client


def in_thread(call, name="other"):
    result: list = []
    thread = threading.Thread(target=lambda: result.append(call()), name=name)
    thread.start()
    thread.join(timeout=10)
    return result[0]


def test_one_client_per_thread(configured):
    client = get_client()
    assert get_client() is client
    assert client.base_url == BASE
    other = in_thread(get_client)
    assert other is not client and other.base_url == BASE


def test_a_settings_change_builds_a_new_client_and_closes_the_old(configured):
    closed: list = []
    old = closes_of(get_client(), closed)
    configured.DJANGO_ORDERS = {**configured.DJANGO_ORDERS, "MAX_RETRIES": 1}
    new = get_client()
    assert new is not old and new.max_retries == 1
    assert closed == [(old, threading.current_thread().name)]


def test_setting_changed_resets_even_with_equal_values(configured):
    """The signal (connected in AppConfig.ready) resets, not only a change of value."""
    closed: list = []
    old = closes_of(get_client(), closed)
    configured.DJANGO_ORDERS = dict(configured.DJANGO_ORDERS)  # sends setting_changed
    assert [c for c, _ in closed] == [old]
    assert get_client() is not old


def test_reset_closes_each_threads_client_in_that_thread(configured):
    closed: list = []
    start, go, done = threading.Event(), threading.Event(), []

    def worker():
        first = closes_of(get_client(), closed)
        start.set()
        go.wait(timeout=10)
        done.append((first, get_client()))

    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    start.wait(timeout=10)
    mine = closes_of(get_client(), closed)
    reset()
    assert closed == [(mine, threading.current_thread().name)]  # the worker's is in use
    go.set()
    thread.join(timeout=10)
    first, second = done[0]
    assert second is not first
    assert closed[1] == (first, "worker")  # closed by its own thread, at its next call


def test_new_client_is_the_callers_own(configured):
    gate = RateGate()
    with new_client(gate=gate) as mine, new_client() as other:
        assert mine is not other and mine is not get_client()
        assert mine.base_url == BASE and mine.max_retries == 3
        assert mine._gate is gate and other._gate is None


def test_the_cached_client_shows_no_key(configured):
    get_client()
    assert_key_absent(repr(transport._local.cached), "repr of the cached client")


def test_the_check_asks_once_with_the_threads_client(api, configured):
    client = get_client()
    api.script("/orders/page", error(503, "unavailable"), page_of(1, 1, 1))
    result = check_api()
    assert isinstance(result.error, ServerError)
    assert len(api.sent) == 1  # no retry, though MAX_RETRIES is 3
    assert get_client() is client  # not closed, still this thread's client
    assert check_api().ok


def test_a_walk_takes_its_page_window_per_call(api, make_client):
    api.script("/orders/page", *[page_of(n, 5, 5) for n in range(1, 4)])
    walk = iter_pages(make_client(max_page_number=10), "orders", page_size=5, max_page_number=2)
    assert len(list(walk)) == 2 and walk.end_reason == "page_window"
    unlimited = iter_pages(make_client(max_page_number=2), "orders", max_page_number=None)
    assert unlimited.max_page_number is None


@pytest.mark.parametrize("window", [0, -1, True, 2.5, "3"])
def test_a_bad_page_window_is_refused_before_anything_is_sent(api, make_client, window):
    with pytest.raises(ValueError, match="max_page_number must be a whole number"):
        iter_pages(make_client(), "orders", max_page_number=window)
    assert api.sent == []


def test_the_app_builds_clients_only_in_the_factory():
    package = Path(django_orders.__file__).parent
    allowed = {package / "client" / "transport.py"}
    building = re.compile(r"\bfrom_settings\(|\bOrdersClient\(")
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path not in allowed and building.search(path.read_text())
    ]
    assert offenders == []


def test_the_test_kit_resets_the_clients(configured):
    from django_orders.testing import reset_clients

    closed: list = []
    old = closes_of(get_client(), closed)
    reset_clients()
    assert [c for c, _ in closed] == [old]
    assert get_client() is not old
