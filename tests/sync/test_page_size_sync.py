"""The sync under both readings of ``page.size`` (mocked), and an oversized page stored never.

End-to-end runs against the sandbox's two readings are in test_page_size_e2e.py.
"""

from __future__ import annotations

import pytest

from django_orders.exceptions import InvalidResponse
from django_orders.models import Customer, Order, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.http import BASE
from tests.fixtures.mirror import IN_THREAD

URL = BASE + "/orders/page"


@pytest.fixture
def mocked(http_mock, mocked_settings, sleeps):
    """``http_mock`` with settings for a walk of pages of 3 in this process."""
    mocked_settings(PAGE_SIZE=3, MAX_PAGE_NUMBER=None, **IN_THREAD)
    return http_mock


def order(n: int) -> dict:
    return {
        "id": f"or_{n:04d}",
        "status": "requires_payment",
        "initiated_at": "2026-03-01T10:00:00Z",
        "customer": {"id": f"cu_{n:04d}", "guest": True, "name": f"Customer {n}"},
    }


def page(number: int, size: int | None, numbers: range) -> dict:
    body: dict = {"number": number, "orders": [order(n) for n in numbers]}
    if size is not None:
        body["size"] = size
    return {"page": body}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reading", ["echo", "count"])
def test_a_walk_under_both_readings_mirrors_every_order(mocked, reading):
    for number, numbers in ((1, range(0, 3)), (2, range(3, 6)), (3, range(6, 8))):
        size = 3 if reading == "echo" else len(numbers)
        mocked.post(URL, json=page(number, size, numbers))
    run = sync_orders()
    assert (run.outcome, run.end_reason, run.pages, run.seen, run.created) == (
        SyncRun.Outcome.SUCCEEDED,
        "last_page",
        3,
        8,
        8,
    )
    assert Order.objects.count() == 8


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("size", [3, 0, None])
def test_an_empty_account_is_a_successful_run_of_one_page(mocked, size):
    mocked.post(URL, json=page(1, size, range(0)))
    run = sync_orders()
    assert (run.outcome, run.end_reason, run.pages, run.seen) == (
        SyncRun.Outcome.SUCCEEDED,
        "last_page",
        1,
        0,
    )
    assert Order.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_oversized_page_fails_the_run_and_nothing_of_it_is_stored(mocked, sleeps):
    mocked.post(URL, json=page(1, 3, range(0, 3)))
    # Page 2 holds four records for a page size of 3; read again, it stays so.
    for _ in range(4):
        mocked.post(URL, json=page(2, 4, range(3, 7)))
    with pytest.raises(InvalidResponse) as caught:
        sync_orders()
    assert caught.value.message == (
        "orders page 2: POST /orders/page answered page 2 with 4 records, more than the "
        "requested page_size 3; the page is refused and nothing of it is stored"
    )
    assert len(sleeps) == 3  # an invalid page answer is read again, MAX_RETRIES times
    assert sorted(Order.objects.values_list("id", flat=True)) == [order(n)["id"] for n in range(3)]
    assert not Customer.objects.filter(id__in=[order(n)["customer"]["id"] for n in range(3, 7)])
    run = SyncRun.objects.get()
    assert (run.outcome, run.pages, run.seen) == (SyncRun.Outcome.FAILED, 1, 3)
    assert caught.value.message in run.error


@pytest.mark.django_db(transaction=True)
def test_a_size_that_is_neither_reading_fails_the_run_naming_it(mocked, sleeps):
    for _ in range(4):
        mocked.post(URL, json=page(1, 2, range(0, 1)))
    with pytest.raises(InvalidResponse) as caught:
        sync_orders()
    assert caught.value.message == (
        "orders page 1: POST /orders/page answered page 1 with page.size 2: expected the "
        "requested page_size 3 or the number of records returned (1)"
    )
    assert Order.objects.count() == 0
    assert SyncRun.objects.get().outcome == SyncRun.Outcome.FAILED
