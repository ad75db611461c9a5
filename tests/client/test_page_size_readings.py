"""``page.size`` read both ways: the spec's echo of ``page_size`` and the SDK's record count.

The records' count is the truth the walk stops on; a ``size`` that is neither reading, and a
page holding more records than asked for, are refused with a message naming what is wrong.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_orders.client.paging import iter_pages
from django_orders.exceptions import InvalidResponse
from django_orders.services import check_api
from tests.fixtures.http import BASE, KEY, assert_key_absent

from .conftest import ok, page_of

READINGS = ["echo", "count"]


def reading_page(reading: str, number: int, page_size: int, count: int) -> tuple:
    """A page of ``count`` records whose ``size`` follows ``reading``."""
    return page_of(number, page_size if reading == "echo" else count, count)


def records_page(number: int, size: object, count: int) -> tuple:
    return page_of(number, size, count)  # type: ignore[arg-type]


@pytest.mark.parametrize("reading", READINGS)
def test_a_short_last_page_ends_the_walk_under_both_readings(api, make_client, reading):
    api.script(
        "/orders/page", *[reading_page(reading, n, 5, c) for n, c in ((1, 5), (2, 5), (3, 2))]
    )
    walk = iter_pages(make_client(), "orders", page_size=5)
    pages = list(walk)
    assert [len(p.records) for p in pages] == [5, 5, 2]
    assert [p.size for p in pages] == [5, 5, 5]  # the requested size, whatever the answer said
    assert walk.end_reason == "last_page" and walk.pages_read == 3
    assert [s.json for s in api.sent] == [{"page_number": n, "page_size": 5} for n in (1, 2, 3)]


@pytest.mark.parametrize("reading", READINGS)
def test_an_exact_multiple_ends_on_the_empty_page_under_both_readings(api, make_client, reading):
    api.script(
        "/orders/page", *[reading_page(reading, n, 5, c) for n, c in ((1, 5), (2, 5), (3, 0))]
    )
    walk = iter_pages(make_client(), "orders", page_size=5)
    assert [len(p.records) for p in walk] == [5, 5, 0]
    assert walk.end_reason == "last_page" and len(api.sent) == 3


@pytest.mark.parametrize("reading", READINGS)
def test_an_empty_account_is_one_empty_page(api, make_client, reading):
    api.script("/orders/page", reading_page(reading, 1, 5, 0))
    walk = iter_pages(make_client(), "orders", page_size=5)
    (page,) = list(walk)
    assert page.records == [] and page.is_last
    assert walk.end_reason == "last_page" and len(api.sent) == 1


@pytest.mark.parametrize(
    ("size", "count", "shown"),
    [(3, 2, "3"), (4, 5, "4"), (0, 5, "0"), (6, 2, "6"), ("5", 5, "'5'"), (None, 2, "None")],
)
def test_a_size_that_is_neither_reading_names_page_expected_and_got(
    api, make_client, size, count, shown
):
    api.script("/orders/page", records_page(2, size, count))
    with pytest.raises(InvalidResponse) as caught:
        make_client(max_retries=0).fetch_page("orders", 2, 5)
    assert caught.value.message == (
        f"POST /orders/page answered page 2 with page.size {shown}: expected the requested "
        f"page_size 5 or the number of records returned ({count})"
    )
    assert caught.value.status_code == 200 and caught.value.request_id == "req_p2"


def test_a_boolean_size_is_not_a_count(api, make_client):
    api.script("/orders/page", records_page(1, True, 1))
    with pytest.raises(InvalidResponse, match=r"page\.size True"):
        make_client(max_retries=0).fetch_page("orders", 1, 5)


def test_a_page_without_size_is_read_by_its_count(api, make_client):
    api.script("/orders/page", ok({"page": {"number": 1, "orders": [{"id": "or_1"}]}}))
    page = make_client().fetch_page("orders", 1, 5)
    assert len(page.records) == 1 and page.is_last


@pytest.mark.parametrize("size", [5, 6, None])
def test_a_page_with_more_records_than_asked_for_is_refused(api, make_client, size):
    body = {"page": {"number": 1, "orders": [{"id": f"or_{i}"} for i in range(6)]}}
    if size is not None:
        body["page"]["size"] = size
    api.script("/orders/page", ok(body, request_id="req_big"))
    walk = iter_pages(make_client(max_retries=0), "orders", page_size=5)
    received = []
    with pytest.raises(InvalidResponse) as caught:
        received.extend(walk)
    assert received == []
    assert caught.value.message == (
        "POST /orders/page answered page 1 with 6 records, more than the requested page_size 5; "
        "the page is refused and nothing of it is stored"
    )
    assert caught.value.request_id == "req_big"
    assert walk.end_reason is None


# --- check_orders_api --------------------------------------------------------------------------


@pytest.fixture
def configured(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE, "MAX_RETRIES": 3}
    return settings


@pytest.mark.parametrize(("reading", "size"), [("echo", 1), ("count", 0)])
def test_check_api_on_an_empty_account_succeeds_under_both_readings(api, configured, reading, size):
    api.script("/orders/page", page_of(1, size, 0))
    result = check_api()
    assert result.ok, result.error
    assert (result.status_code, result.request_id, result.record_returned) == (200, "req_p1", False)
    assert len(api.sent) == 1

    api.script("/orders/page", page_of(1, size, 0))
    out = io.StringIO()
    call_command("check_orders_api", stdout=out, stderr=io.StringIO())
    assert "Record returned: no" in out.getvalue() and "OK:" in out.getvalue()
    assert_key_absent(out.getvalue(), "command output")


def test_check_api_refuses_a_size_that_is_neither_reading(api, configured):
    api.script("/orders/page", page_of(1, 7, 0))
    with pytest.raises(CommandError) as caught:
        call_command("check_orders_api", stdout=io.StringIO(), stderr=io.StringIO())
    assert "page 1 with page.size 7: expected the requested page_size 1" in str(caught.value)
