"""The walk, the sync and ``check_orders_api`` against the sandbox under both readings of
``page.size`` (``page_size_reading="echo"``, as api-spec.md says, and ``"count"``, as the
provider's SDK reads it), over real loopback HTTP."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from django_orders.client.paging import iter_pages
from django_orders.client.transport import OrdersClient
from django_orders.models import Order, SyncRun
from django_orders.services import check_api, sync_orders
from tests.fixtures.mirror import store_orders_by_id

pytestmark = pytest.mark.django_db(transaction=True)

READINGS = ["echo", "count"]


@pytest.fixture(params=READINGS)
def reading(request) -> str:
    return request.param


@pytest.fixture
def server(sandbox_factory, orders_settings_for, reading, sleeps):
    """A sandbox answering ``page.size`` the given way, no page window, settings on it."""
    server = sandbox_factory(page_cap=None, page_size_reading=reading)
    orders_settings_for(server, PAGE_SIZE=10, MAX_PAGE_NUMBER=None)
    return server


def sizes_answered(server, page_size: int, pages: int) -> list[int]:
    """``page.size`` as the sandbox answers pages 1..pages, read past the client's checks."""
    import requests

    sizes = []
    for number in range(1, pages + 1):
        answer = requests.post(
            f"{server.url}/orders/page",
            json={"page_number": number, "page_size": page_size},
            headers={"Authorization": f"Bearer {server.api_key}"},
            timeout=5,
        )
        sizes.append(answer.json()["page"]["size"])
    return sizes


@pytest.mark.parametrize(("orders", "pages"), [(25, 3), (20, 3), (7, 1)])
def test_a_walk_ends_on_the_short_or_empty_page(server, reading, orders, pages):
    server.seed(orders)
    expected_counts = [min(10, orders - 10 * n) for n in range(pages)]
    assert sizes_answered(server, 10, pages) == (
        [10] * pages if reading == "echo" else expected_counts
    )
    with OrdersClient.from_settings() as client:
        walk = iter_pages(client, "orders", page_size=10)
        assert [len(page.records) for page in walk] == expected_counts
    assert walk.end_reason == "last_page"


def test_a_sync_mirrors_every_order(server):
    server.seed(25)
    run = sync_orders()
    assert (run.outcome, run.end_reason, run.pages, run.seen, run.created) == (
        SyncRun.Outcome.SUCCEEDED,
        "last_page",
        3,
        25,
        25,
    )
    upstream = store_orders_by_id(server)
    mirrored = dict(Order.objects.values_list("id", "status"))
    assert mirrored == {order_id: record["status"] for order_id, record in upstream.items()}


def test_an_empty_account(server):
    assert server.store.count_orders() == 0
    run = sync_orders()
    assert (run.outcome, run.end_reason, run.pages, run.seen) == (
        SyncRun.Outcome.SUCCEEDED,
        "last_page",
        1,
        0,
    )
    assert Order.objects.count() == 0

    check = check_api()
    assert check.ok, check.error
    assert (check.status_code, check.record_returned) == (200, False)
    out = io.StringIO()
    call_command("check_orders_api", stdout=out, stderr=io.StringIO())
    assert "Record returned: no (the account has no orders yet)" in out.getvalue()
    assert "OK: the service accepted the key at this base URL." in out.getvalue()
    assert server.api_key not in out.getvalue()


def test_check_orders_api_with_orders(server):
    server.seed(3)
    out = io.StringIO()
    call_command("check_orders_api", stdout=out, stderr=io.StringIO())
    assert "Record returned: yes" in out.getvalue() and "OK:" in out.getvalue()


def test_the_page_window_400_ends_the_walk(sandbox_factory, orders_settings_for, reading):
    """The sandbox's 400 past page 10 has no ``param`` (the provider's error shape): it is
    recognised by its code and message."""
    server = sandbox_factory(page_cap=10, page_size_reading=reading)
    orders_settings_for(server, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, SYNC_HELPER="thread")
    server.seed(105)
    run = sync_orders()
    assert (run.outcome, run.end_reason, run.pages, run.seen) == (
        SyncRun.Outcome.SUCCEEDED,
        "page_window",
        10,
        100,
    )
